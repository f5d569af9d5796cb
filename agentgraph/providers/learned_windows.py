"""Context windows learned from endpoints' overflow errors, kept across processes.

A llama.cpp server started with ``--ctx-size 4096`` serves a model agentgraph's table
maps to 32,768 tokens. The first overflow error names the real window and the process
adopts it (:meth:`~agentgraph.context.windows.Budget.adopt_window`); without this file
every new process would send an oversized request first and fail or cut outputs again.

The file (``learned_windows.json`` in ``AGENTGRAPH_HOME``) maps an endpoint and a model
to the window its error named. The endpoint is the base URL without credentials, query
or fragment: nothing secret is written. It is applied only while
``AGENTGRAPH_CONTEXT_WINDOW`` is unset (an explicit window always wins: set it after
restarting the server with a larger context) and announced at start. Written
atomically; a missing, unreadable or malformed file is an empty one, never an error.
Processes that learn at the same moment take turns (an exclusive ``flock`` on
``learned_windows.json.lock``), so none loses another's entry: a waiter waits as long as
the others keep writing, and gives up its own entry (never writes without the lock) only
when the holder has written nothing for ``LEARNED_WINDOWS_LOCK_WAIT_S``.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from agentgraph.config import SECRET_REDACT_MIN_CHARS, Settings
from agentgraph.context.windows import Budget, stated_window

__all__ = [
    "LEARNED_WINDOWS_FILE",
    "LearnedWindow",
    "apply_learned_window",
    "endpoint_key",
    "endpoint_label",
    "learned_window",
    "remember_learned_window",
]

LEARNED_WINDOWS_FILE = "learned_windows.json"
# The file is a small table; a larger one was not written by agentgraph.
LEARNED_WINDOWS_MAX_BYTES = 256 * 1024
# Oldest entries go first beyond this many endpoint/model pairs.
LEARNED_WINDOWS_MAX_ENTRIES = 200
# A learned_at later than now by more than this is not a real time (clock skew aside).
LEARNED_AT_MAX_FUTURE_S = 86_400.0
# How long a process waits for the lock while its holder writes nothing (a stopped
# process may hold it): then it keeps its window to itself rather than hold up the model
# call it runs in. Every write by a holder starts the wait again, so a queue of busy
# writers is waited out: writing without the lock would lose their entries.
LEARNED_WINDOWS_LOCK_WAIT_S = 5.0
LEARNED_WINDOWS_LOCK_POLL_S = 0.02
# The provider's own default endpoint (no OPENAI_BASE_URL).
DEFAULT_ENDPOINT = "default"
UNPARSABLE_ENDPOINT = "unparsable"
_FORMAT_VERSION = 1


@dataclass(frozen=True)
class LearnedWindow:
    """A window an endpoint's error named.

    Attributes:
        window: The window in tokens.
        learned_at: When it was learned (seconds since the epoch).
        endpoint: The endpoint key it was learned from.
    """

    window: int
    learned_at: float
    endpoint: str

    def notice(self, model: str) -> str:
        """The start-up line saying where the window comes from and how to override it.

        Args:
            model: The model name, as configured.

        Returns:
            One line.
        """
        day = time.strftime("%Y-%m-%d", time.localtime(self.learned_at))
        return (
            f"context window {self.window:,} tokens for {model!r} at {self.endpoint}, "
            f"learned from its error on {day} — AGENTGRAPH_CONTEXT_WINDOW overrides it"
        )


def endpoint_key(base_url: str | None) -> str:
    """The endpoint part of a key: scheme, host, port and path; never credentials.

    Args:
        base_url: The configured base URL (``OPENAI_BASE_URL``), or None.

    Returns:
        ``"http://127.0.0.1:8080/v1"`` for ``"http://user:pw@127.0.0.1:8080/v1/?k=s"``;
        ``"default"`` without a base URL.
    """
    if not base_url or not base_url.strip():
        return DEFAULT_ENDPOINT
    try:
        parts = urlsplit(base_url.strip())
    except ValueError:  # e.g. an unclosed IPv6 bracket: requests will fail anyway
        return UNPARSABLE_ENDPOINT
    netloc = parts.netloc.rpartition("@")[2].lower()  # credentials never reach the file
    return urlunsplit((parts.scheme.lower(), netloc, parts.path.rstrip("/"), "", ""))


def endpoint_label(settings: Settings, model: str) -> str:
    """The endpoint requests for ``model`` go to, as the file and notices name it.

    Args:
        settings: Supplies the base URL and the secrets kept out of the label.
        model: The model name.

    Returns:
        Scheme, host, port and path, without credentials or any configured secret.
    """
    from agentgraph.providers.model import endpoint_url  # the model module imports this one's users

    endpoint = endpoint_key(endpoint_url(settings, model))
    # A proxy may carry its key in the path: no configured secret is written or shown.
    # (A short one, a hosted endpoint's, is left: replaced, it could garble the host.)
    for secret in settings.secret_values():
        if len(secret) >= SECRET_REDACT_MIN_CHARS:
            endpoint = endpoint.replace(secret, "***")
    return endpoint


def _path(settings: Settings) -> Path:
    return settings.home / LEARNED_WINDOWS_FILE


def _valid_time(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0 <= value <= time.time() + LEARNED_AT_MAX_FUTURE_S
    )


Entries = dict[str, dict[str, dict[str, Any]]]  # endpoint -> model -> entry


def _read(path: Path) -> Entries:
    """The file's valid entries; {} for anything missing, unreadable or malformed."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(LEARNED_WINDOWS_MAX_BYTES + 1)
    except OSError:
        return {}
    if len(raw) > LEARNED_WINDOWS_MAX_BYTES:
        return {}
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: a deeply nested document
        return {}
    if not isinstance(data, dict) or data.get("version") != _FORMAT_VERSION:
        return {}
    endpoints = data.get("windows")
    if not isinstance(endpoints, dict):
        return {}
    valid: Entries = {}
    for endpoint, models in endpoints.items():
        if not isinstance(endpoint, str) or not isinstance(models, dict):
            continue
        for model, entry in models.items():
            if (
                isinstance(model, str)
                and isinstance(entry, dict)
                and stated_window(entry.get("window")) is not None
                and _valid_time(entry.get("learned_at"))
            ):
                valid.setdefault(endpoint, {})[model] = {
                    "window": entry["window"],
                    "learned_at": float(entry["learned_at"]),
                }
    return valid


