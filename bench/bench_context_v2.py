"""Context engine v2 on the real graph: summaries, prefix-cache share, facts, errors.

Run: uv run python bench/bench_context_v2.py [--quick]

Each workload drives the real ``Agent`` graph against the strict loopback
OpenAI-compatible server (real HTTP, real ChatOpenAI) with the scripted model of
tests/scenarios/long_task.py: read every file, write a report, answer with the
planted facts still visible in the prompt. Its summarizer keeps only every other
fact it sees (a lossy summary). Measured per run: model calls, LLM summary calls,
masking events, total prompt tokens, the share of prompt tokens a prefix cache would
serve (per request, the longest prefix of its serialized messages already sent in an
earlier request), planted facts answered, invalid requests and overflow 400s.

Only agentgraph is measured here; the LangChain ``create_agent`` +
``SummarizationMiddleware`` / ``ContextEditingMiddleware`` and deepagents columns of
the issue are not built yet.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentgraph.agent import Agent
from agentgraph.config import Settings
from agentgraph.persistence import open_store
from tests.fakes.openai_server import FakeOpenAIServer
from tests.scenarios.long_task import (
    PLANTED_FACTS,
    LongTaskDriver,
    facts_in,
    is_summary_request,
    make_workspace,
)

# (name, files, lines per file, window): 60 small files at 128k; 300 files of ~3 KB
# (36 log lines) at 16k.
WORKLOADS = [
    ("60 small files @128k", 60, 12, 128_000),
    ("300 files of 3 KB @16k", 300, 36, 16_000),
]
QUICK_WORKLOADS = [
    ("60 small files @128k", 60, 12, 128_000),
    ("80 files of 3 KB @16k", 80, 36, 16_000),
]


class LossyDriver(LongTaskDriver):
    """The long-task model whose summaries keep only every other fact they see."""

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        if is_summary_request(body):
            with self._lock:
                self.summary_calls += 1
            kept = sorted(facts_in(body))[::2]
            return {"content": "1. Task: reading logs.\n4. Critical data:\n" + "\n".join(kept)}
        return super().__call__(body)


def cacheable_share(requests: list[dict[str, Any]]) -> tuple[int, float]:
    """Total prompt characters and the share a prefix cache would serve."""
    sent: list[str] = []
    total = served = 0
    for body in requests:
        # Providers cache tools first, then the messages in order.
        text = json.dumps(body.get("tools"), sort_keys=True) + json.dumps(
            body["messages"], sort_keys=True
        )
        best = 0
        for prev in sent:
            n = 0
            limit = min(len(prev), len(text))
            while n < limit and prev[n] == text[n]:
                n += 1
            best = max(best, n)
        total += len(text)
        served += best
        sent.append(text)
    return total, (served / total if total else 0.0)


def run(name: str, files: int, lines: int, window: int, tmp: Path) -> dict[str, Any]:
    ws = tmp / f"ws-{files}-{window}"
    ws.mkdir()
    driver = LossyDriver(make_workspace(ws, files=files, lines_per_file=lines))
    events: list[dict[str, Any]] = []
    start = time.perf_counter()
    with FakeOpenAIServer([driver], window=window, on_exhausted="repeat_last") as server:
        settings = Settings(  # type: ignore[call-arg]
            _env_file=None,
            AGENTGRAPH_HOME=str(tmp / f"home-{files}-{window}"),
            OPENAI_BASE_URL=server.url,
            OPENAI_API_KEY="sk-bench",
            AGENTGRAPH_MODEL="gpt-4o-mini",
            AGENTGRAPH_CONTEXT_WINDOW=str(window),
            AGENTGRAPH_PROVIDER_MAX_RETRIES="0",
            MAX_LOOPS=str(files + 5),
        )
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            agent.run_turn("bench", "read every log and report the facts", ws, events.append)
        main = [r for r in server.requests if not is_summary_request(r)]
        prompt_tokens = sum(server.token_estimate(r) for r in main)
        _chars, share = cacheable_share(main)
        return {
            "workload": name,
            "calls": len(server.requests),
            "summaries": driver.summary_calls,
            "maskings": sum(1 for e in events if e["type"] == "masking"),
            "prompt_tokens": prompt_tokens,
            "cacheable": share,
            "facts": f"{len(driver.answer_facts & set(PLANTED_FACTS.values()))}/"
            f"{len(PLANTED_FACTS)}",
            "invalid": len(server.violations),
            "overflow_400": server.overflow_count,
            "finished": driver.step == files + 2,
            "seconds": time.perf_counter() - start,
        }


def main() -> None:
    """Run the workloads and print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="80 files instead of 300 at 16k")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for workload in QUICK_WORKLOADS if args.quick else WORKLOADS:
            rows.append(run(*workload, Path(tmp)))
    print(
        "| workload | calls | LLM summaries | masking events | prompt tokens | cacheable "
        "| facts | invalid | overflow 400s | finished | s |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(
            f"| {r['workload']} | {r['calls']} | {r['summaries']} | {r['maskings']} "
            f"| {r['prompt_tokens']:,} | {r['cacheable']:.1%} | {r['facts']} | {r['invalid']} "
            f"| {r['overflow_400']} | {r['finished']} | {r['seconds']:.0f} |"
        )


if __name__ == "__main__":
    main()
