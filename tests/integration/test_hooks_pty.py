"""Hooks and custom slash commands in the real REPL, in a pseudo-terminal.

A ``PreToolUse`` hook that blocks a command, a ``PostToolUse`` hook that formats the
file an edit wrote, a project's hook that runs only after ``agentgraph trust``, and a
custom command with arguments (listed by /help, completed by Tab) sent as a turn. Every
scripted model is stateless.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.cli_helpers import run_cli
from tests.fakes.openai_server import FakeOpenAIServer
from tests.integration.test_hooks import (
    FORMATTER,
    GUARD,
    KEY,
    _calls_then_answers,
    _hook_toml,
    _script,
)
from tests.pty_helpers import (
    ENTER,
    PROMPT,
    TAB,
    close_repl,
    expect_on_screen,
    pty_env,
    screen_lines,
    spawn_repl,
)


def _user_config(home: Path, toml: str) -> None:
    config = home / ".agentgraph" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(toml)


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


def _echo_last_prompt(request: dict[str, Any]) -> dict[str, Any]:
    """Answer with the last user message, word for word."""
    users = [m for m in request["messages"] if m.get("role") == "user"]
    return {"content": "you asked: " + _text(users[-1]["content"]) if users else "nothing"}


def test_a_hook_blocks_a_command_in_the_repl(home: Path, tmp_path: Path, workspace: Path) -> None:
    _user_config(home, _hook_toml("PreToolUse", _script(tmp_path, "guard.py", GUARD), "run_bash"))
    (workspace / "keep.txt").write_text("precious\n")
    model = _calls_then_answers("run_bash", {"command": "rm keep.txt"})
    with FakeOpenAIServer([model]) as server:
        child = spawn_repl([], cwd=workspace, env=pty_env(home, server.url, KEY))
        try:
            child.expect_exact(PROMPT)
            child.send("clean up" + ENTER)
            expect_on_screen(child, "tool said:")
        finally:
            close_repl(child)
        assert server.violations == []
    assert (workspace / "keep.txt").read_text() == "precious\n"
    lines = screen_lines(child)
    assert any(
        "PreToolUse hook blocked" in line and "rm is not allowed here" in line for line in lines
    ), "\n".join(lines)


def test_a_post_tool_use_hook_formats_after_an_edit_in_the_repl(
    home: Path, tmp_path: Path, workspace: Path
) -> None:
    formatter = _script(tmp_path, "fmt.py", FORMATTER)
    _user_config(home, _hook_toml("PostToolUse", formatter, "write_file|edit_file"))
    model = _calls_then_answers("write_file", {"path": "a.txt", "content": "hello\n"})
    with FakeOpenAIServer([model]) as server:
        child = spawn_repl([], cwd=workspace, env=pty_env(home, server.url, KEY))
        try:
            child.expect_exact(PROMPT)
            child.send("write a.txt" + ENTER)
            expect_on_screen(child, "tool said:")
        finally:
            close_repl(child)
    assert (workspace / "a.txt").read_text() == "HELLO\n"
    lines = screen_lines(child)
    assert any("PostToolUse hook said" in ln and "formatted a.txt" in ln for ln in lines), lines


def test_a_project_hook_is_not_run_until_trusted(
    home: Path, tmp_path: Path, workspace: Path
) -> None:
    marker = tmp_path / "ran"
    hook = _script(
        tmp_path, "mark.py", f"open({str(marker)!r}, 'w').write('ran')\nprint('branch: main')\n"
    )
    project = workspace / ".agentgraph" / "config.toml"
    project.parent.mkdir()
    project.write_text(_hook_toml("SessionStart", hook))
    with FakeOpenAIServer([{"content": "hello back"}]) as server:
        env = pty_env(home, server.url, KEY)
        for trusted in (False, True):
            child = spawn_repl([], cwd=workspace, env=env)
            try:
                child.expect_exact(PROMPT)
                # SessionStart runs as the REPL opens, before the first prompt.
                assert marker.exists() is trusted
                child.send("hello" + ENTER)
                expect_on_screen(child, "hello back")
            finally:
                close_repl(child)
            lines = screen_lines(child)
            told = [line for line in lines if "were not run" in line]
            assert marker.exists() is trusted
            assert len(told) == (0 if trusted else 1), "\n".join(lines)
            said = [line for line in lines if "SessionStart hook said" in line]
            assert len(said) == (1 if trusted else 0), "\n".join(lines)
            assert all("branch: main" in line for line in said)
            if not trusted:
                assert run_cli(["trust"], cwd=workspace, env=env).returncode == 0


REVIEW = """---
description: Review a file for one concern
---
Review $1 carefully; the concern: $ARGUMENTS
"""


def test_a_custom_command_with_arguments_is_listed_completed_and_sent(
    home: Path, workspace: Path
) -> None:
    commands = workspace / ".agentgraph" / "commands"
    commands.mkdir(parents=True)
    (commands / "review.md").write_text(REVIEW)
    (commands / "help.md").write_text("a built-in name cannot be taken\n")
    user_commands = home / ".agentgraph" / "commands"
    user_commands.mkdir(parents=True)
    (user_commands / "standup.md").write_text("Summarise what changed today.\n")
    with FakeOpenAIServer([_echo_last_prompt]) as server:
        child = spawn_repl([], cwd=workspace, env=pty_env(home, server.url, KEY))
        try:
            child.expect_exact(PROMPT)
            child.send("/help" + ENTER)
            expect_on_screen(child, "Review a file for one concern [project]")
            # Only a completed name reaches the model: "/rev" is no command.
            child.send("/rev" + TAB)
            child.send(" app.py error handling" + ENTER)
            expect_on_screen(child, "you asked: Review app.py carefully")
        finally:
            close_repl(child)
        assert server.violations == []
        prompts = [
            _text(m["content"])
            for r in server.requests
            for m in r.get("messages", [])
            if m.get("role") == "user"
        ]
    assert "Review app.py carefully; the concern: app.py error handling" in prompts, json.dumps(
        prompts
    )
    lines = screen_lines(child)
    assert any("/standup" in line and "[user]" in line for line in lines), "\n".join(lines)
    assert not any("a built-in name" in line for line in lines)
