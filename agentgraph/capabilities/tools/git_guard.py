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
and for nested ones from the submodule's own git dir, read without running git
(:mod:`~agentgraph.capabilities.tools.git_index`); the list is kept until the index file
changes. Repositories of the workspace's own are looked for :data:`NESTED_DEPTH_MAX`
folders deep, in at most :data:`NESTED_FOLDERS_MAX` folders, not in
:data:`~agentgraph.capabilities.tools.workspace_scan.SKIPPED_DIRS`. What was guarded once
stays guarded in this process while it is there: a command that made the folders too
many to look through, or one it cannot list (``chmod``), does not take a repository out
of the next command's guard; a folder the agent cannot look into on the way to one is
bound read-only whole.
"""

from __future__ import annotations

import errno
import os
import resource
import stat
import threading
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from agentgraph.capabilities.tools.git_index import index_gitlinks
from agentgraph.capabilities.tools.workspace_scan import SKIPPED_DIRS
from agentgraph.security.git_trust import common_git_dir, named_git_dir, repository

__all__ = [
    "FD_MARGIN",
    "GITLINK_CACHE_MAX",
    "GUARD_BINDS_MAX",
    "NESTED_DEPTH_MAX",
    "NESTED_FOLDERS_MAX",
    "GitGuard",
    "GitGuardRefused",
    "GitGuardTooBig",
    "git_guard",
    "open_folders",
]

# Git dirs whose submodule list is kept; past it the cache starts over.
GITLINK_CACHE_MAX = 512
# Folders below the workspace looked into for a repository of its own (``clones/x``,
# ``third_party/lib/x``), and folders listed at most, breadth first: per command 0.5 ms in
# a repository of 400 folders, 12 ms in 50 folders of 500 files, 45 ms at the cap.
NESTED_DEPTH_MAX = 4
NESTED_FOLDERS_MAX = 2_000
# Folders and entries bound per command at most: three bwrap arguments each, and bwrap
# takes 9,000 arguments in all.
GUARD_BINDS_MAX = 2_000

# Descriptors left free for everything else of the process (the model's connections,
# the command's pipes) when the folders to bind are opened: one each.
FD_MARGIN = 256
# Why an opened folder is left out: gone, a file now, or a link now (``O_NOFOLLOW``).
_NOT_A_FOLDER = frozenset({errno.ENOENT, errno.ENOTDIR, errno.ELOOP})

# Why a path on the way to a guarded entry cannot be looked at: its folder cannot be
# searched. Anything else (gone, a link now) means git cannot reach it either.
_NO_ACCESS = frozenset({errno.EACCES, errno.EPERM})

_IndexKey = tuple[int, int, int, int]
_cache: dict[str, tuple[_IndexKey, tuple[str, ...]]] = {}
# Workspace (real path) -> the paths guarded for it so far in this process.
_guarded: dict[str, set[str]] = {}
_lock = threading.Lock()


class GitGuardRefused(Exception):
    """The ``.git`` entries cannot be kept as they are for this command: it must not run."""


class GitGuardTooBig(GitGuardRefused):
    """More folders and entries to bind than :data:`GUARD_BINDS_MAX`, or than this process
    may hold open at once (:data:`FD_MARGIN`)."""


@dataclass(frozen=True)
class GitGuard:
    """What keeps the ``.git`` entries inside a workspace as they are.

    Attributes:
        pinned: Folders from the workspace down to each (parents first), to bind onto
            themselves: they stay writable but cannot be moved or removed.
        read_only: Each ``.git`` (a folder or a file), a git dir one names in the
            workspace, a submodule's folder where it holds none, and a folder the agent
            cannot look into on the way to one: to bind read-only after ``pinned``.
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

    Raises:
        GitGuardTooBig: More than :data:`GUARD_BINDS_MAX` binds.
        GitGuardRefused: The workspace cannot be searched now (a command beside this one
            may have changed its mode, and change it back before this one starts).
    """
    root = os.path.realpath(workspace)
    try:
        os.lstat(os.path.join(root, ".git"))
    except FileNotFoundError:
        pass
    except OSError as exc:
        if exc.errno in _NO_ACCESS:
            raise GitGuardRefused("the workspace cannot be searched now") from None
    try:
        found = set(_targets(root))
    except Exception:  # the workspace's files are hostile input
        # Whatever they make the search fail on, the next command keeps what was guarded
        # before rather than failing, or every command after it would.
        found = set()
    with _lock:
        before = _guarded.get(root, set())
    targets = set(found)
    for target in before - found:
        dot_git = os.path.join(target, ".git")
        # An empty submodule folder since checked out: its .git is guarded now.
        targets.add(dot_git if os.path.lexists(dot_git) else target)
    pinned: dict[str, None] = {}
    read_only: dict[str, None] = {}
    kept: set[str] = set()
    for target in sorted(targets):
        folders, blocked = _reach(root, target)
        if blocked == root:
            with _lock:
                _guarded[root] = before | found
            raise GitGuardRefused("the workspace cannot be searched now")
        if blocked is not None:  # bound whole: nothing in it can change either
            pinned.update(dict.fromkeys(_reach(root, blocked)[0] or ()))
            read_only[blocked] = None
            kept.add(target)
        elif folders is not None:
            pinned.update(dict.fromkeys(folders))
            read_only[target] = None
            kept.add(target)
    with _lock:
        _guarded[root] = kept
    for path in read_only:
        pinned.pop(path, None)
    if len(pinned) + len(read_only) > GUARD_BINDS_MAX:
        raise GitGuardTooBig(
            f"{len(pinned) + len(read_only)} folders and git entries to keep in place "
            f"(at most {GUARD_BINDS_MAX})"
        )
    room = _fd_room()
    if len(pinned) > room:
        raise GitGuardTooBig(f"{len(pinned)} folders to keep in place (at most {room} here)")
    ordered = sorted(pinned, key=lambda p: (p.count(os.sep), p))
    return GitGuard(tuple(ordered), tuple(sorted(read_only)))


def open_folders(root: str, folders: Iterable[str]) -> list[tuple[int, str]]:
    """Each of ``folders`` under ``root`` opened as it is now, following no link on the
    way (``O_PATH``, ``O_NOFOLLOW`` at each step from ``root``): one that is gone, or a
    file or a link now, is left out. The caller closes the descriptors.

    Args:
        root: The workspace (a real path).
        folders: Folders under it.

    Returns:
        Each opened folder's descriptor and path.

    Raises:
        GitGuardRefused: One could not be opened for another reason (it cannot be
            searched now, no descriptor is left): left out, it could be moved.
    """
    flags = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    opened: list[tuple[int, str]] = []
    try:
        top = os.open(root, flags)
    except OSError as exc:
        raise GitGuardRefused(f"the workspace cannot be opened: {exc.strerror}") from None
    try:
        for folder in folders:
            current = top
            try:
                for part in os.path.relpath(folder, root).split(os.sep):
                    if part in ("", ".", ".."):
                        raise OSError(errno.ENOENT, "not under the workspace", folder)
                    step = os.open(part, flags, dir_fd=current)
                    if current != top:
                        os.close(current)
                    current = step
            except OSError as exc:
                if current != top:
                    os.close(current)
                if exc.errno in _NOT_A_FOLDER:
                    continue
                raise GitGuardRefused(f"{folder} cannot be opened: {exc.strerror}") from None
            opened.append((current, folder))
    except BaseException:
        for fd, _ in opened:
            os.close(fd)
        raise
    finally:
        os.close(top)
    return opened


def _fd_room() -> int:
    """Descriptors this process may open for the folders to bind (:data:`FD_MARGIN` kept
    free of its soft limit)."""
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return GUARD_BINDS_MAX
    if soft == resource.RLIM_INFINITY:
        return GUARD_BINDS_MAX
    return max(0, soft - FD_MARGIN)


def _targets(root: str) -> Iterator[str]:
    """What to bind read-only under ``root`` as it is now: each ``.git`` of a submodule or
    a repository it holds, a git dir one names in it, an empty submodule folder."""
    own_git = os.path.join(root, ".git")
    pending: list[tuple[str, str]] = []

    def git_dirs(gitdir: str) -> Iterator[str]:
        # A .git file may name a git dir in the work tree (``--separate-git-dir``), and a
        # linked worktree's shares a common dir: git reads their config as the repository's.
        for path in (gitdir, common_git_dir(gitdir)):
            if path is not None and _within(path, root) and not _within(path, own_git):
                yield path

    def entry(folder: str) -> Iterator[str]:
        dot_git = os.path.join(folder, ".git")
        if os.path.islink(dot_git):
            return
        if not os.path.lexists(dot_git):
            yield folder  # a submodule never checked out: git left it empty
            return
        yield dot_git
        named = named_git_dir(dot_git)
        if named is not None:
            yield from git_dirs(named)
            pending.append((folder, named))

    found = repository(root)
    if found is not None:
        yield from git_dirs(found[1])
        pending.append(found)
    for folder in _nested_repositories(root):
        yield from entry(folder)
    seen: set[str] = set()
    while pending:
        top, gitdir = pending.pop()
        if gitdir in seen:  # a .git naming a git dir already listed: no loop
            continue
        seen.add(gitdir)
        for link in _gitlinks(gitdir):
            path = os.path.normpath(os.path.join(top, link))
            folders, blocked = _reach(root, path)
            if blocked is not None:
                yield path
            elif folders is not None and os.path.isdir(path):
                yield from entry(path)


def _nested_repositories(root: str) -> Iterator[str]:
    """The folders below ``root`` holding a ``.git`` (a folder or a file, not a link),
    breadth first, :data:`NESTED_DEPTH_MAX` deep and :data:`NESTED_FOLDERS_MAX` listed
    (a folder that cannot be listed is passed over)."""
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
        for item in entries:
            try:
                if item.name == ".git" and folder != root and not item.is_symlink():
                    yield folder
                elif (
                    depth < NESTED_DEPTH_MAX
                    and item.name not in SKIPPED_DIRS
                    and item.is_dir(follow_symlinks=False)
                ):
                    queue.append((item.path, depth + 1))
            except OSError:
                continue


def _within(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or inside it (both real, normalized paths)."""
    return path == folder or path.startswith(folder + os.sep)


