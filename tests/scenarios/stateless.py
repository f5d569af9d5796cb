"""Stateless scripted models: every reply is a pure function of the request alone.

Shared by bench/bench_context_v3.py and tests/unit/test_stateless_personas.py. The
scripted model of tests/scenarios/long_task.py keeps its own step counter, so it reads
file ``n`` at step ``n`` whatever the prompt shows: it never notices when the agent loses
context. The personas here keep nothing between calls. What they have done is what the
request shows them (tool calls, tool results, summaries, notes, a progress ledger), so
an agent that hides a result they still need makes them re-read it, skip it or forget
its code, exactly as a real model would.

Workspace: ``logs/part_001.txt`` … (3-digit names: no basename is a substring of
another), each with exactly one code line ``CODE part_017: ORBIT-4402`` among log lines.
The task asks to read a range of files, note each code and write ``report.md``; a later
question turn asks which codes the model remembers. An editing task also asks to mark
each file done: every file has a line ``STATUS part_017: open`` to edit to ``done``,
which the model edits only where it sees the open line (it reads the file first), so
a harness that hides which files were changed makes it read them again or edit twice.
An editing task with a lag marks each file ``started`` first and ``done`` only after the
next file is started, so one file always waits for its second edit: the work a model
comes back to, as it comes back to a module it edits, tests and edits again.

Personas (:class:`Persona`), parameterised by tool names and argument keys so they drive
agentgraph, LangChain ``create_agent`` peers and deepagents:

* ``silent``: tool calls only. Reads the first file of the turn's range without read
  evidence (or reads on in a partly read file whose code is not visible), then writes
  the report with the codes it sees, then answers. On an editing task it first marks
  each file done in order: an edit where the file's open status line is in view, else a
  read of it (a file is done once the request shows its edit call, its ``done`` line,
  or a summary or ledger line naming it as edited). With a lag: the first file not done
  is started where its open line is in view; once it is, the next file is started, then
  it is marked done where its started line is in view (a file shows as started by a
  ``started`` line, a summary's ``Marked started`` line or a ledger line naming it
  edited once; as done by a ``done`` line, ``Marked done`` or a ledger's ``edited ×2``);
  a file whose line it must see but cannot is read first.
* ``note_taker``: as ``silent``, with a one-line note of the codes of the latest tool
  result in every tool-calling reply.
* ``re_reader``: as ``silent``, but a file it has read whose code it can no longer see is
  read again (the earliest first) before any new one: spirals show.
* ``searcher``: as ``re_reader``, but it first asks the harness's history search
  (``search_history``, the file's stem as the query) for a code it knows it read but
  cannot see, as agentgraph's system prompt tells a model to; it reads the file again
  only when the request's latest call is that search and the code is still not in view,
  or when the harness has no such tool.

Any persona may ask for several reads in one reply (``batch``), as models that call tools
in parallel do: the next ones it would read one after the other. Any persona may read
through a shell tool instead (``shell_tool``: ``cat logs/part_017.txt``, ``tail -n +88
…`` to read on), as models trained on a shell do, or with numbered lines a page at a
time (``shell_style="nl"``: ``nl -ba logs/part_017.txt | sed -n '1,200p'``), as Codex's
models do, or through a command that prints a file but is no plain read
(``shell_style="grep"``: ``grep -v '^#' logs/part_017.txt``, the file without comment
lines: all of it here), or several whole files in one command (``shell_style="multi"``:
``cat logs/part_001.txt logs/part_002.txt …``, a reply's reads in one, as models skimming
a folder do); the last two see no page note, so they are for files a read shows whole.
With ``shell_style="sed"`` it reads as ``cat`` does and changes a line through the shell too
(``sed -i 's/STATUS part_017: open/STATUS part_017: done/' logs/part_017.txt``), as models
trained on a shell edit, or with ``perl -pi -e 's/…/…/' F`` (``shell_style="perl"``: a
command no parser of command lines follows); with ``shell_style="heredoc"`` it writes the
file whole instead,
as the latest text of it in view shows it with the line changed (``cat >
logs/part_017.txt <<'EOF'`` … ``EOF``), as models that rewrite a file to change it do, and
reads it again first when no text of it with that line is in view. With
``shell_style="cd"`` it reads and edits as the ``sed`` style does from the file's folder
(``cd logs && cat part_017.txt``, ``cd logs && sed -i 's/…/…/' part_017.txt``), as models
that change directory first do.

Summarizers (:class:`Summarizer`), answering the harness's summary requests:
``faithful`` (every code, read file and file marked done it sees, and the task),
``lossy`` (every other code and file, and every other file marked done), ``verbose``
(faithful plus ~120 tokens of filler per file, unless the request states a limit ``at
most N tokens``) and ``terse`` (one line: the task only). Asked about named files
(agentgraph's question about the files a summary left unsaid), each answers about those
files only, as a model answers the question it is asked: a reading of several files
shows the others too.

Measurement lives in :class:`Recorder`, a separate object that sees each request and
reply after the reply is made and never influences one.
"""

from __future__ import annotations

import json
import posixpath
import re
import threading
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tests.scenarios.long_task import (
    LANGCHAIN_SUMMARY_MARKER,
    LINE_TEMPLATE,
    SUMMARY_MARKER,
    is_summary_request,
)

LOG_DIR = "logs"
NAME_PREFIX = "part_"
NAME_SUFFIX = ".txt"
NAME_DIGITS = 3
REPORT_NAME = "report.md"
SHELL_TOOL = "run_bash"
# Every summary marker the harnesses use: agentgraph's, then LangChain's/deepagents'.
SUMMARY_MARKERS = (SUMMARY_MARKER, LANGCHAIN_SUMMARY_MARKER)
SMALL_LINES = 36  # ~3 KB of log text
BIG_LINES = 240  # ~20 KB: more than one read page of agentgraph or deepagents
CODE_WORDS = ("ORBIT", "LAUNCH", "VECTOR", "APOGEE", "BURN", "DOCK", "GIMBAL", "HATCH")
Size = Literal["small", "big"]
FactAt = Literal["start", "middle"]
PersonaKind = Literal["silent", "note_taker", "re_reader", "searcher"]
SummarizerKind = Literal["faithful", "lossy", "verbose", "terse"]
PERSONAS: tuple[PersonaKind, ...] = ("silent", "note_taker", "re_reader")
# Not in the default runs: against a harness without a history search it is the
# re-reader, and against agentgraph it differs only where a code left the prompt.
EXTRA_PERSONAS: tuple[PersonaKind, ...] = ("searcher",)
# agentgraph's search over the whole transcript, which the searcher asks first.
SEARCH_TOOL = "search_history"
SUMMARIZERS: tuple[SummarizerKind, ...] = ("faithful", "lossy", "verbose", "terse")

