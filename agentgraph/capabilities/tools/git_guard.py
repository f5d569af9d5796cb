"""The git dirs inside a workspace a sandboxed command must not point elsewhere.

Git runs programs the config of a repository names (``core.fsmonitor`` on ``git
status``, hooks, filters) with the rights of whoever runs git there. The sandbox keeps
the workspace's own ``.git`` read-only (:mod:`~agentgraph.capabilities.tools.sandbox`), but
the work tree may hold more, each read by git run later outside the sandbox:

- **submodules**: ``git status`` at the top runs git again in each submodule whose
  folder holds a ``.git``, and in theirs, with the config that ``.git`` names;
- **repositories of its own**: a workspace that is a folder of clones, or one holding a
  vendored clone, where the user runs git in each.

A command could rewrite such a ``.git``, move the folder holding it away and make
another, or make one in a submodule never checked out (an empty folder). So
:func:`git_guard` says what to bind: each folder from the workspace down to such a
``.git`` onto itself (a mount point cannot be moved or removed) and the ``.git`` itself
read-only, or a submodule's folder whole where it has none; where a ``.git`` file names
a git dir elsewhere in the workspace (``git init --separate-git-dir``, a linked
worktree's, with the common dir it shares), that too.

Submodules come from the index (read-only in the sandbox, so commands cannot add one),
and for nested ones from the submodule's own git dir, listed by ``git ls-files``, which
reads it and runs nothing a config names; the list is kept until the index file
changes. Repositories of the workspace's own are looked for :data:`NESTED_DEPTH_MAX`
folders deep, in at most :data:`NESTED_FOLDERS_MAX` folders, not in
:data:`~agentgraph.capabilities.tools.workspace_scan.SKIPPED_DIRS`.
"""

from __future__ import annotations

import os
import stat
import subprocess
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

from agentgraph.capabilities.tools.workspace_scan import SKIPPED_DIRS
from agentgraph.security.git_trust import (
    NO_MONITOR_FLAGS,
    common_git_dir,
    named_git_dir,
    repository,
)

__all__ = [
    "GITLINK_CACHE_MAX",
    "LS_FILES_TIMEOUT_S",
    "NESTED_DEPTH_MAX",
    "NESTED_FOLDERS_MAX",
    "GitGuard",
    "git_guard",
]

# Listing an index of 200,000 files takes about 0.1 s.
LS_FILES_TIMEOUT_S = 30.0
# Git dirs whose submodule list is kept; past it the cache starts over.
GITLINK_CACHE_MAX = 64
# Folders below the workspace looked into for a repository of its own (``clones/x``,
# ``third_party/lib/x``), and folders listed at most, breadth first: per command 0.5 ms in
# a repository of 400 folders, 12 ms in 50 folders of 500 files, 45 ms at the cap.
NESTED_DEPTH_MAX = 4
NESTED_FOLDERS_MAX = 2_000

_GITLINK_MODE = "160000 "
# What git needs to find its programs and the user's own configuration; nothing of the
# agent's environment (GIT_DIR, GIT_INDEX_FILE) decides which repository it reads.
_GIT_ENV_KEEP = ("PATH", "HOME", "LANG", "LC_ALL", "SYSTEMROOT")

_IndexKey = tuple[int, int, int, int]
_cache: dict[tuple[str, str], tuple[_IndexKey, tuple[str, ...]]] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class GitGuard:
    """What keeps the ``.git`` entries inside a workspace as they are.

    Attributes:
        pinned: Folders from the workspace down to each (parents first), to bind onto
            themselves: they stay writable but cannot be moved or removed.
        read_only: Each ``.git`` (a folder or a file), or a submodule's folder where it
            holds none: to bind read-only after ``pinned``.
    """

    pinned: tuple[str, ...] = ()
    read_only: tuple[str, ...] = ()


def git_guard(workspace: str | os.PathLike[str]) -> GitGuard:
    """The folders and entries to bind for the git dirs inside ``workspace``.

    Its own ``.git`` is not among them (``protected_paths`` in the sandbox binds it). A
    ``.git`` that is a link is left out (a bind would follow it); so is a submodule whose
    folder is missing, or reached through a link (git does not step into it).

    Args:
        workspace: The writable workspace.

    Returns:
        The guard; empty where there is nothing to guard.
    """
    root = os.path.realpath(workspace)
    pinned: dict[str, None] = {}
    read_only: dict[str, None] = {}
    pending: list[tuple[str, str]] = []

    def guard(folders: list[str]) -> None:
        pinned.update(dict.fromkeys(folders))
        entry = os.path.join(folders[-1], ".git")
        if os.path.islink(entry):
            return
        if not os.path.lexists(entry):
            read_only[folders[-1]] = None  # a submodule never checked out: git left it empty
            return
        read_only[entry] = None
        named = named_git_dir(entry)
        if named is not None:
            guard_git_dir(named)
            pending.append((folders[-1], named))

    def guard_git_dir(gitdir: str) -> None:
        # A .git file may name a git dir in the work tree (``--separate-git-dir``), and a
        # linked worktree's shares a common dir: git reads their config as the repository's.
        for path in (gitdir, common_git_dir(gitdir)):
            if path is None or path in read_only or _within(path, own_git):
                continue
            folders = _folders_under(root, path)
            if folders:
                pinned.update(dict.fromkeys(folders[:-1]))
                read_only[path] = None

    own_git = os.path.join(root, ".git")
    found = repository(root)
    if found is not None:
        guard_git_dir(found[1])
        pending.append(found)
    for folder in _nested_repositories(root):
        guard(_folders_under(root, folder))
    seen: set[str] = set()
    while pending:
        top, gitdir = pending.pop()
        if gitdir in seen:  # a .git naming a git dir already listed: no loop
            continue
        seen.add(gitdir)
        for link in _gitlinks(top, gitdir):
            folders = _folders_under(root, os.path.join(top, link))
            if folders:
                guard(folders)
    ordered = sorted(pinned, key=lambda p: (p.count(os.sep), p))
    return GitGuard(tuple(ordered), tuple(sorted(read_only)))


def _nested_repositories(root: str) -> Iterator[str]:
    """The folders below ``root`` holding a ``.git`` (a folder or a file, not a link),
    breadth first, :data:`NESTED_DEPTH_MAX` deep and :data:`NESTED_FOLDERS_MAX` listed."""
    queue: deque[tuple[str, int]] = deque([(root, 0)])
    listed = 0
    while queue and listed < NESTED_FOLDERS_MAX:
        folder, depth = queue.popleft()
        listed += 1
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.name == ".git" and folder != root and not entry.is_symlink():
                    yield folder
                elif (
                    depth < NESTED_DEPTH_MAX
                    and entry.name not in SKIPPED_DIRS
                    and entry.is_dir(follow_symlinks=False)
                ):
                    queue.append((entry.path, depth + 1))
            except OSError:
                continue


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder + os.sep)


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
