"""Approval answers as a LangGraph server client sends them, through the real graph and a
real model client on the fake server: a reason, "always", an accepted or declined plan."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentgraph.config import Settings
from agentgraph.persistence import Store, open_store
from agentgraph.security.permission_rules import Rule, add_rule, load_rules
from agentgraph.session.agent import Agent, TurnResult
from tests.fakes.openai_server import FakeOpenAIServer

KEY = "sk-test-secret-0123456789abcdef"


def _drain(events: Any) -> TurnResult:
    seen = list(events)
    assert seen[-1]["type"] == "turn_end"
    result: TurnResult = seen[-1]["result"]
    return result


def _tool_results(body: dict[str, Any]) -> list[str]:
    return [str(m.get("content")) for m in body["messages"] if m.get("role") == "tool"]


def _call(name: str, **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": args}]}


def _settings(
    make_settings: Callable[..., Settings], server: FakeOpenAIServer, **env: Any
) -> Settings:
    return make_settings(OPENAI_BASE_URL=server.url, OPENAI_API_KEY=KEY, **env)


def _command_then_echo(command: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def reply(body: dict[str, Any]) -> dict[str, Any]:
        results = _tool_results(body)
        if not results:
            return _call("run_bash", command=command)
        return {"content": "SAW: " + results[-1]}

    return reply


def test_a_decline_reason_reaches_the_model(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    with FakeOpenAIServer([_command_then_echo("touch x.txt")], require_key=KEY) as server:
        settings = _settings(make_settings, server, AGENTGRAPH_PERMISSION_MODE="ask")
        with open_store(settings) as store:
            agent = Agent(settings, store)
            (question,) = _drain(agent.stream_turn("t", "go", workspace)).pending_approvals
            assert question["setting"] == "AGENTGRAPH_PERMISSION_MODE"
            answer = {"approved": False, "reason": "use the Makefile target instead"}
            done = _drain(agent.stream_resume("t", workspace, {question["id"]: answer}))
        assert server.violations == []
    assert not (workspace / "x.txt").exists()
    assert "The user said: use the Makefile target instead" in done.answer, done.answer


def test_an_always_answer_stores_the_rule_and_the_next_session_does_not_ask(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    with FakeOpenAIServer([_command_then_echo("touch one.txt")], require_key=KEY) as server:
        settings = _settings(make_settings, server, AGENTGRAPH_PERMISSION_MODE="ask")
        with open_store(settings) as store:
            agent = Agent(settings, store)
            (question,) = _drain(agent.stream_turn("t1", "go", workspace)).pending_approvals
            assert question["rule"] == {"tool": "run_bash", "pattern": "touch"}
            answer = {"approved": True, "always": True}
            _drain(agent.stream_resume("t1", workspace, {question["id"]: answer}))
            assert (workspace / "one.txt").exists()
            assert load_rules(settings.home, str(workspace)) == [Rule("run_bash", "touch")]
            (workspace / "one.txt").unlink()
            again = _drain(agent.stream_turn("t2", "go", workspace))
        assert server.violations == []
    assert again.pending_approvals == []
    assert (workspace / "one.txt").exists()


def _plan_then_write(body: dict[str, Any]) -> dict[str, Any]:
    results = _tool_results(body)
    if not results:
        return _call("write_file", path="planned.txt", content="planned\n")
    last = results[-1]
    if "plan mode" in last and "did not run" in last:
        return _call("present_plan", plan="1. write planned.txt")
    if last.startswith("The user accepted the plan"):
        return _call("write_file", path="planned.txt", content="planned\n")
    return {"content": "SAW: " + last}


def test_an_accepted_plan_switches_the_mode_and_the_edit_runs_after_it(
    make_settings: Callable[..., Settings], store: Store, workspace: Path
) -> None:
    with FakeOpenAIServer([_plan_then_write], require_key=KEY) as server:
        settings = _settings(make_settings, server, AGENTGRAPH_PERMISSION_MODE="plan")
        agent = Agent(settings, store)
        (question,) = _drain(agent.stream_turn("t", "plan it", workspace)).pending_approvals
        assert question["tool"] == "present_plan" and question["plan"] == "1. write planned.txt"
        assert not (workspace / "planned.txt").exists()  # refused before the plan
        answer = {"approved": True, "mode": "ask"}  # the client picks the next mode
        asked = _drain(agent.stream_resume("t", workspace, {question["id"]: answer}))
        assert agent.permission_mode("t") == "ask"
        (edit,) = asked.pending_approvals  # ask mode: the edit asks now
        assert edit["tool"] == "write_file" and not (workspace / "planned.txt").exists()
        done = _drain(agent.stream_resume("t", workspace, {edit["id"]: True}))
        assert server.violations == []
    assert (workspace / "planned.txt").read_text() == "planned\n"
    assert done.answer.startswith("SAW:")


def test_an_accepted_plan_goes_to_accept_edits_by_default(
    make_settings: Callable[..., Settings], store: Store, workspace: Path
) -> None:
    with FakeOpenAIServer([_plan_then_write], require_key=KEY) as server:
        settings = _settings(make_settings, server, AGENTGRAPH_PERMISSION_MODE="plan")
        agent = Agent(settings, store)
        (question,) = _drain(agent.stream_turn("t", "plan it", workspace)).pending_approvals
        done = _drain(agent.stream_resume("t", workspace, {question["id"]: "y"}))
    assert done.pending_approvals == []  # accept-edits: the edit did not ask
    assert (workspace / "planned.txt").read_text() == "planned\n"
    assert agent.permission_mode("t") == "accept-edits"


def test_a_declined_plan_keeps_plan_mode_and_the_model_gets_the_reason(
    make_settings: Callable[..., Settings], store: Store, workspace: Path
) -> None:
    with FakeOpenAIServer([_plan_then_write], require_key=KEY) as server:
        settings = _settings(make_settings, server, AGENTGRAPH_PERMISSION_MODE="plan")
        agent = Agent(settings, store)
        (question,) = _drain(agent.stream_turn("t", "plan it", workspace)).pending_approvals
        answer = {"approved": False, "reason": "write it under docs/ instead"}
        done = _drain(agent.stream_resume("t", workspace, {question["id"]: answer}))
    assert not (workspace / "planned.txt").exists()
    assert "still in plan mode" in done.answer and "docs/ instead" in done.answer, done.answer
    assert agent.permission_mode("t") == "plan"


def test_a_session_mode_survives_a_new_agent(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    with FakeOpenAIServer([_command_then_echo("touch x.txt")], require_key=KEY) as server:
        settings = _settings(make_settings, server)
        with open_store(settings) as store:
            Agent(settings, store).set_permission_mode("t", "ask")
        with open_store(settings) as store:
            agent = Agent(settings, store)
            assert agent.permission_mode("t") == "ask"
            result = _drain(agent.stream_turn("t", "go", workspace))
        assert server.violations == []
    (question,) = result.pending_approvals
    assert question["tool"] == "run_bash"
    assert not (workspace / "x.txt").exists()


def _two_commands(body: dict[str, Any]) -> dict[str, Any]:
    """Two commands in one step; then the results are reported back."""
    results = _tool_results(body)
    if not results:
        return {
            "tool_calls": [
                {"name": "run_bash", "arguments": {"command": "touch a.txt"}},
                {"name": "run_bash", "arguments": {"command": "echo b > b.txt"}},
            ]
        }
    return {"content": "SAW: " + " | ".join(results)}


def test_an_answer_that_reaches_another_calls_question_runs_nothing(
    make_settings: Callable[..., Settings], store: Store, workspace: Path
) -> None:
    """A rule made elsewhere while the first question waits: on resume that call no
    longer asks, so the yes given for it reaches the second question by position."""
    with FakeOpenAIServer([_two_commands], require_key=KEY) as server:
        settings = _settings(make_settings, server, AGENTGRAPH_PERMISSION_MODE="ask")
        agent = Agent(settings, store)
        (first,) = _drain(agent.stream_turn("t", "go", workspace)).pending_approvals
        assert first["command"] == "touch a.txt"
        assert add_rule(settings.home, str(workspace), Rule("run_bash", "touch"))  # elsewhere
        yes = {"approved": True, "tool_call_id": first["tool_call_id"]}
        done = _drain(agent.stream_resume("t", workspace, {first["id"]: yes}))
        assert server.violations == []
    assert (workspace / "a.txt").exists()  # the rule allows it
    assert not (workspace / "b.txt").exists()  # never approved
    assert "was given for another call" in done.answer, done.answer
