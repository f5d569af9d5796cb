"""call_subagent through the real graph: isolation, parallelism, failures, limits."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from agentgraph.capabilities.subagents import SUBAGENT_RESULT_MAX_TOKENS, SUBAGENT_TOOL
from agentgraph.config import Settings
from agentgraph.persistence import Store, open_store
from agentgraph.runtime.history import validate_history
from agentgraph.runtime.nodes.limits import RUNAWAY_REPEATS
from agentgraph.runtime.runctx import RunContext
from agentgraph.session.agent import Agent
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.scripts import ai_text, ai_tools, tool_call

Route = Callable[[list[BaseMessage]], AIMessage | str]
BARRIER_TIMEOUT_S = 20
POLL_S = 0.01


def task_of(messages: list[BaseMessage]) -> str:
    """The first human message: the user's request, or a subagent's task."""
    return str(next(m.content for m in messages if isinstance(m, HumanMessage)))


def results(messages: list[BaseMessage]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


def outcome_of(message: ToolMessage) -> dict[str, Any]:
    """A call_subagent result: its artifact's facts, plus the text after the status line."""
    status, _, text = message.text.partition("\n")
    assert status.startswith("[") and status.endswith("]"), status
    assert isinstance(message.artifact, dict)
    return {**message.artifact, "result": text}


def router(routes: dict[str, Route]) -> ScriptedChatModel:
    """One shared model whose reply depends on whose conversation it is (by task prefix)."""

    def reply(messages: list[BaseMessage]) -> AIMessage | str:
        task = task_of(messages)
        for prefix, route in routes.items():
            if task.startswith(prefix):
                return route(messages)
        raise AssertionError(f"no route for task {task!r}")

    return ScriptedChatModel([reply], on_exhausted="repeat_last")


@pytest.fixture
def opened(settings: Settings) -> Iterator[Store]:
    with open_store(settings) as store:
        yield store


def make_agent(settings: Settings, store: Store, model: ScriptedChatModel) -> Agent:
    return Agent(settings, store, model=model, sleep=lambda _s: None)


def reader_route(barrier: threading.Barrier | None = None) -> Route:
    """A subagent that reads the file named in its task, then reports its content."""

    def route(messages: list[BaseMessage]) -> AIMessage | str:
        done = results(messages)
        if not done:
            if barrier is not None:
                barrier.wait()  # both subagents must be in flight at once
            name = task_of(messages).split()[-1]
            return ai_tools(("read_file", {"path": name}))
        return f"report: {done[-1].content}"

    return route


