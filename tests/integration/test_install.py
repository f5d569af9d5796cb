"""The install route: ``uv tool install`` from the repository gives an ``agentgraph``
command that works in any folder, as a user installs it for their own projects.

The tool is installed into a temporary tool folder (``UV_TOOL_DIR``, ``UV_TOOL_BIN_DIR``)
with the user's own uv cache and index settings, so a warm cache makes it a few seconds;
the installed command then runs from an unrelated directory with a clean environment
against the fake model server. Without ``uv``, or without the package index (the install
resolves against it, as a user's does), the test skips, unless ``AGENTGRAPH_REQUIRE_UV=1``
(set by ``.ci/run``) makes that a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli_helpers import CLI_TIMEOUT_S, server_env
from tests.fakes.openai_server import FakeOpenAIServer

REPO = Path(__file__).resolve().parents[2]
REQUIRE_ENV = "AGENTGRAPH_REQUIRE_UV"
# Resolving and linking ~110 packages from a warm cache takes a few seconds; a cold cache
# downloads them from the package index, which this bound still allows.
INSTALL_TIMEOUT_S = 600
KEY = "sk-test-install-0123456789abcdef"
# What uv says when it cannot reach the package index (no network, a proxy that refuses).
OFFLINE_MARKERS = (
    "Failed to fetch",
    "error sending request",
    "dns error",
    "Connection refused",
    "network was disabled",
)


def _uv() -> str:
    """The uv executable (``uv run`` names itself in ``UV``), or a skip / failure."""
    found = os.environ.get("UV") or shutil.which("uv")
    if found is None:
        reason = "uv is not installed: the `uv tool install` route cannot be tested"
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return found


def _version() -> str:
    from importlib.metadata import version

    return version("agentgraph")


def test_uv_tool_install_gives_a_command_that_works_in_any_folder(tmp_path: Path) -> None:
    uv = _uv()
    tools, bin_dir = tmp_path / "tools", tmp_path / "bin"
    # The user's uv settings (cache, index, certificates) are what an install uses.
    install_env = {
        **os.environ,
        "UV_TOOL_DIR": str(tools),
        "UV_TOOL_BIN_DIR": str(bin_dir),
        "UV_NO_PROGRESS": "1",
    }
    install_env.pop("VIRTUAL_ENV", None)  # the test's own environment is not the tool's
    started = time.monotonic()
    installed = subprocess.run(
        [uv, "tool", "install", "--python", sys.executable, str(REPO)],
        cwd=tmp_path,
        env=install_env,
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
    )
    install_s = time.monotonic() - started
    if installed.returncode != 0 and any(m in installed.stderr for m in OFFLINE_MARKERS):
        # An install resolves against the package index, as a user's does; a machine that
        # cannot reach it cannot test the route (CI can: AGENTGRAPH_REQUIRE_UV=1 there).
        reason = f"the package index cannot be reached: {installed.stderr.strip()[-300:]}"
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    assert installed.returncode == 0, installed.stderr
    command = bin_dir / "agentgraph"
    assert command.is_file(), installed.stderr
    # The command runs the tool's own interpreter, not this checkout's environment.
    assert str(tools) in command.read_text(encoding="utf-8", errors="replace").splitlines()[0]

    elsewhere = tmp_path / "some-project"
    elsewhere.mkdir()
    (elsewhere / "notes.txt").write_text("the project's own file\n", encoding="utf-8")
    home = tmp_path / "home"
    home.mkdir()
    # No PYTHONPATH and no working directory inside the checkout: only the installed
    # package can answer.
    version = subprocess.run(
        [str(command), "--version"],
        cwd=elsewhere,
        env=server_env(home, "http://127.0.0.1:9/v1", KEY),
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
    )
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == f"agentgraph {_version()}"

    def reply(body: dict[str, object]) -> dict[str, object]:
        text = str(body.get("messages"))
        if "the project's own file" in text:
            return {"content": "notes.txt says: the project's own file"}
        return {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]}

    with FakeOpenAIServer([reply], require_key=KEY) as server:
        run = subprocess.run(
            [str(command), "run", "What does notes.txt say?"],
            cwd=elsewhere,
            env=server_env(home, server.url, KEY),
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT_S,
        )
        assert server.violations == []
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "notes.txt says: the project's own file"
    # The session belongs to the folder it ran in, stored under the user's home.
    assert (home / ".agentgraph" / "sessions.db").is_file()
    print(f"uv tool install took {install_s:.1f}s")
