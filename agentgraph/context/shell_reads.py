"""Which lines of which file a shell command read: ``cat``, ``head``, ``sed -n``, ``tail``,
and numbered pages (``nl -ba F | sed -n 'A,Bp'``).

Models trained on a shell read files with ``cat src/app.py`` or ``sed -n '40,80p'
src/app.py`` as often as with read_file. Counted only as commands, those reads were
missing from the progress ledger's files read, and so from everything keyed on it: a
summary that left such a file unsaid was not asked about it, the ledger could not
stand in for a summary's list of files, and a model that re-reads what it knows it
read but can no longer see read half the files again behind a summarizer that drops
half of what it sees.

Only a command whose meaning is certain counts: one program of :data:`READ_PROGRAMS`
on one file, with options that do not change which lines are shown, nothing the shell
would expand (variables, globs, ``~``, substitutions) and no pipe, list, redirection or
subshell. Anything else stays a command, as before. Which lines were read comes from the
command and from how many lines it printed (a file shorter than the range asked ends
sooner); a failed command, or an output cut anywhere, read nothing certain.

One pipe is read too: a program that numbers every line of one file (``nl -ba F``,
``cat -n F``) into one that picks lines (``sed -n 'A,Bp'``, ``head -n N``, ``tail -n
+K``), the way Codex's models page through a file. A pipeline's status is its last
program's, so a missing file exits 0 with the first one's complaint as its output; the
numbers vouch for it instead: every line printed must carry the next number from ``A``.

``cat`` (or ``nl``) of several files printed each of them whole when it exited 0 with
an output nothing cut (:func:`whole_file_reads`), as models skimming a folder read (an
output cut file by file shows each up to the line its cut records:
:mod:`agentgraph.context.shown_files`).

Any other command that names files (:func:`named_files`: ``grep -n def src/app.py``,
``pytest tests/test_app.py``, ``diff a.py b.py``) stays a command, but what it printed is
a reading of those files to the summary's check of what it left out.

A command that changes directory first (``cd src && cat app.py``) is read as the rest of
it, each path named from where it started (``src/app.py``;
:mod:`agentgraph.context.shell_cd`).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, replace

from agentgraph.capabilities.tools.bash import BashStatus, bash_status
from agentgraph.context.shell_cd import cd_prefix, under, under_each

__all__ = [
    "FILE_WORD_RE",
    "READ_PROGRAMS",
    "SHOWING_PROGRAMS",
    "ShellRead",
    "in_place_edits",
    "named_files",
    "parse_shell_read",
    "printed",
    "printed_whole",
    "reads_files",
    "sed_replacement",
    "shell_read_lines",
    "whole_file_reads",
]

# The programs whose one-file invocations count as reads.
READ_PROGRAMS = ("cat", "nl", "head", "sed", "tail")
# The options of a pipe's first program that number every line (``nl`` numbers only
# non-blank lines unless told ``-ba``), in the default format ``%6d<TAB>``.
_NUMBERING = {"cat": (("-n",), ("--number",)), "nl": (("-ba",), ("-b", "a"))}
# The programs a numbered stream may be piped into: each picks lines by their place.
_PICKERS = ("sed", "head", "tail")
# A numbered output line: its number, right-aligned, then a tab.
_NUMBERED_LINE_RE = re.compile(r" *(\d+)\t")
# Lines ``head`` prints when it is not told how many.
HEAD_DEFAULT_LINES = 10
# ``cat``/``nl`` options that number or mark lines but show every one of them, one an
# output line (``-s`` squeezes blank lines: the count would not be the file's).
_WHOLE_OPTIONS = frozenset(
    {"-n", "-b", "-A", "-E", "-T", "-v", "-e", "-t", "-ba", "--number", "--show-all"}
)
# Characters after which the shell would not pass the text as it stands: expansions,
# globs, redirections, pipes, lists, subshells, comments, escapes, line breaks.
_SHELL_SPECIAL_RE = re.compile(r"[$`*?\[\]{}~|&;<>()#\\\n\r!]")
# The one ``$`` a sed range may hold, single-quoted: ``'40,$p'`` (the last line).
_SED_TO_END_RE = re.compile(r"'(\d+),\$p'")
_SED_SCRIPT_RE = re.compile(r"(\d+)(?:,(\d+|\$))?p")
_COUNT_RE = re.compile(r"\d+")
# A word naming a file: a path whose last part has an extension with a letter (``3.12``
# is a version, not a file).
FILE_WORD_RE = re.compile(r"[\w./-]*\w\.[A-Za-z0-9]*[A-Za-z][A-Za-z0-9]*")
# Programs that print what they read of a file (lines, fields, matches, a diff): a
# pipeline of them over files shows the files.
SHOWING_PROGRAMS = frozenset(
    {
        *READ_PROGRAMS,
        *("grep", "egrep", "fgrep", "rg", "ag", "awk", "gawk", "cut", "sort", "uniq"),
        *("diff", "tac", "rev", "column", "jq", "bat", "less", "more", "xxd", "od"),
    }
)
# Programs whose first operand is a pattern or a script, not a file; the options that
# give it instead, with its value as the next word or in the same word.
_PATTERN_PROGRAMS = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "sed", "awk", "gawk"})
_PATTERN_OPTIONS = frozenset({"-e", "-f", "--regexp", "--file", "--expression"})
_PATTERN_OPTION_PREFIXES = ("--regexp=", "--file=", "--expression=")
# A file name the shell would expand (a glob, a variable, ``~``): which files it names
# is not certain.
_EXPANDING_RE = re.compile(r"[*?\[\]{}$~`]")
# A sed ``s`` command: any delimiter, then the pattern, the replacement and the flags
# (``s/open/done/``, ``s|a|b|g``); neither part holds the delimiter unescaped.
_SED_SUBSTITUTION_RE = re.compile(
    r"s(?P<d>[^\w\s\\])(?P<old>(?:(?!(?P=d)).)*)(?P=d)(?P<new>(?:(?!(?P=d)).)*)(?P=d)[gpIi0-9]*"
)
# Files a command may name and still be a reading of each: more is a sweep (a grep over
# a tree's files), whose output says little of any one file.
COMMAND_READING_MAX_FILES = 8
# A cut made by the command's output buffer or by the tool output cap.
_CUT_RE = re.compile(r"…\d[\d,]* (?:bytes|tokens) truncated…")


@dataclass(frozen=True)
class ShellRead:
    """The lines a command asked to see of one file.

    Attributes:
        path: The file, as the command names it.
        first: The first line shown (1-based).
        last: The last line asked for; None for every line to the end of the file.
        numbered: The lines come numbered through a pipe, and only the numbers vouch
            for them (see the module docstring).
    """

    path: str
    first: int
    last: int | None
    numbered: bool = False


def parse_shell_read(command: str) -> ShellRead | None:
    """The file lines ``command`` shows, or None when it is not certainly a plain read.

    Args:
        command: A ``run_bash`` command line.

    Returns:
        ``cat F`` / ``nl F`` (with line-numbering options): every line; ``head -n N F``
        (``-N``, ``-nN``, ``--lines=N``; 10 when not told): lines 1-N; ``sed -n 'A,Bp'
        F`` (``Ap``, ``A,$p``): lines A-B; ``tail -n +K F`` (``-n+K``, ``--lines=+K``):
        line K to the end; ``nl -ba F`` or ``cat -n F`` piped into ``sed -n``, ``head``
        or ``tail -n +K``: the lines those pick, numbered; after a leading ``cd D &&``,
        the file under ``D``. None for anything else.
    """
    folder, command = cd_prefix(command)
    producer, bar, picker = command.partition("|")
    if bar:
        read = _numbered_read(producer, picker)
    else:
        words = _words(command)
        read = None if words is None else _read_of(words)
    if read is None or not folder:
        return read
    path = under(folder, read.path)
    return None if path is None else replace(read, path=path)


def named_files(command: str) -> tuple[str, ...]:
    """The files a one-line command names, in order (``grep -n def src/app.py``, ``pytest
    tests/test_app.py -q``, ``cat f.log | head -n 400``, ``cut -d'|' -f2 data.csv``,
    ``diff a.py b.py``); empty for none, more than :data:`COMMAND_READING_MAX_FILES`, or a
    line the shell would run as more than one pipeline (a list, a redirection, a
    subshell) or that holds a backslash (an escape whose meaning is not certain).

    What such a command printed is a reading of those files for a summary's sake,
    whatever the program made of them: a summary that says nothing of one is asked about
    it as about a file read, and the reading may stay in view (agentgraph/context/
    compaction.py). The programs' own names (``./run.sh``) and options are not files.
    """
    folder, command = cd_prefix(command)
    stages = _stages(command)
    return () if stages is None else under_each(folder, _named_in(stages))


def _named_in(stages: list[list[str]]) -> tuple[str, ...]:
    """:func:`named_files` of a pipeline's stages (:func:`_stages`)."""
    files: dict[str, None] = {}
    for words in stages:
        files.update(dict.fromkeys(w for w in _operands(words) if FILE_WORD_RE.fullmatch(w)))
    return tuple(files) if len(files) <= COMMAND_READING_MAX_FILES else ()


