"""Served-window unit: after the first reply, a local server says the context it allocated.

Ollama states no window in its model list and never rejects a longer prompt: it drops
the prompt's beginning without an error, so no overflow would ever teach agentgraph its
window. It loads the model at the first request and then states what it allocated; LM
Studio loads a model at its first request too and then lists its context (see
:func:`agentgraph.providers.served_windows.apply_loaded_window`). This unit asks once, after
the first reply of the process, wherever the model call runs (the CLI, subagents, the
LangGraph server), and tells the user when the budget shrank: every request after it is
built for the real window.

Hook: ``wrap_model_call`` (after the wrapped call returned a reply).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage

from agentgraph.middleware.events import Emit, emit
from agentgraph.providers.served_windows import AskOnce

__all__ = ["ServedWindowMiddleware"]


class ServedWindowMiddleware(AgentMiddleware):
    """Asks, after the first reply, what window the local server allocated.

    Args:
        ask: The shared question (see :class:`AskOnce`).
        emit: Told a ``notice`` when the budget shrank.
    """

    def __init__(self, ask: AskOnce, *, emit: Emit = emit) -> None:
        super().__init__()
        self.ask = ask
        self.emit = emit

    def _after(self) -> None:
        notice = self.ask()
        if notice is not None:
            self.emit({"type": "notice", "text": notice})

    def wrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], ModelResponse],
    ) -> ModelResponse | AIMessage:
        """Call the model, then ask (the first time only)."""
        response = handler(request)
        self._after()
        return response

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse | AIMessage:
        """Async :meth:`wrap_model_call` (the question runs in a worker thread)."""
        response = await handler(request)
        await asyncio.to_thread(self._after)
        return response
