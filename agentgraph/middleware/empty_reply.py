"""Empty-reply unit: a reply with no text and no tool call is asked for again, once.

Small local models sometimes go silent after a tool result: the reply has no text and no
call. Taken as it is, that ends the run with an empty answer and the task half done. The
request is sent once more with a short user message asking the model to go on (view
only: the stored history keeps neither the empty reply nor the ask); the user is told.
A second empty reply stands, and the user is told that too. A reply cut at the output
token limit is not asked again: the same limit would cut it again.

Hook: ``wrap_model_call`` (outside retry, inside overflow recovery: the second request is
an ordinary call to the provider).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, HumanMessage

from agentgraph.history.calls import hit_output_limit, is_blank_answer
from agentgraph.middleware.events import Emit, emit

__all__ = ["EMPTY_REPLY_NUDGE", "EmptyReplyMiddleware"]

EMPTY_REPLY_NUDGE = (
    "Your last reply was empty. Continue the task: call a tool, or give your final answer."
)


def _blank(response: ModelResponse) -> bool:
    replies = [m for m in response.result if isinstance(m, AIMessage)]
    return len(replies) == 1 and is_blank_answer(replies[0]) and not hit_output_limit(replies[0])


class EmptyReplyMiddleware(AgentMiddleware):
    """Asks the model once more when its reply is empty.

    Args:
        emit: Told a ``notice`` when a reply is asked again, and when the second one is
            empty too.
    """

    def __init__(self, *, emit: Emit = emit) -> None:
        super().__init__()
        self.emit = emit

    def _again(self, request: ModelRequest) -> ModelRequest:
        self.emit({"type": "notice", "text": "the model sent an empty reply; asking it to go on"})
        return request.override(messages=[*request.messages, HumanMessage(EMPTY_REPLY_NUDGE)])

    def _settle(self, response: ModelResponse) -> ModelResponse:
        if _blank(response):
            self.emit({"type": "notice", "text": "the model sent an empty reply again"})
        return response

    def wrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], ModelResponse],
    ) -> ModelResponse | AIMessage:
        """Call the model; on an empty reply, call it once more with the ask."""
        response = handler(request)
        if not _blank(response):
            return response
        return self._settle(handler(self._again(request)))

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse | AIMessage:
        """Async :meth:`wrap_model_call`."""
        response = await handler(request)
        if not _blank(response):
            return response
        return self._settle(await handler(self._again(request)))
