"""The DeltaChannel `messages` reducer equals `add_messages`, stored and reloaded."""

from __future__ import annotations

import functools
import sqlite3
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from agentgraph.persistence.delta import messages_channel, messages_delta_reducer
from agentgraph.persistence.saver import AgentSqliteSaver

# A small snapshot interval so the graph tests cross several snapshots.
TEST_SNAPSHOT_FREQUENCY = 3


def _msg(kind: int, mid: str, text: str) -> BaseMessage:
    if kind == 0:
        return HumanMessage(text, id=mid)
    if kind == 1:
        return AIMessage(text, id=mid)
    if kind == 2:
        return SystemMessage(
            text, id=mid, additional_kwargs={"agentgraph": {"kind": "compact_boundary"}}
        )
    return ToolMessage(text, tool_call_id=f"call-{mid}", id=mid)


@st.composite
def update_sequences(draw: st.DrawFn) -> list[list[BaseMessage]]:
    """Valid write sequences: adds, in-place edits, removals, remove + re-add, moved copies."""
    live: list[str] = []
    counter = 0
    writes: list[list[BaseMessage]] = []
    for _ in range(draw(st.integers(1, 12))):
        write: list[BaseMessage] = []
        pending_removed: set[str] = set()
        for _ in range(draw(st.integers(0, 5))):
            op = draw(st.sampled_from(["add", "add", "edit", "remove", "readd", "move"]))
            text = draw(st.text(max_size=5))
            if op == "add" or not live:
                counter += 1
                mid = f"m{counter}"
                write.append(_msg(draw(st.integers(0, 3)), mid, text))
                live.append(mid)
            elif op == "edit":
                mid = draw(st.sampled_from(live))
                write.append(_msg(draw(st.integers(0, 3)), mid, text + "!"))
                pending_removed.discard(mid)
            elif op == "remove":
                mid = draw(st.sampled_from(live))
                write.append(RemoveMessage(id=mid))
                pending_removed.add(mid)
            elif op == "readd":
                mid = draw(st.sampled_from(live))
                write.append(RemoveMessage(id=mid))
                write.append(_msg(0, mid, text + "?"))
            else:  # compaction: remove and re-add a copy with a NEW id
                mid = draw(st.sampled_from(live))
                counter += 1
                write.append(RemoveMessage(id=mid))
                write.append(_msg(1, f"{mid}~{counter}", text))
                pending_removed.add(mid)
                live.append(f"{mid}~{counter}")
        live = [m for m in live if m not in pending_removed]
        writes.append(write)
    return writes


def _fold(writes: list[list[BaseMessage]]) -> list[BaseMessage]:
    return list(functools.reduce(add_messages, writes, []))  # type: ignore[arg-type]


def _same(a: list[BaseMessage], b: list[BaseMessage]) -> bool:
    return [(m.id, m.type, m.content) for m in a] == [(m.id, m.type, m.content) for m in b]


@settings(max_examples=300, deadline=None)
@given(update_sequences(), st.lists(st.integers(1, 4), max_size=12))
def test_reducer_equals_add_messages_for_any_batching(
    writes: list[list[BaseMessage]], cuts: list[int]
) -> None:
    expected = _fold(writes)
    assert _same(messages_delta_reducer([], writes), expected)
    # Batching invariance: r(r(s, xs), ys) == r(s, xs + ys) for arbitrary splits.
    state: list[BaseMessage] = []
    i = 0
    for size in [*cuts, len(writes)]:
        state = messages_delta_reducer(state, writes[i : i + size])
        i += size
        if i >= len(writes):
            break
    assert _same(state, expected)


@settings(max_examples=200, deadline=None)
@given(update_sequences(), update_sequences(), st.integers(1, 6))
def test_two_continuations_of_one_state_do_not_share_changes(
    first: list[list[BaseMessage]], second: list[list[BaseMessage]], split: int
) -> None:
    """Outputs share their index: continuing one state two ways (as LangGraph does
    when a conditional edge reads a copy of the channel) keeps each exact."""
    common = messages_delta_reducer([], first[:split])
    prefix = _fold(first[:split])
    for rest in (first[split:], second):
        expected = list(functools.reduce(add_messages, rest, prefix))  # type: ignore[arg-type]
        try:
            got = messages_delta_reducer(common, rest)
        except ValueError:
            with pytest.raises(ValueError):
                functools.reduce(add_messages, rest, prefix)  # type: ignore[arg-type]
            continue
        assert _same(got, expected)


def test_long_sessions_step_by_step_equal_the_fold() -> None:
    """Many steps on one list (the index's own additions merge into a new base)."""
    writes: list[list[BaseMessage]] = []
    for i in range(1_500):
        step: list[BaseMessage] = [_msg(i % 4, f"m{i}", f"text {i}")]
        if i % 7 == 3:
            step.append(_msg(0, f"m{i - 2}", "edited"))
        if i % 11 == 5:
            step.append(_msg(1, f"m{i // 3}", "edited long after"))
        if i % 700 == 699:
            step.append(RemoveMessage(id=f"m{i - 10}"))
        writes.append(step)
    state: list[BaseMessage] = []
    for write in writes:
        state = messages_delta_reducer(state, [write])
    assert _same(state, _fold(writes))


