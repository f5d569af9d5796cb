"""The agent graph a LangGraph server serves (``langgraph dev``, LangGraph Platform).

The served graph is the CLI's graph (:func:`agentgraph.runtime.graph.build_graph` over
the same :class:`~agentgraph.session.agent.Agent` dependencies: tools, skills,
subagents, compaction) entered through a ``turn_start`` node. A server client sends
only ``{"messages": [...]}``; ``turn_start`` starts the turn the way
:meth:`Agent.stream_turn` does for the CLI (see agentgraph/session/turn_start.py):
answers for the calls a dead server left running, the mode note, the loop counters
reset, the memories on a thread's first turn, and the thread's index row.

The server brings its own checkpointer and store (PostgreSQL in a deployment), so the
graph is compiled without them; subagent child threads run in this process's memory.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from agentgraph.config import Settings
from agentgraph.persistence.delta import messages_delta_reducer
from agentgraph.persistence.index import SessionInfo
from agentgraph.persistence.store import Store
from agentgraph.persistence.thread_ids import check_thread_id
from agentgraph.providers.model import check_model_config
from agentgraph.runtime.graph import build_graph
from agentgraph.runtime.history.kinds import stamped
from agentgraph.runtime.runctx import RunContext, recursion_limit
from agentgraph.runtime.state import MAIN_CONTEXT_ID, AppState
from agentgraph.session.agent import Agent
from agentgraph.session.turn_start import memory_inputs, turn_inputs

SERVER_GRAPH_NAME = "agentgraph"
# A message without it has no @mention to apply (the mention parser is not run).
MENTION_MARK = "@"

logger = logging.getLogger(__name__)


class MemorySessionIndex:
    """A process-local ``SessionIndex``: the server keeps its own thread list.

    Turn starts and subagent bookkeeping write rows here; LangGraph server lists
    threads itself.
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


def _split_prompt(
    messages: Sequence[BaseMessage],
) -> tuple[list[BaseMessage], list[BaseMessage]]:
    """The stored history and the client's input: the trailing user messages."""
    start = len(messages)
    while start > 0 and isinstance(messages[start - 1], HumanMessage):
        start -= 1
    return list(messages[:start]), list(messages[start:])


def _moved(
    prompt: list[BaseMessage],
    before: list[BaseMessage],
    replacement: list[BaseMessage] | None = None,
) -> list[BaseMessage]:
    """A ``messages`` update putting ``before`` ahead of the already-stored ``prompt``
    (or of ``replacement``, the prompt with its @mentions applied, in its place).

    The reducer replaces a message whose id it knows where it stands, so the prompt is
    removed and added again under new ids, after ``before``.
    """
    if not before and replacement is None:
        return prompt  # stamped copies: replaced where they stand
    removed: list[BaseMessage] = [RemoveMessage(id=m.id) for m in prompt if m.id]
    again = replacement if replacement is not None else _renamed(prompt)
    return [*removed, *before, *again]


def _renamed(messages: list[BaseMessage]) -> list[BaseMessage]:
    return [m.model_copy(update={"id": f"user-{uuid.uuid4().hex}"}) for m in messages]


