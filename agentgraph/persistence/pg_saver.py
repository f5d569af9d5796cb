"""PostgreSQL checkpointer that stores ``messages`` snapshots archived.

``PostgresSaver`` keeps every channel value in ``checkpoint_blobs`` and nothing prunes
a PostgreSQL store, so each ``messages`` snapshot (every 200 updates) used to add a full
copy of the transcript for good. :class:`AgentPostgresSaver` stores the history before
the last compaction boundary once, as segments in ``agentgraph_archive``, and the
snapshot blob as a reference plus the live tail (``persistence/archive.py``).

Segments are written before the checkpoint that first names them (separate pooled
statements). ``setup()`` creates the archive table with LangGraph's tables, so the saver
is used as LangGraph documents (construct, ``setup()``, use); deleting a thread deletes
its checkpoints, blobs, writes and segments in one transaction.
:class:`~agentgraph.persistence.aio.AsyncAgentPostgresSaver` is the same on
``AsyncPostgresSaver`` (``ainvoke`` / ``astream``), sharing the statements below.

:meth:`AgentPostgresSaver.prune_thread` prunes like the SQLite store: the same plan
(``persistence/prune.py``: the latest checkpoints and their replay chains down to one
snapshot), executed in one transaction that deletes the other checkpoints, their
writes, the channel blobs no kept checkpoint names and the archive segments no kept
snapshot names. It reads the thread's checkpoint rows without their values (one
snapshot interval after the previous prune) and decodes a snapshot's reference only
once per process. A prune and a snapshot's ``put`` exclude each other through an
advisory lock on the thread (the ``put`` holds it shared from its segment check until
its checkpoint is committed), so a prune never deletes a segment that a checkpoint
being written is about to name; ordinary ``put`` calls add rows a prune never reads
or deletes (a new checkpoint names the latest one's blobs or new ones).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import TYPE_CHECKING, Any

import psycopg
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.serde.base import SerializerProtocol
from psycopg import Pipeline
from psycopg_pool import ConnectionPool

from agentgraph.persistence.archive import (
    ARCHIVE_TABLE,
    ArchivingSerde,
    MessageArchive,
    SegmentRow,
    archived_put,
    referenced_digests,
)
from agentgraph.persistence.migrations import migrate_postgres
from agentgraph.persistence.prune import (
    _REFERENCES,
    DELTA_CHANNELS,
    PRUNE_KEEP_LATEST_CHECKPOINTS,
    SNAPSHOT_CACHE_MAX_ENTRIES,
    plan_prune,
    replay_anchors,
    replayed_by,
)

if TYPE_CHECKING:
    from agentgraph.persistence.aio import AsyncAgentPostgresSaver

__all__ = ["AgentPostgresSaver", "AsyncAgentPostgresSaver"]

MESSAGES_CHANNEL = "messages"
# Class of the two-key advisory locks between prunes and snapshot puts of a thread
# (the second key is a hash of the thread id; leases use the one-key form).
PRUNE_LOCK_CLASS = 0x61677072  # "agpr"

# Everything a thread has, deleted in one transaction.
PG_DELETE_THREAD = (
    f"DELETE FROM {ARCHIVE_TABLE} WHERE thread_id = %s",
    "DELETE FROM checkpoint_writes WHERE thread_id = %s",
    "DELETE FROM checkpoint_blobs WHERE thread_id = %s",
    "DELETE FROM checkpoints WHERE thread_id = %s",
)
PG_SELECT_SEGMENTS = (
    f"SELECT segment, type, data, messages, raw_bytes FROM {ARCHIVE_TABLE} "
    "WHERE thread_id = %s AND checkpoint_ns = %s AND segment = ANY(%s)"
)
PG_SELECT_PRESENT = (
    f"SELECT segment FROM {ARCHIVE_TABLE} "
    "WHERE thread_id = %s AND checkpoint_ns = %s AND segment = ANY(%s)"
)
PG_INSERT_SEGMENTS = (
    f"INSERT INTO {ARCHIVE_TABLE} (thread_id, checkpoint_ns, segment, type, data, messages, "
    "raw_bytes) VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING"
)
# Shared with other snapshot puts, exclusive with a prune of the thread: the segments
# found present stay until the checkpoint naming them commits.
PG_LOCK_FOR_PUT = "SELECT pg_advisory_lock_shared(%s, hashtext(%s))"
PG_UNLOCK_FOR_PUT = "SELECT pg_advisory_unlock_shared(%s, hashtext(%s))"

# A checkpoint holds a snapshot of ``channel`` when its version has a stored blob,
# the test LangGraph's own delta walk uses to end a chain.
_SNAPSHOT_EXISTS = (
    "EXISTS (SELECT 1 FROM checkpoint_blobs b WHERE b.thread_id = c.thread_id "
    "AND b.checkpoint_ns = c.checkpoint_ns AND b.channel = %s "
    "AND b.version = c.checkpoint -> 'channel_versions' ->> %s AND b.type <> 'empty')"
)


class AgentPostgresSaver(PostgresSaver):
    """``PostgresSaver`` whose ``messages`` snapshots keep archived history by reference.

    Args:
        conn: A connection pool (or one autocommit connection with dict rows).
        pipe: A pipeline of ``conn`` (as for ``PostgresSaver``).
        serde: The serializer (default: LangGraph's).
    """

    def __init__(
        self,
        conn: ConnectionPool[Any] | psycopg.Connection[Any],
        pipe: Pipeline | None = None,
        serde: SerializerProtocol | None = None,
    ) -> None:
        super().__init__(conn, pipe, serde)
        self._raw_serde = self.serde
        self.archive = MessageArchive(self._raw_serde, self._fetch_segments)
        self.serde = ArchivingSerde(self._raw_serde, self.archive)

    @contextmanager
    def _own_connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection outside PostgresSaver's lock (decoding happens while it is held)."""
        if isinstance(self.conn, ConnectionPool):
            with self.conn.connection() as conn:
                yield conn
        else:
            yield self.conn

    def _fetch_segments(
        self, thread_id: str, checkpoint_ns: str, digests: Sequence[str]
    ) -> dict[str, SegmentRow]:
        with self._own_connection() as conn, conn.cursor(binary=True) as cur:
            cur.execute(PG_SELECT_SEGMENTS, (thread_id, checkpoint_ns, list(digests)))
            return segment_rows(cur.fetchall())

    def setup(self) -> None:
        """agentgraph's migrations (the archive table), then LangGraph's (idempotent)."""
        with self.lock, self._own_connection() as conn:
            migrate_postgres(conn)
        if self.pipe:
            self.pipe.sync()
        super().setup()

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
        with self._own_connection() as conn:
            with self._guard():
                conn.execute(PG_LOCK_FOR_PUT, (PRUNE_LOCK_CLASS, thread_id))
            try:
                with self._guard(), conn.cursor() as cur:
                    cur.execute(PG_SELECT_PRESENT, (thread_id, checkpoint_ns, plan.digests))
                    present = present_segments(cur.fetchall())
                rows = self.archive.rows_to_write(plan, present)
                if rows:
                    with self._guard(), conn.cursor() as cur:
                        cur.executemany(
                            PG_INSERT_SEGMENTS, [r.row(thread_id, checkpoint_ns) for r in rows]
                        )
                return super().put(config, put.checkpoint, metadata, new_versions)
            finally:
                with self._guard():
                    conn.execute(PG_UNLOCK_FOR_PUT, (PRUNE_LOCK_CLASS, thread_id))

    def _guard(self) -> AbstractContextManager[Any]:
        # One connection is shared with PostgresSaver's statements from other threads
        # (its lock); a pool hands each statement a connection of its own.
        return nullcontext() if isinstance(self.conn, ConnectionPool) else self.lock

    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread's checkpoints, blobs, writes and archived segments in one
        transaction."""
        self.archive.forget(str(thread_id))
        with (
            self.lock,
            self._own_connection() as conn,
            conn.transaction(),
            conn.cursor() as cur,
        ):
            for sql in PG_DELETE_THREAD:
                cur.execute(sql, (str(thread_id),))

    def prune_thread(
        self,
        thread_id: str,
        *,
        keep_latest: int = PRUNE_KEEP_LATEST_CHECKPOINTS,
        delta_channels: Sequence[str] = DELTA_CHANNELS,
    ) -> tuple[int, int, int] | None:
        """Prune one thread's checkpoints in one transaction, as the SQLite store does.

        Args:
            thread_id: The thread.
            keep_latest: Newest checkpoints kept per namespace.
            delta_channels: Channels rebuilt from writes (their replay chains are kept).

        Returns:
            ``(checkpoints deleted, writes deleted, checkpoints kept)``, or None when
            another process is pruning the thread or writing a snapshot of it (the
            next prune catches up).
        """
        thread_id = str(thread_id)
        with (
            self._guard(),
            self._own_connection() as conn,
            conn.transaction(),
            conn.cursor() as cur,
        ):
            cur.execute(
                "SELECT pg_try_advisory_xact_lock(%s, hashtext(%s)) AS locked",
                (PRUNE_LOCK_CLASS, thread_id),
            )
            if not _first(cur.fetchone()):
                return None
            cur.execute(
                "SELECT DISTINCT checkpoint_ns FROM checkpoints WHERE thread_id = %s",
                (thread_id,),
            )
            namespaces = [str(_first(r)) for r in cur.fetchall()]
            totals = (0, 0, 0)
            anchors: list[str] = []
            # The root namespace first: what it keeps decides what the others keep.
            for ns in sorted(namespaces, key=bool):
                done = self._prune_namespace(
                    cur, thread_id, ns, keep_latest, delta_channels, anchors
                )
                totals = (totals[0] + done[0], totals[1] + done[1], totals[2] + done[2])
            return totals

    def _prune_namespace(
        self,
        cur: psycopg.Cursor[Any],
        thread_id: str,
        ns: str,
        keep_latest: int,
        delta_channels: Sequence[str],
        anchors: list[str],
    ) -> tuple[int, int, int]:
        """Prune one namespace; the root one (``""``) fills ``anchors`` for the others."""
        snapshot_test = " AND ".join(_SNAPSHOT_EXISTS for _ in delta_channels) or "FALSE"
        cur.execute(
            "SELECT c.checkpoint_id, c.parent_checkpoint_id, "
            "c.metadata -> 'counters_since_delta_snapshot' AS counters, "
            "c.checkpoint -> 'channel_versions' AS versions, "
            f"{snapshot_test} AS snapshot "
            "FROM checkpoints c WHERE c.thread_id = %s AND c.checkpoint_ns = %s "
            "ORDER BY c.checkpoint_id",
            [*(p for ch in delta_channels for p in (ch, ch)), thread_id, ns],
        )
        rows = [_values(r) for r in cur.fetchall()]
        checkpoints = [(str(r[0]), r[1], r[2] if isinstance(r[2], dict) else {}) for r in rows]
        if len(rows) <= keep_latest:
            if not ns:
                anchors.extend(replay_anchors(checkpoints, [c[0] for c in checkpoints]))
            return 0, 0, len(rows)
        is_snapshot = {str(r[0]): bool(r[4]) for r in rows}
        plan = plan_prune(
            checkpoints,
            keep_latest,
            delta_channels,
            is_snapshot.__getitem__,
            replayed_by([c[0] for c in checkpoints], anchors) if ns else (),
        )
        if not ns:
            anchors.extend(replay_anchors(checkpoints, plan.needed))
        if not plan.doomed:
            return 0, 0, len(plan.needed)
        cur.execute(
            "DELETE FROM checkpoint_writes WHERE thread_id = %s AND checkpoint_ns = %s "
            "AND checkpoint_id = ANY(%s)",
            (thread_id, ns, plan.doomed),
            prepare=False,
        )
        deleted_writes = max(cur.rowcount, 0)
        cur.execute(
            "DELETE FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = %s "
            "AND checkpoint_id = ANY(%s)",
            (thread_id, ns, plan.doomed),
            prepare=False,
        )
        # Blobs only doomed checkpoints name (a kept or newer one names its own
        # versions or the latest one's, never only a doomed one's).
        versions = {str(r[0]): dict(r[3] or {}) for r in rows}
        kept = {(ch, str(v)) for cid in plan.needed for ch, v in versions[cid].items()}
        garbage: dict[str, list[str]] = {}
        for cid in plan.doomed:
            for ch, v in versions[cid].items():
                if (ch, str(v)) not in kept:
                    garbage.setdefault(ch, []).append(str(v))
        for ch, vs in garbage.items():
            cur.execute(
                "DELETE FROM checkpoint_blobs WHERE thread_id = %s AND checkpoint_ns = %s "
                "AND channel = %s AND version = ANY(%s)",
                (thread_id, ns, ch, sorted(set(vs))),
                prepare=False,
            )
        referenced = self._referenced_segments(cur, thread_id, ns, plan.snapshots, versions)
        cur.execute(
            f"DELETE FROM {ARCHIVE_TABLE} WHERE thread_id = %s AND checkpoint_ns = %s "
            "AND segment <> ALL(%s)",
            (thread_id, ns, sorted(referenced)),
            prepare=False,
        )
        return len(plan.doomed), deleted_writes, len(plan.needed)

    def _referenced_segments(
        self,
        cur: psycopg.Cursor[Any],
        thread_id: str,
        ns: str,
        snapshots: set[str],
        versions: dict[str, dict[str, Any]],
    ) -> set[str]:
        """Segments the kept snapshots name (each snapshot decoded once per process)."""
        referenced: set[str] = set()
        for cid in snapshots:
            key = (thread_id, ns, cid)
            names = _REFERENCES.get(key)
            if names is None:
                version = versions[cid].get(MESSAGES_CHANNEL)
                cur.execute(
                    "SELECT type, blob FROM checkpoint_blobs WHERE thread_id = %s "
                    "AND checkpoint_ns = %s AND channel = %s AND version = %s",
                    (thread_id, ns, MESSAGES_CHANNEL, str(version)),
                )
                row = cur.fetchone()
                value: Any = None
                if row is not None:
                    type_, blob = _values(row)
                    if blob is not None:
                        value = self._raw_serde.loads_typed((str(type_), bytes(blob)))
                names = frozenset(referenced_digests(value))
                _REFERENCES[key] = names
                while len(_REFERENCES) > SNAPSHOT_CACHE_MAX_ENTRIES:
                    del _REFERENCES[next(iter(_REFERENCES))]
            referenced |= names
        return referenced


def _values(row: Any) -> list[Any]:
    """A row's values in column order (dict rows from the pool, tuples otherwise)."""
    return list(row.values()) if isinstance(row, dict) else list(row)


def _first(row: Any) -> Any:
    return _values(row)[0] if row is not None else None


def present_segments(rows: Sequence[Any]) -> set[str]:
    """The digests of ``PG_SELECT_PRESENT`` rows: the segments already stored."""
    return {str(_first(row)) for row in rows}


def segment_rows(rows: Sequence[Any]) -> dict[str, SegmentRow]:
    """Archive rows (``PG_SELECT_SEGMENTS``) by digest."""
    found: dict[str, SegmentRow] = {}
    for row in rows:
        digest, type_, data, count, raw = _values(row)
        found[str(digest)] = (str(type_), bytes(data), int(count), int(raw))
    return found


def __getattr__(name: str) -> Any:
    # The async saver is imported only when asked for: the CLI never is.
    if name == "AsyncAgentPostgresSaver":
        from agentgraph.persistence import aio

        return aio.AsyncAgentPostgresSaver
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
