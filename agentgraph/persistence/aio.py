"""The async savers: ``AsyncAgentSqliteSaver`` and ``AsyncAgentPostgresSaver``.

For graphs run with ``ainvoke`` / ``astream``, what :class:`~agentgraph.persistence.saver.
AgentSqliteSaver` and :class:`~agentgraph.persistence.pg_saver.AgentPostgresSaver` add to
LangGraph's savers, on LangGraph's async savers (``aiosqlite``, psycopg's async
connections and pools): ``messages`` snapshots stored archived, ``setup()`` creating the
archive table, one-transaction thread deletes, and (SQLite) the memory of delta values.
They share the sync savers' statements, archive and memory code, and read and write the
same databases. Archive references are resolved after each read
(:class:`~agentgraph.persistence.archive.AsyncArchiveReads`): an async saver cannot read
its database from inside the serializer as the sync ones do. Pruning stays with the sync
savers (the store prunes through them), which the async ones can run beside.

This module is imported only when an async saver is asked for (``aiosqlite`` and the
async stacks are not part of the CLI's start-up).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager, nullcontext
from types import TracebackType
from typing import Any, cast

import aiosqlite
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    DeltaChannelHistory,
    get_checkpoint_id,
)
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from psycopg import AsyncConnection, AsyncPipeline
from psycopg_pool import AsyncConnectionPool

from agentgraph.persistence.archive import (
    AsyncArchiveReads,
    MessageArchive,
    SegmentRow,
    archived_put,
    batched,
)
from agentgraph.persistence.migrations import POSTGRES_ARCHIVE_TABLE, SQLITE_ARCHIVE_TABLE
from agentgraph.persistence.pg_saver import (
    MESSAGES_CHANNEL,
    PG_DELETE_THREAD,
    PG_INSERT_SEGMENTS,
    PG_LOCK_FOR_PUT,
    PG_SELECT_PRESENT,
    PG_SELECT_SEGMENTS,
    PG_UNLOCK_FOR_PUT,
    PRUNE_LOCK_CLASS,
    present_segments,
    segment_rows,
)
from agentgraph.persistence.saver import (
    SEGMENT_ID_COLUMN,
    SQLITE_DELETE_THREAD,
    SQLITE_INSERT_SEGMENT,
    DeltaMemory,
    MemoryKey,
    Reducer,
    SeedWalk,
    no_archive_table,
    pinned_config,
    select_segments_sql,
    thread_and_namespace,
)
from agentgraph.private_api import (
    DELTA_STAGE1_SQL,
    build_delta_stage2_sql,
    sqlite_has_task_path,
)

__all__ = ["AsyncAgentPostgresSaver", "AsyncAgentSqliteSaver"]


def _nothing_fetched(
    _thread_id: str, _checkpoint_ns: str, _digests: Sequence[str]
) -> dict[str, SegmentRow]:
    """An async saver's archive reads no segment while decoding (see AsyncArchiveReads)."""
    return {}


class _TaskLock:
    """An ``asyncio.Lock`` the task holding it may take again.

    ``aput`` writes the archive segments and the checkpoint in one transaction, holding
    the lock across ``AsyncSqliteSaver.aput``'s own use of it (as the sync saver's RLock).
    """

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._owner: asyncio.Task[Any] | None = None
        self._depth = 0

    def locked(self) -> bool:
        """Whether some task holds the lock."""
        return self._lock.locked()

    async def __aenter__(self) -> None:
        task = asyncio.current_task()
        if task is not None and self._owner is task:
            self._depth += 1
            return
        await self._lock.acquire()
        self._owner = task
        self._depth = 1

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._owner = None
            self._lock.release()


