"""agentgraph: a coding agent on LangGraph whose edge is context management.

The public API, loaded on first use (``import agentgraph`` stays cheap for the CLI):

* :class:`Settings` — every setting (``AGENTGRAPH_*``), and :func:`open_store` the
  SQLite or Postgres store they name;
* :class:`Agent` — the compiled graph bound to settings and a store (``run_turn``,
  ``resume``, ``compact`` …), and :class:`SessionService`, the operations front ends use;
* :func:`build_graph`, :class:`AppState`, :class:`RunContext` — the LangGraph graph, its
  state and its runtime context, for those who wire their own;
* :func:`context_middleware` — the context engine as LangChain ``AgentMiddleware`` for
  ``create_agent`` (the units themselves are in :mod:`agentgraph.middleware`);
* :data:`Event`, :func:`to_event`, :data:`Op`, :func:`parse_op` — the typed protocol.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentgraph.config import Settings
    from agentgraph.middleware.pipeline import context_middleware
    from agentgraph.persistence.store import open_store
    from agentgraph.protocol import Event, Op, parse_op, to_event
    from agentgraph.runtime.graph import build_graph
    from agentgraph.runtime.runctx import RunContext
    from agentgraph.runtime.state import AppState
    from agentgraph.session.agent import Agent
    from agentgraph.session.service import SessionService

# Public name -> the module that defines it.
_EXPORTS = {
    "Agent": "agentgraph.session.agent",
    "AppState": "agentgraph.runtime.state",
    "Event": "agentgraph.protocol",
    "Op": "agentgraph.protocol",
    "RunContext": "agentgraph.runtime.runctx",
    "SessionService": "agentgraph.session.service",
    "Settings": "agentgraph.config",
    "build_graph": "agentgraph.runtime.graph",
    "context_middleware": "agentgraph.middleware.pipeline",
    "open_store": "agentgraph.persistence.store",
    "parse_op": "agentgraph.protocol",
    "to_event": "agentgraph.protocol",
}

__all__ = [
    "Agent",
    "AppState",
    "Event",
    "Op",
    "RunContext",
    "SessionService",
    "Settings",
    "build_graph",
    "context_middleware",
    "open_store",
    "parse_op",
    "to_event",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(module), name)
