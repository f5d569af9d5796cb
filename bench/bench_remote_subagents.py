"""Benchmark: 8 background subagents on ``langgraph dev`` — delivered, and not lost on a kill.

Run: ``uv run python bench/bench_remote_subagents.py`` (writes docs/bench/remote_subagents.md).

``langgraph dev`` (the in-memory LangGraph API server, ``langgraph-cli[inmem]``) serves
this repository's ``langgraph.json`` on loopback; the CLI (``agentgraph run``, its real
graph and SQLite store) runs with ``AGENTGRAPH_SUBAGENT_SERVER`` pointing at it and
``AGENTGRAPH_SUBAGENT_MAX_BACKGROUND=8``. Both talk to the loopback scripted OpenAI
server, whose replies are a function of the request: subagent ``k`` answers
``RESULT-k`` after :data:`SUBAGENT_S` seconds; the parent starts the 8 in one response
(``call_subagent(background=true)``), then reads a file per step
(:data:`PARENT_STEP_S` each) until the prompt holds 8 notices, then answers.

* ``delivered``: one parent turn, start to answer.
* ``killed``: the parent's model call after the 8 starts hangs; the CLI is SIGKILLed
  as soon as the 8 start results are out, then resumed (``run --thread``) with the same
  wait-for-notices behaviour. Timed: the resumed turn.

Reported per run: notices delivered (each with its own ``RESULT-k``), lost, delivered
twice, and the wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langchain_core.messages import HumanMessage

from agentgraph.capabilities.subagent_tasks import NOTICE_ID_PREFIX
from tests.cli_helpers import run_cli, server_env
from tests.fakes.openai_server import FakeOpenAIServer
from tests.langgraph_dev import langgraph_dev
from tests.pty_helpers import stored_messages

SUBAGENTS = 8
SUBAGENT_S = 2.0
PARENT_STEP_S = 0.3
FILES = 40
REPEATS = 3
# The parent's call that is killed: far longer than the benchmark.
HANG_S = 600.0
KILL_WAIT_S = 120.0
KEY = "sk-bench-remote-0123456789abcdef"
TASK_PREFIX = "REMOTE JOB "
NOTICE_PREFIX = "Background subagent "
RESUME = "RESUME and wait"
OUTPUT_PATH = Path(__file__).resolve().parent.parent / "docs" / "bench" / "remote_subagents.md"
COMMAND = "uv run python bench/bench_remote_subagents.py"


def _users(body: dict[str, Any]) -> list[str]:
    return [
        m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
        for m in body.get("messages") or []
        if m.get("role") == "user"
    ]


def _tools(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body.get("messages") or [] if m.get("role") == "tool"]


def reply(body: dict[str, Any]) -> dict[str, Any]:
    """Subagent ``k`` answers RESULT-k late; the parent starts 8, then waits for notices."""
    users = _users(body)
    first = users[0] if users else ""
    if first.startswith(TASK_PREFIX):
        k = first.removeprefix(TASK_PREFIX).split()[0]
        return {"content": f"RESULT-{k}", "first_byte_delay_s": SUBAGENT_S}
    notices = {u for u in users if u.startswith(NOTICE_PREFIX)}
    asked = [u for u in users if not u.startswith(NOTICE_PREFIX)]
    if not _tools(body):
        calls = [
            {
                "name": "call_subagent",
                "arguments": {"task": f"{TASK_PREFIX}{k} report", "background": True},
            }
            for k in range(SUBAGENTS)
        ]
        return {"tool_calls": calls}
    if len(notices) >= SUBAGENTS:
        found = sorted(set(re.findall(r"RESULT-\d+", " ".join(notices))))
        return {"content": f"ALL {len(notices)} NOTICES: {' '.join(found)}"}
    if asked[-1].startswith("KILL") and len(asked) == 1:
        return {"content": "too late", "first_byte_delay_s": HANG_S}
    return {
        # A different file each step: the same call repeated would be stopped.
        "tool_calls": [
            {"name": "read_file", "arguments": {"path": f"f{len(_tools(body)) % FILES}.txt"}}
        ],
        "first_byte_delay_s": PARENT_STEP_S,
    }


def _events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def _kill_after_starts(cwd: Path, env: dict[str, str]) -> str:
    """Start the KILL run, SIGKILL it once its 8 start results are out; its thread id."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentgraph",
            "run",
            "KILL after the starts",
            "--output-format",
            "stream-json",
        ],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + KILL_WAIT_S
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            seen.append(json.loads(line))
            starts = [
                e for e in seen if e["type"] == "tool_result" and e.get("name") == "call_subagent"
            ]
            if len(starts) >= SUBAGENTS or time.monotonic() > deadline:
                break
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return str(next(e["thread_id"] for e in seen if e["type"] == "start"))


