"""The finalize node: make sure the run ends with an answer, even at the loop cap."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from langchain_core.messages import AIMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from agentgraph.deps import AgentDeps
from agentgraph.history.kinds import stamped
from agentgraph.middleware.events import emit
from agentgraph.nodes.common import allowed_tools, system_messages
from agentgraph.nodes.model_call import make_model_call
from agentgraph.prompts import LOOP_CAP_INSTRUCTION, LOOP_CAP_NO_ANSWER, LOOP_CAP_TOOL_RESULT
from agentgraph.runctx import RunContext
from agentgraph.state import AppState

STOP_STEP_LIMIT = "max_loops"
"""``stopped`` event reason: the run ended at the loop cap."""


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
        # Loop cap: answer the pending calls, then ask once, without tools, for an answer.
        ctx = deps.run_context(runtime.context, config)
        max_loops = ctx.max_loops
        skipped = [
            ToolMessage(
                content=LOOP_CAP_TOOL_RESULT.format(max_loops=max_loops),
                tool_call_id=call["id"] or "",
                name=call["name"],
                status="error",
            )
            for call in last.tool_calls
        ]
        emit(
            {
                "type": "notice",
                "text": f"step limit reached ({max_loops} model calls); asking for a final answer",
            }
        )
        (base,) = system_messages(state, deps, workspace=ctx.workspace_path)
        instruction = LOOP_CAP_INSTRUCTION.format(max_loops=max_loops)
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
            answer = answer.model_copy(
                update={"content": LOOP_CAP_NO_ANSWER.format(max_loops=max_loops)}
            )
        emit({"type": "stopped", "reason": STOP_STEP_LIMIT})
        now = time.time()
        skipped = [stamped(m, now) for m in skipped]
        return {"messages": [*skipped, *result.messages[:-1], stamped(answer)]}

    return finalize
