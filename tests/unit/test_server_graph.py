"""The LangGraph-server graph: ``START → turn_start → planner``, starting turns as the CLI does.

Driven in process on the server's own kind of checkpointer (an ``InMemorySaver`` given
the way the server gives one) with a scripted model that answers every request alike.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from agentgraph.config import Settings
from agentgraph.runtime.call_records import record_start
from agentgraph.runtime.graph import build_graph
from agentgraph.runtime.history import validate_history
from agentgraph.session.server_support import build_server_agent, server_graph
from tests.fakes.chat_model import ScriptedChatModel

THREAD = "srv-crash"


def _served(settings: Settings, workspace: Path) -> tuple[Any, Any, ScriptedChatModel]:
    model = ScriptedChatModel(["Noted."])  # every request gets the same answer
    agent = build_server_agent(settings, workspace=workspace, model=model)
    graph = server_graph(agent).copy(update={"checkpointer": InMemorySaver()})
    return agent, graph, model


def _edges(graph: Any) -> set[tuple[str, str]]:
    return {(e.source, e.target) for e in graph.get_graph().edges}


def test_the_server_graph_enters_through_turn_start(settings: Settings, workspace: Path) -> None:
    _agent, graph, _model = _served(settings, workspace)
    edges = _edges(graph)
    assert ("__start__", "turn_start") in edges and ("turn_start", "planner") in edges
    assert not {e for e in edges if e[0] == "__start__" and e[1] != "turn_start"}
    assert graph.name == "agentgraph"


def test_build_graph_takes_the_entry_hook(settings: Settings, workspace: Path) -> None:
    agent, _graph, _model = _served(settings, workspace)
    plain = _edges(build_graph(agent.deps))
    assert ("__start__", "planner") in plain and "turn_start" not in {s for s, _ in plain}
    hooked = build_graph(agent.deps, turn_start=lambda state: {"loops": 0}, name="x")
    assert ("__start__", "turn_start") in _edges(hooked) and hooked.name == "x"


def test_a_server_turn_answers_calls_a_dead_server_left_running(
    settings: Settings, workspace: Path
) -> None:
    agent, graph, model = _served(settings, workspace)
    config = {"configurable": {"thread_id": THREAD}}
    call = {"name": "run_bash", "args": {"command": "make"}, "id": "c1", "type": "tool_call"}
    # The server died while run_bash ran: the call is stored, its start record is on
    # disk, its result is not.
    crashed = [HumanMessage("build it", id="u1"), AIMessage("", tool_calls=[call], id="a1")]
    graph.update_state(config, {"messages": crashed}, as_node="finalize")
    record_start(agent.deps.artifacts_dir(THREAD), "c1", "run_bash")
    out = graph.invoke({"messages": [{"role": "user", "content": "did it build?"}]}, config)
    history = out["messages"]
    assert validate_history(history) == []
    assert [m.type for m in history] == ["human", "ai", "tool", "human", "ai"]
    assert history[2].tool_call_id == "c1" and "may have completed" in str(history[2].content)
    assert history[3].content == "did it build?"
    assert validate_history(model.calls[0][1:]) == []  # what the model was sent, too
    # The index row the CLI's turn start writes, in the server's own index.
    row = agent.store.index.get(THREAD)
    assert row is not None and row.workspace == str(workspace.resolve())
    assert row.title == "did it build?" and row.message_count == 4


def test_a_server_turn_without_a_crash_keeps_the_clients_message(
    settings: Settings, workspace: Path
) -> None:
    agent, graph, _model = _served(settings, workspace)
    config = {"configurable": {"thread_id": "srv-plain"}}
    message = {"role": "user", "content": "hello", "id": "client-1"}
    out = graph.invoke({"messages": [message]}, config)
    assert out["messages"][0].id == "client-1"
    assert [m.content for m in out["messages"]] == ["hello", "Noted."]
    row = agent.store.index.get("srv-plain")
    assert row is not None and row.message_count == 1


def test_a_server_turn_applies_the_clients_mentions(settings: Settings, workspace: Path) -> None:
    _agent, graph, model = _served(settings, workspace)
    (workspace / "notes.txt").write_text("the launch code is 4242\n", encoding="utf-8")
    config = {"configurable": {"thread_id": "srv-mention"}}
    message = {"role": "user", "content": "what does @notes.txt say?", "id": "client-2"}
    out = graph.invoke({"messages": [message]}, config)
    history = out["messages"]
    assert validate_history(history) == []
    assert [m.type for m in history] == ["human", "ai"]
    assert "the launch code is 4242" in history[0].text  # attached, as the CLI attaches
    assert "what does @notes.txt say?" in history[0].text
    assert out.get("uploaded_files") == ["notes.txt"]
    assert "the launch code is 4242" in str(model.calls[0][-1].content)
