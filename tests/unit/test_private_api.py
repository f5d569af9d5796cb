"""Contract of the private dependency names agentgraph uses (agentgraph/private_api.py).

An upgrade of langgraph, langgraph-checkpoint-sqlite or bpe-openai that renames,
re-signs or changes one of them fails here, by name, before a session breaks.
The last test keeps the fence closed: no other module imports a private name.
"""

from __future__ import annotations

import ast
import contextvars
import inspect
import sqlite3
import threading
from dataclasses import fields
from pathlib import Path
from typing import Annotated, Any

import langgraph.channels.delta as delta_module
import pytest
from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph, add_messages
from langgraph.prebuilt import ToolNode, ToolRuntime
from langgraph.types import Command
from typing_extensions import TypedDict

from agentgraph import private_api
from agentgraph.config import Settings
from agentgraph.persistence import Store
from agentgraph.persistence.delta import messages_delta_reducer
from agentgraph.persistence.saver import AgentSqliteSaver
from agentgraph.session.agent import Agent
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.scripts import ai_text

PACKAGE_DIR = Path(private_api.__file__).parent


def test_missing_is_the_sentinel_delta_channels_start_empty_from() -> None:
    assert delta_module.MISSING is private_api.MISSING
    channel = DeltaChannel(messages_delta_reducer, list).from_checkpoint(private_api.MISSING)
    assert channel.value == []


def test_delta_snapshot_is_what_snapshots_store_and_the_channel_restores() -> None:
    """The archive swaps the list inside this wrapper for a reference and back."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    snap = private_api.DeltaSnapshot(["a"])
    assert snap.value == ["a"] and tuple(snap) == (["a"],)
    serde = JsonPlusSerializer()
    back = serde.loads_typed(serde.dumps_typed({"channel_values": {"messages": snap}}))
    assert isinstance(back["channel_values"]["messages"], private_api.DeltaSnapshot)
    assert back["channel_values"]["messages"].value == ["a"]
    channel = DeltaChannel(messages_delta_reducer, list).from_checkpoint(snap)
    assert channel.value == ["a"]


def test_stage1_sql_walks_parent_links_with_five_parameters(tmp_path: Path) -> None:
    assert private_api.DELTA_STAGE1_SQL.count("?") == 5
    conn = sqlite3.connect(tmp_path / "c.db", check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    rows = [("t", "", "c1", None), ("t", "", "c2", "c1"), ("t", "", "c3", "c2")]
    conn.executemany(
        "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
        "parent_checkpoint_id, type, checkpoint, metadata) VALUES (?, ?, ?, ?, 'json', x'', x'')",
        rows,
    )
    walked = conn.execute(private_api.DELTA_STAGE1_SQL, ("t", "", "c3", "t", "")).fetchall()
    assert [r[0] for r in walked] == ["c3", "c2", "c1"]
    assert all(len(r) == 3 for r in walked)  # (checkpoint_id, type, checkpoint)


def test_stage2_sql_selects_seven_columns_of_the_writes_table(tmp_path: Path) -> None:
    params = inspect.signature(private_api.build_delta_stage2_sql).parameters
    assert {"chain_lens", "has_task_path"} <= set(params)
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params.values())
    conn = sqlite3.connect(tmp_path / "c.db", check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    assert private_api.sqlite_has_task_path(saver) is True
    sql = private_api.build_delta_stage2_sql(has_task_path=True, chain_lens=[2])
    assert sql.count("?") == 3 + 2
    cursor = conn.execute(sql, ["t", "", "messages", "c1", "c2"])
    assert len(cursor.description) == 7  # the row shape build_..._history unpacks


def test_sqlite_saver_still_records_the_task_path_flag() -> None:
    # sqlite_has_task_path falls back to True: a renamed attribute must fail here.
    assert "_has_task_path" in vars(SqliteSaver) or "_has_task_path" in getattr(
        SqliteSaver, "__annotations__", {}
    )


def test_history_builder_keeps_its_keyword_parameters() -> None:
    params = inspect.signature(private_api.build_delta_channels_writes_history).parameters
    assert list(params) == [
        "channels",
        "chain_by_ch",
        "seed_val_by_ch",
        "seeded",
        "stage2_rows",
        "serde",
    ]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params.values())


def test_the_saver_memory_path_rebuilds_the_same_history(
    settings: Settings, store: Store, workspace: Path
) -> None:
    """Through the real graph: the second turn's read goes through the private SQL."""
    model = ScriptedChatModel([ai_text("one"), ai_text("two")])
    agent = Agent(settings, store, model=model)
    agent.run_turn("t1", "first", workspace)
    agent.run_turn("t1", "second", workspace)
    saver = store.checkpointer
    assert isinstance(saver, AgentSqliteSaver)
    assert saver.memory_hits > 0
    texts = [m.content for m in agent.messages("t1")]
    saver.forget()
    assert [m.content for m in agent.messages("t1")] == texts
    assert texts[-1] == "two"


