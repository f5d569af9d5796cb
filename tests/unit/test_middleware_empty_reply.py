"""Empty-reply unit: an empty reply is asked for again once, and the user is told."""

from __future__ import annotations

import asyncio
from typing import Any

from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, HumanMessage

from agentgraph.middleware.empty_reply import EMPTY_REPLY_NUDGE, EmptyReplyMiddleware
from tests.middleware_helpers import ModelCall, history, request


def _run(*replies: AIMessage) -> tuple[AIMessage, ModelCall, list[dict[str, Any]]]:
    events: list[dict[str, Any]] = []
    call = ModelCall(*replies)
    response = EmptyReplyMiddleware(emit=events.append).wrap_model_call(request(history(2)), call)
    assert isinstance(response, ModelResponse)
    (reply,) = response.result
    assert isinstance(reply, AIMessage)
    return reply, call, events


def test_an_empty_reply_is_asked_for_again_with_a_nudge() -> None:
    reply, call, events = _run(AIMessage(""), AIMessage("the files are fine"))
    assert reply.text == "the files are fine"
    first, second = call.requests
    assert second.messages == [*first.messages, HumanMessage(EMPTY_REPLY_NUDGE)]
    assert [e["text"] for e in events] == ["the model sent an empty reply; asking it to go on"]


def test_a_second_empty_reply_stands_and_is_said() -> None:
    reply, call, events = _run(AIMessage(""), AIMessage("  "), AIMessage("never asked"))
    assert reply.text.strip() == ""
    assert len(call.requests) == 2
    assert events[-1]["text"] == "the model sent an empty reply again"


def test_replies_with_text_or_calls_or_cut_at_the_limit_are_not_asked_again() -> None:
    calls = AIMessage("", tool_calls=[{"name": "read_file", "args": {}, "id": "c9"}])
    cut = AIMessage("", response_metadata={"finish_reason": "length"})
    for first in (AIMessage("an answer"), calls, cut):
        reply, call, events = _run(first, AIMessage("second"))
        assert reply is first and len(call.requests) == 1 and events == []


def test_the_async_hook_asks_again_too() -> None:
    call = ModelCall(AIMessage(""), AIMessage("done async"))

    async def handler(req: ModelRequest) -> ModelResponse:
        return call(req)

    unit = EmptyReplyMiddleware(emit=lambda _event: None)
    response = asyncio.run(unit.awrap_model_call(request(history(1)), handler))
    assert isinstance(response, ModelResponse)
    assert response.result[0].text == "done async" and len(call.requests) == 2
