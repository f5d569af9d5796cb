"""The LangGraph-server declaration: ``langgraph.json`` → ``frontends/server.py:make_graph``.

The graph is loaded the way the server loads it (parse the JSON, import the file by
path, call the factory with a config), given a checkpointer the way the server gives
one, and driven over HTTP against the strict fake endpoint. With PostgreSQL available it
also runs on a ``PostgresSaver``: what a multi-worker deployment uses.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

from agentgraph.runtime.history import validate_history
from tests.fakes.openai_server import FakeOpenAIServer

REPO_ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-test-server-0123456789abcdef"


def _load_factory() -> Callable[..., Any]:
    """Resolve the ``agent`` graph of langgraph.json like the LangGraph CLI does."""
    spec_text = json.loads((REPO_ROOT / "langgraph.json").read_text())["graphs"]["agent"]
    file_part, _, attr = spec_text.rpartition(":")
    path = (REPO_ROOT / file_part).resolve()
    assert path.is_file(), path
    spec = importlib.util.spec_from_file_location("langgraph_json_agent", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    factory = getattr(module, attr)
    module.reset_graph_cache()
    return factory  # type: ignore[no-any-return]


@pytest.fixture
def served(
    tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Callable[..., Any], FakeOpenAIServer]]:
    """The factory, with the server's environment pointing at a strict fake endpoint."""
    with FakeOpenAIServer(require_key=KEY, on_exhausted="raise") as server:
        monkeypatch.chdir(tmp_path)  # no developer .env
        for name, value in {
            "OPENAI_BASE_URL": server.url,
            "OPENAI_API_KEY": KEY,
            "AGENTGRAPH_MODEL": "gpt-4o-mini",
            "AGENTGRAPH_HOME": str(tmp_path / "home"),
            "AGENTGRAPH_SERVER_WORKSPACE": str(workspace),
            "AGENTGRAPH_PROVIDER_MAX_RETRIES": "0",
            "MAX_LOOPS": "2",
        }.items():
            monkeypatch.setenv(name, value)
        factory = _load_factory()
        yield factory, server
        sys.modules.pop("langgraph_json_agent", None)
    assert server.violations == []


def _two_turns(factory: Callable[..., Any], server: FakeOpenAIServer, saver: Any) -> None:
    graph = factory({"configurable": {"thread_id": "srv-1"}})
    assert graph.checkpointer is None  # the server brings its own
    assert factory({}) is graph  # built once per process
    graph = graph.copy(update={"checkpointer": saver})
    config = {"configurable": {"thread_id": "srv-1"}}
    # Two turns, each using one tool: with MAX_LOOPS=2 the second turn would be cut
    # short if the loop counter were not reset at the start of every turn.
    server.add_replies(
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]},
        {"content": "It says alpha."},
        {"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]},
        {"content": "There is a.txt."},
    )
    # A client's run context cannot move the agent out of the server's workspace.
    hostile = {"workspace_path": "/", "artifacts_dir": "/tmp", "max_loops": 400}
    out = graph.invoke(
        {"messages": [{"role": "user", "content": "read a.txt"}]}, config, context=hostile
    )
    assert out["messages"][-1].content == "It says alpha."
    assert out["loops"] == 2 and out["user_id"]
    # Run data is not state: nothing of it was checkpointed.
    assert {"workspace_path", "thread_id", "artifacts_dir", "max_loops"}.isdisjoint(out)
    system = server.requests[0]["messages"][0]["content"]
    assert str(Path.cwd() / "ws") in system
    out = graph.invoke({"messages": [{"role": "user", "content": "list files"}]}, config)
    assert out["messages"][-1].content == "There is a.txt."
    history = out["messages"]
    assert validate_history(history) == []
    assert [type(m) for m in history] == [
        HumanMessage,
        AIMessage,
        ToolMessage,
        AIMessage,
        HumanMessage,
        AIMessage,
        ToolMessage,
        AIMessage,
    ]
    assert "alpha" in str(history[2].content)
    sent = json.dumps(server.requests[-1]["messages"])
    assert "read a.txt" in sent and "It says alpha." in sent  # resumed from the saver
    assert KEY not in json.dumps(out, default=str)


def test_langgraph_json_declares_the_agent_factory() -> None:
    config = json.loads((REPO_ROOT / "langgraph.json").read_text())
    assert config["graphs"] == {"agent": "./agentgraph/frontends/server.py:make_graph"}
    assert "." in config["dependencies"]


