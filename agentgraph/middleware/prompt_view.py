"""Prompt view unit: the list the model sees, valid and within the budget.

The state keeps the full history; every model call sees a view of it: from the last
compaction boundary on, internal records dropped, tool calls paired with results,
windowed to ``keep_recent`` messages and trimmed to the token budget left once the
system prompt and tool schemas are paid for. When the newest turn alone is over
budget, its tool outputs are cut in the view (state keeps them whole).

Hook: ``wrap_model_call`` (the request's ``messages`` become the view). When the
pipeline has observation masking, masking builds the view through :meth:`build`
instead and this unit is not in the chain.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.tools import BaseTool

from agentgraph.capabilities.tools.files import page_of_read
from agentgraph.context.compaction import since_last_boundary
from agentgraph.context.tokens import TokenCounter
from agentgraph.context.truncation import shrink_tool_messages
from agentgraph.context.windows import Budget
from agentgraph.runtime.history import validate_history
from agentgraph.runtime.history.view import IncrementalPromptView, extends

__all__ = [
    "VIEW_TOOL_OUTPUT_FRACTION",
    "VIEW_TOOL_OUTPUT_MIN_TOKENS",
    "PromptView",
    "PromptViewMiddleware",
]

# When the newest turn alone is over budget, its tool outputs share this fraction of
# the usable window in the view (view-only: state keeps what it had).
VIEW_TOOL_OUTPUT_FRACTION = 0.25
VIEW_TOOL_OUTPUT_MIN_TOKENS = 300

Tools = Sequence[BaseTool | dict[str, Any]]


@dataclass(frozen=True)
class PromptView:
    """A built view.

    Attributes:
        messages: What follows the system prompt in the request.
        tokens: Tokens of the whole prompt: system prompt, ``messages``, tool schemas.
        overflow: The newest turn alone was over budget (its tool outputs were cut).
        trimmed: Older turns were left out because they did not fit the budget.
    """

    messages: list[BaseMessage]
    tokens: int
    overflow: bool
    trimmed: bool = False


def _system(message: SystemMessage | None) -> list[SystemMessage]:
    return [message] if message is not None else []


class PromptViewMiddleware(AgentMiddleware):
    """Turns the request's full history into the prompt view.

    A unit of the chain only in a pipeline without observation masking. With masking,
    masking calls :meth:`build` on the masked history itself (a view built here first
    would be thrown away whenever masking masks), so a model call builds one view.

    Args:
        counter: Token counter of the model.
        budget: The model's prompt budget.
        keep_recent: Most non-system messages in the view (None: no count window).
        validate: Check every view against the provider invariants and raise
            ``AssertionError`` on a violation (a bug in the view, never the provider's
            fault); for debugging.
    """

    def __init__(
        self,
        counter: TokenCounter,
        budget: Budget,
        *,
        keep_recent: int | None = None,
        validate: bool = False,
    ) -> None:
        super().__init__()
        self.counter = counter
        self.budget = budget
        self.keep_recent = keep_recent
        self.validate = validate
        # Each call's history is the last one's plus the reply and its results: the
        # view is extended rather than rebuilt (the same view, for a fraction).
        self._views = IncrementalPromptView()
        # The last view built: its message list as sent on, with what it was built
        # under, its tokens (later units of the call ask for the same figure) and
        # whether the history overflowed the budget (the view cut to fit it).
        self._last: (
            tuple[list[BaseMessage], tuple[BaseMessage, ...], object, object, int, bool] | None
        )
        self._last = None
        # The last view body counted, its counter and the running sums of its messages'
        # tokens: the next body usually extends it, so only the new messages are looked
        # up (a lookup per message of a 1,500-message view was 4% of a turn). Replaced
        # whole, never mutated: subagents build views in other threads.
        self._counted: tuple[tuple[BaseMessage, ...], TokenCounter, list[int]] | None = None

    def _body_tokens(self, body: Sequence[BaseMessage]) -> int:
        """``sum(counter.count_message(m) for m in body)``, reusing the last body's sums.

        Messages are never changed in place (nodes and units return new ones), so a
        message object counts the same for as long as it lives.
        """
        known = self._counted
        start, sums = 0, [0]
        if known is not None and known[1] is self.counter and extends(body, known[0]):
            start, sums = len(known[0]), list(known[2])
        count = self.counter.count_message
        total = sums[-1]
        for msg in body[start:]:
            total += count(msg)
            sums.append(total)
        self._counted = (tuple(body), self.counter, sums)
        return total

    def fixed_tokens(self, system: SystemMessage | None, tools: Tools) -> int:
        """Tokens of the system prompt and tool schemas, sent with every call."""
        return self.counter.count_messages(_system(system)) + self.counter.count_tools(list(tools))

    def build(
        self,
        messages: Sequence[BaseMessage],
        system: SystemMessage | None,
        tools: Tools,
        *,
        since_boundary: bool = False,
    ) -> PromptView:
        """The view of ``messages`` (a full history, or with ``since_boundary`` already
        the part after the last compaction boundary) under ``system`` and ``tools``."""
        live = _system(system)
        budget = max(self.budget.usable - self.fixed_tokens(system, tools), 1)
        view = self._views.build(
            list(messages) if since_boundary else since_last_boundary(messages),
            system=live,
            keep_recent=self.keep_recent,
            max_tokens=budget,
            counter=self.counter,
        )
        prompt = list(view.messages)
        if view.overflow:
            tool_count = sum(1 for m in prompt if m.type == "tool")
            cap = max(
                int(self.budget.usable * VIEW_TOOL_OUTPUT_FRACTION / max(tool_count, 1)),
                VIEW_TOOL_OUTPUT_MIN_TOKENS,
            )
            prompt, _ = shrink_tool_messages(
                prompt,
                cap,
                count=self.counter.count_text,
                codec=self.counter.codec,
                page=partial(page_of_read, counter=self.counter),
            )
        # With no live system prompt the stored ones lead the view and stay in it.
        body = prompt[len(live) :]
        tokens = (
            self.counter.count_messages(prompt[: len(live)])
            + self._body_tokens(body)
            + self.counter.count_tools(list(tools))
        )
        if self.validate:
            problems = validate_history(prompt)
            if problems:
                raise AssertionError("invalid prompt view: " + "; ".join(problems))
        trimmed = view.trimmed > 0
        self._last = (body, tuple(body), system, tools, tokens, view.overflow or trimmed)
        return PromptView(messages=body, tokens=tokens, overflow=view.overflow, trimmed=trimmed)

    def cut_to_fit(self, messages: Sequence[BaseMessage]) -> bool:
        """Whether ``messages`` is the last view built and its history did not fit the
        budget: the view left older turns out or cut tool outputs to fit, so its size
        says nothing about how far over the history is (compaction is due)."""
        last = self._last
        return last is not None and messages is last[0] and last[5]

    def prompt_tokens(
        self, system: SystemMessage | None, messages: Sequence[BaseMessage], tools: Tools
    ) -> int:
        """Tokens of the prompt ``system`` + ``messages`` + ``tools``.

        The last built view's figure when ``messages`` is that view's list, unchanged,
        under the same system prompt and tools (compaction's check and the call itself
        ask right after the view is built); counted otherwise.
        """
        last = self._last
        if (
            last is not None
            and messages is last[0]
            and system is last[2]
            and tools is last[3]
            and tuple(messages) == last[1]  # elements compared by identity first
        ):
            return last[4]
        counted = self.counter.count_messages([*_system(system), *messages])
        return counted + self.counter.count_tools(list(tools))

    def wrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], ModelResponse],
    ) -> ModelResponse | AIMessage:
        """Send the view of ``request.messages`` instead of the full history."""
        view = self.build(request.messages, request.system_message, request.tools)
        return handler(request.override(messages=view.messages))  # type: ignore[arg-type]

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse | AIMessage:
        """Async :meth:`wrap_model_call`."""
        view = self.build(request.messages, request.system_message, request.tools)
        return await handler(request.override(messages=view.messages))  # type: ignore[arg-type]
