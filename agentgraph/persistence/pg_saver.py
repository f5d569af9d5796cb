"""PostgreSQL checkpointer that stores ``messages`` snapshots archived.

``PostgresSaver`` keeps every channel value in ``checkpoint_blobs`` and nothing prunes
a PostgreSQL store, so each ``messages`` snapshot (every 200 updates) used to add a full
copy of the transcript for good. :class:`AgentPostgresSaver` stores the history before
the last compaction boundary once, as segments in ``agentgraph_archive``, and the
snapshot blob as a reference plus the live tail (``persistence/archive.py``).

Segments are written before the checkpoint that first names them (separate pooled
statements; PostgreSQL deletes segments only with their session, so a segment is
never removed between the two), and deleting a thread deletes its segments.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata
from langgraph.checkpoint.postgres import PostgresSaver
from psycopg_pool import ConnectionPool

from agentgraph.persistence.archive import (
    ARCHIVE_TABLE,
    ArchivingSerde,
    MessageArchive,
    SegmentRow,
)
from agentgraph.private_api import DeltaSnapshot

MESSAGES_CHANNEL = "messages"


class AgentPostgresSaver(PostgresSaver):
    """``PostgresSaver`` whose ``messages`` snapshots keep archived history by reference.

    Args:
        conn: A connection pool (or one autocommit connection with dict rows).
    """

    def __init__(self, conn: ConnectionPool[Any] | psycopg.Connection[Any]) -> None:
        super().__init__(conn)
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
            cur.execute(
                f"SELECT segment, type, data, messages, raw_bytes FROM {ARCHIVE_TABLE} "
                "WHERE thread_id = %s AND checkpoint_ns = %s AND segment = ANY(%s)",
                (thread_id, checkpoint_ns, list(digests)),
            )
            rows = cur.fetchall()
        found: dict[str, SegmentRow] = {}
        for row in rows:
            values = list(row.values()) if isinstance(row, dict) else list(row)
            digest, type_, data, count, raw = values
            found[str(digest)] = (str(type_), bytes(data), int(count), int(raw))
        return found

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint; a ``messages`` snapshot is stored archived."""
        snapshot = (checkpoint.get("channel_values") or {}).get(MESSAGES_CHANNEL)
        if isinstance(snapshot, DeltaSnapshot):
            thread_id = str(config["configurable"]["thread_id"])
            checkpoint_ns = str(config["configurable"].get("checkpoint_ns", ""))
            plan = self.archive.plan(thread_id, checkpoint_ns, snapshot.value)
            if plan is not None:
                present = self._fetch_present(thread_id, checkpoint_ns, plan.digests)
                rows = self.archive.rows_to_write(plan, present)
                if rows:
                    with self._own_connection() as conn, conn.cursor() as cur:
                        cur.executemany(
                            f"INSERT INTO {ARCHIVE_TABLE} (thread_id, checkpoint_ns, segment, "
                            "type, data, messages, raw_bytes) VALUES (%s, %s, %s, %s, %s, %s, %s) "
                            "ON CONFLICT DO NOTHING",
                            [r.row(thread_id, checkpoint_ns) for r in rows],
                        )
                checkpoint = {
                    **checkpoint,
                    "channel_values": {
                        **checkpoint["channel_values"],
                        MESSAGES_CHANNEL: DeltaSnapshot(plan.reference),
                    },
                }
        return super().put(config, checkpoint, metadata, new_versions)

    def _fetch_present(self, thread_id: str, checkpoint_ns: str, digests: list[str]) -> set[str]:
        with self._own_connection() as conn, conn.cursor() as cur:
            cur.execute(
                f"SELECT segment FROM {ARCHIVE_TABLE} "
                "WHERE thread_id = %s AND checkpoint_ns = %s AND segment = ANY(%s)",
                (thread_id, checkpoint_ns, digests),
            )
            rows = cur.fetchall()
        return {str(next(iter(r.values())) if isinstance(r, dict) else r[0]) for r in rows}

    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread's checkpoints, writes and archived segments."""
        self.archive.forget(str(thread_id))
        super().delete_thread(thread_id)
        with self._own_connection() as conn:
            conn.execute(f"DELETE FROM {ARCHIVE_TABLE} WHERE thread_id = %s", (str(thread_id),))
