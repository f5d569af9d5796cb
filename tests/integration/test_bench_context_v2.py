"""bench/bench_context_v2.py runs every harness (agentgraph and its peers) end to end.

A tiny workload through the bench's own command line, in a subprocess: each harness must
accept the scripted tool calls (a wrong tool name or argument would hide the planted
facts behind an error), reach its answer with every request valid, and — at a window
small enough to compact — have its summary calls recognised as such.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH_TIMEOUT_S = 300
FILES = 16
# Small enough that every harness compacts or masks within FILES reads of ~3 KB.
WINDOW_TOKENS = 8_000


def test_every_harness_runs_the_long_task_to_an_answer() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENTGRAPH_"))}
    cmd = [sys.executable, "bench/bench_context_v2.py", "--files", str(FILES)]
    cmd += ["--window", str(WINDOW_TOKENS), "--json"]
    proc = subprocess.run(
        cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=BENCH_TIMEOUT_S
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = {r["harness"]: r for r in json.loads(proc.stdout)}
    assert set(rows) == {
        "agentgraph",
        "lc-summary",
        "lc-edit+summary",
        "lc-summary (same tools)",
        "lc-edit+summary (same tools)",
        "deepagents",
    }
    for name, row in rows.items():
        assert row["answered"], (name, row["stop"])
        assert row["invalid"] == 0, name
        assert row["overflow_400"] == 0, name
        # Every file read, the report written, the answer; plus the summary calls.
        assert row["calls"] == FILES + 2 + row["summaries"], name
        assert 0 < row["facts"] <= row["facts_total"] == FILES, name
        assert 0 < row["cacheable"] < 1, name
        assert row["compactions"] <= row["summaries"], name
    # The scripted model only calls tools (it restates nothing), so agentgraph masks
    # nothing and summarizes instead.
    assert rows["agentgraph"]["maskings"] == 0 < rows["agentgraph"]["compactions"]
    for peer in set(rows) - {"agentgraph"}:
        assert rows[peer]["summaries"] > 0, peer
        assert rows[peer]["compactions"] == rows[peer]["summaries"], peer
