"""SQLite checkpointer whose loads cost the new writes, not the whole session.

With :mod:`agentgraph.persistence.delta`, a checkpoint stores only the writes of
its step; reading a thread means deserializing the nearest full snapshot (every
message of the session) and replaying the writes after it. Doing that at the
start of every turn makes a turn's cost grow with the session.

:class:`AgentSqliteSaver` remembers, per thread, the ``messages`` value it last
rebuilt and the checkpoint it belongs to. The next read walks back from the new
checkpoint; when the walk reaches the remembered checkpoint before any snapshot,
the remembered value is the seed and only the few writes since are read. The walk
is the same as LangGraph's (``parent_checkpoint_id`` links), so the result is
identical; checkpoints never change once written, so the memory cannot go stale,
and a checkpoint that was pruned away is simply never reached (normal path).

Snapshots of ``messages`` are stored archived (``persistence/archive.py``): the
history before the last compaction boundary goes once to the ``agentgraph_archive``
table, in the same transaction as the snapshot that first names it, and the
snapshot keeps a reference plus the live tail.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    DeltaChannelHistory,
    get_checkpoint_id,
)
from langgraph.checkpoint.sqlite import SqliteSaver

from agentgraph.persistence.archive import (
    ARCHIVE_TABLE,
    SQLITE_CREATE_ARCHIVE,
    ArchivingSerde,
    MessageArchive,
    SegmentRow,
    archived_put,
    batched,
)
from agentgraph.persistence.delta import messages_delta_reducer
from agentgraph.private_api import (
    DELTA_STAGE1_SQL,
    MISSING,
    build_delta_channels_writes_history,
    build_delta_stage2_sql,
    sqlite_has_task_path,
)

# Threads whose rebuilt ``messages`` stay in memory (the REPL uses one or two;
# subagents add a few). Each entry holds references to messages already loaded.
DELTA_CACHE_MAX_THREADS = 8
MESSAGES_CHANNEL = "messages"

Reducer = Callable[[Any, Sequence[Any]], Any]


class AgentSqliteSaver(SqliteSaver):
    """``SqliteSaver`` plus an in-process memory of the last rebuilt delta value.

    Args:
        conn: An open SQLite connection (see ``store.connect_sqlite``).
        reducers: Batch reducers of the ``DeltaChannel`` channels to remember, by
            channel name (default: ``messages``).
    """

    def __init__(
        self, conn: sqlite3.Connection, *, reducers: Mapping[str, Reducer] | None = None
    ) -> None:
        super().__init__(conn)
        # Reentrant: ``put`` writes the archive segments and the checkpoint in one
        # transaction, holding the lock across SqliteSaver.put's own use of it.
        self.lock = threading.RLock()  # type: ignore[assignment]
        self._raw_serde = self.serde
        self.archive = MessageArchive(self._raw_serde, self._fetch_segments)
        self.serde = ArchivingSerde(self._raw_serde, self.archive)
        self._reducers: dict[str, Reducer] = dict(
            reducers or {MESSAGES_CHANNEL: messages_delta_reducer}
        )
        self._memory: OrderedDict[tuple[str, str, str], tuple[str, list[Any]]] = OrderedDict()
        self._memory_lock = threading.Lock()
        self.memory_hits = 0  # observable in tests and the benchmark

    # -- memory ---------------------------------------------------------------------

    def _recall(self, key: tuple[str, str, str]) -> tuple[str, list[Any]] | None:
        with self._memory_lock:
            entry = self._memory.get(key)
            if entry is not None:
                self._memory.move_to_end(key)
            return entry

    def _remember(self, key: tuple[str, str, str], checkpoint_id: str, value: list[Any]) -> None:
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

    def forget(self, thread_id: str | None = None) -> None:
        """Drop remembered values and archive segments (of one thread, or all)."""
        with self._memory_lock:
            for key in [k for k in self._memory if thread_id is None or k[0] == thread_id]:
                del self._memory[key]
        self.archive.forget(thread_id)

    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread's checkpoints, writes and archived segments; forget its value."""
        self.forget(thread_id)
        with self.lock:
            with self.cursor(transaction=False) as cur:
                cur.execute(f"DELETE FROM {ARCHIVE_TABLE} WHERE thread_id = ?", (str(thread_id),))
            super().delete_thread(thread_id)  # commits both

    # -- archive ----------------------------------------------------------------------

    def setup(self) -> None:
        """LangGraph's tables plus the archive table (idempotent)."""
        if self.is_setup:
            return
        super().setup()
        try:
            self.conn.execute(SQLITE_CREATE_ARCHIVE)
            self.conn.commit()
        except sqlite3.OperationalError as exc:
            # A read-only database from before the archive holds no references to it.
            if "readonly database" not in str(exc):
                raise

    def _fetch_segments(
        self, thread_id: str, checkpoint_ns: str, digests: Sequence[str]
    ) -> dict[str, SegmentRow]:
        # Called while decoding, i.e. inside the saver's own cursor blocks (lock held):
        # a plain statement on the same connection, no lock of its own.
        found: dict[str, SegmentRow] = {}
        try:
            for batch in batched(digests):
                marks = ",".join("?" for _ in batch)
                for digest, type_, data, count, raw in self.conn.execute(
                    f"SELECT segment, type, data, messages, raw_bytes FROM {ARCHIVE_TABLE} "
                    f"WHERE thread_id = ? AND checkpoint_ns = ? AND segment IN ({marks})",
                    (thread_id, checkpoint_ns, *batch),
                ):
                    found[digest] = (type_, data, count, raw)
        except sqlite3.OperationalError as exc:
            if "no such table" not in str(exc):
                raise
        return found

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
                    present = set(self._fetch_segments(thread_id, checkpoint_ns, plan.digests))
                    rows = self.archive.rows_to_write(plan, present)
                    cur.executemany(
                        f"INSERT OR IGNORE INTO {ARCHIVE_TABLE} (thread_id, checkpoint_ns, "
                        "segment, type, data, messages, raw_bytes) VALUES (?, ?, ?, ?, ?, ?, ?)",
                        [r.row(thread_id, checkpoint_ns) for r in rows],
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
        if len(channels) != 1 or channels[0] not in self._reducers:
            return super().get_delta_channel_history(config=config, channels=channels)
        channel = channels[0]
        thread_id = str(config["configurable"]["thread_id"])
        checkpoint_ns = str(config["configurable"].get("checkpoint_ns", ""))
        checkpoint_id = get_checkpoint_id(config)
        if not checkpoint_id:
            target = self.get_tuple(config)
            if target is None:
                return {channel: {"writes": []}}
            checkpoint_id = str(target.config["configurable"]["checkpoint_id"])
        key = (thread_id, checkpoint_ns, channel)
        remembered = self._recall(key)
        history = self._history(
            thread_id, checkpoint_ns, checkpoint_id, channel, remembered
        ) or super().get_delta_channel_history(
            config={
                "configurable": {
                    "thread_id": thread_id,
                    "checkpoint_ns": checkpoint_ns,
                    "checkpoint_id": checkpoint_id,
                }
            },
            channels=channels,
        )
        entry = history[channel]
        rebuilt = DeltaChannel(self._reducers[channel], list).from_checkpoint(
            entry.get("seed", MISSING)
        )
        rebuilt.replay_writes(entry["writes"])
        self._remember(key, checkpoint_id, list(rebuilt.value))
        return history

    def _history(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        channel: str,
        remembered: tuple[str, list[Any]] | None,
    ) -> dict[str, DeltaChannelHistory] | None:
        """The history seeded from ``remembered``, or None when the walk misses it."""
        if remembered is None:
            return None
        remembered_id, value = remembered
        if remembered_id == checkpoint_id:
            return {channel: {"seed": list(value), "writes": []}}
        chain: list[str] = []
        hit = False
        with self.cursor(transaction=False) as cur:
            cur.execute(
                DELTA_STAGE1_SQL,
                (thread_id, checkpoint_ns, checkpoint_id, thread_id, checkpoint_ns),
            )
            started = False
            for cid, type_tag, blob in cur:
                if not started:
                    started = cid == checkpoint_id
                    continue
                if cid in chain:
                    break  # a loop (INSERT OR REPLACE of an old id): give up
                chain.append(cid)
                if cid == remembered_id:
                    hit = True
                    break
                # The raw decoder: only the presence of a snapshot matters here.
                ckpt = self._raw_serde.loads_typed((type_tag, blob))
                if channel in (ckpt.get("channel_values") or {}):
                    break  # a snapshot comes first: the normal path uses it
            if not hit:
                return None
            sql = build_delta_stage2_sql(
                has_task_path=sqlite_has_task_path(self), chain_lens=[len(chain)]
            )
            cur.execute(sql, [thread_id, checkpoint_ns, channel, *chain])
            rows = cast("list[tuple[str, str, str, int, str, bytes, str]]", cur.fetchall())
        self.memory_hits += 1
        return build_delta_channels_writes_history(
            channels=[channel],
            chain_by_ch={channel: chain},
            seed_val_by_ch={channel: list(value)},
            seeded={channel},
            stage2_rows=rows,
            serde=self.serde,
        )
