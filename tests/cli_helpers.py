"""Run the real CLI in a subprocess, with a clean environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CLI_TIMEOUT_S = 120
# Commands run unsandboxed in tests about anything but the sandbox, so that no outcome
# depends on whether bubblewrap happens to be installed; the sandbox's own tests choose
# their mode (tests/sandbox_helpers.py), and a test with AGENTGRAPH_SANDBOX passes its own.
TEST_SANDBOX_MODE = "off"


def cli_env(home: Path, **extra: str) -> dict[str, str]:
    """A minimal environment: no developer settings leak into the test."""
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(home),
        "AGENTGRAPH_HOME": str(home / ".agentgraph"),
        "LANG": "C.UTF-8",
        "NO_COLOR": "1",
        "COLUMNS": "120",
        "AGENTGRAPH_SANDBOX": TEST_SANDBOX_MODE,
    }
    env.update(extra)
    return env


def server_env(home: Path, url: str, key: str, **extra: str) -> dict[str, str]:
    """CLI environment talking to the fake server at ``url`` with ``key``, no retries."""
    values = {
        "OPENAI_BASE_URL": url,
        "OPENAI_API_KEY": key,
        "AGENTGRAPH_MODEL": "gpt-4o-mini",
        "AGENTGRAPH_PROVIDER_MAX_RETRIES": "0",
    }
    values.update(extra)
    return cli_env(home, **values)


def run_cli(
    args: list[str],
    *,
    cwd: Path,
    env: dict[str, str],
    stdin: str | None = None,
    timeout_s: float = CLI_TIMEOUT_S,
) -> subprocess.CompletedProcess[str]:
    """``python -m agentgraph ARGS`` in ``cwd``."""
    return subprocess.run(
        [sys.executable, "-m", "agentgraph", *args],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
