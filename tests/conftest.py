"""Shared fixtures: settings on tmp_path, an opened store, a workspace."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentgraph.config import Settings
from agentgraph.persistence import Store, open_store
from tests.cli_helpers import TEST_SANDBOX_MODE
from tests.fakes.openai_server import FakeOpenAIServer

# Both-backends fixtures (a throwaway PostgreSQL server; see tests/fixtures_pg.py).
from tests.fixtures_pg import (  # noqa: F401
    backend,
    backend_settings,
    make_backend_settings,
    postgres_server,
    postgres_url,
)

# Settings built in this process read it too (see TEST_SANDBOX_MODE): the developer's
# own AGENTGRAPH_SANDBOX must not change what the suite tests.
os.environ["AGENTGRAPH_SANDBOX"] = TEST_SANDBOX_MODE

# The Ctrl-C tests interrupt the programs they start as a terminal would. A suite started
# as a background job of a non-interactive shell inherits SIGINT ignored, and an ignored
# signal stays ignored in every program started from it; a handled one is reset to its
# default there, as a terminal's shell leaves it.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """The CLI subprocess's HOME (its store lives in ``home/.agentgraph``)."""
    h = tmp_path / "home"
    h.mkdir()
    return h


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty workspace directory."""
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture
def make_settings(tmp_path: Path) -> Callable[..., Settings]:
    """Build Settings from env-style names, never reading the developer's .env."""

    def make(**env: Any) -> Settings:
        values: dict[str, Any] = {
            "AGENTGRAPH_HOME": str(tmp_path / "home"),
            "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
            "AGENTGRAPH_MODEL": "gpt-4o-mini",
        }
        values.update(env)
        return Settings(_env_file=None, **values)  # type: ignore[call-arg]

    return make


@pytest.fixture
def settings(make_settings: Callable[..., Settings]) -> Settings:
    """Default test settings (home under tmp_path)."""
    return make_settings()


@pytest.fixture
def store(settings: Settings) -> Iterator[Store]:
    """An opened SQLite store under tmp_path."""
    with open_store(settings) as opened:
        yield opened


@pytest.fixture
def fake_server() -> Iterator[FakeOpenAIServer]:
    """Strict fake server; add replies with server.add_replies(...); fails on violations."""
    with FakeOpenAIServer(on_exhausted="raise") as server:
        yield server
    assert server.violations == [], server.violations


@pytest.fixture
def make_server() -> Iterator[Callable[..., FakeOpenAIServer]]:
    """Factory for servers with options (window=, require_key=...); no violation check."""
    servers: list[FakeOpenAIServer] = []

    def make(script: Any = (), **options: Any) -> FakeOpenAIServer:
        servers.append(FakeOpenAIServer(script, **options).start())
        return servers[-1]

    yield make
    for server in servers:
        server.stop()
