"""Permission modes through the real CLI and graph: plan mode refuses writes, rules made
by "always" answers apply, a decline's reason and a plan's acceptance reach the model."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from agentgraph.config import Settings
from agentgraph.security.permission_rules import Rule, add_rule, load_rules
from tests.cli_helpers import run_cli, server_env
from tests.fakes.openai_server import FakeOpenAIServer

KEY = "sk-test-secret-0123456789abcdef"
PLAN_REFUSAL = "the session is in plan mode"
MCP_SERVERS = Path(__file__).parents[1] / "mcp_servers"


def _tool_results(body: dict[str, Any]) -> list[str]:
    return [str(m.get("content")) for m in body["messages"] if m.get("role") == "tool"]


def _call(name: str, **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": args}]}


def _writes_then_reports(body: dict[str, Any]) -> dict[str, Any]:
    """Write a file; once a result is back, answer with every result it saw."""
    results = _tool_results(body)
    if not results:
        return _call("write_file", path="made.txt", content="made\n")
    return {"content": "SAW: " + " | ".join(results)}


def test_run_in_plan_mode_refuses_an_edit(home: Path, workspace: Path) -> None:
    with FakeOpenAIServer([_writes_then_reports]) as server:
        env = server_env(home, server.url, KEY)
        res = run_cli(
            ["run", "--permission-mode", "plan", "make the file", "--json"], cwd=workspace, env=env
        )
        assert server.violations == []
    assert res.returncode == 0, res.stderr
    assert not (workspace / "made.txt").exists()
    answer = json.loads(res.stdout)["answer"]
    assert PLAN_REFUSAL in answer and "present_plan" in answer, answer


def test_the_mode_is_told_to_the_model_as_a_note_not_in_the_system_prompt(
    home: Path, workspace: Path
) -> None:
    with FakeOpenAIServer([_writes_then_reports]) as server:
        env = server_env(home, server.url, KEY)
        plan = run_cli(
            ["run", "-t", "t1", "--permission-mode", "plan", "look"], cwd=workspace, env=env
        )
        assert plan.returncode == 0, plan.stderr
        auto = run_cli(["run", "-t", "t2", "look"], cwd=workspace, env=env)
        assert auto.returncode == 0, auto.stderr
        first_plan, first_auto = server.requests[0], server.requests[2]
    # Same system prompt either way: the cached prefix does not depend on the mode.
    assert first_plan["messages"][0] == first_auto["messages"][0]
    users = [m["content"] for m in first_plan["messages"] if m["role"] == "user"]
    assert any("Permission mode: plan" in str(u) for u in users), users
    assert not any("Permission mode" in str(m.get("content")) for m in first_auto["messages"])


def test_present_plan_in_a_run_that_cannot_ask_says_to_answer_with_the_plan(
    home: Path, workspace: Path
) -> None:
    def reply(body: dict[str, Any]) -> dict[str, Any]:
        results = _tool_results(body)
        if not results:
            return _call("present_plan", plan="1. write made.txt")
        return {"content": "SAW: " + results[-1]}

    with FakeOpenAIServer([reply]) as server:
        env = server_env(home, server.url, KEY, AGENTGRAPH_PERMISSION_MODE="plan")
        res = run_cli(["run", "plan it", "--json"], cwd=workspace, env=env)
    assert res.returncode == 0, res.stderr
    answer = json.loads(res.stdout)["answer"]
    assert "cannot ask the user to accept a plan" in answer, answer


def _runs_command(command: str) -> Any:
    def reply(body: dict[str, Any]) -> dict[str, Any]:
        results = _tool_results(body)
        if not results:
            return _call("run_bash", command=command)
        return {"content": "SAW: " + results[-1]}

    return reply


def test_a_stored_rule_lets_a_plain_command_run_in_ask_mode(home: Path, workspace: Path) -> None:
    settings = Settings(_env_file=None, AGENTGRAPH_HOME=str(home / ".agentgraph"))
    assert add_rule(settings.home, str(workspace), Rule("run_bash", "touch"))
    with FakeOpenAIServer([_runs_command("touch ruled.txt")]) as server:
        env = server_env(home, server.url, KEY, AGENTGRAPH_PERMISSION_MODE="ask")
        res = run_cli(["run", "touch it"], cwd=workspace, env=env)
    assert res.returncode == 0, res.stderr
    assert (workspace / "ruled.txt").exists()


def test_a_rule_does_not_cover_a_command_with_a_control_operator(
    home: Path, workspace: Path
) -> None:
    settings = Settings(_env_file=None, AGENTGRAPH_HOME=str(home / ".agentgraph"))
    assert add_rule(settings.home, str(workspace), Rule("run_bash", "touch"))
    with FakeOpenAIServer([_runs_command("touch a.txt && touch evil.txt")]) as server:
        env = server_env(home, server.url, KEY, AGENTGRAPH_PERMISSION_MODE="ask")
        res = run_cli(["run", "touch it", "--json"], cwd=workspace, env=env)
    assert res.returncode == 0, res.stderr
    assert not (workspace / "evil.txt").exists() and not (workspace / "a.txt").exists()
    assert "needs the user's approval" in json.loads(res.stdout)["answer"]


def test_a_rule_in_another_workspace_does_not_apply(
    home: Path, workspace: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    settings = Settings(_env_file=None, AGENTGRAPH_HOME=str(home / ".agentgraph"))
    assert add_rule(settings.home, str(other), Rule("run_bash", "touch"))
    with FakeOpenAIServer([_runs_command("touch ruled.txt")]) as server:
        env = server_env(home, server.url, KEY, AGENTGRAPH_PERMISSION_MODE="ask")
        res = run_cli(["run", "touch it"], cwd=workspace, env=env)
    assert res.returncode == 0, res.stderr
    assert not (workspace / "ruled.txt").exists()
    assert load_rules(settings.home, str(workspace)) == []


def test_a_project_env_cannot_loosen_the_mode(home: Path, workspace: Path) -> None:
    (workspace / ".env").write_text("AGENTGRAPH_PERMISSION_MODE=auto\n")
    (workspace / ".agentgraph").mkdir()
    (workspace / ".agentgraph" / "config.toml").write_text('permission_mode = "auto"\n')
    with FakeOpenAIServer([_runs_command("touch loose.txt")]) as server:
        env = server_env(home, server.url, KEY, AGENTGRAPH_PERMISSION_MODE="ask")
        res = run_cli(["run", "touch it"], cwd=workspace, env=env)
    assert res.returncode == 0, res.stderr
    assert not (workspace / "loose.txt").exists()


def _write_per_request(body: dict[str, Any]) -> dict[str, Any]:
    """Each request writes the file; the tool's result is then reported back."""
    last = body["messages"][-1]
    if last.get("role") == "user":
        return _call("write_file", path="made.txt", content="made\n")
    return {"content": "SAW: " + str(last.get("content"))}


