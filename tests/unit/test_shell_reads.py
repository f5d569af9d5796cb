"""Which file lines a shell command reads: only commands whose meaning is certain."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from agentgraph.capabilities.tools.bash import bash_status
from agentgraph.context.shell_reads import (
    HEAD_DEFAULT_LINES,
    ShellRead,
    in_place_edits,
    named_files,
    parse_shell_read,
    printed_whole,
    reads_files,
    sed_replacement,
    shell_read_lines,
    whole_file_reads,
)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("cat src/app.py", ShellRead("src/app.py", 1, None)),
        ("cat -n src/app.py", ShellRead("src/app.py", 1, None)),
        ("nl -ba src/app.py", ShellRead("src/app.py", 1, None)),
        ("cat 'my file.py'", ShellRead("my file.py", 1, None)),
        ("  cat   a.py  ", ShellRead("a.py", 1, None)),
        ("head src/app.py", ShellRead("src/app.py", 1, HEAD_DEFAULT_LINES)),
        ("head -n 40 src/app.py", ShellRead("src/app.py", 1, 40)),
        ("head -n40 src/app.py", ShellRead("src/app.py", 1, 40)),
        ("head -40 src/app.py", ShellRead("src/app.py", 1, 40)),
        ("head --lines=40 src/app.py", ShellRead("src/app.py", 1, 40)),
        ("sed -n '40,80p' src/app.py", ShellRead("src/app.py", 40, 80)),
        ("sed -n 40,80p src/app.py", ShellRead("src/app.py", 40, 80)),
        ("sed -n '7p' src/app.py", ShellRead("src/app.py", 7, 7)),
        ("sed -n '40,$p' src/app.py", ShellRead("src/app.py", 40, None)),
        ("tail -n +88 src/app.py", ShellRead("src/app.py", 88, None)),
        ("tail -n+88 src/app.py", ShellRead("src/app.py", 88, None)),
        ("tail --lines=+88 src/app.py", ShellRead("src/app.py", 88, None)),
        ("cd src && cat app.py", ShellRead("src/app.py", 1, None)),
        ("cd /ws && sed -n '40,80p' src/app.py", ShellRead("/ws/src/app.py", 40, 80)),
    ],
)
def test_plain_reads_name_their_file_and_lines(command: str, expected: ShellRead) -> None:
    assert parse_shell_read(command) == expected


@pytest.mark.parametrize(
    ("command", "first", "last"),
    [
        ("nl -ba src/app.py | sed -n '1,200p'", 1, 200),
        ("nl -b a src/app.py | sed -n '40,80p'", 40, 80),
        ("cat -n src/app.py | sed -n 7p", 7, 7),
        ("nl -ba src/app.py | sed -n '40,$p'", 40, None),
        ("cat -n src/app.py | head -n 40", 1, 40),
        ("cat --number src/app.py | head", 1, HEAD_DEFAULT_LINES),
        ("nl -ba src/app.py|tail -n +88", 88, None),
    ],
)
def test_numbered_pages_through_one_pipe_are_reads(
    command: str, first: int, last: int | None
) -> None:
    assert parse_shell_read(command) == ShellRead("src/app.py", first, last, numbered=True)


@pytest.mark.parametrize(
    "command",
    [
        "nl a.py | sed -n '1,5p'",  # blank lines unnumbered: numbers are not line numbers
        "nl -ba -w3 a.py | head",  # another number format
        "cat a.py | head",  # unnumbered: a missing file's complaint would pass as line 1
        "nl -ba a.py | grep x",
        "nl -ba a.py | cat",
        "nl -ba a.py | sed -n '1,5p' | head",
        "nl -ba a.py || sed -n '1,5p'",
        "nl -ba a.py | sed -n '1,5p' b.py",
        "nl -ba a.py | head -n 5 b.py",
        "nl -ba a.py | tail -n 5",
        "nl -ba | sed -n '1,5p'",
        "nl -ba $F | sed -n '1,5p'",
        "nl -ba a.py | sed -n '1,5p' > out",
    ],
)
def test_any_other_pipe_is_not_a_read(command: str) -> None:
    assert parse_shell_read(command) is None


@pytest.mark.parametrize(
    "command",
    [
        "cat",  # stdin
        "cat -",
        "cat a.py b.py",  # two files in one output
        "cat -s a.py",  # squeezed blank lines: the count is not the file's
        "cat *.py",
        "cat $FILE",
        "cat ~/notes.txt",
        "cat a.py | head",
        "cat a.py > b.py",
        "cat a.py; rm b.py",
        "cat a.py && echo ok",
        "cat $(ls)",
        "cat `ls`",
        "cd src; cat app.py",  # runs in the starting folder when cd fails
        "LC_ALL=C cat a.py",
        "head -c 100 a.py",
        "head -n -5 a.py",  # all but the last five lines
        "head -n 0 a.py",
        "tail a.py",  # the last lines: which ones depends on the length
        "tail -n 20 a.py",
        "tail -n +0 a.py",
        'sed -n "40,$p" a.py',  # $p in double quotes is a variable
        "sed -n '40,80p;90p' a.py",
        "sed -i 's/a/b/' a.py",
        "sed -n '80,40p' a.py",
        "sed -n '0p' a.py",
        "sed '1,5p' a.py",  # without -n every line prints, some twice
        "cat 'unterminated",
        "grep -n x a.py",
        "python a.py",
    ],
)
def test_anything_else_is_not_a_read(command: str) -> None:
    assert parse_shell_read(command) is None


def _result(lines: int, exit_code: int = 0) -> str:
    return "".join(f"line {i}\n" for i in range(1, lines + 1)) + f"[exit code {exit_code}]"


def test_the_lines_shown_come_from_the_command_and_what_it_printed() -> None:
    whole = ShellRead("a.py", 1, None)
    assert shell_read_lines(whole, _result(36)) == (1, 36, 36)
    # head of a longer file: its length is unknown; of a shorter one: it ended first.
    assert shell_read_lines(ShellRead("a.py", 1, 40), _result(40)) == (1, 40, None)
    assert shell_read_lines(ShellRead("a.py", 1, 40), _result(12)) == (1, 12, 12)
    assert shell_read_lines(ShellRead("a.py", 30, 80), _result(20)) == (30, 49, 49)
    assert shell_read_lines(ShellRead("a.py", 88, None), _result(10)) == (88, 97, 97)
    # The status is a line of its own (run_bash ends the output's last line first).
    assert shell_read_lines(whole, "a\nb[exit code 0]") is None
    assert shell_read_lines(whole, "a\nb\n[exit code 0]\n") == (1, 2, 2)


def _numbered(first: int, count: int) -> str:
    return "".join(f"{n:6d}\tline {n}\n" for n in range(first, first + count)) + "[exit code 0]"


def test_numbered_lines_vouch_for_what_a_pipe_showed() -> None:
    page = ShellRead("a.py", 40, 80, numbered=True)
    assert shell_read_lines(page, _numbered(40, 41)) == (40, 80, None)
    assert shell_read_lines(page, _numbered(40, 12)) == (40, 51, 51)
    # A form feed inside a line does not start another line.
    assert shell_read_lines(page, "    40\tx\x0cy\n    41\tz\n[exit code 0]") == (40, 41, 41)
    # The pipe's status is sed's: a missing file exits 0 with nl's complaint.
    assert shell_read_lines(page, "nl: a.py: No such file or directory\n[exit code 0]") is None
    assert shell_read_lines(page, _numbered(41, 5)) is None  # not from the line asked
    assert shell_read_lines(page, "    40\ta\n    42\tb\n[exit code 0]") is None  # a gap
    assert shell_read_lines(page, "line 40\n[exit code 0]") is None  # unnumbered


@pytest.mark.parametrize(
    "result",
    [
        _result(5, exit_code=1),
        "cat: a.py: No such file or directory\n[exit code 1]",
        "line 1\n[timed out after 30s; process group killed]",
        "line 1\nline 2\n",  # no status line
        "[exit code 0]",  # nothing printed
        "line 1\n…4,096 bytes truncated…\nline 900\n[exit code 0]",
        "line 1\n…1200 tokens truncated…\nline 900\n[exit code 0]",
    ],
)
def test_a_failed_empty_or_cut_output_shows_nothing_certain(result: str) -> None:
    assert shell_read_lines(ShellRead("a.py", 1, None), result) is None


_NAMES = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_./-]{0,20}", fullmatch=True).filter(
    lambda name: not name.startswith("-")
)


@given(_NAMES, st.integers(1, 10_000), st.integers(0, 10_000))
def test_any_sed_range_of_any_quoted_path_is_read_as_written(
    path: str, first: int, more: int
) -> None:
    command = f"sed -n '{first},{first + more}p' {shlex.quote(path)}"
    assert parse_shell_read(command) == ShellRead(path, first, first + more)


@given(st.text(max_size=40), st.sampled_from(["|", ";", "&&", ">", "<", "$(x)", "`x`", "*"]))
def test_a_command_with_any_shell_construct_is_never_a_read(text: str, construct: str) -> None:
    assert parse_shell_read(f"cat a.py {construct}{text}") is None
    assert parse_shell_read(f"cat {construct}{text} a.py") is None


@given(st.integers(1, 500), st.integers(0, 500), st.integers(0, 500))
def test_the_span_never_exceeds_what_was_asked_or_printed(
    first: int, more: int, printed: int
) -> None:
    read = ShellRead("a.py", first, first + more)
    lines = shell_read_lines(read, _result(printed))
    if printed == 0:
        assert lines is None
        return
    assert lines is not None
    start, last, total = lines
    assert start == first
    assert last == first + min(more + 1, printed) - 1
    assert total is None or total == last


@given(st.integers(1, 500), st.integers(0, 500), st.integers(0, 500), st.integers(0, 3))
def test_a_numbered_span_is_what_the_numbers_show(
    first: int, more: int, printed: int, skip: int
) -> None:
    """Numbered from the line asked, the span is what was printed; from any other, nothing."""
    read = ShellRead("a.py", first, first + more, numbered=True)
    shown = min(more + 1, printed)
    lines = shell_read_lines(read, _numbered(first + skip, shown))
    if shown == 0 or skip:
        assert lines is None
        return
    assert lines is not None
    assert lines[:2] == (first, first + shown - 1)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("grep -v '^#' logs/part_017.txt", ("logs/part_017.txt",)),
        ("grep 'a|b' src/app.py", ("src/app.py",)),  # a quoted bar is no pipe
        ("pytest tests/test_app.py -q", ("tests/test_app.py",)),
        ("cat build.log | tail -n 40", ("build.log",)),
        ("cat app.py | grep app.py", ("app.py",)),  # named twice, one file
        ("./run.sh data.csv", ("data.csv",)),  # the program is no file it reads
        ("./run.sh", ()),
        ("ls", ()),
        ("python a.py b.py", ("a.py", "b.py")),  # a reading of both
        ("diff a.py b.py | head", ("a.py", "b.py")),
        ("cat a.py a.py", ("a.py",)),
        ("grep -l x " + " ".join(f"f{i}.py" for i in range(9)), ()),  # a sweep: no reading
        ("grep -rn 'os.path' src/a.py", ("src/a.py",)),  # the pattern is no file
        ("grep -n foo.bar x.py y.py", ("x.py", "y.py")),
        ("rg foo.bar", ()),
        ("cat a.py | grep os.path", ("a.py",)),
        ("grep -e os.path -e re.sub a.py", ("a.py",)),
        ("grep -ve os.path a.py", ("a.py",)),
        ("grep --regexp=os.path a.py", ("a.py",)),
        ("grep -f pats.txt a.py", ("a.py",)),  # patterns from a file it does not print
        ("sed -n '1,80p' src/app.py", ("src/app.py",)),
        ("/usr/bin/grep x.y a.py", ("a.py",)),
        ("grep -rn foo src/", ()),  # a folder
        ("cat $F.py", ()),
        ("curl https://example.com/a.json", ()),
        ("cat a.py > b.py", ()),
        ("cat a.py 2>&1", ()),
        ("make && cat x.py", ()),
        ("cd src; cat a.py", ()),
        ("(cat a.py)", ()),
        ("echo hi # x.py", ()),  # a comment
        ("cat a.py\ncat b.py", ()),
        ("grep 'unclosed a.py", ()),
        ("grep '|' a.py b.py", ("a.py", "b.py")),  # a quoted bar is a word
        ("grep \\| a.py b.py", ()),  # an escape: not certain
        ("grep ';' a.py", ("a.py",)),
        ("echo '&' a.py", ("a.py",)),
        ("grep -n foo#bar a.py", ("a.py",)),  # a # inside a word starts no comment
        ("cat a.py |& tee log", ()),
        ("cut -d'|' -f2 data.csv", ("data.csv",)),  # a quote inside a word
        ("sort -t'|' -k2 a.csv | head", ("a.csv",)),
        ("grep -e'a;b' f.py", ("f.py",)),
        ("awk -F'|' '{print $2}' data.csv", ("data.csv",)),
        ("echo foo'bar baz.txt'", ()),  # one word with a space: no file
        ("uv python install 3.12", ()),  # a version, not a file
        ("cat a.py || true", ()),
        ("| cat a.py", ()),
    ],
)
def test_a_command_names_its_files_or_none(command: str, expected: tuple[str, ...]) -> None:
    assert named_files(command) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("cat logs/part_001.txt logs/part_002.txt", ("logs/part_001.txt", "logs/part_002.txt")),
        ("cat -n a.py b.py c.py", ("a.py", "b.py", "c.py")),
        ("nl -ba a.py b.py", ("a.py", "b.py")),
        ("nl -b a x.py y.py", ()),  # ``-b`` takes a value: ``a`` is no file
        ("nl -v 1 x.py y.py", ()),
        ("cat a.py a.py b.py", ("a.py", "b.py")),
        ("cat a.py", ()),  # one file: a plain read (parse_shell_read)
        ("cat a.py -n b.py", ()),  # an option after a file
        ("cat -s a.py b.py", ()),  # squeezed: not every line
        ("cat a.py b.py | head", ()),
        ("cat *.py", ()),
        ("head a.py b.py", ()),  # the first lines of each only
        ("tac a.py b.py", ()),
    ],
)
def test_cat_of_several_files_shows_each_whole(command: str, expected: tuple[str, ...]) -> None:
    assert whole_file_reads(command) == expected


@pytest.mark.parametrize(
    ("result", "whole"),
    [
        ("a\nb\n[exit code 0]", True),
        ("[exit code 0]", False),  # printed nothing
        ("cat: b.py: No such file or directory\n[exit code 1]", False),
        ("a\n…1,200 tokens truncated… full output: x\nb\n[exit code 0]", False),
        ("a\n…4096 bytes truncated…\nb\n[exit code 0]", False),
        ("a\nb", False),  # no status line
    ],
)
def test_an_output_is_whole_when_it_exited_0_uncut(result: str, whole: bool) -> None:
    assert printed_whole(result, bash_status(result)) is whole


def test_commands_that_show_files_are_pages_and_others_are_not() -> None:
    assert reads_files("cat a.py b.py")
    assert reads_files("cat Makefile Dockerfile")  # no extension: still a cat of both
    assert reads_files("cat " + " ".join(f"f{i}.py" for i in range(12)))
    assert reads_files("sed -n '1,80p' src/app.py")
    assert reads_files("grep -v '^#' logs/part_017.txt")
    assert reads_files("cat build.log | tail -n 40")
    assert reads_files("/usr/bin/diff a.py b.py")
    assert not reads_files("pytest tests/test_app.py")  # a log, not the file
    assert not reads_files("python build.py")
    assert not reads_files("cat a.py | python -")
    assert not reads_files("make test")
    assert not reads_files("ls -la src/")


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("sed -i 's/open/done/' src/app.py", ("src/app.py",)),
        ("sed -i.bak 's/a/b/g' a.py b.py", ("a.py", "b.py")),
        ("sed --in-place -e 's/a/b/' Makefile", ("Makefile",)),  # no extension: still a file
        ("sed -i -e 's/a/b/' -e 's/c/d/' a.py", ("a.py",)),
        ("/usr/bin/sed -i 's/a/b/' a.py", ("a.py",)),
        ("sed 's/a/b/' a.py", ()),  # prints, changes nothing
        ("sed -n '1,80p' a.py", ()),
        ("sed -i 's/a/b/' *.py", ()),  # the shell would expand it
        ("sed -i 's/foo.*$/bar/' a.py", ("a.py",)),  # the script may hold anything quoted
        ("sed -i 's/a/b/' a.py > log", ()),
        ("perl -pi -e 's/a/b/' a.py", ()),
        ("sed -i.before 's/a/b/' f.py", ("f.py",)),  # a suffix with an e: no -e
        ("sed -i.ref 's/a/b/' f.py", ("f.py",)),
        ("sed -i '' 's/a/b/' f.py", ()),  # BSD and GNU read the empty word apart
        ("sed -i -l 5 's/a/b/' f.py", ("f.py",)),  # -l takes a value
        ("sed --line-length 5 -i 's/a/b/' f.py", ("f.py",)),
        ("sed -i 's/a/b/' -- -f.py", ("-f.py",)),
        ("sed -ri 's/a+/b/' f.py", ("f.py",)),
        ("sed -Ei 's/a+/b/' f.py", ("f.py",)),
        ("sed -ni '1,5p' f.py", ("f.py",)),  # cut to what it prints: still written
        ("sed -in 's/a/b/' f.py", ("f.py",)),  # GNU: -i with the suffix n
        ("sed -i -f fix.sed f.py", ("f.py",)),
        ("sed -i --expression='s/a/b/' f.py g.py", ("f.py", "g.py")),
        ("sed -i -x 's/a/b/' f.py", ()),  # an option it does not know
    ],
)
def test_sed_in_place_edits_its_files(command: str, expected: tuple[str, ...]) -> None:
    assert in_place_edits(command) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("sed -i 's/STATUS a: open/STATUS a: done/' a.txt", "STATUS a: done"),
        ("sed -i 's|x|y z|g' a.py", "y z"),
        ("sed -i -e 's/a/b/' a.py", "b"),
        ("sed -i 's/a/b&c/' a.py", None),  # & is the matched text
        ("sed -i 's/a/b\\nc/' a.py", None),
        ("sed -i -e 's/a/b/' -e 's/c/d/' a.py", None),
        ("sed -i '3d' a.py", None),
        ("sed 's/a/b/' a.py", None),  # prints, writes nothing
        ("sed -i -f script.sed a.py", None),
        ("sed -ni 's/a/b/p' a.py", None),  # the file keeps only what it prints
        ('sed -i "s/a/$X/" a.py', None),  # the shell's value, not the text
        ("sed -ri 's/a+/b/' a.py", "b"),
        ("sed -i.before 's/a/b/' f.py", "b"),
    ],
)
def test_an_in_place_substitution_writes_its_literal_replacement(
    command: str, expected: str | None
) -> None:
    assert sed_replacement(command) == expected


# Text a model may send as a command: shell words, quotes, operators and names mixed.
_COMMAND_TEXT = st.lists(
    st.sampled_from(
        [
            "sed",
            "-i",
            "-i.bak",
            "-n",
            "-e",
            "-ri",
            "--",
            "cat",
            "nl",
            "-ba",
            "grep",
            "'s/a/b/'",
            '"s/x/$Y/"',
            "a.py",
            "b.txt",
            "src/c.md",
            "|",
            ";",
            ">",
            "''",
            "*.py",
            "'unclosed",
            "\\",
            "-l",
            "5",
            "--in-place",
            "--expression=s/a/b/",
        ]
    ),
    max_size=8,
).map(" ".join)


@given(st.one_of(_COMMAND_TEXT, st.text(max_size=60)))
@example("cat 'a'.py b.py")  # quotes joined to a word: the shell passes a.py
@example("sed -i -e")
def test_no_command_text_breaks_the_readers_and_each_names_only_its_own_words(
    command: str,
) -> None:
    """Whatever a model sends, the parsers answer (never raise), and every file they name
    is written in the command as it stands but for its quotes (no expansion, no escape)."""
    unquoted = command.replace("'", "").replace('"', "")
    for found in (
        named_files(command),
        whole_file_reads(command),
        in_place_edits(command),
    ):
        assert all(path and path in unquoted for path in found)
    reads_files(command)
    replacement = sed_replacement(command)
    assert replacement is None or replacement in unquoted
