"""Cost you can see: provider-reported cached tokens, a price table, totals per session."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage

from agentgraph.config import Settings
from agentgraph.persistence import open_store
from agentgraph.providers.pricing import PRICES, UsageTotals, price_for
from tests.cli_helpers import run_cli, server_env
from tests.fakes.openai_server import FakeOpenAIServer

KEY = "sk-test-secret-0123456789abcdef"


def _script() -> list[dict[str, object]]:
    return [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]},
        {"content": "The notes say hello."},
    ]


def test_run_json_and_sessions_show_carry_cached_tokens_and_cost(
    home: Path, workspace: Path
) -> None:
    (workspace / "notes.txt").write_text("hello\n" * 50)
    with FakeOpenAIServer(_script(), require_key=KEY, cache_min_tokens=0) as server:
        env = server_env(home, server.url, KEY)
        result = run_cli(["run", "read notes.txt", "--json"], cwd=workspace, env=env)
        assert result.returncode == 0, result.stderr
        payload = json.loads(result.stdout)
        usage = payload["usage"]
        reported = server.reported_usage
        assert len(reported) == 3
        cached = sum(u["prompt_tokens_details"]["cached_tokens"] for u in reported)
        prompt = sum(u["prompt_tokens"] for u in reported)
        completion = sum(u["completion_tokens"] for u in reported)
        # Each request extends the previous one: the later two are mostly cached.
        assert reported[0]["prompt_tokens_details"]["cached_tokens"] == 0
        assert reported[2]["prompt_tokens_details"]["cached_tokens"] > 0
        assert usage["input_tokens"] == prompt
        assert usage["output_tokens"] == completion
        assert usage["cached_input_tokens"] == cached > 0
        price = PRICES["gpt-4o-mini"]
        expected = (
            (prompt - cached) * price.input
            + cached * price.cached_input
            + completion * price.output
        ) / 1e6
        assert usage["cost_usd"] == pytest.approx(expected, abs=1e-8)

        shown = run_cli(
            ["sessions", "show", payload["thread_id"], "--json"], cwd=workspace, env=env
        )
        assert shown.returncode == 0, shown.stderr
        session = json.loads(shown.stdout)
        assert session["usage"]["cached_input_tokens"] == cached
        assert session["usage"]["cost_usd"] == pytest.approx(expected, abs=1e-8)
        assert session["context"]["usage"]["cached_input_tokens"] == cached
        assert server.violations == []


def test_unknown_model_reports_tokens_but_null_cost(home: Path, workspace: Path) -> None:
    script = [{"content": "hi"}]
    with FakeOpenAIServer(script, require_key=KEY, cache_min_tokens=0) as server:
        env = server_env(home, server.url, KEY, AGENTGRAPH_MODEL="my-local-llama")
        result = run_cli(["run", "hello", "--json"], cwd=workspace, env=env)
        assert result.returncode == 0, result.stderr
        usage = json.loads(result.stdout)["usage"]
        assert usage["input_tokens"] > 0
        assert usage["cached_input_tokens"] == 0
        assert usage["cost_usd"] is None
        shown = run_cli(["sessions", "list", "--json"], cwd=workspace, env=env)
        assert json.loads(shown.stdout)[0]["usage"]["cost_usd"] is None


def test_price_table_matches_snapshots_and_providers() -> None:
    assert price_for("gpt-4o-mini-2024-07-18") is PRICES["gpt-4o-mini"]
    assert price_for("openai:gpt-4o") is PRICES["gpt-4o"]
    assert price_for("anthropic:claude-sonnet-4-5-20250929") is PRICES["claude-sonnet-4-5"]
    assert price_for("gpt-4o-minimal") is None
    assert price_for("llama3") is None
    assert price_for(None) is None


def test_anthropic_cache_reads_and_writes_are_priced_apart() -> None:
    totals = UsageTotals()
    reply = AIMessage(
        "ok",
        response_metadata={"model": "claude-sonnet-4-5-20250929"},
        usage_metadata={
            "input_tokens": 10_000,
            "output_tokens": 1_000,
            "total_tokens": 11_000,
            "input_token_details": {"cache_read": 6_000, "cache_creation": 3_000},
        },
    )
    totals.add_message(reply, "gpt-4o-mini")  # the reported model wins
    price = PRICES["claude-sonnet-4-5"]
    assert price.cache_write is not None
    expected = (
        1_000 * price.input
        + 6_000 * price.cached_input
        + 3_000 * price.cache_write
        + 1_000 * price.output
    ) / 1e6
    assert totals.cost_usd == pytest.approx(expected)
    assert totals.cached_input_tokens == 6_000 and totals.cache_write_tokens == 3_000
    totals.add_message(
        AIMessage("x", usage_metadata={"input_tokens": 5, "output_tokens": 1, "total_tokens": 6}),
        "unknown-model",
    )
    assert totals.cost_usd is None and totals.input_tokens == 10_005


OLD_SESSIONS_TABLE = """CREATE TABLE agentgraph_sessions (
    thread_id TEXT PRIMARY KEY, title TEXT NOT NULL DEFAULT '',
    title_source TEXT NOT NULL DEFAULT 'first_message', workspace TEXT NOT NULL DEFAULT '',
    git_branch TEXT, created_at REAL NOT NULL, updated_at REAL NOT NULL,
    message_count INTEGER NOT NULL DEFAULT 0, input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0, context_tokens INTEGER NOT NULL DEFAULT 0,
    parent_thread_id TEXT, context_id TEXT NOT NULL DEFAULT 'main',
    compactions INTEGER NOT NULL DEFAULT 0)"""


def test_existing_sqlite_index_gains_the_usage_columns(settings: Settings) -> None:
    settings.home.mkdir(parents=True)
    conn = sqlite3.connect(settings.db_path)
    with conn:
        conn.execute(OLD_SESSIONS_TABLE)
        conn.execute(
            "INSERT INTO agentgraph_sessions (thread_id, title, created_at, updated_at, "
            "input_tokens) VALUES ('old', 'before costs', 1, 2, 500)"
        )
    conn.close()
    with open_store(settings) as store:
        info = store.index.get("old")
        assert info is not None
        assert info.input_tokens == 500 and info.cached_input_tokens == 0
        assert info.cost_usd is None  # spent before prices were kept: unknown, not $0
        assert info.model == ""  # nor was the model
        info.cached_input_tokens = 7
        info.model = "gpt-4o-mini"
        store.index.upsert(info)
    with open_store(settings) as store:
        again = store.index.get("old")
        assert again is not None and again.cached_input_tokens == 7
        assert again.model == "gpt-4o-mini"


def test_existing_postgres_index_gains_the_usage_columns(postgres_url: str) -> None:
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(OLD_SESSIONS_TABLE.replace("REAL", "DOUBLE PRECISION"))
        conn.execute(
            "INSERT INTO agentgraph_sessions (thread_id, created_at, updated_at, input_tokens) "
            "VALUES ('old', 1, 2, 500)"
        )
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None, AGENTGRAPH_DATABASE_URL=postgres_url, AGENTGRAPH_MODEL="gpt-4o-mini"
    )
    with open_store(settings) as store:
        info = store.index.get("old")
        assert info is not None and info.cost_usd is None and info.cached_input_tokens == 0
        assert info.model == ""
        info.cost_usd = 0.5
        info.model = "gpt-4o-mini"
        store.index.upsert(info)
        again = store.index.get("old")
        assert again is not None and again.cost_usd == 0.5 and again.model == "gpt-4o-mini"
