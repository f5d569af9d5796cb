"""Isolated workspaces for subagents that edit: a git worktree (or a copy), merged back.

``call_subagent(task, writes=true)`` runs the subagent in a workspace of its own under
``AGENTGRAPH_HOME/worktrees/<context id>/tree`` — never inside the user's folder:

- In a git repository: a ``git worktree`` of a *snapshot* of the working tree as it is
  now (tracked files with their uncommitted changes, plus untracked files that are not
  ignored), so the subagent starts from what the caller sees, not from ``HEAD``. The
  snapshot is a commit built with a temporary index: the user's index, branches and
  working tree are not touched.
- Elsewhere: a copy of the folder (without the folders
  :data:`~agentgraph.capabilities.tools.workspace_scan.SKIPPED_DIRS` names), refused
  above :data:`COPY_MAX_BYTES` / :data:`COPY_MAX_FILES`, made a git repository of its own
  so its changes can be listed the same way.

Nothing the subagent writes is visible in the caller's workspace while it runs. When
it ends, its changes (``git add -A`` in its tree, against the snapshot) are merged into
the caller's workspace file by file, under one process-wide lock: a file the caller
(or another subagent) did not change meanwhile takes the subagent's version; one both
changed is merged three-way (``git merge-file``) and taken only when the merge is
clean. Any conflict — the same lines changed on both sides, a file deleted on one side
and changed on the other, binary files changed on both — applies *nothing* of that
subagent's changes: the result reports the conflicting files and where its patch is
kept. Conflict markers are never written into the workspace.

With ``AGENTGRAPH_EDITS=ask`` the changes are held (the tree is kept) until the model
calls ``subagent_task(task_id, action="apply")`` — a call the user approves through
the approval interrupt, shown the diff — or ``action="discard"``.

Each tree records its owner's pid in ``owner.json``; trees of processes that no longer
run (a parent killed mid-run) are removed at the next start (their partial changes kept
as a patch in the subagent's artifacts folder), held ones after
:data:`HELD_MAX_AGE_S`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentgraph.capabilities.tools.workspace_scan import SKIPPED_DIRS, foreign_writes
from agentgraph.security.git_trust import NO_MONITOR_FLAGS, git_dir_unchanged

WORKTREES_DIR = "worktrees"
TREE_DIR = "tree"
OWNER_FILE = "owner.json"
PATCH_FILE = "changes.patch"
# A folder without git is copied for an isolated subagent only up to these sizes: beyond
# them a copy per subagent costs more than it is worth, and the call is refused.
COPY_MAX_BYTES = 200 * 1024 * 1024
COPY_MAX_FILES = 20_000
# Each git command the isolation runs (snapshot, worktree add, diff) must end by then.
GIT_TIMEOUT_S = 120.0
# Held changes nobody applied or discarded are removed after this many seconds.
HELD_MAX_AGE_S = 7 * 24 * 3600.0
# Files named one by one in the summary the model reads; the rest are counted.
SUMMARY_FILES_MAX = 20
# The approval question shows at most this much of the held diff.
APPROVAL_PATCH_MAX_CHARS = 20_000

STATE_RUNNING = "running"
STATE_HELD = "held"

# Git sees no user configuration that could change its output (diff drivers, hooks,
# signing), and commits get a fixed identity.
_GIT_ENV_KEEP = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT")
_GIT_ID = {
    "GIT_AUTHOR_NAME": "agentgraph",
    "GIT_AUTHOR_EMAIL": "agentgraph@localhost",
    "GIT_COMMITTER_NAME": "agentgraph",
    "GIT_COMMITTER_EMAIL": "agentgraph@localhost",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
}
# No file-system monitor either (:data:`NO_MONITOR_FLAGS`), and no submodule work (a
# user's ``submodule.recurse`` would clone what a ``.gitmodules`` of the workspace names).
_GIT_FLAGS = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "commit.gpgsign=false",
    *NO_MONITOR_FLAGS,
    "-c",
    "submodule.recurse=false",
)

# One apply at a time in this process: two subagents ending together merge one after
# the other, so the second sees the first's result as the workspace's current text.
_APPLY_LOCK = threading.Lock()
# One ``git worktree`` command at a time in this process: git takes no lock while it
# writes a new worktree's entry under .git/worktrees, and an add that reads a sibling's
# half-written entry dies ("failed to read .git/worktrees/tree/commondir: Success"), so
# one of two subagents started together failed now and then on a loaded machine.
_WORKTREE_LOCK = threading.Lock()


class IsolationError(Exception):
    """An isolated workspace could not be made (too big, no git, git failed)."""


def _git(
    args: list[str], cwd: Path, *, env: dict[str, str] | None = None, check: bool = True
) -> subprocess.CompletedProcess[bytes]:
    base = {k: v for k, v in os.environ.items() if k in _GIT_ENV_KEEP}
    full = {**base, **_GIT_ID, **(env or {})}
    serial = _WORKTREE_LOCK if args[:1] == ["worktree"] else contextlib.nullcontext()
    try:
        with serial:
            done = subprocess.run(
                ["git", *_GIT_FLAGS, *args],
                cwd=cwd,
                env=full,
                capture_output=True,
                timeout=GIT_TIMEOUT_S,
                check=False,
            )
    except FileNotFoundError as exc:
        raise IsolationError("git is not installed") from exc
    except subprocess.TimeoutExpired as exc:
        raise IsolationError(f"git {args[0]} took over {GIT_TIMEOUT_S:g}s") from exc
    if check and done.returncode != 0:
        err = done.stderr.decode(errors="replace").strip().splitlines()
        raise IsolationError(f"git {args[0]} failed: {err[-1] if err else done.returncode}")
    return done


def _git_top(workspace: Path) -> Path | None:
    try:
        done = _git(["rev-parse", "--show-toplevel"], workspace, check=False)
    except IsolationError:
        return None
    if done.returncode != 0:
        return None
    return Path(done.stdout.decode().strip())


def _add_all(cwd: Path, env: dict[str, str] | None = None) -> None:
    """``git add -A`` but the submodules the index holds: for each, git would run another
    git in its folder with the config its ``.git`` file names — a file a command in the
    workspace may have rewritten to name a config of its own (a monitor, a filter), run
    here outside the sandbox. A submodule's recorded commit stays the index's."""
    listed = _git(["ls-files", "-s", "-z"], cwd, env=env).stdout.decode(errors="surrogateescape")
    links = [entry.split("\t", 1)[1] for entry in listed.split("\0") if entry.startswith("160000 ")]
    excluded = [f":(exclude,literal){path}" for path in links]
    _git(["add", "-A", "--", ".", *excluded] if excluded else ["add", "-A"], cwd, env=env)


def _snapshot(top: Path, scratch: Path) -> str:
    """A commit of ``top``'s working tree as it is (not ignored files), via a temp index."""
    env = {"GIT_INDEX_FILE": str(scratch / "snapshot.index")}
    head = _git(["rev-parse", "--verify", "-q", "HEAD"], top, check=False)
    parent = head.stdout.decode().strip() if head.returncode == 0 else ""
    _git(["read-tree", parent] if parent else ["read-tree", "--empty"], top, env=env)
    _add_all(top, env)
    tree = _git(["write-tree"], top, env=env).stdout.decode().strip()
    message = ["-m", "agentgraph subagent snapshot"]
    commit_args = ["commit-tree", tree, *(["-p", parent] if parent else []), *message]
    return _git(commit_args, top).stdout.decode().strip()


