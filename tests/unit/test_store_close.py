"""Closing the store while another thread still writes (a cancelled subagent's last
checkpoint) fails that write with an exception; it never crashes the process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Stores opened and closed under writing threads: enough for main's close to crash.
ROUNDS = 40
WRITERS = 2

HAMMER = """
import sys, threading, time
from agentgraph.config import Settings
from agentgraph.persistence import open_store

settings = Settings(_env_file=None, AGENTGRAPH_HOME=sys.argv[1])
config = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "x"}}
failed = []
for _ in range(int(sys.argv[2])):
    stop = threading.Event()
    with open_store(settings) as store:
        def write():
            while not stop.is_set():
                try:
                    store.checkpointer.put_writes(config, [("messages", "x" * 100)], "task")
                    store.index.get("t")
                except Exception as exc:
                    failed.append(type(exc).__name__)
                    return
        writers = [threading.Thread(target=write, daemon=True) for _ in range(int(sys.argv[3]))]
        for w in writers:
            w.start()
        time.sleep(0.02)
    stop.set()
    for w in writers:
        w.join(5)
print(sorted(set(failed)))
"""


def test_closing_the_store_under_a_writing_thread_does_not_crash(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", HAMMER, str(tmp_path), str(ROUNDS), str(WRITERS)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Fatal Python error" not in result.stderr
    # The writers that outlived their store saw an exception, not a crash.
    assert "ProgrammingError" in result.stdout
