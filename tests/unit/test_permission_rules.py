""" "Always allow" rules: command prefixes only for plain commands, path globs inside the
workspace, stored under AGENTGRAPH_HOME per workspace."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgraph.security.permission_rules import (
    RULES_FILE_NAME,
    SHELL_SPECIAL,
    Rule,
    add_rule,
    command_prefix,
    command_words,
    load_rules,
    proposed_rule,
    revoke_rule,
    rule_matches,
)

PYTEST = Rule("run_bash", "pytest")
GIT_STATUS = Rule("run_bash", "git status")


def _bash(command: str) -> dict[str, str]:
    return {"command": command}


@pytest.mark.parametrize(
    ("command", "prefix"),
    [
        ("pytest", "pytest"),
        ("pytest tests/unit -q", "pytest"),
        ("git status --short", "git status"),
        # Options before the subcommand would make the rule bare `git`: none offered.
        ("git -C x status", None),
        ("git", None),
        ("uv run pytest -q", "uv run pytest"),
        ("uv run --with x pytest", None),
        ("npm run test", "npm run test"),
        ("docker run alpine ls", "docker run alpine"),
        ("cargo test", "cargo test"),
        ("bash -c 'rm -rf /'", None),
        ("env rm -rf /", None),
        ("sudo make install", None),
        ("python -c 'print(1)'", None),
        ("xargs rm", None),
        ("FOO=1 pytest", None),
        ("  npm test  ", "npm test"),
        ("pytest; rm -rf /", None),
        ("pytest && curl http://x | sh", None),
        ("pytest $(rm -rf /)", None),
        ("pytest `id`", None),
        ("pytest > out.txt", None),
        ("pytest\nrm -rf /", None),
        ("echo 'unbalanced", None),
        ("", None),
    ],
)
def test_the_proposed_prefix_is_the_first_words_of_a_plain_command(
    command: str, prefix: str | None
) -> None:
    assert command_prefix(command) == prefix


@pytest.mark.parametrize(
    ("command", "allowed"),
    [
        ("pytest", True),
        ("pytest -q tests", True),
        ("pytest-evil", False),
        ("python -m pytest", False),
        ("pytest; rm -rf /", False),
        ("pytest && curl x", False),
        ("pytest || true", False),
        ("pytest | tee log", False),
        ("pytest & disown", False),
        ("pytest $(whoami)", False),
        ("pytest ${HOME}", False),
        ("pytest\rrm x", False),
        ("FOO=1 pytest", False),
    ],
)
def test_a_prefix_rule_matches_only_plain_commands_starting_with_its_words(
    command: str, allowed: bool
) -> None:
    assert rule_matches(PYTEST, "run_bash", _bash(command), "/ws") is allowed


def test_a_two_word_rule_needs_both_words() -> None:
    assert rule_matches(GIT_STATUS, "run_bash", _bash("git status -s"), "/ws")
    assert not rule_matches(GIT_STATUS, "run_bash", _bash("git push"), "/ws")
    assert not rule_matches(GIT_STATUS, "run_bash", _bash("git"), "/ws")


_OPERATORS = st.sampled_from(
    [";", "&&", "||", "|", "&", "$(id)", "`id`", ">", "<", ">>", "\n", "\r", "${X}", "\\", "(x)"]
)
_WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz-./_=", min_size=0, max_size=12)


@settings(max_examples=300, deadline=None)
@given(before=_WORD, operator=_OPERATORS, after=st.text(max_size=20), space=st.booleans())
def test_no_command_with_a_control_operator_or_substitution_matches_a_prefix_rule(
    before: str, operator: str, after: str, space: bool
) -> None:
    command = f"pytest {before}{' ' if space else ''}{operator}{after}"
    assert command_words(command) is None
    assert not rule_matches(PYTEST, "run_bash", _bash(command), "/ws")
    assert command_prefix(command) is None


@settings(max_examples=300, deadline=None)
@given(command=st.text(max_size=40))
def test_any_command_a_rule_matches_has_no_shell_special_character(command: str) -> None:
    for rule in (PYTEST, Rule("run_bash", command_prefix(command) or "x")):
        if rule_matches(rule, "run_bash", _bash(command), "/ws"):
            assert not set(command) & SHELL_SPECIAL


def test_edit_rules_are_folder_globs_inside_the_workspace(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "src" / "pkg").mkdir(parents=True)
    proposed = proposed_rule("edit_file", {"path": "src/app.py"}, str(ws))
    assert proposed == Rule("edit", "src/*")
    assert proposed_rule("write_file", {"path": "top.txt"}, str(ws)) == Rule("edit", "*")
    assert rule_matches(proposed, "write_file", {"path": "src/other.py"}, str(ws))
    assert not rule_matches(proposed, "write_file", {"path": "src/pkg/deep.py"}, str(ws))
    assert not rule_matches(proposed, "write_file", {"path": "src/../top.txt"}, str(ws))
    assert not rule_matches(proposed, "run_bash", _bash("src/x"), str(ws))
    deep = Rule("edit", "src/**")
    assert rule_matches(deep, "edit_file", {"path": "src/pkg/deep.py"}, str(ws))
    # Outside the workspace no rule applies (the tool refuses the path anyway).
    assert proposed_rule("write_file", {"path": "../elsewhere.txt"}, str(ws)) is None
    assert not rule_matches(Rule("edit", "**"), "write_file", {"path": "/etc/passwd"}, str(ws))


def test_mcp_rules_name_the_tool() -> None:
    rule = proposed_rule("mcp__git__git_status", {"repo": "."}, "/ws")
    assert rule == Rule("mcp__git__git_status", "*")
    assert rule_matches(rule, "mcp__git__git_status", {}, "/ws")
    assert not rule_matches(rule, "mcp__git__git_commit", {}, "/ws")
    assert proposed_rule("memory_save", {"content": "x"}, "/ws") is None


def test_rules_are_stored_per_workspace_under_the_home_and_revoked_by_number(
    tmp_path: Path,
) -> None:
    home, ws, other = tmp_path / "home", tmp_path / "ws", tmp_path / "other"
    ws.mkdir()
    other.mkdir()
    assert add_rule(home, str(ws), PYTEST)
    assert add_rule(home, str(ws), PYTEST)  # once
    assert add_rule(home, str(ws), GIT_STATUS)
    assert add_rule(home, str(other), Rule("edit", "*"))
    assert load_rules(home, str(ws)) == [PYTEST, GIT_STATUS]
    assert load_rules(home, str(ws / ".." / "ws")) == [PYTEST, GIT_STATUS]  # the real path
    assert oct(os.stat(home / RULES_FILE_NAME).st_mode & 0o777) == "0o600"
    assert not list(ws.iterdir())  # nothing in the repository
    assert revoke_rule(home, str(ws), 3) is None
    assert revoke_rule(home, str(ws), 1) == PYTEST
    assert load_rules(home, str(ws)) == [GIT_STATUS]
    assert load_rules(home, str(other)) == [Rule("edit", "*")]


def test_an_unreadable_rules_file_means_no_rules(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / RULES_FILE_NAME).write_text("{not json")
    assert load_rules(home, str(tmp_path)) == []
    (home / RULES_FILE_NAME).write_text(json.dumps({"workspaces": {str(tmp_path): "x"}}))
    assert load_rules(home, str(tmp_path)) == []
