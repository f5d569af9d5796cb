"""Wiring only: planner → tools → planner … → end; finalize at the loop cap."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from langchain_core.messages import AIMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import get_runtime
from langgraph.store.base import BaseStore

from agentgraph.deps import AgentDeps
from agentgraph.nodes.finalize import make_finalize
from agentgraph.nodes.model_turn import make_model_turn
from agentgraph.nodes.tools import make_tools_node
from agentgraph.runctx import RunContext, loop_cap
from agentgraph.state import AppState


def make_route_after_planner(deps: AgentDeps) -> Callable[[AppState], str]:
    """Run tools while the model asks for them and the run's loop cap allows.

    A reply without tool calls ends the run; ``finalize`` runs only when the loop cap
    leaves calls unanswered. (Passing an answer through a node that does nothing
    with it cost a superstep and a checkpoint write per turn.)
    """

    def route_after_planner(state: AppState) -> Literal["tools", "finalize", "__end__"]:
        messages = state.get("messages") or []
        last = messages[-1] if messages else None
        loops = int(state.get("loops") or 0)
        # No `runtime` parameter: update_state() evaluates this edge without a runtime.
        try:
            runtime = get_runtime()
        except RuntimeError:  # called outside a run
            runtime = None
        cap = loop_cap(getattr(runtime, "context", None), deps.settings)
        if not (isinstance(last, AIMessage) and last.tool_calls):
            return "__end__"  # LangGraph's END
        return "tools" if loops < cap else "finalize"

    return route_after_planner


def build_graph(
    deps: AgentDeps,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    store: BaseStore | None = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Compile the agent graph around ``deps`` (``store``: long-term memory, if any)."""
    graph = StateGraph(AppState, context_schema=RunContext)
    graph.add_node("planner", make_model_turn(deps))  # type: ignore[call-overload,arg-type,unused-ignore]
    graph.add_node("tools", make_tools_node(deps))  # type: ignore[call-overload,arg-type,unused-ignore]
    graph.add_node("finalize", make_finalize(deps))  # type: ignore[call-overload,arg-type,unused-ignore]
    graph.add_edge(START, "planner")
    graph.add_conditional_edges(
        "planner", make_route_after_planner(deps), ["tools", "finalize", END]
    )
    graph.add_edge("tools", "planner")
    graph.add_edge("finalize", END)
    return graph.compile(checkpointer=checkpointer, store=store)
