"""run_bash: exit codes, timeouts that kill the whole group, bounded output, no secrets."""

import os
import re
import secrets
import threading
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode

from agentgraph.config import Settings
from agentgraph.runctx import RunContext
from agentgraph.state import AppState
from agentgraph.tools import build_tools, format_tool_error
from agentgraph.tools.bash import (
    BASH_DRAIN_S,
    BASH_KILL_GRACE_S,
    BASH_OUTPUT_MAX_BYTES,
    BASH_TIMEOUT_MAX_S,
    HeadTailBuffer,
    is_secret_env_name,
    redact,
    scrub_environment,
)
from tests.proc_helpers import wait_until_gone

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


def test_exit_code_and_merged_output(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    result = run_bash(tmp_path, "echo out; echo err >&2; exit 3", settings=settings)
    assert result.status == "success"  # a failing command is data, not a tool error
    assert text(result) == "out\nerr\n[exit code 3]"
    assert text(run_bash(tmp_path, "printf abc", settings=settings)) == "abc\n[exit code 0]"
    assert text(run_bash(tmp_path, "true", settings=settings)) == "[exit code 0]"


def test_runs_in_the_workspace_with_stdin_closed(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    result = run_bash(ws, "pwd; cat; echo HOME=$HOME", settings=_settings(tmp_path))
    assert text(result) == f"{ws.resolve()}\nHOME={ws.resolve()}\n[exit code 0]"


def test_killed_by_signal_is_reported(tmp_path: Path) -> None:
    result = run_bash(tmp_path, "kill -9 $$", settings=_settings(tmp_path))
    assert text(result) == "[exit code -9 (killed by SIGKILL)]"


def test_invalid_timeout_and_empty_command(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    too_long = run_bash(tmp_path, "true", settings=settings, timeout_s=BASH_TIMEOUT_MAX_S + 1)
    assert too_long.status == "error" and str(BASH_TIMEOUT_MAX_S) in text(too_long)
    assert run_bash(tmp_path, "true", settings=settings, timeout_s=0).status == "error"
    assert run_bash(tmp_path, "   ", settings=settings).status == "error"


# --------------------------------------------------------------------------- timeouts


def test_timeout_kills_the_whole_group(tmp_path: Path) -> None:
    marker = _marker()
    result = run_bash(
        tmp_path,
        f"echo pgid=$$; sleep {marker} & sleep {marker} & wait",
        settings=_settings(tmp_path),
        timeout_s=1,
    )
    assert text(result).endswith("[timed out after 1s; process group killed]")
    match = re.search(r"pgid=(\d+)", text(result))
    assert match is not None
    pgid = int(match.group(1))
    assert wait_until_gone(lambda cmd, pgrp: pgrp == pgid or marker in cmd) == []


def test_timeout_when_the_shell_ignores_sigterm(tmp_path: Path) -> None:
    marker = _marker()
    result = run_bash(
        tmp_path,
        f"trap '' TERM; sleep {marker}; echo never",
        settings=_settings(tmp_path),
        timeout_s=1,
    )
    assert "never" not in text(result)
    assert text(result).endswith("[timed out after 1s; process group killed]")
    assert wait_until_gone(lambda cmd, _: marker in cmd) == []


def test_grandchild_holding_the_pipe_does_not_hang(tmp_path: Path) -> None:
    marker = _marker()
    result = run_bash(
        tmp_path,
        f"(sleep {marker} &); echo started",
        settings=_settings(tmp_path),
        timeout_s=BASH_TIMEOUT_MAX_S,
    )
    # The shell exited at once; the daemonized sleep kept stdout open and was
    # cut off after the drain window, then killed with its group.
    assert text(result) == "started\n[exit code 0]"
    assert wait_until_gone(lambda cmd, _: marker in cmd) == []


def test_background_job_output_within_the_drain_window_is_kept(tmp_path: Path) -> None:
    assert BASH_DRAIN_S >= 0.5
    result = run_bash(tmp_path, "(sleep 0.1; echo late) & echo early", settings=_settings(tmp_path))
    assert text(result) == "early\nlate\n[exit code 0]"


def test_kill_grace_constant_is_bounded() -> None:
    assert 0 < BASH_KILL_GRACE_S <= 10


# --------------------------------------------------------------------------- output size


def test_huge_output_keeps_head_and_tail_in_bounded_memory(tmp_path: Path) -> None:
    command = f"printf START; head -c {BIG_OUTPUT_BYTES} /dev/zero | tr '\\0' x; printf END"
    tracemalloc.start()
    try:
        result = run_bash(tmp_path, command, settings=_settings(tmp_path))
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


def test_scrub_environment_drops_credentials_by_name_and_value() -> None:
    env = {
        "PATH": "/usr/bin",
        "OPENAI_API_KEY": "a",
        "ANTHROPIC_BASE_URL": "b",
        "AWS_SECRET_ACCESS_KEY": "c",
        "AWS_SESSION_TOKEN": "d",
        "GITHUB_TOKEN": "e",
        "GH_TOKEN": "f",
        "HF_TOKEN": "g",
        "AGENTGRAPH_DATABASE_URL": "postgres://u:p@h/db",
        "STRIPE_API_KEY": "h",
        "my_service_token": "i",
        "DJANGO_SECRET_KEY": "j",
        "DB_PASSWORD": "k",
        "GOOGLE_APIKEY": "l",
        "MAPS_API_ACCESS_KEY": "m",
        "INNOCENT": FAKE_KEY,
        "PROXY_URL": f"https://x:{FAKE_KEY}@proxy",
        "EDITOR": "vim",
        "SHORT": "ab",
    }
    original = dict(env)
    scrubbed = scrub_environment(env, [FAKE_KEY, "", "ab"])
    assert scrubbed == {"PATH": "/usr/bin", "EDITOR": "vim"}
    assert env == original
    assert not is_secret_env_name("KEYBOARD_LAYOUT")
    assert is_secret_env_name("openai_api_key")


def test_printenv_shows_no_secret(tmp_path: Path) -> None:
    settings = _settings(tmp_path, OPENAI_API_KEY=FAKE_KEY)
    base_env = {
        "PATH": os.defpath,
        "OPENAI_API_KEY": FAKE_KEY,
        "RENAMED_COPY": FAKE_KEY,
        "GITHUB_TOKEN": "ghp_other_secret_value",
        "VISIBLE": "yes",
    }
    result = text(run_bash(tmp_path, "printenv", settings=settings, base_env=base_env))
    assert FAKE_KEY not in result
    assert "ghp_other_secret_value" not in result
    assert "VISIBLE=yes" in result
    echoed = text(run_bash(tmp_path, f"echo key={FAKE_KEY}", settings=settings))
    assert echoed == "key=[REDACTED]\n[exit code 0]"
    assert redact(f"a{FAKE_KEY}b", [FAKE_KEY, ""]) == "a[REDACTED]b"


# Approval (AGENTGRAPH_BASH=ask) happens in the tools node: tests/test_approvals.py.


@pytest.mark.parametrize("mode", ["on", "ask"])
def test_default_timeout_comes_from_settings(tmp_path: Path, mode: str) -> None:
    settings = _settings(tmp_path, AGENTGRAPH_BASH=mode, AGENTGRAPH_BASH_TIMEOUT_S=1)
    result = run_bash(tmp_path, f"sleep {_marker()}", settings=settings)
    assert text(result).endswith("[timed out after 1s; process group killed]")
