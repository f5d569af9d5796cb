"""The heart of the product: a task far larger than the window finishes, facts survive."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from agentgraph.config import Settings
from agentgraph.persistence import open_store
from agentgraph.session.agent import Agent
from tests.fakes.openai_server import FakeOpenAIServer
from tests.scenarios.long_task import PLANTED_FACTS, LongTaskDriver, make_workspace

WINDOW_TOKENS = 16_000


def test_long_task_at_a_small_window_finishes_with_facts(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    paths = make_workspace(workspace, files=24)
    driver = LongTaskDriver(paths)
    with FakeOpenAIServer([driver], window=WINDOW_TOKENS, on_exhausted="repeat_last") as server:
        settings = make_settings(
            OPENAI_BASE_URL=server.url,
            OPENAI_API_KEY="sk-test",
            AGENTGRAPH_CONTEXT_WINDOW=str(WINDOW_TOKENS),
            AGENTGRAPH_PROVIDER_MAX_RETRIES="0",
            # This test pins the summary tier: with observation masking off the task
            # reaches the compaction threshold (masking: tests/integration/test_context_v2.py).
            AGENTGRAPH_MASK_THRESHOLD="1.0",
        )
        events: list[dict] = []
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            result = agent.run_turn(
                "long", "read every log and report the facts", workspace, events.append
            )
            report = agent.context_report("long")
        sizes = [server.token_estimate(r) for r in server.requests]
    assert server.violations == []
    assert server.overflow_count <= 1
    assert max(sizes) <= WINDOW_TOKENS
    assert driver.step == len(paths) + 2  # every file read, report written, answered
    assert set(PLANTED_FACTS.values()) <= driver.answer_facts, result.answer
    compactions = [e for e in events if e["type"] == "compaction"]
    assert compactions and all(c["tokens_after"] < c["tokens_before"] for c in compactions)
    assert all(not c["fallback"] for c in compactions)
    assert driver.summary_calls >= 1
    assert report["tokens"] <= report["budget"]
    # The report file written last is re-injected at the next compaction or visible raw.
    assert (workspace / "report.md").exists()
