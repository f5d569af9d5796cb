"""A non-interactive run in the session layer: its session, its cap, its outcome.

Real SQLite stores under tmp_path and real Agent turns on the scripted chat model.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import tool

from agentgraph.config import Settings
from agentgraph.errors import EXIT_STEP_LIMIT, AgentGraphError, AmbiguousSession
from agentgraph.persistence import Store, open_store
from agentgraph.persistence.index import SessionInfo
from agentgraph.session.agent import Agent
from agentgraph.session.run import (
    RUN_LIMIT_REASONS,
    RUNAWAY_REPEATS,
    STOP_BUDGET,
    STOP_REPEATED,
    STOP_STEP_LIMIT,
    STOP_TIMEOUT,
    RunTimedOut,
    check_session_ids,
    empty_usage,
    failed_run_usage,
    result_usage,
    run_capped,
    run_exit_code,
    stop_explanation,
    thread_for_run,
)
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.scripts import ai_text, tool_call

# A cap short enough for a test, and a turn that outlasts it by far.
CAP_S = 0.2
SLOW_TURN_S = 5.0


def _add(store: Store, *thread_ids: str) -> None:
    for thread_id in thread_ids:
        store.index.upsert(SessionInfo(thread_id=thread_id, title=thread_id))


def test_a_run_reopens_an_exact_id_or_a_unique_prefix_else_starts_that_id(store: Store) -> None:
    _add(store, "alpha-1", "alpha-2", "beta-1")
    assert thread_for_run(store, "alpha-1") == "alpha-1"
    assert thread_for_run(store, "beta") == "beta-1"
    assert thread_for_run(store, "gamma") == "gamma"
    fresh = thread_for_run(store, None)
    assert fresh and store.index.get(fresh) is None
    with pytest.raises(AmbiguousSession):
        thread_for_run(store, "alpha")


def test_session_ids_are_checked_and_named_as_given() -> None:
    check_session_ids({"--thread": "fine-id", "--resume": None})
    with pytest.raises(AgentGraphError, match="--resume") as caught:
        check_session_ids({"--thread": None, "--resume": "../escape"})
    assert caught.value.exit_code == 2


def test_only_a_limit_of_the_request_makes_a_partial_outcome() -> None:
    assert {run_exit_code(r) for r in RUN_LIMIT_REASONS} == {EXIT_STEP_LIMIT}
    assert run_exit_code(None) == 0
    assert STOP_TIMEOUT not in RUN_LIMIT_REASONS


def test_the_stop_explanation_names_the_limit_and_its_setting(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings(MAX_LOOPS="7", AGENTGRAPH_TURN_BUDGET_TOKENS="500")
    assert stop_explanation(settings, STOP_STEP_LIMIT) == "at the step limit (MAX_LOOPS=7)"
    assert "AGENTGRAPH_TURN_BUDGET_TOKENS=500" in stop_explanation(settings, STOP_BUDGET)
    assert f"{RUNAWAY_REPEATS} times in a row" in stop_explanation(settings, STOP_REPEATED)
    goal = stop_explanation(make_settings(), STOP_BUDGET)
    assert goal == "at the budget of the session's goal (/goal)"
    with pytest.raises(ValueError):
        stop_explanation(settings, STOP_TIMEOUT)


@tool
def ping() -> str:
    """Answer pong."""
    return "pong"


def test_usage_of_a_finished_and_of_a_failed_run(settings: Settings, workspace: Path) -> None:
    call = AIMessage(
        content="",
        tool_calls=[tool_call("ping", {}, id="call-ping")],
        usage_metadata={"input_tokens": 100, "output_tokens": 20, "total_tokens": 120},
    )
    model = ScriptedChatModel([call, ai_text("done")])
    with open_store(settings) as store:
        agent = Agent(settings, store, model=model, sleep=lambda _s: None)
        agent.deps.tools.append(ping)
        result = agent.run_turn("t", "go", workspace)
        assert result_usage(result)["input_tokens"] == result.input_tokens > 100
        # A run that failed after its tool call: the stored tool-call reply's usage.
        usage = failed_run_usage(agent, "t", ["call-ping"])
        assert usage is not None
        assert (usage["input_tokens"], usage["output_tokens"]) == (100, 20)
        assert failed_run_usage(agent, "t", []) is None
    assert empty_usage() == {
        "input_tokens": 0,
        "output_tokens": 0,
        "cached_input_tokens": 0,
        "cost_usd": None,
    }


def test_the_wall_clock_cap_cancels_the_agent(settings: Settings) -> None:
    capped = settings.model_copy(update={"run_timeout_s": CAP_S})
    with open_store(capped) as store:
        agent = Agent(capped, store, model=ScriptedChatModel([ai_text("unused")]))
        started = time.monotonic()
        with pytest.raises(RunTimedOut):
            run_capped(capped, agent, lambda: time.sleep(SLOW_TURN_S))
        assert time.monotonic() - started < SLOW_TURN_S
        assert agent.cancelled.is_set()
        assert run_capped(capped, agent, lambda: "quick") == "quick"
