"""agentgraph's SQLite savers keep LangGraph's checkpointer contract, sync and async.

What LangGraph users rely on beyond the stock savers' own suites (tests/langgraph_suites):
deleting a thread is all or nothing, pruning keeps what a fork replays, a delta channel
is rebuilt with its own reducer, and the async saver behaves as the sync one.
"""

from __future__ import annotations

import asyncio
import itertools
import operator
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph

from agentgraph.persistence.archive import ARCHIVE_TABLE
from agentgraph.persistence.delta import messages_channel
from agentgraph.persistence.prune import prune_thread
from agentgraph.persistence.saver import AgentSqliteSaver, AsyncAgentSqliteSaver
from tests.unit.test_archive import _compact, _fold, _history, _small
from tests.unit.test_delta_channel import (
    TEST_SNAPSHOT_FREQUENCY,
    DeltaState,
    ProductionState,
    _graph,
    _same,
)

CONFIG: Any = {"configurable": {"thread_id": "t"}}


def _connect(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, check_same_thread=False)


def _count(conn: sqlite3.Connection, table: str) -> int:
    return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def _archived_session(saver: Any) -> list[BaseMessage]:
    """A thread whose snapshots archive history (compactions at steps 6 and 11)."""
    writes = [*_history(6), _compact(6, ["h5"]), *_small(4, 0), _compact(11, ["s3"]), *_small(3, 4)]
    graph = _graph(DeltaState, saver, [list(w) for w in writes])
    for _ in writes:
        graph.invoke({"messages": []}, CONFIG)
    return _fold(writes)


# -- delete_thread is one transaction -------------------------------------------------


def test_delete_thread_that_fails_midway_deletes_nothing(tmp_path: Path) -> None:
    conn = _connect(tmp_path / "d.db")
    saver = AgentSqliteSaver(conn)
    _archived_session(saver)
    before = {t: _count(conn, t) for t in ("checkpoints", "writes", ARCHIVE_TABLE)}
    assert all(before.values())
    # A later step of the delete fails (a trigger stands for a full disk or a lock).
    conn.execute(
        "CREATE TRIGGER refuse BEFORE DELETE ON writes BEGIN SELECT RAISE(ABORT, 'refused'); END"
    )
    conn.commit()
    with pytest.raises(sqlite3.DatabaseError, match="refused"):
        saver.delete_thread("t")
    other = _connect(tmp_path / "d.db")
    assert {t: _count(other, t) for t in before} == before
    conn.execute("DROP TRIGGER refuse")
    conn.commit()
    saver.delete_thread("t")
    assert {t: _count(other, t) for t in before} == dict.fromkeys(before, 0)


# -- a delta channel is rebuilt with its own reducer ----------------------------------


def _append_all(state: Sequence[Any], writes: Sequence[Any]) -> list[Any]:
    """A batch reducer other than add_messages: a log, where a repeated id is a new entry."""
    return [*state, *(m for w in writes for m in (w if isinstance(w, list) else [w]))]


class LogState(TypedDict, total=False):
    messages: Annotated[list[BaseMessage], DeltaChannel(_append_all, list, snapshot_frequency=50)]


def _log_writes(turns: int) -> list[list[BaseMessage]]:
    """Each turn logs a message and a status line that reuses one id."""
    return [
        [HumanMessage(f"h{i}", id=f"h{i}"), AIMessage(f"at {i}", id="status")] for i in range(turns)
    ]


def _log_run(saver: Any, turns: int) -> list[BaseMessage]:
    writes = _log_writes(turns)
    graph = _graph(LogState, saver, writes)
    for _ in range(turns):
        graph.invoke({"messages": []}, CONFIG)
    return list(graph.get_state(CONFIG).values["messages"])


def test_delta_channel_named_messages_keeps_its_own_reducer(tmp_path: Path) -> None:
    stock = _log_run(SqliteSaver(_connect(tmp_path / "stock.db")), 7)
    assert len(stock) == 2 * 7
    ours = _log_run(AgentSqliteSaver(_connect(tmp_path / "ours.db")), 7)
    assert _same(ours, stock)
    # Reloaded by a fresh saver too.
    fresh = _graph(LogState, AgentSqliteSaver(_connect(tmp_path / "ours.db")), [])
    assert _same(list(fresh.get_state(CONFIG).values["messages"]), stock)


# -- pruning keeps what replaying a kept checkpoint needs ------------------------------

SUB_STEPS = 3
TURNS = 7


class SubState(TypedDict, total=False):
    seen: Annotated[int, operator.add]
    messages: Annotated[list[BaseMessage], messages_channel(TEST_SNAPSHOT_FREQUENCY)]


class ParentState(TypedDict, total=False):
    last: int
    messages: Annotated[list[BaseMessage], messages_channel(TEST_SNAPSHOT_FREQUENCY)]


