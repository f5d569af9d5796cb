"""Benchmark: wall time of a parent turn delegating slow work serially, in parallel, in the background.

Run: ``uv run python bench/bench_subagents_parallel.py`` (writes docs/bench/subagents_parallel.md).

Four subagents each run one ``sleep 3`` command (``run_bash``, sandbox off: the
orchestration is measured, not bubblewrap's start) and answer. The real graph
(``Agent`` on a SQLite store in a temp dir) talks to the loopback scripted OpenAI
server (``tests/fakes/openai_server.py``), whose replies are a function of the request:

* ``one``: the parent delegates one subagent (the unit of work);
* ``serial``: the parent delegates the four one per step;
* ``parallel``: four ``call_subagent`` calls in one response;
* ``background``: four ``call_subagent(background=true)`` in one response, then four
  ``subagent_task(action="result", wait_s=60)`` in one response;
* ``parallel+own`` / ``background+own``: the same, and the parent also has a
  ``sleep 3`` command of its own to run — after the parallel subagents return, or while
  the background ones run.

Reported: the median wall time of the parent's whole turn over ``--repeats`` runs, and
its ratio to ``one``.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentgraph.config import Settings
from agentgraph.persistence import open_store
from agentgraph.session.agent import Agent
from tests.fakes.openai_server import FakeOpenAIServer

SUBAGENTS = 4
COMMAND_S = 3
REPEATS = 3
TASK_PREFIX = "SLOW JOB"
OUTPUT_PATH = Path(__file__).resolve().parent.parent / "docs" / "bench" / "subagents_parallel.md"
COMMAND = "uv run python bench/bench_subagents_parallel.py"
STRATEGIES = ("one", "serial", "parallel", "background", "parallel+own", "background+own")
OWN_COMMAND = f"sleep {COMMAND_S} && echo parent work done"
# A collected result's status line (the tool messages of the request carry no tool name).
ENDED_RE = r"\[subagent-[0-9a-f]{8} (done|failed)"
# subagent_task's wait bound, in seconds: far above one subagent's few seconds here.
COLLECT_WAIT_S = 60
KEY = "sk-bench-0123456789abcdef"


def _users(body: dict[str, Any]) -> list[str]:
    out = []
    for m in body.get("messages") or []:
        if m.get("role") == "user":
            c = m.get("content")
            out.append(c if isinstance(c, str) else json.dumps(c))
    return out


def _tools(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body.get("messages") or [] if m.get("role") == "tool"]


def _delegate(n: int, background: bool = False) -> dict[str, Any]:
    args: dict[str, Any] = {"task": f"{TASK_PREFIX} {n}: run the command and report"}
    if background:
        args["background"] = True
    return {"name": "call_subagent", "arguments": args}


def model(strategy: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The scripted model of one strategy: parent or subagent by the first user message."""

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        users = _users(body)
        done = _tools(body)
        if users and users[0].startswith(TASK_PREFIX):
            if not done:
                command = f"sleep {COMMAND_S} && echo finished"
                return {"tool_calls": [{"name": "run_bash", "arguments": {"command": command}}]}
            return {"content": f"report: {done[-1].get('content')}"}
        count = 1 if strategy == "one" else SUBAGENTS
        own = {"name": "run_bash", "arguments": {"command": OWN_COMMAND}}
        ran_own = any("parent work done" in str(t.get("content")) for t in done)
        if strategy in ("one", "serial") and len(done) < count:
            return {"tool_calls": [_delegate(len(done))]}
        if strategy.startswith("parallel") and not done:
            return {"tool_calls": [_delegate(n) for n in range(count)]}
        if strategy == "parallel+own" and not ran_own:
            return {"tool_calls": [own]}
        if strategy.startswith("background"):
            if not done:
                return {"tool_calls": [_delegate(n, background=True) for n in range(count)]}
            if strategy == "background+own" and not ran_own:
                return {"tool_calls": [own]}
            ids = [
                m.group(1)
                for t in done
                if (m := re.search(r"\[(subagent-[0-9a-f]{8}) started", str(t.get("content"))))
            ]
            collected = [t for t in done if re.match(ENDED_RE, str(t.get("content")))]
            if not collected:
                return {
                    "tool_calls": [
                        {
                            "name": "subagent_task",
                            "arguments": {
                                "task_id": i,
                                "action": "result",
                                "wait_s": COLLECT_WAIT_S,
                            },
                        }
                        for i in ids
                    ]
                }
        return {"content": f"all {len(done)} results in"}

    return reply


