"""The model-turn node (named "planner" in the graph): one model call through the pipeline.

It does not plan: it asks the model for the next reply (text, tool calls or
both) and records it. The graph keeps the node name "planner", which the
design and stored checkpoints use.

The pipeline (``agentgraph.middleware``: prompt view, compaction, overflow recovery,
retry) runs around the call; this node only gathers the state's inputs and writes
back the reply and whatever a compaction changed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from agentgraph.deps import AgentDeps
from agentgraph.history.calls import hit_output_limit
from agentgraph.history.kinds import stamped
from agentgraph.middleware.events import emit
from agentgraph.nodes.common import allowed_tools, repair_invalid_tool_calls, system_messages
from agentgraph.nodes.model_call import make_model_call
from agentgraph.runctx import RunContext
from agentgraph.state import AppState
from agentgraph.tool_ids import SessionCallIds, admit_reply


def make_model_turn(
    deps: AgentDeps,
) -> Callable[[AppState, RunnableConfig, Runtime[RunContext]], dict[str, Any]]:
    """Build the model-turn node (graph node "planner") bound to ``deps``."""
    call_model = make_model_call(deps)
    # The ids each session's history uses, read only where the history changed.
    session_ids = SessionCallIds()

    def model_turn(
        state: AppState, config: RunnableConfig, runtime: Runtime[RunContext]
    ) -> dict[str, Any]:
        messages: list[BaseMessage] = list(state.get("messages") or [])
        runtime = runtime.override(context=deps.run_context(runtime.context, config))
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
        return {"messages": [*updates, ai], "loops": int(state.get("loops") or 0) + 1}

    return model_turn