def _operands(words: list[str]) -> list[str]:
    """The words of one program's invocation that may name files: not its name, no
    option, and for a program whose first operand is a pattern or a script (``grep
    os.path a.py``, ``sed -n '1p' a.py``) not that one, nor the value of its ``-e``/``-f``
    (the pattern then, or a file of them it does not print)."""
    if _program(words) not in _PATTERN_PROGRAMS:
        return [w for w in words[1:] if not w.startswith("-")]
    out: list[str] = []
    given = False  # the pattern came with -e/-f
    skip = False
    for word in words[1:]:
        if skip:
            skip = False
        elif word in _PATTERN_OPTIONS:
            given = skip = True
        elif word.startswith(_PATTERN_OPTION_PREFIXES):
            given = True
        elif word.startswith("-") and not word.startswith("--"):
            # A cluster of short options: ``-e`` or ``-f`` in it takes the rest of the
            # word (``-e'a;b'``), or the next word when it ends the cluster (``-ve x``).
            at = next((i for i, c in enumerate(word[1:]) if c in "ef"), None)
            if at is not None:
                given = True
                skip = at == len(word) - 2
        elif not word.startswith("-"):
            out.append(word)
    return out if given else out[1:]


def whole_file_reads(command: str) -> tuple[str, ...]:
    """The files ``cat A B …`` (or ``nl -ba``) prints whole, when it names two or more
    (each once in the result); empty for anything else (one file is
    :func:`parse_shell_read`'s).
    Which lines are each file's the output does not tell, so it counts as read whole
    only when the command exited 0 and nothing was cut (:func:`printed_whole`), or cut
    file by file, each up to the line the cut's marker records
    (:func:`~agentgraph.context.shown_files.shown_spans`)."""
    folder, command = cd_prefix(command)
    words = _words(command)
    if not words or words[0] not in ("cat", "nl"):
        return ()
    options = [w for w in words[1:] if w.startswith("-")]
    paths = [w for w in words[1:] if not w.startswith("-")]
    # ``nl``'s other options take a value (``-b a``, ``-v 1``): the next word is none of
    # the files.
    allowed = _WHOLE_OPTIONS if words[0] == "cat" else frozenset({"-ba"})
    if len(paths) < 2 or not set(options) <= allowed:
        return ()
    if words[1 : 1 + len(options)] != options:
        return ()  # an option after a file name: GNU takes it, others a file
    return under_each(folder, paths)