def test_two_parallel_subagents_keep_the_parent_history_clean(
    settings: Settings, opened: Store, workspace: Path
) -> None:
    (workspace / "alpha.txt").write_text("ALPHA-SECRET-CONTENT\n")
    (workspace / "beta.txt").write_text("BETA-SECRET-CONTENT\n")
    barrier = threading.Barrier(2, timeout=BARRIER_TIMEOUT_S)

    def parent(messages: list[BaseMessage]) -> AIMessage | str:
        if not results(messages):
            return ai_tools(
                (SUBAGENT_TOOL, {"task": "read the file alpha.txt"}),
                (SUBAGENT_TOOL, {"task": "read the file beta.txt"}),
            )
        return "both: " + " | ".join(str(r.content) for r in results(messages))

    model = router({"delegate": parent, "read the file": reader_route(barrier)})
    agent = make_agent(settings, opened, model)
    events: list[dict[str, Any]] = []
    result = agent.run_turn("parent", "delegate both reads", workspace, on_event=events.append)

    history = agent.messages("parent")
    assert validate_history(history) == []
    tool_results = results(history)
    # The parent holds exactly the two JSON results, none of the subagents' tool traffic.
    assert [r.name for r in tool_results] == [SUBAGENT_TOOL, SUBAGENT_TOOL]
    payloads = [outcome_of(r) for r in tool_results]
    for payload, message in zip(payloads, tool_results, strict=True):
        assert set(payload) == {
            "ok",
            "result",
            "context_id",
            "thread_id",
            "loops",
            "elapsed_s",
            "input_tokens",
            "output_tokens",
        }
        # The model reads a status line, then the subagent's own text: no JSON.
        assert message.text.startswith(f"[{payload['context_id']} done · 2 steps]\n")
        assert payload["ok"] is True
        assert payload["context_id"].startswith("subagent-")
        assert len(payload["context_id"]) == len("subagent-") + 8
        assert payload["loops"] == 2
    assert "ALPHA-SECRET-CONTENT" in payloads[0]["result"]
    assert "BETA-SECRET-CONTENT" in payloads[1]["result"]
    assert not any(m for m in history if isinstance(m, ToolMessage) and m.name == "read_file")
    assert "ALPHA-SECRET-CONTENT" in result.answer

    # Both subagent threads exist in the store with their own full histories.
    children = opened.index.children("parent")
    assert sorted(c.context_id for c in children) == sorted(p["context_id"] for p in payloads)
    for child in children:
        assert child.parent_thread_id == "parent"
        assert child.thread_id.startswith(child.context_id.removeprefix("subagent-"))
        child_history = agent.messages(child.thread_id)
        assert [type(m).__name__ for m in child_history] == [
            "HumanMessage",
            "AIMessage",
            "ToolMessage",
            "AIMessage",
        ]
        assert child.message_count == 4
        values = agent.graph.get_state(agent.config(child.thread_id)).values
        assert values["context_id"] == child.context_id
        assert values["parent_context"] == "main"
    # Each subagent's first call saw a fresh context: the system prompt and its task only.
    first_child_calls = [
        c for c in model.calls if task_of(c).startswith("read the file") and len(c) == 2
    ]
    assert len(first_child_calls) == 2
    assert {e["type"] for e in events} >= {"subagent_started", "subagent_tool", "subagent_done"}


def test_crashing_subagent_returns_ok_false_and_the_parent_continues(
    settings: Settings, opened: Store, workspace: Path
) -> None:
    def parent(messages: list[BaseMessage]) -> AIMessage | str:
        if not results(messages):
            return ai_tools((SUBAGENT_TOOL, {"task": "crash now"}))
        return "parent carried on"

    def crash(_messages: list[BaseMessage]) -> AIMessage | str:
        raise RuntimeError("model exploded")

    agent = make_agent(settings, opened, router({"go": parent, "crash": crash}))
    result = agent.run_turn("p", "go", workspace)
    payload = outcome_of(results(agent.messages("p"))[0])
    assert payload["ok"] is False
    assert "crashed" in payload["result"] and "model exploded" in payload["result"]
    assert results(agent.messages("p"))[0].status == "error"
    assert result.answer == "parent carried on"


def test_loop_cap_and_excluded_tools(settings: Settings, opened: Store, workspace: Path) -> None:
    def parent(messages: list[BaseMessage]) -> AIMessage | str:
        if not results(messages):
            call = tool_call(
                SUBAGENT_TOOL,
                {"task": "loop forever", "max_loops": 2, "exclude_tools": ["run_bash"]},
            )
            return ai_tools(call)
        return "ok"

    def looper(_messages: list[BaseMessage]) -> AIMessage | str:
        return ai_tools(("now", {}))

    model = router({"go": parent, "loop": looper})
    agent = make_agent(settings, opened, model)
    agent.run_turn("p", "go", workspace)
    payload = outcome_of(results(agent.messages("p"))[0])
    assert payload["ok"] is False
    assert "loop cap (2 steps)" in payload["result"]
    child_tools = [
        tools
        for call, tools in zip(model.calls, model.bound_tools, strict=True)
        if task_of(call) == "loop forever" and tools
    ]
    assert child_tools and all("run_bash" not in t and "now" in t for t in child_tools)


