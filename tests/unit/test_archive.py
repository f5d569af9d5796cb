"""Archived history: snapshots after a compaction store the tail, the state stays exact."""

from __future__ import annotations

import functools
import sqlite3
import zlib
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph.message import add_messages

from agentgraph.config import Settings
from agentgraph.persistence import open_store
from agentgraph.persistence.archive import ARCHIVE_TABLE, ArchiveError
from agentgraph.persistence.prune import prune_thread
from agentgraph.persistence.saver import AgentSqliteSaver
from agentgraph.session.agent import Agent
from agentgraph.session.transcript import export_jsonl
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.scripts import ai_text, ai_tools
from tests.unit.test_delta_channel import DeltaState, _graph, _same
from tests.unit.test_storage import _boundary

CONFIG = {"configurable": {"thread_id": "t"}}
BIG = 5_000


def _history(n: int, prefix: str = "h") -> list[list[BaseMessage]]:
    return [[HumanMessage(f"{prefix}{i} " + "x" * BIG, id=f"{prefix}{i}")] for i in range(n)]


def _compact(step: int, kept: list[str]) -> list[BaseMessage]:
    moved = [AIMessage(f"moved {k}", id=f"{k}~{step}") for k in kept]
    return [*(RemoveMessage(id=k) for k in kept), _boundary(step), *moved]


def _small(n: int, start: int) -> list[list[BaseMessage]]:
    return [[HumanMessage(f"s{i}", id=f"s{i}")] for i in range(start, start + n)]


def _fold(writes: list[list[BaseMessage]]) -> list[BaseMessage]:
    return list(functools.reduce(add_messages, writes, []))  # type: ignore[arg-type]


def _write(saver: Any, writes: list[list[BaseMessage]]) -> None:
    graph = _graph(DeltaState, saver, [list(w) for w in writes])
    for _ in writes:
        graph.invoke({"messages": []}, CONFIG)


def _latest(conn: sqlite3.Connection) -> list[BaseMessage]:
    graph = _graph(DeltaState, AgentSqliteSaver(conn), [])
    return list(graph.get_state(CONFIG).values.get("messages") or [])


def _snapshot_rows(conn: sqlite3.Connection) -> list[int]:
    """Positions (by checkpoint id) of the checkpoints holding a ``messages`` snapshot."""
    raw = SqliteSaver(conn).serde
    return [
        i
        for i, (type_, blob) in enumerate(
            conn.execute("SELECT type, checkpoint FROM checkpoints ORDER BY checkpoint_id")
        )
        if "messages" in (raw.loads_typed((type_, blob)).get("channel_values") or {})
    ]


def _snapshot_blobs(conn: sqlite3.Connection) -> list[int]:
    """Sizes of the checkpoints holding a ``messages`` snapshot, oldest first."""
    raw = SqliteSaver(conn).serde
    return [
        len(blob)
        for type_, blob in conn.execute(
            "SELECT type, checkpoint FROM checkpoints ORDER BY checkpoint_id"
        )
        if "messages" in (raw.loads_typed((type_, blob)).get("channel_values") or {})
    ]


def test_snapshot_after_compaction_stores_only_the_tail(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "a.db", check_same_thread=False)
    saver = AgentSqliteSaver(conn)
    writes = [*_history(30), [*_compact(30, ["h28", "h29"])], *_small(4, 0)]
    _write(saver, writes)
    history_bytes = 30 * BIG
    # The snapshot after the compaction (every 3 updates here) holds the boundary, the
    # moved messages and the small ones: not the 150 KB of history before it.
    assert _snapshot_blobs(conn)[-1] < 4_000
    stored = conn.execute(f"SELECT count(*), sum(length(data)) FROM {ARCHIVE_TABLE}").fetchone()
    assert stored[0] == 1 and stored[1] < history_bytes / 10  # once, compressed
    assert _same(_latest(conn), _fold(writes))
    # Later snapshots name the same segment without serializing it again.
    encoded = saver.archive.segments_encoded
    _write(saver, _small(12, 4))
    assert saver.archive.segments_encoded == encoded
    assert conn.execute(f"SELECT count(*) FROM {ARCHIVE_TABLE}").fetchone()[0] == 1
    # So does another process, from the segments it loaded.
    fresh = AgentSqliteSaver(sqlite3.connect(tmp_path / "a.db", check_same_thread=False))
    _write(fresh, _small(6, 16))
    assert fresh.archive.segments_encoded == 0
    expected = _fold([*writes, *_small(12, 4), *_small(6, 16)])
    assert _same(_latest(conn), expected)


def test_a_second_compaction_adds_one_segment_and_prune_keeps_what_is_named(
    tmp_path: Path,
) -> None:
    conn = sqlite3.connect(tmp_path / "b.db", check_same_thread=False)
    saver = AgentSqliteSaver(conn)
    writes = [
        *_history(12, "a"),
        _compact(12, ["a11"]),
        *_history(12, "b"),
        _compact(25, ["b11"]),
        *_small(4, 0),
    ]
    _write(saver, writes)
    assert conn.execute(f"SELECT count(*) FROM {ARCHIVE_TABLE}").fetchone()[0] == 2
    # Rewriting a message before a boundary (nothing in agentgraph does; the store
    # must stay exact anyway) archives the changed run anew.
    edit = [[HumanMessage("a3 edited", id="a3")], *_small(4, 4)]
    _write(saver, edit)
    assert conn.execute(f"SELECT count(*) FROM {ARCHIVE_TABLE}").fetchone()[0] == 3
    expected = _fold([*writes, *edit])
    prune_thread(conn, saver.serde, "t", keep_latest=2, lock=saver.lock)
    # The unedited run is gone once no kept snapshot names it; the state is exact.
    assert conn.execute(f"SELECT count(*) FROM {ARCHIVE_TABLE}").fetchone()[0] == 2
    assert _same(_latest(conn), expected)
    assert next(m for m in _latest(conn) if m.id == "a3").content == "a3 edited"
    saver.delete_thread("t")
    assert conn.execute(f"SELECT count(*) FROM {ARCHIVE_TABLE}").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0] == 0


