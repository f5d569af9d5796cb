"""The session service: a stored conversation replayed as events, the context chart's
points (model calls, compactions), and a turn with an approval through the real graph."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from pydantic import ValidationError

from agentgraph.capabilities.recall.memory import MemoryRefused
from agentgraph.config import Settings
from agentgraph.context.compaction import marker
from agentgraph.persistence import Store
from agentgraph.protocol.events import (
    Answer,
    Approval,
    BaseEvent,
    Compaction,
    Error,
    TextDelta,
    ToolCall,
    ToolResult,
    TurnEnd,
    UserMessage,
)
from agentgraph.protocol.ops import parse_op
from agentgraph.session.agent import Agent
from agentgraph.session.service import (
    SessionService,
    TurnRefused,
    call_points,
    compaction_points,
    replay,
)
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.scripts import ai_text, ai_tools, tool_call

TURN_WAIT_S = 30.0


def _usage(prompt: int, cached: int = 0) -> Any:
    return {
        "input_tokens": prompt,
        "output_tokens": 5,
        "total_tokens": prompt + 5,
        "input_token_details": {"cache_read": cached},
    }


def _history() -> list[Any]:
    call = {"name": "read_file", "args": {"path": "a.py", "token": "s3cret"}, "id": "c1"}
    return [
        HumanMessage("read a.py", id="h1"),
        AIMessage("Reading it.", tool_calls=[call], usage_metadata=_usage(100), id="a1"),
        ToolMessage("x = 1", tool_call_id="c1", name="read_file", id="t1"),
        SystemMessage(
            "[compaction boundary: auto]",
            id="b1",
            additional_kwargs=marker(
                "compact_boundary", trigger="auto", tokens_before=900, tokens_after=90
            ),
        ),
        HumanMessage("summary of the work", id="s1", additional_kwargs=marker("summary")),
        AIMessage("It sets x.", usage_metadata=_usage(120, cached=64), id="a2"),
        AIMessage("moved copy: no usage", id="a3"),
    ]


def test_a_stored_conversation_replays_as_the_live_events() -> None:
    events = replay(_history(), lambda args: {**args, "token": "[REDACTED]"})
    assert [type(e) for e in events] == [
        UserMessage,
        TextDelta,
        ToolCall,
        ToolResult,
        Compaction,
        Answer,
        Answer,
    ]
    call = events[2]
    assert isinstance(call, ToolCall) and call.args == {"path": "a.py", "token": "[REDACTED]"}
    compaction = events[4]
    assert isinstance(compaction, Compaction) and compaction.tokens_after == 90
    # The summary a compaction wrote is not a user message.
    assert not any(isinstance(e, UserMessage) and "summary" in e.text for e in events)


def test_the_chart_has_a_point_per_reported_call_and_the_compaction_between() -> None:
    history = _history()
    assert call_points(history) == [
        {"input_tokens": 100, "output_tokens": 5, "cached_tokens": 0},
        {"input_tokens": 120, "output_tokens": 5, "cached_tokens": 64},
    ]
    assert compaction_points(history) == [
        {"call": 1, "trigger": "auto", "tokens_before": 900, "tokens_after": 90}
    ]


def _collect(service: SessionService, thread_id: str) -> tuple[list[BaseEvent], threading.Event]:
    """Subscribe to ``thread_id``: its events, and a flag set when a turn ends."""
    seen: list[BaseEvent] = []
    ended = threading.Event()

    def on(event: BaseEvent) -> None:
        seen.append(event)
        if isinstance(event, TurnEnd | Error):
            ended.set()

    service.subscribe(thread_id, on)
    return seen, ended


def test_a_turn_stopped_at_an_approval_is_answered_and_the_lease_freed_after_each_part(
    make_settings: Callable[..., Settings], store: Store, workspace: Path
) -> None:
    settings = make_settings(AGENTGRAPH_EDITS="ask")
    edit = tool_call("write_file", {"path": "a.txt", "content": "hi\n"}, id="w1")
    agent = Agent(settings, store, model=ScriptedChatModel([ai_tools(edit), ai_text("written")]))
    service = SessionService(agent, store, workspace)
    seen, ended = _collect(service, "t1")

    assert service.submit("write a.txt", "t1") == "t1"
    assert ended.wait(TURN_WAIT_S)
    kinds = [e.type for e in seen]
    assert kinds[0] == "user_message" and kinds[-2:] == ["approval", "turn_end"]
    question = seen[-2]
    assert isinstance(question, Approval) and question.path == "a.txt"
    assert not (workspace / "a.txt").exists()
    _wait_free(service, store, "t1")
    # Another submit while the question is open, or while a turn runs, is refused.
    ended.clear()
    service.answer("t1", {question.id: True})
    with pytest.raises(TurnRefused):
        service.submit("again", "t1")
    assert ended.wait(TURN_WAIT_S)
    assert (workspace / "a.txt").read_text() == "hi\n"
    assert [e.type for e in seen if e.type in ("diff", "answer")] == ["diff", "answer"]
    _wait_free(service, store, "t1")
    replayed = service.resume("t1")["events"]
    assert [e["type"] for e in replayed] == ["user_message", "tool_call", "tool_result", "answer"]


def _wait_free(service: SessionService, store: Store, thread_id: str) -> None:
    """The turn's worker ends (it releases the lease last)."""
    deadline = time.monotonic() + TURN_WAIT_S
    while (service.running is not None or thread_id in store.leases.held()) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.01)
    assert service.running is None and thread_id not in store.leases.held()


