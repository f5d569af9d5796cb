"""Benchmark: how long the REPL takes to show its prompt with MCP servers configured.

Run: ``uv run python bench/bench_mcp_start.py`` (writes docs/bench/mcp_start.md;
``--runs N`` repeats, default 3; ``--out FILE`` writes elsewhere, e.g. to measure
another checkout with its own environment: ``cd OTHER && uv run python
/path/to/bench/bench_mcp_start.py --out /tmp/before.md``).

The real REPL (``python -m agentgraph``) runs in a pseudo-terminal with a temporary
``AGENTGRAPH_HOME`` and a workspace whose ``.agentgraph/mcp.json`` holds: no server, one
working server, or one server that never answers ``initialize`` (``tests/mcp_servers/
demo.py --hang``), at the default start limit. Measured per run: wall seconds from
spawn to the prompt, CPU seconds (user + system) the process has used at that moment
(``/proc/<pid>/stat``), and wall seconds of a first turn (one ``list_dir`` call and an
answer from the loopback fake OpenAI server), from Enter to the answer. Medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pexpect

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakes.openai_server import FakeOpenAIServer  # noqa: E402
from tests.pty_helpers import PTY_COLUMNS, PTY_ROWS, pty_env  # noqa: E402

RUNS_DEFAULT = 3
CLK_TCK = os.sysconf("SC_CLK_TCK")
# Past the 20 s default start limit, so a REPL that waits for a hanging server is seen.
PTY_TIMEOUT_S = 90
PROMPT = "›"
KEY = "sk-bench-0123456789abcdef"
DEMO = ROOT / "tests" / "mcp_servers" / "demo.py"
CONFIGS: dict[str, dict[str, Any]] = {
    "no MCP server": {},
    "one working server": {"demo": {"command": sys.executable, "args": [str(DEMO)]}},
    "one server that hangs at start": {
        "hangs": {"command": sys.executable, "args": [str(DEMO), "--hang"]}
    },
}


def _cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def one_run(servers: dict[str, Any]) -> tuple[float, float, float]:
    """(wall s to prompt, CPU s at prompt, wall s of the first turn)."""
    with tempfile.TemporaryDirectory() as tmp:
        home, ws = Path(tmp) / "home", Path(tmp) / "ws"
        (ws / ".agentgraph").mkdir(parents=True)
        home.mkdir()
        (ws / ".agentgraph" / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
        script = [
            {"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]},
            {"content": "bench turn done"},
        ]
        with FakeOpenAIServer(script, require_key=KEY) as server:
            # The pty tests' environment (tests/cli_helpers.cli_env and the terminal
            # keys), so the bench starts the REPL as they do.
            env = pty_env(home, server.url, KEY, AGENTGRAPH_MCP_TRUST_WORKSPACE="true")
            start = time.perf_counter()
            child = pexpect.spawn(
                sys.executable,
                ["-m", "agentgraph"],
                cwd=str(ws),
                env=env,
                encoding="utf-8",
                # The size cli_env's COLUMNS announces, so the REPL draws for the pty.
                dimensions=(PTY_ROWS, PTY_COLUMNS),
                timeout=PTY_TIMEOUT_S,
            )
            try:
                child.expect_exact(PROMPT)
                to_prompt = time.perf_counter() - start
                cpu = _cpu_of(child.pid)
                sent = time.perf_counter()
                child.send("list the files\r")
                child.expect_exact("bench turn done")
                turn = time.perf_counter() - sent
                child.expect_exact(PROMPT)
                child.sendeof()
                child.expect(pexpect.EOF)
            finally:
                child.close(force=True)
    return to_prompt, cpu, turn


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=RUNS_DEFAULT)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "bench" / "mcp_start.md")
    args = parser.parse_args(argv)
    rows = []
    for label, servers in CONFIGS.items():
        runs = [one_run(servers) for _ in range(args.runs)]
        medians = [statistics.median(r[i] for r in runs) for i in range(3)]
        rows.append((label, *medians))
        print(label, " ".join(f"{m:.2f}" for m in medians), flush=True)
    lines = [
        "# MCP start-up",
        "",
        f"Command: `uv run python bench/bench_mcp_start.py --runs {args.runs}`",
        "",
        "The real REPL in a pseudo-terminal, a temporary `AGENTGRAPH_HOME`, the workspace's "
        "`.agentgraph/mcp.json` as named, default start limit (20 s). To prompt: wall seconds "
        "from spawn to the prompt and CPU (user + system) used by then. First turn: wall "
        "seconds from Enter to the answer (one `list_dir` call, loopback fake OpenAI server). "
        f"Medians of {args.runs} runs.",
        "",
        "| MCP config | to prompt: wall s | CPU s | first turn: wall s |",
        "| --- | ---: | ---: | ---: |",
    ]
    lines += [f"| {label} | {a:.2f} | {b:.2f} | {c:.2f} |" for label, a, b, c in rows]
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
