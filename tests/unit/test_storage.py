"""Pruning keeps the latest checkpoints and what they need; compaction boundaries pin nothing."""

from __future__ import annotations

import itertools
import sqlite3
from pathlib import Path
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
)

from agentgraph.config import Settings
from agentgraph.persistence import open_store
from agentgraph.persistence.delta import MESSAGES_SNAPSHOT_FREQUENCY_UPDATES
from agentgraph.persistence.prune import PRUNE_KEEP_LATEST_CHECKPOINTS, db_bytes, prune_thread
from agentgraph.persistence.saver import AgentSqliteSaver
from agentgraph.session.agent import Agent
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.scripts import ai_text, ai_tools
from tests.unit.test_delta_channel import DeltaState, _graph, _same

KEEP = 4
CONFIG = {"configurable": {"thread_id": "t"}}


def _boundary(n: int) -> SystemMessage:
    return SystemMessage(
        f"[compaction boundary {n}]",
        id=f"boundary-{n}",
        additional_kwargs={"agentgraph": {"kind": "compact_boundary", "trigger": "auto"}},
    )


def _writes() -> list[list[BaseMessage]]:
    """40 steps; compactions at steps 12 and 27 move the latest two messages after a boundary."""
    writes: list[list[BaseMessage]] = []
    ids: list[str] = []
    for step in range(40):
        if step in (12, 27):
            kept = ids[-2:]
            moved = [AIMessage(f"moved {k}", id=f"{k}~{step}") for k in kept]
            writes.append([*(RemoveMessage(id=k) for k in kept), _boundary(step), *moved])
            ids = [*ids[:-2], f"boundary-{step}", *(m.id or "" for m in moved)]
            continue
        msg = HumanMessage(f"user {step} " + "x" * 500, id=f"h{step}")
        writes.append([msg])
        ids.append(msg.id or "")
    return writes


def _states(graph: Any) -> dict[str, list[BaseMessage]]:
    return {
        s.config["configurable"]["checkpoint_id"]: list(s.values.get("messages") or [])
        for s in graph.get_state_history(CONFIG)
    }


def _snapshots(conn: sqlite3.Connection, saver: AgentSqliteSaver) -> int:
    rows = conn.execute("SELECT type, checkpoint FROM checkpoints").fetchall()
    return sum("messages" in (saver.serde.loads_typed(r).get("channel_values") or {}) for r in rows)


def test_prune_keeps_latest_and_their_state_not_boundaries(tmp_path: Path) -> None:
    path = tmp_path / "p.db"
    conn = sqlite3.connect(path, check_same_thread=False)
    saver = AgentSqliteSaver(conn)
    writes = _writes()
    script = [list(w) for w in writes]
    graph = _graph(DeltaState, saver, script)
    for _ in writes:
        graph.invoke({"messages": []}, CONFIG)
    before = _states(graph)
    ordered = sorted(before)
    boundary_parents = {
        cid
        for (cid,) in conn.execute(
            "SELECT DISTINCT checkpoint_id FROM writes WHERE instr(value, ?) > 0",
            (b"compact_boundary",),
        )
    }
    assert len(boundary_parents) == 2
    n_writes = conn.execute("SELECT count(*) FROM writes").fetchone()[0]

    deleted, deleted_writes, kept = prune_thread(conn, saver.serde, "t", keep_latest=KEEP)
    assert deleted > 0 and deleted_writes > 0
    assert conn.execute("SELECT count(*) FROM writes").fetchone()[0] == n_writes - deleted_writes

    remaining = {cid for (cid,) in conn.execute("SELECT checkpoint_id FROM checkpoints")}
    assert len(remaining) == kept < len(before)
    assert set(ordered[-KEEP:]) <= remaining
    # The checkpoints around old compaction boundaries, and the snapshots their
    # replay chains walked back to, are gone: the latest state holds every message.
    assert not boundary_parents & remaining
    assert _snapshots(conn, saver) == 1
    latest = before[ordered[-1]]
    assert {"boundary-12", "boundary-27"} <= {m.id for m in latest}
    # Every kept checkpoint rebuilds exactly the state it had, with a fresh saver too.
    fresh = sqlite3.connect(path, check_same_thread=False)
    view = _graph(DeltaState, AgentSqliteSaver(fresh), [])
    for cid in remaining:
        cfg = {"configurable": {"thread_id": "t", "checkpoint_id": cid}}
        assert _same(list(view.get_state(cfg).values.get("messages") or []), before[cid])
    fresh.close()
    # Resuming after the prune continues from the same state.
    graph2 = _graph(DeltaState, AgentSqliteSaver(conn), [[HumanMessage("after", id="after")]])
    graph2.invoke({"messages": []}, CONFIG)
    resumed = list(graph2.get_state(CONFIG).values["messages"])
    assert _same(resumed[:-1], before[ordered[-1]]) and resumed[-1].id == "after"
    conn.close()


def test_prune_twice_is_stable(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "s.db", check_same_thread=False)
    saver = AgentSqliteSaver(conn)
    writes = _writes()
    graph = _graph(DeltaState, saver, [list(w) for w in writes])
    for _ in writes:
        graph.invoke({"messages": []}, CONFIG)
    state = list(graph.get_state(CONFIG).values["messages"])
    prune_thread(conn, saver.serde, "t", keep_latest=KEEP)
    assert prune_thread(conn, saver.serde, "t", keep_latest=KEEP)[0] == 0
    assert _same(list(graph.get_state(CONFIG).values["messages"]), state)
    conn.close()