def in_place_edits(command: str) -> tuple[str, ...]:
    """The files ``sed -i`` (``-i.bak``, ``-ri``, ``--in-place``) edits in place, as
    models trained on a shell change a line (``sed -i 's/open/done/' src/app.py``); empty
    for anything else: another program, a list, pipe, redirection or subshell, an empty
    word (``sed -i '' …``: BSD and GNU read it apart), or a file name the shell would
    expand. The script may hold anything inside its quotes. Which lines changed the
    command does not tell (see :func:`sed_replacement`); that it exited 0 says the files
    were written, perhaps unchanged (a pattern that matched nothing)."""
    folder, command = cd_prefix(command)
    parsed = _sed_in_place(command)
    if parsed is None:
        return ()
    given = parsed.scripts or parsed.script_file
    files = parsed.operands if given else parsed.operands[1:]
    if not files or any(_EXPANDING_RE.search(f) for f in files):
        return ()
    return under_each(folder, files)


def sed_replacement(command: str) -> str | None:
    """The text an in-place ``sed`` writes: the replacement of its one ``s`` command when
    it is literal (``sed -i 's/open/done/' F`` writes ``done``), else None (several
    scripts, a script file, another command, ``-n`` (the file keeps only what is
    printed), or ``&``, a backslash, ``$`` or a backtick in the replacement)."""
    parsed = _sed_in_place(cd_prefix(command)[1])
    if parsed is None or parsed.quiet or parsed.script_file:
        return None
    scripts = parsed.scripts or parsed.operands[:1]
    if len(scripts) != 1:
        return None
    found = _SED_SUBSTITUTION_RE.fullmatch(scripts[0].strip())
    if found is None or any(c in found["new"] for c in "&\\$`"):
        return None
    return found["new"] or None


