"""Thread (session) ids: what the edges accept, and the file names derived from them.

An id typed by a user or read from a file is checked at the edge (CLI, REPL, import,
server) against :data:`THREAD_ID_PATTERN`: 1-128 characters, letters, digits, ``.``,
``_`` and ``-``, starting with a letter or digit. Ids agentgraph makes itself (uuid4
hex) always match.

Folders named after a session (artifacts, undo snapshots, isolated workspaces) are
built by :func:`session_path` only. A valid id is its own folder name, so existing
sessions keep their folders; any other string (a legacy id, or one that reached the
code without passing an edge) becomes ``_<sanitized prefix>-<hash>``, a single path
component that cannot start like a valid id, so it never collides with one and never
leaves its parent folder.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from agentgraph.errors import ConfigError

THREAD_ID_MAX_CHARS = 128
THREAD_ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}"
THREAD_ID_RULE = (
    f"1-{THREAD_ID_MAX_CHARS} characters: letters, digits, '.', '_' or '-', "
    "starting with a letter or digit"
)
_THREAD_ID_RE = re.compile(THREAD_ID_PATTERN)
_UNSAFE_CHARS_RE = re.compile(r"[^A-Za-z0-9._-]+")
# A derived name keeps this much of the id (readable in `ls`) plus a hash (unique).
SAFE_NAME_PREFIX_CHARS = 40
SAFE_NAME_HASH_CHARS = 16
# How much of a refused id is quoted back in the error line.
SHOWN_ID_CHARS = 40


class InvalidThreadId(ConfigError):
    """A thread id outside the documented character set or length (exit status 2)."""


def is_valid_thread_id(value: object) -> bool:
    """Whether ``value`` is a string matching :data:`THREAD_ID_PATTERN`."""
    return isinstance(value, str) and _THREAD_ID_RE.fullmatch(value) is not None


def _shown(value: str) -> str:
    cut = value[:SHOWN_ID_CHARS] + ("…" if len(value) > SHOWN_ID_CHARS else "")
    return ascii(cut)  # escapes NUL, newlines and other control or non-ASCII characters


def check_thread_id(value: str, what: str = "thread id") -> str:
    """Return ``value`` if it is a valid thread id (or id prefix).

    Args:
        value: The id as the user gave it.
        what: How the value is named in the error (``"--thread"``, ``"session id"``…).

    Returns:
        ``value`` unchanged.

    Raises:
        InvalidThreadId: one line naming the rule.
    """
    if not is_valid_thread_id(value):
        raise InvalidThreadId(f"invalid {what} {_shown(value)}: use {THREAD_ID_RULE}")
    return value


def safe_name(thread_id: str) -> str:
    """A single, safe path component for ``thread_id`` (the id itself when valid)."""
    if is_valid_thread_id(thread_id):
        return thread_id
    digest = hashlib.sha256(thread_id.encode("utf-8", "surrogatepass")).hexdigest()
    prefix = _UNSAFE_CHARS_RE.sub("_", thread_id)[:SAFE_NAME_PREFIX_CHARS]
    # The leading "_" keeps derived names apart from valid ids (which start with an
    # alphanumeric) and from "." / "..".
    return f"_{prefix}-{digest[:SAFE_NAME_HASH_CHARS]}"


def session_path(home: Path, kind: str, thread_id: str) -> Path:
    """``home/<kind>/<safe_name(thread_id)>``: the only way to name a session folder.

    Args:
        home: ``AGENTGRAPH_HOME``.
        kind: The folder holding one entry per session (``artifacts``, ``snapshots``,
            ``workspaces``); a constant of agentgraph's, never user input.
        thread_id: Any string.

    Returns:
        A path directly inside ``home/<kind>``.
    """
    return Path(home) / kind / safe_name(thread_id)
