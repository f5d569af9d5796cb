"""Empty-reply unit: a reply with no text and no tool call is asked for again, once.

Small local models sometimes go silent after a tool result: the reply has no text and no
call. Taken as it is, that ends the run with an empty answer and the task half done.
Others write the result of the call they meant to make (a ``<tool_response>`` block, the
chat template's wrapper of tool results, alone or in a ``<tools>`` block) instead of
making it, or repeat the definition of the tool they meant to call (in that ``<tools>``
block): no tool ran, so that is no answer either, and it is asked again the same way,
saying no tool ran. The request is sent once more with a short user message asking the
model to go on (view only: the stored history keeps neither the empty reply nor the
ask); the user is told.
A second empty reply stands, and the user is told that too; so does the first when the
second request fails (a provider that rejects a user message right after a tool result,
or one that keeps failing): the ask must never cost the turn. The usage of the empty
attempt is kept with the reply that stands (it was paid for).

Not asked again: an empty reply cut at the output token limit (the same limit would cut
it again; a made-up result cut there is asked again: a call fits the same limit), a
refusal, or any reply with a call (even one that could not be parsed).

Hook: ``wrap_model_call`` (outside retry, inside overflow recovery: the second request is
an ordinary call to the provider).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Literal

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.errors import GraphBubbleUp

from agentgraph.middleware.events import Emit, emit
from agentgraph.providers.pricing import DISCARDED_USAGE_KEY
from agentgraph.runtime.history.calls import hit_output_limit
from agentgraph.runtime.history.kinds import AGENTGRAPH_KEY, with_marker

__all__ = [
    "ECHOED_DEFINITION_ANSWER_NUDGE",
    "ECHOED_DEFINITION_NUDGE",
    "EMPTY_REPLY_ANSWER_NUDGE",
    "EMPTY_REPLY_NUDGE",
    "IMITATED_RESULT_ANSWER_NUDGE",
    "IMITATED_RESULT_NUDGE",
    "EmptyReplyMiddleware",
]

EMPTY_REPLY_NUDGE = (
    "Your last reply was empty. Continue the task: call a tool, or give your final answer."
)
# When no tool may be called (the step limit's last request).
EMPTY_REPLY_ANSWER_NUDGE = "Your last reply was empty. Give your final answer now."
IMITATED_RESULT_NUDGE = (
    "Your last reply wrote a tool result, but no tool ran. Call the tool to get its real "
    "result, or give your final answer."
)
IMITATED_RESULT_ANSWER_NUDGE = (
    "Your last reply wrote a tool result, but no tool ran. Give your final answer now."
)
ECHOED_DEFINITION_NUDGE = (
    "Your last reply repeated a tool's definition, but no tool ran. Call the tool with "
    "its arguments, or give your final answer."
)
ECHOED_DEFINITION_ANSWER_NUDGE = (
    "Your last reply repeated a tool's definition, but no tool ran. Give your final answer now."
)
# The wrapper Qwen's and Hermes' chat templates put around tool results, which a small
# model may open its reply with, alone or inside the <tools> block the same templates
# list the tools in.
IMITATED_RESULT_OPENER = "<tool_response>"
TOOLS_BLOCK_OPENER = "<tools>"
TOOLS_BLOCK_CLOSER = "</tools>"

_Kind = Literal["empty", "imitated result", "echoed definition"]
# Per kind: what the model did (for the notice), what it sent (for "... again"), the
# ask, and the ask when no tool may be called.
_TOLD: dict[_Kind, tuple[str, str, str, str]] = {
    "empty": ("sent an empty reply", "an empty reply", EMPTY_REPLY_NUDGE, EMPTY_REPLY_ANSWER_NUDGE),
    "imitated result": (
        "wrote a tool result instead of calling the tool",
        "a tool result",
        IMITATED_RESULT_NUDGE,
        IMITATED_RESULT_ANSWER_NUDGE,
    ),
    "echoed definition": (
        "repeated a tool's definition instead of calling the tool",
        "a tool's definition",
        ECHOED_DEFINITION_NUDGE,
        ECHOED_DEFINITION_ANSWER_NUDGE,
    ),
}


def _is_definition(item: object) -> bool:
    """A tool definition as the chat templates list them: ``{"type": "function",
    "function": {"name": ..., "description"/"parameters": ...}}`` (no ``arguments``)."""
    function = item.get("function") if isinstance(item, dict) else None
    return (
        isinstance(function, dict)
        and isinstance(function.get("name"), str)
        and ("parameters" in function or "description" in function)
        and "arguments" not in function
    )


def _echoes_definitions(block: str) -> bool:
    """Whether a ``<tools>`` block's body (up to its end or ``</tools>``, with nothing
    after that) is only tool definitions."""
    end = block.lower().find(TOOLS_BLOCK_CLOSER)
    if end >= 0:
        if block[end + len(TOOLS_BLOCK_CLOSER) :].strip():
            return False  # text after the block: an answer that shows definitions
        block = block[:end]
    try:
        value = json.loads(block)
    except ValueError:
        return False
    items = value if isinstance(value, list) else [value]
    return bool(items) and all(map(_is_definition, items))


def _kind(reply: AIMessage) -> _Kind | None:
    """What a reply without calls is when it is no answer, else None."""
    text = reply.text.lstrip()
    if not text:
        return "empty"
    in_block = text[: len(TOOLS_BLOCK_OPENER)].lower() == TOOLS_BLOCK_OPENER
    if in_block:
        text = text[len(TOOLS_BLOCK_OPENER) :].lstrip()
    if text.startswith(IMITATED_RESULT_OPENER):
        return "imitated result"
    if in_block and _echoes_definitions(text):
        return "echoed definition"
    return None


def _unanswered(response: ModelResponse) -> tuple[AIMessage, _Kind] | None:
    """The reply of ``response`` and what it is, when it calls nothing and is no answer
    (empty, a made-up tool result, a repeated definition); else None."""
    replies = [m for m in response.result if isinstance(m, AIMessage)]
    if len(replies) != 1:
        return None
    reply = replies[0]
    kwargs = reply.additional_kwargs
    if (
        reply.tool_calls
        or reply.invalid_tool_calls
        or kwargs.get("tool_calls")
        or kwargs.get("function_call")
        or kwargs.get("refusal")
    ):
        return None
    kind = _kind(reply)
    if (
        # Text blocks only: a reply of reasoning alone says nothing.
        kind is None
        # Empty at the limit: reasoning used it up, and would again. A made-up result or
        # definition cut there was writing the wrong thing; a call fits the same limit.
        or (kind == "empty" and hit_output_limit(reply))
    ):
        return None
    return reply, kind


def _with_discarded_usage(response: ModelResponse, empty: AIMessage) -> ModelResponse:
    """``response`` with the empty attempt's usage kept in its reply's marker."""
    if not empty.usage_metadata:
        return response
    result = list(response.result)
    for i, message in enumerate(result):
        if isinstance(message, AIMessage):
            meta = message.additional_kwargs.get(AGENTGRAPH_KEY)
            earlier = meta.get(DISCARDED_USAGE_KEY) if isinstance(meta, Mapping) else None
            usages = [*(earlier if isinstance(earlier, list) else []), dict(empty.usage_metadata)]
            result[i] = with_marker(message, **{DISCARDED_USAGE_KEY: usages})
            break
    return ModelResponse(result=result, structured_response=response.structured_response)


class EmptyReplyMiddleware(AgentMiddleware):
    """Asks the model once more when its reply is empty.

    Args:
        emit: Told a ``notice`` when a reply is asked again, and when that did not
            bring an answer.
    """

    def __init__(self, *, emit: Emit = emit) -> None:
        super().__init__()
        self.emit = emit

    def _again(self, request: ModelRequest, kind: _Kind) -> ModelRequest:
        what, _, nudge, last_nudge = _TOLD[kind]
        if request.tool_choice == "none":
            nudge = last_nudge
        self.emit({"type": "notice", "text": f"the model {what}; asking it to go on"})
        return request.override(messages=[*request.messages, HumanMessage(nudge)])

    def _settle(self, first: AIMessage, second: ModelResponse) -> ModelResponse:
        again = _unanswered(second)
        if again is not None:
            sent = _TOLD[again[1]][1]
            self.emit({"type": "notice", "text": f"the model sent {sent} again"})
        return _with_discarded_usage(second, first)

    def _failed(self, first: ModelResponse, err: Exception) -> ModelResponse:
        self.emit(
            {
                "type": "notice",
                "text": f"asking again after the model's reply failed ({type(err).__name__}); "
                "its reply stands",
            }
        )
        return first

    def wrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], ModelResponse],
    ) -> ModelResponse | AIMessage:
        """Call the model; on an empty reply, call it once more with the ask."""
        first = handler(request)
        unanswered = _unanswered(first)
        if unanswered is None:
            return first
        empty, kind = unanswered
        try:
            second = handler(self._again(request, kind))
        except GraphBubbleUp:
            raise  # interrupts and cancellation are not failures of the ask
        except Exception as err:
            return self._failed(first, err)
        return self._settle(empty, second)

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse | AIMessage:
        """Async :meth:`wrap_model_call`."""
        first = await handler(request)
        unanswered = _unanswered(first)
        if unanswered is None:
            return first
        empty, kind = unanswered
        try:
            second = await handler(self._again(request, kind))
        except GraphBubbleUp:
            raise
        except Exception as err:
            return self._failed(first, err)
        return self._settle(empty, second)
