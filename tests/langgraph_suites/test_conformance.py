"""LangGraph's checkpointer conformance suite (``langgraph-checkpoint-conformance``):
agentgraph's async savers pass exactly what the stock savers pass.

Upstream runs the suite the same way (``validate`` on a ``checkpointer_test`` factory,
``tests/test_conformance_delta.py`` of checkpoint-sqlite and checkpoint-postgres); here
every capability the published suite has is run, against both savers of each backend.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from langgraph.checkpoint.conformance import validate
from langgraph.checkpoint.conformance.initializer import checkpointer_test
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from agentgraph.persistence.pg_saver import AsyncAgentPostgresSaver
from agentgraph.persistence.saver import AsyncAgentSqliteSaver
from tests.langgraph_suites.checkpoint_postgres.conftest import DEFAULT_URI, UNAVAILABLE


async def _results(registered: Any) -> dict[str, tuple[bool | None, list[str]]]:
    report = await validate(registered)
    return {
        cap: (result.passed, list(result.failures or [])) for cap, result in report.results.items()
    }


def _same_as_stock(ours: dict[str, Any], stock: dict[str, Any]) -> None:
    assert {cap: passed for cap, (passed, _) in ours.items()} == {
        cap: passed for cap, (passed, _) in stock.items()
    }, ours
    assert any(passed for passed, _ in ours.values())
    failed = {cap: failures for cap, (passed, failures) in ours.items() if passed is False}
    assert not failed, failed


async def test_async_sqlite_saver_conformance() -> None:
    @checkpointer_test(name="AsyncAgentSqliteSaver")
    async def ours() -> AsyncIterator[Any]:
        async with AsyncAgentSqliteSaver.from_conn_string(":memory:") as saver:
            yield saver

    @checkpointer_test(name="AsyncSqliteSaver")
    async def stock() -> AsyncIterator[Any]:
        async with AsyncSqliteSaver.from_conn_string(":memory:") as saver:
            yield saver

    _same_as_stock(await _results(ours), await _results(stock))


@pytest.mark.postgres
@pytest.mark.skipif(bool(UNAVAILABLE), reason=f"PostgreSQL unavailable: {UNAVAILABLE}")
async def test_async_postgres_saver_conformance() -> None:
    @checkpointer_test(name="AsyncAgentPostgresSaver")
    async def ours() -> AsyncIterator[Any]:
        async with AsyncAgentPostgresSaver.from_conn_string(DEFAULT_URI) as saver:
            await saver.setup()
            yield saver

    @checkpointer_test(name="AsyncPostgresSaver")
    async def stock() -> AsyncIterator[Any]:
        async with AsyncPostgresSaver.from_conn_string(DEFAULT_URI) as saver:
            await saver.setup()
            yield saver

    _same_as_stock(await _results(ours), await _results(stock))