def test_a_database_from_before_the_archive_loads_and_archives_from_then_on(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.db"
    writes = [*_history(8), _compact(8, ["h7"]), *_small(4, 0)]
    # LangGraph's own saver writes the snapshots the way agentgraph did before: lists.
    _write(SqliteSaver(sqlite3.connect(path, check_same_thread=False)), writes)
    conn = sqlite3.connect(path, check_same_thread=False)
    assert _snapshot_blobs(conn)[-1] > 7 * BIG
    assert _same(_latest(conn), _fold(writes))
    more = _small(6, 4)
    _write(AgentSqliteSaver(conn), more)
    assert _snapshot_blobs(conn)[-1] < 4_000
    assert _same(_latest(conn), _fold([*writes, *more]))


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (f"UPDATE {ARCHIVE_TABLE} SET data = substr(data, 1, 20)", "corrupt"),
        (f"UPDATE {ARCHIVE_TABLE} SET data = ?", "does not match its digest"),
        (f"UPDATE {ARCHIVE_TABLE} SET type = 'pickle'", "unknown format"),
        (f"UPDATE {ARCHIVE_TABLE} SET raw_bytes = 1 << 40", "out of range"),
        (f"UPDATE {ARCHIVE_TABLE} SET messages = 3", "not the messages it claims"),
        (f"DELETE FROM {ARCHIVE_TABLE}", "is missing"),
    ],
)
def test_a_damaged_segment_is_a_clear_error_never_a_shorter_history(
    tmp_path: Path, damage: str, message: str
) -> None:
    path = tmp_path / "c.db"
    conn = sqlite3.connect(path, check_same_thread=False)
    _write(AgentSqliteSaver(conn), [*_history(6), _compact(6, ["h5"]), *_small(4, 0)])
    params: tuple[bytes, ...] = ()
    if "?" in damage:  # the same length, one byte changed
        raw = bytearray(
            zlib.decompress(conn.execute(f"SELECT data FROM {ARCHIVE_TABLE}").fetchone()[0])
        )
        raw[len(raw) // 2] ^= 0x01
        params = (zlib.compress(bytes(raw)),)
    conn.execute(damage, params)
    conn.commit()
    with pytest.raises(ArchiveError, match=message) as raised:
        _latest(sqlite3.connect(path, check_same_thread=False))
    assert "session t: archived history segment" in str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_real_session_with_compactions_resumes_exports_and_undoes_exactly(
    settings: Settings, workspace: Path
) -> None:
    turns = 60  # 4 updates a turn: a snapshot (every 200 updates) after the compactions
    script: list[Any] = []
    for i in range(turns):
        script.append(ai_tools(("write_file", {"path": f"f{i % 3}.txt", "content": f"v{i}"})))
        script.append(ai_text(f"answer {i} " + "y" * 1_500))
        if i % 15 == 14:
            script.append(ai_text(f"summary {i}"))
    script.append(ai_text("after resume"))
    with open_store(settings) as store:
        agent = Agent(settings, store, model=ScriptedChatModel(script), sleep=lambda _s: None)
        for i in range(turns):
            agent.run_turn("s", f"question {i} " + "q" * 1_500, workspace)
            if i % 15 == 14:
                assert agent.compact("s") is not None
        history = agent.messages("s")
        saver = store.checkpointer
        assert isinstance(saver, AgentSqliteSaver)
        conn = saver.conn
        assert conn.execute(f"SELECT count(*) FROM {ARCHIVE_TABLE}").fetchone()[0] >= 3
        # The latest snapshot holds its live tail (from the last boundary), not the
        # history archived before it.
        raw = SqliteSaver(conn).serde
        type_, blob = conn.execute(
            "SELECT type, checkpoint FROM checkpoints ORDER BY checkpoint_id"
        ).fetchall()[_snapshot_rows(conn)[-1]]
        reference = raw.loads_typed((type_, blob))["channel_values"]["messages"].value
        tail_chars = sum(len(str(m.content)) for m in reference["tail"])
        archived = sum(count for _digest, count in reference["segments"])
        payload = sum(len(str(m.content)) for m in history)
        # Serialized messages carry ids, tool calls and metadata: ~1.4x their text.
        assert archived > 0 and len(blob) < 1.5 * tail_chars + 20_000
        assert len(blob) < payload / 2
        info = store.index.get("s")
        assert info is not None
    # Another process: the same transcript, the same export, and the session goes on.
    with open_store(settings) as store:
        agent = Agent(settings, store, model=ScriptedChatModel(script[-1:]), sleep=lambda _s: None)
        resumed = agent.messages("s")
        assert _same(resumed, history)
        assert [m.model_dump() for m in resumed] == [m.model_dump() for m in history]
        assert export_jsonl(resumed, info) == export_jsonl(history, info)
        undo = agent.sessions.undo_store("s")
        assert (workspace / "f2.txt").read_text() == "v59"
        undo.undo(workspace, 1)
        assert (workspace / "f2.txt").read_text() == "v56"
        assert agent.run_turn("s", "still there?", workspace).answer == "after resume"
        after = agent.messages("s")
        assert _same(after[: len(history)], history) and after[-1].content == "after resume"
