"""The agent for LangGraph server deployments (``langgraph dev``, LangGraph Platform).

``langgraph.json`` at the repository root declares ``"agent": "./agentgraph/frontends/server.py:
make_graph"``. The server calls :func:`make_graph` with the run's config and provides
its own checkpointer (PostgreSQL in a deployment), so the graph is compiled without one.

The served graph is the CLI's graph (``agentgraph.runtime.graph.build_graph`` over the same
:class:`~agentgraph.agent.Agent` dependencies: tools, skills, subagents, compaction)
with one node in front, ``turn_start``. A server client sends only
``{"messages": [...]}``; ``turn_start`` resets the loop counter to 0 and records the
user, as the CLI's turn input does. Run data comes from the run's ``context``
(LangGraph's runtime context, see ``agentgraph/runtime/runctx.py``), every field optional:
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

import logging
import threading
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from agentgraph.capabilities.recall.memory import load_memory_prompt
from agentgraph.config import Settings
from agentgraph.persistence.index import SessionInfo
from agentgraph.persistence.store import Store
from agentgraph.persistence.thread_ids import check_thread_id
from agentgraph.runtime.graph import build_graph
from agentgraph.runtime.runctx import RunContext, recursion_limit
from agentgraph.runtime.state import MAIN_CONTEXT_ID, AppState
from agentgraph.session.agent import Agent

TURN_START_NODE = "turn_start"
SERVER_GRAPH_NAME = "agentgraph"

logger = logging.getLogger(__name__)


class MemorySessionIndex:
    """A process-local ``SessionIndex``: the server keeps its own thread list.

    Subagent bookkeeping writes rows here; LangGraph server lists threads itself.
    """

    def __init__(self) -> None:
        self._rows: dict[str, SessionInfo] = {}
        self._lock = threading.Lock()

    def upsert(self, info: SessionInfo) -> None:
        """Insert or replace the row for ``info.thread_id``."""
        with self._lock:
            self._rows[info.thread_id] = info

    def get(self, thread_id: str) -> SessionInfo | None:
        """The row for ``thread_id``, if any."""
        with self._lock:
            return self._rows.get(thread_id)

    def delete(self, thread_id: str) -> None:
        """Remove the row."""
        with self._lock:
            self._rows.pop(thread_id, None)

    def list_sessions(
        self, *, workspace: str | None = None, include_subagents: bool = False
    ) -> list[SessionInfo]:
        """Rows, most recently updated first."""
        with self._lock:
            rows = list(self._rows.values())
        rows = [
            r
            for r in rows
            if (workspace is None or r.workspace == workspace)
            and (include_subagents or r.parent_thread_id is None)
        ]
        return sorted(rows, key=lambda r: r.updated_at, reverse=True)

    def children(self, thread_id: str) -> list[SessionInfo]:
        """Subagent rows started by ``thread_id``."""
        with self._lock:
            rows = [r for r in self._rows.values() if r.parent_thread_id == thread_id]
        return sorted(rows, key=lambda r: r.created_at)

    def __getattr__(self, name: str) -> Any:
        # Methods added to the SessionIndex Protocol later (titles, search…) are not
        # needed by the server's graph; fail loudly rather than silently if one is.
        raise AttributeError(f"MemorySessionIndex has no {name!r} (server mode)")


def make_turn_start(agent: Agent) -> Any:
    """The node that starts every server turn the way ``Agent.stream_turn`` does."""

    def turn_start(
        state: AppState, config: RunnableConfig, runtime: Runtime[RunContext]
    ) -> dict[str, Any]:
        ctx = agent.deps.run_context(runtime.context, config)
        check_thread_id(ctx.thread_id)  # a client-chosen id must not name odd folders
        agent.refresh_skills()
        update: dict[str, Any] = {
            "loops": 0,
            "turn_tokens": 0,
            "turn_cost_usd": 0.0,
            "context_id": state.get("context_id") or MAIN_CONTEXT_ID,
            "user_id": ctx.user_id,
        }
        # Long-term memories from the platform's store, read once per thread (the
        # system prompt stays byte-stable afterwards).
        memory_on = agent.settings.memory != "off"
        if memory_on and runtime.store is not None and state.get("memory_prompt") is None:
            update["memory_prompt"] = load_memory_prompt(
                runtime.store, ctx.user_id or agent.settings.user_id, ctx.workspace_path
            )
        return update

    return turn_start


def build_server_graph(
    settings: Settings, *, workspace: Path | None = None, model: Any = None
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The CLI's agent graph behind a ``turn_start`` node, compiled without a checkpointer.

    Args:
        settings: Configuration (model endpoint, limits, bash mode…).
        workspace: The agent's workspace (default: ``settings.server_workspace`` or the
            current directory).
        model: A chat model to use instead of the configured endpoint (tests).

    Returns:
        The compiled graph; the server supplies the checkpointer.
    """
    root = (workspace or settings.server_workspace or Path.cwd()).expanduser().resolve()
    # Subagent child threads run on the Agent's own graph, kept in this process's memory.
    local = Store(checkpointer=InMemorySaver(), index=MemorySessionIndex(), location="memory")
    # base_env=None: tool subprocesses get a minimal environment, never the server's.
    agent = Agent(settings, local, model=model)
    agent.deps.pinned_workspace = root  # whatever a client's run context says
    builder = build_graph(agent.deps).builder
    builder.compiled = False  # a fresh builder from build_graph: safe to extend
    builder.add_node(TURN_START_NODE, make_turn_start(agent))
    entries = {end for start, end in builder.edges if start == START}
    builder.edges -= {(START, end) for end in entries}
    builder.add_edge(START, TURN_START_NODE)
    for end in entries:
        builder.add_edge(TURN_START_NODE, end)
    if START in builder.branches:
        builder.branches[TURN_START_NODE] = builder.branches.pop(START)
    limit = recursion_limit(settings.loop_cap) + 1  # the turn_start node's step
    graph = builder.compile(name=SERVER_GRAPH_NAME)
    return graph.with_config(recursion_limit=limit)


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
            from agentgraph.frontends.cli.common import load_settings
            from agentgraph.providers.model import check_model_config

            problems: list[str] = []
            settings = load_settings(problems=problems)
            for line in problems:
                logger.warning("agentgraph: %s", line)
            check_model_config(settings)
            _graph = build_server_graph(settings)
        return _graph


def reset_graph_cache() -> None:
    """Forget the built graph (tests; a changed environment)."""
    global _graph
    with _graph_lock:
        _graph = None
