"""Read-only commands against a read-only ``AGENTGRAPH_HOME``: the real CLI in a subprocess.

A home on a read-only mount (a backup, a shared volume, another user's folder) still
answers ``sessions list``, ``show`` and ``export``: nothing is written, nothing refused.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli_helpers import CLI_TIMEOUT_S, cli_env, run_cli, server_env
from tests.fakes.openai_server import FakeOpenAIServer
from tests.sandbox_helpers import REQUIRE_ENV

KEY = "sk-test-secret-read-only-0123456789"
THREAD = "readonly1"


def _contents(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` by relative path, with a digest of its bytes."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _chmod_tree(folder: Path, *, writable: bool) -> None:
    for path in [folder, *folder.rglob("*")]:
        if path.is_dir():
            path.chmod(0o755 if writable else 0o555)
        else:
            path.chmod(0o644 if writable else 0o444)


def _read_only_prefix(folder: Path) -> list[str]:
    """A command prefix that makes ``folder`` read-only even for root, or skips.

    Permissions stop anyone but root; root needs a read-only mount, here a bubblewrap
    read-only bind of the folder over the whole file system.
    """
    if os.geteuid() != 0:
        return []
    bwrap = shutil.which("bwrap")
    reason = "root ignores permissions and bubblewrap is not installed"
    if bwrap is not None:
        prefix = [bwrap, "--dev-bind", "/", "/", "--ro-bind", str(folder), str(folder), "--"]
        probe = subprocess.run(
            [*prefix, "sh", "-c", f"! touch '{folder}/.probe' 2>/dev/null"],
            capture_output=True,
            text=True,
            check=False,
        )
        if probe.returncode == 0:
            return prefix
        reason = f"bubblewrap cannot bind a folder read-only here: {probe.stderr.strip()[:200]}"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture
def read_only_home(home: Path, workspace: Path) -> Iterator[tuple[list[str], dict[str, str]]]:
    """A home holding one session, made read-only; the command prefix and environment."""
    (workspace / "data.txt").write_text("the answer is 42\n")
    script = [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "data.txt"}}]},
        {"content": "It says 42."},
    ]
    with FakeOpenAIServer(script) as server:
        env = server_env(home, server.url, KEY)
        seeded = run_cli(["run", "read data.txt", "--thread", THREAD], cwd=workspace, env=env)
    assert seeded.returncode == 0, seeded.stderr
    agent_home = home / ".agentgraph"
    prefix = _read_only_prefix(agent_home)
    _chmod_tree(agent_home, writable=False)
    try:
        yield prefix, cli_env(home)
    finally:
        _chmod_tree(agent_home, writable=True)


def _run(prefix: list[str], args: list[str], cwd: Path, env: dict[str, str]) -> Any:
    return subprocess.run(
        [*prefix, sys.executable, "-m", "agentgraph", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
    )


def test_read_only_commands_serve_a_read_only_home(
    read_only_home: tuple[list[str], dict[str, str]], home: Path, workspace: Path
) -> None:
    prefix, env = read_only_home
    agent_home = home / ".agentgraph"
    before = _contents(agent_home)

    listed = _run(prefix, ["sessions", "list", "--json"], workspace, env)
    assert listed.returncode == 0, listed.stderr
    assert [row["thread_id"] for row in json.loads(listed.stdout)] == [THREAD]

    exported = _run(prefix, ["sessions", "export", THREAD], workspace, env)
    assert exported.returncode == 0, exported.stderr
    entries = [json.loads(line) for line in exported.stdout.splitlines()]
    assert any("It says 42." in json.dumps(entry) for entry in entries)

    shown = _run(prefix, ["sessions", "show", THREAD, "--json"], workspace, env)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["transcript"]["last_answer"] == "It says 42."

    for result in (listed, exported, shown):
        assert "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) <= 1, result.stderr
    assert _contents(agent_home) == before
