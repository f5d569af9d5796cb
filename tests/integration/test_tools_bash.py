"""run_bash: exit codes, timeouts that kill the whole group, bounded output, no secrets."""

import os
import re
import secrets
import signal
import subprocess
import threading
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode

from agentgraph.capabilities.tools import build_tools, format_tool_error
from agentgraph.capabilities.tools.bash import (
    BASH_DRAIN_S,
    BASH_KILL_GRACE_S,
    BASH_OUTPUT_MAX_BYTES,
    BASH_TIMEOUT_MAX_S,
    COMMAND_MARKER_ENV,
    HeadTailBuffer,
    home_scope,
    kill_orphaned_commands,
    tool_environment,
)
from agentgraph.capabilities.tools.sandbox import SANDBOX_CACHE_DIR
from agentgraph.config import Settings
from agentgraph.runtime.runctx import RunContext
from agentgraph.runtime.state import AppState
from tests.proc_helpers import wait_until_gone
from tests.sandbox_helpers import require_sandbox, sandbox_mode

__all__ = ["sandbox_mode"]  # a fixture, used by name

MIB = 1024 * 1024
BIG_OUTPUT_BYTES = 50_000_000
BIG_OUTPUT_MAX_PEAK_BYTES = 20 * MIB
# Hang guard only (not a speed assertion): generous bound on how long a test
# waits for a tool call that must terminate.
HANG_GUARD_S = 60.0
FAKE_KEY = "sk-fake-0123456789abcdef"


def _settings(tmp_path: Path, **env: Any) -> Settings:
    return Settings(AGENTGRAPH_HOME=str(tmp_path / "home"), _env_file=None, **env)


def run_bash(
    workspace: Path,
    command: str,
    *,
    settings: Settings,
    base_env: dict[str, str] | None = None,
    **args: Any,
) -> ToolMessage:
    """One run_bash call through a real ToolNode, in a thread guarded against hangs."""
    tools = build_tools(settings, base_env=base_env)
    graph = StateGraph(AppState, context_schema=RunContext)
    graph.add_node("tools", ToolNode(tools, handle_tool_errors=format_tool_error))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    message = AIMessage(
        content="",
        tool_calls=[{"name": "run_bash", "args": {"command": command, **args}, "id": "call-0"}],
    )
    box: dict[str, Any] = {}

    def target() -> None:
        box["out"] = graph.compile().invoke(
            {"messages": [message]}, context=RunContext(workspace_path=str(workspace))
        )

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(HANG_GUARD_S)
    assert not worker.is_alive(), "run_bash did not return"
    (result,) = [m for m in box["out"]["messages"] if isinstance(m, ToolMessage)]
    return result


def text(message: ToolMessage) -> str:
    assert isinstance(message.content, str)
    return message.content


def _marker() -> str:
    """A unique sleep duration, so our processes are identifiable in /proc."""
    return f"{900 + secrets.randbelow(99)}.{secrets.randbelow(10**6):06d}"


# --------------------------------------------------------------------------- basics


def test_exit_code_and_merged_output(tmp_path: Path, sandbox_mode: str) -> None:
    settings = _settings(tmp_path, AGENTGRAPH_SANDBOX=sandbox_mode)
    result = run_bash(tmp_path, "echo out; echo err >&2; exit 3", settings=settings)
    assert result.status == "success"  # a failing command is data, not a tool error
    assert text(result) == "out\nerr\n[exit code 3]"
    assert text(run_bash(tmp_path, "printf abc", settings=settings)) == "abc\n[exit code 0]"
    assert text(run_bash(tmp_path, "true", settings=settings)) == "[exit code 0]"


def test_runs_in_the_workspace_with_stdin_closed(tmp_path: Path, sandbox_mode: str) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    result = run_bash(
        ws,
        "pwd; cat; echo HOME=$HOME",
        settings=_settings(tmp_path, AGENTGRAPH_SANDBOX=sandbox_mode),
    )
    assert text(result) == f"{ws.resolve()}\nHOME={ws.resolve()}\n[exit code 0]"


def test_killed_by_signal_is_reported(tmp_path: Path, sandbox_mode: str) -> None:
    settings = _settings(tmp_path, AGENTGRAPH_SANDBOX=sandbox_mode)
    result = run_bash(tmp_path, "kill -9 $$", settings=settings)
    # The sandbox's launcher reports a killed command like a shell does: 128 + signal.
    expected = "[exit code -9 (killed by SIGKILL)]" if sandbox_mode == "off" else "[exit code 137]"
    assert text(result) == expected


