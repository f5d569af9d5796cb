"""One run per thread: simultaneous runs on one thread, dead holders, on both stores."""

from __future__ import annotations

import json
import multiprocessing
import os
import queue
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentgraph.config import Settings
from agentgraph.persistence import open_store
from agentgraph.persistence.leases import (
    LEASE_TTL_S,
    LEASES_TABLE,
    SessionInUse,
)
from agentgraph.process import pid_alive, process_start_time
from agentgraph.session.lifecycle import load_messages
from tests.cli_helpers import CLI_TIMEOUT_S, server_env
from tests.fakes.openai_server import FakeOpenAIServer
from tests.lease_helpers import lease_holder, race_worker, start_lease_holder

KEY = "sk-test-thread-leases-key"
CONTENDERS = 3
RACE_TRIES = 50
CLI_RACE_TRIES = 1
# The winner's model reply is held until the others were refused; if they never are
# (two runs got in), it is released after this long and the round's checks fail.
GATE_TIMEOUT_S = 30.0
WORKER_START_TIMEOUT_S = 300.0
RESULT_TIMEOUT_S = 120.0
ZOMBIE_WAIT_S = 10.0
POLL_S = 0.01


class GatedServer:
    """The strict fake server whose replies wait for the test to open a gate."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.server = FakeOpenAIServer([self._reply])

    def _reply(self, body: dict[str, Any]) -> dict[str, Any]:
        self.gate.wait(GATE_TIMEOUT_S)  # the lease holder is slow: the others arrive
        prompt = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
        return {"content": f"answer to {prompt}"}

    def __enter__(self) -> GatedServer:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.gate.set()
        self.server.stop()


def _transcript(settings: Settings, thread_id: str) -> list[tuple[str, str]]:
    with open_store(settings) as store:
        return [(m.type, str(m.content)) for m in load_messages(store, thread_id)]


def _env_values(settings_env: dict[str, str], workspace: Path, url: str) -> dict[str, str]:
    return {
        **settings_env,
        "OPENAI_BASE_URL": url,
        "OPENAI_API_KEY": KEY,
        "AGENTGRAPH_PROVIDER_MAX_RETRIES": "0",
        "AGENTGRAPH_UNDO_MAX_FILES": "0",
        "WORKSPACE": str(workspace),
    }


@pytest.fixture
def store_env(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """Settings (as environment values) of a fresh store on the parametrized backend."""
    values = {"AGENTGRAPH_HOME": str(tmp_path / "home" / ".agentgraph")}
    if backend == "postgres":
        values["AGENTGRAPH_DATABASE_URL"] = request.getfixturevalue("postgres_url")
    return values


@pytest.fixture
def contenders(
    store_env: dict[str, str], workspace: Path
) -> Iterator[tuple[GatedServer, Any, Any, Any, dict[str, int]]]:
    """Three processes, each with its own Agent and store, ready to race."""
    ctx = multiprocessing.get_context("spawn")
    with GatedServer() as gated:
        env = _env_values(store_env, workspace, gated.server.url)
        start = ctx.Barrier(CONTENDERS)
        results = ctx.Queue()
        jobs = [ctx.Queue() for _ in range(CONTENDERS)]
        procs = [
            ctx.Process(target=race_worker, args=(f"w{i}", env, start, jobs[i], results))
            for i in range(CONTENDERS)
        ]
        for proc in procs:
            proc.start()
        try:
            pids = {}
            for _ in procs:
                name, pid, kind, text = results.get(timeout=WORKER_START_TIMEOUT_S)
                assert kind == "ready", text
                pids[name] = pid
            yield gated, start, jobs, results, pids
        finally:
            for q in jobs:
                q.put(None)
            for proc in procs:
                proc.join(timeout=RESULT_TIMEOUT_S)
                if proc.is_alive():
                    proc.kill()
                    proc.join()


def _check_round(
    outcomes: list[tuple[str, int, str, str]], transcript: list[tuple[str, str]], prompt: str
) -> None:
    """Exactly one ran, the others were refused naming it, its turn is whole."""
    kinds = sorted(kind for _, _, kind, _ in outcomes)
    assert kinds == ["ok"] + ["refused"] * (CONTENDERS - 1), outcomes
    winner = next(o for o in outcomes if o[2] == "ok")
    for _, _, kind, text in outcomes:
        if kind == "refused":
            assert f"in use by process {winner[1]} since " in text, text
            assert "\n" not in text
    asked = f"{prompt} from {winner[0]}"
    assert transcript == [("human", asked), ("ai", f"answer to {asked}")], transcript


def test_three_simultaneous_runs_on_one_thread_exactly_one_runs(
    contenders: tuple[GatedServer, Any, Any, Any, dict[str, int]],
    make_backend_settings: Callable[..., Settings],
    store_env: dict[str, str],
) -> None:
    gated, _start, jobs, results, _pids = contenders
    settings = make_backend_settings(**store_env)
    for round_ in range(RACE_TRIES):
        thread_id = f"race{round_}"
        gated.gate.clear()
        for i, q in enumerate(jobs):
            q.put((thread_id, f"round {round_} from w{i}"))
        outcomes: list[tuple[str, int, str, str]] = []
        while len(outcomes) < CONTENDERS:
            if sum(1 for o in outcomes if o[2] != "ok") == CONTENDERS - 1:
                gated.gate.set()  # the others have been refused: let the holder finish
            try:
                outcomes.append(results.get(timeout=GATE_TIMEOUT_S))
            except queue.Empty:
                gated.gate.set()  # two got in: let them finish so the round fails clearly
                outcomes.append(results.get(timeout=RESULT_TIMEOUT_S))
        gated.gate.set()
        # Prompts carry the worker's name: the transcript says whose turn was stored.
        _check_round(outcomes, _transcript(settings, thread_id), f"round {round_}")
    assert gated.server.violations == []


def _run_cli_proc(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "agentgraph", *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_simultaneous_cli_runs_on_one_thread_exactly_one_runs(
    store_env: dict[str, str],
    make_backend_settings: Callable[..., Settings],
    home: Path,
    workspace: Path,
) -> None:
    settings = make_backend_settings(**store_env)
    with GatedServer() as gated:
        env = server_env(home, gated.server.url, KEY, **store_env)
        for round_ in range(CLI_RACE_TRIES):
            gated.gate.clear()
            thread_id = f"cli{round_}"
            procs = [
                _run_cli_proc(
                    ["run", f"try {round_} by {i}", "--thread", thread_id], workspace, env
                )
                for i in range(CONTENDERS)
            ]
            deadline = time.monotonic() + CLI_TIMEOUT_S
            while sum(p.poll() is not None for p in procs) < CONTENDERS - 1:
                if time.monotonic() > deadline:
                    break  # two got in: release them so the checks below fail clearly
                time.sleep(POLL_S)
            gated.gate.set()
            done = [
                (i, *p.communicate(timeout=CLI_TIMEOUT_S), p.returncode)
                for i, p in enumerate(procs)
            ]
            winners = [d for d in done if d[3] == 0]
            assert len(winners) == 1, done
            index, out, _err, _code = winners[0]
            for _i, _out, err, code in done:
                if code != 0:
                    assert code == 1, err
                    lines = err.strip().splitlines()
                    assert len(lines) == 1 and "is in use by process" in lines[0], err
                    assert lines[0].startswith("agentgraph: cannot continue session"), err
            asked = f"try {round_} by {index}"
            assert out.strip() == f"answer to {asked}"
            assert _transcript(settings, thread_id) == [
                ("human", asked),
                ("ai", f"answer to {asked}"),
            ]
        assert gated.server.violations == []


def _proc_state(pid: int) -> str:
    raw = Path(f"/proc/{pid}/stat").read_text()
    return raw[raw.rfind(")") + 2 :].split()[0]


def test_a_killed_unreaped_holder_frees_the_thread_at_once(
    store_env: dict[str, str],
    make_backend_settings: Callable[..., Settings],
    home: Path,
    workspace: Path,
) -> None:
    """A zombie (killed, not reaped by its parent) holds nothing."""
    settings = make_backend_settings(**store_env)
    with FakeOpenAIServer([{"content": "went ahead"}]) as server:
        env = server_env(home, server.url, KEY, **store_env)
        holder = start_lease_holder(env, "zomb1", workspace)
        try:
            with (
                open_store(settings) as store,
                pytest.raises(SessionInUse, match=f"in use by process {holder.pid} since"),
            ):
                store.leases.acquire("zomb1", "continue")
            os.kill(holder.pid, signal.SIGKILL)
            deadline = time.monotonic() + ZOMBIE_WAIT_S
            while _proc_state(holder.pid) != "Z" and time.monotonic() < deadline:
                time.sleep(POLL_S)
            assert _proc_state(holder.pid) == "Z"  # not reaped: the pid still exists
            res = subprocess.run(
                [sys.executable, "-m", "agentgraph", "run", "go on", "--thread", "zomb1"],
                cwd=workspace,
                env=env,
                capture_output=True,
                text=True,
                timeout=CLI_TIMEOUT_S,
            )
            assert res.returncode == 0, res.stderr
            assert res.stdout.strip() == "went ahead"
            assert _proc_state(holder.pid) == "Z"  # it was a zombie all along
        finally:
            holder.kill()
            holder.communicate()


def test_a_repl_switch_and_delete_respect_the_lease(
    store_env: dict[str, str], home: Path, workspace: Path
) -> None:
    with FakeOpenAIServer([{"content": "one"}]) as server:
        env = server_env(home, server.url, KEY, **store_env)
        for tid in ("held1", "free1"):
            res = subprocess.run(
                [sys.executable, "-m", "agentgraph", "run", f"hi {tid}", "--thread", tid],
                cwd=workspace,
                env=env,
                capture_output=True,
                text=True,
                timeout=CLI_TIMEOUT_S,
            )
            assert res.returncode == 0, res.stderr
        with lease_holder(env, "held1", workspace) as holder:
            repl = subprocess.run(
                [sys.executable, "-m", "agentgraph", "-r", "free1"],
                input="/switch held1\n/current\n/exit\n",
                cwd=workspace,
                env=env,
                capture_output=True,
                text=True,
                timeout=CLI_TIMEOUT_S,
            )
            assert repl.returncode == 0, repl.stderr
            assert f"in use by process {holder.pid}" in repl.stderr
            assert "session free1 " in repl.stderr  # still in the session it had
            deleted = subprocess.run(
                [sys.executable, "-m", "agentgraph", "sessions", "delete", "held1", "--yes"],
                cwd=workspace,
                env=env,
                capture_output=True,
                text=True,
                timeout=CLI_TIMEOUT_S,
            )
            assert deleted.returncode == 1 and f"process {holder.pid}" in deleted.stderr
        listed = subprocess.run(
            [sys.executable, "-m", "agentgraph", "sessions", "list", "--json"],
            cwd=workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT_S,
        )
        assert sorted(r["thread_id"] for r in json.loads(listed.stdout)) == ["free1", "held1"]


# --------------------------------------------------------------------------- stale rows


def _stale_row(settings: Settings, thread_id: str, **values: Any) -> None:
    """A row a crashed holder left behind (SQLite store)."""
    row = {
        "pid": os.getpid(),
        "start_time": process_start_time(os.getpid()),
        "host": "here",
        "pid_space": "",
        "since": time.time(),
        "heartbeat": time.time(),
        **values,
    }
    with open_store(settings) as store:
        store.leases.acquire("setup", "create the table")
    conn = sqlite3.connect(settings.db_path)
    with conn:
        conn.execute(
            f"INSERT OR REPLACE INTO {LEASES_TABLE} (thread_id, {','.join(row)}) "
            f"VALUES (?, {','.join('?' for _ in row)})",
            (thread_id, *row.values()),
        )
    conn.close()


def test_a_reused_pid_is_not_a_holder(settings: Settings, workspace: Path) -> None:
    from agentgraph.process import pid_space

    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        started = process_start_time(other.pid)
        assert started is not None and pid_alive(other.pid, started)
        # The row names this live pid with another start time: the pid was reused.
        _stale_row(settings, "reused", pid=other.pid, start_time=started - 1, pid_space=pid_space())
        with open_store(settings) as store:
            assert store.leases.holder("reused") is None
            store.leases.acquire("reused", "continue")
        _stale_row(settings, "live", pid=other.pid, start_time=started, pid_space=pid_space())
        with open_store(settings) as store, pytest.raises(SessionInUse):
            store.leases.acquire("live", "continue")
    finally:
        other.kill()
        other.wait()


def test_a_holder_elsewhere_is_trusted_until_its_heartbeat_expires(settings: Settings) -> None:
    now = time.time()
    _stale_row(settings, "remote1", pid=1234, pid_space="other-machine", host="box2")
    _stale_row(
        settings,
        "remote2",
        pid=1234,
        pid_space="other-machine",
        host="box2",
        heartbeat=now - LEASE_TTL_S - 1,
    )
    with open_store(settings) as store:
        with pytest.raises(SessionInUse, match="in use by process 1234 on box2 since"):
            store.leases.acquire("remote1", "continue")
        store.leases.acquire("remote2", "continue")  # silent for too long: gone


def test_a_store_kept_open_loses_no_commit_when_another_process_closes_its_own(
    settings: Settings, home: Path, workspace: Path
) -> None:
    """Two connections of one process, and a CLI opening and closing the same file.

    Reading the file's header with a plain ``open()`` while SQLite had it open dropped
    this process's locks: the other process, closing last, deleted the WAL, and every
    later commit here went to the deleted file (invisible to all, lost).
    """
    from agentgraph.session.agent import Agent
    from tests.fakes.chat_model import ScriptedChatModel
    from tests.fakes.scripts import ai_text

    env = server_env(home, "http://127.0.0.1:9/v1", KEY, AGENTGRAPH_HOME=str(settings.home))
    with open_store(settings) as store:
        agent = Agent(settings, store, model=ScriptedChatModel([ai_text("kept")]))
        agent.run_turn("before1", "first", workspace)
        listed = subprocess.run(
            [sys.executable, "-m", "agentgraph", "sessions", "list", "--all", "--json"],
            cwd=workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT_S,
        )
        assert [r["thread_id"] for r in json.loads(listed.stdout)] == ["before1"]
        agent.run_turn("after1", "second", workspace)
        shown = subprocess.run(
            [sys.executable, "-m", "agentgraph", "sessions", "show", "after1", "--json"],
            cwd=workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT_S,
        )
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["transcript"]["messages"] == 2