def run_once(strategy: str) -> float:
    """Seconds the parent's turn took, end to end."""
    with (
        tempfile.TemporaryDirectory() as tmp,
        FakeOpenAIServer([model(strategy)], require_key=KEY, on_exhausted="repeat_last") as server,
    ):
        root = Path(tmp)
        workspace = root / "ws"
        workspace.mkdir()
        settings = Settings(
            _env_file=None,  # type: ignore[call-arg]
            AGENTGRAPH_HOME=str(root / "home"),
            OPENAI_BASE_URL=server.url,
            OPENAI_API_KEY=KEY,
            AGENTGRAPH_MODEL="gpt-4o-mini",
            AGENTGRAPH_SANDBOX="off",
            AGENTGRAPH_MCP="off",
            AGENTGRAPH_TITLES="first_message",
        )
        with open_store(settings) as store:
            agent = Agent(settings, store)
            started = time.perf_counter()
            result = agent.run_turn("bench", "do the four slow jobs", workspace)
            elapsed = time.perf_counter() - started
            assert result.answer.startswith("all "), result.answer
            runs = [r for r in agent.subagents.records.values() if r.outcome is not None]
            expected = 1 if strategy == "one" else SUBAGENTS
            assert len(runs) == expected and all(r.outcome and r.outcome.ok for r in runs), runs
            return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=REPEATS)
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    times: dict[str, list[float]] = {s: [] for s in STRATEGIES}
    for _ in range(args.repeats):  # interleaved: machine load affects all alike
        for strategy in STRATEGIES:
            times[strategy].append(run_once(strategy))
    one = statistics.median(times["one"])
    lines = [
        "# Subagents: serial, parallel and background wall time",
        "",
        f"Command: `{COMMAND}` (real graph, SQLite store, loopback scripted OpenAI server; "
        f"median of {args.repeats} interleaved runs; 2-CPU machine shared with other work).",
        "",
        f"Each subagent runs one `sleep {COMMAND_S}` command (`run_bash`, sandbox off) and "
        f"answers. `one` delegates one subagent; the others delegate {SUBAGENTS}: `serial` "
        "one per parent step, `parallel` all in one response, `background` all with "
        "`background=true` in one response, then collects them with four "
        '`subagent_task(action="result")` calls in one response.',
        "",
        "| strategy | parent turn wall time (median) | × one subagent | runs (s) |",
        "| --- | ---: | ---: | --- |",
    ]
    for strategy in STRATEGIES:
        median = statistics.median(times[strategy])
        runs = ", ".join(f"{t:.2f}" for t in times[strategy])
        lines.append(f"| {strategy} | {median:.2f} s | {median / one:.2f}× | {runs} |")
    par = statistics.median(times["parallel"]) / one
    bg = statistics.median(times["background"]) / one
    par_own = statistics.median(times["parallel+own"])
    bg_own = statistics.median(times["background+own"])
    lines += [
        "",
        f"Target: parallel ≤ 1.3× one subagent — measured {par:.2f}× (background {bg:.2f}×). "
        f"With {COMMAND_S} s of the parent's own work, background subagents overlap it: "
        f"{bg_own:.2f} s instead of {par_own:.2f} s when the parent waits for parallel "
        "subagents first.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        OUTPUT_PATH.parent.mkdir(parents=True, exist_ok=True)
        OUTPUT_PATH.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
