"""A turn cannot break the session: blank answers, empty prompts, locked stores, env, processes."""

from __future__ import annotations

import os
import secrets
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from agentgraph.capabilities.tools.bash import run_command, tool_environment
from agentgraph.capabilities.tools.sandbox import plan_sandbox, sandbox_args
from agentgraph.runtime.history import build_prompt_view, validate_history
from tests.cli_helpers import cli_env, run_cli
from tests.fakes.openai_server import FakeOpenAIServer
from tests.proc_helpers import live_processes, wait_until_gone
from tests.sandbox_helpers import sandbox_mode

__all__ = ["sandbox_mode"]  # a fixture, used by name


def _count(messages: Sequence[BaseMessage]) -> int:
    return sum(len(str(m.content)) // 4 + 4 for m in messages)


# --------------------------------------------------------------------------- history


@pytest.mark.parametrize("blank", ["", "   \n", [], [{"type": "text", "text": " "}]])
def test_prompt_view_drops_blank_assistant_answers(blank: object) -> None:
    """A model that once answered with nothing must not break the session for good:
    strict providers reject an empty assistant turn that has no tool calls."""
    stored: list[BaseMessage] = [
        HumanMessage("first", id="h1"),
        AIMessage(content=blank, id="a1"),  # type: ignore[arg-type]
        HumanMessage("again", id="h2"),
    ]
    view = build_prompt_view(stored, system=[SystemMessage("sys")], counter=_count)
    assert [m.id for m in view.messages[1:]] == ["h1", "h2"]
    assert validate_history(view.messages) == []
    assert view.dropped == 1


def test_prompt_view_keeps_assistant_calls_without_text() -> None:
    stored: list[BaseMessage] = [
        HumanMessage("go", id="h1"),
        AIMessage(content="", id="a1", tool_calls=[{"name": "now", "args": {}, "id": "c1"}]),
    ]
    view = build_prompt_view(stored, counter=_count)
    assert [m.id for m in view.messages][:2] == ["h1", "a1"]


def test_empty_answer_does_not_poison_the_thread_for_a_strict_provider(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with FakeOpenAIServer([{"content": ""}, {"content": "second answer"}]) as server:
        env = cli_env(tmp_path, OPENAI_BASE_URL=server.url, AGENTGRAPH_MODEL="fake-model")
        first = run_cli(["run", "first", "--thread", "t1"], cwd=workspace, env=env)
        assert first.returncode == 0, first.stderr
        second = run_cli(["run", "again", "--thread", "t1"], cwd=workspace, env=env)
        assert second.returncode == 0, second.stderr
        assert second.stdout.strip() == "second answer"
        assert server.violations == []


# --------------------------------------------------------------------------- CLI


@pytest.mark.parametrize("prompt", ["", "  \n "])
def test_run_refuses_an_empty_prompt_without_calling_the_model(tmp_path: Path, prompt: str) -> None:
    with FakeOpenAIServer(["never"]) as server:
        env = cli_env(tmp_path, OPENAI_BASE_URL=server.url, AGENTGRAPH_MODEL="fake-model")
        result = run_cli(["run", prompt, "--json"], cwd=tmp_path, env=env)
        assert result.returncode == 2
        assert result.stdout == ""
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "empty" in lines[0], result.stderr
        assert server.requests == []


def test_repl_survives_a_locked_store_during_a_turn(tmp_path: Path) -> None:
    """Another process holding the write lock fails the turn, not the REPL."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    home = tmp_path / ".agentgraph"
    with FakeOpenAIServer(["answer one"], on_exhausted="repeat_last") as server:
        env = cli_env(
            tmp_path,
            OPENAI_BASE_URL=server.url,
            AGENTGRAPH_MODEL="fake-model",
            AGENTGRAPH_SQLITE_BUSY_TIMEOUT_S="0.5",
        )
        made = run_cli(["run", "make the store", "--thread", "t1"], cwd=workspace, env=env)
        assert made.returncode == 0, made.stderr
        holder = sqlite3.connect(home / "sessions.db", isolation_level=None)
        try:
            holder.execute("BEGIN EXCLUSIVE")
            result = run_cli(
                ["--resume", "t1"],
                cwd=workspace,
                env=env,
                stdin="hello\n/title renamed\n/current\n/exit\n",
            )
        finally:
            holder.close()
        assert result.returncode == 0, result.stderr
        assert "Traceback" not in result.stderr
        assert "locked" in result.stderr
        assert "session t1" in result.stderr  # /current still ran after the failed turn and /title


# --------------------------------------------------------------------------- run_bash


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc")
@pytest.mark.parametrize(
    "template",
    [
        "setsid sleep {m} > /dev/null 2>&1 & sleep 0.5; echo started",
        "(setsid sleep {m} > /dev/null 2>&1 &); sleep 30",
    ],
)
def test_run_bash_leaves_no_process_even_after_setsid(
    tmp_path: Path, template: str, sandbox_mode: str
) -> None:
    marker = f"{900 + secrets.randbelow(99)}.{secrets.randbelow(10**6):06d}"
    launcher: list[str] = []
    if sandbox_mode == "on":
        bwrap = plan_sandbox("on", network=False, env={"PATH": os.defpath}).bwrap
        assert bwrap is not None
        launcher = sandbox_args(bwrap, str(tmp_path), network=False)
    try:
        run_command(
            template.format(m=marker),
            cwd=str(tmp_path),
            env={"PATH": os.defpath},
            timeout_s=1,
            sandbox=launcher,
        )
        assert wait_until_gone(lambda cmd, _: marker in cmd) == []
    finally:
        for pid in live_processes(lambda cmd, _: marker in cmd):
            os.kill(pid, 9)


def test_tool_environment_drops_allowlisted_names_holding_urls_with_credentials() -> None:
    env = {
        "PATH": "/usr/bin",
        "TMPDIR": "postgres://app:pw12345678@db.internal/app",
        "PAGER": "redis://:onlypassword@cache:6379/0",
        "EDITOR": "https://example.com/path?q=1",
        "TERM": "ssh://git@github.com/org/repo",
        "LANG": "someone@example.com",
        "DATABASE_URL": "postgres://app:pw12345678@db.internal/app",
    }
    assert tool_environment(env) == {
        "PATH": "/usr/bin",
        "EDITOR": "https://example.com/path?q=1",
        "TERM": "ssh://git@github.com/org/repo",
        "LANG": "someone@example.com",
    }
