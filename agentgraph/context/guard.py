"""The guard around every model call (order from the claw0 design, done right).

call → on a context overflow, truncate oversized tool results in the prompt view and
call again → still overflowing, compact and call again → still overflowing, stop with
a clear message and the session intact. Rate limits, 5xx and timeouts are not
overflows: they are retried with backoff. When only the output reservation
overflows, ``max_tokens`` shrinks instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from langchain_core.exceptions import ContextOverflowError, ModelError
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool

from agentgraph.context.compaction import since_last_boundary
from agentgraph.context.model_errors import OutputOverflowError, provider_error_of, to_model_error
from agentgraph.context.provider_errors import ProviderError, shrink_max_tokens
from agentgraph.context.retry import RetryPolicy, call_with_retries
from agentgraph.context.truncation import shrink_tool_messages
from agentgraph.deps import AgentDeps, Emit
from agentgraph.errors import ProviderFailure
from agentgraph.history import build_prompt_view, validate_history

# After an overflow, each tool result in the prompt view is cut to this fraction of
# the per-output cap; it is a view-only cut, state keeps what it had.
GUARD_TOOL_OUTPUT_FRACTION = 0.25
GUARD_TOOL_OUTPUT_MIN_TOKENS = 300


@dataclass
class GuardedCall:
    """Result of a guarded model call."""

    ai: AIMessage
    prompt_tokens: int
    state_updates: list[BaseMessage] = field(default_factory=list)
    compaction: dict[str, Any] | None = None


def _noop(_event: dict[str, Any]) -> None:
    return None


def fixed_tokens(deps: AgentDeps, system: Sequence[BaseMessage], tools: Sequence[BaseTool]) -> int:
    """Tokens of the system prompt and tool schemas, sent with every call."""
    return deps.counter.count_messages(list(system)) + deps.counter.count_tools(list(tools))


def view_budget_tokens(
    deps: AgentDeps, system: Sequence[BaseMessage], tools: Sequence[BaseTool]
) -> int:
    """Tokens left for history once the system prompt and tool schemas are paid for."""
    return max(deps.budget.usable - fixed_tokens(deps, system, tools), 1)


def build_view(
    deps: AgentDeps,
    messages: Sequence[BaseMessage],
    system: Sequence[SystemMessage],
    tools: Sequence[BaseTool],
) -> tuple[list[BaseMessage], int, bool]:
    """The prompt view: cleaned, normalized, windowed and trimmed to the budget."""
    view = build_prompt_view(
        since_last_boundary(messages),
        system=list(system),
        keep_recent=deps.settings.max_message_history,
        max_tokens=view_budget_tokens(deps, system, tools),
        counter=deps.counter,
    )
    prompt = list(view.messages)
    if view.overflow:
        # The newest turn alone is over budget: cut its tool outputs in the view.
        cap = max(
            int(deps.budget.usable * GUARD_TOOL_OUTPUT_FRACTION / max(_tool_count(prompt), 1)),
            GUARD_TOOL_OUTPUT_MIN_TOKENS,
        )
        prompt, _ = shrink_tool_messages(prompt, cap, count=deps.counter.count_text)
    tokens = deps.counter.count_messages(prompt) + deps.counter.count_tools(list(tools))
    return prompt, tokens, view.overflow


def _tool_count(messages: Sequence[BaseMessage]) -> int:
    return sum(1 for m in messages if m.type == "tool")


def call_model(
    deps: AgentDeps,
    messages: Sequence[BaseMessage],
    system: Sequence[SystemMessage],
    tools: Sequence[BaseTool],
    config: RunnableConfig | None = None,
    *,
    emit: Emit = _noop,
    workspace: str | None = None,
    tool_choice: str | None = None,
    view: tuple[list[BaseMessage], int, bool] | None = None,
) -> GuardedCall:
    """Call the main model on the prompt view of ``messages``, recovering from overflow.

    Raises:
        ProviderFailure: the endpoint failed (auth, unknown model, retries exhausted)
            or the prompt cannot be made to fit.
    """
    history = list(messages)
    # The planner passes the view it built to decide on compaction: no second build.
    prompt, tokens, _ = view if view is not None else build_view(deps, history, system, tools)
    if deps.settings.debug:
        problems = validate_history(prompt)
        if problems:  # a bug in the view, never the provider's fault
            raise AssertionError("invalid prompt view: " + "; ".join(problems))
    policy = RetryPolicy(max_retries=deps.settings.provider_max_retries)
    max_tokens: int | None = deps.settings.max_output_tokens
    state_updates: list[BaseMessage] = []
    compaction: dict[str, Any] | None = None
    shrunk_outputs = compacted = False

    def on_retry(attempt: int, err: ProviderError, delay: float) -> None:
        emit(
            {
                "type": "retry",
                "text": f"{err.message} — retry {attempt} in {delay:.1f}s",
            }
        )

    while True:
        model: Any = deps.model
        if tools:
            model = (
                model.bind_tools(list(tools), tool_choice=tool_choice)
                if tool_choice
                else model.bind_tools(list(tools))
            )
        if max_tokens is not None:
            model = model.bind(max_tokens=max_tokens)
        try:
            ai = call_with_retries(
                partial(model.invoke, prompt, config),
                policy,
                sleep=deps.sleep,
                on_retry=on_retry,
            )
        except Exception as exc:
            typed = to_model_error(exc)
            err = provider_error_of(typed)
            if not isinstance(typed, ModelError) or err is None:
                raise  # not a provider failure: a programming error must surface
            if isinstance(typed, OutputOverflowError):
                smaller = shrink_max_tokens(err, max_tokens)
                if smaller is not None and smaller != max_tokens:
                    emit({"type": "notice", "text": f"output reservation shrunk to {smaller}"})
                    max_tokens = smaller
                    continue
            if isinstance(typed, ContextOverflowError):
                if not shrunk_outputs:
                    shrunk_outputs = True
                    cap = max(
                        int(deps.budget.usable * GUARD_TOOL_OUTPUT_FRACTION / 4),
                        GUARD_TOOL_OUTPUT_MIN_TOKENS,
                    )
                    prompt, changed = shrink_tool_messages(
                        prompt, cap, count=deps.counter.count_text
                    )
                    if changed:
                        emit(
                            {
                                "type": "notice",
                                "text": f"context overflow: truncated {changed} tool outputs",
                            }
                        )
                        continue
                if not compacted and deps.compactor is not None:
                    compacted = True
                    outcome = deps.compactor(
                        history, trigger="guard", system=system, tools=tools, workspace=workspace
                    )
                    if outcome is not None:
                        state_updates.extend(outcome.updates)
                        compaction = outcome.record
                        history = list(outcome.messages)
                        prompt, tokens, _ = build_view(deps, history, system, tools)
                        continue
                raise ProviderFailure(
                    f"the prompt (~{tokens:,} tokens) does not fit the model's context window "
                    "even after truncating tool outputs and compacting; the session is intact "
                    "(set AGENTGRAPH_CONTEXT_WINDOW to the real window, or use a larger model)"
                ) from exc
            raise ProviderFailure(f"model call failed: {err.message}") from exc
        if not isinstance(ai, AIMessage):  # pragma: no cover - defensive for odd models
            ai = AIMessage(content=str(getattr(ai, "content", ai)))
        return GuardedCall(
            ai=ai, prompt_tokens=tokens, state_updates=state_updates, compaction=compaction
        )
