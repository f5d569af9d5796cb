"""Sessions with compactions: the state rebuilt from the store is the state built in memory.

Random sessions (turns of messages of random sizes, compactions that add a boundary
and move the kept tail after it) are written through a graph whose ``messages`` is a
``DeltaChannel``; pruning runs at random points. Before and after every prune, the
latest state read back by a fresh saver (another process's view) equals
``add_messages`` folded over the writes, and so does the exported transcript; the
session then continues from the pruned store. Same on PostgreSQL, whose prune must
also leave nothing the kept checkpoints do not need: one ``messages`` snapshot, no
blob, write or archive segment that no kept checkpoint names.

Snapshots after a compaction store the history before the boundary as archived
segments (``persistence/archive.py``): the fresh savers join them back, pruning keeps
every segment a kept snapshot names, and deleting the session deletes them all.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.graph.message import add_messages

from agentgraph.config import Settings
from agentgraph.persistence import open_store
from agentgraph.persistence.archive import ARCHIVE_TABLE, referenced_digests
from agentgraph.persistence.index import SessionInfo
from agentgraph.persistence.pg_saver import AgentPostgresSaver
from agentgraph.persistence.prune import prune_thread
from agentgraph.persistence.saver import AgentSqliteSaver
from agentgraph.persistence.store import connect_sqlite
from agentgraph.session.transcript import export_jsonl
from tests.unit.test_delta_channel import DeltaState, _graph, _same

Op = tuple[str, Any]
FIXTURE_CHECK = HealthCheck.function_scoped_fixture


@st.composite
def sessions(draw: st.DrawFn) -> list[Op]:
    """Writes (one list per step) and prunes (``keep_latest``), in order."""
    ops: list[Op] = []
    live: list[str] = []
    n = 0
    for _ in range(draw(st.integers(4, 30))):
        kind = draw(st.sampled_from(["turn", "turn", "turn", "compact", "prune"]))
        if kind == "prune":
            ops.append(("prune", draw(st.integers(1, 5))))
            continue
        if kind == "compact" and len(live) >= 2:
            n += 1
            keep = live[-draw(st.integers(1, min(3, len(live)))) :]
            boundary = AIMessage(
                f"[compaction boundary {n}]",
                id=f"boundary-{n}",
                additional_kwargs={"agentgraph": {"kind": "compact_boundary"}},
            )
            moved = [HumanMessage(f"moved {k}", id=f"{k}~{n}") for k in keep]
            ops.append(("write", [*(RemoveMessage(id=k) for k in keep), boundary, *moved]))
            live = (
                [m for m in live if m not in keep] + [f"boundary-{n}"] + [m.id or "" for m in moved]
            )
            continue
        write: list[BaseMessage] = []
        for _ in range(draw(st.integers(1, 4))):
            n += 1
            size = draw(st.sampled_from([0, 10, 200, 5_000]))
            text = draw(st.text(min_size=0, max_size=8)) + "x" * size
            mid = f"m{n}"
            write.append(
                ToolMessage(text, tool_call_id=f"c{n}", id=mid)
                if draw(st.booleans())
                else HumanMessage(text, id=mid)
            )
            live.append(mid)
        ops.append(("write", write))
    return ops


def _fold(writes: list[list[BaseMessage]]) -> list[BaseMessage]:
    return list(functools.reduce(add_messages, writes, []))  # type: ignore[arg-type]


def _export(messages: list[BaseMessage]) -> str:
    return export_jsonl(messages, SessionInfo(thread_id="t", created_at=0.0, updated_at=0.0))


def _latest(saver: Any, thread_id: str) -> list[BaseMessage]:
    graph = _graph(DeltaState, saver, [])
    values = graph.get_state({"configurable": {"thread_id": thread_id}}).values
    return list(values.get("messages") or [])


def _check(expected: list[BaseMessage], got: list[BaseMessage]) -> None:
    assert _same(got, expected)
    assert _export(got) == _export(expected)


def _replay(
    ops: list[Op],
    saver: Any,
    thread_id: str,
    on_prune: Callable[[int, list[list[BaseMessage]]], None],
) -> None:
    config = {"configurable": {"thread_id": thread_id}}
    done: list[list[BaseMessage]] = []
    for kind, value in ops:
        if kind == "prune":
            on_prune(value, done)
            _check(_fold(done), _latest(saver, thread_id))
            continue
        _graph(DeltaState, saver, [list(value)]).invoke({"messages": []}, config)
        done.append(value)
    _check(_fold(done), _latest(saver, thread_id))


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(sessions())
def test_sqlite_state_and_export_survive_pruning(
    make_settings: Callable[..., Settings], ops: list[Op]
) -> None:
    settings_ = make_settings()
    thread = uuid.uuid4().hex
    with open_store(settings_) as store:
        saver = store.checkpointer
        assert isinstance(saver, AgentSqliteSaver)

        def prune(keep: int, writes: list[list[BaseMessage]]) -> None:
            prune_thread(saver.conn, saver.serde, thread, keep_latest=keep, lock=saver.lock)
            # Another process (no remembered value or segment) sees the same.
            conn = connect_sqlite(settings_.db_path)
            try:
                _check(_fold(writes), _latest(AgentSqliteSaver(conn), thread))
            finally:
                conn.close()

        _replay(ops, saver, thread, prune)
        store.delete_thread(thread)
        count = f"SELECT count(*) FROM {ARCHIVE_TABLE} WHERE thread_id = ?"
        assert saver.conn.execute(count, (thread,)).fetchone()[0] == 0


def _pg_rows(saver: AgentPostgresSaver, sql: str, thread: str) -> list[dict[str, Any]]:
    with saver.conn.connection() as conn:  # type: ignore[union-attr]
        return list(conn.execute(sql, (thread,)).fetchall())


def _pg_only_needed_left(saver: AgentPostgresSaver, thread: str, keep: int) -> None:
    """After a prune: one transcript snapshot and nothing no kept checkpoint names."""
    kept = _pg_rows(saver, "SELECT checkpoint_id FROM checkpoints WHERE thread_id = %s", thread)
    named = {
        (r["channel"], r["version"])
        for r in _pg_rows(
            saver,
            "SELECT v.key AS channel, v.value AS version FROM checkpoints c, "
            "jsonb_each_text(c.checkpoint -> 'channel_versions') v WHERE c.thread_id = %s",
            thread,
        )
    }
    blobs = _pg_rows(
        saver,
        "SELECT channel, version, type, blob FROM checkpoint_blobs WHERE thread_id = %s",
        thread,
    )
    assert {(b["channel"], b["version"]) for b in blobs} <= named
    snapshots = [b for b in blobs if b["channel"] == "messages"]
    # The latest ``keep`` checkpoints stay whole, even across a snapshot.
    assert len(snapshots) <= 1 or len(kept) <= keep
    orphans = _pg_rows(
        saver,
        "SELECT w.checkpoint_id FROM checkpoint_writes w WHERE w.thread_id = %s AND NOT EXISTS "
        "(SELECT 1 FROM checkpoints c WHERE c.thread_id = w.thread_id "
        "AND c.checkpoint_ns = w.checkpoint_ns AND c.checkpoint_id = w.checkpoint_id)",
        thread,
    )
    assert orphans == []
    referenced = {
        digest
        for b in snapshots
        for digest in referenced_digests(saver._raw_serde.loads_typed((b["type"], b["blob"])))
    }
    stored = _pg_rows(saver, f"SELECT segment FROM {ARCHIVE_TABLE} WHERE thread_id = %s", thread)
    assert {r["segment"] for r in stored} == referenced


@pytest.mark.postgres
@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(sessions())
def test_postgres_state_and_export_survive_pruning(
    postgres_url: str, make_settings: Callable[..., Settings], ops: list[Op]
) -> None:
    with open_store(make_settings(AGENTGRAPH_DATABASE_URL=postgres_url)) as store:
        saver = store.checkpointer
        assert isinstance(saver, AgentPostgresSaver)
        thread = uuid.uuid4().hex

        def prune(keep: int, writes: list[list[BaseMessage]]) -> None:
            # Another process (no remembered segment) sees the same before and after.
            _check(_fold(writes), _latest(AgentPostgresSaver(saver.conn), thread))
            assert saver.prune_thread(thread, keep_latest=keep) is not None
            _pg_only_needed_left(saver, thread, keep)
            _check(_fold(writes), _latest(AgentPostgresSaver(saver.conn), thread))

        _replay(ops, saver, thread, prune)
        prune(1, [list(v) for k, v in ops if k == "write"])
        store.delete_thread(thread)
        with saver.conn.connection() as conn:
            left = conn.execute(
                f"SELECT count(*) AS n FROM {ARCHIVE_TABLE} WHERE thread_id = %s", (thread,)
            ).fetchone()
        assert left is not None and left["n"] == 0
