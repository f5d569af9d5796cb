"""Where a turn's events go: the caller's thread, in order, as they happen; none lost."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain_core.messages import AIMessage

from agentgraph.config import Settings
from agentgraph.persistence import open_store
from agentgraph.session.agent import Agent
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.scripts import ai_text, ai_tools

# Hang guard only: how long the model's second step waits for the callback to fail.
FAILURE_WAIT_S = 30.0


def test_every_event_reaches_on_event_in_the_callers_thread_in_order(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """Two writes in one step send their diffs from the tools node's worker threads; the
    caller still gets every event in its own thread, each diff before the results."""
    writes = ai_tools(
        ("write_file", {"path": "a.txt", "content": "a\n"}),
        ("write_file", {"path": "b.txt", "content": "b\n"}),
    )
    model = ScriptedChatModel([writes, ai_text("both written")])
    seen: list[tuple[str, threading.Thread]] = []
    settings = make_settings()
    with open_store(settings) as store:
        agent = Agent(settings, store, model=model, sleep=lambda _s: None)
        result = agent.run_turn(
            "t",
            "write two files",
            workspace,
            lambda e: seen.append((e["type"], threading.current_thread())),
        )
    assert result.answer == "both written"
    assert {thread for _, thread in seen} == {threading.current_thread()}
    kinds = [kind for kind, _ in seen]
    assert kinds.count("diff") == 2 and kinds.count("tool_result") == 2
    assert max(i for i, k in enumerate(kinds) if k == "diff") < kinds.index("tool_result")
    assert kinds.index("token") < kinds.index("answer") and kinds[-1] == "turn_end"


def test_a_failing_on_event_is_raised_to_the_caller_and_cancels_the_turn(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    failed = threading.Event()

    def after_the_failure(_messages: Any) -> AIMessage:
        # The turn is still running when the callback fails: ended already, it has
        # nothing left to cancel (under load the worker could finish the whole turn
        # before this thread handled its first token).
        failed.wait(FAILURE_WAIT_S)
        return ai_tools(("list_dir", {}))

    model = ScriptedChatModel(
        [ai_tools(("list_dir", {}), content="looking"), after_the_failure, ai_text("never")]
    )

    def broken(event: dict[str, Any]) -> None:
        if event["type"] == "token":  # sent while the model streams, not after its step
            failed.set()
            raise ValueError("the screen is gone")

    settings = make_settings()
    with open_store(settings) as store:
        agent = Agent(settings, store, model=model, sleep=lambda _s: None)
        with pytest.raises(ValueError, match="the screen is gone"):
            agent.run_turn("t", "look around", workspace, broken)
        assert agent.cancelled.is_set()  # the turn was told to stop


def test_events_of_a_failing_step_come_before_its_error(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """Without a live callback, events are yielded after their step: a step that fails
    still yields what it sent (a retry notice) before the error is raised."""
    dropped = httpx.RemoteProtocolError("peer closed connection without sending complete body")
    model = ScriptedChatModel([dropped, dropped], on_exhausted="repeat_last")
    settings = make_settings(AGENTGRAPH_PROVIDER_MAX_RETRIES="1")
    events: list[dict[str, Any]] = []
    with open_store(settings) as store:
        agent = Agent(settings, store, model=model, sleep=lambda _s: None)
        with pytest.raises(Exception):  # noqa: B017 - the typed provider error
            for event in agent.stream_turn("t", "hello", workspace):
                events.append(event)
    assert "retry" in [e["type"] for e in events], events
    assert not any(isinstance(e, AIMessage) for e in events)


def test_an_event_outside_a_graph_run_goes_nowhere_without_an_error() -> None:
    from langchain_core.runnables import RunnableLambda

    from agentgraph.middleware.events import emit, event_sink

    emit({"type": "notice", "text": "no run"})  # no runnable either
    assert RunnableLambda(lambda _x: event_sink()).invoke(None) is None
    RunnableLambda(lambda _x: emit({"type": "notice", "text": "a runnable"})).invoke(None)
