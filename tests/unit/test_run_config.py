"""The run config's one-thread pool stays LangGraph's own (agentgraph/runtime/runctx.py).

Every test runs a real Agent turn on SQLite under tmp_path whose only tool does what a
child of a capped run could not: stream a graph in ``custom`` mode, run a functional-API
workflow, run runnables in parallel. A hang fails the test after ``TURN_TIMEOUT_S``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langchain_core.runnables import RunnableLambda, ensure_config
from langchain_core.tools import BaseTool, tool
from langgraph.config import get_stream_writer
from langgraph.func import entrypoint, task
from langgraph.graph import START, StateGraph

from agentgraph.capabilities import subagents
from agentgraph.config import Settings
from agentgraph.persistence import open_store
from agentgraph.runtime.runctx import (
    POOL_SAFE_STREAM_MODES,
    RUN_POOL_THREADS,
    run_config,
    uncapped_node,
)
from agentgraph.session import agent as agent_module
from agentgraph.session.agent import Agent
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.scripts import ai_text, ai_tools

TURN_TIMEOUT_S = 30.0
BARRIER_TIMEOUT_S = 10.0


def _turn_with(tool_: BaseTool, settings: Settings, workspace: Path) -> str:
    """The tool's result in a real turn that calls it once; fails on a hang."""
    model = ScriptedChatModel([ai_tools((tool_.name, {})), ai_text("done")])
    box: dict[str, Any] = {}
    with open_store(settings) as store:
        agent = Agent(settings, store, model=model, sleep=lambda _s: None)
        agent.deps.tools.append(tool_)

        def run() -> None:
            box["result"] = agent.run_turn("t", "go", workspace)
            box["history"] = agent.messages("t")

        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        worker.join(TURN_TIMEOUT_S)
        assert not worker.is_alive(), "the turn hung"
    assert box["result"].answer == "done"
    return str(box["history"][-2].content)


class _Inner(TypedDict, total=False):
    x: int


def _custom_streaming_tool() -> BaseTool:
    def node(state: _Inner) -> _Inner:
        get_stream_writer()({"progress": 1})
        return {"x": 1}

    graph = StateGraph(_Inner)
    graph.add_node("n", node)
    graph.add_edge(START, "n")
    inner = graph.compile()

    @tool
    def stream_inner() -> str:
        """Streams an inner graph's custom events."""
        return str(list(inner.stream({"x": 0}, stream_mode="custom")))

    return stream_inner


def _workflow_tool() -> BaseTool:
    @task
    def double(x: int) -> int:
        return 2 * x

    @entrypoint()
    def flow(x: int) -> int:
        return sum(f.result() for f in [double(x), double(x + 1)])

    @tool
    def run_flow() -> str:
        """Runs a functional-API workflow."""
        return str(flow.invoke(3))

    return run_flow


def _parallel_batch_tool() -> BaseTool:
    barrier = threading.Barrier(2, timeout=BARRIER_TIMEOUT_S)

    @tool
    def batch_both() -> str:
        """Runs two runnables that must be in flight at once."""
        both = RunnableLambda(lambda x: (barrier.wait(), x)[1]).batch([1, 2])
        return f"{both} cap={ensure_config().get('max_concurrency')}"

    return batch_both


@pytest.mark.parametrize(
    ("make_tool", "expected"),
    [
        (_custom_streaming_tool, "[{'progress': 1}]"),
        (_workflow_tool, "14"),
        (_parallel_batch_tool, "[1, 2] cap=None"),
    ],
    ids=["custom-stream", "functional-workflow", "parallel-batch"],
)
def test_what_a_tool_runs_does_not_inherit_the_runs_one_thread_pool(
    make_settings: Callable[..., Settings],
    workspace: Path,
    make_tool: Callable[[], BaseTool],
    expected: str,
) -> None:
    assert _turn_with(make_tool(), make_settings(), workspace) == expected


def test_the_agent_streams_only_in_modes_the_capped_pool_can_serve() -> None:
    """Other modes (custom, messages, subgraphs) park a waiter on the run's pool and
    would then wait for the step's task queued behind it."""
    assert RUN_POOL_THREADS == run_config("t", 1)["max_concurrency"] == 1
    assert set(agent_module.STREAM_MODES) <= POOL_SAFE_STREAM_MODES
    assert subagents.SUBAGENT_STREAM_MODE in POOL_SAFE_STREAM_MODES


def test_no_agentgraph_module_calls_the_functional_api() -> None:
    """A @task called inside a node runs on the run's capped pool: a task calling a task
    there would wait forever. Workflows run as an @entrypoint (a run of its own)."""
    package = Path(agent_module.__file__).parent
    users = [
        str(path.relative_to(package))
        for path in sorted(package.rglob("*.py"))
        if "langgraph.func" in path.read_text(encoding="utf-8")
    ]
    assert users == []


def test_only_sync_nodes_can_be_uncapped() -> None:
    async def node(state: dict[str, Any]) -> dict[str, Any]:
        return state

    with pytest.raises(TypeError, match="sync nodes only"):
        uncapped_node(node)
