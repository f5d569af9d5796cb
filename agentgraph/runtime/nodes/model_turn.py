"""The model-turn node (named "planner" in the graph): one model call through the pipeline.

It does not plan: it asks the model for the next reply (text, tool calls or
both) and records it. The graph keeps the node name "planner", which the
design and stored checkpoints use.

The pipeline (``agentgraph.middleware``: prompt view, compaction, overflow recovery,
retry) runs around the call; this node only gathers the state's inputs, writes back the
reply and whatever a compaction changed, and says where the run goes next
(:func:`next_node`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime
from langgraph.types import Command

from agentgraph.context.spiral import repeat_streak
from agentgraph.middleware.events import emit
from agentgraph.runtime.deps import AgentDeps
from agentgraph.runtime.goal import account, active_goal
from agentgraph.runtime.history.calls import hit_output_limit
from agentgraph.runtime.history.kinds import stamped
from agentgraph.runtime.nodes.common import (
    allowed_tools,
    repair_invalid_tool_calls,
    system_messages,
)
from agentgraph.runtime.nodes.limits import budget_spent, reply_cost, reply_tokens, request_limit
from agentgraph.runtime.nodes.model_call import make_model_call
from agentgraph.runtime.runctx import RunContext
from agentgraph.runtime.state import AppState
from agentgraph.runtime.tool_ids import SessionCallIds, admit_reply

Next = Literal["tools", "finalize", "__end__"]
"""Where the run goes after a reply: the ``tools`` node, ``finalize`` or LangGraph's END."""


def next_node(reply: AIMessage, limit: str | None) -> Next:
    """Run tools while the model asks for them and no limit of the request is reached.

    A reply without tool calls ends the run; ``finalize`` runs when a limit
    (:func:`~agentgraph.nodes.limits.request_limit`) leaves calls unanswered. (Passing an
    answer through a node that does nothing with it cost a superstep and a checkpoint
    write per turn.)

    Args:
        reply: The model's reply, as the node records it.
        limit: The limit the request reached with this reply, or None.

    Returns:
        The next node's name.
    """
    if not reply.tool_calls:
        return "__end__"  # LangGraph's END
    return "tools" if limit is None else "finalize"


def make_model_turn(
    deps: AgentDeps,
) -> Callable[[AppState, RunnableConfig, Runtime[RunContext]], Command[Next]]:
    """Build the model-turn node (graph node "planner") bound to ``deps``."""
    call_model = make_model_call(deps)
    # The ids each session's history uses, read only where the history changed.
    session_ids = SessionCallIds()

    def model_turn(
        state: AppState, config: RunnableConfig, runtime: Runtime[RunContext]
    ) -> Command[Next]:
        messages: list[BaseMessage] = list(state.get("messages") or [])
        runtime = runtime.override(context=deps.run_context(runtime.context, config))
        # Background subagents that ended since the last call: appended (the prompt's
        # prefix stays as the provider cached it) and stored with this call's reply.
        tasks = getattr(deps.subagents, "tasks", None)
        notices = tasks.notices(runtime.context.thread_id, messages) if tasks else []
        messages = [*messages, *notices]
        (system,) = system_messages(state, deps, workspace=runtime.context.workspace_path)
        result = call_model(
            state, messages, system, allowed_tools(state, deps), config, runtime=runtime
        )
        updates = result.messages[:-1]
        # Provider ids are untrusted: unique in the session before the tools run.
        history = [*messages, *updates]
        # Keyed by thread (a node's checkpoint_ns names its task, new at every step); the
        # key only decides what is reused, never the result.
        key = (config.get("configurable") or {}).get("thread_id")
        ai = admit_reply(
            repair_invalid_tool_calls(result.ai), history, taken=session_ids.ids(key, history)
        )
        ai = stamped(ai)
        if hit_output_limit(result.ai):
            what = "a tool call was cut off" if ai.tool_calls else "the answer is cut short"
            emit({"type": "notice", "text": f"the reply stopped at the output token limit: {what}"})
        emit({"type": "prompt_tokens", "tokens": result.prompt_tokens})
        loops = int(state.get("loops") or 0) + 1
        replies = [*updates, result.ai]
        tokens = reply_tokens(replies)
        cost = reply_cost(replies, deps.settings.model)
        spending: dict[str, Any] = {
            "turn_tokens": int(state.get("turn_tokens") or 0) + tokens,
            "turn_cost_usd": float(state.get("turn_cost_usd") or 0.0) + (cost or 0.0),
        }
        goal = active_goal(state)
        if goal is not None:  # the goal's work: every call while it is active
            answer = None if ai.tool_calls else ai.text
            spending["goal"] = account(goal, tokens, cost, answer, model=deps.settings.model)
        limit = None
        if ai.tool_calls:
            limit = request_limit(
                loops,
                runtime.context.max_loops,
                budget_spent({**state, **spending}, deps.settings) is not None,
                repeat_streak(history, ai),
            )
        # The node routes itself (a Command) rather than through a conditional edge,
        # which would read the whole state again with this update applied.
        return Command(
            update={"messages": [*notices, *updates, ai], "loops": loops, **spending},
            goto=next_node(ai, limit),
        )

    return model_turn
