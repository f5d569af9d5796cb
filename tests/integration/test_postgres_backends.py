"""Persistence on both backends: SQLite (default) and a real PostgreSQL 15 server.

Tests taking the ``backend``/``backend_settings`` fixtures run twice; the PostgreSQL run
uses a throwaway server started by tests/fixtures_pg.py (skipped when the binaries are
missing, a failure when ``AGENTGRAPH_REQUIRE_POSTGRES=1``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import psycopg
import pytest
from langchain_core.messages import HumanMessage

from agentgraph.config import Settings
from agentgraph.errors import SessionNotFound, StoreError
from agentgraph.persistence import open_store
from agentgraph.persistence.index import SessionInfo, resolve_session
from agentgraph.persistence.postgres import PostgresSessionIndex, mask_url
from agentgraph.runtime.history import validate_history
from agentgraph.session.agent import Agent
from tests.cli_helpers import cli_env, run_cli
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.scripts import ai_text, ai_tools
from tests.fixtures_pg import PG_PASSWORD, PostgresServer

CONCURRENT_WRITERS = 2
TURNS_PER_WRITER = 8
KEY = "sk-test-pg-0123456789abcdef"


@pytest.fixture
def stack() -> Iterator[ExitStack]:
    with ExitStack() as opened:
        yield opened


def _agent(settings: Settings, model: ScriptedChatModel, stack: ExitStack) -> Agent:
    store = stack.enter_context(open_store(settings))
    return Agent(settings, store, model=model, sleep=lambda _s: None)


def test_store_kind_follows_the_backend(backend: str, backend_settings: Settings) -> None:
    with open_store(backend_settings) as store:
        saver = type(store.checkpointer).__name__
        if backend == "postgres":
            assert saver == "AgentPostgresSaver"
            assert isinstance(store.index, PostgresSessionIndex)
            assert PG_PASSWORD not in store.location and "***" in store.location
        else:
            assert "SqliteSaver" in saver
            assert store.location.endswith("sessions.db")


def test_resume_in_a_fresh_graph_from_the_same_store(
    backend_settings: Settings, workspace: Path, stack: ExitStack
) -> None:
    (workspace / "a.txt").write_text("alpha")
    first = ScriptedChatModel(
        [ai_tools(("read_file", {"path": "a.txt"})), ai_text("remembered: PLUM")]
    )
    with ExitStack() as first_stack:
        agent1 = _agent(backend_settings, first, first_stack)
        agent1.run_turn("t-resume", "the code word is PLUM", workspace)

    second = ScriptedChatModel([ai_text("PLUM")])
    agent2 = _agent(backend_settings, second, stack)
    agent2.run_turn("t-resume", "what was the code word?", workspace)
    seen = second.calls[0]
    assert any(isinstance(m, HumanMessage) and "PLUM" in str(m.content) for m in seen)
    assert any("alpha" in str(m.content) for m in seen)  # the tool result survived
    assert validate_history(seen) == []
    history = agent2.messages("t-resume")
    assert len(history) == 6
    info = agent2.store.index.get("t-resume")
    assert info is not None and info.message_count == 6
    assert info.title.startswith("the code word") and info.input_tokens > 0


def test_session_index_list_resolve_delete(
    backend_settings: Settings, workspace: Path, stack: ExitStack
) -> None:
    model = ScriptedChatModel([ai_text("one"), ai_text("two"), ai_text("three")])
    agent = _agent(backend_settings, model, stack)
    for tid in ("aaa111", "aaa222", "bbb333"):
        agent.run_turn(tid, f"hello {tid}", workspace)
    index = agent.store.index
    stored = index.get("aaa111")
    assert stored is not None and stored.model == backend_settings.model  # the turn's model
    index.upsert(
        SessionInfo(
            thread_id="sub-1",
            parent_thread_id="bbb333",
            context_id="subagent-1",
            workspace=str(workspace.resolve()),
        )
    )
    index.upsert(SessionInfo(thread_id="elsewhere", workspace="/some/other/place"))

    here = index.list_sessions(workspace=str(workspace.resolve()))
    assert [s.thread_id for s in here] == ["bbb333", "aaa222", "aaa111"]  # newest first
    everything = {s.thread_id for s in index.list_sessions(include_subagents=True)}
    assert everything == {"aaa111", "aaa222", "bbb333", "sub-1", "elsewhere"}
    assert [c.thread_id for c in index.children("bbb333")] == ["sub-1"]

    assert resolve_session(index, "bbb").thread_id == "bbb333"
    assert resolve_session(index, "aaa222").thread_id == "aaa222"
    with pytest.raises(SessionNotFound, match="matches 2 sessions"):
        resolve_session(index, "aaa")
    with pytest.raises(SessionNotFound, match="no session matches"):
        resolve_session(index, "zzz")

    agent.store.delete_thread("aaa111")
    assert index.get("aaa111") is None
    assert agent.messages("aaa111") == []
    assert len(agent.messages("aaa222")) == 2  # neighbours untouched
    with pytest.raises(SessionNotFound):
        resolve_session(index, "aaa1")


def test_a_running_turns_count_changes_only_the_count(
    backend_settings: Settings, workspace: Path, stack: ExitStack
) -> None:
    """Each step of a turn sets its row's message count alone: a title the background
    titler wrote meanwhile stays, and a session with no row gets none."""
    agent = _agent(backend_settings, ScriptedChatModel([ai_text("hi")]), stack)
    index = agent.store.index
    index.upsert(SessionInfo(thread_id="counted", title="titled meanwhile", message_count=1))
    index.set_message_count("counted", 7)
    row = index.get("counted")
    assert row is not None and (row.message_count, row.title) == (7, "titled meanwhile")
    index.set_message_count("no-row", 3)
    assert index.get("no-row") is None


def test_concurrent_writers_on_one_store(
    backend_settings: Settings, workspace: Path, stack: ExitStack
) -> None:
    """Separate stores (as separate processes would open) write turns at the same time."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(CONCURRENT_WRITERS)

    def writer(n: int) -> None:
        try:
            model = ScriptedChatModel(
                [ai_tools(("now", {})) if i % 2 else ai_text(f"w{n}-{i}") for i in range(99)]
            )
            with open_store(backend_settings) as store:
                agent = Agent(backend_settings, store, model=model, sleep=lambda _s: None)
                barrier.wait()
                for turn in range(TURNS_PER_WRITER):
                    agent.run_turn(f"writer-{n}", f"turn {turn}", workspace)
        except BaseException as exc:
            barrier.abort()  # never leave the other writer waiting
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(CONCURRENT_WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []

    reader = _agent(backend_settings, ScriptedChatModel([ai_text("back")] * 2), stack)
    for n in range(CONCURRENT_WRITERS):
        history = reader.messages(f"writer-{n}")
        assert validate_history(history) == []
        humans = [m.content for m in history if isinstance(m, HumanMessage)]
        assert humans == [f"turn {t}" for t in range(TURNS_PER_WRITER)]
        info = reader.store.index.get(f"writer-{n}")
        assert info is not None and info.message_count == len(history)
        reader.run_turn(f"writer-{n}", "resume", workspace)


# --- PostgreSQL only -------------------------------------------------------------------


@pytest.mark.postgres
def test_wrong_password_is_one_clear_line_without_the_password(
    postgres_server: PostgresServer, make_settings: Callable[..., Settings]
) -> None:
    wrong = "Not-The-Password-9876"
    settings = make_settings(AGENTGRAPH_DATABASE_URL=postgres_server.url(password=wrong))
    with pytest.raises(StoreError) as caught, open_store(settings):
        pass
    text = str(caught.value)
    assert "wrong user name or password" in text and "AGENTGRAPH_DATABASE_URL" in text
    assert wrong not in text and "***" in text and "\n" not in text


@pytest.mark.postgres
def test_unreachable_server_is_one_clear_line(
    postgres_server: PostgresServer, make_settings: Callable[..., Settings]
) -> None:
    # A port nothing listens on: the test server's URL with the port of the discard service.
    url = postgres_server.url().replace(f":{postgres_server.port}/", ":9/")
    settings = make_settings(AGENTGRAPH_DATABASE_URL=url, AGENTGRAPH_POSTGRES_CONNECT_TIMEOUT_S="2")
    with pytest.raises(StoreError) as caught, open_store(settings):
        pass
    text = str(caught.value)
    assert "unreachable" in text and PG_PASSWORD not in text and "\n" not in text


@pytest.mark.postgres
def test_many_workers_set_up_a_fresh_database_at_once(
    postgres_url: str, make_settings: Callable[..., Settings]
) -> None:
    """Workers starting together against an empty database must not race on migrations."""
    settings = make_settings(AGENTGRAPH_DATABASE_URL=postgres_url)
    errors: list[BaseException] = []
    workers = 6
    barrier = threading.Barrier(workers)

    def start() -> None:
        try:
            barrier.wait()
            with open_store(settings) as store:
                store.index.list_sessions()
        except BaseException as exc:
            barrier.abort()
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


@pytest.mark.postgres
def test_cli_on_postgres_resumes_lists_and_keeps_secrets_out(
    postgres_url: str, tmp_path: Path, workspace: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    script = [
        {"tool_calls": [{"name": "run_bash", "arguments": {"command": "printenv"}}]},
        {"content": "first"},
        {"content": "second"},
    ]
    with FakeOpenAIServer(script, require_key=KEY) as server:
        env = cli_env(
            home,
            OPENAI_BASE_URL=server.url,
            OPENAI_API_KEY=KEY,
            AGENTGRAPH_DATABASE_URL=postgres_url,
            AGENTGRAPH_PROVIDER_MAX_RETRIES="0",
        )
        first = run_cli(["run", "env please", "--thread", "pg-1"], cwd=workspace, env=env)
        assert first.returncode == 0, first.stderr
        second = run_cli(["run", "again", "--thread", "pg-1", "--json"], cwd=workspace, env=env)
        assert second.returncode == 0, second.stderr
        assert json.loads(second.stdout)["answer"] == "second"
        sent = json.dumps(server.requests[-1]["messages"])
        assert "env please" in sent and "first" in sent
        assert server.violations == []
        listed = run_cli(["sessions", "list", "--json"], cwd=workspace, env=env)
    assert listed.returncode == 0, listed.stderr
    assert [r["thread_id"] for r in json.loads(listed.stdout)] == ["pg-1"]
    assert not (home / ".agentgraph" / "sessions.db").exists()  # nothing went to SQLite
    for output in (first.stdout, first.stderr, second.stderr, listed.stdout):
        assert KEY not in output and PG_PASSWORD not in output
    # The tool ran with neither secret in its environment, and neither reached the database.
    assert "printenv" in sent and KEY not in sent and PG_PASSWORD not in sent
    with psycopg.connect(postgres_url) as conn:
        for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
            dump = conn.execute(f"SELECT * FROM {table}").fetchall()
            assert dump, table
            text = repr(dump)
            assert KEY not in text and PG_PASSWORD not in text, table


@pytest.mark.postgres
def test_cli_with_unreachable_database_exits_1_one_line(
    postgres_server: PostgresServer, tmp_path: Path, workspace: Path
) -> None:
    url = postgres_server.url(password="Wrong-Secret-1234")
    env = cli_env(
        tmp_path,
        OPENAI_BASE_URL="http://127.0.0.1:9/v1",
        AGENTGRAPH_DATABASE_URL=url,
    )
    result = run_cli(["sessions", "list"], cwd=workspace, env=env)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr
    assert "wrong user name or password" in lines[0]
    assert "Wrong-Secret-1234" not in result.stderr


def test_mask_url_forms() -> None:
    assert mask_url("postgresql://bob:s3cr3t@db:5432/x") == "postgresql://bob:***@db:5432/x"
    assert mask_url("postgres://bob@db/x") == "postgres://bob@db/x"
    assert "s3cr3t" not in mask_url("host=db user=bob password=s3cr3t dbname=x")
    assert "s3cr3t" not in mask_url("postgresql://db/x?user=bob&password=s3cr3t")
    assert "s e" not in mask_url("host=db password='s e' dbname=x")


def test_database_url_is_a_secret(make_settings: Callable[..., Settings]) -> None:
    settings = make_settings(
        AGENTGRAPH_DATABASE_URL="postgresql://bob:LongPassword123@db/x", OPENAI_API_KEY="sk-k"
    )
    assert "LongPassword123" not in repr(settings)
    assert "LongPassword123" in settings.secret_values()
    short = make_settings(AGENTGRAPH_DATABASE_URL="postgresql://bob:pg@db/x")
    assert "pg" not in short.secret_values()  # too short to redact from text safely
    assert "postgresql://bob:pg@db/x" in short.secret_values()  # the URL whole still is