def _reach(root: str, path: str) -> tuple[list[str] | None, str | None]:
    """How ``path`` under ``root`` is reached.

    Args:
        root: The workspace (a real path).
        path: A path under it (normalized).

    Returns:
        The folders on the way (``root`` left out, ``path`` too) and None when each is
        a real folder and ``path`` is there; ``(None, folder)`` when a folder on the way
        cannot be searched, ``folder`` being the last one that can be looked at (``root``
        itself when it cannot be); ``(None, None)`` when ``path`` is not under ``root``,
        or it or a folder on the way is missing or a link.
    """
    relative = os.path.relpath(path, root)
    parts = relative.split(os.sep)
    if relative == "." or any(part in ("", ".", "..") for part in parts):
        return None, None
    folders: list[str] = []
    current = root
    for index, part in enumerate(parts):
        parent, current = current, os.path.join(current, part)
        try:
            mode = os.lstat(current).st_mode
        except OSError as exc:
            if exc.errno in _NO_ACCESS:
                return None, parent
            return None, None
        last = index == len(parts) - 1
        if stat.S_ISLNK(mode) or not (last or stat.S_ISDIR(mode)):
            return None, None
        if not last:
            folders.append(current)
    return folders, None


def _gitlinks(gitdir: str) -> tuple[str, ...]:
    """The submodule paths the index of ``gitdir`` holds (relative to its work tree),
    kept until the index file changes."""
    try:
        info = os.stat(os.path.join(gitdir, "index"))
    except (OSError, ValueError):
        return ()
    key: _IndexKey = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
    with _lock:
        cached = _cache.get(gitdir)
    if cached is not None and cached[0] == key:
        return cached[1]
    links = index_gitlinks(gitdir)
    with _lock:
        if len(_cache) >= GITLINK_CACHE_MAX:
            _cache.clear()
        _cache[gitdir] = (key, links)
    return links