def test_a_subagent_going_round_stops_with_ok_false(
    settings: Settings, opened: Store, workspace: Path
) -> None:
    (workspace / "same.txt").write_text("unchanged\n")

    def parent(messages: list[BaseMessage]) -> AIMessage | str:
        if not results(messages):
            return ai_tools(tool_call(SUBAGENT_TOOL, {"task": "reread same.txt", "max_loops": 50}))
        return "ok"

    def rereader(messages: list[BaseMessage]) -> AIMessage | str:
        if results(messages) and results(messages)[-1].text.startswith("not executed"):
            return "I was going round"
        return ai_tools(("read_file", {"path": "same.txt"}))

    model = router({"go": parent, "reread": rereader})
    agent = make_agent(settings, opened, model)
    agent.run_turn("p", "go", workspace)
    payload = outcome_of(results(agent.messages("p"))[0])
    assert payload["ok"] is False
    assert "same tool calls returned the same output" in payload["result"]
    assert "I was going round" in payload["result"]
    child_calls = [call for call in model.calls if task_of(call) == "reread same.txt"]
    # Three reads, then the ask for an answer: far below its loop cap of 50.
    assert len(child_calls) == RUNAWAY_REPEATS + 2


def test_depth_limit(make_settings: Callable[..., Settings], workspace: Path) -> None:
    settings = make_settings(AGENTGRAPH_SUBAGENT_MAX_DEPTH="1")

    def parent(messages: list[BaseMessage]) -> AIMessage | str:
        return ai_tools((SUBAGENT_TOOL, {"task": "nest again"})) if not results(messages) else "p"

    def child(messages: list[BaseMessage]) -> AIMessage | str:
        # Tries to nest although call_subagent is not offered at the maximum depth.
        if not results(messages):
            return ai_tools((SUBAGENT_TOOL, {"task": "nest again deeper"}))
        return "child: " + str(results(messages)[-1].content)

    model = router({"go": parent, "nest again": child})
    with open_store(settings) as store:
        agent = make_agent(settings, store, model)
        agent.run_turn("p", "go", workspace)
        payload = outcome_of(results(agent.messages("p"))[0])
        assert payload["ok"] is True
        assert "not allowed" in payload["result"]
        child_bound = [
            t
            for c, t in zip(model.calls, model.bound_tools, strict=True)
            if task_of(c) == "nest again"
        ]
        assert child_bound and all(SUBAGENT_TOOL not in t for t in child_bound)
        # Only one level of subagent threads was created.
        (only,) = store.index.children("p")
        assert store.index.children(only.thread_id) == []
        # The runner itself refuses a call from a thread already at the limit.
        context = RunContext(workspace_path=str(workspace), thread_id=only.thread_id)
        refused = agent.subagents.run("anything", {}, context)
        assert refused.ok is False and "nest 1 level" in refused.result


def test_result_is_capped_in_tokens(settings: Settings, opened: Store, workspace: Path) -> None:
    chatty = " ".join(f"word{i}" for i in range(20_000))

    def parent(messages: list[BaseMessage]) -> AIMessage | str:
        return ai_tools((SUBAGENT_TOOL, {"task": "talk a lot"})) if not results(messages) else "p"

    agent = make_agent(settings, opened, router({"go": parent, "talk": lambda _m: ai_text(chatty)}))
    agent.run_turn("p", "go", workspace)
    payload = outcome_of(results(agent.messages("p"))[0])
    counted = agent.deps.counter.count_text(payload["result"])
    assert counted <= SUBAGENT_RESULT_MAX_TOKENS
    assert counted < agent.deps.counter.count_text(chatty) // 5
    assert "tokens truncated" in payload["result"] and "word0 " in payload["result"]
    # The full answer stays in the subagent's own thread.
    (child,) = opened.index.children("p")
    assert agent.messages(child.thread_id)[-1].content == chatty


