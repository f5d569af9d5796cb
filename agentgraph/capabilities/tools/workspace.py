"""Confinement of tool paths to the session workspace.

Every path a tool receives from the model goes through
:func:`resolve_in_workspace`, which returns the real (symlink-free) path or
raises :class:`ToolError`. Tools then operate on that real path only, so a
symlink inside the workspace cannot redirect a later open() outside it.

A hard link has no direction to follow: a file with several links is read only when
:class:`LinkCensus` finds every one of them inside the folder, so a link to a file
elsewhere (a key, a credentials file) is refused like a symlink leading out.
"""

import os
import stat
import time
from collections import Counter
from pathlib import Path, PurePosixPath
from typing import Any

from agentgraph.capabilities.tools.base import ToolError
from agentgraph.runtime.runctx import context_of

# Opened to read a file a command or a session left: never through a link, never waiting
# on a pipe, never taking a terminal for the agent's own (O_NOFOLLOW, O_NONBLOCK and
# O_NOCTTY are POSIX; where missing the lstat check in read_regular stands in for the
# first).
REGULAR_OPEN_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


def read_regular(path: Path, max_bytes: int) -> bytes | None:
    """The bytes of ``path`` when it is a regular file (not a link) of at most
    ``max_bytes``, else None (a FIFO is never waited on, a device never read).

    Args:
        path: The file.
        max_bytes: The largest file read.

    Returns:
        Its bytes, or None.
    """
    try:
        if stat.S_ISLNK(os.lstat(path).st_mode):
            return None
        fd = os.open(path, REGULAR_OPEN_FLAGS)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > max_bytes:
            return None
        chunks: list[bytes] = []
        size = 0
        while size <= max_bytes:
            chunk = os.read(fd, max_bytes + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return b"".join(chunks) if size <= max_bytes else None


def text_lines(data: bytes) -> list[str]:
    """The lines of a file as read_file numbers them: split at ``\\n`` only (not at a
    form feed or a lone ``\\r``, as ``str.splitlines`` would), a ``\\r`` before it taken
    off, no empty line after a final line break."""
    lines = [line.removesuffix("\r") for line in data.decode("utf-8", errors="replace").split("\n")]
    return lines[:-1] if lines and lines[-1] == "" else lines


PATH_MAX_CHARS = 4096
PATH_COMPONENT_MAX_BYTES = 255
PATH_ECHO_MAX_CHARS = 120
# Directories no tool walks into: version control, dependencies, caches.
SKIPPED_DIR_NAMES = frozenset({".git", "node_modules", ".venv", "__pycache__"})
# A path that does not exist is answered with the workspace's files of the same name (a
# model that guessed ``src/x.py`` for ``x.py`` finds it in one step), looked for within
# these bounds.
SAME_NAME_MAX_SUGGESTIONS = 3
SAME_NAME_SCAN_MAX_ENTRIES = 20_000
SAME_NAME_SCAN_TIMEOUT_S = 0.5
# A file with several hard links is read only when all of them are found inside the
# folder, by one walk of it within these bounds; past them it is refused (not knowing
# where its other links are).
HARD_LINK_SCAN_MAX_ENTRIES = 200_000
HARD_LINK_SCAN_TIMEOUT_S = 2.0


def _echo(path: str) -> str:
    """The path as quoted in an error message: one line, bounded."""
    shown = path.replace("\x00", "\\0").replace("\n", "\\n")
    if len(shown) > PATH_ECHO_MAX_CHARS:
        shown = shown[:PATH_ECHO_MAX_CHARS] + "…"
    return repr(shown)


def _is_within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def check_path_syntax(path: str) -> None:
    """Refuse path strings no tool should ever act on, before touching the disk.

    Args:
        path: The path as given by the model.

    Raises:
        ToolError: The path is empty, contains a NUL byte, starts with ``~``,
            or is longer than :data:`PATH_MAX_CHARS` characters or has a
            component longer than :data:`PATH_COMPONENT_MAX_BYTES` bytes.
    """
    if not isinstance(path, str):
        raise ToolError(f"path must be a string, got {type(path).__name__}")
    if not path.strip():
        raise ToolError("empty path; pass a path relative to the workspace, e.g. 'src/app.py'")
    if "\x00" in path:
        raise ToolError(f"path {_echo(path)} contains a NUL byte")
    if len(path) > PATH_MAX_CHARS:
        raise ToolError(f"path is {len(path)} characters long; the limit is {PATH_MAX_CHARS}")
    for part in path.split("/"):
        if len(part.encode("utf-8", "surrogateescape")) > PATH_COMPONENT_MAX_BYTES:
            raise ToolError(
                f"path {_echo(path)} has a component longer than {PATH_COMPONENT_MAX_BYTES} bytes"
            )
    if path.startswith("~"):
        raise ToolError(
            f"path {_echo(path)} starts with '~'; home-directory paths are not allowed, "
            "use a path relative to the workspace"
        )


def workspace_root(workspace: str | Path) -> str:
    """The workspace's real path.

    Args:
        workspace: The workspace directory (may contain symlinks).

    Returns:
        The absolute, symlink-free path of the workspace directory.

    Raises:
        ToolError: The workspace is not an existing directory.
    """
    root = os.path.realpath(workspace)
    if not os.path.isdir(root):
        raise ToolError(f"the workspace directory {str(workspace)!r} does not exist")
    return root


def resolve_in_workspace(
    workspace: str | Path, path: str, *, must_exist: bool = False, suggest: bool = True
) -> Path:
    """Resolve a model-supplied path to its real location inside the workspace.

    Relative paths are relative to the workspace; absolute paths are allowed
    when they lie inside it. Symlinks are followed, also for a file that does
    not exist yet (its deepest existing parent is resolved), and the result
    must still be inside the workspace.

    Args:
        workspace: The workspace directory.
        path: The path as given by the model.
        must_exist: Refuse a path that does not exist.
        suggest: Name the folder's files of the same name when it does not exist.

    Returns:
        The real absolute path (no symlinks, no ``..``).

    Raises:
        ToolError: The path is malformed (see :func:`check_path_syntax`),
            escapes the workspace (``..``, absolute path elsewhere, symlink
            leading out), or does not exist while ``must_exist`` is set.
    """
    check_path_syntax(path)
    root = workspace_root(workspace)
    candidate = path if os.path.isabs(path) else _rooted(root, path)
    try:
        real = os.path.realpath(candidate)
    except OSError as exc:
        raise ToolError(f"cannot resolve path {_echo(path)}: {exc.strerror or exc}") from exc
    if not _is_within(real, root):
        lexical = os.path.normpath(candidate)
        lexically_inside = _is_within(lexical, root) or _is_within(
            lexical, os.path.normpath(os.path.abspath(workspace))
        )
        if lexically_inside:
            reason = "goes through a symlink that leads outside the workspace"
        elif ".." in PurePosixPath(path).parts:
            reason = "escapes the workspace with '..'"
        else:
            reason = "is outside the workspace"
        raise ToolError(
            f"path {_echo(path)} {reason}; tools may only use files inside the workspace"
        )
    if must_exist and not os.path.exists(real):
        raise PathNotFound(path, root, real, suggest=suggest)
    return Path(real)


def _rooted(root: str, path: str) -> str:
    """A relative ``path`` joined to the workspace — unless the workspace holds nothing
    named like its first part and, read as absolute, it lies inside the workspace: the
    workspace's own path with the leading separator lost (``work/ws/app.py`` for the
    workspace ``/work/ws``, through any link to it), which small models write."""
    joined = os.path.join(root, path)
    parts = PurePosixPath(path).parts
    if not parts or os.path.lexists(os.path.join(root, parts[0])):
        return joined
    absolute = os.sep + path
    try:
        inside = _is_within(os.path.realpath(absolute), root)
    except (OSError, ValueError):
        return joined
    return absolute if inside else joined


class PathNotFound(ToolError):
    """A path that does not exist.

    Shown, its message names the workspace's files of the same name (a model that
    guessed ``src/x.py`` for ``x.py`` finds it in one step). They are looked for only
    then, once: callers that try another place and discard the error walk nothing.
    """

    def __init__(self, path: str, root: str, real: str, *, suggest: bool = True) -> None:
        super().__init__(f"no such file or directory: {_echo(path)}")
        self._root, self._real, self._suggest = root, real, suggest
        self._shown: str | None = None

    def __str__(self) -> str:
        if self._shown is None:
            hint = _same_name_hint(self._root, self._real) if self._suggest else ""
            self._shown = super().__str__() + hint
        return self._shown


def _same_name_hint(root: str, missing: str) -> str:
    """``; files named 'x.py' in the workspace: a/x.py, x.py`` — or "" when there are none."""
    name = os.path.basename(missing)
    if not name:
        return ""
    found: list[str] = []
    seen = 0
    deadline = time.monotonic() + SAME_NAME_SCAN_TIMEOUT_S
    pending = [root]
    while pending and len(found) < SAME_NAME_MAX_SUGGESTIONS:
        folder = pending.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    seen += 1
                    if seen > SAME_NAME_SCAN_MAX_ENTRIES or time.monotonic() > deadline:
                        pending.clear()
                        break
                    if entry.name == name:
                        found.append(os.path.relpath(entry.path, root))
                    if entry.name not in SKIPPED_DIR_NAMES and entry.is_dir(follow_symlinks=False):
                        pending.append(entry.path)
        except OSError:
            continue
    if not found:
        return ""
    shown = ", ".join(PurePosixPath(Path(f)).as_posix() for f in sorted(found))
    return f"; files named {_echo(name)} in the workspace: {shown}"


def resolve_readable(
    workspace: str | Path,
    path: str,
    *,
    artifacts_dir: str | Path | None = None,
    must_exist: bool = True,
) -> Path:
    """Resolve a path for reading: inside the workspace, or an absolute path in the artifacts dir.

    The session's artifacts folder holds full copies of truncated tool
    outputs; the model is told their absolute path and pages through them.

    Args:
        workspace: The workspace directory.
        path: The path as given by the model.
        artifacts_dir: The session artifacts directory, if any.
        must_exist: Refuse a path that does not exist.

    Returns:
        The real absolute path.

    Raises:
        ToolError: As :func:`resolve_in_workspace`, when the path is in
            neither place.
    """
    check_path_syntax(path)
    try:
        return resolve_in_workspace(workspace, path, must_exist=must_exist)
    except ToolError:
        if artifacts_dir is None or not os.path.isabs(path) or not os.path.isdir(artifacts_dir):
            raise
        if not _is_within(os.path.realpath(path), os.path.realpath(artifacts_dir)):
            raise
    # Not the workspace: its files of the same name would be named as the workspace's.
    return resolve_in_workspace(artifacts_dir, path, must_exist=must_exist, suggest=False)


def display_path(workspace: str | Path, p: str | Path) -> str:
    """A path as shown to the model: relative to the workspace, POSIX separators.

    Args:
        workspace: The workspace directory.
        p: An absolute path (typically one returned by :func:`resolve_in_workspace`).

    Returns:
        ``"."`` for the workspace itself, the relative path for anything
        inside it, otherwise the absolute path.
    """
    target = os.path.abspath(p)
    for root in (os.path.realpath(workspace), os.path.abspath(workspace)):
        if _is_within(target, root):
            rel = os.path.relpath(target, root)
            return PurePosixPath(Path(rel)).as_posix()
    return PurePosixPath(Path(target)).as_posix()


def workspace_from_runtime(runtime: Any) -> str:
    """The workspace of the run a tool is called in.

    Args:
        runtime: The tool's ``ToolRuntime``; its ``context`` is the run's
            :class:`~agentgraph.runctx.RunContext`.

    Returns:
        The workspace path.

    Raises:
        RuntimeError: The run has no context with a workspace (a wiring bug, not a
            model error).
    """
    return context_of(runtime).workspace_path


def artifacts_dir_from_runtime(runtime: Any) -> str | None:
    """The run's artifacts folder (full copies of truncated outputs), if any.

    Args:
        runtime: The tool's ``ToolRuntime``.

    Returns:
        The folder, or None when the run has none.
    """
    return context_of(runtime).artifacts_dir or None


class LinkCensus:
    """Where the hard links of a folder's multi-link files are: all inside it, or not.

    The folder is walked once, when a file with more than one link is first asked about
    (nearly every workspace has none, and then nothing is walked). Links are counted by
    device and inode of every regular file, symlinks not followed.
    """

    def __init__(self, root: str | Path) -> None:
        """Count links under ``root`` when first needed.

        Args:
            root: The folder (real path) whose files are read.
        """
        self._root = str(root)
        self._counts: Counter[tuple[int, int]] | None = None
        self._complete = False

    def _walk(self) -> Counter[tuple[int, int]]:
        counts: Counter[tuple[int, int]] = Counter()
        seen = 0
        deadline = time.monotonic() + HARD_LINK_SCAN_TIMEOUT_S
        pending = [self._root]
        while pending:
            folder = pending.pop()
            try:
                with os.scandir(folder) as entries:
                    for entry in entries:
                        seen += 1
                        if seen > HARD_LINK_SCAN_MAX_ENTRIES or time.monotonic() > deadline:
                            return counts
                        if entry.is_dir(follow_symlinks=False):
                            pending.append(entry.path)
                        elif entry.is_file(follow_symlinks=False):
                            # A stat, not the listing's inode number: overlay file systems
                            # may list another number than stat gives.
                            st = entry.stat(follow_symlinks=False)
                            if st.st_nlink > 1:
                                counts[(st.st_dev, st.st_ino)] += 1
            except OSError:
                return counts  # a folder not read may hold the other links
        self._complete = True
        return counts

    def links_inside(self, st: os.stat_result) -> int:
        """How many of the file's links were found inside the folder.

        Args:
            st: The file's ``stat`` (of the open file, ideally).

        Returns:
            The count; all of ``st.st_nlink`` for a file with one link (not walked).
        """
        if st.st_nlink <= 1 or not stat.S_ISREG(st.st_mode):
            return st.st_nlink
        if self._counts is None:
            self._counts = self._walk()
        return self._counts[(st.st_dev, st.st_ino)]

    def require_inside(self, st: os.stat_result, shown: str) -> None:
        """Refuse a file that has a hard link outside the folder.

        Args:
            st: The file's ``stat``.
            shown: The path as shown to the model.

        Raises:
            ToolError: Not every link of the file was found inside the folder.
        """
        inside = self.links_inside(st)
        if inside >= st.st_nlink:
            return
        where = (
            f"only {inside} of its {st.st_nlink} hard links are inside the workspace"
            if self._complete
            else f"it has {st.st_nlink} hard links and the workspace is too large to find them"
        )
        raise ToolError(
            f"{shown} is refused: {where}; a hard link to a file elsewhere is treated "
            "like a symlink leading outside the workspace"
        )


def containing_folder(real: Path, *folders: str | Path | None) -> str:
    """The first of ``folders`` (by real path) that holds ``real``.

    Args:
        real: A path :func:`resolve_readable` returned.
        folders: The folders it may be in, the workspace first.

    Returns:
        That folder's real path; ``real``'s parent when none holds it.
    """
    for folder in folders:
        if folder is not None and _is_within(str(real), os.path.realpath(folder)):
            return os.path.realpath(folder)
    return str(real.parent)
