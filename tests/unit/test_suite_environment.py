"""What the suite's process hands the programs its tests start."""

from __future__ import annotations

import subprocess
import sys

CHILD_TIMEOUT_S = 60


def test_the_programs_the_suite_starts_take_ctrl_c_as_from_a_terminal() -> None:
    """The Ctrl-C tests send SIGINT as a terminal does. Run as a background job of a
    non-interactive shell (``uv run pytest &`` in a script, some CI runners), the suite
    inherits SIGINT ignored, every program it starts inherits that too (Python keeps an
    ignored SIGINT ignored), and those tests failed: the REPL, ``agentgraph run`` and
    its subagents never saw the Ctrl-C."""
    check = (
        "import signal, sys; "
        "sys.exit(signal.getsignal(signal.SIGINT) is not signal.default_int_handler)"
    )
    done = subprocess.run([sys.executable, "-c", check], timeout=CHILD_TIMEOUT_S, check=False)
    assert done.returncode == 0
