"""Run data: what one graph run needs that is not conversation state.

The workspace, the thread id, the artifacts folder and the loop cap describe *this
run*, not the conversation: they travel in LangGraph's runtime context
(``StateGraph(AppState, context_schema=RunContext)``, ``graph.stream(...,
context=RunContext(...))``) and never reach a checkpoint. Nodes receive it as
``runtime: Runtime[RunContext]``; tools as ``runtime: ToolRuntime`` (the tools node
hands them the completed context, see :func:`complete_context`).

Checkpoints written before this change still carry ``workspace_path``, ``thread_id``,
``artifacts_dir`` and ``max_loops`` channel values; ``AppState`` no longer declares
them, so LangGraph ignores them when it loads such a checkpoint.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeAlias, TypeVar, cast

from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config
from langchain_core.tools import InjectedToolArg

from agentgraph.config import Settings
from agentgraph.persistence.thread_ids import session_path

if TYPE_CHECKING:
    from langgraph.prebuilt import ToolRuntime


NodeFn = TypeVar("NodeFn", bound=Callable[..., Any])

# LangGraph counts super-steps; each loop is planner + tools, plus finalize and slack.
RECURSION_STEPS_PER_LOOP = 2
RECURSION_SLACK_STEPS = 10
# Threads LangGraph's per-run pool may start (``max_concurrency``). The pool runs the
# background checkpoint writes and a step's extra tasks; the agent's graph runs one task
# per step, so one thread writes the checkpoints, in order. LangGraph's default (CPUs + 4)
# started up to six threads every turn: the storage benchmark's whole runs took 6-7%
# more CPU that way. Only for runs streamed in these modes without subgraphs: in the
# others LangGraph parks a waiter on the pool and runs the step's task there too. The
# functional API's @task calls made inside a node run on this pool too, so no agentgraph
# tool calls @task directly (tests/unit/test_run_config.py); a workflow runs as an
# @entrypoint, a run with a pool of its own.
RUN_POOL_THREADS = 1
POOL_SAFE_STREAM_MODES = frozenset({"updates", "values"})


def recursion_limit(max_loops: int) -> int:
    """LangGraph's recursion limit (super-steps) for a run capped at ``max_loops``."""
    return max_loops * RECURSION_STEPS_PER_LOOP + RECURSION_SLACK_STEPS


def run_config(thread_id: str, max_loops: int) -> RunnableConfig:
    """The run config of one graph run of ``thread_id`` (no secrets: configs may be
    persisted).

    Stream a run with it only in :data:`POOL_SAFE_STREAM_MODES`, without ``subgraphs``,
    and wrap the graph's nodes in :func:`uncapped_node`.

    Args:
        thread_id: The session (or subagent) thread.
        max_loops: The run's loop cap, which sets LangGraph's recursion limit.

    Returns:
        ``configurable.thread_id``, the recursion limit and the run pool's size.
    """
    return RunnableConfig(
        configurable={"thread_id": thread_id},
        recursion_limit=recursion_limit(max_loops),
        max_concurrency=RUN_POOL_THREADS,
    )


def _uncapped(config: RunnableConfig) -> RunnableConfig:
    return cast(RunnableConfig, {k: v for k, v in config.items() if k != "max_concurrency"})


def uncapped_node(node: NodeFn) -> NodeFn:
    """``node`` with the run's pool cap (:data:`RUN_POOL_THREADS`) kept from what it runs.

    LangChain hands a node's config to every runnable it calls, and a child run would
    inherit a one-thread pool: a tool that streams a graph in ``custom`` mode, or calls
    a functional-API workflow, then waits forever on work queued behind its own waiter,
    and a step's parallel tool calls would run one at a time. The node gets its config
    without the cap, and its children's context drops it too (setting it to None would
    not do: LangChain merges only values that are not None).

    Args:
        node: A sync node function; LangGraph passes it ``config`` by keyword.

    Returns:
        The same node, with the same signature for LangGraph to inspect.

    Raises:
        TypeError: ``node`` is a coroutine function (LangGraph would take the wrapper
            for a sync node and store the coroutine it returns).
    """
    if inspect.iscoroutinefunction(node):
        raise TypeError(f"uncapped_node wraps sync nodes only, not {node!r}")

    @functools.wraps(node)
    def run(*args: Any, **kwargs: Any) -> Any:
        if isinstance(kwargs.get("config"), dict):
            kwargs["config"] = _uncapped(kwargs["config"])
        inherited = var_child_runnable_config.get()
        if inherited is None or "max_concurrency" not in inherited:
            return node(*args, **kwargs)
        token = var_child_runnable_config.set(_uncapped(inherited))
        try:
            return node(*args, **kwargs)
        finally:
            var_child_runnable_config.reset(token)

    return cast(NodeFn, run)


