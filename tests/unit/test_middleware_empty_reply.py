"""Empty-reply unit: an empty reply is asked for again once, and the user is told."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.exceptions import LangChainException
from langchain_core.messages import AIMessage, HumanMessage

from agentgraph.middleware.empty_reply import (
    ECHOED_DEFINITION_NUDGE,
    EMPTY_REPLY_ANSWER_NUDGE,
    EMPTY_REPLY_NUDGE,
    IMITATED_RESULT_ANSWER_NUDGE,
    IMITATED_RESULT_NUDGE,
    EmptyReplyMiddleware,
)
from agentgraph.providers.pricing import UsageTotals
from tests.middleware_helpers import ModelCall, history, request


def _run(
    *replies: AIMessage | BaseException, **overrides: Any
) -> tuple[AIMessage, ModelCall, list[dict[str, Any]]]:
    events: list[dict[str, Any]] = []
    call = ModelCall(*replies)
    unit = EmptyReplyMiddleware(emit=events.append)
    response = unit.wrap_model_call(request(history(2), **overrides), call)
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
    refusal = AIMessage("", additional_kwargs={"refusal": "I can't help with that."})
    for first in (AIMessage("an answer"), calls, cut, refusal):
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


def test_a_reply_of_reasoning_alone_is_asked_again() -> None:
    block = {"type": "thinking", "thinking": "the files look fine", "signature": "s"}
    thinking = AIMessage([block])
    reply, call, _ = _run(thinking, AIMessage("the files are fine"))
    assert reply.text == "the files are fine" and len(call.requests) == 2


def test_when_asking_again_fails_the_empty_reply_stands() -> None:
    # e.g. a provider that rejects a user message right after a tool result
    empty = AIMessage("")
    rejected = LangChainException("Unexpected role 'user' after role 'tool'")
    reply, call, events = _run(empty, rejected)
    assert reply is empty and len(call.requests) == 2
    assert "failed" in events[-1]["text"] and "LangChainException" in events[-1]["text"]


def test_the_empty_attempt_is_still_counted() -> None:
    usage = {"input_tokens": 50_000, "output_tokens": 1, "total_tokens": 50_001}
    second = {"input_tokens": 50_020, "output_tokens": 9, "total_tokens": 50_029}
    reply, _, _ = _run(AIMessage("", usage_metadata=usage), AIMessage("ok", usage_metadata=second))
    assert reply.usage_metadata == second  # the prompt the next count anchors on
    totals = UsageTotals()
    totals.add_message(reply)
    assert (totals.input_tokens, totals.output_tokens) == (100_020, 10)


def test_at_the_step_limit_the_ask_is_for_an_answer_not_a_call() -> None:
    _, call, _ = _run(AIMessage(""), AIMessage("done"), tool_choice="none")
    assert call.requests[1].messages[-1] == HumanMessage(EMPTY_REPLY_ANSWER_NUDGE)


def test_a_hostile_discarded_usage_from_an_import_is_not_counted() -> None:
    records = [{"input_tokens": "abc"}, {"input_tokens": [1]}, "junk", {"input_tokens": 5}]
    reply = AIMessage("ok", additional_kwargs={"agentgraph": {"discarded_usage": records}})
    totals = UsageTotals()
    totals.add_message(reply)
    assert (totals.input_tokens, totals.output_tokens) == (5, 0)


IMITATED = "<tool_response>\nError: command not found: pytest\n</tool_response>"


def test_a_reply_that_imitates_a_tool_result_is_asked_again_saying_no_tool_ran() -> None:
    reply, call, events = _run(AIMessage(f"  {IMITATED}\nThe tests fail."), AIMessage("done"))
    assert reply.text == "done"
    assert call.requests[1].messages[-1] == HumanMessage(IMITATED_RESULT_NUDGE)
    assert events[0]["text"] == (
        "the model wrote a tool result instead of calling the tool; asking it to go on"
    )
    _, call, _ = _run(AIMessage(IMITATED), AIMessage("done"), tool_choice="none")
    assert call.requests[1].messages[-1] == HumanMessage(IMITATED_RESULT_ANSWER_NUDGE)
    reply, call, events = _run(AIMessage(IMITATED), AIMessage(IMITATED), AIMessage("never"))
    assert reply.text == IMITATED and len(call.requests) == 2
    assert events[-1]["text"] == "the model sent a tool result again"


def test_a_made_up_result_cut_at_the_output_limit_is_still_asked_again() -> None:
    # Seen with Qwen2.5-Coder 1.5B: asked to read a log file, it wrote the file's lines
    # in a <tool_response> block until the output limit cut it. Asking again with the
    # same limit does not cut a tool call; taking it as the answer ends the task.
    cut = {"finish_reason": "length"}
    made_up = AIMessage(f"{IMITATED}\n1\t0000 event=login", response_metadata=cut)
    call = AIMessage("", tool_calls=[{"name": "read_file", "args": {}, "id": "c1"}])
    reply, requests, events = _run(made_up, call)
    assert reply.tool_calls and len(requests.requests) == 2
    assert events[0]["text"].startswith("the model wrote a tool result")
    definition = '<tools>{"type": "function", "function": {"name": "read_file", "parameters": {}}}'
    reply, requests, _ = _run(AIMessage(definition, response_metadata=cut), call)
    assert reply.tool_calls and len(requests.requests) == 2


def test_a_made_up_result_inside_a_tools_block_is_no_answer_but_other_text_there_is() -> None:
    reply, call, _ = _run(AIMessage(f"<tools>\n {IMITATED}\n</tools>"), AIMessage("done"))
    assert reply.text == "done"
    assert call.requests[1].messages[-1] == HumanMessage(IMITATED_RESULT_NUDGE)
    definition = AIMessage(
        '<tools>\n{"type": "function", "function": {"name": "edit_file", "parameters": {}}}'
    )
    reply, call, events = _run(definition, AIMessage("done"))
    assert reply.text == "done" and call.requests[1].messages[-1] == HumanMessage(
        ECHOED_DEFINITION_NUDGE
    )
    assert events[0]["text"].startswith("the model repeated a tool's definition")
    listing = AIMessage("<tools> read_file and run_bash </tools> are what I can use.")
    reply, call, events = _run(listing, AIMessage("second"))
    assert reply is listing and len(call.requests) == 1 and events == []


DEFINITION = '{"type": "function", "function": {"name": "edit_file", "description": "x"}}'


@pytest.mark.parametrize(
    "text",
    [
        '<tools>{"path": "a.py"}</tools>\nThe "function" field names the tool; I fixed app.py.',
        f"<tools>\n{DEFINITION}\n</tools>\nThese are the definitions you asked for.",
        '<tools>{"name": "read_file", "parameters": {"path": "a.py"}}</tools>',
        '<tools>{"type": "function", "function": {"name": "fetch", "arguments": {"u": 1}}}</tools>',
    ],
    ids=["json-then-answer", "definitions-then-answer", "a-call", "an-openai-call"],
)
def test_a_tools_block_that_is_not_only_definitions_is_an_answer(text: str) -> None:
    first = AIMessage(text)
    reply, call, events = _run(first, AIMessage("second"))
    assert reply is first and len(call.requests) == 1 and events == []


@pytest.mark.parametrize(
    "text",
    [f"<TOOLS>{DEFINITION}</TOOLS>", f"<tools>[{DEFINITION}, {DEFINITION}]</tools>"],
    ids=["upper-case-tag", "a-list"],
)
def test_a_tools_block_of_definitions_alone_is_no_answer(text: str) -> None:
    reply, call, _ = _run(AIMessage(text), AIMessage("done"))
    assert reply.text == "done"
    assert call.requests[1].messages[-1] == HumanMessage(ECHOED_DEFINITION_NUDGE)


def test_an_answer_that_quotes_a_tool_result_is_an_answer() -> None:
    quoted = AIMessage(f"The run printed:\n{IMITATED}")
    calls = AIMessage(IMITATED, tool_calls=[{"name": "run_bash", "args": {}, "id": "c1"}])
    for first in (quoted, calls):
        reply, call, events = _run(first, AIMessage("second"))
        assert reply is first and len(call.requests) == 1 and events == []
