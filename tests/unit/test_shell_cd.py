"""A command that changes directory first is read as the rest of it, its paths named from
where it started: only a ``cd`` whose folder is certain, before ``&&``."""

from __future__ import annotations

import posixpath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentgraph.context.shell_cd import cd_prefix, under
from agentgraph.context.shell_reads import (
    in_place_edits,
    named_files,
    parse_shell_read,
    reads_files,
    whole_file_reads,
)
from agentgraph.context.shell_writes import one_command, removed_files, written_files


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("cd src && cat app.py", ("src", "cat app.py")),
        ("  cd src&&cat app.py", ("src", "cat app.py")),
        ("cd /ws && cat src/app.py", ("/ws", "cat src/app.py")),
        ("cd a && cd b/ && ls", ("a/b", "ls")),
        ("cd a && cd .. && ls", ("a", "cd .. && ls")),  # up through a link: not certain
        ("cd a && cd /abs && ls", ("/abs", "ls")),
        ("cd 'my dir' && ls", ("my dir", "ls")),
        ('cd "my dir" && ls', ("my dir", "ls")),
        ("cd . && ls", (".", "ls")),
    ],
)
def test_a_leading_cd_before_and_is_split_off(command: str, expected: tuple[str, str]) -> None:
    assert cd_prefix(command) == expected


@pytest.mark.parametrize(
    "command",
    [
        "cat app.py",
        "cd src; cat app.py",  # runs in the starting folder when cd fails
        "cd src\ncat app.py",
        "cd src || cat app.py",
        "cd ~ && cat app.py",
        "cd ~/src && cat app.py",
        "cd $HOME && cat app.py",
        '"cd $D" && cat app.py',
        'cd "$D" && cat app.py',
        "cd src* && cat app.py",
        "cd - && cat app.py",
        "cd -P src && cat app.py",
        "cd && cat app.py",
        "cd `pwd` && cat app.py",
        "echo cd src && cat app.py",
    ],
)
def test_any_other_start_leaves_the_command_as_it_is(command: str) -> None:
    assert cd_prefix(command) == ("", command)


def test_a_path_is_named_from_where_the_command_started() -> None:
    assert under("src", "app.py") == "src/app.py"
    assert under("src", "sub/../app.py") is None  # up from where a link may point
    assert under("src", "/etc/hosts") == "/etc/hosts"
    assert under("/ws", "./a.py") == "/ws/a.py"
    assert under("", "./a.py") == "./a.py"  # no cd: as the command names it


# Commands each parser reads, their paths relative; a folder to run them from.
_COMMANDS = st.sampled_from(
    [
        "cat a.py",
        "sed -n '1,80p' src/a.py",
        "nl -ba a.py | sed -n '1,20p'",
        "tail -n +5 ./a.py",
        "cat a.py b/c.py",
        "grep -n def a.py b.py",
        "sed -i 's/x/y/' a.py",
        "cat > out.txt <<'EOF'\nx\nEOF",
        "echo done > status.txt",
        "rm -f old.py ../gone.py",
        "pytest -q tests/test_a.py",
    ]
)
_SEGMENT = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,7}", fullmatch=True)
_FOLDERS = st.lists(_SEGMENT, min_size=1, max_size=3).map("/".join)


@given(_COMMANDS, _FOLDERS, st.booleans())
def test_each_parser_reads_a_command_after_cd_as_the_command_with_its_paths_moved(
    command: str, folder: str, absolute: bool
) -> None:
    """Whatever the command and the folder (relative, or absolute), each parser finds
    what it finds in the command alone, each path joined under the folder."""
    folder = "/" + folder if absolute else folder
    moved = f"cd {folder} && {command}"

    def join(paths: tuple[str, ...]) -> tuple[str, ...]:
        """Each path under the folder; one that goes up from it is not certain."""
        kept = (p for p in paths if ".." not in p.split("/"))
        return tuple(posixpath.normpath(posixpath.join(folder, p)) for p in kept)

    read, read_moved = parse_shell_read(command), parse_shell_read(moved)
    assert (read is None) == (read_moved is None)
    if read is not None and read_moved is not None:
        assert read_moved.path == join((read.path,))[0]
        assert (read_moved.first, read_moved.last) == (read.first, read.last)
    assert named_files(moved) == join(named_files(command))
    assert whole_file_reads(moved) == join(whole_file_reads(command))
    assert in_place_edits(moved) == join(in_place_edits(command))
    assert removed_files(moved).paths == join(removed_files(command).paths)
    writes = written_files(command, "[exit code 0]")
    assert [w.path for w in written_files(moved, "[exit code 0]")] == list(
        join(tuple(w.path for w in writes))
    )
    assert reads_files(moved) == reads_files(command)
    assert one_command(moved) == one_command(command)


@given(_COMMANDS, _FOLDERS, st.sampled_from(["; ", "\n", " || ", " & "]))
def test_a_cd_before_any_other_separator_names_no_file_under_its_folder(
    command: str, folder: str, separator: str
) -> None:
    """After ``;``, a line break, ``||`` or ``&`` the rest runs in the starting folder
    when ``cd`` fails (or at once): no parser names a file under the folder."""
    moved = f"cd {folder}{separator}{command}"
    found = [
        *named_files(moved),
        *whole_file_reads(moved),
        *in_place_edits(moved),
        *removed_files(moved).paths,
        *(w.path for w in written_files(moved, "[exit code 0]")),
    ]
    read = parse_shell_read(moved)
    found += [read.path] if read is not None else []
    assert not any(path.startswith(folder + "/") for path in found)


@pytest.mark.parametrize(
    "command",
    [
        "cd link && cat ../x.py",  # through a link, .. leaves the folder it points to
        "cd link/../sub && cat y.py",
        "cd .. && cat x.py",
        "cd a && cd .. && cat x.py",
    ],
)
def test_a_path_that_goes_up_from_the_folder_is_not_certain(command: str) -> None:
    """``cd`` follows a link by its name: a ``..`` after it, in the folder or in the path,
    leaves the folder the link points to, so which file the command named is not
    certain and no parser names one."""
    assert parse_shell_read(command) is None
    assert named_files(command) == () and whole_file_reads(command) == ()
    assert in_place_edits(command.replace("cat", "sed -i 's/a/b/'")) == ()
    assert removed_files(command.replace("cat", "rm")).paths == ()
    assert written_files(command.replace("cat", "echo hi >"), "[exit code 0]") == ()


def test_a_device_is_no_file_of_the_work_after_cd_either() -> None:
    for command in (
        "cd /dev && echo hi > null",
        "cd / && echo hi > dev/null",
        "cd /dev && rm -f null",
        "cd / && cat > dev/stdout <<'EOF'\nx\nEOF",
    ):
        assert written_files(command, "[exit code 0]") == ()
        assert removed_files(command).paths == ()


def test_many_cds_are_read_in_linear_time() -> None:
    """A hostile command of 100,000 ``cd``s is split in one pass (it took 0.44 s for
    50,000 when each pass copied the rest of the line)."""
    command = "cd a && " * 100_000 + "cat f.py"
    folder, rest = cd_prefix(command)
    assert rest == "cat f.py" and folder.count("/") == 99_999
