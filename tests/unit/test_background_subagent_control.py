"""Background subagents through the real graph: cancel by id, the limit, Ctrl-C, /agents."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from agentgraph.capabilities.subagent_tasks import SUBAGENT_TASK_TOOL
from agentgraph.capabilities.subagents import SUBAGENT_TOOL, SubagentRecord
from agentgraph.config import Settings
from agentgraph.frontends.cli.slash_agents import agent_lines
from agentgraph.persistence import open_store
from tests.fakes.scripts import ai_tools, tool_call
from tests.unit.test_subagents import BARRIER_TIMEOUT_S, make_agent, results, router

POLL_S = 0.02


def _task_id(messages: list[BaseMessage]) -> str:
    for message in results(messages):
        found = re.search(r"\[(subagent-[0-9a-f]{8}) started in the background\]", message.text)
        if found:
            return found.group(1)
    raise AssertionError("no background start")


def _hang(release: threading.Event) -> Callable[[list[BaseMessage]], AIMessage | str]:
    def route(_messages: list[BaseMessage]) -> AIMessage | str:
        release.wait(BARRIER_TIMEOUT_S)
        return ai_tools(("now", {}))

    return route


def _wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + BARRIER_TIMEOUT_S
    while not condition():
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(POLL_S)


def test_cancel_by_id_stops_a_background_subagent(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    release = threading.Event()

    def parent(messages: list[BaseMessage]) -> AIMessage | str:
        done = results(messages)
        if not done:
            return ai_tools(tool_call(SUBAGENT_TOOL, {"task": "hang on", "background": True}))
        if len(done) == 1:
            args = {"task_id": _task_id(messages), "action": "cancel"}
            return ai_tools(tool_call(SUBAGENT_TASK_TOOL, args))
        return "after cancel: " + done[-1].text

    settings = make_settings()
    with open_store(settings) as store:
        agent = make_agent(settings, store, router({"go": parent, "hang": _hang(release)}))
        try:
            result = agent.run_turn("p", "go", workspace)
        finally:
            release.set()
            assert agent.background.join(BARRIER_TIMEOUT_S)
        cancelled = results(agent.messages("p"))[-1]
        assert cancelled.name == SUBAGENT_TASK_TOOL and cancelled.status == "error"
        assert "subagent cancelled" in cancelled.text
        assert result.answer.startswith("after cancel: [subagent-")
        (record,) = agent.subagents.records.values()
        assert record.status == "cancelled" and record.background


def test_at_most_the_limit_run_at_once(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    release = threading.Event()

    def parent(messages: list[BaseMessage]) -> AIMessage | str:
        if not results(messages):
            return ai_tools(
                *[
                    tool_call(SUBAGENT_TOOL, {"task": f"hang {n}", "background": True})
                    for n in range(3)
                ]
            )
        return "started"

    settings = make_settings(AGENTGRAPH_SUBAGENT_MAX_BACKGROUND="2")
    with open_store(settings) as store:
        agent = make_agent(settings, store, router({"go": parent, "hang": _hang(release)}))
        try:
            result = agent.run_turn("p", "go", workspace)
            starts = results(agent.messages("p"))
            # Parallel calls in one response: two start, the third is refused.
            assert sorted(m.status for m in starts) == ["error", "success", "success"]
            refused = next(m for m in starts if m.status == "error")
            assert "at most 2, AGENTGRAPH_SUBAGENT_MAX_BACKGROUND" in refused.text
            # The turn ended with both still running: listed, not lost.
            assert result.answer == "started"
            assert len(agent.background.running()) == 2
        finally:
            release.set()
            assert agent.background.join(BARRIER_TIMEOUT_S)


def test_ctrl_c_cancels_background_subagents(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    release = threading.Event()

    def parent(messages: list[BaseMessage]) -> AIMessage | str:
        if not results(messages):
            return ai_tools(tool_call(SUBAGENT_TOOL, {"task": "hang on", "background": True}))
        return "started"

    settings = make_settings()
    with open_store(settings) as store:
        agent = make_agent(settings, store, router({"go": parent, "hang": _hang(release)}))
        events: list[dict] = []
        try:
            agent.run_turn("p", "go", workspace, on_event=events.append)
            listed = next(e for e in events if e["type"] == "subagent_tasks")
            assert [t["status"] for t in listed["tasks"]] == ["running"]
            agent.cancel()  # what the REPL's Ctrl-C calls
            (record,) = agent.subagents.records.values()
            _wait_for(lambda: record.outcome is not None)
        finally:
            release.set()
            assert agent.background.join(BARRIER_TIMEOUT_S)
        assert record.outcome is not None and "subagent cancelled" in record.outcome.result


def test_agents_lines_show_status_time_calls_and_tokens() -> None:
    running = SubagentRecord("subagent-00000001", "t1", "p", "c1", "read the docs", True)
    running.tool_calls = 1
    from agentgraph.capabilities.subagents import SubagentOutcome

    ended = SubagentRecord("subagent-00000002", "t2", "p", "c2", "count files")
    ended.outcome = SubagentOutcome(True, "3", "subagent-00000002", "t2", 2, 4.25, 1000, 234)
    ended.tool_calls = 3
    lines = agent_lines([ended, running])
    assert lines[0].startswith("subagent-00000001 (background) running · ")
    assert lines[0].endswith("1 tool call — read the docs")
    assert lines[1] == "subagent-00000002 done · 4.2s · 3 tool calls · 1,234 tokens — count files"


def test_a_subagent_result_message_is_not_a_background_start() -> None:
    from agentgraph.capabilities.subagent_tasks import background_starts

    plain = ToolMessage("[subagent-1 done · 1 step]\nx", tool_call_id="c", name=SUBAGENT_TOOL)
    assert background_starts([plain]) == []
