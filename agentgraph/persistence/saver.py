"""SQLite checkpointers (sync and async) whose loads cost the new writes, not the session.

With :mod:`agentgraph.persistence.delta`, a checkpoint stores only the writes of
its step; reading a thread means deserializing the nearest full snapshot (every
message of the session) and replaying the writes after it. Doing that at the
start of every turn makes a turn's cost grow with the session.

:class:`AgentSqliteSaver` (and :class:`AsyncAgentSqliteSaver`, the same on ``aiosqlite``)
remembers, per thread, the value of each delta channel whose reducer it was given
(agentgraph's store gives ``messages`` → ``messages_delta_reducer``) as it last rebuilt
it, and the checkpoint it belongs to. A channel whose reducer the saver was not given
is read exactly as the stock saver reads it: rebuilding it with another reducer would
seed the next load with a wrong value. The next read walks back from the new
checkpoint; when the walk reaches the remembered checkpoint before any snapshot,
the remembered value is the seed and only the few writes since are read. The walk
is the same as LangGraph's (``parent_checkpoint_id`` links), so the result is
identical; checkpoints never change once written, so the memory cannot go stale,
and a checkpoint that was pruned away is simply never reached (normal path).

Snapshots of ``messages`` are stored archived (``persistence/archive.py``): the
history before the last compaction boundary goes once to the ``agentgraph_archive``
table, in the same transaction as the snapshot that first names it, and the
snapshot keeps a reference plus the live tail. Deleting a thread deletes its
checkpoints, writes and segments in one transaction: all of them or none.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    DeltaChannelHistory,
    get_checkpoint_id,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.sqlite import SqliteSaver

from agentgraph.persistence.archive import (
    ARCHIVE_TABLE,
    ArchivingSerde,
    MessageArchive,
    SegmentRow,
    archived_put,
    batched,
)
from agentgraph.persistence.migrations import migrate_sqlite
from agentgraph.private_api import (
    DELTA_STAGE1_SQL,
    MISSING,
    build_delta_channels_writes_history,
    build_delta_stage2_sql,
    sqlite_has_task_path,
)

if TYPE_CHECKING:
    from agentgraph.persistence.aio import AsyncAgentSqliteSaver

__all__ = ["AgentSqliteSaver", "AsyncAgentSqliteSaver"]

# Threads whose rebuilt ``messages`` stay in memory (the REPL uses one or two;
# subagents add a few). Each entry holds references to messages already loaded.
DELTA_CACHE_MAX_THREADS = 8
MESSAGES_CHANNEL = "messages"

Reducer = Callable[[Any, Sequence[Any]], Any]
MemoryKey = tuple[str, str, str]

# Everything a thread has, deleted in one transaction (segments first: a snapshot
# never names a missing one, even between two statements).
SQLITE_DELETE_THREAD = (
    f"DELETE FROM {ARCHIVE_TABLE} WHERE thread_id = ?",
    "DELETE FROM checkpoints WHERE thread_id = ?",
    "DELETE FROM writes WHERE thread_id = ?",
)
SQLITE_INSERT_SEGMENT = (
    f"INSERT OR IGNORE INTO {ARCHIVE_TABLE} (thread_id, checkpoint_ns, segment, type, "
    "data, messages, raw_bytes) VALUES (?, ?, ?, ?, ?, ?, ?)"
)


# What a history read needs of its stored segments; a put only which are stored.
SEGMENT_COLUMNS = "segment, type, data, messages, raw_bytes"
SEGMENT_ID_COLUMN = "segment"


def select_segments_sql(count: int, columns: str = SEGMENT_COLUMNS) -> str:
    marks = ",".join("?" for _ in range(count))
    return (
        f"SELECT {columns} FROM {ARCHIVE_TABLE} "
        f"WHERE thread_id = ? AND checkpoint_ns = ? AND segment IN ({marks})"
    )


def no_archive_table(exc: sqlite3.OperationalError) -> bool:
    # A read-only database from before the archive holds no references to it.
    return "no such table" in str(exc)


class SeedWalk:
    """Stage 1 of a delta history read, looking for a remembered checkpoint.

    Fed the rows of LangGraph's stage-1 query (the parent chain from the target, newest
    first); stops at the remembered checkpoint (a hit), at a snapshot of the channel
    (the normal path serves that better) or at a loop.
    """

    def __init__(
        self, checkpoint_id: str, remembered_id: str, channel: str, raw_serde: SerializerProtocol
    ) -> None:
        self.checkpoint_id = checkpoint_id
        self.remembered_id = remembered_id
        self.channel = channel
        self.raw_serde = raw_serde
        self.chain: list[str] = []
        self.hit = False
        self._started = False

    def step(self, cid: str, type_tag: str, blob: bytes) -> bool:
        """Take one row; True when the walk is over."""
        if not self._started:
            self._started = cid == self.checkpoint_id
            return False
        if cid in self.chain:
            return True  # a loop (INSERT OR REPLACE of an old id): give up
        self.chain.append(cid)
        if cid == self.remembered_id:
            self.hit = True
            return True
        # The raw decoder: only the presence of a snapshot matters here.
        ckpt = self.raw_serde.loads_typed((type_tag, blob))
        return self.channel in (ckpt.get("channel_values") or {})


class DeltaMemory:
    """The remembered delta values shared by the sync and async SQLite savers."""

    serde: SerializerProtocol

    def _init_memory(self, reducers: Mapping[str, Reducer] | None) -> None:
        self._reducers: dict[str, Reducer] = dict(reducers or {})
        self._memory: OrderedDict[MemoryKey, tuple[str, list[Any]]] = OrderedDict()
        self._memory_lock = threading.Lock()
        self.memory_hits = 0  # observable in tests and the benchmark

    def _recall(self, key: MemoryKey) -> tuple[str, list[Any]] | None:
        with self._memory_lock:
            entry = self._memory.get(key)
            if entry is not None:
                self._memory.move_to_end(key)
            return entry

    def _remember(self, key: MemoryKey, checkpoint_id: str, value: list[Any]) -> None:
        with self._memory_lock:
            self._memory[key] = (checkpoint_id, value)
            self._memory.move_to_end(key)
            while len(self._memory) > DELTA_CACHE_MAX_THREADS:
                self._memory.popitem(last=False)

    def remember(self, config: RunnableConfig, messages: list[Any]) -> None:
        """Remember ``messages`` as the ``messages`` value of the checkpoint ``config`` names.

        For a value the caller already holds (the state a run ended with): the next
        load of that checkpoint, or of one after it, starts from it instead of
        rebuilding the history. ``config`` must name the checkpoint (``checkpoint_id``).
        Nothing is remembered unless the saver was given the channel's reducer.
        """
        checkpoint_id = get_checkpoint_id(config)
        if not checkpoint_id or MESSAGES_CHANNEL not in self._reducers:
            return
        configurable = config["configurable"]
        key = (
            str(configurable["thread_id"]),
            str(configurable.get("checkpoint_ns", "")),
            MESSAGES_CHANNEL,
        )
        self._remember(key, checkpoint_id, list(messages))

    def _forget_memory(self, thread_id: str | None) -> None:
        with self._memory_lock:
            for key in [k for k in self._memory if thread_id is None or k[0] == thread_id]:
                del self._memory[key]

    def _remembered_channel(self, channels: Sequence[str]) -> str | None:
        """The channel a history read may seed from memory (one, with a known reducer)."""
        if len(channels) != 1 or channels[0] not in self._reducers:
            return None
        return channels[0]

    def _learn(
        self, key: MemoryKey, checkpoint_id: str, history: Mapping[str, DeltaChannelHistory]
    ) -> None:
        """Rebuild the channel's value from ``history`` with its reducer and remember it."""
        channel = key[2]
        entry = history[channel]
        rebuilt = DeltaChannel(self._reducers[channel], list).from_checkpoint(
            entry.get("seed", MISSING)
        )
        rebuilt.replay_writes(entry["writes"])
        self._remember(key, checkpoint_id, list(rebuilt.value))

    def _seeded_history(
        self,
        walk: SeedWalk,
        value: list[Any],
        rows: list[tuple[str, str, str, int, str, bytes, str]],
    ) -> dict[str, DeltaChannelHistory]:
        self.memory_hits += 1
        channel = walk.channel
        return build_delta_channels_writes_history(
            channels=[channel],
            chain_by_ch={channel: walk.chain},
            seed_val_by_ch={channel: list(value)},
            seeded={channel},
            stage2_rows=rows,
            serde=self.serde,
        )