def _copy_size(root: Path) -> tuple[int, int]:
    total = files = 0
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]
        for name in names:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_size
            files += 1
            if files > COPY_MAX_FILES or total > COPY_MAX_BYTES:
                return total, files
    return total, files


@dataclass(frozen=True)
class FileChange:
    """One file a subagent changed: its path (relative to the root) and +/− lines."""

    path: str
    added: int
    removed: int
    status: str  # A, M, D or T (git's letters)


@dataclass
class Changes:
    """What an isolated subagent changed, and the patch that records it."""

    files: list[FileChange] = field(default_factory=list)
    patch: str = ""

    def summary(self) -> str:
        """``2 files, +5 −1: a.py (+3 −1), b.py (new, +2)``."""
        plus = sum(f.added for f in self.files)
        minus = sum(f.removed for f in self.files)
        noun = "file" if len(self.files) == 1 else "files"
        shown = []
        for f in self.files[:SUMMARY_FILES_MAX]:
            kind = {"A": "new, ", "D": "deleted, "}.get(f.status, "")
            shown.append(f"{f.path} ({kind}+{f.added} −{f.removed})")
        more = len(self.files) - SUMMARY_FILES_MAX
        tail = f", and {more} more" if more > 0 else ""
        return f"{len(self.files)} {noun}, +{plus} −{minus}: " + ", ".join(shown) + tail


