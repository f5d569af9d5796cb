"""Wiring only: planner → tools → planner … → end; finalize at the loop cap."""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore

from agentgraph.runtime.deps import AgentDeps
from agentgraph.runtime.nodes.finalize import make_finalize
from agentgraph.runtime.nodes.model_turn import make_model_turn
from agentgraph.runtime.nodes.tools import make_tools_node
from agentgraph.runtime.runctx import RunContext, uncapped_node
from agentgraph.runtime.state import AppState


def build_graph(
    deps: AgentDeps,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    store: BaseStore | None = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Compile the agent graph around ``deps`` (``store``: long-term memory, if any)."""
    graph = StateGraph(AppState, context_schema=RunContext)
    graph.add_node(
        "planner",
        uncapped_node(make_model_turn(deps)),  # type: ignore[call-overload,arg-type,unused-ignore]
        destinations=("tools", "finalize", END),  # it routes itself: see next_node
    )
    graph.add_node("tools", uncapped_node(make_tools_node(deps)))  # type: ignore[call-overload,arg-type,unused-ignore]
    graph.add_node("finalize", uncapped_node(make_finalize(deps)))  # type: ignore[call-overload,arg-type,unused-ignore]
    graph.add_edge(START, "planner")
    graph.add_edge("tools", "planner")
    graph.add_edge("finalize", END)
    return graph.compile(checkpointer=checkpointer, store=store)
