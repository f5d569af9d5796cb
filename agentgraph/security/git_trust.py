"""Which repository the agent's own git commands trust: the one a workspace had first.

The sandbox keeps a workspace's ``.git`` read-only (``agentgraph/capabilities/tools/
sandbox.py``), but a command may make a repository where there was none — ``git init``
in a workspace outside any repository, or in one that is a subfolder of the user's —
with a config naming programs of its own (a filter, a hook, a monitor). Git run on it
outside the sandbox runs them: a subagent's snapshot (``git add -A`` runs every clean
filter on the host) or ``/commit`` (its hooks, with the agent's environment). So the
first time this process works in a workspace (:func:`remember_git_dir`, before its first
step) it records the git dir git would use there, and the agent's own git goes on only
while that is still the one (:func:`git_dir_unchanged`): a subagent's tree is then a
plain copy, and ``/commit`` says to commit from the user's own shell.

Found as git finds it, without running git: the nearest ``.git`` at or above the
workspace, a folder or a file naming one (``gitdir: …``), by its real path.
"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

__all__ = [
    "GITDIR_FILE_MAX_BYTES",
    "NO_MONITOR_FLAGS",
    "common_git_dir",
    "git_dir",
    "git_dir_unchanged",
    "named_git_dir",
    "remember_git_dir",
    "repository",
]

# Every git command the agent runs itself: the file-system monitor is a program a
# repository's config names, and a repository a sandboxed command made is the command's.
NO_MONITOR_FLAGS = ("-c", "core.fsmonitor=false")

# A ``.git`` file (a worktree's, a submodule's) holds one short line.
GITDIR_FILE_MAX_BYTES = 4096
_GITDIR_PREFIX = "gitdir:"

_first_seen: dict[str, str | None] = {}
_lock = threading.Lock()


def repository(workspace: str | os.PathLike[str]) -> tuple[str, str] | None:
    """The work tree top and the git dir git would use in ``workspace``, both real
    paths, or None outside any repository (or where its ``.git`` cannot be read)."""
    folder = Path(os.path.realpath(workspace))
    for current in (folder, *folder.parents):
        entry = current / ".git"
        try:
            if entry.is_dir():
                return str(current), os.path.realpath(entry)
            if entry.is_file():
                named = _named_git_dir(entry)
                return None if named is None else (str(current), named)
        except OSError:
            return None
    return None


def named_git_dir(entry: str | os.PathLike[str]) -> str | None:
    """The real path of the git dir a ``.git`` entry stands for: the folder itself, or the
    one a ``.git`` file names (``gitdir: …``, relative to its folder); None for anything
    else, or what cannot be read."""
    try:
        if os.path.isdir(entry):
            return os.path.realpath(entry)
        return _named_git_dir(Path(entry))
    except OSError:
        return None


def common_git_dir(gitdir: str | os.PathLike[str]) -> str | None:
    """The real path of the common dir a git dir shares (a linked worktree's, named by its
    ``commondir`` file, relative to it), or None where it names none."""
    text = _small_text(Path(gitdir) / "commondir")
    line = text.splitlines()[0].strip() if text and text.strip() else ""
    return _real(Path(gitdir) / line) if line else None


def _small_text(path: Path) -> str | None:
    """The start of a regular file (:data:`GITDIR_FILE_MAX_BYTES`), or None. Opened
    without blocking and checked once open: a FIFO, even one swapped in after a check,
    would block the reader."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except (OSError, ValueError):
        return None
    with os.fdopen(fd, "rb") as handle:
        try:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return None
            return handle.read(GITDIR_FILE_MAX_BYTES).decode("utf-8", "replace")
        except OSError:
            return None


def _named_git_dir(entry: Path) -> str | None:
    text = _small_text(entry)
    line = text.splitlines()[0] if text else ""
    if not line.startswith(_GITDIR_PREFIX):
        return None
    return _real(entry.parent / line[len(_GITDIR_PREFIX) :].strip())


def _real(path: Path) -> str | None:
    """``path``'s real path, or None for one no path can be (a NUL byte in it)."""
    try:
        return os.path.realpath(path)
    except ValueError:
        return None


def git_dir(workspace: str | os.PathLike[str]) -> str | None:
    """The real path of the git dir git would use in ``workspace``, or None outside any
    repository (or where its ``.git`` cannot be read)."""
    found = repository(workspace)
    return None if found is None else found[1]


def remember_git_dir(workspace: str | os.PathLike[str]) -> None:
    """Record the git dir of ``workspace`` the first time this process sees it."""
    key = os.path.realpath(workspace)
    with _lock:
        if key in _first_seen:
            return
    found = git_dir(key)
    with _lock:
        _first_seen.setdefault(key, found)


def git_dir_unchanged(workspace: str | os.PathLike[str]) -> bool:
    """Whether ``workspace``'s git dir is the one it had when this process first saw it
    (it is first seen now when it was not before)."""
    key = os.path.realpath(workspace)
    now = git_dir(key)
    with _lock:
        first = _first_seen.setdefault(key, now)
    return first is not None and first == now
