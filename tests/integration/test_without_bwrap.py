"""The CLI tests pass on a machine without bubblewrap, as on a fresh Debian.

A fresh machine has no ``bwrap``: the README's test command must pass there, with the
sandbox's own tests skipped with the reason (unless ``AGENTGRAPH_REQUIRE_SANDBOX=1``,
which ``.ci/run`` sets because it installs bubblewrap first). This runs the CLI tests
again in a pytest of their own whose PATH has every program of this one but ``bwrap``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.sandbox_helpers import REQUIRE_ENV, bin_without_bwrap

ROOT = Path(__file__).resolve().parents[2]
# The CLI tests that print, refuse or run commands: the ones whose outcome could depend
# on whether bubblewrap is installed.
CLI_TEST_FILES = (
    "tests/integration/test_cli.py",
    "tests/integration/test_cli_run_outcomes.py",
    "tests/integration/test_sandbox.py",
    "tests/integration/test_settings_owner.py",
    "tests/integration/reliability/test_bash_ask.py",
)
NESTED_TIMEOUT_S = 1200


@pytest.mark.slow
def test_cli_tests_pass_without_bwrap_on_path(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != REQUIRE_ENV and not k.startswith("PYTEST")}
    env["PATH"] = bin_without_bwrap(tmp_path / "bin", names=())
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            *CLI_TEST_FILES,
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            "--basetemp",
            str(tmp_path / "nested"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=NESTED_TIMEOUT_S,
    )
    tail = done.stdout[-6000:]
    assert done.returncode == 0, tail
    # It did run without bubblewrap: the tests that need the sandbox say why they skipped.
    assert "bwrap is not installed" in done.stdout, tail