def test_the_flag_mode_stays_with_the_session_until_another_flag(
    home: Path, workspace: Path
) -> None:
    with FakeOpenAIServer([_write_per_request]) as server:
        env = server_env(home, server.url, KEY)
        first = run_cli(
            ["run", "-t", "s1", "--permission-mode", "plan", "go"], cwd=workspace, env=env
        )
        assert first.returncode == 0, first.stderr
        again = run_cli(["run", "-t", "s1", "go", "--json"], cwd=workspace, env=env)
        assert again.returncode == 0, again.stderr
        assert PLAN_REFUSAL in json.loads(again.stdout)["answer"]
        assert not (workspace / "made.txt").exists()
        freed = run_cli(
            ["run", "-t", "s1", "--permission-mode", "auto", "go"], cwd=workspace, env=env
        )
        assert freed.returncode == 0, freed.stderr
        assert server.violations == []
    assert (workspace / "made.txt").read_text() == "made\n"


def _adds(body: dict[str, Any]) -> dict[str, Any]:
    """Each request calls the demo MCP server's add; its result is then reported back."""
    last = body["messages"][-1]
    if last.get("role") == "user":
        return _call("mcp__demo__add", a=1, b=2)
    return {"content": "SAW: " + str(last.get("content"))}


@pytest.mark.parametrize(
    ("mode", "rule", "seen"),
    [
        ("accept-edits", False, "AGENTGRAPH_PERMISSION_MODE=accept-edits"),
        ("plan", False, PLAN_REFUSAL),
        ("ask", True, "SAW: 3"),
        ("auto", False, "SAW: 3"),
    ],
)
def test_a_real_mcp_tool_follows_the_mode_and_the_rules(
    tmp_path: Path, mode: str, rule: bool, seen: str
) -> None:
    home = tmp_path / "home"
    ws = tmp_path / "ws"
    (ws / ".agentgraph").mkdir(parents=True)
    server_entry = {"command": sys.executable, "args": [str(MCP_SERVERS / "demo.py")]}
    (ws / ".agentgraph" / "mcp.json").write_text(json.dumps({"mcpServers": {"demo": server_entry}}))
    if rule:
        settings = Settings(_env_file=None, AGENTGRAPH_HOME=str(home / ".agentgraph"))
        assert add_rule(settings.home, str(ws), Rule("mcp__demo__add", "*"))
    with FakeOpenAIServer([_adds]) as server:
        env = server_env(
            home,
            server.url,
            KEY,
            AGENTGRAPH_MCP_TRUST_WORKSPACE="true",
            AGENTGRAPH_MCP_START_TIMEOUT_S="60",
            AGENTGRAPH_PERMISSION_MODE=mode,
        )
        res = run_cli(["run", "add", "--json"], cwd=ws, env=env)
    assert res.returncode == 0, res.stderr
    assert seen in json.loads(res.stdout)["answer"]


def _tool_names(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools") or []]


def test_present_plan_is_bound_from_the_first_plan_mode_turn_on(
    home: Path, workspace: Path
) -> None:
    # Its schema went out with every request of sessions that never plan; once the
    # session enters plan mode it stays, so the tool list changes at most once.
    with FakeOpenAIServer([{"content": "ok"}]) as server:
        env = server_env(home, server.url, KEY)
        for mode in ("auto", "ask", "plan", "auto"):
            res = run_cli(
                ["run", "-t", "p1", "--permission-mode", mode, "look"], cwd=workspace, env=env
            )
            assert res.returncode == 0, res.stderr
        bound = ["present_plan" in _tool_names(body) for body in server.requests]
        first_names = _tool_names(server.requests[0])
    assert bound == [False, False, True, True], bound
    assert "read_file" in first_names