CODE_RE = re.compile(r"CODE (part_\d{3}): ([A-Z]+-\d{4})")
# The line an editing task changes from ``open`` to ``done`` in every file (with a lag:
# to ``started``, then to ``done``).
STATUS_RE = re.compile(r"STATUS (part_\d{3}): (open|started|done)")
EDIT_TASK_PHRASE = ", mark it done"
LAG_TASK_PHRASE = ", mark it started, then done once the next file is started"
# A line naming files as edited: the summarizers' ``Marked done: part_001.txt, …`` and
# a ledger's ``- logs/part_017.txt: edited (+1 −1 lines)`` or run ``… (49 files): edited``.
# (agentgraph's ledger says a file a here-document wrote was ``written by a command``.)
EDITED_LINE_RE = re.compile(r"Marked done|\bedited\b|\bwritten(?: ×\d+)? by a command")
SUMMARY_EDITED = "Marked done"
SUMMARY_STARTED = "Marked started"
# The label of a summary's line on the work left (agentgraph's handoff prompt asks for
# "Remaining work").
SUMMARY_REMAINING = "Remaining work"
# With a lag, a file changed twice is done (the ledger's ``edited ×2``) and a file
# changed once is started (``edited`` alone), as the summarizers' lines say.
LAG_DONE_LINE_RE = re.compile(r"Marked done|\bedited ×\d|\bwritten ×\d+ by a command")
LAG_STARTED_LINE_RE = re.compile(r"Marked started|\bedited\b(?! ×)|\bwritten by a command")
NAME_RE = re.compile(r"(?<![\w.-])part_\d{3}\.txt(?![\w])")
# The first user message of a task turn (its two names are not read evidence).
TASK_MESSAGE_RE = re.compile(
    r"Read every file from \S*?part_(\d{3})\.txt to \S*?part_(\d{3})\.txt, one by one"
    f"({re.escape(EDIT_TASK_PHRASE)}|{re.escape(LAG_TASK_PHRASE)})?"
)
QUESTION = "Which codes do you remember? List them."
# How a summary restates the turn (no file names: they would read as evidence).
SUMMARY_EDIT_MARK = " and mark each done"
SUMMARY_LAG_MARK = " and mark each started, then done"
SUMMARY_TASK_RE = re.compile(
    r"Task: read log files (\d+)-(\d+)\b"
    f"({re.escape(SUMMARY_EDIT_MARK)}|{re.escape(SUMMARY_LAG_MARK)})?"
)
SUMMARY_QUESTION = "Open question: the user asked which codes are remembered."
SUMMARY_WRITTEN = f"{REPORT_NAME}: written"
# A write of the report as a transcript shows it to a summarizer, in text: agentgraph's
# ``[tool call] write_file({"path": "report.md", …``, LangChain's ``'name': 'write_file',
# 'args': {'file_path': '/report.md', …``.
WRITE_CALL_TEXT_RE = re.compile(r"write_file\W[^\n]{0,60}?" + re.escape(REPORT_NAME))
SUMMARY_HEADER = "Handoff summary."
# The persona's answer when no task or question is in view (the harness lost the task).
NO_TASK_ANSWER = "I see no task to work on."
# agentgraph's read_file page note; deepagents' read_file header.
AGENTGRAPH_PAGE_RE = re.compile(r"\[showing lines (\d+)-(\d+) of (\d+); ([^\]\n]*)\]")
DEEPAGENTS_PAGE_RE = re.compile(r"@@ lines (\d+)-(\d+)(?: of (\d+))?([^@\n]*)@@")
OFFSET_IN_NOTE_RE = re.compile(r"offset[= ](\d+)")
# agentgraph's progress ledger: a run of consecutive numbered files, and a partly read one.
LEDGER_RUN_RE = re.compile(
    r"(?<![\w./-])([\w./-]*?)(\d+)(\.[A-Za-z0-9]+)[ \t]*(?:…|\.\.\.)[ \t]*"
    r"([\w./-]*?)(\d+)(\.[A-Za-z0-9]+)"
)
# ``part_003.txt (lines 1-87 of 240)``; merged spans too: ``(lines 1-62, 100-150 of 240)``.
LEDGER_PARTIAL_RE = re.compile(
    r"(?<![\w.-])(part_\d{3}\.txt) \(lines (\d+)-(\d+)((?:, \d+-\d+)*)(?: of (\d+))?\)"
)
# A shell persona's read command: ``cat logs/part_017.txt``, ``tail -n +88 logs/…``; in
# the numbered style ``nl -ba logs/part_017.txt | sed -n '1,200p'``; in the grep style
# ``grep -v '^#' logs/part_017.txt``.
SHELL_READ_RE = re.compile(
    r"(?:cd (?P<cd>\S+) && )?(?:cat|tail -n \+(?P<from>\d+)) (?P<path>\S*part_\d{3}\.txt)"
    r"|nl -ba (?P<nl_path>\S*part_\d{3}\.txt) \| sed -n '(?P<first>\d+),(?P<last>\d+)p'"
    r"|grep -v '\^#' (?P<grep_path>\S*part_\d{3}\.txt)"
)
# The several-file style's command: ``cat logs/part_001.txt logs/part_002.txt …``.
SHELL_MULTI_RE = re.compile(r"cat (\S*part_\d{3}\.txt(?: \S*part_\d{3}\.txt)+)")
# The shell-editing style's change of one line: ``sed -i 's/OLD/NEW/' logs/part_017.txt``,
# or ``perl -pi -e`` with the same script (the status lines hold no character sed or
# perl would read as special).
SHELL_EDIT_RE = re.compile(
    r"(?:cd (?P<cd>\S+) && )?(?P<program>sed -i|perl -pi -e) 's/(?P<old>[^/']+)/(?P<new>[^/']+)/'"
    r" (?P<path>\S*part_\d{3}\.txt)"
)
# The here-document style's write of a whole file (its text as the model last saw it).
SHELL_HEREDOC_RE = re.compile(
    r"cat > (?P<path>\S*part_\d{3}\.txt) <<'EOF'\n(?P<body>.*?)EOF", re.DOTALL
)
# agentgraph's whole file shown again after a compaction, its lines numbered (a model
# reads the text without the numbers).
REREAD_FILE_RE = re.compile(
    r"\[File re-read from disk after compaction: \S+ — lines 1-(\d+) of (\d+)\]\n"
    r"(?P<lines>(?: *\d+\t[^\n]*(?:\n|$))*)"
)
# A run_bash answer's status line (the text before it is the command's output).
BASH_STATUS_RE = re.compile(r"\n?\[exit code -?\d+[^\]]*\]\s*$")
# The styles that change a line with one command (``sed -i``, ``perl -pi -e``).
_SHELL_EDITORS = ("sed", "perl", "cd")
ShellStyle = Literal["cat", "nl", "grep", "multi", "sed", "perl", "heredoc", "cd"]
SHELL_STYLES: tuple[ShellStyle, ...] = (
    "cat",
    "nl",
    "grep",
    "multi",
    "sed",
    "perl",
    "heredoc",
    "cd",
)
# Lines a numbered-style shell read asks for at a time.
NL_PAGE_LINES = 200
LIMIT_RE = re.compile(r"at most ([\d,]+) tokens", re.IGNORECASE)
# agentgraph's follow-up question about the files a summary left unsaid, which names
# them: a summarizer answers about those (a reading of several files shows others too).
ASKED_FILES_RE = re.compile(r"which were read in it: ([^\n]*?)\. Their readings follow")
TRUNCATION_RE = re.compile(r"…\d[\d,]* tokens truncated…|tokens truncated")
# ~120 tokens (the server counts 4 characters a token) of prose per file mentioned.
FILLER = (
    "The file was opened and read from its first line to its last line with care. Its "
    "log lines describe the subsystems reporting nominal values and the checksums that "
    "go with them, none of which matter for the task beyond the single code line noted "
    "here. Nothing in it looked unusual, no error was reported, and no follow-up is "
    "needed for this file; it can be considered done for the purpose of the report."
)