def test_timeout_returns_ok_false(make_settings: Callable[..., Settings], workspace: Path) -> None:
    settings = make_settings(AGENTGRAPH_SUBAGENT_TIMEOUT_S="0.3")
    release = threading.Event()

    def parent(messages: list[BaseMessage]) -> AIMessage | str:
        return ai_tools((SUBAGENT_TOOL, {"task": "hang"})) if not results(messages) else "p"

    def hang(_messages: list[BaseMessage]) -> AIMessage | str:
        release.wait(BARRIER_TIMEOUT_S)
        return ai_tools(("now", {}))

    with open_store(settings) as store:
        agent = make_agent(settings, store, router({"go": parent, "hang": hang}))
        result = agent.run_turn("p", "go", workspace)
        payload = outcome_of(results(agent.messages("p"))[0])
        assert payload["ok"] is False and "timed out" in payload["result"]
        assert result.answer == "p"
        release.set()
        _join_subagent_threads(payload["context_id"])
        # The abandoned subagent stopped at its next step instead of running on.
        (child,) = store.index.children("p")
        assert not any(isinstance(m, ToolMessage) for m in agent.messages(child.thread_id))


def _wait_until(condition: Callable[[], bool]) -> None:
    """Return once ``condition()`` holds (checked every POLL_S, at most BARRIER_TIMEOUT_S)."""
    deadline = time.monotonic() + BARRIER_TIMEOUT_S
    while not condition():
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(POLL_S)


def _join_subagent_threads(context_id: str) -> None:
    for thread in threading.enumerate():
        if thread.name == context_id:
            thread.join(BARRIER_TIMEOUT_S)
            assert not thread.is_alive()


@pytest.mark.skipif(os.name != "posix", reason="sends SIGINT to itself")
def test_ctrl_c_cancels_running_subagents(
    settings: Settings, opened: Store, workspace: Path
) -> None:
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals need the main thread")
    interrupted = threading.Event()

    def parent(messages: list[BaseMessage]) -> AIMessage | str:
        return ai_tools((SUBAGENT_TOOL, {"task": "work slowly"})) if not results(messages) else "p"

    def slow(messages: list[BaseMessage]) -> AIMessage | str:
        if not interrupted.is_set():
            interrupted.set()
            before = agent.subagents.generation
            os.kill(os.getpid(), signal.SIGINT)  # the user presses Ctrl-C mid-subagent
            # The model call is still in flight until the main thread has run the
            # Ctrl-C handler (late under load): wait for the runner's cancel, so the
            # subagent cannot race ahead to a second step before the handler runs.
            _wait_until(lambda: agent.subagents.generation != before)
        return ai_tools(("now", {}))

    agent = make_agent(settings, opened, router({"go": parent, "work": slow}))
    with pytest.raises(KeyboardInterrupt):
        agent.run_turn("p", "go", workspace)
    (child,) = opened.index.children("p")
    _join_subagent_threads(child.context_id)
    # The subagent stopped after the step in flight: one model call, no further loops.
    child_calls = [c for c in agent.deps.model.calls if task_of(c) == "work slowly"]  # type: ignore[attr-defined]
    assert len(child_calls) == 1
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_answer_cut_at_the_output_limit_reaches_the_parent_marked_as_cut(
    settings: Settings, opened: Store, workspace: Path
) -> None:
    """A subagent whose final answer stopped at its output token limit: the parent gets
    the answer with a note that it stops there and where the subagent's session is,
    not a short answer it would take as whole."""
    cut = AIMessage(
        "Found three callers: a.py, b.py and", response_metadata={"finish_reason": "length"}
    )

    def parent(messages: list[BaseMessage]) -> AIMessage | str:
        return (
            ai_tools((SUBAGENT_TOOL, {"task": "find the callers"}))
            if not results(messages)
            else "p"
        )

    agent = make_agent(settings, opened, router({"go": parent, "find": lambda _m: cut}))
    agent.run_turn("p", "go", workspace)
    payload = outcome_of(results(agent.messages("p"))[0])
    (child,) = opened.index.children("p")
    assert payload["result"].startswith("Found three callers: a.py, b.py and")
    assert "output token limit" in payload["result"] and child.thread_id in payload["result"]