@dataclass(frozen=True)
class _SedCall:
    """A one-stage in-place ``sed``: its ``-e`` scripts, whether a ``-f`` file gives one,
    whether it prints only what it is told (``-n``), and its operands (the script first
    when no ``-e``/``-f`` gave it, then the files)."""

    scripts: tuple[str, ...]
    script_file: bool
    quiet: bool
    operands: tuple[str, ...]


# GNU sed's short options that take the next word (or the rest of theirs), and long ones.
_SED_VALUE_SHORT = frozenset("efl")
_SED_VALUE_LONG = frozenset({"--expression", "--file", "--line-length"})
# Short flags that may come before ``i`` in one word (``-ri``, ``-Ei``, ``-ni``).
_SED_FLAGS = frozenset("nrsuzE")


def _sed_in_place(command: str) -> _SedCall | None:
    """A one-stage ``sed`` (or ``gsed``) command that edits in place, parsed; else None."""
    stages = _stages(command)
    if stages is None or len(stages) != 1:
        return None
    words = stages[0]
    if _program(words) not in ("sed", "gsed") or "" in words:
        return None
    scripts: list[str] = []
    operands: list[str] = []
    in_place = quiet = script_file = False
    rest = iter(words[1:])
    for word in rest:
        if word == "--":
            operands += rest
            break
        if word.startswith("--"):
            name, eq, value = word.partition("=")
            in_place = in_place or name == "--in-place"
            quiet = quiet or name in ("--quiet", "--silent")
            if name in _SED_VALUE_LONG:
                value = value if eq else next(rest, "")
                script_file = script_file or name == "--file"
                if name == "--expression":
                    scripts.append(value)
        elif word.startswith("-") and len(word) > 1:
            for at, flag in enumerate(word[1:], start=1):
                if flag == "i":
                    in_place = True
                    break  # the rest of the word is the backup suffix
                if flag in _SED_VALUE_SHORT:
                    value = word[at + 1 :] or next(rest, "")
                    script_file = script_file or flag == "f"
                    if flag == "e":
                        scripts.append(value)
                    break
                if flag not in _SED_FLAGS:
                    return None  # an option this parser does not know: not certain
                quiet = quiet or flag == "n"
        else:
            operands.append(word)
    if not in_place:
        return None
    return _SedCall(tuple(scripts), script_file, quiet, tuple(operands))


