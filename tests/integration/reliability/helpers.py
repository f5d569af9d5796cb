"""Shared plumbing for the reliability suite: the real CLI in a subprocess, DB scans."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.cli_helpers import server_env
from tests.fakes.openai_server import FakeOpenAIServer

KEY = "sk-test-reliab-0123456789abcdefXYZ"
WAIT_FOR_FILE_S = 60.0
POLL_S = 0.05
PROCESS_EXIT_WAIT_S = 30.0


def agent_env(home: Path, server: FakeOpenAIServer, **extra: str) -> dict[str, str]:
    """CLI environment talking to ``server`` with a key, no retries unless overridden."""
    return server_env(home, server.url, KEY, **extra)


def spawn_cli(args: list[str], *, cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    """Start ``python -m agentgraph ARGS`` without waiting for it."""
    return subprocess.Popen(
        [sys.executable, "-m", "agentgraph", *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(path: Path, proc: subprocess.Popen[str] | None = None) -> None:
    """Wait until ``path`` exists; fail early (with its stderr) if ``proc`` exits first."""
    deadline = time.monotonic() + WAIT_FOR_FILE_S
    while not path.exists():
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"process exited {proc.returncode} first: {err}{out}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} never appeared")
        time.sleep(POLL_S)


def sigkill(proc: subprocess.Popen[str]) -> None:
    """SIGKILL the process and reap it."""
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=PROCESS_EXIT_WAIT_S)
    assert proc.returncode == -signal.SIGKILL


def kill_pid_file(path: Path) -> None:
    """Kill the process group whose leader's pid a command wrote to ``path`` (cleanup)."""
    with contextlib.suppress(OSError, ValueError):
        pid = int(path.read_text().split()[0])
        os.killpg(pid, signal.SIGKILL)


def store_bytes(home: Path) -> bytes:
    """Every byte of the SQLite store: the database, its WAL and shared memory."""
    db = home / ".agentgraph" / "sessions.db"
    return b"".join(
        Path(str(db) + suffix).read_bytes()
        for suffix in ("", "-wal", "-shm")
        if Path(str(db) + suffix).exists()
    )


def all_files_bytes(root: Path) -> dict[Path, bytes]:
    """Contents of every regular file under ``root``."""
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and not p.is_symlink()}


def alive(pid: int) -> bool:
    """Whether ``pid`` is a running (not zombie) process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
