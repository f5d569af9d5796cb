"""agentgraph's own tables: one ordered list of named migrations per backend.

Every table agentgraph owns (the session index, the thread leases, the message archive,
the transcript search index) is created and changed here and nowhere else. A migration
is a name and its steps; :func:`migrate_sqlite` and :func:`migrate_postgres` apply the
ones a database lacks, in list order, inside one transaction that also records each
name in ``agentgraph_migrations`` — so each runs exactly once per database. LangGraph's
own tables (checkpoints, the long-term memory store) are set up by LangGraph.

A database is upgraded by whichever process opens it first: SQLite serializes the
processes on ``BEGIN IMMEDIATE``, PostgreSQL on a transaction-level advisory lock. When
the database is up to date, migrating is one ``SELECT``.

A database that names a migration this version does not know was written by a newer
agentgraph; it is refused with :class:`~agentgraph.errors.SchemaTooNew` before anything
is written to it.

The first migrations of each list adopt a database written before the list existed:
their statements (``IF NOT EXISTS``, columns added only when missing) are exactly what
that version ran on every open, so they find its tables as they are. A migration,
once released, never changes: a new schema change is a new entry at the end of both
lists (see docs/sessions.md, "Changing the schema").
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from agentgraph.errors import SchemaTooNew

MIGRATIONS_TABLE = "agentgraph_migrations"
# Serializes migrating processes on PostgreSQL (a transaction-level advisory lock).
# Not the set-up lock of persistence/postgres.py: a process waiting for this one inside
# its transaction must never wait for a holder of that one, which runs LangGraph's
# ``CREATE INDEX CONCURRENTLY`` (it waits for every open transaction).
POSTGRES_MIGRATION_LOCK_KEY = 0x61676D67  # "agmg"
# Migration names shown in a refusal, at most.
UNKNOWN_NAMES_SHOWN = 3

# A step is one SQL statement, or a function given the connection (for what SQL alone
# cannot say: "add this column unless it is there").
Step = str | Callable[[Any], object]


@dataclass(frozen=True)
class Migration:
    """One schema change: a unique name (``NNNN_what``) and the steps that make it."""

    name: str
    steps: tuple[Step, ...]


# --- SQLite --------------------------------------------------------------------------

_SQLITE_MIGRATIONS_DDL = f"""CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} (
    name TEXT PRIMARY KEY,
    applied_at REAL NOT NULL
)"""


def _sqlite_add_column(table: str, column: str, definition: str) -> Step:
    """A step adding ``column`` to ``table`` unless a release before the list added it."""

    def add(conn: sqlite3.Connection) -> None:
        present = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        if column not in present:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {definition}")

    return add


# The message archive (persistence/archive.py). The async savers, which LangGraph's
# server hands connections agentgraph never opens, create this one table themselves.
SQLITE_ARCHIVE_TABLE = """CREATE TABLE IF NOT EXISTS agentgraph_archive (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    segment TEXT NOT NULL,
    type TEXT NOT NULL,
    data BLOB NOT NULL,
    messages INTEGER NOT NULL,
    raw_bytes INTEGER NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, segment)
)"""
SQLITE_SEARCH_FTS = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS agentgraph_search_fts USING fts5("
    "words, content='', tokenize='unicode61 remove_diacritics 2')"
)
SQLITE_SEARCH_TABLES = (
    """CREATE TABLE IF NOT EXISTS agentgraph_search_texts (
        id INTEGER PRIMARY KEY,
        digest BLOB NOT NULL UNIQUE,
        body NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS agentgraph_search_docs (
        id INTEGER PRIMARY KEY,
        thread_id TEXT NOT NULL,
        msg_id TEXT NOT NULL,
        position INTEGER NOT NULL,
        role TEXT NOT NULL,
        text_id INTEGER NOT NULL,
        UNIQUE (thread_id, msg_id)
    )""",
    "CREATE INDEX IF NOT EXISTS agentgraph_search_docs_text ON agentgraph_search_docs (text_id)",
)


def create_search_fts(conn: sqlite3.Connection) -> bool:
    """Create the word index of the transcript search when SQLite has FTS5.

    Also how the search index rebuilds a damaged index (capabilities/recall/search.py).

    Returns:
        Whether the index exists (False: an SQLite built without FTS5; searches scan).
    """
    try:
        conn.execute(SQLITE_SEARCH_FTS)
    except sqlite3.OperationalError as exc:
        if "fts5" not in str(exc):
            raise
        return False
    return True


SQLITE_MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "0001_sessions",
        (
            """CREATE TABLE IF NOT EXISTS agentgraph_sessions (
                thread_id TEXT PRIMARY KEY,
                title TEXT NOT NULL DEFAULT '',
                title_source TEXT NOT NULL DEFAULT 'first_message',
                workspace TEXT NOT NULL DEFAULT '',
                git_branch TEXT,
                created_at REAL NOT NULL,
                updated_at REAL NOT NULL,
                message_count INTEGER NOT NULL DEFAULT 0,
                input_tokens INTEGER NOT NULL DEFAULT 0,
                output_tokens INTEGER NOT NULL DEFAULT 0,
                context_tokens INTEGER NOT NULL DEFAULT 0,
                parent_thread_id TEXT,
                context_id TEXT NOT NULL DEFAULT 'main',
                compactions INTEGER NOT NULL DEFAULT 0
            )""",
            "CREATE INDEX IF NOT EXISTS agentgraph_sessions_ws "
            "ON agentgraph_sessions(workspace, updated_at)",
        ),
    ),
    Migration(
        "0002_sessions_usage",
        (
            # Existing rows: no cached tokens, an unknown cost (spent before prices).
            _sqlite_add_column(
                "agentgraph_sessions", "cached_input_tokens", "INTEGER NOT NULL DEFAULT 0"
            ),
            _sqlite_add_column("agentgraph_sessions", "cost_usd", "REAL"),
        ),
    ),
    Migration(
        "0003_sessions_model",
        (_sqlite_add_column("agentgraph_sessions", "model", "TEXT NOT NULL DEFAULT ''"),),
    ),
    Migration(
        "0004_leases",
        (
            """CREATE TABLE IF NOT EXISTS agentgraph_leases (
                thread_id TEXT PRIMARY KEY,
                pid INTEGER NOT NULL,
                start_time INTEGER,
                host TEXT NOT NULL,
                pid_space TEXT NOT NULL,
                since REAL NOT NULL,
                heartbeat REAL NOT NULL
            )""",
        ),
    ),
    Migration("0005_archive", (SQLITE_ARCHIVE_TABLE,)),
    Migration("0006_search", (*SQLITE_SEARCH_TABLES, create_search_fts)),
)


# --- PostgreSQL ----------------------------------------------------------------------

_POSTGRES_MIGRATIONS_DDL = f"""CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} (
    name TEXT PRIMARY KEY,
    applied_at DOUBLE PRECISION NOT NULL
)"""

POSTGRES_ARCHIVE_TABLE = """CREATE TABLE IF NOT EXISTS agentgraph_archive (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    segment TEXT NOT NULL,
    type TEXT NOT NULL,
    data BYTEA NOT NULL,
    messages INTEGER NOT NULL,
    raw_bytes BIGINT NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, segment)
)"""

POSTGRES_MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "0001_sessions",
        (
            """CREATE TABLE IF NOT EXISTS agentgraph_sessions (
                thread_id TEXT PRIMARY KEY,
                title TEXT NOT NULL DEFAULT '',
                title_source TEXT NOT NULL DEFAULT 'first_message',
                workspace TEXT NOT NULL DEFAULT '',
                git_branch TEXT,
                created_at DOUBLE PRECISION NOT NULL,
                updated_at DOUBLE PRECISION NOT NULL,
                message_count INTEGER NOT NULL DEFAULT 0,
                input_tokens BIGINT NOT NULL DEFAULT 0,
                output_tokens BIGINT NOT NULL DEFAULT 0,
                context_tokens BIGINT NOT NULL DEFAULT 0,
                parent_thread_id TEXT,
                context_id TEXT NOT NULL DEFAULT 'main',
                compactions INTEGER NOT NULL DEFAULT 0
            )""",
            "CREATE INDEX IF NOT EXISTS agentgraph_sessions_ws "
            "ON agentgraph_sessions(workspace, updated_at)",
        ),
    ),
    Migration(
        "0002_sessions_usage",
        (
            "ALTER TABLE agentgraph_sessions "
            "ADD COLUMN IF NOT EXISTS cached_input_tokens BIGINT NOT NULL DEFAULT 0",
            "ALTER TABLE agentgraph_sessions ADD COLUMN IF NOT EXISTS cost_usd DOUBLE PRECISION",
        ),
    ),
    Migration(
        "0003_sessions_model",
        (
            "ALTER TABLE agentgraph_sessions "
            "ADD COLUMN IF NOT EXISTS model TEXT NOT NULL DEFAULT ''",
        ),
    ),
    Migration(
        "0004_leases",
        (
            """CREATE TABLE IF NOT EXISTS agentgraph_leases (
                thread_id TEXT PRIMARY KEY,
                pid INTEGER NOT NULL,
                start_time BIGINT,
                host TEXT NOT NULL,
                pid_space TEXT NOT NULL,
                since DOUBLE PRECISION NOT NULL,
                heartbeat DOUBLE PRECISION NOT NULL
            )""",
        ),
    ),
    Migration("0005_archive", (POSTGRES_ARCHIVE_TABLE,)),
    Migration(
        "0006_search",
        (
            # The ``simple`` configuration: no stemming, no stop words (identifiers and
            # any language's words are kept as written).
            """CREATE TABLE IF NOT EXISTS agentgraph_history (
                thread_id TEXT NOT NULL,
                msg_id TEXT NOT NULL,
                position INTEGER NOT NULL,
                role TEXT NOT NULL,
                body TEXT NOT NULL,
                tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED,
                PRIMARY KEY (thread_id, msg_id)
            )""",
            "CREATE INDEX IF NOT EXISTS agentgraph_history_tsv "
            "ON agentgraph_history USING GIN (tsv)",
        ),
    ),
)


# --- applying ------------------------------------------------------------------------


def pending(migrations: Sequence[Migration], applied: Iterable[str], where: str) -> list[Migration]:
    """The migrations ``applied`` lacks, in order.

    Args:
        migrations: This version's list.
        applied: The names the database records.
        where: The database, as named in a refusal.

    Raises:
        SchemaTooNew: the database records a name this version does not know.
    """
    done = set(applied)
    unknown = sorted(done - {m.name for m in migrations})
    if unknown:
        shown = ", ".join(unknown[:UNKNOWN_NAMES_SHOWN])
        more = len(unknown) - UNKNOWN_NAMES_SHOWN
        extra = f" and {more} more" if more > 0 else ""
        raise SchemaTooNew(
            f"session store {where} was written by a newer agentgraph (unknown schema "
            f"migration {shown}{extra}); it was left untouched — upgrade agentgraph to use it"
        )
    return [m for m in migrations if m.name not in done]


def _run_steps(conn: Any, migration: Migration) -> None:
    for step in migration.steps:
        if isinstance(step, str):
            conn.execute(step)
        else:
            step(conn)


def _sqlite_where(conn: sqlite3.Connection) -> str:
    row = conn.execute("PRAGMA database_list").fetchone()
    return str(row[2]) if row and row[2] else "(in memory)"


def _sqlite_applied(conn: sqlite3.Connection) -> list[str]:
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (MIGRATIONS_TABLE,)
    ).fetchone()
    if not exists:
        return []
    return [str(name) for (name,) in conn.execute(f"SELECT name FROM {MIGRATIONS_TABLE}")]


def migrate_sqlite(conn: sqlite3.Connection) -> None:
    """Bring ``conn``'s database up to this version's schema (see the module docstring).

    On a read-only connection nothing is written: a database from before a migration is
    read as far as it goes.

    Args:
        conn: A connection outside any transaction (its isolation level is kept).

    Raises:
        SchemaTooNew: the database was written by a newer agentgraph.
        sqlite3.Error: the database is locked past its busy timeout, damaged…
    """
    where = _sqlite_where(conn)
    if not pending(SQLITE_MIGRATIONS, _sqlite_applied(conn), where):
        return
    isolation = conn.isolation_level
    conn.isolation_level = None  # the transaction below is begun explicitly
    try:
        # IMMEDIATE: the write lock before reading what is applied, so two processes
        # never both decide to run the same migration.
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(_SQLITE_MIGRATIONS_DDL)
            for migration in pending(SQLITE_MIGRATIONS, _sqlite_applied(conn), where):
                _run_steps(conn, migration)
                conn.execute(
                    f"INSERT INTO {MIGRATIONS_TABLE} (name, applied_at) VALUES (?, ?)",
                    (migration.name, time.time()),
                )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    except sqlite3.OperationalError as exc:
        if "readonly database" not in str(exc):
            raise
    finally:
        conn.isolation_level = isolation


def _postgres_applied(cur: Any) -> list[str]:
    cur.execute("SELECT to_regclass(%s) IS NOT NULL", (MIGRATIONS_TABLE,))
    row = cur.fetchone()
    if not row or not row[0]:
        return []
    cur.execute(f"SELECT name FROM {MIGRATIONS_TABLE}")
    return [str(r[0]) for r in cur.fetchall()]


def migrate_postgres(conn: Any, where: str = "(PostgreSQL)") -> None:
    """Bring ``conn``'s database up to this version's schema (see the module docstring).

    Args:
        conn: A ``psycopg.Connection`` (autocommit or not; any row factory).
        where: The database as named in a refusal (its URL, password masked).

    Raises:
        SchemaTooNew: the database was written by a newer agentgraph.
        psycopg.Error: the server failed.
    """
    from psycopg.rows import tuple_row

    with conn.cursor(row_factory=tuple_row) as cur:
        if not pending(POSTGRES_MIGRATIONS, _postgres_applied(cur), where):
            return
    with conn.transaction(), conn.cursor(row_factory=tuple_row) as cur:
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (POSTGRES_MIGRATION_LOCK_KEY,))
        cur.execute(_POSTGRES_MIGRATIONS_DDL)
        for migration in pending(POSTGRES_MIGRATIONS, _postgres_applied(cur), where):
            _run_steps(cur, migration)
            cur.execute(
                f"INSERT INTO {MIGRATIONS_TABLE} (name, applied_at) VALUES (%s, %s)",
                (migration.name, time.time()),
            )