def reads_files(command: str) -> bool:
    """Whether ``command`` shows files the model asked to see: a plain read, ``cat`` of
    several files, or a pipeline of programs that print what they read
    (:data:`SHOWING_PROGRAMS`: ``grep -v '^#' F``, ``cat F | tail -n 40``) naming files.
    Its output is a page of them, not a log (``pytest F`` is not)."""
    if parse_shell_read(command) is not None or whole_file_reads(command):
        return True
    stages = _stages(cd_prefix(command)[1])
    if stages is None or not _named_in(stages):
        return False
    return all(_program(words) in SHOWING_PROGRAMS for words in stages)


def printed(result: str, status: BashStatus | None) -> bool:
    """Whether a run_bash ``result`` (its status line parsed: ``status``) says the
    command exited 0 and printed something."""
    return status is not None and status.exit_code == 0 and bool(result[: status.start].strip())


def printed_whole(result: str, status: BashStatus | None) -> bool:
    """Whether a run_bash ``result`` is a whole output: :func:`printed`, and nothing cut
    it."""
    return printed(result, status) and _CUT_RE.search(result) is None


def _stages(command: str) -> list[list[str]] | None:
    """The words of each stage of ``command``'s one pipeline (:func:`_pipeline`), or
    None: not one pipeline, a quote shlex cannot close, or an empty stage (``| cat``)."""
    parts = _pipeline(command)
    if parts is None:
        return None
    try:
        stages = [shlex.split(part) for part in parts]
    except ValueError:
        return None
    return None if any(not words for words in stages) else stages


def _program(words: list[str]) -> str:
    """The program a stage runs, without its folder (``/usr/bin/sed`` is ``sed``)."""
    return words[0].rsplit("/", 1)[-1]


def _pipeline(command: str) -> list[str] | None:
    """The stages of ``command`` split at its unquoted ``|``, cut at an unquoted comment;
    None for anything else outside quotes that makes it more than one pipeline (``;``,
    ``&``, ``||``, ``|&``, redirections, subshells), a backslash, a line break or an
    unclosed quote."""
    parts: list[str] = []
    current: list[str] = []
    quote = ""
    word_start = True
    for at, char in enumerate(command):
        if quote:
            current.append(char)
            quote = "" if char == quote else quote
            continue
        if char in "\\\n\r":
            return None
        if char == "#" and word_start:
            break  # bash starts a comment only at a word's start
        if char == "|":
            if command[at + 1 : at + 2] in ("|", "&"):
                return None
            parts.append("".join(current))
            current = []
        elif char in ";&<>()":
            return None
        else:
            current.append(char)
            quote = char if char in "'\"" else ""
        word_start = char.isspace() or char == "|"
    if quote:
        return None
    parts.append("".join(current))
    return parts


def _read_of(words: list[str]) -> ShellRead | None:
    """:func:`parse_shell_read` of a command's words."""
    if len(words) < 2 or words[0] not in READ_PROGRAMS:
        return None
    program, args, path = words[0], words[1:-1], words[-1]
    if path.startswith("-") or not path:
        return None
    if program in ("cat", "nl"):
        return ShellRead(path, 1, None) if set(args) <= _WHOLE_OPTIONS else None
    if program == "head":
        count = _count_option(args, allow_plus=False)
        if count is None:
            return None
        return ShellRead(path, 1, HEAD_DEFAULT_LINES if count == 0 else count)
    if program == "tail":
        count = _count_option(args, allow_plus=True)
        if count is None or count <= 0:
            return None
        return ShellRead(path, count, None)
    return _sed_read(args, path)


def _words(command: str) -> list[str] | None:
    """The words of a command the shell passes as written, or None when it would expand,
    redirect, chain or quote anything in a way that leaves its meaning uncertain."""
    if _SHELL_SPECIAL_RE.search(_SED_TO_END_RE.sub("", command)):
        return None
    try:
        return shlex.split(command)
    except ValueError:
        return None


