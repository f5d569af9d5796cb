"""SIGKILL the real CLI mid-turn, then resume the session from another process (1, 2, 3)."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

from agentgraph.config import Settings
from agentgraph.persistence import open_store
from agentgraph.persistence.index import SessionInfo
from agentgraph.session.agent import Agent
from tests.cli_helpers import run_cli
from tests.fakes.openai_server import FakeOpenAIServer
from tests.integration.reliability.helpers import (
    KEY,
    WAIT_FOR_FILE_S,
    agent_env,
    kill_pid_file,
    sigkill,
    spawn_cli,
    wait_for,
)
from tests.scenarios.stateless import (
    Recorder,
    ScriptedModel,
    Summarizer,
    codes_in,
    is_summary,
    make_workspace,
    persona_for,
    planted_codes,
    task_text,
)

# The killed command must still run when the test looks, however busy the machine. The
# test never waits for it; the next agentgraph start of the same home stops it, and the
# cleanup kills it. Starts of other homes (other tests' CLIs, in other workers) leave it.
SLOW_SLEEP_S = 600


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _settings_for(home: Path) -> Settings:
    return Settings(  # type: ignore[call-arg]
        _env_file=None,
        AGENTGRAPH_HOME=str(home / ".agentgraph"),
        OPENAI_BASE_URL="http://127.0.0.1:9/v1",
    )


def test_sigkill_during_a_tool_call_then_resume(home: Path, workspace: Path) -> None:
    """A finished tool is not run again, the killed one is answered, the request is valid."""
    fast = "echo ran >> fast_count"
    slow = f"echo $$ > slow.pid; echo ran >> slow_started; sleep {SLOW_SLEEP_S}; echo done > marker"
    script = [
        {"tool_calls": [{"name": "run_bash", "arguments": {"command": fast}}]},
        {"tool_calls": [{"name": "run_bash", "arguments": {"command": slow}}]},
    ]
    try:
        with FakeOpenAIServer(script) as server:
            # Unsandboxed (the fallback): a sandboxed command dies with the agent at once
            # (tests/integration/test_sandbox.py), and its $$ is a pid of the sandbox's namespace.
            env = agent_env(home, server, AGENTGRAPH_SANDBOX="off")
            proc = spawn_cli(["run", "do both", "--thread", "crash-1"], cwd=workspace, env=env)
            wait_for(workspace / "slow_started", proc)
            sigkill(proc)
            # The shell has its own process group, so the SIGKILL did not reach it.
            shell = int((workspace / "slow.pid").read_text().split()[0])
            assert _alive(shell)
            assert server.violations == []
        # A start of another home leaves this home's orphan alone.
        other_home = home.parent / "other-home"
        other_home.mkdir()
        with FakeOpenAIServer([{"content": "elsewhere"}]) as server:
            other = run_cli(["run", "hi"], cwd=workspace, env=agent_env(other_home, server))
        assert other.returncode == 0, other.stderr
        assert _alive(shell)
        # The session list counts what the killed turn stored, not only its prompt.
        listed = run_cli(["sessions", "list", "--json"], cwd=workspace, env=env)
        assert listed.returncode == 0, listed.stderr
        (row,) = [r for r in json.loads(listed.stdout) if r["thread_id"] == "crash-1"]
        with open_store(_settings_for(home)) as store:
            stored = Agent(_settings_for(home), store).messages("crash-1")
        assert len(stored) >= 4  # the request, two calls, the first one's result
        assert row["messages"] == len(stored)

        with FakeOpenAIServer([{"content": "resumed fine"}]) as server:
            env = agent_env(home, server)
            result = run_cli(
                ["run", "carry on", "--thread", "crash-1", "--json"], cwd=workspace, env=env
            )
        # ... but the next agentgraph start stopped the orphan.
        assert not _alive(shell)
    finally:
        kill_pid_file(workspace / "slow.pid")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["answer"] == "resumed fine"
    assert server.violations == []  # the dangling slow call was answered
    sent = server.requests[-1]["messages"]
    assert (workspace / "fast_count").read_text() == "ran\n"  # the finished tool: once
    assert (workspace / "slow_started").read_text() == "ran\n"  # the killed one: not re-run
    assert not (workspace / "marker").exists()
    text = json.dumps(sent)
    assert "do both" in text and "carry on" in text
    calls = [c for m in sent if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    answered = {m["tool_call_id"] for m in sent if m["role"] == "tool"}
    assert len(calls) == 2 and {c["id"] for c in calls} == answered
    assert "Traceback" not in result.stderr


def test_sigkill_before_the_first_checkpoint(home: Path, workspace: Path) -> None:
    """Killed while waiting to write its first row: the session is unknown, no traceback."""
    with FakeOpenAIServer([{"content": "first"}]) as server:
        env = agent_env(home, server, AGENTGRAPH_SQLITE_BUSY_TIMEOUT_S="60")
        assert run_cli(["run", "hi", "--thread", "other"], cwd=workspace, env=env).returncode == 0
        db = home / ".agentgraph" / "sessions.db"
        requests_before = len(server.requests)
        holder = sqlite3.connect(db, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # writers wait; the CLI can open and read
        try:
            proc = spawn_cli(["run", "never stored", "--thread", "early"], cwd=workspace, env=env)
            wait_for(db)  # exists already; give the CLI its start-up time below
            try:
                proc.wait(timeout=3)
            except Exception:
                sigkill(proc)
            else:
                raise AssertionError(f"CLI finished while the store was locked: {proc.stderr}")
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert len(server.requests) == requests_before  # it never reached the model

        shown = run_cli(["sessions", "show", "early"], cwd=workspace, env=env)
        assert shown.returncode == 1 and "no session matches 'early'" in shown.stderr
        resumed = run_cli(["--resume", "early"], cwd=workspace, env=env, stdin="")
        assert resumed.returncode == 1 and "no session matches 'early'" in resumed.stderr
        for output in (shown.stderr, resumed.stderr):
            assert "Traceback" not in output and len(output.strip().splitlines()) == 1


def test_index_row_without_checkpoints_resumes_as_empty(home: Path, workspace: Path) -> None:
    """The state a kill between the index write and the first checkpoint leaves behind."""
    with open_store(_settings_for(home)) as store:
        store.index.upsert(SessionInfo(thread_id="half", title="half", workspace=str(workspace)))
    with FakeOpenAIServer([{"content": "fresh start"}]) as server:
        env = agent_env(home, server)
        resumed = run_cli(["--resume", "half"], cwd=workspace, env=env, stdin="/exit\n")
        assert resumed.returncode == 0, resumed.stderr
        assert "0 messages" in resumed.stderr and "Traceback" not in resumed.stderr
        again = run_cli(["run", "hello", "--thread", "half", "--json"], cwd=workspace, env=env)
        assert again.returncode == 0, again.stderr
        assert json.loads(again.stdout)["answer"] == "fresh start"
        assert server.violations == []


def test_dangling_calls_in_stored_history_are_answered_before_the_next_call(
    home: Path, workspace: Path
) -> None:
    """Stored history ending in unanswered (and half-answered) calls; the CLI resumes it."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from agentgraph.session.agent import Agent
    from tests.fakes.chat_model import ScriptedChatModel

    settings = _settings_for(home)
    with open_store(settings) as store:
        agent = Agent(settings, store, model=ScriptedChatModel([]))
        agent.graph.update_state(
            agent.config("dangling"),
            {
                "messages": [
                    HumanMessage("look around", id="h1"),
                    AIMessage(
                        content="checking two things",
                        id="a1",
                        tool_calls=[
                            {"name": "now", "args": {}, "id": "c1"},
                            {"name": "list_dir", "args": {"path": "."}, "id": "c2"},
                        ],
                    ),
                    ToolMessage("12:00", tool_call_id="c1", name="now", id="t1"),
                    AIMessage(
                        content="",
                        id="a2",
                        tool_calls=[{"name": "now", "args": {}, "id": "c3"}],
                    ),
                ],
                "workspace_path": str(workspace),
            },
            as_node="planner",
        )
        store.index.upsert(SessionInfo(thread_id="dangling", workspace=str(workspace)))
    with FakeOpenAIServer([{"content": "recovered"}]) as server:
        env = agent_env(home, server)
        result = run_cli(["run", "go on", "--thread", "dangling"], cwd=workspace, env=env)
        assert result.returncode == 0, result.stderr
        assert server.violations == []
        sent = server.requests[0]["messages"]
    answered = [m["tool_call_id"] for m in sent if m["role"] == "tool"]
    assert sorted(answered) == ["c1", "c2", "c3"]
    assert any(m["role"] == "assistant" and m.get("content") == "checking two things" for m in sent)
    assert KEY not in json.dumps(sent)