def _count(home: Path, thread_id: str, answer: str) -> dict[str, Any]:
    history = stored_messages(home, thread_id)
    ids = [
        str(m.id)
        for m in history
        if isinstance(m, HumanMessage) and str(m.id).startswith(NOTICE_ID_PREFIX)
    ]
    results = set(re.findall(r"RESULT-(\d+)", answer))
    return {
        "delivered": len(set(ids)),
        "twice": len(ids) - len(set(ids)),
        "lost": SUBAGENTS - len(set(ids)),
        "results": len(results),
    }


def one_run(url: str, model_url: str, scenario: str) -> dict[str, Any]:
    """One scenario in fresh folders; its counts and wall time."""
    with tempfile.TemporaryDirectory(prefix="bench-remote-") as tmp:
        home, workspace = Path(tmp) / "home", Path(tmp) / "ws"
        home.mkdir()
        workspace.mkdir()
        for n in range(FILES):
            (workspace / f"f{n}.txt").write_text(f"file {n}\n")
        env = server_env(
            home,
            model_url,
            KEY,
            AGENTGRAPH_SUBAGENT_SERVER=url,
            AGENTGRAPH_SUBAGENT_MAX_BACKGROUND=str(SUBAGENTS),
        )
        args = ["--output-format", "stream-json"]
        if scenario == "killed":
            thread_id = _kill_after_starts(workspace, env)
            args = [*args, "--thread", thread_id]
            prompt = RESUME
        else:
            prompt = "RUN and wait"
        started = time.monotonic()
        res = run_cli(["run", prompt, *args], cwd=workspace, env=env)
        wall = time.monotonic() - started
        if res.returncode != 0:
            raise SystemExit(f"{scenario}: exit {res.returncode}: {res.stderr}{res.stdout[-3000:]}")
        final = _events(res.stdout)[-1]
        counts = _count(home, str(final["thread_id"]), str(final.get("answer")))
        return {"scenario": scenario, "wall_s": wall, **counts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=REPEATS)
    parser.add_argument("--output", type=Path, default=OUTPUT_PATH)
    opts = parser.parse_args()
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-lg-") as tmp:
        root = Path(tmp)
        (root / "ws").mkdir()
        with (
            FakeOpenAIServer([reply], require_key=KEY, on_exhausted="repeat_last") as model,
            langgraph_dev(root, root / "ws", model.url, KEY) as url,
        ):
            for _ in range(opts.repeats):
                for scenario in ("delivered", "killed"):
                    run = one_run(url, model.url, scenario)
                    print(run, flush=True)
                    runs.append(run)
    lines = [
        f"Command: `{COMMAND}` ({SUBAGENTS} background subagents on `langgraph dev` on "
        f"loopback; each answers after {SUBAGENT_S:g} s; median of {opts.repeats} runs).",
        "",
        "| scenario | delivered | lost | delivered twice | results in the answer | "
        "wall time (median) | runs (s) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for scenario in ("delivered", "killed"):
        mine = [r for r in runs if r["scenario"] == scenario]
        walls = [r["wall_s"] for r in mine]
        lines.append(
            f"| {scenario} | {min(r['delivered'] for r in mine)}/{SUBAGENTS} | "
            f"{max(r['lost'] for r in mine)} | {max(r['twice'] for r in mine)} | "
            f"{min(r['results'] for r in mine)}/{SUBAGENTS} | "
            f"{statistics.median(walls):.2f} s | {', '.join(f'{w:.2f}' for w in walls)} |"
        )
    opts.output.parent.mkdir(parents=True, exist_ok=True)
    opts.output.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
