"""``langgraph dev`` on a loopback port, serving this repository's ``langgraph.json``.

Used by the remote-subagent tests and benchmark: the in-memory LangGraph API server
(``langgraph-cli[inmem]``, a dev dependency) in a folder of its own (no developer
``.env``), its model the loopback fake OpenAI server.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.cli_helpers import TEST_SANDBOX_MODE

REPO_ROOT = Path(__file__).resolve().parents[1]
SERVER_START_TIMEOUT_S = 90.0
SERVER_STOP_TIMEOUT_S = 15.0
SERVER_POLL_S = 0.2
# Runs one server process works on at once (langgraph dev's --n-jobs-per-worker).
SERVER_JOBS = 10


class ServerUnavailable(Exception):
    """``langgraph dev`` is not installed or did not start."""


def free_port() -> int:
    """A loopback port nothing listens on (now)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(SERVER_STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@contextmanager
def langgraph_dev(root: Path, workspace: Path, model_url: str, key: str) -> Iterator[str]:
    """Run ``langgraph dev`` until the block ends; yields its URL.

    Args:
        root: A folder of its own (its HOME, AGENTGRAPH_HOME, config and log).
        workspace: The server's workspace (``AGENTGRAPH_SERVER_WORKSPACE``).
        model_url: The fake OpenAI server's base URL.
        key: That server's API key.

    Raises:
        ServerUnavailable: Not installed, or not up within SERVER_START_TIMEOUT_S.
    """
    binary = shutil.which("langgraph", path=str(Path(sys.executable).parent))
    if binary is None:
        raise ServerUnavailable("langgraph-cli[inmem] is not installed (langgraph dev)")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # The repository's declaration, its paths made absolute: the server runs in a folder
    # of its own and resolves graph paths from there.
    config = json.loads((REPO_ROOT / "langgraph.json").read_text())
    config["dependencies"] = [str(REPO_ROOT / d) for d in config["dependencies"]]
    config["graphs"] = {k: str(REPO_ROOT / v) for k, v in config["graphs"].items()}
    (root / "langgraph.json").write_text(json.dumps(config))
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(root),
        "OPENAI_BASE_URL": model_url,
        "OPENAI_API_KEY": key,
        "AGENTGRAPH_MODEL": "gpt-4o-mini",
        "AGENTGRAPH_PROVIDER_MAX_RETRIES": "0",
        "AGENTGRAPH_HOME": str(root / "home"),
        "AGENTGRAPH_SERVER_WORKSPACE": str(workspace),
        "AGENTGRAPH_SANDBOX": TEST_SANDBOX_MODE,
        "LANGSMITH_TRACING": "false",
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    }
    log_path = root / "server.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [
                binary,
                "dev",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--no-browser",
                "--no-reload",
                "--allow-blocking",
                "--n-jobs-per-worker",
                str(SERVER_JOBS),
                "--config",
                str(root / "langgraph.json"),
            ],
            cwd=root,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + SERVER_START_TIMEOUT_S
            while True:
                try:
                    with urllib.request.urlopen(f"{url}/ok", timeout=1) as answer:
                        if answer.status == 200:
                            break
                except OSError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    tail = log_path.read_text(errors="replace")[-2000:]
                    raise ServerUnavailable(f"langgraph dev did not start: {tail}")
                time.sleep(SERVER_POLL_S)
            yield url
        finally:
            _stop(proc)
