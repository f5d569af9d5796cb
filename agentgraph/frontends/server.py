"""The agent for LangGraph server deployments (``langgraph dev``, LangGraph Platform).

``langgraph.json`` at the repository root declares ``"agent": "./agentgraph/frontends/server.py:
make_graph"``. The server calls :func:`make_graph` with the run's config and provides
its own checkpointer (PostgreSQL in a deployment), so the graph is compiled without one.

The served graph is the CLI's graph (built by ``agentgraph.session.server_support``)
with one node in front, ``turn_start``. A server client sends only
``{"messages": [...]}``; ``turn_start`` starts the turn as the CLI does (answers for
calls a dead server left running, the loop counter reset, the user, the memories).
Run data comes from the run's ``context`` (LangGraph's runtime context, see
``agentgraph/runtime/runctx.py``), every field optional:
``max_loops`` (at most the server's ``MAX_LOOPS``), ``user_id`` (default: the server's
``AGENTGRAPH_USER_ID``); the thread id is the run's. The workspace and artifacts folder
are always the server's (``AGENTGRAPH_SERVER_WORKSPACE``, default the server's working
directory): a client cannot point the agent at another directory.

Approvals (``AGENTGRAPH_BASH=ask``, ``AGENTGRAPH_EDITS=ask``) reach the client as
ordinary LangGraph interrupts; it answers with ``Command(resume=...)``.

Settings come from the server's environment and ``.env`` (this module is an edge, like
the CLI). Secrets stay there: nothing secret goes into the graph, its state or config.
"""

from __future__ import annotations

import threading
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph.state import CompiledStateGraph

from agentgraph.session.server_support import make_server_graph

_graph_lock = threading.Lock()
_graph: CompiledStateGraph[Any, Any, Any, Any] | None = None


def make_graph(config: RunnableConfig) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Graph factory named in ``langgraph.json``; called by the server for each run.

    Settings are read once per process from the environment and ``.env`` and the graph
    is built once, then reused (the run's ``config`` does not change it).

    Args:
        config: The run's config (unused: the agent is the same for every run).

    Returns:
        The compiled agent graph, without a checkpointer.

    Raises:
        ConfigError: the settings are invalid or name no model endpoint.
    """
    del config
    global _graph
    with _graph_lock:
        if _graph is None:
            _graph = make_server_graph()
        return _graph


def reset_graph_cache() -> None:
    """Forget the built graph (tests; a changed environment)."""
    global _graph
    with _graph_lock:
        _graph = None
