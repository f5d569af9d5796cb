"""agentgraph's own tables are created and changed by one versioned migration list.

A database written before the list existed (tables present, no migrations table, some
columns missing) upgrades in place without losing a row; a database written by a newer
agentgraph is refused untouched; processes migrating one file or server at once apply
each migration exactly once.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from agentgraph.config import Settings
from agentgraph.persistence import open_store
from tests.cli_helpers import cli_env, run_cli

MIGRATIONS_TABLE = "agentgraph_migrations"
FUTURE_MIGRATION = "9999_written_by_a_newer_agentgraph"
CONCURRENT_MIGRATORS = 4
MIGRATOR_TIMEOUT_S = 60.0

# The DDL agentgraph 0.x (before the migration list) ran, verbatim: the session index
# as first released (no usage columns), as later created (cached tokens and cost, the
# model column still added by ALTER TABLE), the leases, archive and search tables.
FIRST_SESSIONS_SQLITE = """CREATE TABLE IF NOT EXISTS agentgraph_sessions (
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
)"""
MAIN_SESSIONS_SQLITE = FIRST_SESSIONS_SQLITE.replace(
    "compactions INTEGER NOT NULL DEFAULT 0\n)",
    "compactions INTEGER NOT NULL DEFAULT 0,\n"
    "    cached_input_tokens INTEGER NOT NULL DEFAULT 0,\n"
    "    cost_usd REAL\n)",
)
MAIN_MODEL_COLUMN_SQLITE = (
    "ALTER TABLE agentgraph_sessions ADD COLUMN model TEXT NOT NULL DEFAULT ''"
)
MAIN_OTHER_TABLES_SQLITE = (
    "CREATE INDEX IF NOT EXISTS agentgraph_sessions_ws "
    "ON agentgraph_sessions(workspace, updated_at)",
    """CREATE TABLE IF NOT EXISTS agentgraph_leases (
    thread_id TEXT PRIMARY KEY,
    pid INTEGER NOT NULL,
    start_time INTEGER,
    host TEXT NOT NULL,
    pid_space TEXT NOT NULL,
    since REAL NOT NULL,
    heartbeat REAL NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS agentgraph_archive (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    segment TEXT NOT NULL,
    type TEXT NOT NULL,
    data BLOB NOT NULL,
    messages INTEGER NOT NULL,
    raw_bytes INTEGER NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, segment)
)""",
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
    "CREATE VIRTUAL TABLE IF NOT EXISTS agentgraph_search_fts USING fts5("
    "words, content='', tokenize='unicode61 remove_diacritics 2')",
)
# Which columns of the session index each old layout had beyond the first release's.
SQLITE_LAYOUTS = {
    "first-release": (FIRST_SESSIONS_SQLITE,),
    "usage-columns": (MAIN_SESSIONS_SQLITE,),
    "model-column": (MAIN_SESSIONS_SQLITE, MAIN_MODEL_COLUMN_SQLITE),
}


def _fill_old_rows(conn: Any, mark: str) -> None:
    """Rows in every old table (``mark``: the driver's parameter placeholder)."""
    conn.execute(
        "INSERT INTO agentgraph_sessions (thread_id, title, created_at, updated_at, "
        f"input_tokens, message_count) VALUES ({mark}, {mark}, 1, 2, 500, 7)",
        ("old-thread", "written before migrations"),
    )
    conn.execute(
        "INSERT INTO agentgraph_leases (thread_id, pid, start_time, host, pid_space, since, "
        f"heartbeat) VALUES ({mark}, 1, 2, {mark}, {mark}, 3, 4)",
        ("old-thread", "elsewhere", "pid:[1]"),
    )
    conn.execute(
        "INSERT INTO agentgraph_archive (thread_id, checkpoint_ns, segment, type, data, "
        f"messages, raw_bytes) VALUES ({mark}, '', {mark}, 'msgpack', {mark}, 3, 99)",
        ("old-thread", "digest-1", b"\x00segment-bytes"),
    )


def _build_main_sqlite(path: Path, layout: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    with conn:
        for statement in (*SQLITE_LAYOUTS[layout], *MAIN_OTHER_TABLES_SQLITE):
            conn.execute(statement)
        _fill_old_rows(conn, "?")
        conn.execute(
            "INSERT INTO agentgraph_search_texts (id, digest, body) VALUES (1, ?, ?)",
            (b"d" * 16, "an old message"),
        )
        conn.execute(
            "INSERT INTO agentgraph_search_docs (thread_id, msg_id, position, role, text_id) "
            "VALUES ('old-thread', 'm1', 0, 'human', 1)"
        )
    conn.close()


def _sqlite_rows(path: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def _applied(path: Path) -> list[tuple[str, float]]:
    return [
        (str(name), float(at))
        for name, at in _sqlite_rows(path, f"SELECT name, applied_at FROM {MIGRATIONS_TABLE}")
    ]


@pytest.mark.parametrize("layout", sorted(SQLITE_LAYOUTS))
def test_sqlite_database_from_before_migrations_upgrades_in_place(
    settings: Settings, layout: str
) -> None:
    _build_main_sqlite(settings.db_path, layout)

    with open_store(settings) as store:
        info = store.index.get("old-thread")
        assert info is not None
        assert (info.title, info.input_tokens, info.message_count) == (
            "written before migrations",
            500,
            7,
        )
        assert info.cached_input_tokens == 0 and info.model == ""
        if layout == "first-release":
            assert info.cost_usd is None  # spent before prices were kept: unknown
        info.model, info.cost_usd = "gpt-4o-mini", 0.25
        store.index.upsert(info)

    applied = _applied(settings.db_path)
    names = [name for name, _at in applied]
    assert names and len(names) == len(set(names))
    assert _sqlite_rows(
        settings.db_path, "SELECT pid, host FROM agentgraph_leases WHERE thread_id = 'old-thread'"
    ) == [(1, "elsewhere")]
    assert _sqlite_rows(
        settings.db_path, "SELECT data, raw_bytes FROM agentgraph_archive WHERE segment='digest-1'"
    ) == [(b"\x00segment-bytes", 99)]
    assert _sqlite_rows(settings.db_path, "SELECT body FROM agentgraph_search_texts") == [
        ("an old message",)
    ]

    # Opening it again changes nothing: every migration ran exactly once.
    with open_store(settings) as store:
        again = store.index.get("old-thread")
        assert again is not None and again.model == "gpt-4o-mini" and again.cost_usd == 0.25
    assert _applied(settings.db_path) == applied


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_database_written_by_a_newer_agentgraph_is_refused_untouched(
    settings: Settings, home: Path, tmp_path: Path
) -> None:
    env = cli_env(home)
    db_path = home / ".agentgraph" / settings.db_path.name
    assert run_cli(["sessions", "list"], cwd=tmp_path, env=env).returncode == 0
    conn = sqlite3.connect(db_path)
    with conn:
        conn.execute(
            f"INSERT INTO {MIGRATIONS_TABLE} (name, applied_at) VALUES (?, 0)",
            (FUTURE_MIGRATION,),
        )
    conn.close()
    before = _file_digest(db_path)

    for args in (["sessions", "list"], ["sessions", "show", "anything"]):
        result = run_cli(args, cwd=tmp_path, env=env)
        assert result.returncode != 0, args
        assert "Traceback" not in result.stderr
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert len(lines) == 1, result.stderr
        assert "newer agentgraph" in lines[0] and FUTURE_MIGRATION in lines[0]

    assert _file_digest(db_path) == before


def _migrate_in_process(path: str, barrier: Any) -> None:
    from agentgraph.persistence.migrations import migrate_sqlite
    from agentgraph.persistence.store import connect_sqlite

    conn = connect_sqlite(Path(path), MIGRATOR_TIMEOUT_S, check_header=False)
    barrier.wait()
    migrate_sqlite(conn)
    conn.close()


@pytest.mark.parametrize("recorded", [False, True], ids=["unversioned", "partly-migrated"])
def test_processes_migrating_one_file_at_once_apply_each_migration_once(
    settings: Settings, recorded: bool
) -> None:
    from agentgraph.persistence.migrations import SQLITE_MIGRATIONS

    _build_main_sqlite(settings.db_path, "first-release")
    if recorded:  # the first migration done: the others are decided on what is read
        conn = sqlite3.connect(settings.db_path)
        with conn:
            conn.execute(
                f"CREATE TABLE {MIGRATIONS_TABLE} (name TEXT PRIMARY KEY, applied_at REAL)"
            )
            conn.execute(
                f"INSERT INTO {MIGRATIONS_TABLE} VALUES (?, 0)", (SQLITE_MIGRATIONS[0].name,)
            )
        conn.close()
    spawn = multiprocessing.get_context("spawn")
    barrier = spawn.Barrier(CONCURRENT_MIGRATORS)
    workers = [
        spawn.Process(target=_migrate_in_process, args=(str(settings.db_path), barrier))
        for _ in range(CONCURRENT_MIGRATORS)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(MIGRATOR_TIMEOUT_S)
    assert [w.exitcode for w in workers] == [0] * CONCURRENT_MIGRATORS

    names = [name for name, _at in _applied(settings.db_path)]
    assert sorted(names) == sorted(m.name for m in SQLITE_MIGRATIONS)
    columns = {
        row[1] for row in _sqlite_rows(settings.db_path, "PRAGMA table_info(agentgraph_sessions)")
    }
    assert {"cached_input_tokens", "cost_usd", "model"} <= columns
    assert _sqlite_rows(settings.db_path, "SELECT count(*) FROM agentgraph_sessions") == [(1,)]


# --- PostgreSQL -------------------------------------------------------------------------

MAIN_TABLES_POSTGRES = (
    FIRST_SESSIONS_SQLITE.replace("REAL", "DOUBLE PRECISION"),
    "CREATE INDEX IF NOT EXISTS agentgraph_sessions_ws "
    "ON agentgraph_sessions(workspace, updated_at)",
    """CREATE TABLE IF NOT EXISTS agentgraph_leases (
    thread_id TEXT PRIMARY KEY,
    pid INTEGER NOT NULL,
    start_time BIGINT,
    host TEXT NOT NULL,
    pid_space TEXT NOT NULL,
    since DOUBLE PRECISION NOT NULL,
    heartbeat DOUBLE PRECISION NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS agentgraph_archive (
    thread_id TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL DEFAULT '',
    segment TEXT NOT NULL,
    type TEXT NOT NULL,
    data BYTEA NOT NULL,
    messages INTEGER NOT NULL,
    raw_bytes BIGINT NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, segment)
)""",
    """CREATE TABLE IF NOT EXISTS agentgraph_history (
    thread_id TEXT NOT NULL,
    msg_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    role TEXT NOT NULL,
    body TEXT NOT NULL,
    tsv tsvector GENERATED ALWAYS AS (to_tsvector('simple', body)) STORED,
    PRIMARY KEY (thread_id, msg_id)
)""",
)


def _pg_settings(url: str) -> Settings:
    return Settings(  # type: ignore[call-arg]
        _env_file=None, AGENTGRAPH_DATABASE_URL=url, AGENTGRAPH_MODEL="gpt-4o-mini"
    )


def _pg_rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql).fetchall()


def test_postgres_database_from_before_migrations_upgrades_in_place(postgres_url: str) -> None:
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        for statement in MAIN_TABLES_POSTGRES:
            conn.execute(statement)
        _fill_old_rows(conn, "%s")
        conn.execute(
            "INSERT INTO agentgraph_history (thread_id, msg_id, position, role, body) "
            "VALUES ('old-thread', 'm1', 0, 'human', 'an old message')"
        )

    with open_store(_pg_settings(postgres_url)) as store:
        info = store.index.get("old-thread")
        assert info is not None and info.input_tokens == 500 and info.cost_usd is None
        assert info.model == "" and info.cached_input_tokens == 0
        info.model = "gpt-4o-mini"
        store.index.upsert(info)
    applied = _pg_rows(postgres_url, f"SELECT name, applied_at FROM {MIGRATIONS_TABLE}")
    assert applied and len({name for name, _at in applied}) == len(applied)
    assert _pg_rows(postgres_url, "SELECT host FROM agentgraph_leases") == [("elsewhere",)]
    assert _pg_rows(postgres_url, "SELECT raw_bytes FROM agentgraph_archive") == [(99,)]
    assert _pg_rows(postgres_url, "SELECT body FROM agentgraph_history") == [("an old message",)]

    with open_store(_pg_settings(postgres_url)) as store:
        again = store.index.get("old-thread")
        assert again is not None and again.model == "gpt-4o-mini"
    assert sorted(
        _pg_rows(postgres_url, f"SELECT name, applied_at FROM {MIGRATIONS_TABLE}")
    ) == sorted(applied)


def test_postgres_database_written_by_a_newer_agentgraph_is_refused(postgres_url: str) -> None:
    from agentgraph.errors import StoreError

    with open_store(_pg_settings(postgres_url)):
        pass
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(
            f"INSERT INTO {MIGRATIONS_TABLE} (name, applied_at) VALUES (%s, 0)",
            (FUTURE_MIGRATION,),
        )
        conn.execute("DROP TABLE agentgraph_leases")  # a newer version's change, say
    before = _pg_rows(postgres_url, f"SELECT name, applied_at FROM {MIGRATIONS_TABLE}")

    with pytest.raises(StoreError) as refused, open_store(_pg_settings(postgres_url)):
        pass
    assert "newer agentgraph" in str(refused.value) and FUTURE_MIGRATION in str(refused.value)
    assert "\n" not in str(refused.value)
    after = _pg_rows(postgres_url, f"SELECT name, applied_at FROM {MIGRATIONS_TABLE}")
    assert sorted(after) == sorted(before)
    assert _pg_rows(postgres_url, "SELECT to_regclass('agentgraph_leases') IS NULL") == [(True,)]


def test_postgres_connections_migrating_at_once_apply_each_migration_once(
    postgres_url: str,
) -> None:
    import psycopg

    from agentgraph.persistence.migrations import POSTGRES_MIGRATIONS, migrate_postgres

    barrier = threading.Barrier(CONCURRENT_MIGRATORS)
    failures: list[BaseException] = []

    def migrate() -> None:
        try:
            with psycopg.connect(postgres_url, autocommit=True) as conn:
                barrier.wait(MIGRATOR_TIMEOUT_S)
                migrate_postgres(conn)
        except BaseException as exc:  # reported below, in the test's thread
            failures.append(exc)

    threads = [threading.Thread(target=migrate) for _ in range(CONCURRENT_MIGRATORS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(MIGRATOR_TIMEOUT_S)
    assert failures == []
    names = [row[0] for row in _pg_rows(postgres_url, f"SELECT name FROM {MIGRATIONS_TABLE}")]
    assert sorted(names) == sorted(m.name for m in POSTGRES_MIGRATIONS)


def test_both_backends_name_the_same_migrations_in_the_same_order() -> None:
    from agentgraph.persistence.migrations import POSTGRES_MIGRATIONS, SQLITE_MIGRATIONS

    sqlite_names = [m.name for m in SQLITE_MIGRATIONS]
    assert sqlite_names == [m.name for m in POSTGRES_MIGRATIONS]
    assert len(set(sqlite_names)) == len(sqlite_names)
    numbers = [int(name.split("_", 1)[0]) for name in sqlite_names]
    assert numbers == list(range(1, len(numbers) + 1))
