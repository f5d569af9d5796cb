"""Headroom after compaction, through the real graph and the strict loopback server.

After any compaction the prompt is at most half the usable budget, so the next one is
far away; a compaction that would leave more keeps less rather than paying for a
second summary or compacting again a few calls later.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

from agentgraph.config import Settings
from agentgraph.context.compaction import NEXT_PIECE_PROMPT, SUPPLEMENT_PROMPT
from agentgraph.context.windows import budget_for
from agentgraph.persistence import open_store
from agentgraph.session.agent import Agent
from tests.fakes.openai_server import FakeOpenAIServer
from tests.scenarios.long_task import (
    PLANTED_FACTS,
    LongTaskDriver,
    is_summary_request,
    make_workspace,
)

WINDOW_TOKENS = 16_000
FILES = 40
# ~3 KB per file: each read adds about 1,000 tokens to a 12,800-token budget.
FILE_LINES = 36
# Largest prompt growth of one read (the tool output cap is 10% of the budget).
READ_MAX_TOKENS = 1_300


def test_after_each_compaction_the_prompt_is_at_most_half_the_budget(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    driver = LongTaskDriver(make_workspace(workspace, files=FILES, lines_per_file=FILE_LINES))
    events: list[dict[str, Any]] = []
    with FakeOpenAIServer([driver], window=WINDOW_TOKENS, on_exhausted="repeat_last") as server:
        settings = make_settings(
            OPENAI_BASE_URL=server.url,
            OPENAI_API_KEY="sk-test",
            AGENTGRAPH_CONTEXT_WINDOW=str(WINDOW_TOKENS),
            AGENTGRAPH_PROVIDER_MAX_RETRIES="0",
            MAX_LOOPS=str(FILES + 5),
            # The summary tier alone: masking off, so every read stays verbatim until
            # a compaction (the masking tier: tests/integration/test_context_v2.py).
            AGENTGRAPH_MASK_THRESHOLD="1.0",
        )
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            agent.run_turn("h", "read every log and report the facts", workspace, events.append)
        requests = server.requests
    budget = budget_for(settings, settings.model)
    assert server.violations == []
    assert server.overflow_count == 0
    assert driver.step == FILES + 2
    compactions = [e for e in events if e["type"] == "compaction"]
    assert len(compactions) >= 2
    # One summary per compaction: none compacted "harder" with a second summary.
    # (This summarizer names no file, so each compaction also asks once about the files
    # it left out: SUPPLEMENT_PROMPT; a part larger than one summarizer call has its
    # later messages in a second piece: NEXT_PIECE_PROMPT.)
    supplements = sum(SUPPLEMENT_PROMPT[:40] in json.dumps(body) for body in requests)
    pieces = sum(NEXT_PIECE_PROMPT[:40] in json.dumps(body) for body in requests)
    assert supplements <= len(compactions)
    assert pieces <= len(compactions)
    assert driver.summary_calls - supplements - pieces == len(compactions)
    assert all(not c["fallback"] for c in compactions)
    # The first model request after each compaction (what the server received).
    after: list[int] = []
    at: list[int] = []
    calls = 0
    for i, body in enumerate(requests):
        if is_summary_request(body):
            continue
        if i > 0 and is_summary_request(requests[i - 1]):
            after.append(server.token_estimate(body))
            at.append(calls)
        calls += 1
    assert len(after) == len(compactions)
    assert max(after) <= budget.usable // 2, (after, budget.usable)
    assert all(c["tokens_after"] <= budget.usable // 2 for c in compactions)
    # Half the budget free means the next compaction is several reads away.
    min_gap = (budget.compact_at - budget.usable // 2) // READ_MAX_TOKENS
    gaps = [b - a for a, b in pairwise(at)]
    assert min(gaps) >= min_gap, gaps
    assert set(PLANTED_FACTS.values()) <= driver.answer_facts
