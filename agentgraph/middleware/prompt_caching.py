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

LangChain's unit marks the last tool on a copy it makes at every call; the wrapper
hands the model the same copy while the tool and its mark stay the same, so what is
kept per tool object downstream (the model's tool binding, each tool's counted schema)
is reused instead of redone at every call. One tool is remembered: calls alternating
between two last tools (a subagent's list and the main agent's) copy as before.

Hook: ``wrap_model_call`` (innermost: marks exactly the request the model receives,
after overflow recovery cut it).
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool

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
        # The last tool as last marked: (the original, the marked copy).
        self._marked: tuple[BaseTool, BaseTool] | None = None
        self._lock = threading.Lock()  # subagents call models in other threads

    def _same_marked_tool(self, original: ModelRequest, marked: ModelRequest) -> ModelRequest:
        """``marked`` with its last tool the copy given last time, when it is the same
        tool with the same mark (LangChain's unit copies it at every call)."""
        before, after = list(original.tools or []), list(marked.tools or [])
        if not before or len(before) != len(after):
            return marked
        tool, copy = before[-1], after[-1]
        if not isinstance(tool, BaseTool) or not isinstance(copy, BaseTool) or copy is tool:
            return marked
        with self._lock:
            known = self._marked
            if known is not None and known[0] is tool and known[1].extras == copy.extras:
                return marked.override(tools=[*after[:-1], known[1]])
            self._marked = (tool, copy)
        return marked

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

        def send(marked: ModelRequest) -> ModelResponse:
            return handler(self._same_marked_tool(request, marked))

        result: Any = self._unit().wrap_model_call(request, send)
        return result  # type: ignore[no-any-return]

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse | AIMessage:
        """Async :meth:`wrap_model_call`."""
        if not is_anthropic_model(request.model):
            return await handler(request)

        async def send(marked: ModelRequest) -> ModelResponse:
            return await handler(self._same_marked_tool(request, marked))

        result: Any = await self._unit().awrap_model_call(request, send)
        return result  # type: ignore[no-any-return]
