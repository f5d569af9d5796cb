"""A budget in dollars: ``run --budget $X`` and ``AGENTGRAPH_TURN_BUDGET_USD``.

The real CLI in a subprocess against the stateless fake OpenAI-compatible server, whose
answers report a fixed usage, so each call's estimated cost (the price table's
``gpt-4o-mini``) is known in advance.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentgraph.providers.pricing import PRICES, TOKENS_PER_PRICE_UNIT
from tests.cli_helpers import run_cli, server_env
from tests.fakes.openai_server import FakeOpenAIServer

KEY = "sk-test-secret-costbudget-0123456789abcdef"
PROMPT_TOKENS = 100_000
COMPLETION_TOKENS = 1_000
PRICE = PRICES["gpt-4o-mini"]
CALL_USD = (PROMPT_TOKENS * PRICE.input + COMPLETION_TOKENS * PRICE.output) / (
    TOKENS_PER_PRICE_UNIT
)
# Between the cost of two calls and three: the third reply reaches it.
BUDGET_USD = 0.04
CALLS_TO_BUDGET = 3
FILES = 10


def _reads_files(request: dict[str, Any]) -> dict[str, Any]:
    """Read file n (n = tool results so far), reporting a fixed usage; then answer."""
    read = sum(1 for m in request["messages"] if m.get("role") == "tool")
    usage = {
        "prompt_tokens": PROMPT_TOKENS,
        "completion_tokens": COMPLETION_TOKENS,
        "cached_tokens": 0,
    }
    if read < FILES:
        call = {"name": "read_file", "arguments": {"path": f"notes/{read}.txt"}}
        return {"tool_calls": [call], "usage": usage}
    return {"content": f"read {read} files", "usage": usage}


def _notes(workspace: Path) -> None:
    (workspace / "notes").mkdir()
    for n in range(FILES):
        (workspace / "notes" / f"{n}.txt").write_text(f"note {n}\n")


def _chat_requests(server: FakeOpenAIServer) -> list[dict[str, Any]]:
    return [r for r in server.requests if "messages" in (r or {})]


@pytest.mark.parametrize("written", ["$0.04", "0.04$", "USD0.04", "usd 0.04"])
def test_a_dollar_budget_stops_the_request_once_spent(
    home: Path, workspace: Path, written: str
) -> None:
    _notes(workspace)
    with FakeOpenAIServer([_reads_files], on_exhausted="repeat_last") as server:
        env = server_env(home, server.url, KEY)
        result = run_cli(
            ["run", "--json", "--budget", written, "read the notes"], cwd=workspace, env=env
        )
        requests = _chat_requests(server)
    assert result.returncode == 3, result.stderr
    payload = json.loads(result.stdout)
    assert payload["stopped"] == "budget"
    assert len(requests) == CALLS_TO_BUDGET  # no call after the reply that reached it
    spent = CALLS_TO_BUDGET * CALL_USD
    assert payload["usage"]["cost_usd"] == pytest.approx(spent)
    assert payload["answer"].startswith(f"Stopped: this request used ${spent:.4f} of $0.04")
    lines = [line for line in result.stderr.splitlines() if line.startswith("agentgraph:")]
    assert lines == [
        "agentgraph: stopped at the dollar budget (--budget / AGENTGRAPH_TURN_BUDGET_USD=0.04); "
        f"the answer may be partial (continue with: agentgraph run --thread "
        f"{payload['thread_id']} ...)"
    ], result.stderr


def test_the_dollar_budget_setting(home: Path, workspace: Path) -> None:
    """AGENTGRAPH_TURN_BUDGET_USD sets it; a token ``--budget`` adds its own limit;
    ``--budget $0`` lifts it for one run."""
    _notes(workspace)
    with FakeOpenAIServer([_reads_files], on_exhausted="repeat_last") as server:
        env = server_env(home, server.url, KEY, AGENTGRAPH_TURN_BUDGET_USD=str(BUDGET_USD))
        capped = run_cli(["run", "--json", "read the notes"], cwd=workspace, env=env)
        first = len(_chat_requests(server))
        both = run_cli(
            ["run", "--json", "--budget", str(PROMPT_TOKENS), "read the notes"],
            cwd=workspace,
            env=env,
        )
        second = len(_chat_requests(server)) - first
        lifted = run_cli(
            ["run", "--json", "--budget", "$0", "read the notes"], cwd=workspace, env=env
        )
    assert capped.returncode == 3, capped.stderr
    assert json.loads(capped.stdout)["stopped"] == "budget"
    assert first == CALLS_TO_BUDGET
    # The token budget is reached at the first reply, before the dollar one.
    assert both.returncode == 3, both.stderr
    assert second == 1
    assert lifted.returncode == 0, lifted.stderr
    assert json.loads(lifted.stdout)["answer"] == f"read {FILES} files"
    assert json.loads(both.stdout)["answer"].startswith(
        f"Stopped: this request used {PROMPT_TOKENS + COMPLETION_TOKENS:,} of "
        f"{PROMPT_TOKENS:,} tokens"
    )


def test_a_dollar_budget_for_a_model_without_a_price_is_refused(
    home: Path, workspace: Path
) -> None:
    """No price, no way to measure the budget: one line and exit 2, no model call."""
    with FakeOpenAIServer([_reads_files]) as server:
        env = server_env(home, server.url, KEY, AGENTGRAPH_MODEL="my-local-model")
        result = run_cli(["run", "--budget", "$0.50", "hello"], cwd=workspace, env=env)
        env_set = run_cli(
            ["run", "hello"], cwd=workspace, env={**env, "AGENTGRAPH_TURN_BUDGET_USD": "1"}
        )
        requests = _chat_requests(server)
    for refused in (result, env_set):
        assert refused.returncode == 2, refused.stderr
        assert refused.stderr.strip().splitlines() == [
            "agentgraph: a dollar budget (AGENTGRAPH_TURN_BUDGET_USD, --budget $X) needs a "
            "known price, and my-local-model has none: give the budget in tokens "
            "(--budget N, AGENTGRAPH_TURN_BUDGET_TOKENS) instead"
        ]
        assert refused.stdout == ""
    assert requests == []


@pytest.mark.parametrize("written", ["5 euros", "-1", "$-1", "$", "1e3$"])
def test_a_budget_that_is_neither_form_is_a_usage_error(
    home: Path, workspace: Path, written: str
) -> None:
    result = run_cli(
        ["run", "--budget", written, "hello"],
        cwd=workspace,
        env=server_env(home, "http://127.0.0.1:9", KEY),
    )
    assert result.returncode == 2
    assert "not a budget" in result.stderr or "not a dollar amount" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_summary_model_without_a_price_does_not_block_a_dollar_budget(
    home: Path, workspace: Path
) -> None:
    """Only the main model's calls are budgeted: the summarizer's price does not matter."""
    with FakeOpenAIServer([{"content": "hello back"}]) as server:
        env = server_env(home, server.url, KEY, AGENTGRAPH_SUMMARY_MODEL="my-local-model")
        result = run_cli(["run", "--json", "--budget", "$1", "hello"], cwd=workspace, env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["answer"] == "hello back"