def applied_record(changes: Changes, applied: list[str]) -> dict[str, Any]:
    """The ``changes`` fact of a result whose subagent changes were applied: the files
    written, and of them those it deleted (the caller's ledger lists both)."""
    gone = {c.path for c in changes.files if c.status == "D"}
    return {
        "state": "applied",
        "files": applied,
        "deleted": [path for path in applied if path in gone],
    }


@dataclass
class ApplyResult:
    """What applying a subagent's changes did."""

    applied: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)


@dataclass
class Isolation:
    """A subagent's own workspace and how to merge it back.

    Attributes:
        folder: ``AGENTGRAPH_HOME/worktrees/<context id>``.
        root: The tree's root (a git worktree of ``source_root``, or the copy).
        workspace: The subagent's workspace inside ``root`` (the caller's workspace
            may be a subfolder of its repository).
        source_root: The caller's repository root (or the copied folder).
        base: The snapshot commit the subagent started from.
        kind: ``git`` or ``copy``.
    """

    folder: Path
    root: Path
    workspace: Path
    source_root: Path
    base: str
    kind: str

    def _owner(self) -> dict[str, Any]:
        try:
            data = json.loads((self.folder / OWNER_FILE).read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def mark(self, state: str, **extra: Any) -> None:
        """Record the tree's state (``running`` or ``held``) in ``owner.json``."""
        data = {**self._owner(), "state": state, "pid": os.getpid(), "at": time.time(), **extra}
        (self.folder / OWNER_FILE).write_text(json.dumps(data))

    @property
    def state(self) -> str:
        """``running`` or ``held``."""
        return str(self._owner().get("state") or STATE_RUNNING)

    @property
    def parent_thread(self) -> str:
        """The caller's session thread."""
        return str(self._owner().get("parent_thread") or "")

    @property
    def thread_id(self) -> str:
        """The subagent's session thread."""
        return str(self._owner().get("thread_id") or "")

    def changes(self) -> Changes:
        """The subagent's changes against its snapshot (staged in its own index)."""
        _add_all(self.root)
        numstat = _git(
            ["diff", "--cached", "--no-renames", "--numstat", "-z", self.base], self.root
        ).stdout.decode(errors="replace")
        status = _git(
            ["diff", "--cached", "--no-renames", "--name-status", "-z", self.base], self.root
        ).stdout.decode(errors="replace")
        letters: dict[str, str] = {}
        parts = status.split("\0")
        for i in range(0, len(parts) - 1, 2):
            letters[parts[i + 1]] = parts[i][:1]
        files: list[FileChange] = []
        for entry in numstat.split("\0"):
            fields = entry.split("\t", 2)
            if len(fields) != 3:
                continue
            added, removed, path = fields
            files.append(
                FileChange(
                    path,
                    int(added) if added.isdigit() else 0,
                    int(removed) if removed.isdigit() else 0,
                    letters.get(path, "M"),
                )
            )
        if not files:
            return Changes()
        patch = _git(["diff", "--cached", "--no-renames", "--binary", self.base], self.root)
        return Changes(files, patch.stdout.decode(errors="replace"))

    def _base_bytes(self, path: str) -> bytes | None:
        done = _git(["cat-file", "blob", f"{self.base}:{path}"], self.root, check=False)
        return done.stdout if done.returncode == 0 else None

    def apply(self, changes: Changes) -> ApplyResult:
        """Merge ``changes`` into the caller's workspace, all files or none.

        Returns:
            The files written, or (nothing written) the files that conflict.
        """
        with _APPLY_LOCK:
            planned: list[tuple[Path, bytes | None, int]] = []
            result = ApplyResult()
            top = self.source_root.resolve()
            for change in changes.files:
                target = top / change.path
                mine = self.root / change.path
                after = mine.read_bytes() if mine.is_file() and not mine.is_symlink() else None
                if after is None and (mine.is_symlink() or mine.exists()):
                    result.conflicts.append(f"{change.path} (not a regular file)")
                    continue
                if target.is_symlink() or not target.resolve().is_relative_to(top):
                    result.conflicts.append(f"{change.path} (a symlink in the workspace)")
                    continue
                current = target.read_bytes() if target.is_file() else None
                merged = _merge(current, self._base_bytes(change.path), after)
                if isinstance(merged, str):
                    result.conflicts.append(f"{change.path} ({merged})")
                    continue
                mode = mine.stat().st_mode & 0o777 if after is not None else 0
                planned.append((target, merged, mode))
            if result.conflicts:
                return result
            # A background subagent applies while its caller's command may run: that
            # step's scan must not take these files for the command's.
            with foreign_writes(target for target, _data, _mode in planned):
                for target, data, mode in planned:
                    _write(target, data, mode)
                    result.applied.append(target.relative_to(top).as_posix())
            return result

    def remove(self) -> None:
        """Delete the tree (and, for a git worktree, its registration in the repository)."""
        if self.kind == "git":
            _git(["worktree", "remove", "--force", str(self.root)], self.source_root, check=False)
            _git(["worktree", "prune"], self.source_root, check=False)
        shutil.rmtree(self.folder, ignore_errors=True)


def _merge(current: bytes | None, base: bytes | None, after: bytes | None) -> bytes | str | None:
    """The file's new bytes (None: deleted), or why it conflicts."""
    if current in (base, after):
        return after
    if current is None or base is None or after is None:
        return "added or deleted on one side, changed on the other"
    if b"\0" in current or b"\0" in base or b"\0" in after:
        return "binary, changed on both sides"
    with tempfile.TemporaryDirectory(prefix="agentgraph-merge-") as tmp:
        paths = []
        for name, data in (("current", current), ("base", base), ("theirs", after)):
            path = Path(tmp) / name
            path.write_bytes(data)
            paths.append(str(path))
        done = _git(["merge-file", "-p", "--quiet", *paths], Path(tmp), check=False)
    if done.returncode != 0:
        return "the same lines were changed in the workspace meanwhile"
    return done.stdout


def _write(target: Path, data: bytes | None, mode: int) -> None:
    if data is None:
        with contextlib.suppress(FileNotFoundError):
            target.unlink()
        return
    from agentgraph.capabilities.tools.files import (
        atomic_write_bytes,  # the file tools load LangChain's
    )

    target.parent.mkdir(parents=True, exist_ok=True)
    existed = target.exists()
    atomic_write_bytes(target, data)  # an existing file keeps its mode
    if not existed:
        os.chmod(target, mode or 0o644)  # a new file gets the one it had in the tree


def worktrees_dir(home: Path) -> Path:
    """``AGENTGRAPH_HOME/worktrees``."""
    return home / WORKTREES_DIR


def create(home: Path, context_id: str, workspace: str, parent_thread: str) -> Isolation:
    """Make the isolated workspace of subagent ``context_id`` for the caller's ``workspace``.

    Raises:
        IsolationError: The folder is too big to copy, git is missing or failed.
    """
    source = Path(workspace).resolve()
    folder = worktrees_dir(home) / context_id
    if source == folder or folder.resolve().is_relative_to(source):
        raise IsolationError("AGENTGRAPH_HOME is inside the workspace; no isolated copy")
    folder.mkdir(parents=True, exist_ok=False)
    root = folder / TREE_DIR
    try:
        (folder / OWNER_FILE).write_text(
            json.dumps({"pid": os.getpid(), "state": STATE_RUNNING, "at": time.time()})
        )
        # A repository a command made since the session started is the command's: its
        # config's programs would run in the snapshot, here, outside the sandbox.
        top = _git_top(source) if git_dir_unchanged(source) else None
        if top is not None:
            base = _snapshot(top, folder)
            _git(["worktree", "add", "--detach", "-q", str(root), base], top)
            iso = Isolation(folder, root, root / source.relative_to(top), top, base, "git")
        else:
            size, files = _copy_size(source)
            if files > COPY_MAX_FILES or size > COPY_MAX_BYTES:
                raise IsolationError(
                    f"the workspace is too big to copy for an isolated subagent (over "
                    f"{COPY_MAX_FILES} files or {COPY_MAX_BYTES // (1024 * 1024)} MB, and "
                    "not a git repository)"
                )
            shutil.copytree(
                source, root, symlinks=True, ignore=shutil.ignore_patterns(*SKIPPED_DIRS)
            )
            _git(["init", "-q"], root)
            exclude = root / ".git" / "info" / "exclude"
            exclude.parent.mkdir(parents=True, exist_ok=True)
            exclude.write_text("".join(f"{name}/\n" for name in sorted(SKIPPED_DIRS)))
            _git(["add", "-A"], root)
            tree = _git(["write-tree"], root).stdout.decode().strip()
            base = _git(["commit-tree", tree, "-m", "agentgraph copy"], root).stdout.decode()
            iso = Isolation(folder, root, root, source, base.strip(), "copy")
        iso.mark(
            STATE_RUNNING,
            kind=iso.kind,
            source_root=str(iso.source_root),
            base=iso.base,
            subdir=str(iso.workspace.relative_to(root)),
            parent_thread=parent_thread,
        )
        return iso
    except BaseException:
        if (top := _git_top(source)) is not None:
            _git(["worktree", "prune"], top, check=False)
        shutil.rmtree(folder, ignore_errors=True)
        raise


def load(home: Path, context_id: str) -> Isolation | None:
    """The isolated workspace ``context_id`` left (None: there is none)."""
    folder = worktrees_dir(home) / context_id
    try:
        data = json.loads((folder / OWNER_FILE).read_text())
        root = folder / TREE_DIR
        return Isolation(
            folder,
            root,
            root / str(data.get("subdir") or "."),
            Path(str(data["source_root"])),
            str(data["base"]),
            str(data["kind"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale(home: Path, patch_dir: Callable[[str], Path]) -> list[str]:
    """Remove trees whose process is gone (partial changes kept as a patch) or long held.

    Args:
        home: ``AGENTGRAPH_HOME``.
        patch_dir: Maps a subagent's thread id to where its patch is kept.

    Returns:
        The context ids removed.
    """
    removed: list[str] = []
    base = worktrees_dir(home)
    if not base.is_dir():
        return removed
    now = time.time()
    for folder in sorted(base.iterdir()):
        try:
            owner = json.loads((folder / OWNER_FILE).read_text())
            pid, state, at = int(owner["pid"]), str(owner["state"]), float(owner["at"])
        except (OSError, ValueError, KeyError, TypeError):
            owner, pid, state, at = {}, -1, STATE_RUNNING, 0.0
        if state == STATE_HELD and now - at < HELD_MAX_AGE_S:
            continue
        if state != STATE_HELD and pid > 0 and _alive(pid):
            continue
        iso = load(home, folder.name)
        if iso is not None:
            with contextlib.suppress(Exception):  # the patch is a courtesy
                changes = iso.changes()
                if changes.files:
                    keep = patch_dir(str(owner.get("thread_id") or folder.name))
                    keep.mkdir(parents=True, exist_ok=True)
                    (keep / PATCH_FILE).write_text(changes.patch)
            iso.remove()
        else:
            shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder.name)
    return removed


def approval_text(home: Path, task_id: str) -> str | None:
    """The held diff of ``task_id``, bounded, for the approval question (None: none held)."""
    iso = load(home, task_id.strip())
    if iso is None or iso.state != STATE_HELD:
        return None
    try:
        patch = iso.changes().patch
    except IsolationError:
        return None
    if len(patch) > APPROVAL_PATCH_MAX_CHARS:
        patch = patch[:APPROVAL_PATCH_MAX_CHARS] + "… (diff cut)\n"
    return patch
