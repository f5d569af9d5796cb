"""Unified diffs of the files the agent changes: per edit, per turn, per session.

Each ``write_file`` / ``edit_file`` call sends a ``diff`` event on LangGraph's custom
stream (:func:`diff_event`), which the REPL prints coloured and ``run --json`` /
``--output-format stream-json`` carry. The diff is deliberately not a
``ToolMessage.artifact``: an artifact is stored in every checkpoint of the session,
and the workspace's bytes before each turn are already kept by the undo snapshots
(``undo.py``), from which ``/diff`` recomputes any turn's or the whole session's
changes. Nor is it in the tool result: the model wrote the change and needs only the
one-line confirmation, not the diff back in its context.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentgraph.session.undo import OBJECTS_DIR, UNSTORED, UndoStore

# Above this many bytes (old + new) no diff is computed: difflib is quadratic at worst.
DIFF_MAX_INPUT_BYTES = 2 * 1024 * 1024
# At most this many diff lines travel in one event (the REPL folds far fewer).
DIFF_EVENT_MAX_LINES = 2000
DIFF_CONTEXT_LINES = 3


@dataclass(frozen=True)
class FileDiff:
    """The change of one file.

    Attributes:
        path: Workspace-relative path.
        diff: Unified diff text (empty when not computed; see ``note``).
        added: Lines added.
        removed: Lines removed.
        note: Why there is no line diff (binary, too large), else "".
    """

    path: str
    diff: str
    added: int
    removed: int
    note: str = ""


def _decode(data: bytes | None) -> str | None:
    if data is None:
        return ""
    if b"\x00" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def unified(path: str, old: bytes | str | None, new: bytes | str | None) -> FileDiff:
    """Diff two versions of ``path`` (None: the file did not exist).

    Args:
        path: The path shown in the ``---``/``+++`` headers.
        old: Content before (bytes or text), None when the file was created.
        new: Content after, None when the file was deleted.
    """
    sizes = sum(len(v) for v in (old, new) if v is not None)
    if sizes > DIFF_MAX_INPUT_BYTES:
        return FileDiff(path, "", 0, 0, "too large to diff")
    before = old if isinstance(old, str) else _decode(old)
    after = new if isinstance(new, str) else _decode(new)
    if before is None or after is None:
        return FileDiff(path, "", 0, 0, "binary file changed")
    lines = list(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile="/dev/null" if old is None else f"a/{path}",
            tofile="/dev/null" if new is None else f"b/{path}",
            n=DIFF_CONTEXT_LINES,
        )
    )
    added = sum(1 for ln in lines if ln.startswith("+") and not ln.startswith("+++"))
    removed = sum(1 for ln in lines if ln.startswith("-") and not ln.startswith("---"))
    no_eol = "\n\\ No newline at end of file\n"
    text = "".join(ln if ln.endswith("\n") else ln + no_eol for ln in lines)
    return FileDiff(path, text, added, removed)


def diff_event(change: FileDiff, tool_call_id: str | None) -> dict[str, Any]:
    """The ``diff`` UI event for one change (see docs/events.md)."""
    lines = change.diff.splitlines(keepends=True)
    truncated = len(lines) > DIFF_EVENT_MAX_LINES
    return {
        "type": "diff",
        "tool_call_id": tool_call_id,
        "path": change.path,
        "diff": "".join(lines[:DIFF_EVENT_MAX_LINES]),
        "added": change.added,
        "removed": change.removed,
        "truncated": truncated,
        "note": change.note,
    }


def _blob(undo: UndoStore, digest: str | None) -> bytes | None:
    if digest is None or digest == UNSTORED:
        return None
    try:
        return (undo.folder / OBJECTS_DIR / digest[:2] / digest).read_bytes()
    except OSError:
        return None


def _current(workspace: Path, rel: str) -> bytes | None:
    try:
        return (workspace / rel).read_bytes()
    except OSError:
        return None


def recorded_diffs(undo: UndoStore, workspace: Path, *, last_only: bool = False) -> list[FileDiff]:
    """What the session's recorded turns changed, from the undo snapshots to now.

    Each path is compared from its state before the oldest recorded turn that touched
    it (with ``last_only``: before the last turn that changed files) to its content in
    the workspace now.

    Args:
        undo: The session's undo store.
        workspace: The session workspace.
        last_only: Only the last turn that changed files.
    """
    turns = undo.turns()
    if last_only:
        turns = turns[-1:]
    before: dict[str, str | None] = {}
    for turn in turns:
        for rel, digest in turn.before.items():
            before.setdefault(rel, digest)
    out: list[FileDiff] = []
    for rel in sorted(before):
        old = _blob(undo, before[rel])
        if before[rel] is not None and old is None:
            out.append(FileDiff(rel, "", 0, 0, "content before the change not kept"))
            continue
        new = _current(workspace, rel)
        change = unified(rel, old, new)
        if change.diff or change.note:
            out.append(change)
    return out


def fold(lines: Iterable[str], max_lines: int) -> tuple[list[str], int]:
    """The first ``max_lines`` lines and how many more there are."""
    items = list(lines)
    return items[:max_lines], max(len(items) - max_lines, 0)
