"""Upstream's ``tests/conftest.py`` for these files, on the test suite's own server.

Upstream points ``DEFAULT_POSTGRES_URI`` / ``DEFAULT_URI`` at a docker container; here a
throwaway server (``tests/fixtures_pg.py``) is started when this directory is collected,
and stopped at exit. Its fixtures are upstream's, except that they are declared for
pytest-asyncio explicitly and the store tables (not vendored) are not cleared. Without
the PostgreSQL programs the directory is skipped, unless ``AGENTGRAPH_REQUIRE_POSTGRES=1``.
"""

from __future__ import annotations

import atexit
import contextlib
import os
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from psycopg import AsyncConnection
from psycopg.errors import UndefinedTable
from psycopg.rows import DictRow, dict_row

from tests.fixtures_pg import REQUIRE_ENV, PostgresUnavailable, running_postgres

_servers = contextlib.ExitStack()
atexit.register(_servers.close)
try:
    _server = _servers.enter_context(running_postgres())
except PostgresUnavailable as exc:
    if os.environ.get(REQUIRE_ENV) == "1":
        raise
    UNAVAILABLE = str(exc)
    DEFAULT_POSTGRES_URI = DEFAULT_URI = ""
    collect_ignore_glob = ["test_*.py"]
else:
    UNAVAILABLE = ""
    DEFAULT_POSTGRES_URI = _server.url("postgres").removesuffix("postgres")
    DEFAULT_URI = _server.url("postgres") + "?sslmode=disable"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test here needs the server: marked like the suite's other Postgres tests."""
    for item in items:
        if "checkpoint_postgres" in str(item.path):
            item.add_marker(pytest.mark.postgres)


@pytest_asyncio.fixture(scope="function")
async def conn() -> AsyncIterator[AsyncConnection[DictRow]]:
    async with await AsyncConnection.connect(
        DEFAULT_URI, autocommit=True, prepare_threshold=0, row_factory=dict_row
    ) as conn:
        yield conn


@pytest_asyncio.fixture(scope="function", autouse=True)
async def clear_test_db(conn: AsyncConnection[DictRow]) -> None:
    """Delete all tables before each test."""
    try:
        await conn.execute("DELETE FROM checkpoints")
        await conn.execute("DELETE FROM checkpoint_blobs")
        await conn.execute("DELETE FROM checkpoint_writes")
        await conn.execute("DELETE FROM checkpoint_migrations")
    except UndefinedTable:
        pass
