"""Run data travels in LangGraph's runtime context, never in checkpoints.

Through the real graph on a real SQLite file: what a turn checkpoints, how an old
checkpoint (which still carries the run fields) resumes, the loop cap of a context,
and the per-run ``user_id``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, StateGraph

from agentgraph.config import Settings
from agentgraph.persistence import Store
from agentgraph.runtime.history import validate_history
from agentgraph.runtime.runctx import RunContext
from agentgraph.runtime.state import AppState
from agentgraph.session.agent import Agent
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.scripts import ai_text, ai_tools

RUN_FIELDS = {"workspace_path", "thread_id", "artifacts_dir", "max_loops"}


def _channel_values(store: Store, thread_id: str) -> list[dict[str, Any]]:
    config = {"configurable": {"thread_id": thread_id}}
    return [dict(t.checkpoint["channel_values"]) for t in store.checkpointer.list(config)]


def test_a_turn_checkpoints_no_run_data(
    make_settings: Callable[..., Settings], store: Store, workspace: Path
) -> None:
    settings = make_settings(AGENTGRAPH_USER_ID="alice")
    model = ScriptedChatModel(
        [ai_tools(("write_file", {"path": "a.txt", "content": "x\n"})), ai_text("done")]
    )
    agent = Agent(settings, store, model=model)
    agent.run_turn("t1", "write a.txt", workspace)
    assert (workspace / "a.txt").read_text() == "x\n"  # tools got the workspace
    snapshots = _channel_values(store, "t1")
    assert len(snapshots) >= 4
    for values in snapshots:
        assert RUN_FIELDS.isdisjoint(values), sorted(RUN_FIELDS & set(values))
    state = agent.graph.get_state(agent.config("t1")).values
    assert state["user_id"] == "alice"
    assert str(workspace.resolve()) in str(model.calls[0][0].content)  # the system prompt


def test_an_old_checkpoint_with_run_fields_resumes_in_the_new_workspace(
    settings: Settings, store: Store, tmp_path: Path, workspace: Path
) -> None:
    class OldState(AppState, total=False):  # the state schema before run data moved
        workspace_path: str
        thread_id: str
        artifacts_dir: str | None
        max_loops: int

    old = StateGraph(OldState)
    for name in ("planner", "tools", "finalize"):
        old.add_node(name, lambda state: {})
    old.add_edge(START, "planner")
    old.add_edge("planner", "finalize")
    old.add_edge("finalize", END)
    old_graph = old.compile(checkpointer=store.checkpointer)
    config = {"configurable": {"thread_id": "old"}}
    old_graph.update_state(
        config,
        {
            "messages": [
                HumanMessage("first", id="h1"),
                AIMessage(
                    "let me look", id="a1", tool_calls=[{"name": "now", "args": {}, "id": "c1"}]
                ),
            ],
            "workspace_path": str(tmp_path / "gone"),
            "thread_id": "old",
            "artifacts_dir": str(tmp_path / "gone-artifacts"),
            "max_loops": 1,
            "loops": 1,
        },
        as_node="planner",
    )
    assert set(_channel_values(store, "old")[0]) >= RUN_FIELDS  # really an old checkpoint

    model = ScriptedChatModel(
        [ai_tools(("write_file", {"path": "b.txt", "content": "new\n"})), ai_text("resumed")]
    )
    agent = Agent(settings, store, model=model)
    result = agent.run_turn("old", "continue", workspace)
    assert result.answer == "resumed"
    # The stored max_loops=1 no longer caps the run; the tools used the new workspace.
    assert (workspace / "b.txt").read_text() == "new\n"
    assert not (tmp_path / "gone").exists()
    prompt = model.calls[0]
    assert validate_history(prompt) == []
    assert str(workspace.resolve()) in str(prompt[0].content)
    assert str(tmp_path / "gone") not in str(prompt[0].content)
    assert any(isinstance(m, ToolMessage) and m.tool_call_id == "c1" for m in prompt)


def test_the_context_loop_cap_bounds_the_run(
    settings: Settings, store: Store, workspace: Path
) -> None:
    model = ScriptedChatModel(
        [ai_tools(("now", {})), ai_tools(("now", {})), ai_text("capped answer")],
    )
    agent = Agent(settings, store, model=model)
    context = RunContext(workspace_path=str(workspace), thread_id="cap", max_loops=1)
    out = agent.graph.invoke(
        {"messages": [HumanMessage("go", id="h")], "loops": 0},
        agent.config("cap"),
        context=context,
    )
    assert out["loops"] == 1
    # finalize asked once more; the model still called a tool, so the stop is recorded.
    assert str(out["messages"][-1].content).startswith("Stopped: the step limit (1 model")
    skipped = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert skipped and all("step limit (1)" in str(m.content) for m in skipped)


def test_a_context_cannot_raise_the_loop_cap_above_the_setting(
    make_settings: Callable[..., Settings], store: Store, workspace: Path
) -> None:
    settings = make_settings(MAX_LOOPS="1")
    agent = Agent(settings, store, model=ScriptedChatModel([ai_tools(("now", {})), ai_text("a")]))
    context = RunContext(workspace_path=str(workspace), max_loops=50)
    assert agent.deps.run_context(context, agent.config("x")).max_loops == 1


def test_repl_current_shows_uploads_and_user(home: Path, workspace: Path) -> None:
    from tests.cli_helpers import run_cli, server_env
    from tests.fakes.openai_server import FakeOpenAIServer

    (workspace / "notes.txt").write_text("remember this\n")
    with FakeOpenAIServer([{"content": "noted"}]) as server:
        env = server_env(home, server.url, "sk-test-ctx-0123456789", AGENTGRAPH_USER_ID="tester")
        result = run_cli([], cwd=workspace, env=env, stdin="read @notes.txt\n/current\n/exit\n")
        assert result.returncode == 0, result.stderr
        assert server.violations == []
    assert "files: notes.txt" in result.stderr
    assert "user: tester" in result.stderr