def pinned_config(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": checkpoint_ns,
            "checkpoint_id": checkpoint_id,
        }
    }


def thread_and_namespace(config: RunnableConfig) -> tuple[str, str]:
    configurable = config["configurable"]
    return str(configurable["thread_id"]), str(configurable.get("checkpoint_ns", ""))


class AgentSqliteSaver(DeltaMemory, SqliteSaver):
    """``SqliteSaver`` with archived snapshots and an in-process memory of delta values.

    Args:
        conn: An open SQLite connection (see ``store.connect_sqlite``).
        serde: The serializer (default: LangGraph's).
        reducers: Batch reducers of the ``DeltaChannel`` channels whose values are
            remembered, by channel name. Give only the reducer the graph's channel
            really has (agentgraph's store: ``{"messages": messages_delta_reducer}``);
            without it the saver reads the channel as ``SqliteSaver`` does.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        *,
        serde: SerializerProtocol | None = None,
        reducers: Mapping[str, Reducer] | None = None,
    ) -> None:
        super().__init__(conn, serde=serde)
        # Reentrant: ``put`` writes the archive segments and the checkpoint in one
        # transaction, holding the lock across SqliteSaver.put's own use of it.
        self.lock = threading.RLock()  # type: ignore[assignment]
        self._raw_serde = self.serde
        self.archive = MessageArchive(self._raw_serde, self._fetch_segments)
        self.serde = ArchivingSerde(self._raw_serde, self.archive)
        self._init_memory(reducers)

    def forget(self, thread_id: str | None = None) -> None:
        """Drop remembered values and archive segments (of one thread, or all)."""
        self._forget_memory(thread_id)
        self.archive.forget(thread_id)

    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread's checkpoints, writes and archived segments in one transaction."""
        self.forget(str(thread_id))
        with self.lock:
            self.setup()
            try:
                if not self.conn.in_transaction:
                    self.conn.execute("BEGIN")
                for sql in SQLITE_DELETE_THREAD:
                    self.conn.execute(sql, (str(thread_id),))
                self.conn.commit()
            except BaseException:
                self.conn.rollback()
                raise

    # -- archive ----------------------------------------------------------------------

    def setup(self) -> None:
        """agentgraph's migrations (the archive table), then LangGraph's (idempotent)."""
        if self.is_setup:
            return
        with self.lock:
            migrate_sqlite(self.conn)
        super().setup()

    def _fetch_segments(
        self, thread_id: str, checkpoint_ns: str, digests: Sequence[str]
    ) -> dict[str, SegmentRow]:
        # Called while decoding, i.e. inside the saver's own cursor blocks (lock held):
        # a plain statement on the same connection, no lock of its own.
        found: dict[str, SegmentRow] = {}
        try:
            for batch in batched(digests):
                for digest, type_, data, count, raw in self.conn.execute(
                    select_segments_sql(len(batch)), (thread_id, checkpoint_ns, *batch)
                ):
                    found[digest] = (type_, data, count, raw)
        except sqlite3.OperationalError as exc:
            if not no_archive_table(exc):
                raise
        return found

    def _present_segments(
        self, thread_id: str, checkpoint_ns: str, digests: Sequence[str]
    ) -> set[str]:
        # Which segments are stored, without reading their contents (the lock is held).
        present: set[str] = set()
        try:
            for batch in batched(digests):
                for (digest,) in self.conn.execute(
                    select_segments_sql(len(batch), SEGMENT_ID_COLUMN),
                    (thread_id, checkpoint_ns, *batch),
                ):
                    present.add(digest)
        except sqlite3.OperationalError as exc:
            if not no_archive_table(exc):
                raise
        return present

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint; a ``messages`` snapshot is stored archived."""
        put = archived_put(self.archive, config, checkpoint, MESSAGES_CHANNEL)
        if put is None:
            return super().put(config, checkpoint, metadata, new_versions)
        thread_id, checkpoint_ns, plan = put.thread_id, put.checkpoint_ns, put.plan
        with self.lock:
            try:
                with self.cursor(transaction=False) as cur:
                    present = self._present_segments(thread_id, checkpoint_ns, plan.digests)
                    rows = self.archive.rows_to_write(plan, present)
                    cur.executemany(
                        SQLITE_INSERT_SEGMENT, [r.row(thread_id, checkpoint_ns) for r in rows]
                    )
                # Commits the segments with the checkpoint that names them.
                return super().put(config, put.checkpoint, metadata, new_versions)
            except BaseException:
                self.conn.rollback()
                raise

    # -- reads ------------------------------------------------------------------------

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """LangGraph's delta history, seeded from memory when the walk reaches it."""
        channels = list(channels)
        channel = self._remembered_channel(channels)
        if channel is None:
            return super().get_delta_channel_history(config=config, channels=channels)
        thread_id, checkpoint_ns = thread_and_namespace(config)
        checkpoint_id = get_checkpoint_id(config)
        if not checkpoint_id:
            target = self.get_tuple(config)
            if target is None:
                return {channel: {"writes": []}}
            checkpoint_id = str(target.config["configurable"]["checkpoint_id"])
        key = (thread_id, checkpoint_ns, channel)
        history = self._history(key, checkpoint_id) or super().get_delta_channel_history(
            config=pinned_config(thread_id, checkpoint_ns, checkpoint_id), channels=channels
        )
        self._learn(key, checkpoint_id, history)
        return history

    def _history(self, key: MemoryKey, checkpoint_id: str) -> dict[str, DeltaChannelHistory] | None:
        """The history seeded from memory, or None when the walk misses it."""
        remembered = self._recall(key)
        if remembered is None:
            return None
        remembered_id, value = remembered
        thread_id, checkpoint_ns, channel = key
        if remembered_id == checkpoint_id:
            return {channel: {"seed": list(value), "writes": []}}
        walk = SeedWalk(checkpoint_id, remembered_id, channel, self._raw_serde)
        with self.cursor(transaction=False) as cur:
            cur.execute(
                DELTA_STAGE1_SQL,
                (thread_id, checkpoint_ns, checkpoint_id, thread_id, checkpoint_ns),
            )
            for cid, type_tag, blob in cur:
                if walk.step(cid, type_tag, blob):
                    break
            if not walk.hit:
                return None
            sql = build_delta_stage2_sql(
                has_task_path=sqlite_has_task_path(self), chain_lens=[len(walk.chain)]
            )
            cur.execute(sql, [thread_id, checkpoint_ns, channel, *walk.chain])
            rows = cast("list[tuple[str, str, str, int, str, bytes, str]]", cur.fetchall())
        return self._seeded_history(walk, value, rows)


def __getattr__(name: str) -> Any:
    # The async saver (and aiosqlite) is imported only when asked for: the CLI never is.
    if name == "AsyncAgentSqliteSaver":
        from agentgraph.persistence import aio

        return aio.AsyncAgentSqliteSaver
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
