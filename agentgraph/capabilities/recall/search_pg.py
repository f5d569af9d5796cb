"""The transcript index in PostgreSQL (see :mod:`agentgraph.capabilities.recall.search`).

A generated ``tsvector`` column (``simple`` configuration: no stemming, no stop words, so
identifiers and any language's words are kept as written) with a GIN index finds whole
words, ranked by ``ts_rank``; ``ILIKE`` over the session's rows finds substrings and CJK
text, which the ``simple`` parser does not split into words.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import psycopg
from langchain_core.messages import BaseMessage
from psycopg_pool import ConnectionPool

from agentgraph.capabilities.recall.index_sync import IndexMirror, SyncPlan
from agentgraph.capabilities.recall.search import (
    SEARCH_CANDIDATES_MAX,
    HistoryDoc,
    SearchHit,
    docs_reading,
    history_docs,
    rank,
)


def like_pattern(term: str) -> str:
    """``%term%`` with ILIKE's wildcards in ``term`` escaped (default escape: backslash)."""
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class PostgresHistoryIndex:
    """Transcript index over the store's connection pool (implements ``HistoryIndex``).

    Args:
        pool: The store's pool (autocommit, dict rows).
    """

    def __init__(self, pool: ConnectionPool[Any]) -> None:
        self._pool = pool
        self._lock = threading.Lock()
        self._mirror: IndexMirror[HistoryDoc] = IndexMirror(history_docs)
        self.rebuilt = 0

    def sync(
        self, thread_id: str, messages: Sequence[BaseMessage], folder: str | None = None
    ) -> None:
        """Bring the thread's rows in step with ``messages`` (the whole stored transcript;
        ``folder``: the session's artifacts folder, see :func:`history_docs`)."""
        with self._lock, self._pool.connection() as conn:
            # Only what changed since this process last synced the thread is looked at.
            self._mirror.sync(
                thread_id,
                messages,
                lambda: self._stored(conn, thread_id),
                lambda plan: self._write(conn, thread_id, plan),
                docs_reading(folder),
            )

    @staticmethod
    def _stored(conn: psycopg.Connection[Any], thread_id: str) -> dict[str, int]:
        """The thread's rows: ``msg_id`` → position."""
        return {
            row["msg_id"]: row["position"]
            for row in conn.execute(
                "SELECT msg_id, position FROM agentgraph_history WHERE thread_id = %s",
                (thread_id,),
            )
        }

    @staticmethod
    def _write(conn: psycopg.Connection[Any], thread_id: str, plan: SyncPlan[HistoryDoc]) -> None:
        with conn.transaction():
            if plan.gone:
                conn.execute(
                    "DELETE FROM agentgraph_history WHERE thread_id = %s AND msg_id = ANY(%s)",
                    (thread_id, plan.gone),
                )
            with conn.cursor() as cur:
                if plan.moved:
                    cur.executemany(
                        "UPDATE agentgraph_history SET position = %s "
                        "WHERE thread_id = %s AND msg_id = %s",
                        [(position, thread_id, msg_id) for msg_id, position in plan.moved],
                    )
                if plan.new:
                    cur.executemany(
                        "INSERT INTO agentgraph_history "
                        "(thread_id, msg_id, position, role, body) "
                        "VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                        [
                            # NUL cannot be stored in a Postgres text column.
                            (thread_id, d.msg_id, d.position, d.role, d.body.replace("\0", ""))
                            for d in plan.new
                        ],
                    )

    def search(
        self,
        thread_id: str,
        messages: Sequence[BaseMessage],
        terms: Sequence[str],
        limit: int,
        folder: str | None = None,
    ) -> list[SearchHit]:
        """Sync the thread, then return its best ``limit`` hits for ``terms``."""
        # A search compares with the stored rows in full (the turns' syncs trust what
        # this process wrote): whatever another process did to them is repaired first.
        self._mirror.forget(thread_id)
        self.sync(thread_id, messages, folder)
        clean = [t.replace("\0", "") for t in terms]
        tsquery = " || ".join("plainto_tsquery('simple', %s)" for _ in clean)
        with self._pool.connection() as conn:
            rows = conn.execute(
                f"SELECT position, role, body, ts_rank(tsv, q) AS score "
                f"FROM agentgraph_history, (SELECT {tsquery} AS q) AS query "
                f"WHERE thread_id = %s AND (tsv @@ q OR body ILIKE ANY(%s)) "
                f"ORDER BY score DESC, position DESC LIMIT %s",
                (*clean, thread_id, [like_pattern(t) for t in clean], SEARCH_CANDIDATES_MAX),
            ).fetchall()
        return rank(
            [(r["position"], r["role"], r["body"], float(r["score"])) for r in rows], terms, limit
        )

    def delete_thread(self, thread_id: str) -> None:
        """Remove a thread's rows (its session was deleted)."""
        with self._pool.connection() as conn:
            conn.execute("DELETE FROM agentgraph_history WHERE thread_id = %s", (thread_id,))
        self._mirror.forget(thread_id)
