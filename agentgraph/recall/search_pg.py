"""The transcript index in PostgreSQL (see :mod:`agentgraph.recall.search`).

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

from agentgraph.recall.search import (
    SEARCH_CANDIDATES_MAX,
    SearchHit,
    history_docs,
    rank,
)

_CREATE_TABLE = """CREATE TABLE IF NOT EXISTS agentgraph_history (
    thread_id TEXT NOT NULL,
    msg_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    role TEXT NOT NULL,
    body TEXT NOT NULL,
    tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED,
    PRIMARY KEY (thread_id, msg_id)
)"""
_CREATE_INDEX = (
    "CREATE INDEX IF NOT EXISTS agentgraph_history_tsv ON agentgraph_history USING GIN (tsv)"
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
        self.rebuilt = 0

    @staticmethod
    def setup(conn: psycopg.Connection[Any]) -> None:
        """Create the table and its index when missing (the caller holds the set-up lock)."""
        conn.execute(_CREATE_TABLE)
        conn.execute(_CREATE_INDEX)

    def sync(self, thread_id: str, messages: Sequence[BaseMessage]) -> None:
        """Bring the thread's rows in step with ``messages`` (the whole stored transcript)."""
        docs = {d.msg_id: d for d in history_docs(messages)}
        with self._lock, self._pool.connection() as conn:
            stored = {
                row["msg_id"]: row["position"]
                for row in conn.execute(
                    "SELECT msg_id, position FROM agentgraph_history WHERE thread_id = %s",
                    (thread_id,),
                )
            }
            gone = [msg_id for msg_id in stored if msg_id not in docs]
            moved = [
                (d.position, thread_id, msg_id)
                for msg_id, d in docs.items()
                if msg_id in stored and stored[msg_id] != d.position
            ]
            new = [d for msg_id, d in docs.items() if msg_id not in stored]
            if not (gone or moved or new):
                return
            with conn.transaction():
                if gone:
                    conn.execute(
                        "DELETE FROM agentgraph_history WHERE thread_id = %s AND msg_id = ANY(%s)",
                        (thread_id, gone),
                    )
                with conn.cursor() as cur:
                    if moved:
                        cur.executemany(
                            "UPDATE agentgraph_history SET position = %s "
                            "WHERE thread_id = %s AND msg_id = %s",
                            moved,
                        )
                    if new:
                        cur.executemany(
                            "INSERT INTO agentgraph_history "
                            "(thread_id, msg_id, position, role, body) "
                            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                            [
                                # NUL cannot be stored in a Postgres text column.
                                (thread_id, d.msg_id, d.position, d.role, d.body.replace("\0", ""))
                                for d in new
                            ],
                        )

    def search(
        self, thread_id: str, messages: Sequence[BaseMessage], terms: Sequence[str], limit: int
    ) -> list[SearchHit]:
        """Sync the thread, then return its best ``limit`` hits for ``terms``."""
        self.sync(thread_id, messages)
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