# --- workspace --------------------------------------------------------------------------


def basename(index: int) -> str:
    """``part_017.txt`` for file 17."""
    return f"{NAME_PREFIX}{index:0{NAME_DIGITS}d}{NAME_SUFFIX}"


def rel_path(index: int) -> str:
    """``logs/part_017.txt`` for file 17."""
    return f"{LOG_DIR}/{basename(index)}"


def code_for(index: int) -> str:
    """The code line planted in file ``index`` (distinct per file, deterministic)."""
    word = CODE_WORDS[(index - 1) % len(CODE_WORDS)]
    return f"CODE {NAME_PREFIX}{index:0{NAME_DIGITS}d}: {word}-{(index * 7919) % 9000 + 1000}"


def index_of(path: str) -> int:
    """File number of a workspace path or basename (``logs/part_017.txt`` -> 17)."""
    name = path.rsplit("/", 1)[-1]
    return int(name.removeprefix(NAME_PREFIX).removesuffix(NAME_SUFFIX))


def status_line(index: int, state: str) -> str:
    """File ``index``'s status line (``STATUS part_017: open``)."""
    return f"STATUS {NAME_PREFIX}{index:0{NAME_DIGITS}d}: {state}"


def make_workspace(
    root: Path,
    *,
    files: int,
    size: Size = "small",
    fact_at: FactAt = "start",
    edits: bool = False,
) -> list[str]:
    """Write ``files`` log files under ``root/logs``; return their relative paths.

    Each holds exactly one code line (:func:`code_for`): its first line (``start``) or
    its middle line (``middle``), among ``SMALL_LINES`` or ``BIG_LINES`` lines in all;
    with ``edits``, also an open status line (:func:`status_line`) on its second line
    (its first when the code is mid-file).
    """
    total = SMALL_LINES if size == "small" else BIG_LINES
    at = 0 if fact_at == "start" else total // 2
    paths = []
    for i in range(1, files + 1):
        lines = [
            LINE_TEMPLATE.format(n=n, s=(n * 7 + i) % 13, v=(n * 31) % 997, c=n * i)
            for n in range(total - 1)
        ]
        lines.insert(at, code_for(i) + "\n")
        if edits:
            lines.insert(1 if at == 0 else 0, status_line(i, "open") + "\n")
        path = root / rel_path(i)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(lines), encoding="utf-8")
        paths.append(rel_path(i))
    return paths


def planted_codes(paths: list[str]) -> set[str]:
    """The code lines :func:`make_workspace` planted in ``paths``."""
    return {code_for(index_of(p)) for p in paths}


def _code_file(code: str) -> str:
    """``part_017.txt`` for the code line ``CODE part_017: ORBIT-4402``."""
    found = CODE_RE.match(code)
    return f"{found.group(1)}{NAME_SUFFIX}" if found else ""


def codes_in(text: str) -> set[str]:
    """Code lines (``CODE part_017: ORBIT-4402``) found in ``text``."""
    return {f"CODE {stem}: {value}" for stem, value in CODE_RE.findall(text)}


def marked_done(root: Path, paths: list[str], originals: Mapping[str, str] | None = None) -> int:
    """How many of ``paths`` (under ``root``) have their status line edited to done.

    With ``originals`` (each path's text as :func:`make_workspace` wrote it), only files
    that are their original text with that one line changed count: a file rewritten
    whole from a text that lacked some of its lines is marked, but damaged.
    """
    done = 0
    for p in paths:
        text = (root / p).read_text(encoding="utf-8")
        line = status_line(index_of(p), "done")
        if originals is None:
            done += line in text
        else:
            done += text == originals[p].replace(status_line(index_of(p), "open"), line, 1)
    return done