def test_bpe_tokenizer_counts_encodes_and_decodes_o200k_tokens() -> None:
    tokenizer = private_api.bpe_tokenizer("o200k_base")
    assert tokenizer.count("hello world") == 2
    assert tokenizer.count("") == 0
    assert tokenizer.count_till_limit("hello world", 2) == 2
    assert tokenizer.count_till_limit("hello world", 1) is None
    ids = tokenizer.encode("héllo 日本 🎉")
    assert tokenizer.decode(ids) == "héllo 日本 🎉"
    with pytest.raises(ValueError):
        tokenizer.decode(ids[-1:])  # the emoji's last byte alone


def _private_imports(path: Path) -> list[str]:
    """``module.name`` of every import in ``path`` naming a private foreign name."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] in ("agentgraph", "__future__"):
                continue
            private_module = any(part.startswith("_") for part in node.module.split("."))
            private_names = [a.name for a in node.names if a.name.startswith("_")]
            if private_module or private_names:
                found.append(f"{node.module}:{','.join(a.name for a in node.names)}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] != "agentgraph" and any(p.startswith("_") for p in parts):
                    found.append(alias.name)
    return found


def test_no_other_module_imports_a_private_dependency_name() -> None:
    offenders = {
        str(path.relative_to(PACKAGE_DIR)): hits
        for path in sorted(PACKAGE_DIR.rglob("*.py"))
        if path.name != "private_api.py" and (hits := _private_imports(path))
    }
    assert offenders == {}
    assert _private_imports(PACKAGE_DIR / "private_api.py")  # the scanner does see them


_LEAK: contextvars.ContextVar[str] = contextvars.ContextVar("leak", default="unset")


def _tool_graph(node_class: type[ToolNode], threads: list[str]) -> Any:
    """A one-node graph running ``node_class`` over the last message's calls."""

    @tool
    def echo(text: str, runtime: ToolRuntime[str, Any]) -> str:
        """Echo ``text`` with what the runtime carries."""
        threads.append(threading.current_thread().name)
        # Every runtime field, by type: a field ToolNode fills and the inline path does
        # not (a new one after an upgrade) shows here.
        kinds = {f.name: type(getattr(runtime, f.name)).__name__ for f in fields(runtime)}
        threads.append(str(sorted(kinds.items())))
        _LEAK.set("set by the tool")
        return f"{text} {runtime.tool_call_id} {runtime.context} {len(runtime.state['messages'])}"

    @tool
    def fail(text: str) -> str:
        """Always fails."""
        raise ValueError(f"bad {text}")

    @tool
    def jump(text: str, runtime: ToolRuntime[str, Any]) -> Command[Any]:
        """Answers with a state update."""
        message = ToolMessage(f"jumped {text}", tool_call_id=runtime.tool_call_id)
        return Command(update={"messages": [message], "note": text})

    class State(TypedDict, total=False):
        messages: Annotated[list[AnyMessage], add_messages]
        note: str

    def wrap(request: Any, execute: Any) -> Any:
        result = execute(request)
        if isinstance(result, ToolMessage):
            return result.model_copy(update={"content": f"wrapped {result.content}"})
        return result

    graph = StateGraph(State, context_schema=str)
    tools = node_class([echo, fail, jump], handle_tool_errors=True, wrap_tool_call=wrap)
    graph.add_node("tools", tools)
    graph.add_edge(START, "tools")
    return graph.compile()


@pytest.mark.parametrize(
    "calls",
    [
        [("echo", {"text": "hi"})],
        [("fail", {"text": "x"})],
        [("echo", {"wrong": 1})],
        [("jump", {"text": "there"})],
        [("nope", {})],
        [("echo", {"text": "a"}), ("fail", {"text": "b"}), ("jump", {"text": "c"})],
    ],
    ids=["one", "error", "invalid-args", "command", "unknown-tool", "several"],
)
def test_the_inline_tool_node_answers_as_langgraphs_tool_node(
    calls: list[tuple[str, dict[str, Any]]],
) -> None:
    """Same messages, updates and runtimes; a step's only call runs in the calling
    thread, and its context changes stay inside it as the pool's do."""
    ai = AIMessage(
        "",
        id="ai",
        tool_calls=[
            {"name": name, "args": args, "id": f"c{i}", "type": "tool_call"}
            for i, (name, args) in enumerate(calls)
        ],
    )

    def run(node_class: type[ToolNode]) -> tuple[Any, list[str]]:
        threads: list[str] = []
        out = _tool_graph(node_class, threads).invoke({"messages": [ai]}, context="ctx")
        answers = sorted((m.tool_call_id, m.status, m.content) for m in out["messages"][1:])
        return (answers, out.get("note")), threads

    inline, inline_seen = run(private_api.InlineToolNode)
    pooled, pooled_seen = run(ToolNode)
    assert inline == pooled
    # What the tool saw: its thread's name, then its runtime's fields and their types.
    inline_threads, pooled_threads = inline_seen[::2], pooled_seen[::2]
    assert inline_seen[1::2] == pooled_seen[1::2]
    assert _LEAK.get() == "unset"
    here = threading.current_thread().name
    assert here not in pooled_threads
    if len(calls) == 1:
        assert inline_threads == [here] * len(pooled_threads)
    else:
        assert here not in inline_threads  # several calls still run in parallel
