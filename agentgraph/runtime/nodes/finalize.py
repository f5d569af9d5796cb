"""The finalize node: make sure the run ends with an answer, even when a limit stops it.

A limit of the request (:mod:`agentgraph.runtime.nodes.limits`: the loop cap, a budget,
the runaway guard) sends the run here with tool calls unanswered. The pending calls are
answered as not executed; at the loop cap or the runaway guard the model is then asked
once, without tools, for an answer; a spent budget ends with a stored answer instead,
since one more call would spend more. The ``stopped`` event names the limit.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, NamedTuple

from langchain_core.messages import AIMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from agentgraph.context.spiral import repeat_streak
from agentgraph.middleware.events import emit
from agentgraph.runtime.deps import AgentDeps
from agentgraph.runtime.history.kinds import STOPPED_KEY, stamped, with_marker
from agentgraph.runtime.nodes.common import allowed_tools, system_messages
from agentgraph.runtime.nodes.limits import (
    STOP_BUDGET,
    STOP_REPEATED,
    STOP_STEP_LIMIT,
    budget_spent,
    request_limit,
)
from agentgraph.runtime.nodes.model_call import make_model_call
from agentgraph.runtime.prompts import (
    BUDGET_ANSWER,
    BUDGET_TOOL_RESULT,
    LOOP_CAP_INSTRUCTION,
    LOOP_CAP_NO_ANSWER,
    LOOP_CAP_TOOL_RESULT,
    RUNAWAY_INSTRUCTION,
    RUNAWAY_NO_ANSWER,
    RUNAWAY_TOOL_RESULT,
)
from agentgraph.runtime.runctx import RunContext
from agentgraph.runtime.state import AppState

__all__ = ["STOP_BUDGET", "STOP_REPEATED", "STOP_STEP_LIMIT", "make_finalize"]


class _Stop(NamedTuple):
    """How the run stops at a limit."""

    reason: str  # the ``stopped`` event's
    notice: str
    not_run: str  # the pending calls' result
    instruction: str | None  # asks the model for an answer; None: no more model calls
    no_answer: str  # stored when the model gives no answer (or is not asked)


def _stop(reason: str, max_loops: int, spent: str, repeats: int) -> _Stop:
    if reason == STOP_STEP_LIMIT:
        return _Stop(
            reason,
            f"step limit reached ({max_loops} model calls); asking for a final answer",
            LOOP_CAP_TOOL_RESULT.format(max_loops=max_loops),
            LOOP_CAP_INSTRUCTION.format(max_loops=max_loops),
            LOOP_CAP_NO_ANSWER.format(max_loops=max_loops),
        )
    if reason == STOP_BUDGET:
        return _Stop(
            reason,
            f"stopped at the budget: {spent}",
            BUDGET_TOOL_RESULT,
            None,
            BUDGET_ANSWER.format(spent=spent),
        )
    return _Stop(
        reason,
        f"the same tool calls returned the same output {repeats} times in a row; "
        "asking for a final answer",
        RUNAWAY_TOOL_RESULT.format(repeats=repeats),
        RUNAWAY_INSTRUCTION.format(repeats=repeats),
        RUNAWAY_NO_ANSWER.format(repeats=repeats),
    )


def make_finalize(
    deps: AgentDeps,
) -> Callable[[AppState, RunnableConfig, Runtime[RunContext]], dict[str, Any]]:
    """Build the finalize node bound to ``deps``."""
    call_model = make_model_call(deps)

    def finalize(
        state: AppState, config: RunnableConfig, runtime: Runtime[RunContext]
    ) -> dict[str, Any]:
        messages = list(state.get("messages") or [])
        last = messages[-1] if messages else None
        if not (isinstance(last, AIMessage) and last.tool_calls):
            return {}
        # A limit: answer the pending calls, then (but at the budget) ask once, without
        # tools, for an answer.
        ctx = deps.run_context(runtime.context, config)
        spent = budget_spent(state, deps.settings)
        repeats = repeat_streak(messages[:-1], last)
        loops = int(state.get("loops") or 0)
        limit = request_limit(loops, ctx.max_loops, spent is not None, repeats)
        stop = _stop(limit or STOP_STEP_LIMIT, ctx.max_loops, spent or "", repeats)
        now = time.time()
        skipped = [
            stamped(
                ToolMessage(
                    content=stop.not_run,
                    tool_call_id=call["id"] or "",
                    name=call["name"],
                    status="error",
                ),
                now,
            )
            for call in last.tool_calls
        ]
        emit({"type": "notice", "text": stop.notice})
        if stop.instruction is None:
            emit({"type": "stopped", "reason": stop.reason})
            stopped = with_marker(AIMessage(content=stop.no_answer), **{STOPPED_KEY: stop.reason})
            return {"messages": [*skipped, stamped(stopped)]}
        (base,) = system_messages(state, deps, workspace=ctx.workspace_path)
        system = SystemMessage(content=f"{base.text}\n\n{stop.instruction}")
        # Tools stay declared (strict providers reject tool calls in a history without
        # them) but the model may not call one.
        result = call_model(
            state,
            [*messages, *skipped],
            system,
            allowed_tools(state, deps),
            config,
            runtime=runtime.override(context=ctx),
            tool_choice="none",
        )
        answer = result.ai
        if answer.tool_calls:  # a model that still insists on tools gets no more
            kwargs = {k: v for k, v in answer.additional_kwargs.items() if k != "tool_calls"}
            answer = answer.model_copy(
                update={"tool_calls": [], "invalid_tool_calls": [], "additional_kwargs": kwargs}
            )
        if not answer.text.strip():
            answer = answer.model_copy(update={"content": stop.no_answer})
        emit({"type": "stopped", "reason": stop.reason})
        answer = with_marker(answer, **{STOPPED_KEY: stop.reason})
        return {"messages": [*skipped, *result.messages[:-1], stamped(answer)]}

    return finalize
