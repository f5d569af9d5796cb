"""A goal's budget through the real graph: summed over the turns of its work, and never
silently unlimited.

``Agent.run_turn`` against the stateless fake OpenAI-compatible server, whose replies
report a fixed usage.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentgraph.config import Settings
from agentgraph.persistence import open_store
from agentgraph.runtime.goal import STATUS_ACTIVE, STATUS_BUDGET, new_goal
from agentgraph.runtime.spend import SpendLimit
from agentgraph.session.agent import Agent
from tests.cli_helpers import run_cli, server_env
from tests.fakes.openai_server import FakeOpenAIServer

KEY = "sk-test-secret-goalgraph-0123456789abcdef"
CALL_TOKENS = 1_000
GOAL_BUDGET_TOKENS = 2_500
USAGE = {"prompt_tokens": CALL_TOKENS, "completion_tokens": 0, "cached_tokens": 0}


def _answers_then_reads(request: dict[str, Any]) -> dict[str, Any]:
    """Answer the first two prompts; from the third on, read a file."""
    prompts = sum(1 for m in request["messages"] if m.get("role") == "user")
    if prompts < 3:
        return {"content": f"answer {prompts}", "usage": USAGE}
    return {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}], "usage": USAGE}


def _settings(make_settings: Callable[..., Settings], url: str, model: str) -> Settings:
    return make_settings(
        OPENAI_BASE_URL=url,
        OPENAI_API_KEY=KEY,
        AGENTGRAPH_MODEL=model,
        AGENTGRAPH_PROVIDER_MAX_RETRIES="0",
        AGENTGRAPH_SANDBOX="off",
        AGENTGRAPH_TITLES="first_message",
    )


def test_a_goal_s_budget_is_summed_over_its_turns(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    (workspace / "a.txt").write_text("a\n")
    events: list[dict[str, Any]] = []
    with FakeOpenAIServer([_answers_then_reads], on_exhausted="repeat_last") as server:
        settings = _settings(make_settings, server.url, "gpt-4o-mini")
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            agent.set_goal("t1", new_goal("read a.txt", SpendLimit(tokens=GOAL_BUDGET_TOKENS)))
            first = agent.run_turn("t1", "one", workspace, events.append)
            second = agent.run_turn("t1", "two", workspace, events.append)
            after_two = agent.goal("t1")
            third = agent.run_turn("t1", "three", workspace, events.append)
            goal = agent.goal("t1")
        calls = len([r for r in server.requests if "messages" in (r or {})])
    # No turn alone reaches the budget; the third turn's call brings the sum over it.
    assert first.stop_reason is None and second.stop_reason is None
    assert after_two is not None and after_two["status"] == STATUS_ACTIVE
    assert after_two["spent_tokens"] == 2 * CALL_TOKENS
    assert third.stop_reason == "budget" and calls == 3
    assert goal is not None and goal["status"] == STATUS_BUDGET
    notices = [e["text"] for e in events if e["type"] == "notice" and "budget" in e["text"]]
    assert notices == [
        f"stopped at the budget: the goal's work used {3 * CALL_TOKENS:,} of "
        f"{GOAL_BUDGET_TOKENS:,} tokens"
    ]


def test_a_dollar_goal_on_a_model_without_a_price_stops_rather_than_run_unlimited(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """The goal was set on a priced model; the session then runs on one without a price
    (``/model``, ``run -r`` with another model): its budget cannot be measured."""
    (workspace / "a.txt").write_text("a\n")
    events: list[dict[str, Any]] = []
    reads = {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]}
    with FakeOpenAIServer([reads], on_exhausted="repeat_last") as server:
        settings = _settings(make_settings, server.url, "my-local-model")
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            agent.set_goal("t1", new_goal("read a.txt", SpendLimit(usd=1.0)))
            result = agent.run_turn("t1", "go", workspace, events.append)
        calls = len([r for r in server.requests if "messages" in (r or {})])
    assert result.stop_reason == "budget" and calls == 1
    assert [e["text"] for e in events if e["type"] == "notice" and "budget" in e["text"]] == [
        "stopped at the budget: the goal's dollar budget cannot be measured: my-local-model "
        "has no known price"
    ]


def test_run_on_a_session_with_a_goal_stops_at_the_goal_s_budget(
    make_settings: Callable[..., Settings], home: Path, workspace: Path
) -> None:
    """``agentgraph run`` continuing a session whose goal is active counts its calls
    against the goal's budget and names it when it stops (exit 3)."""
    (workspace / "a.txt").write_text("a\n")
    reads = {
        "tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}],
        "usage": USAGE,
    }
    with FakeOpenAIServer([reads], on_exhausted="repeat_last") as server:
        stored = make_settings(AGENTGRAPH_HOME=str(home / ".agentgraph"))
        with open_store(stored) as store:
            Agent(stored, store, sleep=lambda _s: None).set_goal(
                "t1", new_goal("read a.txt", SpendLimit(tokens=GOAL_BUDGET_TOKENS))
            )
        env = server_env(home, server.url, KEY)
        result = run_cli(["run", "--json", "--thread", "t1", "go on"], cwd=workspace, env=env)
        calls = len([r for r in server.requests if "messages" in (r or {})])
    assert result.returncode == 3, result.stderr
    assert json.loads(result.stdout)["stopped"] == "budget"
    assert calls == 3  # 1,000 tokens a call: the third reaches 2,500
    lines = [line for line in result.stderr.splitlines() if line.startswith("agentgraph:")]
    assert lines == [
        "agentgraph: stopped at the budget of the session's goal (/goal); the answer may be "
        "partial (continue with: agentgraph run --thread t1 ...)"
    ], result.stderr
