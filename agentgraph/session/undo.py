"""Undo: restore the workspace files a turn changed (Codex's ghost snapshots).

Before each turn the workspace is scanned (path → size, mtime, sha256) and every
file's bytes are kept in a content-addressed store under
``AGENTGRAPH_HOME/snapshots/<thread_id>/objects`` (deduplicated by hash; a file
whose size and mtime did not change since the previous scan is not re-read).
After the turn a second scan gives the files the turn created, changed and
deleted; they are recorded in ``turns.json``. ``/undo`` restores the bytes of the
last turn's files exactly (created files are removed, deleted ones restored);
``/undo N`` the last N turns, newest first.

Nothing of this is sent to the model or stored in the graph state, so it survives
compaction untouched. Works without git; never looks inside ``.git``; files over
``UNDO_MAX_FILE_BYTES`` and directories like ``node_modules`` are ignored (a file
over the limit before a turn is never removed or restored by undo).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage

from agentgraph.capabilities.tools.workspace_scan import walk_files
from agentgraph.persistence.thread_ids import session_path
from agentgraph.runtime.history.kinds import AGENTGRAPH_KEY, UNDO_NOTE_KIND

UNDO_MAX_FILE_BYTES = 2 * 1024 * 1024
UNDO_MAX_FILES = 20_000
UNDO_MAX_TURNS_KEPT = 50
# Hash of a file seen but not stored (over the size limit): it can be neither restored
# nor treated as created by the turn.
UNSTORED = ""
TURNS_FILE = "turns.json"
OBJECTS_DIR = "objects"
HASH_CHUNK_BYTES = 1024 * 1024
# Paths named per kind (restored, removed) in the note the model gets after an undo.
UNDO_NOTE_PATHS_MAX = 20


@dataclass(frozen=True)
class FileState:
    """One file as scanned: size, mtime (ns) and content hash."""

    size: int
    mtime_ns: int
    sha256: str


Scan = dict[str, FileState]


@dataclass
class TurnChanges:
    """Files one turn changed: relative path → hash before (None: did not exist)."""

    at: float
    before: dict[str, str | None] = field(default_factory=dict)
    truncated: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"at": self.at, "before": self.before, "truncated": self.truncated}


@dataclass
class UndoResult:
    """What an undo did."""

    turns: int
    restored: list[str]
    removed: list[str]
    failed: list[str]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(HASH_CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


class UndoStore:
    """The snapshots and per-turn change records of one session.

    Args:
        folder: ``AGENTGRAPH_HOME/snapshots/<thread_id>``.
        max_file_bytes: Larger files are not snapshotted (nor restored).
        max_files: At most this many files are scanned per turn.
    """

    def __init__(
        self,
        folder: Path,
        *,
        max_file_bytes: int = UNDO_MAX_FILE_BYTES,
        max_files: int = UNDO_MAX_FILES,
    ) -> None:
        self.folder = folder
        self.max_file_bytes = max_file_bytes
        self.max_files = max_files

    # -- scanning -----------------------------------------------------------------

    def _store(self, path: Path, digest: str) -> None:
        target = self.folder / OBJECTS_DIR / digest[:2] / digest
        if target.exists():
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".tmp")
        shutil.copyfile(path, tmp)
        # The file may have changed between hashing and copying: keep only a true copy.
        if _sha256(tmp) == digest:
            os.replace(tmp, target)
        else:
            tmp.unlink(missing_ok=True)

    def snapshot(self, workspace: Path, previous: Scan | None = None) -> Scan:
        """Scan ``workspace`` and store the content of every (small enough) file.

        Args:
            workspace: The workspace root.
            previous: The last scan; files whose size and mtime match are not re-read.
        """
        files, _truncated = walk_files(workspace, self.max_files)
        scan: Scan = {}
        for rel, st in files:
            if st.st_size > self.max_file_bytes:
                scan[rel] = FileState(st.st_size, st.st_mtime_ns, UNSTORED)
                continue
            old = (previous or {}).get(rel)
            if old is not None and old.size == st.st_size and old.mtime_ns == st.st_mtime_ns:
                scan[rel] = old
                continue
            path = workspace / rel
            try:
                digest = _sha256(path)
                self._store(path, digest)
            except OSError:
                continue
            scan[rel] = FileState(st.st_size, st.st_mtime_ns, digest)
        return scan

    # -- recording ----------------------------------------------------------------

    def _load_turns(self) -> list[TurnChanges]:
        try:
            data = json.loads((self.folder / TURNS_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        return [
            TurnChanges(
                float(t.get("at", 0)), dict(t.get("before") or {}), bool(t.get("truncated"))
            )
            for t in data
            if isinstance(t, dict)
        ]

    def _save_turns(self, turns: list[TurnChanges]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        data = json.dumps([t.to_json() for t in turns[-UNDO_MAX_TURNS_KEPT:]])
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".turns-")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(data)
        os.replace(tmp, self.folder / TURNS_FILE)

    def record_turn(self, workspace: Path, before: Scan) -> tuple[TurnChanges | None, Scan]:
        """Compare the workspace with ``before``; record what changed.

        Returns:
            The recorded changes (None when nothing changed) and the new scan (pass
            it as ``previous`` to the next snapshot).
        """
        after = self.snapshot(workspace, previous=before)
        # A scan cut at max_files may have missed files that existed: never call those
        # "created" (undo would delete them).
        before_complete = len(before) < self.max_files
        changed: dict[str, str | None] = {}
        for rel, state in after.items():
            old = before.get(rel)
            if old is None:
                if before_complete:
                    changed[rel] = None
            elif old.sha256 != state.sha256 and old.sha256 != UNSTORED:
                changed[rel] = old.sha256
        for rel, old in before.items():
            if rel not in after and old.sha256 != UNSTORED and not (workspace / rel).exists():
                changed[rel] = old.sha256
        if not changed:
            return None, after
        turn = TurnChanges(at=time.time(), before=changed)
        self._save_turns([*self._load_turns(), turn])
        return turn, after

    def turns(self) -> list[TurnChanges]:
        """Recorded turns that changed files, oldest first."""
        return self._load_turns()

    # -- restoring ----------------------------------------------------------------

    def undo(self, workspace: Path, count: int = 1) -> UndoResult:
        """Restore the files changed by the last ``count`` recorded turns."""
        turns = self._load_turns()
        count = max(0, min(count, len(turns)))
        undone = turns[len(turns) - count :]
        restored: list[str] = []
        removed: list[str] = []
        failed: list[str] = []
        root = workspace.resolve()
        # The state before the oldest undone turn that touched a path is the one to
        # restore: the first record of each path, oldest turn first.
        target_state: dict[str, str | None] = {}
        for turn in undone:
            for rel, digest in turn.before.items():
                target_state.setdefault(rel, digest)
        for rel, digest in sorted(target_state.items()):
            target = (root / rel).resolve()
            if root not in target.parents or ".git" in Path(rel).parts:
                failed.append(rel)
                continue
            try:
                if digest is None:
                    if target.is_file() or target.is_symlink():
                        target.unlink()
                    removed.append(rel)
                    continue
                blob = self.folder / OBJECTS_DIR / digest[:2] / digest
                target.parent.mkdir(parents=True, exist_ok=True)
                tmp = target.with_name(f".{target.name}.agentgraph-undo")
                shutil.copyfile(blob, tmp)
                os.replace(tmp, target)
                restored.append(rel)
            except OSError:
                failed.append(rel)
        self._save_turns(turns[: len(turns) - count])
        return UndoResult(turns=count, restored=restored, removed=removed, failed=failed)


def snapshots_dir(home: Path, thread_id: str) -> Path:
    """``AGENTGRAPH_HOME/snapshots/<thread_id>`` (see :func:`session_path`)."""
    return session_path(home, "snapshots", thread_id)


def undo_note(result: UndoResult) -> HumanMessage | None:
    """What the model is told after an undo: which files are back as they were.

    Without it the model still believes its own edits are on disk (its history says
    so) and works from files that no longer exist or no longer hold what it wrote.

    Args:
        result: What :meth:`UndoStore.undo` did.

    Returns:
        A user-role note (kind ``undo_note``, not a request), or None when no file
        changed.
    """
    if not result.restored and not result.removed:
        return None
    lines = [
        f"[The user undid the file changes of the last {result.turns} turn(s). The files "
        "below are as they were before those turns; read them again before relying on "
        "what those turns wrote.]"
    ]
    for label, paths in (("restored", result.restored), ("removed", result.removed)):
        shown = ", ".join(paths[:UNDO_NOTE_PATHS_MAX])
        more = len(paths) - UNDO_NOTE_PATHS_MAX
        if paths:
            lines.append(f"{label}: {shown}" + (f" and {more} more" if more > 0 else ""))
    if result.failed:
        lines.append("could not be restored: " + ", ".join(result.failed[:UNDO_NOTE_PATHS_MAX]))
    # The paths, whole, for the progress ledger (context/ledger.py): the files it lists
    # as changed are back as they were.
    undone = [*result.restored, *result.removed]
    return HumanMessage(
        content="\n".join(lines),
        id=f"undo-{uuid.uuid4().hex}",
        additional_kwargs={AGENTGRAPH_KEY: {"kind": UNDO_NOTE_KIND, "undone": undone}},
    )
