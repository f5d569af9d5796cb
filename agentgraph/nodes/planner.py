"""The planner node: one guarded model call on the prompt view of the history."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.runtime import Runtime

from agentgraph.context.compaction import since_last_boundary
from agentgraph.context.guard import build_view, call_model, fixed_tokens
from agentgraph.context.tokens import anchored_prompt_tokens
from agentgraph.deps import AgentDeps
from agentgraph.nodes.common import allowed_tools, emit, repair_invalid_tool_calls, system_messages
from agentgraph.runctx import RunContext
from agentgraph.state import AppState
from agentgraph.tool_ids import admit_reply


def needs_compaction(
    deps: AgentDeps,
    messages: Sequence[BaseMessage],
    system: Sequence[SystemMessage],
    tools: Sequence[BaseTool],
    view: tuple[list[BaseMessage], int, bool],
) -> bool:
    """Compact at the token threshold, or before messages would fall out of the window.

    The size is our own count of the prompt view or, when larger, the provider's
    reported usage of the last reply plus what came after it (Claude Code's anchor):
    the provider's tokenizer is the one that decides what overflows.
    """
    recent = [m for m in since_last_boundary(messages) if not isinstance(m, SystemMessage)]
    if len(recent) > deps.settings.max_message_history:
        return True
    prompt, tokens, _ = view
    body = [m for m in prompt if not isinstance(m, SystemMessage)]
    reported, source = anchored_prompt_tokens(
        body, deps.counter, fixed_tokens=fixed_tokens(deps, system, tools)
    )
    if source == "reported":
        tokens = max(tokens, reported)
    return tokens >= deps.budget.compact_at


def make_planner(
    deps: AgentDeps,
) -> Callable[[AppState, RunnableConfig, Runtime[RunContext]], dict[str, Any]]:
    """Build the planner node bound to ``deps``."""

    def planner(
        state: AppState, config: RunnableConfig, runtime: Runtime[RunContext]
    ) -> dict[str, Any]:
        messages: list[BaseMessage] = list(state.get("messages") or [])
        workspace = deps.run_context(runtime.context, config).workspace_path
        system = system_messages(state, deps, workspace=workspace)
        tools = allowed_tools(state, deps)
        updates: list[Any] = []
        view = build_view(deps, messages, system, tools)
        prebuilt: tuple[list[BaseMessage], int, bool] | None = view
        if deps.compactor is not None and needs_compaction(deps, messages, system, tools, view):
            outcome = deps.compactor(
                messages, trigger="auto", system=system, tools=tools, workspace=workspace
            )
            if outcome is not None:
                updates.extend(outcome.updates)
                messages = list(outcome.messages)
                prebuilt = None  # the history changed: the guard builds the new view
                emit({"type": "compaction", **outcome.record})
        result = call_model(
            deps, messages, system, tools, config, emit=emit, workspace=workspace, view=prebuilt
        )
        updates.extend(result.state_updates)
        if result.compaction is not None:
            emit({"type": "compaction", **result.compaction})
        # Provider ids are untrusted: unique in the session before the tools run.
        ai = admit_reply(repair_invalid_tool_calls(result.ai), [*state["messages"], *updates])
        emit({"type": "prompt_tokens", "tokens": result.prompt_tokens})
        return {"messages": [*updates, ai], "loops": int(state.get("loops") or 0) + 1}

    return planner
