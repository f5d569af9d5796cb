"""PostgreSQL store for teams: ``AGENTGRAPH_DATABASE_URL=postgresql://…``.

The LangGraph checkpoints go to ``AgentPostgresSaver`` (``PostgresSaver`` of
``langgraph-checkpoint-postgres`` storing ``messages`` snapshots archived, see
``persistence/pg_saver.py``) and
the session index to :class:`PostgresSessionIndex` (same table and columns as the SQLite
index), both over one ``psycopg_pool.ConnectionPool``. Many agentgraph processes on many
machines can share one database: every write is a short autocommitted statement, and a
thread's checkpoints are keyed by its id.

Connection problems become one-line :class:`~agentgraph.errors.StoreError` messages in
which the password is masked.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from agentgraph.capabilities.recall.search_pg import PostgresHistoryIndex
from agentgraph.errors import StoreError
from agentgraph.persistence.index import _COLUMNS, SessionInfo, list_filter
from agentgraph.persistence.leases import PostgresLeases
from agentgraph.persistence.migrations import migrate_postgres
from agentgraph.persistence.store import Store

POSTGRES_POOL_MIN_SIZE = 1
POSTGRES_POOL_MAX_SIZE_DEFAULT = 10
POSTGRES_CONNECT_TIMEOUT_S_DEFAULT = 10.0
# How long a caller waits for a free pooled connection before giving up.
POSTGRES_POOL_WAIT_S = 30.0
# Set-up (table creation, migrations) by another process: how long to wait, how often
# to look again.
POSTGRES_SETUP_WAIT_S = 120.0
POSTGRES_SETUP_POLL_S = 0.05
MASK = "***"
REASON_MAX_CHARS = 200
URL_SCHEMES = ("postgresql", "postgres")
# libpq never echoes the password; masking a 1-3 character one inside its message
# would only garble the words that happen to contain it.
PASSWORD_MASK_MIN_CHARS = 4

_PASSWORD_KV_RE = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)

# Several processes may run setup at once; serialize the DDL on one advisory lock.
_SETUP_LOCK_KEY = 0x61677467  # "agtg"


def mask_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (URL and ``key=value`` forms).

    Args:
        url: A libpq connection URL or keyword/value string.

    Returns:
        The same string, safe to print.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return _PASSWORD_KV_RE.sub(rf"\g<1>{MASK}", url)
    if parts.scheme in URL_SCHEMES:
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, host = netloc.rpartition("@")
            if ":" in userinfo:
                user = userinfo.split(":", 1)[0]
                netloc = f"{user}:{MASK}@{host}"
        query = _PASSWORD_KV_RE.sub(rf"\g<1>{MASK}", parts.query)
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    return _PASSWORD_KV_RE.sub(rf"\g<1>{MASK}", url)


def _password(url: str) -> str | None:
    try:
        return psycopg.conninfo.conninfo_to_dict(url).get("password")  # type: ignore[return-value]
    except psycopg.Error:
        return None


def describe_postgres_error(url: str, exc: BaseException) -> StoreError:
    """Turn a connection error into a one-line message naming the cause.

    Args:
        url: The configured URL (its password is masked in the message).
        exc: The psycopg or pool error.

    Returns:
        A StoreError whose text never contains the password.
    """
    raw = " ".join(str(exc).split())
    lowered = raw.lower()
    if "password authentication failed" in lowered or "authentication failed" in lowered:
        hint = "wrong user name or password"
    elif "does not exist" in lowered and "database" in lowered:
        hint = "the database does not exist (create it first)"
    elif "connection refused" in lowered or "could not connect" in lowered:
        hint = "the server is unreachable (is PostgreSQL running on that host and port?)"
    elif "timeout" in lowered or isinstance(exc, PoolTimeout):
        hint = "the server did not answer in time"
    elif "could not translate host name" in lowered or "name or service not known" in lowered:
        hint = "unknown host name"
    elif isinstance(exc, psycopg.ProgrammingError) or "invalid" in lowered:
        hint = "the URL is not valid"
    else:
        hint = "cannot use the database"
    reason = raw.removeprefix("connection failed: ")
    secret = _password(url)
    if secret and len(secret) >= PASSWORD_MASK_MIN_CHARS:
        reason = reason.replace(secret, MASK)
    reason = _PASSWORD_KV_RE.sub(rf"\g<1>{MASK}", reason)
    if len(reason) > REASON_MAX_CHARS:
        reason = reason[: REASON_MAX_CHARS - 1] + "…"
    return StoreError(
        f"session store {mask_url(url)}: {hint} ({reason}); check AGENTGRAPH_DATABASE_URL"
    )


class PostgresSessionIndex:
    """The session index in PostgreSQL (implements ``SessionIndex``).

    Args:
        pool: Connection pool; each call borrows one connection briefly.
    """

    def __init__(self, pool: ConnectionPool[Any]) -> None:
        self._pool = pool

    def upsert(self, info: SessionInfo) -> None:
        """Insert or replace the row for ``info.thread_id``."""
        values = [getattr(info, c) for c in _COLUMNS]
        placeholders = ",".join("%s" for _ in _COLUMNS)
        updates = ",".join(f"{c}=EXCLUDED.{c}" for c in _COLUMNS if c != "thread_id")
        with self._pool.connection() as conn:
            conn.execute(
                f"INSERT INTO agentgraph_sessions ({','.join(_COLUMNS)}) "
                f"VALUES ({placeholders}) ON CONFLICT (thread_id) DO UPDATE SET {updates}",
                values,
            )

    def set_message_count(self, thread_id: str, count: int) -> None:
        """Set the stored message count of an existing row, and nothing else of it (a
        running turn's progress: a title written meanwhile stays)."""
        with self._pool.connection() as conn:
            conn.execute(
                "UPDATE agentgraph_sessions SET message_count = %s WHERE thread_id = %s",
                (count, thread_id),
            )

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[SessionInfo]:
        with self._pool.connection() as conn:
            cur = conn.execute(
                f"SELECT {','.join(_COLUMNS)} FROM agentgraph_sessions {sql}",
                params,
            )
            rows = cur.fetchall()
        return [SessionInfo(*(row[c] for c in _COLUMNS)) for row in rows]

    def get(self, thread_id: str) -> SessionInfo | None:
        """The row for ``thread_id``, if any."""
        rows = self._rows("WHERE thread_id = %s", (thread_id,))
        return rows[0] if rows else None

    def delete(self, thread_id: str) -> None:
        """Remove the row (checkpoints are removed by the caller)."""
        with self._pool.connection() as conn:
            conn.execute("DELETE FROM agentgraph_sessions WHERE thread_id = %s", (thread_id,))

    def list_sessions(
        self, *, workspace: str | None = None, include_subagents: bool = False
    ) -> list[SessionInfo]:
        """Sessions, most recently updated first."""
        clause, params = list_filter("%s", workspace=workspace, include_subagents=include_subagents)
        return self._rows(f"{clause} ORDER BY updated_at DESC", params)

    def children(self, thread_id: str) -> list[SessionInfo]:
        """Subagent sessions started by ``thread_id``."""
        return self._rows("WHERE parent_thread_id = %s ORDER BY created_at", (thread_id,))


def _setup_schema(pool: ConnectionPool[Any], url: str) -> None:
    """Create or migrate all tables, one process at a time.

    agentgraph's own tables follow ``persistence/migrations.py``; LangGraph's are set
    up by LangGraph. ``PostgresSaver.setup()`` is not safe when several workers start
    against a fresh database together (two of them would insert the same migration
    row), so it runs under a session-level advisory lock. Waiters poll
    ``pg_try_advisory_lock`` instead of blocking in ``pg_advisory_lock``: LangGraph's
    migrations use ``CREATE INDEX CONCURRENTLY``, which waits for every open
    transaction, a blocked lock call included (that would deadlock).

    Args:
        pool: The store's pool.
        url: The database URL (named, password masked, when it is refused).

    Raises:
        StoreError: another process held the set-up lock for too long.
        SchemaTooNew: the database was written by a newer agentgraph.
    """
    from langgraph.store.postgres import PostgresStore

    from agentgraph.persistence.pg_saver import AgentPostgresSaver

    with pool.connection() as conn:
        deadline = time.monotonic() + POSTGRES_SETUP_WAIT_S
        while not conn.execute(
            "SELECT pg_try_advisory_lock(%s) AS locked", (_SETUP_LOCK_KEY,)
        ).fetchone()["locked"]:
            if time.monotonic() > deadline:
                raise StoreError(
                    f"another agentgraph process has been setting up the database for "
                    f"over {POSTGRES_SETUP_WAIT_S:g}s; try again later"
                )
            time.sleep(POSTGRES_SETUP_POLL_S)
        try:
            # agentgraph's own tables first: a database written by a newer version is
            # refused before LangGraph's set-up writes anything.
            migrate_postgres(conn, mask_url(url))
            AgentPostgresSaver(conn).setup()  # LangGraph's tables (ours are up to date)
            PostgresStore(conn).setup()  # long-term memory (capabilities/recall/memory.py)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (_SETUP_LOCK_KEY,))


def _probe(url: str, connect_timeout_s: float) -> None:
    """Connect once so a bad URL, host or password fails with libpq's own reason."""
    try:
        with psycopg.connect(url, connect_timeout=max(1, round(connect_timeout_s))) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        raise describe_postgres_error(url, exc) from None


@contextmanager
def open_postgres_store(
    url: str,
    *,
    pool_max_size: int = POSTGRES_POOL_MAX_SIZE_DEFAULT,
    connect_timeout_s: float = POSTGRES_CONNECT_TIMEOUT_S_DEFAULT,
) -> Iterator[Store]:
    """Open the checkpointer and session index on PostgreSQL.

    Creates the tables on first use (``setup()`` is idempotent). Database errors raised
    while the store is in use (the server went away…) leave as StoreError too.

    Args:
        url: ``postgresql://user:password@host:port/dbname`` (or a libpq key=value string).
        pool_max_size: Most connections this process holds open.
        connect_timeout_s: Seconds to wait for the server when connecting.

    Yields:
        The opened store.

    Raises:
        StoreError: unreachable server, wrong credentials, bad URL, failed set-up.
    """
    from langgraph.store.postgres import PostgresStore

    from agentgraph.persistence.pg_saver import AgentPostgresSaver

    _probe(url, connect_timeout_s)
    pool: ConnectionPool[Any] = ConnectionPool(
        url,
        min_size=POSTGRES_POOL_MIN_SIZE,
        max_size=max(POSTGRES_POOL_MIN_SIZE, pool_max_size),
        timeout=POSTGRES_POOL_WAIT_S,
        # PostgresSaver needs autocommit and dict rows; prepared statements break
        # behind transaction-pooling proxies (PgBouncer), so they are off.
        kwargs={
            "autocommit": True,
            "prepare_threshold": None,
            "row_factory": dict_row,
            "connect_timeout": max(1, round(connect_timeout_s)),
        },
        open=False,
        name="agentgraph",
    )
    # One connection of its own holds this process's thread locks for the whole run.
    leases = PostgresLeases(url, connect_timeout_s)
    try:
        try:
            pool.open(wait=True, timeout=connect_timeout_s)
            _setup_schema(pool, url)
            saver = AgentPostgresSaver(pool)
            index = PostgresSessionIndex(pool)
        except (psycopg.Error, PoolTimeout) as exc:
            raise describe_postgres_error(url, exc) from None
        try:
            yield Store(
                checkpointer=saver,
                index=index,
                location=mask_url(url),
                leases=leases,
                history=PostgresHistoryIndex(pool),
                memory=PostgresStore(pool),
            )
        except psycopg.OperationalError as exc:
            raise describe_postgres_error(url, exc) from None
    finally:
        leases.close()
        pool.close()