def _write(path: Path, entries: Entries, write_bytes: Callable[[Path, bytes], None]) -> None:
    """Replace the file atomically; a failure leaves the old one (learning is a bonus)."""
    flat = [(e, m, entry) for e, models in entries.items() for m, entry in models.items()]
    flat.sort(key=lambda item: float(item[2]["learned_at"]))
    kept: Entries = {}
    for endpoint, model, entry in flat[-LEARNED_WINDOWS_MAX_ENTRIES:]:
        kept.setdefault(endpoint, {})[model] = entry
    data = json.dumps({"version": _FORMAT_VERSION, "windows": kept}, indent=1, sort_keys=True)
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes(path, data.encode("utf-8"))
        os.chmod(path, 0o600)


def _written(path: Path) -> tuple[int, int, int, int] | None:
    """What changes whenever a holder replaces the file (a new inode, times, size)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)


@contextlib.contextmanager
def _exclusive(path: Path) -> Iterator[bool]:
    """Hold an exclusive lock beside ``path`` while the caller reads, changes and writes it.

    Waits while the lock is held, as long as its holder keeps writing ``path``; gives up
    when the holder wrote nothing for ``LEARNED_WINDOWS_LOCK_WAIT_S``.

    Yields:
        Whether the caller may write: True with the lock, or where there is no lock to
        take (no ``fcntl`` on Windows, a read-only home, a file system without locks);
        False when a holder that does not let go keeps it.
    """
    try:
        import fcntl
    except ImportError:
        yield True
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = path.with_name(path.name + ".lock").open("a")
    except OSError:
        yield True
        return
    with handle:
        written = _written(path)
        deadline = time.monotonic() + LEARNED_WINDOWS_LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                now = _written(path)
                if now != written:  # the holder wrote: it is alive, keep waiting
                    written = now
                    deadline = time.monotonic() + LEARNED_WINDOWS_LOCK_WAIT_S
                elif time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(LEARNED_WINDOWS_LOCK_POLL_S)
            except OSError:  # no locks on this file system
                yield True
                return
            else:
                break
        try:
            yield True
        finally:
            with contextlib.suppress(OSError):
                fcntl.flock(handle, fcntl.LOCK_UN)


def _update(path: Path, change: Callable[[Entries], None]) -> None:
    """Read the file, ``change`` its entries and write them back, one process at a time.

    Args:
        path: The learned-windows file.
        change: Changes the entries in place.
    """
    # Imported before the lock is taken: the file tools pull in LangChain's tool
    # machinery (seconds on a busy machine), which nothing else of this module needs.
    from agentgraph.capabilities.tools.files import atomic_write_bytes

    with _exclusive(path) as may_write:
        if not may_write:
            return
        entries = _read(path)
        change(entries)
        _write(path, entries, atomic_write_bytes)


def learned_window(settings: Settings, model: str) -> LearnedWindow | None:
    """The window learned for ``model`` at the configured endpoint, if it applies.

    Args:
        settings: Supplies the home folder, the base URL and ``context_window``.
        model: The model name requests carry.

    Returns:
        The learned window; None when none was learned or ``AGENTGRAPH_CONTEXT_WINDOW``
        is set (an explicit window wins).
    """
    if settings.context_window is not None:
        return None
    endpoint = endpoint_label(settings, model)
    entry = _read(_path(settings)).get(endpoint, {}).get(model.strip())
    if entry is None:
        return None
    return LearnedWindow(entry["window"], entry["learned_at"], endpoint)


def remember_learned_window(settings: Settings, model: str, window: int) -> None:
    """Record that the configured endpoint serves ``model`` with ``window`` tokens.

    Args:
        settings: Supplies the home folder and the base URL.
        model: The model name requests carry.
        window: The window the endpoint's error named.
    """
    if stated_window(window) is None:
        return
    endpoint = endpoint_label(settings, model)

    def learn(entries: Entries) -> None:
        entries.setdefault(endpoint, {})[model.strip()] = {
            "window": window,
            "learned_at": time.time(),
        }

    _update(_path(settings), learn)


def apply_learned_window(budget: Budget, settings: Settings, model: str) -> None:
    """Shrink ``budget`` to the window learned for ``model`` here, announcing where from.

    Args:
        budget: The model's budget (as :func:`~agentgraph.context.windows.budget_for`
            built it).
        settings: Supplies the home folder, the endpoint and ``context_window``.
        model: The model name requests carry.
    """
    learned = learned_window(settings, model)
    if learned is not None:
        budget.adopt_window(learned.window, learned.notice(model))
