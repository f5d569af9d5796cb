"""Which file a here-document command wrote (context/shell_writes.py)."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from agentgraph.context.shell_writes import (
    ShellWrite,
    echo_writes,
    heredoc_writes,
    removed_files,
    written_files,
)


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (
            "cat > src/app.py <<'EOF'\nprint(1)\nx = 2\nEOF",
            (ShellWrite("src/app.py", "print(1)\nx = 2\n", 2, False),),
        ),
        ("cat <<'EOF' > a.txt\nhello\nEOF\n\n", (ShellWrite("a.txt", "hello\n", 1, False),)),
        ('cat >>notes.md << "END"\n$x\nEND', (ShellWrite("notes.md", "$x\n", 1, True),)),
        ("cat >| a.txt <<\\EOF\n`x`\nEOF", (ShellWrite("a.txt", "`x`\n", 1, False),)),
        # Unquoted: the shell expands the text; only how many lines is known.
        ("cat >> log.md <<EOF\nat $HOME\nEOF", (ShellWrite("log.md", None, 1, True),)),
        ("cat > a.txt <<EOF\nplain\nEOF", (ShellWrite("a.txt", "plain\n", 1, False),)),
        ("cat <<-EOF > t.txt\n\tindented\n\tEOF", (ShellWrite("t.txt", "indented\n", 1, False),)),
        ("cat - > a.txt <<'EOF'\n\nEOF", (ShellWrite("a.txt", "\n", 1, False),)),
        (
            "tee a.txt b.txt > /dev/null <<'EOF'\nx\nEOF",
            (ShellWrite("a.txt", "x\n", 1, False), ShellWrite("b.txt", "x\n", 1, False)),
        ),
        (
            "tee -a log.txt > copy.txt <<'EOF'\nx\nEOF",
            (ShellWrite("log.txt", "x\n", 1, True), ShellWrite("copy.txt", "x\n", 1, False)),
        ),
        ("cat > 'my file.txt' <<'EOF'\nx\nEOF", (ShellWrite("my file.txt", "x\n", 1, False),)),
    ],
)
def test_a_here_document_writes_its_files(command: str, expected: tuple[ShellWrite, ...]) -> None:
    assert heredoc_writes(command) == expected


@pytest.mark.parametrize(
    "command",
    [
        "echo hi > a.txt",  # no here-document
        "cat > a.txt <<'EOF'\nx\nEOF\npython a.txt",  # its status is the next command's
        "cat > a.txt <<'EOF'\nx\nEOF \n",  # a delimiter with a space after it ends nothing
        "cat > a.txt <<'EOF'\nx\n",  # no delimiter
        "cat a.txt > b.txt <<'EOF'\nx\nEOF",  # cat prints a.txt, not the document
        "cat > $F <<'EOF'\nx\nEOF",
        "cat > ~/a.txt <<'EOF'\nx\nEOF",
        "cat > a.txt 2>err.txt <<'EOF'\nx\nEOF",
        "cat > a.txt > b.txt <<'EOF'\nx\nEOF",  # a.txt emptied, b.txt written
        "cat <<'EOF'\nx\nEOF",  # printed, not written
        "cat > a.txt <<'EOF' && make\nx\nEOF",
        "cat > a.txt <<'A' <<'B'\nx\nA\ny\nB",
        "tee < in.txt a.txt <<'EOF'\nx\nEOF",
        "tee -p a.txt <<'EOF'\nx\nEOF",  # an option not known here
        "tee a.txt a.txt <<'EOF'\nx\nEOF",
        "sudo tee a.txt <<'EOF'\nx\nEOF",
        "cat > 'unclosed <<'EOF'\nx\nEOF",
        "python - <<'EOF'\nopen('a.txt', 'w')\nEOF",
        'cat > "a<<EOF" \nx\nEOF',  # the operator is text in a quoted word
        "tee f.txt <<EOF'x'\nx\nEOF",  # the delimiter is EOFx
        "tee a.txt > b.txt >> c.txt <<'EOF'\nx\nEOF",  # b.txt only emptied
        "cat > /dev/null <<'EOF'\nx\nEOF",
        "tee /dev/stderr <<'EOF'\nx\nEOF",  # a device, not a file of the work
    ],
)
def test_anything_else_writes_nothing_certain(command: str) -> None:
    assert heredoc_writes(command) == ()


_WORDS = st.sampled_from(
    [
        "cat",
        "tee",
        "-a",
        ">",
        ">>",
        ">|",
        "<<",
        "<<-",
        "'EOF'",
        "EOF",
        "a.txt",
        "b.py",
        "-",
        "/dev/null",
        "2>",
        "$x",
        "&&",
        ";",
        "|",
        "'",
        '"',
        "\\",
        "\n",
        "\t",
        "x",
    ]
)


@given(st.one_of(st.lists(_WORDS, max_size=10).map(" ".join), st.text(max_size=80)))
@example("cat > a.txt <<'EOF'\nx\nEOF")
@example("tee 'a' b <<E\nE")
def test_no_command_text_breaks_the_parser_and_each_file_is_written_in_it(command: str) -> None:
    """Whatever a model sends, the parser answers (never raises), every file it names is
    written on the command's first line as it stands but for its quotes, and the lines
    written are lines of the command."""
    first = command.lstrip("\n").partition("\n")[0].replace("'", "").replace('"', "")
    assert all(path and path in first for path in removed_files(command).paths)
    writes = written_files(command) + heredoc_writes(command, _WANTED_EOF)
    for write in writes:
        assert write.path and write.path in first
        assert write.text is None or write.text.count("\n") == write.lines
        assert write.text is None or write.text.rstrip("\n") in command


_WANTED_EOF = (
    "bash: line 4: warning: here-document at line 1 delimited by end-of-file "
    "(wanted `EOF')\n[exit code 0]"
)


@pytest.mark.parametrize(
    ("command", "output", "expected"),
    [
        # Qwen2.5-Coder 1.5B wrote both of these: bash took every line left as the text.
        (
            "cat > todo.md <<'EOF'\n- ship v2\n- write docs\nEOF'",
            _WANTED_EOF,
            (ShellWrite("todo.md", "- ship v2\n- write docs\nEOF'\n", 3, False),),
        ),
        (
            "cat > notes.md <<'EOF'\n alpha: 1 \n EOF\n",
            _WANTED_EOF,
            (ShellWrite("notes.md", " alpha: 1 \n EOF\n", 2, False),),
        ),
        # No warning, or one for another delimiter: not certain.
        ("cat > todo.md <<'EOF'\n- ship v2\n", "[exit code 0]", ()),
        ("cat > todo.md <<'END'\n- ship v2\n", _WANTED_EOF, ()),
    ],
)
def test_a_document_bash_ran_to_the_end_wrote_every_line_left(
    command: str, output: str, expected: tuple[ShellWrite, ...]
) -> None:
    assert heredoc_writes(command, output) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("echo '- done' >> notes.md", (ShellWrite("notes.md", "- done\n", 1, True),)),
        ('echo "a  b" c > x.txt', (ShellWrite("x.txt", "a  b c\n", 1, False),)),
        ("echo > empty.txt", (ShellWrite("empty.txt", "\n", 1, False),)),
        ("echo -n a > x.txt", ()),  # no line break: not the words and a line break
        ("echo -e 'a\\tb' > x.txt", ()),
        ("echo a > x.txt > y.txt", ()),
        ("echo $HOME > x.txt", ()),
        ("echo a | tee x.txt", ()),
        ("echo a > /dev/stderr", ()),
        ("echo a; echo b > x.txt", ()),
        ("printf 'a\\n' > x.txt", ()),
        ("echo a\n> x.txt", ()),
    ],
)
def test_an_echo_into_a_file_writes_one_line(
    command: str, expected: tuple[ShellWrite, ...]
) -> None:
    assert echo_writes(command) == expected
    assert written_files(command) == expected


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("rm a.py", ("a.py",)),
        ("rm -rf build dist/", ("build", "dist/")),
        ("rm -f a.py a.py", ("a.py",)),
        ("rm -- -weird.txt", ("-weird.txt",)),
        ("/bin/rm --force old.log", ("old.log",)),
        ("rm -i a.py", ()),  # it asks first
        ("rm *.pyc", ()),
        ("rm ~/x.txt", ()),
        ("rm a.py; ls", ()),
        ("rm a.py > log.txt", ()),
        ("rm /dev/null", ()),
        ("sudo rm a.py", ()),
        ("rm", ()),
    ],
)
def test_rm_removes_the_files_it_names(command: str, expected: tuple[str, ...]) -> None:
    assert removed_files(command).paths == expected


@pytest.mark.parametrize(
    "command",
    [
        'echo Use ">>" to append',  # a quoted '>' is text: bash prints it
        "echo '>' f.txt",
        "echo x > a.txt\r",  # bash writes 'a.txt\r'
        "./echo hi > f.txt",  # a script of the workspace
    ],
)
def test_an_echo_that_writes_no_certain_file_writes_nothing(command: str) -> None:
    assert echo_writes(command) == ()


def test_rm_that_may_remove_nothing_is_told_apart() -> None:
    """``rm -f`` exits 0 for a path that was never there; ``rm`` without it does not."""
    forced = [removed_files(c).forced for c in ("rm a", "rm -f a", "rm -rf a", "rm --force a")]
    assert forced == [
        False,
        True,
        True,
        True,
    ]
    assert not removed_files("rm -- -f").forced and not removed_files("rm -r a").forced
    assert removed_files("rm -f a.py\r").paths == () and removed_files("./rm a.py").paths == ()


def test_a_tab_stripped_document_keeps_its_blank_last_line() -> None:
    """``<<-`` strips a last line of tabs to an empty line, which bash writes."""
    output = "warning: here-document at line 1 delimited by end-of-file (wanted `EOF')"
    assert heredoc_writes("cat > f.txt <<-EOF\na\n\t", output) == (
        ShellWrite("f.txt", "a\n\n", 2, False),
    )