def test_served_graph_runs_turns_on_a_server_checkpointer(
    served: tuple[Callable[..., Any], FakeOpenAIServer], tmp_path: Path
) -> None:
    factory, server = served
    (tmp_path / "ws" / "a.txt").write_text("alpha\n")
    _two_turns(factory, server, InMemorySaver())


@pytest.mark.postgres
def test_served_graph_on_postgres_saver(
    served: tuple[Callable[..., Any], FakeOpenAIServer], tmp_path: Path, postgres_url: str
) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    factory, server = served
    (tmp_path / "ws" / "a.txt").write_text("alpha\n")
    with PostgresSaver.from_conn_string(postgres_url) as saver:
        saver.setup()
        assert isinstance(saver, BaseCheckpointSaver)
        _two_turns(factory, server, saver)


def test_served_graph_surfaces_approvals_as_interrupts(
    served: tuple[Callable[..., Any], FakeOpenAIServer],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A ``langgraph dev`` client sees an ordinary interrupt and resumes by its id."""
    from langgraph.types import Command

    factory, server = served
    monkeypatch.setenv("AGENTGRAPH_BASH", "ask")
    sys.modules["langgraph_json_agent"].reset_graph_cache()
    graph = factory({}).copy(update={"checkpointer": InMemorySaver()})
    config = {"configurable": {"thread_id": "srv-ask"}}
    server.add_replies(
        {"tool_calls": [{"name": "run_bash", "arguments": {"command": "echo ok > ok.txt"}}]},
        {"content": "ran it"},
    )
    out = graph.invoke({"messages": [{"role": "user", "content": "run it"}]}, config)
    (question,) = out["__interrupt__"]
    assert question.value["type"] == "approval" and question.value["tool"] == "run_bash"
    assert question.value["command"] == "echo ok > ok.txt"
    assert not (tmp_path / "ws" / "ok.txt").exists()
    out = graph.invoke(Command(resume={question.id: True}), config)
    assert out["messages"][-1].content == "ran it"
    assert (tmp_path / "ws" / "ok.txt").read_text() == "ok\n"


def _touch_per_request(body: dict[str, Any]) -> dict[str, Any]:
    """``touch <last word>.txt`` for a request, then the result echoed back."""
    last = body["messages"][-1]
    if last.get("role") == "tool":
        return {"content": "SAW: " + str(last.get("content"))}
    word = str(last.get("content")).split()[-1]
    return {"tool_calls": [{"name": "run_bash", "arguments": {"command": f"touch {word}.txt"}}]}


def test_a_server_client_declines_with_a_reason_and_allows_always(
    served: tuple[Callable[..., Any], FakeOpenAIServer],
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Resume values {"approved": false, "reason"} and {"approved": true, "always": true}:
    the reason reaches the model, the rule holds for the next thread of the workspace."""
    from langgraph.types import Command

    factory, server = served
    monkeypatch.setenv("AGENTGRAPH_PERMISSION_MODE", "ask")
    sys.modules["langgraph_json_agent"].reset_graph_cache()
    graph = factory({}).copy(update={"checkpointer": InMemorySaver()})
    server.add_replies(*[_touch_per_request] * 6)
    first = {"configurable": {"thread_id": "srv-no"}}
    out = graph.invoke({"messages": [{"role": "user", "content": "touch no"}]}, first)
    (question,) = out["__interrupt__"]
    assert question.value["setting"] == "AGENTGRAPH_PERMISSION_MODE"
    answer = {"approved": False, "reason": "not that file"}
    out = graph.invoke(Command(resume={question.id: answer}), first)
    assert "The user said: not that file" in out["messages"][-1].content
    assert not (workspace / "no.txt").exists()

    second = {"configurable": {"thread_id": "srv-always"}}
    out = graph.invoke({"messages": [{"role": "user", "content": "touch yes"}]}, second)
    (question,) = out["__interrupt__"]
    assert question.value["rule"] == {"tool": "run_bash", "pattern": "touch"}
    out = graph.invoke(Command(resume={question.id: {"approved": True, "always": True}}), second)
    assert (workspace / "yes.txt").exists()

    third = {"configurable": {"thread_id": "srv-ruled"}}
    out = graph.invoke({"messages": [{"role": "user", "content": "touch again"}]}, third)
    assert "__interrupt__" not in out  # the rule answered for the user
    assert (workspace / "again.txt").exists()