class AsyncAgentSqliteSaver(DeltaMemory, AsyncArchiveReads, AsyncSqliteSaver):
    """``AsyncSqliteSaver`` with what :class:`AgentSqliteSaver` adds, on ``aiosqlite``.

    Archived snapshots, one-transaction deletes and the memory of delta values, for
    graphs run with ``ainvoke`` / ``astream``. Reads the databases the sync saver
    writes and the other way round.

    Args:
        conn: An open ``aiosqlite`` connection (or use ``from_conn_string``).
        serde: The serializer (default: LangGraph's).
        reducers: As for :class:`AgentSqliteSaver`.
    """

    def __init__(
        self,
        conn: aiosqlite.Connection,
        *,
        serde: SerializerProtocol | None = None,
        reducers: Mapping[str, Reducer] | None = None,
    ) -> None:
        super().__init__(conn, serde=serde)
        self.lock = _TaskLock()  # type: ignore[assignment]
        self._raw_serde = self.serde
        self.archive = MessageArchive(self._raw_serde, _nothing_fetched)
        self._archive_ready = False
        self._init_memory(reducers)

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls, conn_string: str, *, reducers: Mapping[str, Reducer] | None = None
    ) -> AsyncIterator[AsyncAgentSqliteSaver]:
        """A saver on a new ``aiosqlite`` connection to ``conn_string``, closed after."""
        async with aiosqlite.connect(conn_string) as conn:
            yield cls(conn, reducers=reducers)

    def forget(self, thread_id: str | None = None) -> None:
        """Drop remembered values and archive segments (of one thread, or all)."""
        self._forget_memory(thread_id)
        self.archive.forget(thread_id)

    async def setup(self) -> None:
        """LangGraph's tables plus the archive table (idempotent)."""
        if self.is_setup and self._archive_ready:
            return
        await super().setup()
        async with self.lock:
            if self._archive_ready:
                return
            try:
                await self.conn.execute(SQLITE_ARCHIVE_TABLE)
                await self.conn.commit()
            except sqlite3.OperationalError as exc:
                if "readonly database" not in str(exc):
                    raise
            self._archive_ready = True

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete a thread's checkpoints, writes and archived segments in one transaction."""
        self.forget(str(thread_id))
        await self.setup()
        async with self.lock:
            try:
                if not self.conn.in_transaction:
                    await self.conn.execute("BEGIN")
                for sql in SQLITE_DELETE_THREAD:
                    await self.conn.execute(sql, (str(thread_id),))
                await self.conn.commit()
            except BaseException:
                await self.conn.rollback()
                raise

    async def _afetch_segments(
        self, thread_id: str, checkpoint_ns: str, digests: Sequence[str]
    ) -> dict[str, SegmentRow]:
        found: dict[str, SegmentRow] = {}
        async with self.lock:
            try:
                for batch in batched(digests):
                    async with self.conn.execute(
                        select_segments_sql(len(batch)), (thread_id, checkpoint_ns, *batch)
                    ) as cur:
                        async for digest, type_, data, count, raw in cur:
                            found[digest] = (type_, data, count, raw)
            except sqlite3.OperationalError as exc:
                if not no_archive_table(exc):
                    raise
        return found

    async def _apresent_segments(
        self, thread_id: str, checkpoint_ns: str, digests: Sequence[str]
    ) -> set[str]:
        # Which segments are stored, without reading their contents.
        present: set[str] = set()
        async with self.lock:
            try:
                for batch in batched(digests):
                    async with self.conn.execute(
                        select_segments_sql(len(batch), SEGMENT_ID_COLUMN),
                        (thread_id, checkpoint_ns, *batch),
                    ) as cur:
                        async for (digest,) in cur:
                            present.add(digest)
            except sqlite3.OperationalError as exc:
                if not no_archive_table(exc):
                    raise
        return present

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint; a ``messages`` snapshot is stored archived."""
        put = archived_put(self.archive, config, checkpoint, MESSAGES_CHANNEL)
        if put is None:
            return await super().aput(config, checkpoint, metadata, new_versions)
        thread_id, checkpoint_ns, plan = put.thread_id, put.checkpoint_ns, put.plan
        await self.setup()
        async with self.lock:
            try:
                present = await self._apresent_segments(thread_id, checkpoint_ns, plan.digests)
                rows = self.archive.rows_to_write(plan, present)
                await self.conn.executemany(
                    SQLITE_INSERT_SEGMENT, [r.row(thread_id, checkpoint_ns) for r in rows]
                )
                # Commits the segments with the checkpoint that names them.
                return await super().aput(config, put.checkpoint, metadata, new_versions)
            except BaseException:
                await self.conn.rollback()
                raise

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """LangGraph's delta history, seeded from memory when the walk reaches it."""
        channels = list(channels)
        channel = self._remembered_channel(channels)
        if channel is None:
            return await super().aget_delta_channel_history(config=config, channels=channels)
        thread_id, checkpoint_ns = thread_and_namespace(config)
        checkpoint_id = get_checkpoint_id(config)
        if not checkpoint_id:
            target = await self.aget_tuple(config)
            if target is None:
                return {channel: {"writes": []}}
            checkpoint_id = str(target.config["configurable"]["checkpoint_id"])
        key = (thread_id, checkpoint_ns, channel)
        history = await self._ahistory(key, checkpoint_id) or (
            await super().aget_delta_channel_history(
                config=pinned_config(thread_id, checkpoint_ns, checkpoint_id), channels=channels
            )
        )
        self._learn(key, checkpoint_id, history)
        return history

    async def _ahistory(
        self, key: MemoryKey, checkpoint_id: str
    ) -> dict[str, DeltaChannelHistory] | None:
        """The history seeded from memory, or None when the walk misses it."""
        remembered = self._recall(key)
        if remembered is None:
            return None
        remembered_id, value = remembered
        thread_id, checkpoint_ns, channel = key
        if remembered_id == checkpoint_id:
            return {channel: {"seed": list(value), "writes": []}}
        walk = SeedWalk(checkpoint_id, remembered_id, channel, self._raw_serde)
        await self.setup()
        async with self.lock, self.conn.cursor() as cur:
            await cur.execute(
                DELTA_STAGE1_SQL,
                (thread_id, checkpoint_ns, checkpoint_id, thread_id, checkpoint_ns),
            )
            async for cid, type_tag, blob in cur:
                if walk.step(cid, type_tag, blob):
                    break
            if not walk.hit:
                return None
            sql = build_delta_stage2_sql(
                has_task_path=sqlite_has_task_path(self), chain_lens=[len(walk.chain)]
            )
            await cur.execute(sql, [thread_id, checkpoint_ns, channel, *walk.chain])
            rows = cast("list[tuple[str, str, str, int, str, bytes, str]]", await cur.fetchall())
        return self._seeded_history(walk, value, rows)


