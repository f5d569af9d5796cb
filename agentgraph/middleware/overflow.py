"""Overflow recovery unit: make a rejected prompt fit without touching the history.

On a context overflow the tool outputs in the request are cut (once); on an
output-only overflow ("a + b > c": the prompt fits but the prompt plus ``max_tokens``
does not) ``max_tokens`` shrinks to what is left. What still overflows goes up to the
compaction unit. Errors are recognised by type (``ContextOverflowError``,
:class:`~agentgraph.context.model_errors.OutputOverflowError`), whatever the SDK raised.

Hook: ``wrap_model_call``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage

from agentgraph.context.model_errors import OutputOverflowError, provider_error_of, to_model_error
from agentgraph.context.provider_errors import shrink_max_tokens
from agentgraph.context.tokens import TokenCounter
from agentgraph.context.truncation import shrink_tool_messages
from agentgraph.context.windows import Budget
from agentgraph.middleware.events import Emit, emit

__all__ = [
    "OVERFLOW_TOOL_OUTPUT_FRACTION",
    "OVERFLOW_TOOL_OUTPUT_MIN_TOKENS",
    "OverflowRecoveryMiddleware",
]

# After an overflow each tool output in the request is cut to this fraction of the
# usable window divided by 4 (view-only: state keeps what it had).
OVERFLOW_TOOL_OUTPUT_FRACTION = 0.25
OVERFLOW_TOOL_OUTPUT_SHARE = 4
OVERFLOW_TOOL_OUTPUT_MIN_TOKENS = 300
# Attempts one call may take: the first, one with cut tool outputs, and a few
# max_tokens shrinks (each strictly smaller, so this bound is rarely reached).
OVERFLOW_MAX_ATTEMPTS = 5


class OverflowRecoveryMiddleware(AgentMiddleware):
    """Retries an overflowing call with cut tool outputs or a smaller ``max_tokens``.

    Args:
        counter: Token counter of the model.
        budget: The model's prompt budget (sizes the tool-output cut).
        max_output_tokens: The ``max_tokens`` sent when the request sets none.
        emit: Told a ``notice`` event for each recovery step.
    """

    def __init__(
        self,
        counter: TokenCounter,
        budget: Budget,
        *,
        max_output_tokens: int | None = None,
        emit: Emit = emit,
    ) -> None:
        super().__init__()
        self.counter = counter
        self.budget = budget
        self.max_output_tokens = max_output_tokens
        self.emit = emit

    def _cut_tool_outputs(self, request: ModelRequest) -> ModelRequest | None:
        cap = max(
            int(self.budget.usable * OVERFLOW_TOOL_OUTPUT_FRACTION / OVERFLOW_TOOL_OUTPUT_SHARE),
            OVERFLOW_TOOL_OUTPUT_MIN_TOKENS,
        )
        messages, changed = shrink_tool_messages(
            request.messages, cap, count=self.counter.count_text
        )
        if not changed:
            return None
        self.emit({"type": "notice", "text": f"context overflow: truncated {changed} tool outputs"})
        return request.override(messages=messages)  # type: ignore[arg-type]

    def _recover(self, request: ModelRequest, exc: Exception, cut_outputs: bool) -> ModelRequest:
        """The request to try after ``exc``; raises when there is none.

        Raises:
            Exception: ``exc`` itself when it is not an overflow, else its typed
                ``ContextOverflowError`` once nothing is left to shrink.
        """
        typed = to_model_error(exc)
        if not isinstance(typed, ContextOverflowError):
            raise exc
        detail = provider_error_of(typed)
        if isinstance(typed, OutputOverflowError) and detail is not None:
            current = request.model_settings.get("max_tokens", self.max_output_tokens)
            smaller = shrink_max_tokens(detail, current)
            if smaller is not None and smaller != current:
                self.emit({"type": "notice", "text": f"output reservation shrunk to {smaller}"})
                return request.override(
                    model_settings={**request.model_settings, "max_tokens": smaller}
                )
        retry = None if cut_outputs else self._cut_tool_outputs(request)
        if retry is None:
            raise typed from exc
        return retry

    def wrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], ModelResponse],
    ) -> ModelResponse | AIMessage:
        """Call; on an overflow, shrink ``max_tokens`` or cut tool outputs and call again."""
        cut_outputs = False
        for _attempt in range(OVERFLOW_MAX_ATTEMPTS):
            try:
                return handler(request)
            except Exception as exc:
                retry = self._recover(request, exc, cut_outputs)
                # A max_tokens shrink keeps the message list; only the cut replaces it.
                cut_outputs = cut_outputs or retry.messages is not request.messages
                request = retry
        return handler(request)

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse | AIMessage:
        """Async :meth:`wrap_model_call`."""
        cut_outputs = False
        for _attempt in range(OVERFLOW_MAX_ATTEMPTS):
            try:
                return await handler(request)
            except Exception as exc:
                retry = self._recover(request, exc, cut_outputs)
                cut_outputs = cut_outputs or retry.messages is not request.messages
                request = retry
        return await handler(request)