@dataclass(frozen=True)
class RunContext:
    """One run's data (LangGraph runtime context; never checkpointed).

    Every field has a default so a LangGraph server client may send a partial
    ``context`` (or none); :func:`complete_context` fills the rest.

    Attributes:
        workspace_path: The folder the tools work in (absolute).
        thread_id: The session (LangGraph thread) id.
        artifacts_dir: Where full copies of truncated tool outputs go; read_file may
            read them by absolute path.
        max_loops: Model calls this run may make before it must answer (0: the
            ``MAX_LOOPS`` setting).
        user_id: Who runs the agent (``AGENTGRAPH_USER_ID``); copied to the state's
            ``user_id`` each turn.
        can_ask: Whether the run can put an approval question to a person (the REPL, a
            LangGraph server client). False for ``agentgraph run`` and subagents: calls
            that need approval are then declined (see ``agentgraph/security/approvals.py``).
    """

    workspace_path: str = ""
    thread_id: str = ""
    artifacts_dir: str | None = None
    max_loops: int = 0
    user_id: str | None = None
    can_ask: bool = True


def artifacts_dir_for(settings: Settings, thread_id: str) -> Path:
    """``AGENTGRAPH_HOME/artifacts/<thread_id>``: full outputs of truncated tool results.

    The folder name comes from :func:`~agentgraph.thread_ids.session_path`: whatever
    the id, it stays inside the home.
    """
    return session_path(settings.home, "artifacts", thread_id)


def loop_cap(raw: Any, settings: Settings) -> int:
    """Model calls the run may make: the context's ``max_loops``, bounded by the setting."""
    asked = raw.max_loops if isinstance(raw, RunContext) else 0
    return settings.loop_cap if asked <= 0 else min(asked, settings.loop_cap)


def _thread_id_of(config: RunnableConfig | None) -> str:
    configurable = (config or {}).get("configurable") or {}
    return str(configurable.get("thread_id") or "")


def complete_context(
    raw: Any,
    settings: Settings,
    config: RunnableConfig | None = None,
    *,
    pinned_workspace: Path | None = None,
) -> RunContext:
    """The run's context with every field set.

    Args:
        raw: ``runtime.context`` as LangGraph passed it (a :class:`RunContext`, or None
            when a server client sent none).
        settings: Supplies ``max_loops`` and ``user_id`` defaults, and bounds the loop
            cap a caller may ask for.
        config: The run config; its ``thread_id`` fills a missing one.
        pinned_workspace: A workspace that overrides the caller's (the LangGraph
            server: a client may not point the agent at another folder), along with
            the artifacts folder, which then always follows the thread id.

    Returns:
        A complete :class:`RunContext`.

    Raises:
        RuntimeError: No workspace at all (a wiring bug, not a model error).
    """
    ctx = raw if isinstance(raw, RunContext) else RunContext()
    thread_id = ctx.thread_id or _thread_id_of(config) or "default"
    workspace = str(pinned_workspace) if pinned_workspace is not None else ctx.workspace_path
    if not workspace:
        raise RuntimeError("the run context has no workspace_path; tools cannot run")
    artifacts = ctx.artifacts_dir
    if pinned_workspace is not None or not artifacts:
        artifacts = str(artifacts_dir_for(settings, thread_id))
    return replace(
        ctx,
        workspace_path=os.fspath(workspace),
        thread_id=thread_id,
        artifacts_dir=artifacts,
        max_loops=loop_cap(ctx, settings),
        user_id=ctx.user_id or settings.user_id,
    )


def context_of(runtime: Any) -> RunContext:
    """The completed :class:`RunContext` a tool receives in ``runtime.context``.

    Args:
        runtime: The tool's ``ToolRuntime`` (or a node's ``Runtime``).

    Returns:
        The context.

    Raises:
        RuntimeError: The runtime carries no run context with a workspace (a tool run
            outside agentgraph's tools node without ``context=RunContext(...)``).
    """
    ctx = getattr(runtime, "context", None)
    if not isinstance(ctx, RunContext) or not ctx.workspace_path:
        raise RuntimeError(
            "the run context has no workspace_path; run the graph with "
            "context=RunContext(workspace_path=...)"
        )
    return ctx


if TYPE_CHECKING:
    AgentToolRuntime: TypeAlias = ToolRuntime[RunContext, Any]
else:
    # What a tool declares as ``runtime: AgentToolRuntime``. ToolNode injects the
    # parameter named ``runtime`` whatever its type, and the schema the model sees leaves
    # out InjectedToolArg fields; pydantic then builds no schema of ToolRuntime's
    # dataclass for a value nobody validates (measured: 4.1 -> 1.0 ms per tool built,
    # about 50 ms of every start).
    AgentToolRuntime = Annotated[Any, InjectedToolArg]
