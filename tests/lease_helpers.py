"""A real process holding a thread's lease, for in-use tests."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HOLDER_READY_LINE = "held"

# Opens the store configured by its environment, takes the lease, says so, and keeps
# it until its stdin closes (or it is killed).
_HOLDER_SCRIPT = f"""
import sys
from agentgraph.frontends.cli.common import load_settings
from agentgraph.persistence import open_store

with open_store(load_settings(None)) as store:
    store.leases.acquire(sys.argv[1], "hold")
    print({HOLDER_READY_LINE!r}, flush=True)
    sys.stdin.read()
"""


def start_lease_holder(env: dict[str, str], thread_id: str, cwd: Path) -> subprocess.Popen[str]:
    """Start a process that holds ``thread_id``; returns once it holds it."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER_SCRIPT, thread_id],
        env=env,
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if line != HOLDER_READY_LINE:
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"lease holder did not start: {line!r} {err[-500:]}")
    return proc


@contextlib.contextmanager
def lease_holder(env: dict[str, str], thread_id: str, cwd: Path) -> Iterator[subprocess.Popen[str]]:
    """A live process holding ``thread_id`` for the duration of the block."""
    proc = start_lease_holder(env, thread_id, cwd)
    try:
        yield proc
    finally:
        proc.kill()
        proc.communicate()


def race_worker(
    name: str,
    env: dict[str, str],
    start: Any,
    jobs: Any,
    results: Any,
) -> None:
    """One contender of the thread-lease race (a ``multiprocessing`` spawn target).

    Runs real turns through :class:`~agentgraph.agent.Agent` on its own store (the
    settings in ``env``); for each job ``(thread_id, prompt)`` it waits at the
    ``start`` barrier with the other contenders, then runs the turn and reports
    ``(name, pid, "ok" | "refused" | "error", text)``.
    """
    from agentgraph.config import Settings
    from agentgraph.persistence import open_store
    from agentgraph.persistence.leases import SessionInUse
    from agentgraph.session.agent import Agent

    settings = Settings(_env_file=None, **env)  # type: ignore[call-arg]
    with open_store(settings) as store:
        agent = Agent(settings, store, sleep=lambda _s: None)
        results.put((name, os.getpid(), "ready", ""))
        while (job := jobs.get()) is not None:
            thread_id, prompt = job
            start.wait()
            try:
                result = agent.run_turn(thread_id, prompt, Path(env["WORKSPACE"]))
            except SessionInUse as exc:
                results.put((name, os.getpid(), "refused", str(exc)))
            except Exception as exc:  # reported to the test, which fails on it
                results.put((name, os.getpid(), "error", f"{type(exc).__name__}: {exc}"))
            else:
                results.put((name, os.getpid(), "ok", result.answer))