def task_text(first: int, last: int, edits: bool = False, lag: bool = False) -> str:
    """The user message of a task turn over files ``first``..``last`` (with ``edits``:
    marking each file done too; with ``lag`` as well, started first and done once the
    next file is started)."""
    line = f"`STATUS {NAME_PREFIX}NNN: open`"
    mark = ""
    if edits and lag:
        mark = f"{LAG_TASK_PHRASE} (edit its line {line} to end in `started`, later `done`)"
    elif edits:
        mark = f"{EDIT_TASK_PHRASE} (edit its line {line} to end in `done`)"
    return (
        f"Read every file from {rel_path(first)} to {rel_path(last)}, one by one{mark}, "
        f"note each file's code, then write {REPORT_NAME} listing them."
    )


# --- evidence: what the request shows --------------------------------------------------


@dataclass(frozen=True)
class Turn:
    """The turn a request belongs to: a task over files ``first``..``last`` or the question."""

    kind: Literal["task", "question"]
    first: int = 0
    last: int = 0
    edits: bool = False
    lag: bool = False


@dataclass(frozen=True)
class Evidence:
    """Everything a persona or summarizer decides from.

    Attributes:
        codes: Code lines visible anywhere in the request.
        read: Per basename shown as read: ``None`` when read to its end, else
            ``(next offset, line count)`` of a file read only up to that line.
        turn: The latest turn marker (task message, question, or a summary's restatement).
        written: A write of the report shows after that marker (or before a restatement
            of the same task).
        edited: Basenames shown as marked done: an edit call or ``done`` status line
            naming them, or a line naming them as edited (a summary's, a ledger's).
        open: Basenames whose ``open`` status line is in view.
        done: With a lag, basenames shown as marked done: a ``done`` status line, or a
            line naming them ``Marked done`` or ``edited ×N``.
        started: With a lag, basenames shown as started and not done: a ``started``
            status line, or a line naming them ``Marked started`` or ``edited`` once.
        started_view: Basenames whose ``started`` status line is in view, not done.
    """

    codes: frozenset[str]
    read: Mapping[str, tuple[int, int] | None]
    turn: Turn | None
    written: bool
    edited: frozenset[str] = frozenset()
    open: frozenset[str] = frozenset()
    done: frozenset[str] = frozenset()
    started: frozenset[str] = frozenset()
    started_view: frozenset[str] = frozenset()

    @property
    def coded(self) -> frozenset[str]:
        """Basenames whose code is visible."""
        return frozenset(
            f"{c.split(':', 1)[0].removeprefix('CODE ')}{NAME_SUFFIX}" for c in self.codes
        )


def content_text(content: Any) -> str:
    """The text of a message's content (a string or a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _segments(body: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(kind, text) in prompt order: each message's ``text``, then each of its ``call``s."""
    for message in body.get("messages") or []:
        yield "text", content_text(message.get("content"))
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            yield "call", f"{function.get('name', '')} {function.get('arguments', '')}"


def expand_run(match: re.Match[str]) -> list[str]:
    """Basenames of a ledger run ``part_001.txt … part_120.txt`` (both ends included).

    Empty unless both ends share the prefix, the suffix and the digit width.
    """
    prefix, low, suffix, prefix2, high, suffix2 = match.groups()
    if prefix != prefix2 or suffix != suffix2 or len(low) != len(high) or int(high) < int(low):
        return []
    stem = prefix.rsplit("/", 1)[-1]
    return [f"{stem}{n:0{len(low)}d}{suffix}" for n in range(int(low), int(high) + 1)]


def _page_state(end: int, total: int | None, rest: str) -> tuple[int, int] | None:
    """A page note's meaning: None (the file's end was shown) or (next offset, total)."""
    if total is not None and end >= total:
        return None
    found = OFFSET_IN_NOTE_RE.search(rest)
    if found is None:
        return None  # no way to continue: nothing left to page
    return int(found.group(1)), total or 0


def _ledger_state(m: re.Match[str]) -> tuple[int, int] | None:
    """A partial ledger entry's meaning: read on after its span that starts at line 1."""
    first, end, total = int(m.group(2)), int(m.group(3)), int(m.group(5) or 0)
    if first == 1 and total and end >= total:
        return None
    return (end if first == 1 else 0), total


def _task_turn(match: re.Match[str]) -> Turn:
    """The task turn a task message or a summary's restatement names: its range, and
    whether it asks to mark each file done (and with a lag)."""
    mark = match.group(3)
    lag = mark in (LAG_TASK_PHRASE, SUMMARY_LAG_MARK)
    return Turn("task", int(match.group(1)), int(match.group(2)), mark is not None, lag)


def _text_events(text: str) -> list[tuple[int, int, str, Any]]:
    """Evidence events of one text, as (position, order, kind, value)."""
    events: list[tuple[int, int, str, Any]] = []
    # A task message names the ends of its range: that is no evidence of a read.
    tasks = list(TASK_MESSAGE_RE.finditer(text))
    for m in tasks:
        events.append((m.start(), 3, "turn", _task_turn(m)))
    if (at := text.find(QUESTION)) >= 0:
        events.append((at, 3, "turn", Turn("question")))
    for m in NAME_RE.finditer(text):
        if not any(t.start() <= m.start() < t.end() for t in tasks):
            events.append((m.start(), 0, "mention", m.group(0)))
    for m in LEDGER_RUN_RE.finditer(text):
        events.append((m.start(), 1, "run", expand_run(m)))
    for m in LEDGER_PARTIAL_RE.finditer(text):
        events.append((m.start(), 1, "partial", (m.group(1), _ledger_state(m))))
    for m in AGENTGRAPH_PAGE_RE.finditer(text):
        state = _page_state(int(m.group(2)), int(m.group(3)), m.group(4))
        events.append((m.start(), 2, "page", state))
    for m in DEEPAGENTS_PAGE_RE.finditer(text):
        total = int(m.group(3)) if m.group(3) else None
        events.append((m.start(), 2, "page", _page_state(int(m.group(2)), total, m.group(4))))
    for m in SUMMARY_TASK_RE.finditer(text):
        events.append((m.start(), 3, "turn", _task_turn(m)))
    if (at := text.find(SUMMARY_QUESTION)) >= 0:
        events.append((at, 3, "turn", Turn("question")))
    if (at := text.find(SUMMARY_WRITTEN)) >= 0:
        events.append((at, 4, "written", True))
    for m in WRITE_CALL_TEXT_RE.finditer(text):
        events.append((m.start(), 4, "written", True))
    return sorted(events, key=lambda e: (e[0], e[1]))