def test_store_prune_vacuums_and_session_resumes(settings: Settings, workspace: Path) -> None:
    replies = [ai_text(f"answer {i} " + "y" * 2_000) for i in range(30)]
    # A 40-message window (unset by default): the 60-message session compacts.
    settings = settings.model_copy(update={"max_message_history": 40})
    with open_store(settings) as store:
        agent = Agent(settings, store, model=ScriptedChatModel(replies), sleep=lambda _s: None)
        for i in range(30):
            agent.run_turn("s1", f"question {i} " + "q" * 2_000, workspace)
        history = agent.messages("s1")
        # 60 messages plus the compaction the 40-message window triggered.
        assert len(history) > 60 and store.index.get("s1").compactions >= 1  # type: ignore[union-attr]
        stats = store.prune()
        assert stats.complete and stats.vacuumed and stats.threads == 1
        assert stats.bytes_after <= stats.bytes_before
        assert db_bytes(settings.db_path) == stats.bytes_after
    with open_store(settings) as store:
        agent = Agent(
            settings, store, model=ScriptedChatModel([ai_text("still here")]), sleep=lambda _s: None
        )
        assert _same(agent.messages("s1"), history)
        assert agent.run_turn("s1", "and now?", workspace).answer == "still here"
        after = agent.messages("s1")
        assert len(after) > len(history) and after[-1].content == "still here"
        assert any(m.content == "and now?" for m in after)


def test_opening_an_existing_store_needs_no_write_lock(tmp_path: Path) -> None:
    """Another process's write transaction must not fail a mere open of the file."""
    from agentgraph.persistence.store import connect_sqlite

    path = tmp_path / "sessions.db"
    first = connect_sqlite(path)
    first.execute("CREATE TABLE t (x)")
    first.commit()
    first.close()
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        conn = connect_sqlite(path, busy_timeout_s=0.2)
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)
        conn.close()
    finally:
        holder.close()


def test_every_turn_ends_with_one_transcript_snapshot_stored(
    settings: Settings, workspace: Path
) -> None:
    """A turn that wrote a new snapshot of the transcript prunes the old one and the
    writes after it before the next turn; the turns between snapshots drop nothing
    (their checkpoints are the latest one's replay chain) and the file stays bounded."""
    steps = 8
    # A different folder at each step: a model that lists the same one again and again
    # with the same output is stopped as a runaway before its eighth step.
    for k in range(steps):
        (workspace / f"dir{k}").mkdir()
    replies: list[AIMessage] = []
    for turn in range(36):
        replies += [ai_tools(("list_dir", {"path": f"dir{k}"})) for k in range(steps)]
        replies.append(ai_text(f"answer {turn}"))
    with open_store(settings) as store:
        agent = Agent(settings, store, model=ScriptedChatModel(replies), sleep=lambda _s: None)
        saver = store.checkpointer
        assert isinstance(saver, AgentSqliteSaver)
        rows: list[int] = []
        for turn in range(36):
            agent.run_turn("s1", f"list the files, round {turn}", workspace)
            with saver.lock:
                assert _snapshots(saver.conn, saver) <= 1, f"turn {turn}"
                (count,) = saver.conn.execute("SELECT COUNT(*) FROM checkpoints").fetchone()
            rows.append(count)
        # Snapshots came (the rows fell back) at least twice, and the rows never grew
        # past one snapshot interval of the channel's writes plus the kept checkpoints.
        assert sum(1 for a, b in itertools.pairwise(rows) if b < a) >= 2
        assert max(rows) <= MESSAGES_SNAPSHOT_FREQUENCY_UPDATES + PRUNE_KEEP_LATEST_CHECKPOINTS
        assert agent.messages("s1")[-1].content == "answer 35"


def test_a_thread_written_elsewhere_is_pruned_after_the_next_turn(
    settings: Settings, workspace: Path
) -> None:
    """Another writer (a client of the LangGraph server, another process) left a newer
    snapshot unpruned: this process's next turn prunes the older one, though this
    process wrote no snapshot since its last prune."""
    model = ScriptedChatModel([ai_text(f"answer {i}") for i in range(3)])
    with open_store(settings) as store, open_store(settings) as other:
        agent = Agent(settings, store, model=model, sleep=lambda _s: None)
        agent.run_turn("s1", "first", workspace)
        elsewhere = Agent(settings, other, model=ScriptedChatModel([]), sleep=lambda _s: None)
        for i in range(MESSAGES_SNAPSHOT_FREQUENCY_UPDATES + 10):
            elsewhere.graph.update_state(
                elsewhere.config("s1"),
                {"messages": [HumanMessage(f"note {i}")]},
                as_node="finalize",
            )
        saver = store.checkpointer
        assert isinstance(saver, AgentSqliteSaver)
        with saver.lock:
            assert _snapshots(saver.conn, saver) >= 2
        agent.run_turn("s1", "second", workspace)
        with saver.lock:
            assert _snapshots(saver.conn, saver) == 1
        history = agent.messages("s1")
        assert history[-1].content == "answer 1"
        assert sum(isinstance(m, HumanMessage) and m.text.startswith("note ") for m in history) == (
            MESSAGES_SNAPSHOT_FREQUENCY_UPDATES + 10
        )