def _numbered_read(producer: str, picker: str) -> ShellRead | None:
    """``nl -ba F | sed -n 'A,Bp'`` and its kin (see :func:`parse_shell_read`)."""
    numbering = _words(producer)
    picking = _words(picker)
    if not numbering or not picking or len(numbering) < 3:
        return None
    program, options, path = numbering[0], tuple(numbering[1:-1]), numbering[-1]
    if options not in _NUMBERING.get(program, ()) or not path or path.startswith("-"):
        return None
    if picking[0] not in _PICKERS:
        return None
    shown = _read_of([*picking, path])
    return None if shown is None else ShellRead(path, shown.first, shown.last, numbered=True)


def _count_option(args: list[str], *, allow_plus: bool) -> int | None:
    """The line count of ``head``'s or ``tail``'s options: ``head`` returns the count (0:
    none given), ``tail`` (``allow_plus``) the first line of a ``+K`` count; None when
    the options say anything else (bytes, lines from the end, several files)."""
    if not args:
        return 0 if not allow_plus else None
    if len(args) == 2 and args[0] == "-n":
        value = args[1]
    elif len(args) == 1 and args[0].startswith("--lines="):
        value = args[0].removeprefix("--lines=")
    elif len(args) == 1 and args[0].startswith("-n"):
        value = args[0].removeprefix("-n")
    elif len(args) == 1 and not allow_plus and args[0].startswith("-"):
        value = args[0].removeprefix("-")
    else:
        return None
    if allow_plus:
        if not value.startswith("+"):
            return None  # the last K lines: which they are depends on the file's length
        value = value.removeprefix("+")
    if _COUNT_RE.fullmatch(value) is None:
        return None
    count = int(value)
    return count if count > 0 or allow_plus else None


def _sed_read(args: list[str], path: str) -> ShellRead | None:
    if len(args) != 2 or args[0] != "-n":
        return None
    found = _SED_SCRIPT_RE.fullmatch(args[1])
    if found is None:
        return None
    first = int(found.group(1))
    end = found.group(2)
    last = first if end is None else None if end == "$" else int(end)
    if first < 1 or (last is not None and last < first):
        return None
    return ShellRead(path, first, last)


def shell_read_lines(read: ShellRead, result: str) -> tuple[int, int, int | None] | None:
    """The lines a run_bash ``result`` of ``read`` showed: (first, last, file length
    when the output shows it), or None when it showed nothing certain (a failed
    command, an output cut, no status line).

    Args:
        read: What the command asked for (:func:`parse_shell_read`).
        result: The tool's answer: the output, then ``[exit code N]``.
    """
    status = bash_status(result)
    if status is None or status.exit_code != 0 or _CUT_RE.search(result):
        return None
    output = result[: status.start]
    printed = output.count("\n") + (0 if not output or output.endswith("\n") else 1)
    if read.numbered and not _numbered_from(output, read.first):
        return None
    if read.last is None:
        # To the end: the file is as long as the lines before ``first`` and those printed.
        total = read.first - 1 + printed
        return (read.first, total, total) if printed else None
    asked = read.last - read.first + 1
    if printed < asked:
        # The file ended first (sed prints nothing past it, head stops at its end).
        total = read.first - 1 + printed
        return (read.first, total, total) if printed else None
    return read.first, read.last, None


def _numbered_from(output: str, first: int) -> bool:
    """Whether every line of ``output`` starts with the next number from ``first``."""
    # Split at newlines only: a form feed or a vertical tab inside a line (common in
    # old sources) does not start an output line.
    lines = output.removesuffix("\n").split("\n") if output else []
    for expected, line in enumerate(lines, start=first):
        found = _NUMBERED_LINE_RE.match(line)
        if found is None or int(found.group(1)) != expected:
            return False
    return True
