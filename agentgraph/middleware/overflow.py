"""Overflow recovery unit: make a rejected prompt fit without touching the history.

On a context overflow the tool outputs in the request are cut (once); on an
output-only overflow ("a + b > c": the prompt fits but the prompt plus ``max_tokens``
does not) ``max_tokens`` shrinks to what is left. What still overflows goes up to the
compaction unit. Errors are recognised by type (``ContextOverflowError``,
:class:`~agentgraph.context.model_errors.OutputOverflowError`), whatever the SDK raised.

When the error names the endpoint's window and it is smaller than the budget's (a
llama.cpp server started with a small ``--ctx-size``, a proxy in front of a smaller
deployment), the shared budget shrinks to it for the rest of the process
(:meth:`~agentgraph.context.windows.Budget.adopt_window`): the retry, the compaction
unit's guard and every later call are sized for the real window.

Hook: ``wrap_model_call``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage, BaseMessage

from agentgraph.capabilities.tools.files import page_of_read
from agentgraph.context.tokens import TokenCounter
from agentgraph.context.truncation import shrink_tool_messages
from agentgraph.context.windows import Budget
from agentgraph.middleware.events import Emit, emit
from agentgraph.providers.model_errors import (
    OutputOverflowError,
    context_window_from_error,
    provider_error_of,
    to_model_error,
)
from agentgraph.providers.provider_errors import shrink_max_tokens

__all__ = [
    "OVERFLOW_TOOL_OUTPUT_FRACTION",
    "OVERFLOW_TOOL_OUTPUT_MIN_TOKENS",
    "OverflowRecoveryMiddleware",
    "window_notice",
]

# After an overflow each tool output in the request is cut to this fraction of the
# usable window divided by 4 (view-only: state keeps what it had).
OVERFLOW_TOOL_OUTPUT_FRACTION = 0.25
OVERFLOW_TOOL_OUTPUT_SHARE = 4
OVERFLOW_TOOL_OUTPUT_MIN_TOKENS = 300
# Attempts one call may take: the first, one with cut tool outputs, and a few
# max_tokens shrinks (each strictly smaller, so this bound is rarely reached).
OVERFLOW_MAX_ATTEMPTS = 5


def window_notice(window: int) -> str:
    """The one line telling the user the endpoint's window replaced the assumed one."""
    return (
        f"the endpoint's context window is {window:,} tokens (learned from its error); "
        f"using it from now on — set AGENTGRAPH_CONTEXT_WINDOW={window} to start with it"
    )


class OverflowRecoveryMiddleware(AgentMiddleware):
    """Retries an overflowing call with cut tool outputs or a smaller ``max_tokens``.

    Args:
        counter: Token counter of the model.
        budget: The model's prompt budget (sizes the tool-output cut), shared with the
            other units: shrunk in place when an error names a smaller window.
        max_output_tokens: The ``max_tokens`` sent when the request sets none.
        emit: Told a ``notice`` event for each recovery step.
        on_window_adopted: Called with the usable budget from before, after the budget
            shrank to a window an error named (sizes that were copied from the budget,
            like the summarizer's, follow it there).
    """

    def __init__(
        self,
        counter: TokenCounter,
        budget: Budget,
        *,
        max_output_tokens: int | None = None,
        emit: Emit = emit,
        on_window_adopted: Callable[[int], None] | None = None,
    ) -> None:
        super().__init__()
        self.counter = counter
        self.budget = budget
        self.max_output_tokens = max_output_tokens
        self.emit = emit
        self.on_window_adopted = on_window_adopted

    def _adopt_window(self, typed: BaseException) -> bool:
        """Shrink the budget to the window ``typed`` names, if smaller; whether it did."""
        window = context_window_from_error(typed)
        if window is None:
            return False
        before = self.budget.usable
        if not self.budget.adopt_window(window):
            return False
        self.emit({"type": "notice", "text": window_notice(window)})
        if self.on_window_adopted is not None:
            self.on_window_adopted(before)
        return True

    def _prompt_tokens(self, request: ModelRequest) -> int:
        system: list[Any] = [request.system_message] if request.system_message else []
        messages: list[BaseMessage] = [*system, *request.messages]
        return self.counter.count_messages(messages) + self.counter.count_tools(list(request.tools))

    def _cut_tool_outputs(self, request: ModelRequest) -> tuple[ModelRequest, int]:
        cap = max(
            int(self.budget.usable * OVERFLOW_TOOL_OUTPUT_FRACTION / OVERFLOW_TOOL_OUTPUT_SHARE),
            OVERFLOW_TOOL_OUTPUT_MIN_TOKENS,
        )
        messages, changed = shrink_tool_messages(
            request.messages,
            cap,
            count=self.counter.count_text,
            codec=self.counter.codec,
            page=partial(page_of_read, counter=self.counter),
        )
        if not changed:
            return request, 0
        return request.override(messages=messages), changed  # type: ignore[arg-type]

    def _recover(self, request: ModelRequest, exc: Exception, cut_outputs: bool) -> ModelRequest:
        """The request to try after ``exc``; raises when there is none.

        Raises:
            Exception: ``exc`` itself when it is not an overflow, else its typed
                ``ContextOverflowError`` once nothing is left to shrink (or, when the
                window was just learned, once what is left does not fit it: the
                compaction unit then compacts for the real window).
        """
        typed = to_model_error(exc)
        if not isinstance(typed, ContextOverflowError):
            raise exc
        adopted = self._adopt_window(typed)
        detail = provider_error_of(typed)
        if isinstance(typed, OutputOverflowError) and detail is not None:
            current = request.model_settings.get("max_tokens", self.max_output_tokens)
            smaller = shrink_max_tokens(detail, current)
            if smaller is not None and smaller != current:
                self.emit({"type": "notice", "text": f"output reservation shrunk to {smaller}"})
                return request.override(
                    model_settings={**request.model_settings, "max_tokens": smaller}
                )
        if cut_outputs:
            raise typed from exc
        retry, changed = self._cut_tool_outputs(request)
        # The request was sized for a window the endpoint does not have: cutting tool
        # outputs alone rarely brings it under the real one, and a second rejected
        # request only costs time. What our count says is over the new budget goes to
        # the compaction unit, which compacts for the real window.
        if not changed or (adopted and self._prompt_tokens(retry) > self.budget.usable):
            raise typed from exc
        self.emit({"type": "notice", "text": f"context overflow: truncated {changed} tool outputs"})
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