def edited_names(text: str, pattern: re.Pattern[str] = EDITED_LINE_RE) -> set[str]:
    """Basenames a line of ``text`` matching ``pattern`` names (as edited by default)."""
    out: set[str] = set()
    for line in text.splitlines():
        if pattern.search(line):
            out.update(NAME_RE.findall(line))
            for m in LEDGER_RUN_RE.finditer(line):
                out.update(expand_run(m))
    return out


def scan(body: Mapping[str, Any]) -> Evidence:
    """What the request shows: visible codes, files read (and how far), turn, report.

    Read evidence, later evidence winning: a basename in any text or tool-call
    argument other than a task message (a read call, a masked placeholder, a summary, a
    note); the files of a ledger run ``part_001.txt … part_120.txt (120 files)``; a
    ledger entry ``part_003.txt (lines 1-87 of 240)`` (read up to line 87); a page note
    (agentgraph's ``[showing lines 1-87 of 240; call read_file with offset=87 to
    continue]``, deepagents' ``@@ lines 1-100 of 240 | next offset 100 @@``) tells how
    far the file last named before it was read. Edit evidence: a ``done`` status line
    anywhere (an edit call's argument, a file read after its edit) or a line naming the
    file as edited (``EDITED_LINE_RE``); an ``open`` status line otherwise.
    """
    codes: set[str] = set()
    read: dict[str, tuple[int, int] | None] = {}
    turn: Turn | None = None
    written = False
    last: str | None = None
    edited: set[str] = set()
    status: dict[str, set[str]] = {"open": set(), "started": set(), "done": set()}
    done: set[str] = set()
    started: set[str] = set()
    for kind, text in _segments(body):
        codes |= codes_in(text)
        edited |= edited_names(text)
        done |= edited_names(text, LAG_DONE_LINE_RE)
        started |= edited_names(text, LAG_STARTED_LINE_RE)
        for stem, state in STATUS_RE.findall(text):
            status[state].add(stem + NAME_SUFFIX)
        if kind == "call" and REPORT_NAME in text and "write" in text.split(" ", 1)[0]:
            written = True
        for _pos, _order, event, value in _text_events(text):
            if event == "mention":
                read[value], last = None, value
            elif event == "run":
                read.update(dict.fromkeys(value))
            elif event == "partial":
                name, state = value
                read[name], last = state, name
            elif event == "page" and last is not None:
                read[last] = value
            elif event == "turn":
                # A restatement of the same task (its message kept after a summary
                # that says the report is written) is the same work, as a real model
                # reads it; a different task or the question starts afresh.
                written = written and value == turn
                turn = value
            elif event == "written":
                written = True
    edited |= status["done"]
    done |= status["done"]
    opened = status["open"] - edited - status["started"]
    return Evidence(
        frozenset(codes),
        read,
        turn,
        written,
        frozenset(edited),
        frozenset(opened),
        frozenset(done),
        frozenset((started | status["started"]) - done),
        frozenset(status["started"] - done),
    )


def visible_codes(body: Mapping[str, Any]) -> set[str]:
    """Every code line in any message text or tool-call argument of the request."""
    return set(scan(body).codes)


def read_evidence(body: Mapping[str, Any]) -> set[str]:
    """Basenames the request shows as read (fully or in part; see :func:`scan`)."""
    return set(scan(body).read)


def last_tool_result(body: Mapping[str, Any]) -> str:
    """Text of the request's most recent tool result ("" if none)."""
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "tool":
            return content_text(message.get("content"))
    return ""