def test_remove_then_readd_moves_to_the_end_like_separate_writes() -> None:
    a, b = HumanMessage("a", id="a"), AIMessage("b", id="b")
    writes: list[Any] = [[a, b], [RemoveMessage(id="a")], [HumanMessage("a2", id="a")]]
    assert [m.id for m in messages_delta_reducer([], writes)] == ["b", "a"]
    # Within ONE write add_messages keeps the position: so does the reducer.
    one = messages_delta_reducer([a, b], [[RemoveMessage(id="a"), HumanMessage("a3", id="a")]])
    assert [(m.id, m.content) for m in one] == [("a", "a3"), ("b", "b")]


def test_unknown_remove_raises_like_add_messages() -> None:
    with pytest.raises(ValueError, match="doesn't exist"):
        messages_delta_reducer([HumanMessage("a", id="a")], [[RemoveMessage(id="zz")]])
    with pytest.raises(ValueError):
        add_messages([HumanMessage("a", id="a")], [RemoveMessage(id="zz")])


def test_input_is_never_mutated() -> None:
    state = [HumanMessage("a", id="a"), AIMessage("b", id="b")]
    before = list(state)
    messages_delta_reducer(state, [[RemoveMessage(id="a"), AIMessage("c", id="c")]])
    assert state == before


class DeltaState(TypedDict, total=False):
    messages: Annotated[list[BaseMessage], messages_channel(TEST_SNAPSHOT_FREQUENCY)]


class ProductionState(TypedDict, total=False):
    messages: Annotated[list[BaseMessage], messages_channel()]


class DefaultState(TypedDict, total=False):
    messages: Annotated[list[BaseMessage], add_messages]


def _graph(state: type, saver: Any, script: list[list[BaseMessage]]) -> Any:
    def apply(_s: dict[str, Any]) -> dict[str, Any]:
        return {"messages": script.pop(0)}

    g = StateGraph(state)
    g.add_node("apply", apply)
    g.add_edge(START, "apply")
    g.add_edge("apply", END)
    return g.compile(checkpointer=saver)


def _run(state: type, saver: Any, writes: list[list[BaseMessage]]) -> list[BaseMessage]:
    script = [list(w) for w in writes]
    graph = _graph(state, saver, script)
    config = {"configurable": {"thread_id": "t"}}
    for _ in writes:
        graph.invoke({"messages": []}, config)
    return list(graph.get_state(config).values.get("messages") or [])


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(update_sequences())
def test_graph_state_equals_default_channel_and_survives_reload(
    tmp_path_factory: pytest.TempPathFactory, writes: list[list[BaseMessage]]
) -> None:
    folder = tmp_path_factory.mktemp("delta")
    default_conn = sqlite3.connect(folder / "default.db", check_same_thread=False)
    delta_conn = sqlite3.connect(folder / "delta.db", check_same_thread=False)
    try:
        expected = _run(DefaultState, SqliteSaver(default_conn), writes)
        got = _run(DeltaState, AgentSqliteSaver(delta_conn), writes)
        assert _same(got, expected)
    finally:
        default_conn.close()
        delta_conn.close()
    # A fresh connection and saver (another process's view) rebuilds the same state,
    # joining archived history back (LangGraph's own saver cannot read those snapshots).
    conn = sqlite3.connect(folder / "delta.db", check_same_thread=False)
    try:
        graph = _graph(DeltaState, AgentSqliteSaver(conn), [])
        reloaded = graph.get_state({"configurable": {"thread_id": "t"}}).values
        assert _same(list(reloaded.get("messages") or []), expected)
    finally:
        conn.close()


def test_checkpoints_store_deltas_not_the_whole_list(tmp_path: Path) -> None:
    big = "x" * 10_000
    writes = [[HumanMessage(big, id=f"h{i}")] for i in range(12)]
    conn = sqlite3.connect(tmp_path / "d.db", check_same_thread=False)
    _run(ProductionState, AgentSqliteSaver(conn), writes)
    blobs = [n for (n,) in conn.execute("SELECT length(checkpoint) FROM checkpoints")]
    # No checkpoint holds the messages (the first snapshot comes after 200 updates).
    assert max(blobs) < len(big)
    total = sum(blobs) + sum(n for (n,) in conn.execute("SELECT length(value) FROM writes"))
    quadratic = sum(len(big) * i for i in range(1, 13))
    assert len(big) * 12 <= total < quadratic / 4
    conn.close()


def test_saver_memory_is_used_and_gives_the_same_state(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    conn = sqlite3.connect(path, check_same_thread=False)
    saver = AgentSqliteSaver(conn, reducers={"messages": messages_delta_reducer})
    writes = [[HumanMessage(f"h{i}", id=f"h{i}"), AIMessage(f"a{i}", id=f"a{i}")] for i in range(8)]
    got = _run(ProductionState, saver, writes)
    assert saver.memory_hits > 0
    fresh = sqlite3.connect(path, check_same_thread=False)
    graph = _graph(ProductionState, SqliteSaver(fresh), [])
    reloaded = graph.get_state({"configurable": {"thread_id": "t"}}).values["messages"]
    assert _same(got, reloaded) and len(got) == 16
    conn.close()
    fresh.close()
