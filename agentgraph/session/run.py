"""A non-interactive run: one request, nobody to answer questions, an outcome to report.

The session is chosen by id (an exact id, a unique prefix, or a new one), the request
runs under the wall-clock cap ``AGENTGRAPH_RUN_TIMEOUT_S``, and its outcome is an exit
status, a reason when a limit stopped it, and its usage (also for a run that failed,
from the replies it stored).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from langchain_core.messages import AIMessage

from agentgraph.config import Settings
from agentgraph.errors import EXIT_STEP_LIMIT, AmbiguousSession, SessionNotFound
from agentgraph.persistence import Store
from agentgraph.persistence.index import resolve_session
from agentgraph.persistence.thread_ids import check_thread_id
from agentgraph.providers.pricing import UsageTotals, usage_json
from agentgraph.runtime.nodes.limits import (
    RUNAWAY_REPEATS,
    STOP_BUDGET,
    STOP_REPEATED,
    STOP_STEP_LIMIT,
)
from agentgraph.runtime.run_limits import RunTimedOut, wall_clock_cap
from agentgraph.session.agent import Agent, TurnResult, new_thread_id

__all__ = [
    "RUNAWAY_REPEATS",
    "RUN_LIMIT_REASONS",
    "STOP_BUDGET",
    "STOP_REPEATED",
    "STOP_STEP_LIMIT",
    "STOP_TIMEOUT",
    "RunTimedOut",
    "check_session_ids",
    "empty_usage",
    "failed_run_usage",
    "result_usage",
    "run_capped",
    "run_exit_code",
    "stop_explanation",
    "thread_for_run",
]

STOP_TIMEOUT = "timeout"
"""The stop reason of a run AGENTGRAPH_RUN_TIMEOUT_S ended."""
# Limits of a request that end it with an answer, which may be partial (exit 3).
RUN_LIMIT_REASONS = frozenset({STOP_STEP_LIMIT, STOP_BUDGET, STOP_REPEATED})

_T = TypeVar("_T")


def check_session_ids(ids: Mapping[str, str | None]) -> None:
    """Check each given session id against the thread-id rule.

    Args:
        ids: How the front end names each id (e.g. ``--thread``) → the id (None: not
            given).

    Raises:
        AgentGraphError: (exit 2) an id is malformed, named as given.
    """
    for name, value in ids.items():
        if value is not None:
            check_thread_id(value, name)


def thread_for_run(store: Store, requested: str | None) -> str:
    """The session a run asked for by id: an exact id, else a unique prefix of one, else
    a new thread by that id (None: a new thread).

    Raises:
        SessionNotFound: the value is a prefix of several sessions.
    """
    if not requested:
        return new_thread_id()
    if store.index.get(requested) is not None:
        return requested
    try:
        return resolve_session(store.index, requested).thread_id
    except AmbiguousSession:
        raise
    except SessionNotFound:
        return requested


def run_capped(settings: Settings, agent: Agent, turn: Callable[[], _T]) -> _T:
    """Run ``turn`` under the wall-clock cap (``AGENTGRAPH_RUN_TIMEOUT_S``; 0: none),
    which cancels the agent when reached.

    Raises:
        RunTimedOut: The cap was reached (the turn was cancelled and recorded as
            interrupted).
    """
    with wall_clock_cap(settings.run_timeout_s, agent.cancel):
        return turn()


def run_exit_code(stop_reason: str | None) -> int:
    """The exit status of a run that ended with an answer: EXIT_STEP_LIMIT when a limit
    of the request stopped it (the answer may be partial), else 0."""
    return EXIT_STEP_LIMIT if stop_reason in RUN_LIMIT_REASONS else 0


def _budget_why(settings: Settings) -> str:
    """Which budget a run stopped at."""
    tokens, usd = settings.turn_budget_tokens, settings.turn_budget_usd
    if tokens and usd:
        return (
            f"at the budget (--budget / AGENTGRAPH_TURN_BUDGET_TOKENS={tokens}, "
            f"AGENTGRAPH_TURN_BUDGET_USD={usd:g})"
        )
    if tokens:
        return f"at the token budget (--budget / AGENTGRAPH_TURN_BUDGET_TOKENS={tokens})"
    if usd:
        return f"at the dollar budget (--budget / AGENTGRAPH_TURN_BUDGET_USD={usd:g})"
    return "at the budget of the session's goal (/goal)"


def stop_explanation(settings: Settings, stop_reason: str) -> str:
    """Which limit of the request stopped a run (one of RUN_LIMIT_REASONS), as the
    phrase after "stopped"."""
    if stop_reason == STOP_STEP_LIMIT:
        return f"at the step limit (MAX_LOOPS={settings.max_loops})"
    if stop_reason == STOP_BUDGET:
        return _budget_why(settings)
    if stop_reason == STOP_REPEATED:
        return (
            "going round: the same tool calls returned the same output "
            f"{RUNAWAY_REPEATS} times in a row"
        )
    raise ValueError(f"not a limit of a run: {stop_reason!r}")


def empty_usage() -> dict[str, Any]:
    """The usage object of a run that used nothing (yet)."""
    return usage_json(0, 0, 0, None)


def result_usage(result: TurnResult) -> dict[str, Any]:
    """The usage object of a run that ended with ``result``."""
    return usage_json(
        result.input_tokens, result.output_tokens, result.cached_input_tokens, result.cost_usd
    )


def failed_run_usage(agent: Agent, thread_id: str, call_ids: list[str]) -> dict[str, Any] | None:
    """The usage of the model replies a failed run stored: its tool-call replies (a reply
    cut off by the failure reported none).

    Args:
        agent: The agent the run used.
        thread_id: The run's session.
        call_ids: The ids of the run's tool calls, as streamed.

    Returns:
        The usage object; None when the run made no tool call or its history cannot be
        read (the store may be what failed: the failure itself is what gets reported).
    """
    if not call_ids:
        return None
    wanted = set(call_ids)
    totals = UsageTotals()
    try:
        history = agent.messages(thread_id)
    except Exception:  # the failure itself is what gets reported
        return None
    for message in reversed(history):  # the run's replies are the latest
        if not wanted:
            break
        if isinstance(message, AIMessage) and message.tool_calls:
            ids = {call["id"] for call in message.tool_calls} & wanted
            if ids:
                wanted -= ids
                totals.add_message(message, agent.settings.model)
    return usage_json(
        totals.input_tokens, totals.output_tokens, totals.cached_input_tokens, totals.cost_usd
    )