class AsyncAgentPostgresSaver(AsyncArchiveReads, AsyncPostgresSaver):
    """``AsyncPostgresSaver`` with what :class:`AgentPostgresSaver` adds.

    Args:
        conn: An async connection pool (or one autocommit connection with dict rows).
        pipe: A pipeline of ``conn`` (as for ``AsyncPostgresSaver``).
        serde: The serializer (default: LangGraph's).
    """

    def __init__(
        self,
        conn: AsyncConnectionPool[Any] | AsyncConnection[Any],
        pipe: AsyncPipeline | None = None,
        serde: SerializerProtocol | None = None,
    ) -> None:
        super().__init__(conn, pipe, serde)
        self.archive = MessageArchive(self.serde, _nothing_fetched)

    @asynccontextmanager
    async def _own_connection(self) -> AsyncIterator[AsyncConnection[Any]]:
        """A connection of the pool, or the saver's one connection."""
        if isinstance(self.conn, AsyncConnectionPool):
            async with self.conn.connection() as conn:
                yield conn
        else:
            yield self.conn

    def _guard(self) -> Any:
        # One connection is shared with AsyncPostgresSaver's statements (its lock);
        # a pool hands each statement a connection of its own.
        return nullcontext() if isinstance(self.conn, AsyncConnectionPool) else self.lock

    async def _rows(self, conn: AsyncConnection[Any], sql: str, params: Sequence[Any]) -> list[Any]:
        async with self._guard(), conn.cursor(binary=True) as cur:
            await cur.execute(sql, params)
            return await cur.fetchall() if cur.description else []

    async def setup(self) -> None:
        """LangGraph's tables and migrations, plus the archive table (idempotent)."""
        await super().setup()
        async with self.lock, self._own_connection() as conn:
            await conn.execute(POSTGRES_ARCHIVE_TABLE)
        if self.pipe:
            await self.pipe.sync()

    async def _afetch_segments(
        self, thread_id: str, checkpoint_ns: str, digests: Sequence[str]
    ) -> dict[str, SegmentRow]:
        async with self._own_connection() as conn:
            return segment_rows(
                await self._rows(
                    conn, PG_SELECT_SEGMENTS, (thread_id, checkpoint_ns, list(digests))
                )
            )

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint; a ``messages`` snapshot is stored archived."""
        put = archived_put(self.archive, config, checkpoint, MESSAGES_CHANNEL)
        if put is None:
            return await super().aput(config, checkpoint, metadata, new_versions)
        thread_id, checkpoint_ns, plan = put.thread_id, put.checkpoint_ns, put.plan
        async with self._own_connection() as conn:
            await self._rows(conn, PG_LOCK_FOR_PUT, (PRUNE_LOCK_CLASS, thread_id))
            try:
                present = await self._rows(
                    conn, PG_SELECT_PRESENT, (thread_id, checkpoint_ns, plan.digests)
                )
                rows = self.archive.rows_to_write(plan, present_segments(present))
                if rows:
                    async with self._guard(), conn.cursor() as cur:
                        await cur.executemany(
                            PG_INSERT_SEGMENTS, [r.row(thread_id, checkpoint_ns) for r in rows]
                        )
                return await super().aput(config, put.checkpoint, metadata, new_versions)
            finally:
                await self._rows(conn, PG_UNLOCK_FOR_PUT, (PRUNE_LOCK_CLASS, thread_id))

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete a thread's checkpoints, blobs, writes and archived segments in one
        transaction."""
        self.archive.forget(str(thread_id))
        async with (
            self.lock,
            self._own_connection() as conn,
            conn.transaction(),
            conn.cursor() as cur,
        ):
            for sql in PG_DELETE_THREAD:
                await cur.execute(sql, (str(thread_id),))
