"""The PostgreSQL savers keep LangGraph's checkpointer contract, sync and async.

Set up the way LangGraph documents it (construct, ``setup()``, use), the saver has every
table it needs; deleting a thread is all or nothing; pruning keeps what a fork replays.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

from agentgraph.persistence.archive import ARCHIVE_TABLE
from agentgraph.persistence.pg_saver import AgentPostgresSaver, AsyncAgentPostgresSaver
from tests.unit.test_archive import _compact, _fold, _history, _small
from tests.unit.test_delta_channel import DeltaState, _graph, _same
from tests.unit.test_saver_contract import (
    CONFIG,
    SUB_STEPS,
    TURNS,
    _fork_point,
    _persistent_subgraph_graph,
)

pytestmark = pytest.mark.postgres

TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes", ARCHIVE_TABLE)


def _writes() -> list[Any]:
    return [*_history(6), _compact(6, ["h5"]), *_small(4, 0), _compact(11, ["s3"]), *_small(3, 4)]


def _counts(url: str) -> dict[str, int]:
    with psycopg.connect(url) as conn:
        return {t: int(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in TABLES}


def _refuse_checkpoint_deletes(url: str, refuse: bool) -> None:
    """A trigger failing the delete's last step (checkpoints go after writes, blobs and
    archive segments), as a lost connection or a full disk would."""
    with psycopg.connect(url, autocommit=True) as conn:
        if refuse:
            conn.execute(
                "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN RAISE EXCEPTION 'refused'; END $$"
            )
            conn.execute(
                "CREATE TRIGGER refuse BEFORE DELETE ON checkpoints "
                "FOR EACH ROW EXECUTE FUNCTION refuse()"
            )
        else:
            conn.execute("DROP TRIGGER refuse ON checkpoints")


def test_setup_creates_the_archive_and_delete_is_one_transaction(postgres_url: str) -> None:
    with AgentPostgresSaver.from_conn_string(postgres_url) as saver:
        saver.setup()
        graph = _graph(DeltaState, saver, [list(w) for w in _writes()])
        for _ in _writes():
            graph.invoke({"messages": []}, CONFIG)
        assert _same(list(graph.get_state(CONFIG).values["messages"]), _fold(_writes()))
        before = _counts(postgres_url)
        assert all(before.values())
        _refuse_checkpoint_deletes(postgres_url, True)
        with pytest.raises(psycopg.errors.RaiseException, match="refused"):
            saver.delete_thread("t")
        assert _counts(postgres_url) == before
        _refuse_checkpoint_deletes(postgres_url, False)
        saver.delete_thread("t")
        assert _counts(postgres_url) == dict.fromkeys(TABLES, 0)


def test_fork_after_prune_replays_a_persistent_subgraph_from_its_state(postgres_url: str) -> None:
    with AgentPostgresSaver.from_conn_string(postgres_url) as saver:
        saver.setup()
        graph = _persistent_subgraph_graph(saver)
        for _ in range(TURNS):
            graph.invoke({}, CONFIG)
        done = saver.prune_thread("t", keep_latest=3)
        assert done is not None and done[0] > 0
        assert graph.invoke(None, _fork_point(graph))["last"] == SUB_STEPS * TURNS


def test_async_saver_archives_and_deletes_in_one_transaction(postgres_url: str) -> None:
    expected = _fold(_writes())

    async def write() -> list[Any]:
        async with AsyncAgentPostgresSaver.from_conn_string(postgres_url) as saver:
            await saver.setup()
            graph = _graph(DeltaState, saver, [list(w) for w in _writes()])
            for _ in _writes():
                await graph.ainvoke({"messages": []}, CONFIG)
            return list((await graph.aget_state(CONFIG)).values["messages"])

    assert _same(asyncio.run(write()), expected)
    before = _counts(postgres_url)
    assert all(before.values())
    # The sync saver reads what the async one wrote.
    with AgentPostgresSaver.from_conn_string(postgres_url) as saver:
        graph = _graph(DeltaState, saver, [])
        assert _same(list(graph.get_state(CONFIG).values["messages"]), expected)

    async def delete() -> None:
        async with AsyncAgentPostgresSaver.from_conn_string(postgres_url) as saver:
            await saver.adelete_thread("t")

    _refuse_checkpoint_deletes(postgres_url, True)
    with pytest.raises(psycopg.errors.RaiseException, match="refused"):
        asyncio.run(delete())
    assert _counts(postgres_url) == before
    _refuse_checkpoint_deletes(postgres_url, False)
    asyncio.run(delete())
    assert _counts(postgres_url) == dict.fromkeys(TABLES, 0)
