"""The submodules of a workspace, as git steps into them by itself.

``git status`` in a repository runs git again in each submodule whose folder holds a
``.git``, and those in theirs, with the config that ``.git`` names: a ``core.fsmonitor``
there is a program run with the rights of whoever ran ``git status``. The sandbox keeps
the workspace's own ``.git`` read-only (``agentgraph/capabilities/tools/sandbox.py``), but
a submodule's ``.git`` sits in the work tree, where a command could point it at a git dir
of its own making — in place, by moving the folder holding it away and making another,
or by making one in a submodule never checked out (an empty folder).

:func:`submodule_guard` finds them from the index (read-only in the sandbox, so commands
cannot add one), and for the nested ones from their own git dir's index, and says what
to bind: each folder from the workspace down to a submodule onto itself (a mount point
cannot be moved or removed) and each submodule's ``.git`` read-only, or its folder whole
where it has none. The index is listed by ``git ls-files``, which reads it and runs
nothing a config names; the answer is kept until the index file changes.
"""

from __future__ import annotations

import os
import stat
import subprocess
import threading
from dataclasses import dataclass

from agentgraph.security.git_trust import NO_MONITOR_FLAGS, named_git_dir, repository

__all__ = [
    "GITLINK_CACHE_MAX",
    "LS_FILES_TIMEOUT_S",
    "SubmoduleGuard",
    "submodule_guard",
]

# Listing an index of a hundred thousand files takes well under a second.
LS_FILES_TIMEOUT_S = 30.0
# Git dirs whose submodule list is kept; past it the cache starts over.
GITLINK_CACHE_MAX = 64

_GITLINK_MODE = "160000 "
# What git needs to find its programs and the user's own configuration; nothing of the
# agent's environment (GIT_DIR, GIT_INDEX_FILE) decides which repository it reads.
_GIT_ENV_KEEP = ("PATH", "HOME", "LANG", "LC_ALL", "SYSTEMROOT")

_IndexKey = tuple[int, int, int, int]
_cache: dict[tuple[str, str], tuple[_IndexKey, tuple[str, ...]]] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class SubmoduleGuard:
    """What keeps a workspace's submodules' ``.git`` entries as they are.

    Attributes:
        pinned: Folders from the workspace down to each submodule (parents first), to
            bind onto themselves: they stay writable but cannot be moved or removed.
        read_only: Each submodule's ``.git`` (a folder or a file), or the submodule's
            folder where it holds none: to bind read-only after ``pinned``.
    """

    pinned: tuple[str, ...] = ()
    read_only: tuple[str, ...] = ()


def submodule_guard(workspace: str | os.PathLike[str]) -> SubmoduleGuard:
    """The folders and entries to bind for the submodules under ``workspace``.

    Submodules outside the workspace are read-only anyway; one whose folder is missing,
    or is reached through a link (git does not step into it), is left out.

    Args:
        workspace: The writable workspace.

    Returns:
        The guard; empty outside a repository, without git, or without submodules.
    """
    root = os.path.realpath(workspace)
    found = repository(root)
    if found is None:
        return SubmoduleGuard()
    pinned: dict[str, None] = {}
    read_only: dict[str, None] = {}
    seen: set[str] = set()
    pending = [found]
    while pending:
        top, gitdir = pending.pop()
        if gitdir in seen:  # a .git naming a git dir already listed: no loop
            continue
        seen.add(gitdir)
        for link in _gitlinks(top, gitdir):
            folders = _folders_under(root, os.path.join(top, link))
            if not folders:
                continue
            pinned.update(dict.fromkeys(folders))
            entry = os.path.join(folders[-1], ".git")
            if os.path.islink(entry):
                continue
            if not os.path.lexists(entry):
                read_only[folders[-1]] = None  # never checked out: git left it empty
                continue
            read_only[entry] = None
            named = named_git_dir(entry)
            if named is not None:
                pending.append((folders[-1], named))
    ordered = sorted(pinned, key=lambda p: (p.count(os.sep), p))
    return SubmoduleGuard(tuple(ordered), tuple(read_only))


def _folders_under(root: str, path: str) -> list[str]:
    """The folders from ``root`` (left out) down to ``path``, each a real folder; empty
    when ``path`` is not under ``root``, or one of them is missing or a link."""
    relative = os.path.relpath(os.path.normpath(path), root)
    parts = relative.split(os.sep)
    if relative == "." or any(part in ("", ".", "..") for part in parts):
        return []
    folders: list[str] = []
    current = root
    for part in parts:
        current = os.path.join(current, part)
        try:
            if not stat.S_ISDIR(os.lstat(current).st_mode):
                return []
        except OSError:
            return []
        folders.append(current)
    return folders


def _gitlinks(top: str, gitdir: str) -> tuple[str, ...]:
    """The submodule paths the index of ``gitdir`` holds, relative to ``top``."""
    try:
        info = os.stat(os.path.join(gitdir, "index"))
    except OSError:
        return ()
    key: _IndexKey = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
    with _lock:
        cached = _cache.get((top, gitdir))
    if cached is not None and cached[0] == key:
        return cached[1]
    links = _list_gitlinks(top, gitdir)
    with _lock:
        if len(_cache) >= GITLINK_CACHE_MAX:
            _cache.clear()
        _cache[(top, gitdir)] = (key, links)
    return links


def _list_gitlinks(top: str, gitdir: str) -> tuple[str, ...]:
    env = {k: v for k, v in os.environ.items() if k in _GIT_ENV_KEEP}
    env["GIT_TERMINAL_PROMPT"] = "0"
    args = ["git", f"--git-dir={gitdir}", f"--work-tree={top}", *NO_MONITOR_FLAGS]
    try:
        done = subprocess.run(
            [*args, "ls-files", "--stage", "-z"],
            cwd=top,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=LS_FILES_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ()  # no git here: neither can the user's shell step into a submodule
    if done.returncode != 0:
        return ()  # an index git cannot read: nor can the user's git status
    listed = done.stdout.decode("utf-8", "surrogateescape").split("\0")
    return tuple(e.split("\t", 1)[1] for e in listed if e.startswith(_GITLINK_MODE) and "\t" in e)
