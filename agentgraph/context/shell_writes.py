"""Which file a shell command wrote through a here-document: ``cat > src/app.py <<'EOF'``
(written whole), ``cat >> notes.md <<'EOF'`` (appended to), ``tee F <<'EOF'``; or with
``echo WORDS > F`` (one line); and which files ``rm`` removed.

Models trained on a shell write files that way as often as with write_file. Counted only
as commands, those writes were missing from the progress ledger's files changed (its
line named the command's first line), so a compaction neither listed the file as
changed nor showed it again, and a model that rewrites a file to change it saw no sign
of the change once the call left its view.

Only a command whose meaning is certain counts: one here-document fed to ``cat`` (one
redirection of its output to a file) or ``tee`` (its files, ``-a`` to append; its own
output to ``/dev/null`` or a file; a device is no file of the work), on the command's
first line, followed by the document's lines and its delimiter alone on a line, then
nothing but blank lines — or, when bash's output says it found no delimiter and took
every line left as the document (small models write `` EOF`` or ``EOF'``), those lines.
A leading ``cd D &&`` moves the command to ``D``: its files are named from where it
started (:mod:`agentgraph.context.shell_cd`).
No list, pipe, other redirection, subshell or word the shell would expand on that first
line. The lines written are the document's, unless its delimiter is unquoted and the
text holds what the shell would expand there (``$``, a backtick, a backslash): then
only their number is known.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from agentgraph.context.shell_cd import cd_prefix, under, under_each

__all__ = [
    "ShellRemoval",
    "ShellWrite",
    "echo_writes",
    "heredoc_writes",
    "one_command",
    "removed_files",
    "written_files",
]

# ``<<EOF``, ``<< 'EOF'``, ``<<"EOF"``, ``<<-EOF`` (leading tabs stripped), ``<<\EOF``; the
# delimiter word ends there (``<<EOF'x'`` is the delimiter ``EOFx``: not certain).
_HEREDOC_RE = re.compile(
    r"<<(?P<tabs>-?)[ \t]*(?:'(?P<single>[^'\n]+)'|\"(?P<double>[^\"\n]+)\""
    r"|(?P<escaped>\\?)(?P<bare>[A-Za-z_][\w.-]*))(?=[ \t<>|]|$)"
)
# What the shell would expand or treat as more than one command on the first line (a
# ``2>`` redirection too: its file is no output of the program's; ``>|`` is ``>``).
_UNCERTAIN_RE = re.compile(r"[$`*?\[\]{}~;&()<\\!#]|(?<!>)\||\d>")
# What makes a line more than one program's run, outside quotes.
_LIST_RE = re.compile(r"[;&|()`]")
# Characters an unquoted here-document expands.
_EXPANDED_IN_BODY = ("$", "`", "\\")
# Output redirections of a program: truncate (``>``, ``>|``) or append (``>>``).
_REDIRECTIONS = {">": False, ">|": False, ">>": True}
# bash's warning for a document that ran to the end of the command (the delimiter it
# wanted quoted in a backtick and a quote).
_UNTERMINATED_RE = re.compile(
    r"warning: here-document at line 1 delimited by end-of-file \(wanted `([^\n]*)'\)"
)
# rm's options that change what it removes or says, not whether it asks (``-i`` asks).
_RM_OPTION_RE = re.compile(r"-[frRvd]+")
_RM_LONG_OPTIONS = frozenset({"--force", "--recursive", "--verbose", "--dir"})
# The spellings of the programs read here: their names, or the system's own copies (a
# ``./rm`` is a script of the workspace).
_PROGRAMS = {
    name: frozenset({name, f"/bin/{name}", f"/usr/bin/{name}"}) for name in ("cat", "tee", "rm")
}
# Blanks a command may start or end with; any other space (a carriage return, a no-break
# space) bash keeps in a word where shlex splits there.
_BLANKS = " \t\n"
_ODD_SPACE_RE = re.compile(r"[^\S \t\n]")
# A redirection operator outside quotes.
_UNQUOTED_REDIRECTION_RE = re.compile(r">[>|]?")
# What echo takes for its options (any other word, ``- done`` too, it prints).
_ECHO_OPTION_RE = re.compile(r"-[neE]+")
# Device files (``/dev/null``, ``/dev/stdout``…) are written to, not files of the work.
_DEVICES = "/dev/"


@dataclass(frozen=True)
class ShellWrite:
    """One file a command wrote (through a here-document, or ``echo``).

    Attributes:
        path: The file, as the command names it.
        text: The lines written (each ending in a newline); None when the shell would
            expand what they hold.
        lines: How many lines were written.
        append: Appended to the file (``>>``, ``tee -a``) rather than written whole.
    """

    path: str
    text: str | None
    lines: int
    append: bool


@dataclass(frozen=True)
class ShellRemoval:
    """What an ``rm`` command removed.

    Attributes:
        paths: The files (or folders), each once, in the order the command names them;
            empty for any other command.
        forced: It was told ``-f``: it exits 0 for a path that was never there, so that
            it did says nothing of such a path.
    """

    paths: tuple[str, ...] = ()
    forced: bool = False


def heredoc_writes(command: str, output: str | None = None) -> tuple[ShellWrite, ...]:
    """The files a here-document command writes (see the module docstring); empty for any
    other command. That it exited 0 says they were written.

    A document whose delimiter line never comes (a small model wrote `` EOF`` or
    ``EOF'``) runs to the command's end: bash writes every line left, warns, and exits 0.
    Only ``output`` holding that warning for this delimiter makes it certain.

    Args:
        command: A run_bash command.
        output: What the command printed, if known.

    Returns:
        One :class:`ShellWrite` per file, in the order the command names them.
    """
    folder, command = cd_prefix(command)
    head, newline, rest = command.lstrip("\n").partition("\n")
    if not newline or _ODD_SPACE_RE.search(head):
        return ()
    operators = list(_HEREDOC_RE.finditer(head))
    if len(operators) != 1:
        return ()
    found = operators[0]
    if _unquoted(head)[found.start()] != "<":
        return ()  # the ``<<`` is text inside a quoted word
    delimiter = found["single"] or found["double"] or found["bare"]
    targets = _targets(head[: found.start()] + " " + head[found.end() :])
    if not targets:
        return ()
    body: list[str] = []
    lines = rest.split("\n")
    for at, line in enumerate(lines):
        if (line.lstrip("\t") if found["tabs"] else line) == delimiter:
            if any(after.strip() for after in lines[at + 1 :]):
                return ()  # more commands after the document: its status is theirs
            break
        body.append(line.lstrip("\t") if found["tabs"] else line)
    else:
        if output is None or _unterminated(output) != delimiter:
            return ()  # no delimiter, and no sign that bash took the rest as the document
        if lines[-1] == "":
            body.pop()  # the command's final line break ends the last line
    text: str | None = "".join(f"{line}\n" for line in body)
    quoted = found["bare"] is None or bool(found["escaped"])
    if not quoted and any(c in (text or "") for c in _EXPANDED_IN_BODY):
        text = None
    return tuple(
        ShellWrite(name, text, len(body), append)
        for path, append in targets
        if (name := under(folder, path)) and not name.startswith(_DEVICES)
    )


def echo_writes(command: str) -> tuple[ShellWrite, ...]:
    """The file ``echo WORDS > F`` (``>> F``: appended to) writes, one line: the words
    and a line break; empty for anything else (another program, an option of echo's, more
    than one line or redirection, or what :func:`heredoc_writes`' first line may not
    hold: an expansion, a list, a pipe, an escape).

    Args:
        command: A run_bash command.

    Returns:
        The :class:`ShellWrite`, or nothing.
    """
    folder, command = cd_prefix(command)
    words = _one_line_words(command)
    if not words or words[0] != "echo":  # a ``./echo`` is a script; /bin/echo has --help
        return ()
    said: list[str] = []
    target: tuple[str, bool] | None = None
    rest = iter(words[1:])
    for word in rest:
        if word in _REDIRECTIONS:
            path = next(rest, "")
            if target is not None or not path or path in _REDIRECTIONS:
                return ()
            target = (path, _REDIRECTIONS[word])
        elif not said and _ECHO_OPTION_RE.fullmatch(word):
            return ()  # -n, -e: the text is not the words and a line break
        else:
            said.append(word)
    name = under(folder, target[0]) if target is not None else None
    if target is None or name is None or name.startswith(_DEVICES):
        return ()
    return (ShellWrite(name, " ".join(said) + "\n", 1, target[1]),)


def removed_files(command: str) -> ShellRemoval:
    """The files (or folders) ``rm [-f] [-r] PATH…`` removes, one line; no path for
    anything else (another program, an option not known here such as ``-i``, which asks
    first, a redirection, or what :func:`heredoc_writes`' first line may not hold: a
    glob, an expansion, a list, a pipe, an escape). That it exited 0 says they are gone
    (with ``-f``, only those that were there).

    Args:
        command: A run_bash command.

    Returns:
        The :class:`ShellRemoval`.
    """
    folder, command = cd_prefix(command)
    words = _one_line_words(command)
    if not words or words[0] not in _PROGRAMS["rm"]:
        return ShellRemoval()
    paths: list[str] = []
    options = True
    forced = False
    for word in words[1:]:
        if options and word == "--":
            options = False
        elif options and word.startswith("-"):
            if not (_RM_OPTION_RE.fullmatch(word) or word in _RM_LONG_OPTIONS):
                return ShellRemoval()
            forced = forced or word == "--force" or (not word.startswith("--") and "f" in word)
        elif word in _REDIRECTIONS or not word:
            return ShellRemoval()
        else:
            paths.append(word)
    kept = tuple(p for p in under_each(folder, paths) if not p.startswith(_DEVICES))
    return ShellRemoval(kept, forced)


def written_files(command: str, output: str | None = None) -> tuple[ShellWrite, ...]:
    """What a command wrote: :func:`heredoc_writes`, else :func:`echo_writes`."""
    return heredoc_writes(command, output) or echo_writes(command)


def one_command(command: str) -> bool:
    """Whether ``command`` is one program's run: one line, and outside its quotes no
    list, pipe, background job, subshell or command substitution (``;``, ``&``, ``|``,
    parentheses, a backtick), but a leading ``cd D &&``."""
    line = cd_prefix(command.strip(_BLANKS))[1].strip(_BLANKS)
    return bool(line) and "\n" not in line and not _LIST_RE.search(_unquoted(line))


def _one_line_words(command: str) -> list[str] | None:
    """The words (:func:`_words`) of a one-line command that holds nothing
    :data:`_UNCERTAIN_RE` names and no space but blanks; None for any other."""
    line = command.strip(_BLANKS)
    if "\n" in line or _ODD_SPACE_RE.search(line) or _UNCERTAIN_RE.search(line):
        return None
    return _words(line)


def _words(line: str) -> list[str] | None:
    """The words of ``line``, ``>``, ``>>`` and ``>|`` apart; None for a quote that
    does not close, or a word that is a redirection only once its quotes are gone
    (``echo '>' f`` prints ``> f``)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=">|")
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError:
        return None
    operators = sum(word in _REDIRECTIONS for word in words)
    return words if operators == len(_UNQUOTED_REDIRECTION_RE.findall(_unquoted(line))) else None


