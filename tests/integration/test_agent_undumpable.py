"""Without the sandbox, a command cannot read the agent's own environment via /proc.

The agent marks itself not dumpable, which leaves its ``/proc/<pid>/environ`` and
memory to processes holding a privileged capability (``CAP_SYS_PTRACE``; for reading
environ, ``CAP_SYS_ADMIN`` and ``CAP_PERFMON`` too, as measured on Linux 6.18). A
non-root user holds none; root holds them unless they were dropped (a default Docker
container does). So the CLI runs here without them: as it is for a non-root user, and
as root with the three dropped from its bounding set by ``setpriv``. Full root is the
documented limit (docs/security.md), not tested as protected.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_helpers import CLI_TIMEOUT_S, server_env
from tests.fakes.openai_server import FakeOpenAIServer

KEY = "sk-test-secret-0123456789abcdef"
# A credential with no known format: only the process boundary keeps it from a command.
PLAIN_SECRET = "Tr0ub4dor-3-prod-qa"
# Each of these lets root read a non-dumpable process's environ.
ROOT_CAPS_DROPPED = "-sys_ptrace,-sys_admin,-perfmon"


def _without_ptrace_privilege() -> list[str]:
    """The launcher that runs the CLI without the capabilities that bypass dumpable."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: cannot drop CAP_SYS_PTRACE")
    return [setpriv, f"--bounding-set={ROOT_CAPS_DROPPED}", "--inh-caps=-all", "--"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_DUMPABLE is Linux's")
def test_unsandboxed_command_cannot_read_the_agents_environ(home: Path, workspace: Path) -> None:
    # base64: a transformed copy that redaction could not catch in the output.
    command = "base64 -w0 /proc/$PPID/environ > leak.b64; echo rc=$?"
    script = [
        {"tool_calls": [{"name": "run_bash", "arguments": {"command": command}}]},
        {"content": "done"},
    ]
    with FakeOpenAIServer(script, require_key=KEY) as server:
        env = server_env(home, server.url, KEY, AGENTGRAPH_SANDBOX="off", DB_PASS=PLAIN_SECRET)
        done = subprocess.run(
            [*_without_ptrace_privilege(), sys.executable, "-m", "agentgraph", "run", "look"],
            cwd=workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT_S,
        )
        assert done.returncode == 0, done.stderr
        result = next(m for m in server.requests[-1]["messages"] if m["role"] == "tool")
    assert "Permission denied" in result["content"], result["content"]
    leaked = base64.b64decode((workspace / "leak.b64").read_bytes() or b"")
    assert KEY.encode() not in leaked
    assert PLAIN_SECRET.encode() not in leaked
