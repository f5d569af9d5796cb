"""Retry unit: rate limits, 5xx and dropped connections are tried again.

A 429 waits what its Retry-After says (up to ``RETRY_AFTER_MAX_S``), other transient
failures back off exponentially with jitter; auth (401/403), not found (404), bad
requests, overflows and a refused connection fail at once. What finally fails is
raised as langchain-core's type for it (``ModelRateLimitError``, ``ModelAPIError`` …),
so the units around this one, and any LangChain code, handle it with ``isinstance``.

Hook: ``wrap_model_call`` (innermost: each retry repeats only the HTTP call).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import NoReturn

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage

from agentgraph.middleware.events import Emit, emit
from agentgraph.providers.model_errors import to_model_error
from agentgraph.providers.provider_errors import ProviderError
from agentgraph.providers.retry import RetryPolicy, acall_with_retries, call_with_retries

__all__ = ["RetryMiddleware"]


def _raise_typed(exc: Exception) -> NoReturn:
    """Raise ``exc`` as langchain-core's typed model error (``exc`` itself when it is one)."""
    typed = to_model_error(exc)
    if typed is exc:
        raise exc
    raise typed from exc


class RetryMiddleware(AgentMiddleware):
    """Retries transient provider failures per a :class:`RetryPolicy`.

    Args:
        policy: Retry limits and delays.
        sleep: Waits between attempts (tests pass a fake).
        emit: Told a ``retry`` event before each wait.
        asleep: Waits between attempts of an async call.
    """

    def __init__(
        self,
        policy: RetryPolicy | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        emit: Emit = emit,
        asleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        super().__init__()
        self.policy = policy or RetryPolicy()
        self.sleep = sleep
        self.asleep = asleep
        self.emit = emit

    def _on_retry(self, attempt: int, err: ProviderError, delay: float) -> None:
        self.emit({"type": "retry", "text": f"{err.message} — retry {attempt} in {delay:.1f}s"})

    def wrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], ModelResponse],
    ) -> ModelResponse | AIMessage:
        """Call, retrying what may pass later; raise the failure as a typed error."""
        try:
            return call_with_retries(
                lambda: handler(request), self.policy, sleep=self.sleep, on_retry=self._on_retry
            )
        except Exception as exc:
            _raise_typed(exc)

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse | AIMessage:
        """Async :meth:`wrap_model_call`."""
        try:
            return await acall_with_retries(
                lambda: handler(request), self.policy, sleep=self.asleep, on_retry=self._on_retry
            )
        except Exception as exc:
            _raise_typed(exc)