# --- personas ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Persona:
    """A stateless scripted model of the main agent (a FakeOpenAIServer reply callable).

    Attributes:
        kind: ``silent``, ``note_taker`` or ``re_reader`` (see the module docstring).
        path_key: Argument name of the file path in both tool calls.
        path_prefix: Prepended to each path (``"/"`` for deepagents' absolute paths).
        read_tool: Name of the read tool.
        write_tool: Name of the write tool.
        offset_key: Argument name of the first line to read (only sent to read on).
        edit_tool: Name of the edit tool, and its arguments' names: ``old_key`` (the
            text replaced) and ``new_key`` (its replacement).
        batch: Reads asked for in one reply (the next ones :meth:`next_read` would
            ask for, one after the other), as models that call tools in parallel do.
        shell_tool: When set, the name of a shell tool every read goes through, as a
            ``command`` argument: ``cat PATH``, or ``tail -n +K PATH`` to read on.
        shell_style: ``cat`` (above); ``nl``: ``nl -ba PATH | sed -n 'K,Lp'``, a page
            of :data:`NL_PAGE_LINES` numbered lines from line K; ``grep``: ``grep -v
            '^#' PATH``; ``multi``: a reply's whole-file reads in one ``cat A B …``;
            ``sed``: edits with ``sed -i``; ``perl``: with ``perl -pi -e``; ``heredoc``:
            edits by writing the file whole with ``cat > PATH <<'EOF'`` (see the
            module docstring); ``cd``: as ``sed`` from the file's folder (``cd logs &&
            cat part_017.txt``).
    """

    kind: PersonaKind = "silent"
    path_key: str = "path"
    path_prefix: str = ""
    read_tool: str = "read_file"
    write_tool: str = "write_file"
    offset_key: str = "offset"
    edit_tool: str = "edit_file"
    old_key: str = "old_string"
    new_key: str = "new_string"
    batch: int = 1
    shell_tool: str = ""
    shell_style: ShellStyle = "cat"

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        ev = scan(body)
        remembered = json.dumps(sorted(ev.codes))
        if body.get("tool_choice") == "none" or not body.get("tools"):
            return {"content": f"Stopped before the end. Codes I remember: {remembered}"}
        if ev.turn is None:
            return {"content": NO_TASK_ANSWER}
        if ev.turn.kind == "question":
            return {"content": f"Codes I remember: {remembered}"}
        step = None
        if ev.turn.edits:
            step = self.next_lag_edit(ev, ev.turn) if ev.turn.lag else self.next_edit(ev, ev.turn)
        if step is not None:
            index, in_view, old, new = step
            args = {self.path_key: self.path_prefix + rel_path(index)}
            if not in_view:  # the line must be seen before it is edited
                return self._calls(body, self.read_tool, args)
            args[self.old_key] = status_line(index, old)
            args[self.new_key] = status_line(index, new)
            return self._calls(body, self.edit_tool, args)
        steps = self.next_reads(ev, ev.turn)
        search = self._search_first(body, ev, steps)
        if search is not None:
            return self._calls(body, SEARCH_TOOL, {"query": search})
        if steps:
            reads: list[dict[str, Any]] = []
            for index, offset in steps:
                args: dict[str, Any] = {self.path_key: self.path_prefix + rel_path(index)}
                if offset:
                    args[self.offset_key] = offset
                reads.append(args)
            return self._calls(body, self.read_tool, *reads)
        if not ev.written:
            report = "".join(f"{c}\n" for c in sorted(ev.codes)) or "no codes found\n"
            args = {self.path_key: self.path_prefix + REPORT_NAME, "content": report}
            return self._calls(body, self.write_tool, args)
        return {"content": f"Done: {REPORT_NAME} lists {len(ev.codes)} codes."}

    @staticmethod
    def next_edit(ev: Evidence, turn: Turn) -> tuple[int, bool, str, str] | None:
        """(file number, whether its open status line is in view, the state it changes
        from, to) of the first file of the turn's range not shown as marked done, or None
        when all are."""
        for index in range(turn.first, turn.last + 1):
            name = basename(index)
            if name not in ev.edited:
                return index, name in ev.open, "open", "done"
        return None

    @staticmethod
    def next_lag_edit(ev: Evidence, turn: Turn) -> tuple[int, bool, str, str] | None:
        """The next edit of a task with a lag: (file number, whether the line it changes
        is in view, the state it changes from, to), or None when every file is done.

        The first file not done is started; once it is, the next file is started first
        (when the range has one not yet started), then the file is marked done.
        """
        for index in range(turn.first, turn.last + 1):
            name = basename(index)
            if name in ev.done:
                continue
            if name not in ev.started:
                return index, name in ev.open, "open", "started"
            after = basename(index + 1)
            if index < turn.last and after not in ev.started and after not in ev.done:
                return index + 1, after in ev.open, "open", "started"
            return index, name in ev.started_view, "started", "done"
        return None

    def next_read(self, ev: Evidence, turn: Turn) -> tuple[int, int] | None:
        """(file number, offset) of the next read of the turn's range, or None when done."""
        steps = self._reads(ev, turn, 1)
        return steps[0] if steps else None

    def next_reads(self, ev: Evidence, turn: Turn) -> list[tuple[int, int]]:
        """The next :attr:`batch` reads of the turn's range (empty when done)."""
        return self._reads(ev, turn, self.batch)

    def _reads(self, ev: Evidence, turn: Turn, limit: int) -> list[tuple[int, int]]:
        coded = ev.coded
        out: list[tuple[int, int]] = []
        for index in range(turn.first, turn.last + 1):
            if len(out) == limit:
                break
            name = basename(index)
            if name in coded:
                continue
            if name not in ev.read:
                out.append((index, 0))
                continue
            state = ev.read[name]
            if state is not None:
                out.append((index, state[0]))  # read on in a partly read file
            elif self.kind in ("re_reader", "searcher"):
                out.append((index, 0))  # read, but its code is out of sight: read it again
        return out

    def _search_first(
        self, body: Mapping[str, Any], ev: Evidence, steps: Sequence[tuple[int, int]]
    ) -> str | None:
        """The searcher's query before it reads a file again (see the module docstring),
        or None: not a searcher, no search tool, not a re-read, or just searched."""
        if self.kind != "searcher" or not steps or steps[0][1]:
            return None
        name = basename(steps[0][0])
        if name not in ev.read or not _offers_tool(body, SEARCH_TOOL):
            return None
        query = name.rsplit(".", 1)[0]
        last = _last_call(body)
        if last is not None and last[0] == SEARCH_TOOL and last[1].get("query") == query:
            return None
        return query

    def _calls(self, body: Mapping[str, Any], name: str, *calls: dict[str, Any]) -> dict[str, Any]:
        if self.shell_tool and name == self.read_tool:
            name, calls = self.shell_tool, self._shell_calls(calls)
        elif self.shell_tool and self.shell_style in _SHELL_EDITORS and name == self.edit_tool:
            name, calls = self.shell_tool, tuple(self._shell_edit(c) for c in calls)
        elif self.shell_tool and self.shell_style == "heredoc" and name == self.edit_tool:
            name, calls = self.shell_tool, tuple(self._heredoc_edit(body, c) for c in calls)
        reply: dict[str, Any] = {
            "tool_calls": [{"name": name, "arguments": args} for args in calls]
        }
        if self.kind == "note_taker":
            found = sorted(codes_in(last_tool_result(body)))
            reply["content"] = "noted: " + ("; ".join(found) or "no code in the last result")
        return reply

    def _shell_calls(self, calls: Sequence[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
        """The shell commands of a reply's reads: one each, but in the several-file style
        the whole files of the reply in one ``cat`` (a file read on gets its own)."""
        if self.shell_style != "multi":
            return tuple(self._shell(c) for c in calls)
        whole = [str(c[self.path_key]) for c in calls if not c.get(self.offset_key)]
        out = [self._shell(c) for c in calls if c.get(self.offset_key)]
        if whole:
            out.insert(0, {"command": "cat " + " ".join(whole)})
        return tuple(out)

    def _shell_edit(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """The shell-editing style's command for an edit call's arguments."""
        old, new, path = args[self.old_key], args[self.new_key], args[self.path_key]
        program = "perl -pi -e" if self.shell_style == "perl" else "sed -i"
        return {"command": self._in_folder(f"{program} 's/{old}/{new}/'", str(path))}

    def _heredoc_edit(self, body: Mapping[str, Any], args: Mapping[str, Any]) -> dict[str, Any]:
        """The here-document style's command for an edit call's arguments: the file as
        the latest text of it in view shows it (a read's output, or an earlier write of
        it) with the line changed; a read of the file when no such text is in view."""
        old, new, path = args[self.old_key], args[self.new_key], args[self.path_key]
        text = _latest_text_with(body, str(old))
        if text is None:
            return self._shell({self.path_key: path})
        return {"command": f"cat > {path} <<'EOF'\n{text.replace(old, new, 1)}EOF"}

    def _shell(self, args: Mapping[str, Any]) -> dict[str, Any]:
        path = args[self.path_key]
        offset = args.get(self.offset_key) or 0
        if self.shell_style == "nl":
            first = offset + 1
            command = f"nl -ba {path} | sed -n '{first},{first + NL_PAGE_LINES - 1}p'"
        elif self.shell_style == "grep":
            command = f"grep -v '^#' {path}"
        else:
            program = f"tail -n +{offset + 1}" if offset else "cat"
            command = self._in_folder(program, str(path))
        return {"command": command}

    def _in_folder(self, program: str, path: str) -> str:
        """``PROGRAM PATH``; in the ``cd`` style ``cd FOLDER && PROGRAM NAME``."""
        folder, _, name = path.rpartition("/")
        if self.shell_style != "cd" or not folder:
            return f"{program} {path}"
        return f"cd {folder} && {program} {name}"


def _latest_text_with(body: Mapping[str, Any], line: str) -> str | None:
    """The newest whole text of a file holding ``line`` in the request: a run_bash
    output (without its status line), the text of a here-document write, or a whole file
    shown again after a compaction (without its line numbers); None."""
    for message in reversed(body.get("messages") or []):
        texts: list[str] = []
        if message.get("role") == "tool":
            texts.append(BASH_STATUS_RE.sub("", content_text(message.get("content"))))
        for shown in REREAD_FILE_RE.finditer(content_text(message.get("content"))):
            if shown[1] == shown[2]:
                numbered = shown["lines"].splitlines()
                texts.append("".join(f"{n.split(chr(9), 1)[1]}\n" for n in numbered))
        for call in message.get("tool_calls") or []:
            try:
                args = json.loads((call.get("function") or {}).get("arguments") or "{}")
            except ValueError:
                continue
            written = SHELL_HEREDOC_RE.fullmatch(str(args.get("command", "")).strip())
            if written is not None:
                texts.append(written["body"])
        for text in texts:
            if line in text.splitlines() and not TRUNCATION_RE.search(text):
                return text if text.endswith("\n") else text + "\n"
    return None


def _offers_tool(body: Mapping[str, Any], name: str) -> bool:
    for spec in body.get("tools") or []:
        function = spec.get("function") if isinstance(spec, Mapping) else None
        if isinstance(function, Mapping) and function.get("name") == name:
            return True
    return False


def _last_call(body: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """(name, arguments) of the request's latest tool call, or None."""
    for message in reversed(body.get("messages") or []):
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        if calls:
            function = calls[-1].get("function") or {}
            try:
                args = json.loads(function.get("arguments") or "{}")
            except ValueError:
                args = {}
            return str(function.get("name")), args if isinstance(args, dict) else {}
    return None


def shell_reads(command: str) -> list[tuple[str, int, int | None, bool]]:
    """Every read a shell persona's command asks for (:func:`shell_read`'s tuples): one,
    several for the several-file style's ``cat A B …``, none for any other command."""
    several = SHELL_MULTI_RE.fullmatch(command.strip())
    if several is not None:
        return [(path, 1, None, False) for path in several.group(1).split(" ")]
    one = shell_read(command)
    return [] if one is None else [one]


def shell_read(command: str) -> tuple[str, int, int | None, bool] | None:
    """What a shell persona's read command asks for: (path, first line, last line or
    None for the end, whether the lines come numbered), or None for any other command."""
    found = SHELL_READ_RE.fullmatch(command.strip())
    if found is None:
        return None
    if found["nl_path"] is not None:
        return found["nl_path"], int(found["first"]), int(found["last"]), True
    if found["grep_path"] is not None:
        return found["grep_path"], 1, None, False
    return shell_path(found), int(found["from"] or 1), None, False


def shell_path(found: re.Match[str]) -> str:
    """The path a :data:`SHELL_READ_RE` or :data:`SHELL_EDIT_RE` match names, under the
    folder its ``cd`` names."""
    return posixpath.join(found["cd"], found["path"]) if found["cd"] else found["path"]


def persona_for(
    kind: PersonaKind,
    harness: str,
    batch: int = 1,
    shell: ShellStyle | None = None,
) -> Persona:
    """The persona speaking ``harness``'s tool names and arguments (``shell``: reading
    through ``run_bash`` in that style)."""
    style: dict[str, Any] = {"shell_tool": SHELL_TOOL, "shell_style": shell} if shell else {}
    if harness == "deepagents":
        return Persona(kind, path_key="file_path", path_prefix="/", batch=batch, **style)
    return Persona(kind, batch=batch, **style)


# --- summarizers ------------------------------------------------------------------------


@dataclass(frozen=True)
class Summarizer:
    """A stateless scripted summarizer (answers the harness's summary requests)."""

    kind: SummarizerKind = "faithful"

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        ev = scan(body)
        head = [SUMMARY_HEADER]
        if ev.turn is not None and ev.turn.kind == "task":
            mark = SUMMARY_LAG_MARK if ev.turn.lag else SUMMARY_EDIT_MARK if ev.turn.edits else ""
            head.append(
                f"Task: read log files {ev.turn.first}-{ev.turn.last}{mark} ({LOG_DIR}/"
                f"{NAME_PREFIX}NNN{NAME_SUFFIX}), note each file's code, then write {REPORT_NAME}."
            )
        elif ev.turn is not None:
            head.append(SUMMARY_QUESTION)
        if self.kind == "terse":
            return {"content": " ".join(head)}
        lag = ev.turn is not None and ev.turn.lag
        files = sorted(set(ev.read) | ev.coded | ev.edited | ev.started)
        codes = sorted(ev.codes)
        asked = self._asked(body)
        if asked:
            files = [f for f in files if f in asked]
            codes = [c for c in codes if _code_file(c) in asked]
        edited = sorted(ev.done if lag else ev.edited)
        started = sorted(ev.started) if lag else []
        if self.kind == "lossy":
            files, codes, edited, started = files[::2], codes[::2], edited[::2], started[::2]
        written = f" {SUMMARY_WRITTEN}." if ev.written else ""
        head.append(f"Progress: {len(files)} files read, {len(codes)} codes noted.{written}")
        limited = any(LIMIT_RE.search(content_text(m.get("content"))) for m in body["messages"])
        if self.kind == "verbose" and not limited:
            by_file = {c.split(":", 1)[0].removeprefix("CODE ") + NAME_SUFFIX: c for c in codes}
            done, begun = set(edited), set(started)
            lines = [
                f"{self._entry(ev, name)}: {by_file.get(name, 'no code seen')}."
                + (f" {SUMMARY_EDITED}." if name in done else "")
                + (f" {SUMMARY_STARTED}." if name in begun else "")
                + f" {FILLER}"
                for name in files
            ]
            return {"content": "\n".join([*head, *lines])}
        listed = ", ".join(self._entry(ev, name) for name in files) or "none"
        body_lines = [*head, f"Files read: {listed}", "Codes: " + "; ".join(codes)]
        if edited:
            body_lines.append(f"{SUMMARY_EDITED}: " + ", ".join(edited))
        if started:
            # What is left, as a handoff summary says it: the files waiting to be done.
            body_lines.append(
                f"{SUMMARY_REMAINING} ({SUMMARY_STARTED}, to mark done): " + ", ".join(started)
            )
        return {"content": "\n".join(body_lines)}

    @staticmethod
    def _asked(body: Mapping[str, Any]) -> set[str]:
        """The files a follow-up question names (:data:`ASKED_FILES_RE`), or none."""
        for message in body.get("messages") or []:
            found = ASKED_FILES_RE.search(content_text(message.get("content")))
            if found is not None:
                return set(NAME_RE.findall(found.group(1)))
        return set()

    @staticmethod
    def _entry(ev: Evidence, name: str) -> str:
        state = ev.read.get(name)
        return name if state is None else f"{name} (lines 1-{state[0]} of {state[1]})"


# --- the server callable and its recorder -------------------------------------------------


@dataclass
class Recorder:
    """Measurement only: what the scripted model was asked and answered.

    Never read by a persona or a summarizer; :class:`ScriptedModel` tells it about a
    reply after the reply is made.
    """

    main_calls: int = 0
    summary_calls: int = 0
    reads: list[tuple[str, int]] = field(default_factory=list)
    edits: list[tuple[str, str]] = field(default_factory=list)
    reports: list[str] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)
    searches: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def observe(self, reply: Mapping[str, Any], *, summary: bool) -> None:
        """Record one reply (``summary``: it answered a summary request)."""
        with self._lock:
            if summary:
                self.summary_calls += 1
                return
            self.main_calls += 1
            calls = reply.get("tool_calls") or []
            for call in calls:
                args = call.get("arguments") or {}
                if call.get("name") == SEARCH_TOOL:
                    self.searches += 1
                    continue
                path = next((str(v) for k, v in args.items() if "path" in k), "")
                shell = shell_reads(str(args.get("command", "")))
                edit = SHELL_EDIT_RE.fullmatch(str(args.get("command", "")).strip())
                written = SHELL_HEREDOC_RE.fullmatch(str(args.get("command", "")).strip())
                if shell:
                    self.reads += [(r[0].rsplit("/", 1)[-1], r[1] - 1) for r in shell]
                elif edit is not None:
                    self.edits.append((edit["path"].rsplit("/", 1)[-1], edit["new"]))
                elif written is not None:
                    states = " ".join(s for _, s in STATUS_RE.findall(written["body"]))
                    self.edits.append((written["path"].rsplit("/", 1)[-1], states))
                elif "read" in call.get("name", "") and NAME_RE.search(path):
                    offset = next((int(v) for k, v in args.items() if k == "offset"), 0)
                    self.reads.append((path.rsplit("/", 1)[-1], offset))
                elif "edit" in call.get("name", "") and NAME_RE.search(path):
                    new = next((str(v) for k, v in args.items() if k.startswith("new")), "")
                    self.edits.append((path.rsplit("/", 1)[-1], new))
                elif path.endswith(REPORT_NAME):
                    self.reports.append(str(args.get("content", "")))
            if not calls:
                self.answers.append(str(reply.get("content", "")))

    def reread_files(self) -> int:
        """Files with more than one read call starting at the same offset."""
        seen: dict[tuple[str, int], int] = {}
        for key in self.reads:
            seen[key] = seen.get(key, 0) + 1
        return len({name for (name, _), n in seen.items() if n > 1})

    def reedited_files(self) -> int:
        """Files with an edit call made twice (the same replacement text): a change
        made again because the request no longer showed it."""
        return len({name for (name, _), n in Counter(self.edits).items() if n > 1})


@dataclass(frozen=True)
class ScriptedModel:
    """The FakeOpenAIServer reply callable: a persona, a summarizer, a recorder.

    Attributes:
        persona: Answers the main agent's requests.
        summarizer: Answers summary requests (recognised by ``markers``).
        recorder: Measurement only (see :class:`Recorder`).
        markers: Text in a request's first two messages marking a summary request.
    """

    persona: Persona
    summarizer: Summarizer
    recorder: Recorder | None = None
    markers: tuple[str, ...] = SUMMARY_MARKERS

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        summary = is_summary_request(body, self.markers)
        reply = self.summarizer(body) if summary else self.persona(body)
        if self.recorder is not None:
            self.recorder.observe(reply, summary=summary)
        return reply


def is_summary(body: Mapping[str, Any]) -> bool:
    """Whether ``body`` is a summary request of any harness."""
    return is_summary_request(body, SUMMARY_MARKERS)


def cut_summaries(main_requests: list[dict[str, Any]]) -> int:
    """Distinct summaries (of these summarizers) reaching the main prompts truncated."""
    cut = set()
    for body in main_requests:
        for message in body.get("messages") or []:
            text = content_text(message.get("content"))
            if SUMMARY_HEADER in text and TRUNCATION_RE.search(text):
                cut.add(text)
    return len(cut)
