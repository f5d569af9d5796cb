"""Prompt-caching unit: Anthropic models get ``cache_control`` breakpoints.

OpenAI and OpenAI-compatible servers cache the longest prefix already sent on their own;
Anthropic caches only up to the blocks a request marks with ``cache_control`` (at most
four per request). This unit marks them with LangChain's own
``langchain_anthropic.middleware.AnthropicPromptCachingMiddleware``, which fits the
pipeline as it is (one ``wrap_model_call`` hook on the ``ModelRequest``):

- the last block of the system prompt (which also covers the tools: Anthropic renders
  tools, then system, then messages);
- the last tool definition (the tool list alone, should the system prompt change);
- the request's top-level ``cache_control``: Anthropic's automatic caching puts that
  breakpoint on the last block of the request and moves it forward as the history grows
  (the moving breakpoint Claude Code keeps on its latest message), so each call reads
  what the previous one wrote.

Three of the four breakpoints. Only the wrapper is ours: it recognizes an Anthropic
model by its class's module, without importing ``langchain_anthropic`` — a session on
any other model never loads it (start-up time is measured), and its request goes to the
model untouched, the same object byte for byte (LangChain's unit would warn on every
call instead). The choice is made per request, so a ``/model`` switch or
``create_agent`` with any model works.

Hook: ``wrap_model_call`` (innermost: marks exactly the request the model receives,
after overflow recovery cut it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage

if TYPE_CHECKING:
    from langchain_anthropic.middleware import AnthropicPromptCachingMiddleware

__all__ = ["ANTHROPIC_CACHE_TTL", "PromptCachingMiddleware", "is_anthropic_model"]

# Anthropic's default cache lifetime: refreshed by every hit, so an active session keeps
# it; "1h" costs twice the input price per written token instead of 1.25x.
ANTHROPIC_CACHE_TTL = "5m"
_ANTHROPIC_PACKAGE = "langchain_anthropic"


def is_anthropic_model(model: object) -> bool:
    """Whether ``model`` is LangChain's ``ChatAnthropic`` (or a subclass of it).

    Decided from the class hierarchy's module names, so nothing is imported.
    """
    return any(cls.__module__.split(".", 1)[0] == _ANTHROPIC_PACKAGE for cls in type(model).__mro__)


class PromptCachingMiddleware(AgentMiddleware):
    """Marks Anthropic requests with prompt-caching breakpoints; others pass untouched.

    Args:
        ttl: Cache lifetime of the breakpoints (``"5m"`` or ``"1h"``).
    """

    def __init__(self, ttl: str = ANTHROPIC_CACHE_TTL) -> None:
        super().__init__()
        self.ttl = ttl
        self._anthropic: AnthropicPromptCachingMiddleware | None = None

    def _unit(self) -> AnthropicPromptCachingMiddleware:
        if self._anthropic is None:
            # Imported here: the package is loaded already (the model is one of its
            # classes), and sessions on other providers never pay for it.
            from langchain_anthropic.middleware import AnthropicPromptCachingMiddleware

            self._anthropic = AnthropicPromptCachingMiddleware(
                ttl=self.ttl,  # type: ignore[arg-type]
                unsupported_model_behavior="ignore",
            )
        return self._anthropic

    def wrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], ModelResponse],
    ) -> ModelResponse | AIMessage:
        """Call with breakpoints when the model is Anthropic's, else unchanged."""
        if not is_anthropic_model(request.model):
            return handler(request)
        result: Any = self._unit().wrap_model_call(request, handler)
        return result  # type: ignore[no-any-return]

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse | AIMessage:
        """Async :meth:`wrap_model_call`."""
        if not is_anthropic_model(request.model):
            return await handler(request)
        result: Any = await self._unit().awrap_model_call(request, handler)
        return result  # type: ignore[no-any-return]