def _unquoted(line: str) -> str:
    """``line`` with every quoted part, its quotes too, blanked out (a backslash is no
    escape here: a line holding one is uncertain, :data:`_UNCERTAIN_RE`)."""
    out: list[str] = []
    quote = ""
    for char in line:
        if quote:
            quote = "" if char == quote else quote
            out.append(" ")
        elif char in "'\"":
            quote = char
            out.append(" ")
        else:
            out.append(char)
    return "".join(out)


def _unterminated(output: str) -> str | None:
    """The delimiter bash's warning in ``output`` says a document on the command's first
    line wanted and never found, else None."""
    found = _UNTERMINATED_RE.search(output)
    return found[1] if found else None


def _targets(line: str) -> list[tuple[str, bool]]:
    """``(path, append)`` of each file the first line of a here-document command writes
    (without its ``<<`` operator); empty when it is not ``cat`` or ``tee`` writing files
    certainly."""
    if _UNCERTAIN_RE.search(line):
        return []
    words = _words(line)
    if not words or words[0] not in (*_PROGRAMS["cat"], *_PROGRAMS["tee"]):
        return []
    tee = words[0] in _PROGRAMS["tee"]
    out: list[tuple[str, bool]] = []
    operands: list[str] = []
    append = False
    rest = iter(words[1:])
    redirections = 0
    for word in rest:
        if word in _REDIRECTIONS:
            path = next(rest, "")
            redirections += 1
            if not path or path in _REDIRECTIONS:
                return []
            out.append((path, _REDIRECTIONS[word]))
        elif tee and word in ("-a", "--append"):
            append = True
        elif word == "-" and not tee:
            continue  # cat's standard input: the document
        elif word.startswith("-") or not word or not tee:
            return []  # an option not known here, or a file cat would print instead
        else:
            operands.append(word)
    # Two redirections of one output: the first file is only emptied, not written.
    if redirections != 1 and not (tee and redirections == 0):
        return []
    targets = [(path, append) for path in operands] + out
    paths = [path for path, _ in targets]
    if len(set(paths)) != len(paths):
        return []
    return [(path, append) for path, append in targets if not path.startswith(_DEVICES)]