def test_a_failing_subscriber_is_dropped_and_the_turn_goes_on(
    settings: Settings, store: Store, workspace: Path
) -> None:
    agent = Agent(settings, store, model=ScriptedChatModel([ai_text("fine")]))
    service = SessionService(agent, store, workspace)
    calls = 0

    def broken(event: BaseEvent) -> None:  # a tab whose stream is gone
        nonlocal calls
        calls += 1
        raise RuntimeError("Event loop is closed")

    service.subscribe("t2", broken)
    seen, ended = _collect(service, "t2")
    service.submit("hello", "t2")
    assert ended.wait(TURN_WAIT_S)
    assert calls == 1
    end = seen[-1]
    assert isinstance(end, TurnEnd) and end.answer == "fine"


def test_undo_search_forget_and_delete_are_operations_of_the_service(
    settings: Settings, store: Store, workspace: Path
) -> None:
    edit = tool_call("write_file", {"path": "a.txt", "content": "new\n"}, id="w1")
    agent = Agent(
        settings, store, model=ScriptedChatModel([ai_tools(edit), ai_text("wrote the zebra")])
    )
    service = SessionService(agent, store, workspace)
    (workspace / "a.txt").write_text("old\n")
    _seen, ended = _collect(service, "t3")
    service.handle(parse_op({"op": "submit_turn", "thread_id": "t3", "text": "edit a.txt"}))
    assert ended.wait(TURN_WAIT_S)
    _wait_free(service, store, "t3")
    assert (workspace / "a.txt").read_text() == "new\n"

    found = service.handle(parse_op({"op": "search_history", "thread_id": "t3", "query": "zebra"}))
    assert [hit["ref"] for hit in found["hits"]] and "zebra" in found["hits"][0]["snippet"]

    undone = service.handle(parse_op({"op": "undo", "thread_id": "t3"}))
    assert undone["turns"] == 1 and undone["restored"] == ["a.txt"]
    assert (workspace / "a.txt").read_text() == "old\n"
    assert service.handle(parse_op({"op": "undo", "thread_id": "t3"}))["turns"] == 0

    with pytest.raises(MemoryRefused):
        service.handle(parse_op({"op": "forget_memory", "thread_id": "t3", "memory_id": "zz"}))

    assert service.handle(parse_op({"op": "delete_session", "thread_id": "t3"})) == {"deleted": 1}
    assert "t3" not in [s["thread_id"] for s in service.list_sessions()]
    assert service.agent.messages("t3") == []


def test_new_operations_refuse_bad_input() -> None:
    for bad in (
        {"op": "undo", "thread_id": "t", "turns": 0},
        {"op": "search_history", "thread_id": "t", "query": ""},
        {"op": "forget_memory", "thread_id": "t", "memory_id": ""},
        {"op": "delete_session"},
    ):
        with pytest.raises(ValidationError):
            parse_op(bad)
