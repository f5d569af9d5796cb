"""Which workspace files a step's shell commands (or MCP tools) changed, as the disk shows it.

A model changes files through the shell in more ways than any parser of command lines
can follow: ``perl -pi -e``, ``python - <<'EOF'`` scripts, ``mkdir -p d && cat > d/f``,
``mv``, ``cp``, ``rm -rf``, a formatter, a code generator. Read only from the command
line, those changes were missing from the progress ledger's files changed, and after a
compaction the model had no sign that the file it once read had changed under it. So
the tools node stats the workspace (:func:`stat_scan`) before and after a step that runs
a command or calls an MCP server's tool (a file-system or code-generation server changes
files as silently), and records the difference (:func:`scan_changes`) on the command's
result, else the tool's; the ledger and a compaction's files shown again read it there.

Only ``stat``: sizes, modification times and inodes (about 3 µs a file), no content;
the folders :data:`SKIPPED_DIRS` name (``.git``, ``node_modules``, virtual
environments, caches) are not entered. A workspace of :data:`WORKSPACE_SCAN_MAX_FILES`
files or more, or with a folder it cannot list, is scanned only where the step's
commands point (:func:`command_scope`): each one's ``cd`` folder and the paths it names,
a folder walked whole under the same cap — a command changes most often what it names,
and a scan cut anywhere could not tell a deleted file from one it did not reach. One
found that big is taken as such for :data:`OVERSIZED_RECHECK_S`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import re
import stat
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any, TypeVar

from langchain_core.messages import BaseMessage

from agentgraph.capabilities.tools.workspace import read_regular, text_lines
from agentgraph.context.shell_cd import cd_prefix, under
from agentgraph.runtime.history.kinds import AGENTGRAPH_KEY, with_marker

__all__ = [
    "CHANGED_PATHS_MAX",
    "FILES_CHANGED_KEY",
    "FOREIGN_WRITES_KEPT",
    "NAMED_FILES_MAX",
    "NAMED_FILE_MAX_BYTES",
    "OVERSIZED_RECHECK_S",
    "SCOPE_PATHS_MAX",
    "SKIPPED_DIRS",
    "WORKSPACE_SCAN_MAX_FILES",
    "ScanChanges",
    "StatScan",
    "changed_spans",
    "command_scope",
    "foreign_writes",
    "foreign_writes_mark",
    "foreign_writes_since",
    "read_named",
    "scan_changes",
    "scanned_changes",
    "stat_scan",
    "walk_files",
    "with_scanned_changes",
    "workspace_path",
]

# Files; past it the workspace is scanned only where a step's commands point
# (:func:`command_scope`; two whole scans a step: ~0.1 s at this size).
WORKSPACE_SCAN_MAX_FILES = 20_000
# Seconds a workspace found too big to scan whole is taken as such: finding out again
# walked the cap's worth of files (about 54 ms) each step, only to fall back to where the
# step's commands point.
OVERSIZED_RECHECK_S = 300.0
# Paths a step's commands name that a scan of a workspace too big to scan whole covers.
SCOPE_PATHS_MAX = 32
# Paths one step's record names; past it only their number is kept (a build writing
# thousands of files would otherwise fill the ledger and the checkpoint).
CHANGED_PATHS_MAX = 200
SKIPPED_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        "node_modules",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
        ".agentgraph",
    }
)

# Files a step's commands name whose text is kept before the step, to tell which of their
# lines changed; each read only under this size (bytes).
NAMED_FILES_MAX = 4
NAMED_FILE_MAX_BYTES = 256 * 1024
# What may be a path in a command line: a run of characters the shell does not treat as
# a separator, quote or operator.
_WORD_RE = re.compile(r"[^\s'\"`|;&<>()$]+")
# Why a word of a command names no file (not found, through a file, too long, a loop).
_NO_SUCH_PATH = frozenset({errno.ENOENT, errno.ENOTDIR, errno.ENAMETOOLONG, errno.ELOOP})
# Characters of a glob: its folder (the path before the first part holding one) is scanned.
_GLOB_CHARS = frozenset("*?[")

# (real path of a workspace, cap) -> when it was last found to hold the cap's files.
_oversized: dict[tuple[str, int], float] = {}
_oversized_lock = threading.Lock()

# Writes of this process's own that no step's command made (a background subagent's
# changes, applied from its thread while a caller's command runs), the newest kept: a
# step's scan leaves out those made while it ran.
FOREIGN_WRITES_KEPT = 256
_foreign_writes: deque[tuple[int, tuple[str, ...]]] = deque(maxlen=FOREIGN_WRITES_KEPT)
_foreign_count = 0
_foreign_open: set[int] = set()
_foreign_lock = threading.Lock()

# Marker field of a command's (or an MCP tool's) result: the files its step changed.
FILES_CHANGED_KEY = "files_changed"
# Longest path a record may name (an imported session's record is input like any other).
_PATH_MAX_CHARS = 4096
_KINDS = ("modified", "created", "deleted")
# Characters no path the ledger names may hold (a line break would forge a line of it).
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")

# Relative posix path -> (size in bytes, modification time in ns, inode).
StatScan = dict[str, tuple[int, int, int]]


@contextlib.contextmanager
def foreign_writes(paths: Iterable[str | os.PathLike[str]]) -> Iterator[None]:
    """Around writes (or deletions) of files this process makes outside any step's tools
    (absolute paths): a step whose scan spans them, or starts while they run, leaves them
    out (:func:`foreign_writes_since`)."""
    global _foreign_count
    with _foreign_lock:
        _foreign_count += 1
        number = _foreign_count
        _foreign_writes.append((number, tuple(os.fspath(p) for p in paths)))
        _foreign_open.add(number)
    try:
        yield
    finally:
        with _foreign_lock:
            _foreign_open.discard(number)


def foreign_writes_mark() -> int:
    """Where a step starts among :func:`foreign_writes`: before the first still running,
    else after the last."""
    with _foreign_lock:
        return min(_foreign_open) - 1 if _foreign_open else _foreign_count


def foreign_writes_since(mark: int, root: Path | str) -> frozenset[str]:
    """The files under the workspace ``root`` (relative posix paths) of the
    :func:`foreign_writes` after ``mark`` (:func:`foreign_writes_mark`)."""
    real_root = os.path.realpath(root)
    with _foreign_lock:
        paths = [p for count, written in _foreign_writes if count > mark for p in written]
    found: set[str] = set()
    for path in paths:
        rel = os.path.relpath(os.path.realpath(path), real_root)
        name = rel if os.sep == "/" else rel.replace(os.sep, "/")
        if workspace_path(name) and name != ".":
            found.add(name)
    return frozenset(found)


def walk_files(
    root: Path, max_files: int, *, strict: bool = False
) -> tuple[list[tuple[str, os.stat_result]], bool]:
    """Regular files under ``root`` (relative posix paths), skipping :data:`SKIPPED_DIRS`
    and never following a link.

    Args:
        root: The folder to walk.
        max_files: Stop after this many files.
        strict: A folder that cannot be listed stops the walk as ``max_files`` does (its
            files would be taken for deleted, or created once it can be listed).

    Returns:
        The files with their ``stat``, and whether the walk stopped short.
    """
    found: list[tuple[str, os.stat_result]] = []
    top = os.fspath(root)
    cut = len(os.path.join(top, ""))  # the root and its separator, off each entry's path
    # Paths as strings, not Path objects: a Path per entry took two thirds of the time.
    stack = [top]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError:
            if strict:
                return found, True
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name not in SKIPPED_DIRS:
                        stack.append(entry.path)
                    continue
                if not entry.is_file(follow_symlinks=False):
                    continue
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            rel = entry.path[cut:]
            found.append((rel if os.sep == "/" else rel.replace(os.sep, "/"), st))
            if len(found) >= max_files:
                return found, True
    return found, False


def stat_scan(
    root: Path | str | None,
    max_files: int = WORKSPACE_SCAN_MAX_FILES,
    scope: Iterable[str] | None = None,
) -> StatScan | None:
    """The files of the workspace ``root`` with their size, mtime and inode; None when
    there is no such folder, it holds ``max_files`` files or more, or a folder in it
    cannot be listed.

    Args:
        root: The workspace.
        max_files: The cap on the files scanned.
        scope: Scan only these relative paths (:func:`command_scope`): a file, or a
            folder walked whole; one missing now is a file that may appear. None: all.

    Returns:
        Relative path -> (size, mtime in ns, inode), or None.
    """
    if not root or not Path(root).is_dir():
        return None
    if scope is not None:
        return _scoped_scan(os.fspath(root), scope, max_files)
    key = (os.path.realpath(root), max_files)
    with _oversized_lock:
        found_at = _oversized.get(key)
    if found_at is not None and time.monotonic() - found_at < OVERSIZED_RECHECK_S:
        return None
    files, cut = walk_files(Path(root), max_files, strict=True)
    with _oversized_lock:
        now = time.monotonic()
        for stale in [k for k, at in _oversized.items() if now - at >= OVERSIZED_RECHECK_S]:
            del _oversized[stale]  # a server's many workspaces: only the recent ones kept
        if len(files) >= max_files:
            _oversized[key] = now
        else:
            _oversized.pop(key, None)
    if cut:
        return None
    return {rel: (st.st_size, st.st_mtime_ns, st.st_ino) for rel, st in files}


def _scoped_scan(root: str, scope: Iterable[str], max_files: int) -> StatScan | None:
    """:func:`stat_scan` of the ``scope`` paths of ``root``, each taken once (one inside
    another folder of the scope is that folder's); a path through a link is left out
    (it may lead out of the workspace)."""
    found: StatScan = {}
    real_root = os.path.realpath(root)
    kept: list[str] = []
    for rel in sorted(set(scope)):
        if not workspace_path(rel) or rel == "." or any(rel.startswith(k + "/") for k in kept):
            continue
        if SKIPPED_DIRS.intersection(rel.split("/")):
            continue
        kept.append(rel)
        path = os.path.join(root, rel)
        try:
            st = os.lstat(path)
        except OSError as exc:
            if exc.errno in _NO_SUCH_PATH:  # a word that names no file: nothing to scan
                continue
            return None
        if os.path.realpath(path) != os.path.join(real_root, rel):
            continue
        if stat.S_ISREG(st.st_mode):
            found[rel] = (st.st_size, st.st_mtime_ns, st.st_ino)
        elif stat.S_ISDIR(st.st_mode):
            files, cut = walk_files(Path(path), max_files - len(found), strict=True)
            if cut:
                return None
            for sub, sub_st in files:
                found[f"{rel}/{sub}"] = (sub_st.st_size, sub_st.st_mtime_ns, sub_st.st_ino)
        if len(found) >= max_files:
            return None
    return found


def _named_paths(command: str) -> tuple[str, list[str]]:
    """The folder ``command``'s leading ``cd D &&`` moves to (``""`` for none), and the
    words of the rest that may be paths (an option's value too: ``--out=build/x``), each
    as named from where the command started (:func:`~agentgraph.context.shell_cd.under`;
    one going up with ``..`` after a ``cd`` left out)."""
    folder, rest = cd_prefix(command)
    paths: list[str] = []
    for word in _WORD_RE.findall(rest):
        if word.startswith("-"):
            word = word.partition("=")[2]
        path = under(folder, word) if word else None
        if path:
            paths.append(path)
    return folder, paths


def command_scope(
    commands: Iterable[str], name_of: Callable[[str], str] = posixpath.normpath
) -> tuple[str, ...]:
    """The workspace paths ``commands`` name, for a scan of a workspace too big to scan
    whole: each command's ``cd`` folder, each word that may be a path after it (an
    option's value too, ``--out=F``) and a glob's folder (``rm build/*.o``: ``build``);
    the workspace itself and paths out of it left out.

    Args:
        commands: The step's command lines.
        name_of: A word as the scan would name the file (relative to the workspace
            when it is an absolute path under it).

    Returns:
        At most :data:`SCOPE_PATHS_MAX` relative paths, in the order named.
    """
    found: dict[str, None] = {}
    for command in commands:
        folder, paths = _named_paths(command)
        words = [folder] if folder else []
        for path in paths:
            parts = path.split("/")
            glob = next((i for i, part in enumerate(parts) if _GLOB_CHARS & set(part)), None)
            words.append(path if glob is None else "/".join(parts[:glob]))
        for word in filter(None, words):
            name = name_of(word)
            if workspace_path(name) and name != ".":
                found.setdefault(name)
            if len(found) >= SCOPE_PATHS_MAX:
                return tuple(found)
    return tuple(found)


@dataclass(frozen=True)
class ScanChanges:
    """The files that changed between two scans, each list sorted.

    Attributes:
        modified: Files there before and after whose size, mtime or inode changed (a
            rewrite, an edit in place, a file moved over it).
        created: Files there only after.
        deleted: Files there only before.
        more: Changed files past :data:`CHANGED_PATHS_MAX`, counted, not named.
        spans: ``(path, first, last)``: the lines (1-based, of the file after the step)
            between the first and the last that changed, of modified files the command
            named (:func:`read_named`); a change that only removed lines spans the line
            after them.
    """

    modified: tuple[str, ...] = ()
    created: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    more: int = 0
    spans: tuple[tuple[str, int, int], ...] = ()

    @property
    def empty(self) -> bool:
        """Whether nothing changed."""
        return not (self.modified or self.created or self.deleted or self.more)


def scan_changes(before: StatScan, after: StatScan, ignored: Iterable[str] = ()) -> ScanChanges:
    """What changed from ``before`` to ``after``, but the ``ignored`` paths (files the
    step's own file tools wrote: their calls record them).

    Args:
        before: The scan before the step.
        after: The scan after it.
        ignored: Relative paths to leave out.

    Returns:
        The changes, at most :data:`CHANGED_PATHS_MAX` paths named (created, then
        modified, then deleted first).
    """
    skip = set(ignored)
    created = sorted(p for p in after if p not in before and p not in skip)
    modified = sorted(
        p for p, state in after.items() if p in before and before[p] != state and p not in skip
    )
    deleted = sorted(p for p in before if p not in after and p not in skip)
    room = CHANGED_PATHS_MAX
    kept: list[list[str]] = []
    for paths in (created, modified, deleted):
        # A name with a line break or another control character would be a line of its
        # own in the ledger the model trusts: counted, not named.
        kept.append([p for p in paths if workspace_path(p)][:room])
        room -= len(kept[-1])
    more = len(created) + len(modified) + len(deleted) - sum(map(len, kept))
    return ScanChanges(tuple(kept[1]), tuple(kept[0]), tuple(kept[2]), more)


_M = TypeVar("_M", bound=BaseMessage)


def read_named(
    before: StatScan,
    root: Path | str,
    commands: Iterable[str],
    name_of: Callable[[str], str] = posixpath.normpath,
) -> dict[str, bytes]:
    """The text, before the step, of the workspace files ``commands`` name (the first
    :data:`NAMED_FILES_MAX` of them, each under :data:`NAMED_FILE_MAX_BYTES`; after a
    leading ``cd D &&``, from ``D``; an option's value too, ``--out=F``): a file a
    command names is the one it most likely edits in place.

    Args:
        before: The scan before the step (only files it holds are read).
        root: The workspace root.
        commands: The step's command lines.
        name_of: A word as the scan would name the file (relative to the workspace
            when it is an absolute path under it).

    Returns:
        Relative path -> bytes.
    """
    out: dict[str, bytes] = {}
    for command in commands:
        for path in _named_paths(command)[1]:
            name = name_of(path)
            state = before.get(name)
            if state is None or name in out or state[0] > NAMED_FILE_MAX_BYTES:
                continue
            data = read_regular(Path(root) / name, NAMED_FILE_MAX_BYTES)
            if data is not None:
                out[name] = data
            if len(out) >= NAMED_FILES_MAX:
                return out
    return out


def changed_spans(
    root: Path | str, texts: Mapping[str, bytes], modified: Iterable[str]
) -> tuple[tuple[str, int, int], ...]:
    """``(path, first, last)`` of each ``modified`` file whose text before the step
    ``texts`` holds: the lines from the first to the last that differ (the file's
    common head and tail taken off; a text file only).

    Args:
        root: The workspace root.
        texts: Relative path -> its bytes before the step (:func:`read_named`).
        modified: The files the scan saw change.

    Returns:
        The spans, in ``modified``'s order.
    """
    spans: list[tuple[str, int, int]] = []
    for name in modified:
        old = texts.get(name)
        new = read_regular(Path(root) / name, NAMED_FILE_MAX_BYTES) if old is not None else None
        if old is None or new is None or b"\x00" in old or b"\x00" in new:
            continue
        before, after = text_lines(old), text_lines(new)
        if not after or before == after:
            continue
        head = 0
        while head < min(len(before), len(after)) and before[head] == after[head]:
            head += 1
        tail = 0
        while tail < min(len(before), len(after)) - head and before[-1 - tail] == after[-1 - tail]:
            tail += 1
        first = min(head + 1, len(after))
        spans.append((name, first, max(first, len(after) - tail)))
    return tuple(spans)


def with_scanned_changes(message: _M, changes: ScanChanges) -> _M:
    """``message`` (a command's or an MCP tool's result) recording ``changes`` in its
    marker dict (never sent to a provider)."""
    record: dict[str, Any] = {kind: list(getattr(changes, kind)) for kind in _KINDS}
    record["more"] = changes.more
    if changes.spans:
        record["spans"] = [list(span) for span in changes.spans]
    return with_marker(message, **{FILES_CHANGED_KEY: record})


def scanned_changes(message: BaseMessage) -> ScanChanges | None:
    """The changes :func:`with_scanned_changes` recorded on ``message``; None when it
    records none, or a record that is not one (a hand-edited or imported session): a
    path must be relative, normal and inside the workspace.

    Args:
        message: A tool result.

    Returns:
        The changes, or None.
    """
    meta = message.additional_kwargs.get(AGENTGRAPH_KEY)
    record = meta.get(FILES_CHANGED_KEY) if isinstance(meta, Mapping) else None
    if not isinstance(record, Mapping):
        return None
    raw = [record.get(kind, []) for kind in _KINDS]
    if not all(isinstance(paths, list) for paths in raw):
        return None
    if sum(map(len, raw)) > CHANGED_PATHS_MAX or not all(map(workspace_path, chain(*raw))):
        return None
    lists = [tuple(paths) for paths in raw]
    more = record.get("more", 0)
    if isinstance(more, bool) or not isinstance(more, int) or more < 0:
        return None
    spans = record.get("spans", [])
    modified = frozenset(lists[0])
    if not isinstance(spans, list) or len(spans) > len(modified):
        return None
    if not all(_span(span, modified) for span in spans):
        return None
    return ScanChanges(
        lists[0], lists[1], lists[2], more, tuple((p, first, last) for p, first, last in spans)
    )


def _span(value: object, modified: frozenset[str]) -> bool:
    """Whether ``value`` is a ``[path, first, last]`` span of a modified file."""
    if not isinstance(value, list) or len(value) != 3 or value[0] not in modified:
        return False
    first, last = value[1], value[2]
    return (
        all(isinstance(n, int) and not isinstance(n, bool) for n in (first, last))
        and 1 <= first <= last
    )


def workspace_path(path: object) -> bool:
    """Whether ``path`` is a normal relative path inside the workspace, with no control
    character (a record read back from a session is input: what it names, the ledger
    shows)."""
    return (
        isinstance(path, str)
        and 0 < len(path) <= _PATH_MAX_CHARS
        and not _CONTROL_RE.search(path)
        and not path.startswith("/")
        and posixpath.normpath(path) == path
        and path != ".."
        and not path.startswith("../")
    )