def test_invalid_timeout_and_empty_command(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    too_long = run_bash(tmp_path, "true", settings=settings, timeout_s=BASH_TIMEOUT_MAX_S + 1)
    assert too_long.status == "error" and str(BASH_TIMEOUT_MAX_S) in text(too_long)
    assert run_bash(tmp_path, "true", settings=settings, timeout_s=0).status == "error"
    assert run_bash(tmp_path, "   ", settings=settings).status == "error"


# --------------------------------------------------------------------------- timeouts


def test_timeout_kills_the_whole_group(tmp_path: Path, sandbox_mode: str) -> None:
    marker = _marker()
    result = run_bash(
        tmp_path,
        f"echo pgid=$$; sleep {marker} & sleep {marker} & wait",
        settings=_settings(tmp_path, AGENTGRAPH_SANDBOX=sandbox_mode),
        timeout_s=1,
    )
    assert text(result).endswith("[timed out after 1s; process group killed]")
    match = re.search(r"pgid=(\d+)", text(result))
    assert match is not None
    if sandbox_mode == "off":
        pgid = int(match.group(1))
        assert wait_until_gone(lambda cmd, pgrp: pgrp == pgid or marker in cmd) == []
    else:  # $$ is a pid of the sandbox's own namespace: find the sleeps by marker
        assert wait_until_gone(lambda cmd, _: marker in cmd) == []


def test_timeout_when_the_shell_ignores_sigterm(tmp_path: Path, sandbox_mode: str) -> None:
    marker = _marker()
    result = run_bash(
        tmp_path,
        f"trap '' TERM; sleep {marker}; echo never",
        settings=_settings(tmp_path, AGENTGRAPH_SANDBOX=sandbox_mode),
        timeout_s=1,
    )
    assert "never" not in text(result)
    assert text(result).endswith("[timed out after 1s; process group killed]")
    assert wait_until_gone(lambda cmd, _: marker in cmd) == []


def test_grandchild_holding_the_pipe_does_not_hang(tmp_path: Path, sandbox_mode: str) -> None:
    marker = _marker()
    result = run_bash(
        tmp_path,
        f"(sleep {marker} &); echo started",
        settings=_settings(tmp_path, AGENTGRAPH_SANDBOX=sandbox_mode),
        timeout_s=BASH_TIMEOUT_MAX_S,
    )
    # The shell exited at once; the daemonized sleep kept stdout open and was
    # cut off after the drain window, then killed with its group.
    assert text(result) == "started\n[exit code 0]"
    assert wait_until_gone(lambda cmd, _: marker in cmd) == []


def test_background_job_output_within_the_drain_window_is_kept(
    tmp_path: Path, sandbox_mode: str
) -> None:
    assert BASH_DRAIN_S >= 0.5
    result = run_bash(
        tmp_path,
        "(sleep 0.1; echo late) & echo early",
        settings=_settings(tmp_path, AGENTGRAPH_SANDBOX=sandbox_mode),
    )
    if sandbox_mode == "off":
        assert text(result) == "early\nlate\n[exit code 0]"
    else:
        # The sandbox ends with its shell: its PID namespace takes background jobs down.
        assert text(result).startswith("early\n")
        assert text(result).endswith("[exit code 0]")


def test_kill_grace_constant_is_bounded() -> None:
    assert 0 < BASH_KILL_GRACE_S <= 10


# --------------------------------------------------------------------------- orphans


def test_an_orphan_is_stopped_only_by_a_start_of_its_own_home(tmp_path: Path) -> None:
    """A command whose agentgraph died is reaped by its home's next start, not another's."""
    mine, other = tmp_path / "home", tmp_path / "other"
    mine.mkdir()
    (tmp_path / "link").symlink_to(mine)
    assert home_scope(tmp_path / "link") == home_scope(mine) != home_scope(other)
    dead_owner = subprocess.Popen(["true"])
    dead_owner.wait()
    orphan = subprocess.Popen(
        ["sleep", _marker()],
        env={**os.environ, COMMAND_MARKER_ENV: f"{dead_owner.pid}-{home_scope(mine)}-0"},
        start_new_session=True,
    )
    try:
        assert kill_orphaned_commands(home_scope(other)) == 0
        assert orphan.poll() is None
        assert kill_orphaned_commands(home_scope(mine)) == 1
        assert orphan.wait(timeout=HANG_GUARD_S) == -signal.SIGKILL
    finally:
        orphan.kill()
        orphan.wait()


# --------------------------------------------------------------------------- output size


def test_huge_output_keeps_head_and_tail_in_bounded_memory(
    tmp_path: Path, sandbox_mode: str
) -> None:
    command = f"printf START; head -c {BIG_OUTPUT_BYTES} /dev/zero | tr '\\0' x; printf END"
    tracemalloc.start()
    try:
        result = run_bash(
            tmp_path, command, settings=_settings(tmp_path, AGENTGRAPH_SANDBOX=sandbox_mode)
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    body = text(result)
    dropped = len("START") + BIG_OUTPUT_BYTES + len("END") - BASH_OUTPUT_MAX_BYTES
    assert body.startswith("STARTxxx")
    assert body.endswith("xxxEND\n[exit code 0]")
    assert f"\n…{dropped} bytes truncated…\n" in body
    assert len(body.encode()) < BASH_OUTPUT_MAX_BYTES + 200
    assert peak < BIG_OUTPUT_MAX_PEAK_BYTES


def test_head_tail_buffer_cuts_on_character_boundaries() -> None:
    buffer = HeadTailBuffer(10)
    data = "é" * 20  # 40 bytes of 2-byte characters
    for i in range(0, 40, 3):
        buffer.feed(data.encode()[i : i + 3])
    rendered, dropped = buffer.render()
    head, marker, tail = rendered.split("\n")
    assert head == "éé" and tail == "éé"
    assert marker == f"…{dropped} bytes truncated…"
    assert dropped == 32
    small = HeadTailBuffer(100)
    small.feed(b"hello \xff")
    assert small.render() == ("hello \ufffd", 0)


# --------------------------------------------------------------------------- secrets


# Named like the credentials a hostile test pass saw printed by `printenv`.
SECRET_ENV = {
    "MY_PRIVATE_KEY": "pk-9f8e7d6c5b4a3921",
    "STRIPE_KEY": "stripe-Zq81hVx03kLm",
    "DEPLOY_KEY": "dk-71HqPz0aLm2Xc9",
    "DB_PASS": "Tr0ub4dor&3-prod",
    "AUTH_BEARER": "bearer-Qw3rty-8812",
    "SLACK_WEBHOOK_URL": "https://hooks.example.net/T0/B0/xY9zW8",
    "SENTRY_DSN": "https://abc123def456@errors.example.net/42",
    "GITHUB_TOKEN": "gh-token-0aZ9bY8cX7",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI-K7MDENG",
    "PGPASSWORD": "pg-Secret-4711-x",
    "OPENAI_API_KEY": FAKE_KEY,
}


def test_tool_environment_is_an_allowlist() -> None:
    env = {
        **SECRET_ENV,
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "xterm",
        "TZ": "UTC",
        "INNOCENT_LOOKING": "value",
        "HTTPS_PROXY": "http://user:pass@proxy:3128",
        "TMPDIR": "postgres://u:pw12345678@h/db",  # allowlisted name, credential value
        "MY_TOOL_HOME": "/opt/tool",
    }
    original = dict(env)
    assert tool_environment(env, ["MY_TOOL_HOME"]) == {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "xterm",
        "TZ": "UTC",
        "MY_TOOL_HOME": "/opt/tool",
    }
    assert env == original
    assert tool_environment({}) == {"PATH": os.defpath}


def test_sandbox_gives_a_writable_temp_dir_and_cache(tmp_path: Path) -> None:
    require_sandbox()
    settings = _settings(tmp_path, AGENTGRAPH_SANDBOX="on")
    command = 'mkdir -p "$XDG_CACHE_HOME/tool" && touch "$TMPDIR/t" && echo "$XDG_CACHE_HOME"'
    result = run_bash(tmp_path, command, settings=settings, base_env={"PATH": os.defpath})
    assert text(result) == f"{SANDBOX_CACHE_DIR}\n[exit code 0]"


def test_printenv_shows_no_secret(tmp_path: Path, sandbox_mode: str) -> None:
    settings = _settings(
        tmp_path, AGENTGRAPH_SANDBOX=sandbox_mode, AGENTGRAPH_BASH_ENV_ALLOW="VISIBLE, OTHER"
    )
    base_env = {**SECRET_ENV, "PATH": os.defpath, "VISIBLE": "yes", "HIDDEN": "no"}
    result = text(run_bash(tmp_path, "printenv", settings=settings, base_env=base_env))
    for name, value in SECRET_ENV.items():
        assert name not in result
        assert value not in result
    assert "VISIBLE=yes" in result
    assert "HIDDEN" not in result


# Approval (AGENTGRAPH_BASH=ask) happens in the tools node: tests/unit/test_approvals.py.


@pytest.mark.parametrize("mode", ["on", "ask"])
def test_default_timeout_comes_from_settings(tmp_path: Path, mode: str) -> None:
    settings = _settings(tmp_path, AGENTGRAPH_BASH=mode, AGENTGRAPH_BASH_TIMEOUT_S=1)
    result = run_bash(tmp_path, f"sleep {_marker()}", settings=settings)
    assert text(result).endswith("[timed out after 1s; process group killed]")
