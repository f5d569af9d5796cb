"""Upstream's checkpointer fixtures (``tests/conftest.py``, ``conftest_checkpointer.py``)
for these files, with agentgraph's savers as the checkpointers.

Each fixture builds its saver the way upstream builds the stock one (``from_conn_string``
or a pool, then ``setup()``; a pipeline after set-up), with agentgraph's class in place
of LangGraph's. Upstream's in-memory and encrypted variants are left out: they test no
saver of agentgraph's. The PostgreSQL variants run on the server of
``../checkpoint_postgres/conftest.py`` and are skipped with it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from uuid import uuid4

import pytest
import pytest_asyncio
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Durability
from psycopg import Connection
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from agentgraph.persistence.pg_saver import AgentPostgresSaver as PostgresSaver
from agentgraph.persistence.pg_saver import AsyncAgentPostgresSaver as AsyncPostgresSaver
from agentgraph.persistence.saver import AgentSqliteSaver as SqliteSaver
from agentgraph.persistence.saver import AsyncAgentSqliteSaver as AsyncSqliteSaver
from tests.langgraph_suites.checkpoint_postgres.conftest import (
    DEFAULT_POSTGRES_URI,
    UNAVAILABLE,
)

POSTGRES = pytest.mark.skipif(bool(UNAVAILABLE), reason=f"PostgreSQL unavailable: {UNAVAILABLE}")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["sync", "async", "exit"])
def durability(request: pytest.FixtureRequest) -> Durability:
    return request.param  # type: ignore[no-any-return]


@contextmanager
def _database() -> Iterator[str]:
    database = f"test_{uuid4().hex[:16]}"
    with Connection.connect(DEFAULT_POSTGRES_URI, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {database}")
    try:
        yield DEFAULT_POSTGRES_URI + database
    finally:
        with Connection.connect(DEFAULT_POSTGRES_URI, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {database} WITH (FORCE)")


@contextmanager
def _checkpointer_sqlite() -> Iterator[BaseCheckpointSaver]:
    with SqliteSaver.from_conn_string(":memory:") as checkpointer:
        yield checkpointer


@contextmanager
def _checkpointer_postgres() -> Iterator[BaseCheckpointSaver]:
    with _database() as uri, PostgresSaver.from_conn_string(uri) as checkpointer:
        checkpointer.setup()
        yield checkpointer


@contextmanager
def _checkpointer_postgres_pipe() -> Iterator[BaseCheckpointSaver]:
    with _database() as uri, PostgresSaver.from_conn_string(uri) as checkpointer:
        checkpointer.setup()
        # setup can't run inside pipeline because of implicit transaction
        with checkpointer.conn.pipeline() as pipe:
            checkpointer.pipe = pipe
            yield checkpointer


@contextmanager
def _checkpointer_postgres_pool() -> Iterator[BaseCheckpointSaver]:
    with (
        _database() as uri,
        ConnectionPool(uri, max_size=10, kwargs={"autocommit": True}) as pool,
    ):
        checkpointer = PostgresSaver(pool)
        checkpointer.setup()
        yield checkpointer


@asynccontextmanager
async def _checkpointer_sqlite_aio() -> AsyncIterator[BaseCheckpointSaver]:
    async with AsyncSqliteSaver.from_conn_string(":memory:") as checkpointer:
        yield checkpointer


@asynccontextmanager
async def _checkpointer_postgres_aio() -> AsyncIterator[BaseCheckpointSaver]:
    with _database() as uri:
        async with AsyncPostgresSaver.from_conn_string(uri) as checkpointer:
            await checkpointer.setup()
            yield checkpointer


@asynccontextmanager
async def _checkpointer_postgres_aio_pipe() -> AsyncIterator[BaseCheckpointSaver]:
    with _database() as uri:
        async with AsyncPostgresSaver.from_conn_string(uri) as checkpointer:
            await checkpointer.setup()
            # setup can't run inside pipeline because of implicit transaction
            async with checkpointer.conn.pipeline() as pipe:
                checkpointer.pipe = pipe
                yield checkpointer


@asynccontextmanager
async def _checkpointer_postgres_aio_pool() -> AsyncIterator[BaseCheckpointSaver]:
    with _database() as uri:
        async with AsyncConnectionPool(uri, max_size=10, kwargs={"autocommit": True}) as pool:
            checkpointer = AsyncPostgresSaver(pool)
            await checkpointer.setup()
            yield checkpointer


SYNC = {
    "sqlite": _checkpointer_sqlite,
    "postgres": _checkpointer_postgres,
    "postgres_pipe": _checkpointer_postgres_pipe,
    "postgres_pool": _checkpointer_postgres_pool,
}
ASYNC = {
    "sqlite_aio": _checkpointer_sqlite_aio,
    "postgres_aio": _checkpointer_postgres_aio,
    "postgres_aio_pipe": _checkpointer_postgres_aio_pipe,
    "postgres_aio_pool": _checkpointer_postgres_aio_pool,
}


def _params(names: list[str]) -> list[object]:
    return [
        pytest.param(n, marks=[pytest.mark.postgres, POSTGRES]) if "postgres" in n else n
        for n in names
    ]


@pytest.fixture(params=_params(list(SYNC)))
def sync_checkpointer(request: pytest.FixtureRequest) -> Iterator[BaseCheckpointSaver]:
    with SYNC[request.param]() as checkpointer:
        yield checkpointer


@pytest_asyncio.fixture(params=_params(list(ASYNC)))
async def async_checkpointer(
    request: pytest.FixtureRequest,
) -> AsyncIterator[BaseCheckpointSaver]:
    async with ASYNC[request.param]() as checkpointer:
        yield checkpointer
