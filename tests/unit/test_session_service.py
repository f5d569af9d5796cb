"""The session service's pure parts: a stored conversation replayed as events, and the
context chart's points (model calls, compactions)."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from agentgraph.context.compaction import marker
from agentgraph.protocol.events import (
    Answer,
    Compaction,
    TextDelta,
    ToolCall,
    ToolResult,
    UserMessage,
)
from agentgraph.session.service import call_points, compaction_points, replay


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
