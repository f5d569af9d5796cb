"""Honest records of runs that did not end normally, from the real CLI in a subprocess."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agentgraph.errors import EXIT_RUN_TIMEOUT, EXIT_STEP_LIMIT
from tests.cli_helpers import cli_env, run_cli
from tests.fakes.openai_server import FakeOpenAIServer
from tests.integration.reliability.helpers import (
    POLL_S,
    WAIT_FOR_FILE_S,
    agent_env,
    kill_pid_file,
    sigkill,
    spawn_cli,
    wait_for,
)

# How long the server holds the first request: far longer than the test needs to
# SIGKILL the CLI, released at once afterwards.
HOLD_S = 60.0
RUN_TIMEOUT_S = "2"
SLEEP_S = 60
INDEX_POLL_S = 0.002
WORKSPACE_FILES = 3_000


def _wait_for_requests(server: FakeOpenAIServer, n: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + WAIT_FOR_FILE_S
    while len(server.requests) < n:
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"process exited {proc.returncode} first: {err}{out}")
        if time.monotonic() > deadline:
            raise AssertionError("the CLI never called the model")
        time.sleep(POLL_S)


def _sent_text(request: dict[str, Any]) -> str:
    return json.dumps(request["messages"], ensure_ascii=False)


def _wait_for_index_row(db: Path, thread_id: str, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + WAIT_FOR_FILE_S
    while True:
        if db.exists():
            conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
            try:
                row = conn.execute(
                    "SELECT 1 FROM agentgraph_sessions WHERE thread_id = ?", (thread_id,)
                ).fetchone()
            except sqlite3.Error:
                row = None
            finally:
                conn.close()
            if row:
                return
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"process exited {proc.returncode} first: {err}{out}")
        if time.monotonic() > deadline:
            raise AssertionError("the session never appeared in the index")
        time.sleep(INDEX_POLL_S)


def test_prompt_survives_a_kill_during_the_first_model_call(home: Path, workspace: Path) -> None:
    """The session's row appears, the store is then held, the model call hangs: SIGKILL.

    Nothing the run writes after its session row can land (the test holds the write
    lock), so the prompt survives only if it was durable by then.
    """
    for n in range(WORKSPACE_FILES):  # the undo snapshot takes a while
        (workspace / f"file{n}.txt").write_text(str(n))
    release = threading.Event()

    def held(_request: dict[str, Any]) -> dict[str, Any]:
        release.wait(HOLD_S)
        return {"content": "too late"}

    db = home / ".agentgraph" / "sessions.db"
    with FakeOpenAIServer([held]) as server:
        env = agent_env(home, server, AGENTGRAPH_SQLITE_BUSY_TIMEOUT_S=str(HOLD_S))
        proc = spawn_cli(["run", "remember QUINCE", "--thread", "k1"], cwd=workspace, env=env)
        holder: sqlite3.Connection | None = None
        try:
            _wait_for_index_row(db, "k1", proc)
            holder = sqlite3.connect(db, isolation_level=None, timeout=HOLD_S)
            holder.execute("BEGIN IMMEDIATE")
            _wait_for_requests(server, 1, proc)
            sigkill(proc)
        finally:
            release.set()
            if holder is not None:
                holder.execute("ROLLBACK")
                holder.close()
    with FakeOpenAIServer([{"content": "QUINCE"}]) as server:
        env = agent_env(home, server)
        args = ["run", "what was the word?", "--thread", "k1", "--json"]
        resumed = run_cli(args, cwd=workspace, env=env)
        assert resumed.returncode == 0, resumed.stderr
        assert server.violations == []
        sent = _sent_text(server.requests[0])
    assert "remember QUINCE" in sent and "what was the word?" in sent


def test_loop_cap_with_a_model_that_ignores_tool_choice_none(home: Path, workspace: Path) -> None:
    # Every reply is a tool call, even when asked to answer without tools.
    script = [{"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]}]
    with FakeOpenAIServer(script, on_exhausted="repeat_last") as server:
        env = agent_env(home, server, MAX_LOOPS="2")
        result = run_cli(
            ["run", "look around", "--thread", "cap", "--json"], cwd=workspace, env=env
        )
        assert server.violations == []
    assert result.returncode == EXIT_STEP_LIMIT, result.stderr
    payload = json.loads(result.stdout)
    assert payload["answer"].strip()  # never "answer": ""
    assert "step limit" in payload["answer"]
    assert (payload["stopped"], payload["exit_code"]) == ("max_loops", EXIT_STEP_LIMIT)
    assert "MAX_LOOPS=2" in result.stderr and "Traceback" not in result.stderr


def test_run_timeout_stops_cleanly_and_the_session_resumes(home: Path, workspace: Path) -> None:
    command = f"echo $$ > sleeper.pid; sleep {SLEEP_S}; echo done > marker"
    script = [{"tool_calls": [{"name": "run_bash", "arguments": {"command": command}}]}]
    try:
        with FakeOpenAIServer(script, on_exhausted="raise") as server:
            # Unsandboxed: $$ is then a host pid that the clean-up below may kill (in the
            # sandbox it is a pid of the sandbox's own namespace).
            env = agent_env(
                home, server, AGENTGRAPH_RUN_TIMEOUT_S=RUN_TIMEOUT_S, AGENTGRAPH_SANDBOX="off"
            )
            stopped = run_cli(
                ["run", "sleep a while", "--thread", "slow", "--json"], cwd=workspace, env=env
            )
    finally:
        kill_pid_file(workspace / "sleeper.pid")
    assert stopped.returncode == EXIT_RUN_TIMEOUT, stopped.stderr
    lines = stopped.stderr.strip().splitlines()
    assert "AGENTGRAPH_RUN_TIMEOUT_S (2s)" in lines[-1] and "Traceback" not in stopped.stderr
    assert json.loads(stopped.stdout)["stopped"] == "timeout"
    assert not (workspace / "marker").exists()
    with FakeOpenAIServer([{"content": "back"}], on_exhausted="raise") as server:
        env = agent_env(home, server)
        resumed = run_cli(["run", "go on", "--thread", "slow", "--json"], cwd=workspace, env=env)
        assert resumed.returncode == 0, resumed.stderr
        assert server.violations == []  # the stored history is valid for a strict provider
        sent = _sent_text(server.requests[0])
    assert "sleep a while" in sent and "go on" in sent


def test_deeply_nested_import_is_one_line(home: Path, workspace: Path, tmp_path: Path) -> None:
    depth = 100_000
    entry = {"uuid": "u1", "type": "user", "sessionId": "deep"}
    line = json.dumps(entry)[:-1] + ', "message": {"role": "user", "content": '
    line += "[" * depth + "]" * depth + "}}\n"
    source = tmp_path / "deep.jsonl"
    source.write_text(line, encoding="utf-8")
    result = run_cli(["sessions", "import", str(source)], cwd=workspace, env=cli_env(home))
    assert result.returncode != 0
    assert "Traceback" not in result.stderr and "RecursionError" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "nested deeper than" in lines[0], result.stderr


def _read_only_command(folder: Path, args: list[str]) -> list[str] | None:
    """``args`` run with ``folder`` read-only, or None when that cannot be arranged."""
    if os.geteuid() != 0:
        folder.chmod(0o555)
        return args
    # root ignores permissions: a read-only bind mount in a user namespace.
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    probe = subprocess.run([unshare, "-rm", "true"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        return None
    mount = f"mount --bind {folder} {folder} && mount -o remount,ro,bind {folder} {folder}"
    quoted = " ".join(f"'{a}'" for a in args)
    return [unshare, "-rm", "sh", "-c", f"{mount} && exec {quoted}"]


def test_read_only_home_is_one_line(home: Path, workspace: Path) -> None:
    import sys

    agent_home = home / ".agentgraph"
    agent_home.mkdir()
    command = _read_only_command(
        agent_home, [sys.executable, "-m", "agentgraph", "run", "hi", "--thread", "ro"]
    )
    if command is None:
        pytest.skip("cannot make a read-only folder here (root without user namespaces)")
    env = cli_env(home, OPENAI_BASE_URL="http://127.0.0.1:9/v1", OPENAI_API_KEY="sk-test")
    try:
        result = subprocess.run(
            command, cwd=workspace, env=env, capture_output=True, text=True, timeout=120
        )
    finally:
        agent_home.chmod(0o755)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert "unable to open database file" not in lines[0]
    assert "not writable" in lines[0] or "Read-only file system" in lines[0], lines[0]
    assert "AGENTGRAPH_HOME" in lines[0]


def test_a_call_running_when_the_agent_died_is_reported_as_maybe_completed(
    home: Path, workspace: Path
) -> None:
    slow = f"echo $$ > slow.pid; echo ran >> slow_started; sleep {SLEEP_S}"
    script = [{"tool_calls": [{"name": "run_bash", "arguments": {"command": slow}}]}]
    try:
        with FakeOpenAIServer(script) as server:
            env = agent_env(home, server)
            proc = spawn_cli(["run", "do it", "--thread", "orphan"], cwd=workspace, env=env)
            wait_for(workspace / "slow_started", proc)
            sigkill(proc)
        with FakeOpenAIServer([{"content": "checked"}], on_exhausted="raise") as server:
            env = agent_env(home, server)
            args = ["run", "carry on", "--thread", "orphan", "--json"]
            resumed = run_cli(args, cwd=workspace, env=env)
            assert resumed.returncode == 0, resumed.stderr
            assert server.violations == []
            sent = server.requests[0]["messages"]
    finally:
        kill_pid_file(workspace / "slow.pid")
    results = [m["content"] for m in sent if m["role"] == "tool"]
    assert len(results) == 1
    assert results[0].startswith("interrupted: the command was started at 20"), results
    assert "may have completed" in results[0] and "check its effects" in results[0]
    assert "aborted" not in results[0]
    assert (workspace / "slow_started").read_text() == "ran\n"  # not run again