# The summary request during which the agent is killed: one after the first compaction,
# whose summary is stored, so the resumed run has one of each (stored, lost).
KILLED_SUMMARY_CALL = 2
# A window the 60 files outgrow two or three times over.
COMPACTION_WINDOW_TOKENS = 16_000
COMPACTION_FILES = 60


class _HangsOnSummary:
    """The scripted model, except that summary request :data:`KILLED_SUMMARY_CALL` marks
    ``flag`` and waits (for the test to kill the agent) before it is answered."""

    def __init__(self, model: ScriptedModel, flag: Path) -> None:
        self.model, self.flag = model, flag
        self.summaries = 0
        self.release = threading.Event()

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        if is_summary(body):
            self.summaries += 1
            if self.summaries == KILLED_SUMMARY_CALL:
                self.flag.write_text("summarizing\n")
                self.release.wait(timeout=WAIT_FOR_FILE_S)
        return self.model(body)


def test_sigkill_during_a_compaction_then_resume_loses_no_progress(
    home: Path, workspace: Path, tmp_path: Path
) -> None:
    """Killed while a compaction waits for its summary: the compaction is lost, the work
    before it is not. Resumed with a new request, the agent compacts again and finishes
    with every code, reading no file twice (the stateless model re-reads whatever it
    knows it read but cannot see), and the provider saw only valid requests."""
    paths = make_workspace(workspace, files=COMPACTION_FILES, size="small")
    recorder = Recorder()
    flag = tmp_path / "summarizing"
    hang = _HangsOnSummary(
        ScriptedModel(
            persona_for("re_reader", "agentgraph", 1, None), Summarizer("faithful"), recorder
        ),
        flag,
    )
    settings = {
        "AGENTGRAPH_CONTEXT_WINDOW": str(COMPACTION_WINDOW_TOKENS),
        "MAX_LOOPS": str(3 * COMPACTION_FILES + 20),
    }
    try:
        with FakeOpenAIServer(
            [hang], window=COMPACTION_WINDOW_TOKENS, on_exhausted="repeat_last"
        ) as server:
            env = agent_env(home, server, **settings)
            proc = spawn_cli(
                ["run", task_text(1, COMPACTION_FILES), "--thread", "crash-compact"],
                cwd=workspace,
                env=env,
            )
            wait_for(flag, proc)
            sigkill(proc)
            hang.release.set()
            assert server.violations == []
    finally:
        hang.release.set()
    read_before = len(recorder.reads)
    assert 0 < read_before < COMPACTION_FILES and not recorder.reports

    model = ScriptedModel(
        persona_for("re_reader", "agentgraph", 1, None), Summarizer("faithful"), recorder
    )
    with FakeOpenAIServer(
        [model], window=COMPACTION_WINDOW_TOKENS, on_exhausted="repeat_last"
    ) as server:
        env = agent_env(home, server, **settings)
        result = run_cli(
            ["run", "carry on", "--thread", "crash-compact", "--json"], cwd=workspace, env=env
        )
    assert result.returncode == 0, result.stderr
    assert server.violations == [] and server.overflow_count == 0
    assert recorder.reports and codes_in(recorder.reports[-1]) == planted_codes(paths)
    assert recorder.reread_files() == 0
    assert len(recorder.reads) == COMPACTION_FILES
