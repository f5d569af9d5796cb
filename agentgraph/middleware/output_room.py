"""Output-room unit: never ask for more reply tokens than the prompt leaves in the window.

A request that sets ``max_tokens`` (a local model's default cap, or the configured
``AGENTGRAPH_MAX_OUTPUT_TOKENS``) is rejected by a strict server (vLLM, most
OpenAI-compatible proxies) when the prompt plus ``max_tokens`` exceeds the window.
A fixed cap therefore needs a fixed share of the window held back from the prompt;
sizing ``max_tokens`` per request from the room the prompt leaves lets the prompt use
the window instead, and still never asks for more than is there. The budget's
``reserve`` is the floor: compaction keeps every prompt under the usable budget, so
a reply always has at least that much.

The prompt is our count (the provider's tokenizer may differ), so the room leaves
:data:`~agentgraph.context.windows.PROMPT_COUNT_MARGIN_FRACTION` of it aside; an
output overflow the margin did not cover is the overflow unit's to recover (it
shrinks ``max_tokens`` to what the error says is left).

Hook: ``wrap_model_call`` (before the call).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage

from agentgraph.context.windows import Budget, output_room

__all__ = ["OutputRoomMiddleware"]

PromptTokens = Callable[[ModelRequest], int]


class OutputRoomMiddleware(AgentMiddleware):
    """Lowers a request's ``max_tokens`` to the room its prompt leaves in the window.

    Requests that set no ``max_tokens`` are passed on untouched (the provider's own
    limit applies), and so are those whose ``max_tokens`` fits.

    Args:
        budget: The model's budget, shared with the other units (it shrinks in place
            when an endpoint names a smaller window).
        prompt_tokens: The prompt of a request as the other units count it.
    """

    def __init__(self, budget: Budget, prompt_tokens: PromptTokens) -> None:
        super().__init__()
        self.budget = budget
        self.prompt_tokens = prompt_tokens

    def _sized(self, request: ModelRequest) -> ModelRequest:
        asked = request.model_settings.get("max_tokens")
        if not isinstance(asked, int) or isinstance(asked, bool):
            return request
        room = output_room(self.budget, self.prompt_tokens(request))
        if asked <= room:
            return request
        return request.override(model_settings={**request.model_settings, "max_tokens": room})

    def wrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], ModelResponse],
    ) -> ModelResponse | AIMessage:
        """Call with ``max_tokens`` no larger than the room the prompt leaves."""
        return handler(self._sized(request))

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse | AIMessage:
        """Async :meth:`wrap_model_call`."""
        return await handler(self._sized(request))
