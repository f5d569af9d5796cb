"""A command's output that shows files, cut by the files' lines when it is too long.

``cat A B C …`` prints the files one after the other with nothing between them. Cut
like any other output (its head and its tail kept), the files in its middle were gone
whole, and the model could not tell where one file ended and the next began: a model
that re-reads what it asked for but cannot see read them again (4 of 100 files at an 8k
window, eight small files a command), where eight ``read_file`` calls of one reply each
kept a page of every file.

Cut here, the output is what those calls would show: every file's leading lines, each
file over its share followed by the page note ``read_file`` writes, prefixed by its path
(``logs/b.txt: [showing lines 1-30 of 41; call read_file with offset=30 to continue]``).
The shares are fair: files under an equal share of the room are shown whole, and the
others share the rest equally. The message's marker records the lines shown of each file
cut (:func:`shown_marker`), and the progress ledger takes them (:func:`shown_spans`) as
the lines read of each file, as it does a ``read_file`` page's.

``cat F`` of one file over its room (or ``tail -n +K F``, ``sed -n 'A,Bp' F``: any plain
read of its lines) shows the leading lines printed and the page note, as a read_file call
from that line would (:func:`cut_shown_file`): cut head and tail by tokens, nothing told
the model which lines of the file it had not seen, and a model reading on hit the file's
end again each time. Lines printed numbered (``nl -ba F | sed -n 'A,Bp'``, as Codex's
models page, or ``cat -n F``) are kept as printed, numbers and all: cut head and tail, a
page's middle was gone with no word of which lines were missing, and a model that had
asked for lines 1-200 took the page for read.

Only an output that is exactly the files' texts one after the other is cut this way (the
files are read again to find where each ends, by read_file's rules): anything else — an
option that changes what is printed, a file outside the workspace, missing or changed
meanwhile, a redacted secret, a first line longer than a file's share — is cut as any
other output. A compaction that keeps such a result the model has not seen, in less room,
cuts it again the same way from its whole output (:func:`page_of_shown_files`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from langchain_core.messages import BaseMessage, ToolMessage

from agentgraph.capabilities.tools.base import ToolError
from agentgraph.capabilities.tools.bash import bash_status
from agentgraph.capabilities.tools.files import (
    BINARY_SNIFF_BYTES,
    READ_FILE_WHOLE_MAX_BYTES,
    PageCounter,
    binary_kind,
    page_note,
)
from agentgraph.capabilities.tools.workspace import (
    LinkCensus,
    read_regular,
    resolve_in_workspace,
    workspace_root,
)
from agentgraph.context.artifacts import cut_original, was_cut
from agentgraph.context.shell_reads import parse_shell_read, whole_file_reads
from agentgraph.runtime.history import AGENTGRAPH_KEY

__all__ = [
    "SHOWN_FILE_MAX_BYTES",
    "SHOWN_FILE_MIN_LINES",
    "SHOWN_LINES_KEY",
    "SHOWN_SPANS_KEY",
    "Printed",
    "ShownCut",
    "ShownLines",
    "cut_command_output",
    "cut_shown_file",
    "cut_shown_files",
    "files_printed",
    "page_of_shown_files",
    "read_shown_texts",
    "shown_lines",
    "shown_marker",
    "shown_spans",
]

# Leading lines each file must show in its share, else the output is cut as any other
# (head and tail): a page note alone would show nothing of the file.
SHOWN_FILE_MIN_LINES = 1
# Largest file read again to cut what a command printed of part of it (bytes): as large
# as read_file reads whole. Printed whole, a file is read up to what was printed.
SHOWN_FILE_MAX_BYTES = READ_FILE_WHOLE_MAX_BYTES
# Attempts to fit the assembled output when the sum of its pieces' counts undershot the
# whole's (token merges across the pieces' edges): each lowers the room by what was over.
FIT_ATTEMPTS = 3

# Field of a cut message's marker dict: path → [last line shown, the file's lines] of
# each file a cut by file shows in part. Kept beside the text, not read back from it: a
# file may hold a line shaped like a page note.
SHOWN_SPANS_KEY = "shown_spans"
# Field of a cut message's marker dict: path → [first, last, total] (:class:`ShownLines`)
# of the one file a command printed lines of, cut (:func:`cut_shown_file`).
SHOWN_LINES_KEY = "shown_lines"


class ShownLines(NamedTuple):
    """The lines of one file a cut of what a command printed of it shows (1-based).

    Attributes:
        first: The first line printed.
        last: The last line shown.
        total: The file's lines.
    """

    first: int
    last: int
    total: int


@dataclass(frozen=True)
class ShownCut:
    """An output cut file by file.

    Attributes:
        text: The answer as the model is shown it.
        spans: Path → (last line shown, the file's lines) of each file shown in part:
            the last of its leading lines.
        lines: Path → the lines shown of the one file a command printed lines of, cut
            (:func:`cut_shown_file`).
    """

    text: str
    spans: Mapping[str, tuple[int, int]]
    lines: Mapping[str, ShownLines] = field(default_factory=dict)


def cut_command_output(
    command: str, answer: str, max_tokens: int, counter: PageCounter, workspace: str | None
) -> ShownCut | None:
    """A run_bash ``answer`` of ``command`` cut file by file (:func:`cut_shown_files`;
    one file's lines: :func:`cut_shown_file`), or None when the command is no
    ``cat`` of files (:func:`files_printed`) that exited 0 in ``workspace``, or its output is
    not their lines.

    Args:
        command: The command line.
        answer: The tool's answer: the output, then its status line.
        max_tokens: Bound on the cut answer's tokens.
        counter: Counts them.
        workspace: Where the command ran.
    """
    return _cut_answer(files_printed(command), answer, max_tokens, counter, workspace)


class Printed(NamedTuple):
    """The files a command prints, one after the other with nothing else
    (:func:`files_printed`).

    Attributes:
        paths: The files, as the command names them (none: not such a command).
        first: The first line printed of the one file (1 for several).
        last: The last line asked for of the one file; None for every line to its end.
    """

    paths: tuple[str, ...]
    first: int = 1
    last: int | None = None


def files_printed(command: str) -> Printed:
    """The files ``command`` prints, one after the other with nothing else: each file of
    ``cat A B …`` whole; the one file of a plain read (``cat F``, ``tail -n +K F``, ``sed
    -n 'A,Bp' F``, ``head -n N F``; numbered too: ``cat -n F``, ``nl -ba F | sed -n
    'A,Bp'``) from its first line asked for; no files for anything else."""
    several = whole_file_reads(command)
    if several:
        return Printed(several)
    read = parse_shell_read(command)
    if read is None:
        return Printed(())
    return Printed((read.path,), read.first, read.last)


def _cut_answer(
    files: Printed,
    answer: str,
    max_tokens: int,
    counter: PageCounter,
    workspace: str | None,
) -> ShownCut | None:
    """:func:`cut_command_output` of the files its command printed (:func:`files_printed`)."""
    paths, first, last = files
    status = bash_status(answer)
    if not paths or not workspace or status is None or status.exit_code != 0:
        return None
    output = answer[: status.start]
    size = len(output.encode("utf-8"))
    # Printed in part, the file is larger than what was printed: as large as read_file
    # reads whole.
    whole = first == 1 and last is None
    texts = read_shown_texts(workspace, paths, size if whole else max(size, SHOWN_FILE_MAX_BYTES))
    if texts is None:
        return None
    status_line = answer[status.start :]
    if len(texts) == 1:
        return cut_shown_file(
            output, status_line, paths[0], texts[0], max_tokens, counter, lines=(first, last)
        )
    named = list(zip(paths, texts, strict=True))
    return cut_shown_files(output, status_line, named, max_tokens, counter)


def page_of_shown_files(
    message: ToolMessage,
    command: str,
    max_tokens: int,
    counter: PageCounter,
    *,
    artifacts: str | None,
    workspace: str | None,
) -> str | None:
    """``message``, the result of ``command``, cut file by file to ``max_tokens`` from
    the whole output (its saved copy when the history holds it cut), as
    :func:`cut_command_output` cuts it; None when it cannot be (no ``cat`` of files,
    the copy gone, the files changed since).

    A compaction that keeps a result the model has not seen cuts it so: cut head and
    tail, a ``cat`` of four config files showed a local model the first file's value
    alone, and it answered that value for all four.

    Args:
        message: The result as the history holds it.
        command: The command line of its call.
        max_tokens: Bound on the text returned.
        counter: Counts it.
        artifacts: The session's folder of whole outputs the history holds cut.
        workspace: Where the command ran.
    """
    files = files_printed(command)
    if not files.paths:  # before the saved copy is read
        return None
    whole = cut_original(message, artifacts) if was_cut(message) else message.text
    if whole is None:
        return None
    cut = _cut_answer(files, whole, max_tokens, counter, workspace)
    return cut.text if cut is not None else None


def read_shown_texts(workspace: str, paths: Sequence[str], max_bytes: int) -> list[str] | None:
    """The texts of ``paths`` as they are now, or None when read_file would refuse any
    (outside the workspace, through a symlink or a hard link leading out included; no
    regular file; not UTF-8 text, a NUL byte included; a path it cannot name), or they
    hold more than ``max_bytes`` together.

    Args:
        workspace: Where the command ran (relative paths are under it).
        paths: The files the command printed, in order.
        max_bytes: The output's size: files larger together cannot be what it shows.
    """
    texts: list[str] = []
    left = max_bytes
    links: LinkCensus | None = None
    for path in paths:
        try:
            # By read_file's rules: a page note must name a file read_file will read.
            real = resolve_in_workspace(workspace, path, must_exist=True, suggest=False)
            data = read_regular(real, left)
            if data is None or binary_kind(data[:BINARY_SNIFF_BYTES], real.name) is not None:
                return None
            found = os.stat(real, follow_symlinks=False)
            if found.st_nlink > 1:
                links = links or LinkCensus(workspace_root(workspace))
                if links.links_inside(found) < found.st_nlink:
                    return None
        except (ToolError, OSError, ValueError):  # ValueError: a path no file system names
            return None
        left -= len(data)
        try:
            texts.append(data.decode("utf-8"))
        except UnicodeDecodeError:
            return None
    return texts


def cut_shown_files(
    output: str,
    status: str,
    files: Sequence[tuple[str, str]],
    max_tokens: int,
    counter: PageCounter,
) -> ShownCut | None:
    """``output`` (then ``status``) cut file by file to fit ``max_tokens``, or None when
    it is not the files' texts one after the other or a fair share of the room cannot
    show some file's first line (a minified file's one long line: the whole output is
    then cut head and tail).

    Args:
        output: What the command printed (a newline may end it where the last file
            ends without one: the shell tool's answer adds it).
        status: What follows the output in the answer (its status line).
        files: (path as the model should name it, text) of each file, in order.
        max_tokens: Bound on the result's tokens.
        counter: Counts them.

    Returns:
        The cut answer: whole files as printed, each other file's leading lines and its
        page note; None when it cannot be cut this way.
    """
    whole = "".join(text for _, text in files)
    if output not in (whole, whole + "\n") or not whole:
        return None
    costs = [counter.count_text(text) for _, text in files]

    def assembled(room: int) -> ShownCut | None:
        return _assemble(output, status, files, costs, room, counter)

    return _fitted(assembled, max_tokens, counter)


def cut_shown_file(
    output: str,
    status: str,
    path: str,
    text: str,
    max_tokens: int,
    counter: PageCounter,
    *,
    lines: tuple[int, int | None] = (1, None),
) -> ShownCut | None:
    """``output`` of a command that printed ``lines`` of one file (then ``status``) cut to
    fit ``max_tokens``: the leading lines printed and the page note ``read_file`` writes,
    after the file's path (``service.py: [showing lines 1-180 of 1201; call read_file
    with offset=180 to continue]``), as a read_file call from that line shows; None when
    the output is not those lines of the file (as they are, or numbered as ``cat -n``
    numbers them) or the room cannot show the first of them.

    Args:
        output: What the command printed (a newline may end it where the file ends
            without one: the shell tool's answer adds it).
        status: What follows the output in the answer (its status line).
        path: The file, as the model should name it.
        text: The file's text.
        max_tokens: Bound on the result's tokens.
        counter: Counts them.
        lines: The first line printed and the last asked for (1-based; None: to the
            end): ``tail -n +K F`` prints from K, ``sed -n 'A,Bp' F`` lines A-B.
    """
    first, last = lines
    plain = _lines(text)
    end = len(plain) if last is None else min(last, len(plain))
    every = _as_printed(output, plain, first, end)
    if every is None:
        return None
    status_cost = counter.count_text(status)

    def paged(room: int) -> ShownCut | None:
        kept = _leading_lines(path, every, room - status_cost, counter, (first, end))
        if kept < SHOWN_FILE_MIN_LINES:
            return None
        seen = ShownLines(first, first + kept - 1, len(every))
        return ShownCut(_page(path, every, kept, first) + status, {}, {path: seen})

    return _fitted(paged, max_tokens, counter)


def _as_printed(output: str, lines: list[str], first: int, end: int) -> list[str] | None:
    """A file's ``lines`` as ``output`` printed lines ``first``-``end`` of them: as they
    are, or numbered as ``cat -n`` and ``nl -ba`` number them (``%6d<TAB>``); None when it
    printed anything else (or nothing)."""

    def printed_as(shown: list[str]) -> bool:
        printed = "".join(shown[first - 1 : end])
        return bool(printed) and output in (printed, printed + "\n")

    if first < 1:
        return None
    if printed_as(lines):
        return lines
    numbered = [f"{n:6d}\t{line}" for n, line in enumerate(lines, start=1)]
    return numbered if printed_as(numbered) else None


def _fitted(
    build: Callable[[int], ShownCut | None], max_tokens: int, counter: PageCounter
) -> ShownCut | None:
    """The answer ``build`` makes for a room of tokens (its status line included) that
    fits ``max_tokens``: the room starts at the bound, and each attempt lowers it by what
    the last was over (the pieces' counts undershoot the whole's where tokens merge
    across their edges); None when ``build`` gives up or no attempt fits."""
    room = max_tokens
    for _ in range(FIT_ATTEMPTS):
        answer = build(room)
        if answer is None:
            return None
        if counter.fits(answer.text, max_tokens):
            return answer
        room -= max(counter.count_text(answer.text) - max_tokens, 1)
    return None


def _assemble(
    output: str,
    status: str,
    files: Sequence[tuple[str, str]],
    costs: Sequence[int],
    room: int,
    counter: PageCounter,
) -> ShownCut | None:
    """The answer for :func:`cut_shown_files` with ``room`` tokens to share (``costs``:
    each file's tokens)."""
    left = room - counter.count_text(status)
    shown: dict[int, str] = {}
    spans: dict[str, tuple[int, int]] = {}
    # Smallest first: a file under an equal share of what is left is shown whole, and
    # what it leaves over goes to the larger ones.
    order = sorted(range(len(files)), key=lambda i: costs[i])
    for rank, i in enumerate(order):
        share = left // (len(order) - rank)
        path, text = files[i]
        if costs[i] <= share:
            shown[i] = text
            left -= costs[i]
            continue
        lines = _lines(text)
        kept = _leading_lines(path, lines, share, counter)
        if kept < SHOWN_FILE_MIN_LINES:
            return None
        shown[i] = _page(path, lines, kept)
        spans[path] = (kept, len(lines))
        left -= counter.count_text(shown[i])
    body = "".join(shown[i] for i in range(len(files)))
    if output.endswith("\n") and not body.endswith("\n"):
        body += "\n"
    return ShownCut(body + status, spans)


def _page(path: str, lines: Sequence[str], kept: int, first: int = 1) -> str:
    """``kept`` of a file's ``lines`` from line ``first`` and their page note, after its
    path."""
    head = "".join(lines[first - 1 : first - 1 + kept])
    if not head.endswith("\n"):
        head += "\n"
    return f"{head}{path}: {page_note(first, first + kept - 1, len(lines))}\n"


def _leading_lines(
    path: str,
    lines: Sequence[str],
    share: int,
    counter: PageCounter,
    printed: tuple[int, int] | None = None,
) -> int:
    """How many of a file's ``lines`` fit ``share`` tokens with their page note, from the
    first of the lines ``printed`` (first, last; all when None), fewer than all of those
    (0: not even the first)."""
    first, end = printed or (1, len(lines))
    low, high = 0, end - first + 1  # low fits (0: nothing yet), high does not (all of them)
    while high - low > 1:
        mid = (low + high) // 2
        if counter.fits(_page(path, lines, mid, first), share):
            low = mid
        else:
            high = mid
    return low


def _lines(text: str) -> list[str]:
    """``text``'s lines as a file's are counted (ended by ``\\n`` only), each with its end."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    return [*lines, parts[-1]] if parts[-1] else lines


def shown_marker(cut: ShownCut) -> dict[str, object]:
    """The marker fields of a message cut by ``cut`` (see :data:`SHOWN_SPANS_KEY` and
    :data:`SHOWN_LINES_KEY`)."""
    fields: dict[str, object] = {
        SHOWN_SPANS_KEY: {path: list(span) for path, span in cut.spans.items()}
    }
    if cut.lines:
        fields[SHOWN_LINES_KEY] = {path: list(seen) for path, seen in cut.lines.items()}
    return fields


def shown_spans(message: BaseMessage, paths: Sequence[str]) -> Mapping[str, tuple[int, int]]:
    """The files of ``paths`` a message cut file by file shows in part: path → (last
    line shown, the file's lines), from its marker; empty for any other message. A
    malformed entry (a session imported from elsewhere) is left out.

    Args:
        message: A tool result as the history holds it.
        paths: The files its command printed (only theirs count).
    """
    meta = message.additional_kwargs.get(AGENTGRAPH_KEY)
    marked = meta.get(SHOWN_SPANS_KEY) if isinstance(meta, Mapping) else None
    if not isinstance(marked, Mapping):
        return {}
    spans: dict[str, tuple[int, int]] = {}
    for path in paths:
        span = marked.get(path)
        if (
            isinstance(span, list | tuple)
            and len(span) == 2
            and all(type(n) is int for n in span)
            and 1 <= span[0] < span[1]
        ):
            spans[path] = (span[0], span[1])
    return spans


def shown_lines(message: BaseMessage, path: str) -> ShownLines | None:
    """The lines of ``path`` a message cut by :func:`cut_shown_file` shows, from its
    marker; None for any other message or path, or a malformed entry (a session imported
    from elsewhere): lines out of order or the file's end shown.

    Args:
        message: A tool result as the history holds it.
        path: The file its command printed.
    """
    meta = message.additional_kwargs.get(AGENTGRAPH_KEY)
    marked = meta.get(SHOWN_LINES_KEY) if isinstance(meta, Mapping) else None
    entry = marked.get(path) if isinstance(marked, Mapping) else None
    if not (isinstance(entry, list | tuple) and len(entry) == 3):
        return None
    if not all(type(n) is int for n in entry):
        return None
    seen = ShownLines(*entry)
    return seen if 1 <= seen.first <= seen.last < seen.total else None
