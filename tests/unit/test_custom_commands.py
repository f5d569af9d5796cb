"""Custom slash commands (agentgraph/session/custom_commands.py): real files in a project and a
user folder; hostile names, symlinks, oversized and non-text files are left out."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentgraph.errors import ConfigError
from agentgraph.session.custom_commands import (
    COMMAND_MAX_BYTES,
    PROJECT_COMMANDS_DIR,
    USER_COMMANDS_DIR,
    custom_commands,
    expand,
    parse_command_text,
    read_command_file,
)

BUILTIN = frozenset({"help", "exit", "compact"})


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    """(home, workspace, the user's commands folder, the project's commands folder)."""
    home, workspace = tmp_path / "home", tmp_path / "ws"
    user, project = home / USER_COMMANDS_DIR, workspace / PROJECT_COMMANDS_DIR
    user.mkdir(parents=True)
    project.mkdir(parents=True)
    return home, workspace, user, project


def test_front_matter_gives_the_description() -> None:
    text = "---\ndescription: Review the diff\nmodel: x\n---\n\nReview it.\n"
    assert parse_command_text(text) == ("Review the diff", "Review it.\n")
    assert parse_command_text("Just a prompt\n") == ("", "Just a prompt\n")
    unclosed = "---\ndescription: x\nno end\n"
    assert parse_command_text(unclosed) == ("", unclosed)


def test_arguments_and_positions_are_substituted_once() -> None:
    body = "Fix issue $1 in $2; context: $ARGUMENTS. Unused: $4."
    assert expand(body, "42 parser.py now") == (
        "Fix issue 42 in parser.py; context: 42 parser.py now. Unused: ."
    )
    # What the user typed is not read again for placeholders.
    assert expand("Say $ARGUMENTS", "$1 and $ARGUMENTS") == "Say $1 and $ARGUMENTS"
    # A body without placeholders still gets what was typed after the name.
    assert expand("Summarise the changes.\n", "briefly") == (
        "Summarise the changes.\n\nARGUMENTS: briefly"
    )
    assert expand("Summarise the changes.\n", "") == "Summarise the changes."


def test_the_users_command_wins_and_built_ins_cannot_be_taken(
    folders: tuple[Path, Path, Path, Path],
) -> None:
    home, workspace, user, project = folders
    (project / "review.md").write_text("project review\n")
    (project / "deploy.md").write_text("---\ndescription: Ship it\n---\nproject deploy\n")
    (user / "review.md").write_text("user review\n")
    (project / "help.md").write_text("not the built-in help\n")
    (user / "compact.md").write_text("not the built-in compact\n")
    found = custom_commands(home, workspace, BUILTIN)
    assert list(found) == ["deploy", "review"]
    assert (found["review"].body, found["review"].scope) == ("user review\n", "user")
    assert found["deploy"].help == "Ship it [project]"


def test_hostile_and_unreadable_files_are_left_out(
    folders: tuple[Path, Path, Path, Path], tmp_path: Path
) -> None:
    home, workspace, _user, project = folders
    secret = tmp_path / "secret.txt"
    secret.write_text("API_KEY=sk-live-0123456789\n")
    (project / "leak.md").symlink_to(secret)  # would send a file outside the project
    for name in ("a b.md", ".hidden.md", "-x.md", "x;rm.md", "ünï.md", "n" * 65 + ".md"):
        (project / name).write_text("hostile name\n")
    (project / "notes.txt").write_text("not a command\n")
    (project / "big.md").write_text("x" * (COMMAND_MAX_BYTES + 1))
    (project / "binary.md").write_bytes(b"\xff\xfe\x00bad")
    (project / "folder.md").mkdir()
    (project / "ok_name-2.md").write_text("fine\n")
    assert list(custom_commands(home, workspace, BUILTIN)) == ["ok_name-2"]


def test_reading_a_command_refuses_what_discovery_would_skip(tmp_path: Path) -> None:
    target = tmp_path / "target.md"
    target.write_text("text\n")
    link = tmp_path / "link.md"
    link.symlink_to(target)
    with pytest.raises(ConfigError, match="not a regular file"):
        read_command_file(link)
    with pytest.raises(ConfigError, match="cannot read"):
        read_command_file(tmp_path / "gone.md")
    assert read_command_file(target) == "text\n"


def test_missing_folders_mean_no_commands(tmp_path: Path) -> None:
    assert custom_commands(tmp_path / "nohome", tmp_path / "nows", BUILTIN) == {}
