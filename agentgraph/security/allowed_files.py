"""Files the user allowed as they are: a workspace file that may act for the user.

A repository can ship files that would run commands (``.agentgraph/mcp.json``) or
choose the user's settings (``.env``). They take effect only once the user has allowed
that exact content: its sha256 is recorded under ``AGENTGRAPH_HOME`` in a JSON object
``{path: digest}``, and any change to the file asks again (Claude Code asks the same for
a project's ``.mcp.json``).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path


def file_digest(path: Path) -> str | None:
    """The sha256 of the file's bytes, or None when it cannot be read."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def allowed_digests(record: Path) -> dict[str, str]:
    """The record's ``{path: digest}`` entries ({} when missing or unreadable)."""
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def is_allowed(path: Path, record: Path, key: str) -> bool:
    """Whether ``path``, as it is now, was allowed under ``key`` in ``record``."""
    digest = file_digest(path)
    return digest is not None and allowed_digests(record).get(key) == digest


def allow(path: Path, record: Path, key: str) -> bool:
    """Record ``path``, as it is now, as allowed under ``key``.

    Returns:
        False when the file cannot be read (nothing recorded).

    Raises:
        OSError: The record cannot be written.
    """
    digest = file_digest(path)
    if digest is None:
        return False
    entries = allowed_digests(record)
    entries[key] = digest
    record.parent.mkdir(parents=True, exist_ok=True)
    tmp = record.with_name(record.name + ".tmp")
    tmp.write_text(json.dumps(entries, indent=1), encoding="utf-8")
    tmp.replace(record)
    return True