def make_turn_start(agent: Agent) -> Callable[..., dict[str, Any]]:
    """The node that starts every server turn, as :meth:`Agent.stream_turn` does."""

    def turn_start(
        state: AppState, config: RunnableConfig, runtime: Runtime[RunContext]
    ) -> dict[str, Any]:
        ctx = agent.deps.run_context(runtime.context, config)
        check_thread_id(ctx.thread_id)  # a client-chosen id must not name odd folders
        agent.refresh_skills()
        workspace = Path(ctx.workspace_path)
        user_id = ctx.user_id or agent.settings.user_id
        messages = list(state.get("messages") or [])
        history, prompt = _split_prompt(messages)
        prompt = [stamped(m) for m in prompt]
        text = prompt[-1].text if prompt else ""
        # The client's last message with its @mentions applied (files attached, skills
        # loaded), as the CLI applies them; the notices have no one to go to here.
        replacement: list[BaseMessage] | None = None
        mentioned: dict[str, Any] = {}
        if MENTION_MARK in text:
            mentioned, _notices = agent.mention_inputs(
                ctx.thread_id, text, workspace, None, state=state
            )
            replacement = [*_renamed(prompt[:-1]), *mentioned.pop("messages")]
        sent = replacement if replacement is not None else prompt
        update = turn_inputs(
            agent,
            ctx.thread_id,
            {**state, "messages": history},
            sent,
            artifacts_dir=Path(ctx.artifacts_dir or agent.deps.artifacts_dir(ctx.thread_id)),
            user_id=user_id,
            context_id=state.get("context_id") or MAIN_CONTEXT_ID,
        )
        before = update["messages"][: -len(sent) or None]
        update = {**mentioned, **update}
        update["messages"] = _moved(prompt, before, replacement)
        # Long-term memories from the platform's store, read once per thread (the
        # system prompt stays byte-stable afterwards).
        memory = runtime.store if agent.settings.memory != "off" else None
        update.update(
            memory_inputs(memory, state, user_id=user_id, workspace=workspace, notices=None)
        )
        count = len(messages_delta_reducer(messages, [update["messages"]]))
        agent.touch_index(ctx.thread_id, workspace, text, message_count=count)
        return update

    return turn_start


def build_server_agent(
    settings: Settings, *, workspace: Path | None = None, model: BaseChatModel | None = None
) -> Agent:
    """The agent a server serves: its subagents' threads and index rows in memory.

    Args:
        settings: Configuration (model endpoint, limits, bash mode…).
        workspace: The agent's workspace (default: ``settings.server_workspace`` or the
            current directory); a client's run context cannot change it.
        model: A chat model to use instead of the configured endpoint (tests).
    """
    root = (workspace or settings.server_workspace or Path.cwd()).expanduser().resolve()
    local = Store(checkpointer=InMemorySaver(), index=MemorySessionIndex(), location="memory")
    # base_env=None: tool subprocesses get a minimal environment, never the server's.
    agent = Agent(settings, local, model=model)
    agent.deps.pinned_workspace = root  # whatever a client's run context says
    return agent


def server_graph(agent: Agent) -> CompiledStateGraph[Any, Any, Any, Any]:
    """``agent``'s graph entered through ``turn_start``, compiled without a checkpointer."""
    graph = build_graph(agent.deps, turn_start=make_turn_start(agent), name=SERVER_GRAPH_NAME)
    limit = recursion_limit(agent.settings.loop_cap) + 1  # the turn_start node's step
    return graph.with_config(recursion_limit=limit)


def build_server_graph(
    settings: Settings, *, workspace: Path | None = None, model: BaseChatModel | None = None
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The served graph for ``settings`` (arguments as :func:`build_server_agent`).

    Returns:
        The compiled graph; the server supplies the checkpointer and store.
    """
    return server_graph(build_server_agent(settings, workspace=workspace, model=model))


def load_server_settings() -> Settings:
    """The server's settings: its environment and ``.env``, as the CLI reads them.

    Problems in the project's files are logged and skipped, as the CLI skips them.

    Raises:
        ConfigError: the settings are invalid or name no model endpoint.
    """
    # The one settings reader of every front end: the server reads the same sources.
    from agentgraph.session.startup import load_settings

    problems: list[str] = []
    settings = load_settings(problems=problems)
    for line in problems:
        logger.warning("agentgraph: %s", line)
    check_model_config(settings)
    return settings


def make_server_graph() -> CompiledStateGraph[Any, Any, Any, Any]:
    """The served graph, from the server's settings (see :func:`load_server_settings`).

    Raises:
        ConfigError: the settings are invalid or name no model endpoint.
    """
    return build_server_graph(load_server_settings())
