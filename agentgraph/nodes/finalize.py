"""The finalize node: make sure the run ends with an answer, even when a limit stops it.

Two limits send a run here with tool calls unanswered: the loop cap (``MAX_LOOPS``)
and the runaway guard (the same calls returned the same output
:data:`~agentgraph.nodes.model_turn.RUNAWAY_REPEATS` times in a row). Either way the
pending calls are answered as not executed and the model is asked once, without
tools, for an answer; the ``stopped`` event names which limit it was.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from langchain_core.messages import AIMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from agentgraph.context.spiral import repeat_streak
from agentgraph.deps import AgentDeps
from agentgraph.history.kinds import stamped
from agentgraph.middleware.events import emit
from agentgraph.nodes.common import allowed_tools, system_messages
from agentgraph.nodes.model_call import make_model_call
from agentgraph.prompts import (
    LOOP_CAP_INSTRUCTION,
    LOOP_CAP_NO_ANSWER,
    LOOP_CAP_TOOL_RESULT,
    RUNAWAY_INSTRUCTION,
    RUNAWAY_NO_ANSWER,
    RUNAWAY_TOOL_RESULT,
)
from agentgraph.runctx import RunContext
from agentgraph.state import AppState

STOP_STEP_LIMIT = "max_loops"
"""``stopped`` event reason: the run ended at the loop cap."""
STOP_REPEATED = "repeated_calls"
"""``stopped`` event reason: the same tool calls kept returning the same output."""


def _stop_texts(loops: int, max_loops: int, repeats: int) -> tuple[str, str, str, str, str]:
    """Why the run stops: its ``stopped`` reason, the notice, the pending calls' result,
    the instruction and the answer stored when the model gives none."""
    if loops >= max_loops:
        return (
            STOP_STEP_LIMIT,
            f"step limit reached ({max_loops} model calls); asking for a final answer",
            LOOP_CAP_TOOL_RESULT.format(max_loops=max_loops),
            LOOP_CAP_INSTRUCTION.format(max_loops=max_loops),
            LOOP_CAP_NO_ANSWER.format(max_loops=max_loops),
        )
    return (
        STOP_REPEATED,
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
        # A limit: answer the pending calls, then ask once, without tools, for an answer.
        ctx = deps.run_context(runtime.context, config)
        loops = int(state.get("loops") or 0)
        reason, notice, not_run, instruction, no_answer = _stop_texts(
            loops, ctx.max_loops, repeat_streak(messages[:-1], last)
        )
        skipped = [
            ToolMessage(
                content=not_run,
                tool_call_id=call["id"] or "",
                name=call["name"],
                status="error",
            )
            for call in last.tool_calls
        ]
        emit({"type": "notice", "text": notice})
        (base,) = system_messages(state, deps, workspace=ctx.workspace_path)
        system = SystemMessage(content=f"{base.text}\n\n{instruction}")
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
            answer = answer.model_copy(update={"content": no_answer})
        emit({"type": "stopped", "reason": reason})
        now = time.time()
        skipped = [stamped(m, now) for m in skipped]
        return {"messages": [*skipped, *result.messages[:-1], stamped(answer)]}

    return finalize
