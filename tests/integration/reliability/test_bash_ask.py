"""``AGENTGRAPH_BASH=ask``: the REPL asks before each command; ``run`` refuses.

The question is a LangGraph interrupt: the pty tests drive the real REPL in a
pseudo-terminal (its prompt_toolkit input, as a user sees it), and kill it while it
waits to show that ``agentgraph -r ID`` asks the same question again, first.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import pexpect
import pytest

from agentgraph.frontends.cli.approval import visible
from tests.cli_helpers import run_cli
from tests.fakes.openai_server import FakeOpenAIServer
from tests.integration.reliability.helpers import agent_env


def _script(command: str) -> list[dict]:
    return [
        {"tool_calls": [{"name": "run_bash", "arguments": {"command": command}}]},
        {"content": "finished"},
    ]


@pytest.mark.parametrize(
    ("answer", "runs"), [("y", True), ("yes", True), ("n", False), ("", False)]
)
def test_repl_asks_before_each_command(
    home: Path, workspace: Path, answer: str, runs: bool
) -> None:
    with FakeOpenAIServer(_script("echo hi > made.txt")) as server:
        env = agent_env(home, server, AGENTGRAPH_BASH="ask")
        result = run_cli([], cwd=workspace, env=env, stdin=f"make a file\n{answer}\n/exit\n")
        assert result.returncode == 0, result.stderr
        assert server.violations == []
        tool = next(m for m in server.requests[-1]["messages"] if m["role"] == "tool")
    assert "run_bash wants to run:" in result.stderr and "echo hi > made.txt" in result.stderr
    assert (workspace / "made.txt").exists() is runs
    if not runs:
        assert "declined" in tool["content"]


def test_run_with_ask_refuses_with_a_clear_error(home: Path, workspace: Path) -> None:
    with FakeOpenAIServer(_script("echo hi > made.txt")) as server:
        env = agent_env(home, server, AGENTGRAPH_BASH="ask")
        result = run_cli(["run", "make a file", "--json"], cwd=workspace, env=env)
        assert result.returncode == 0, result.stderr
        tool = next(m for m in server.requests[-1]["messages"] if m["role"] == "tool")
    assert "needs the user's approval (AGENTGRAPH_BASH=ask)" in tool["content"]
    assert "cannot ask" in tool["content"]
    assert json.loads(result.stdout)["answer"] == "finished"
    assert not (workspace / "made.txt").exists()


def test_bash_off_removes_the_tool(home: Path, workspace: Path) -> None:
    with FakeOpenAIServer([{"content": "no shell here"}]) as server:
        env = agent_env(home, server, AGENTGRAPH_BASH="off")
        assert run_cli(["run", "hi"], cwd=workspace, env=env).returncode == 0
        names = [t["function"]["name"] for t in server.requests[-1].get("tools") or []]
    assert names and "run_bash" not in names


def test_control_characters_in_a_command_are_shown() -> None:
    hidden = "rm -rf ~/important\recho harmless"
    assert visible(hidden) == "rm -rf ~/important\\recho harmless"
    assert visible("a\x1b[2Kb") == "a\\x1b[2Kb"
    assert visible("ls\n\tpwd") == "ls\n\tpwd"


PTY_TIMEOUT_S = 90
QUESTION = "allow? [y/N]"


def _spawn_repl(args: list[str], workspace: Path, env: dict[str, str]) -> pexpect.spawn:
    # A real terminal: prompt_toolkit input (no cursor-position queries to answer).
    pty_env = {**env, "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm"}
    return pexpect.spawn(
        sys.executable,
        ["-m", "agentgraph", *args],
        cwd=str(workspace),
        env=pty_env,
        encoding="utf-8",
        timeout=PTY_TIMEOUT_S,
        dimensions=(40, 160),
    )


def test_the_question_renders_whole_and_after_the_tool_line_in_a_pty(
    home: Path, workspace: Path
) -> None:
    with FakeOpenAIServer(_script("echo hi > made.txt")) as server:
        env = agent_env(home, server, AGENTGRAPH_BASH="ask")
        child = _spawn_repl([], workspace, env)
        try:
            child.expect_exact("›")
            child.sendline("make a file")
            child.expect_exact(QUESTION)
            before = child.before
            # Everything about the call is on screen before the question, in order.
            tool_line = before.index("⏺ run_bash")
            header = before.index("run_bash wants to run:")
            assert tool_line < header < before.rindex("echo hi > made.txt")
            assert not (workspace / "made.txt").exists()
            child.sendline("y")
            child.expect_exact("approved")
            child.expect_exact("finished")
            after = child.before
            assert "⏺ run_bash" not in after and "wants to run" not in after
            child.expect_exact("›")
            child.sendline("/exit")
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
        assert server.violations == []
    assert (workspace / "made.txt").read_text() == "hi\n"


def test_a_repl_killed_at_the_question_asks_it_again_on_resume(home: Path, workspace: Path) -> None:
    with FakeOpenAIServer(_script("echo again >> made.txt")) as server:
        env = agent_env(home, server, AGENTGRAPH_BASH="ask")
        child = _spawn_repl([], workspace, env)
        try:
            child.expect_exact("›")
            child.sendline("append a line")
            child.expect_exact(QUESTION)
            child.kill(signal.SIGKILL)
            child.expect(pexpect.EOF)
        finally:
            child.close(force=True)
        assert not (workspace / "made.txt").exists()
        listed = run_cli(["sessions", "list", "--json"], cwd=workspace, env=env)
        (row,) = json.loads(listed.stdout)

        resumed = _spawn_repl(["-r", row["thread_id"]], workspace, env)
        try:
            resumed.expect_exact(QUESTION)
            assert "›" not in resumed.before  # asked before the REPL takes any input
            assert "echo again >> made.txt" in resumed.before
            resumed.sendline("y")
            resumed.expect_exact("finished")
            resumed.expect_exact("›")
            resumed.sendline("/exit")
            resumed.expect(pexpect.EOF)
        finally:
            resumed.close(force=True)
        assert server.violations == []
    assert (workspace / "made.txt").read_text() == "again\n"  # once, after the answer
