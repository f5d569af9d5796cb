"""Wiring only: [turn_start →] planner → tools → planner … → end; finalize at the loop cap."""

from __future__ import annotations

from collections.abc import Callable
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

# The entry node of a graph built with a turn-start hook (see build_graph).
TURN_START_NODE = "turn_start"
# The node every turn's model loop starts at.
PLANNER_NODE = "planner"


def build_graph(
    deps: AgentDeps,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    store: BaseStore | None = None,
    *,
    turn_start: Callable[..., Any] | None = None,
    name: str | None = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Compile the agent graph around ``deps``.

    Args:
        deps: What the nodes use (model, tools, budget…).
        checkpointer: Where threads are saved (None: the caller's runtime brings one).
        store: Long-term memory, if any.
        turn_start: A node run first on every input, before the planner (a front end
            whose clients send only messages starts its turns there); None: the input
            goes to the planner as it is.
        name: The compiled graph's name (None: LangGraph's default).

    Returns:
        The compiled graph: ``START → [turn_start →] planner``.
    """
    graph = StateGraph(AppState, context_schema=RunContext)
    graph.add_node(
        PLANNER_NODE,
        uncapped_node(make_model_turn(deps)),  # type: ignore[call-overload,arg-type,unused-ignore]
        destinations=("tools", "finalize", END),  # it routes itself: see next_node
    )
    graph.add_node("tools", uncapped_node(make_tools_node(deps)))  # type: ignore[call-overload,arg-type,unused-ignore]
    graph.add_node("finalize", uncapped_node(make_finalize(deps)))  # type: ignore[call-overload,arg-type,unused-ignore]
    if turn_start is None:
        graph.add_edge(START, PLANNER_NODE)
    else:
        graph.add_node(TURN_START_NODE, turn_start)
        graph.add_edge(START, TURN_START_NODE)
        graph.add_edge(TURN_START_NODE, PLANNER_NODE)
    graph.add_edge("tools", PLANNER_NODE)
    graph.add_edge("finalize", END)
    if name is None:
        return graph.compile(checkpointer=checkpointer, store=store)
    return graph.compile(checkpointer=checkpointer, store=store, name=name)