def _persistent_subgraph_graph(saver: Any) -> Any:
    sub = StateGraph(SubState)
    names = [f"s{i}" for i in range(SUB_STEPS)]
    for name in names:
        sub.add_node(
            name,
            lambda s, name=name: {
                "seen": 1,
                "messages": [AIMessage(name, id=f"{name}-{s['seen']}")],
            },
        )
    sub.add_edge(START, names[0])
    for a, b in itertools.pairwise(names):
        sub.add_edge(a, b)
    sub.add_edge(names[-1], END)
    # checkpointer=True: the subgraph keeps its own state from one call to the next.
    child = sub.compile(checkpointer=True)

    def wrap(_s: ParentState) -> ParentState:
        seen = child.invoke({"seen": 0})["seen"]
        return {"last": seen, "messages": [AIMessage(f"turn {seen}", id=f"turn-{seen}")]}

    parent = StateGraph(ParentState)
    parent.add_node("wrap", wrap)
    parent.add_edge(START, "wrap")
    parent.add_edge("wrap", END)
    return parent.compile(checkpointer=saver)


def _fork_point(graph: Any) -> Any:
    """The latest turn's checkpoint from before its subgraph call ran."""
    for state in graph.get_state_history(CONFIG):
        if state.next == ("wrap",):
            return state.config
    raise AssertionError("no checkpoint before a call")


def test_fork_after_prune_replays_a_persistent_subgraph_from_its_state(tmp_path: Path) -> None:
    conn = _connect(tmp_path / "p.db")
    saver = AgentSqliteSaver(conn)
    graph = _persistent_subgraph_graph(saver)
    for _ in range(TURNS):
        graph.invoke({}, CONFIG)
    assert graph.get_state(CONFIG).values["last"] == SUB_STEPS * TURNS
    deleted, _writes, _kept = prune_thread(conn, saver.serde, "t", keep_latest=3, lock=saver.lock)
    assert deleted > 0
    fork = _fork_point(graph)
    # The fork re-runs the last turn: the subgraph starts from its state before it.
    assert graph.invoke(None, fork)["last"] == SUB_STEPS * TURNS


# -- the async saver ------------------------------------------------------------------


async def _async_archived_session(path: Path) -> tuple[list[BaseMessage], list[BaseMessage]]:
    async with AsyncAgentSqliteSaver.from_conn_string(str(path)) as saver:
        writes = [
            *_history(6),
            _compact(6, ["h5"]),
            *_small(4, 0),
            _compact(11, ["s3"]),
            *_small(3, 4),
        ]
        graph = _graph(DeltaState, saver, [list(w) for w in writes])
        for _ in writes:
            await graph.ainvoke({"messages": []}, CONFIG)
        state = await graph.aget_state(CONFIG)
        return _fold(writes), list(state.values["messages"])


def test_async_saver_archives_like_the_sync_one(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    expected, got = asyncio.run(_async_archived_session(path))
    assert _same(got, expected)
    conn = _connect(path)
    assert _count(conn, ARCHIVE_TABLE) > 0
    # The sync saver reads what the async one wrote, and the other way round.
    sync_graph = _graph(DeltaState, AgentSqliteSaver(conn), [])
    assert _same(list(sync_graph.get_state(CONFIG).values["messages"]), expected)


def test_async_saver_delete_thread_that_fails_midway_deletes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    asyncio.run(_async_archived_session(path))
    conn = _connect(path)
    before = {t: _count(conn, t) for t in ("checkpoints", "writes", ARCHIVE_TABLE)}
    conn.execute(
        "CREATE TRIGGER refuse BEFORE DELETE ON writes BEGIN SELECT RAISE(ABORT, 'refused'); END"
    )
    conn.commit()

    async def delete() -> None:
        async with AsyncAgentSqliteSaver.from_conn_string(str(path)) as saver:
            await saver.adelete_thread("t")

    with pytest.raises(sqlite3.DatabaseError, match="refused"):
        asyncio.run(delete())
    assert {t: _count(conn, t) for t in before} == before
    conn.execute("DROP TRIGGER refuse")
    conn.commit()
    asyncio.run(delete())
    assert {t: _count(conn, t) for t in before} == dict.fromkeys(before, 0)


def test_async_saver_delta_channel_keeps_its_own_reducer(tmp_path: Path) -> None:
    stock = _log_run(SqliteSaver(_connect(tmp_path / "stock.db")), 7)

    async def run() -> list[BaseMessage]:
        async with AsyncAgentSqliteSaver.from_conn_string(str(tmp_path / "a.db")) as saver:
            writes = _log_writes(7)
            graph = _graph(LogState, saver, writes)
            for _ in range(7):
                await graph.ainvoke({"messages": []}, CONFIG)
            return list((await graph.aget_state(CONFIG)).values["messages"])

    assert _same(asyncio.run(run()), stock)


def test_async_saver_remembers_values_for_its_reducers(tmp_path: Path) -> None:
    """With agentgraph's reducer named, loads start from the remembered value."""
    from agentgraph.persistence.delta import messages_delta_reducer

    writes = [[HumanMessage(f"h{i}", id=f"h{i}"), AIMessage(f"a{i}", id=f"a{i}")] for i in range(8)]

    async def run() -> tuple[int, list[BaseMessage]]:
        import aiosqlite

        async with aiosqlite.connect(tmp_path / "m.db") as conn:
            saver = AsyncAgentSqliteSaver(conn, reducers={"messages": messages_delta_reducer})
            graph = _graph(ProductionState, saver, [list(w) for w in writes])
            for _ in writes:
                await graph.ainvoke({"messages": []}, CONFIG)
            state = await graph.aget_state(CONFIG)
            return saver.memory_hits, list(state.values["messages"])

    hits, got = asyncio.run(run())
    assert hits > 0
    assert _same(got, _fold(writes))
