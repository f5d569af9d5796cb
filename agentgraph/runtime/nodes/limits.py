"""The limits that stop a request while the model still asks for tools.

Three, checked after every reply that makes tool calls, in this order:

* the loop cap (``MAX_LOOPS``): a backstop far above what a long task needs;
* the budget (``AGENTGRAPH_TURN_BUDGET_TOKENS`` / ``AGENTGRAPH_TURN_BUDGET_USD``,
  ``run --budget N|$X``): prompt + completion tokens, or estimated dollars, the
  request's model calls may spend; and the session goal's budget (``/goal … --budget``),
  over all the turns of its work (:mod:`agentgraph.runtime.goal`);
* the runaway guard: the same tool calls (same tool, same arguments) returned the same
  output :data:`RUNAWAY_REPEATS` times in a row
  (:func:`~agentgraph.context.spiral.repeat_streak`).

A limit sends the run to the ``finalize`` node, which answers the pending calls as not
executed and ends the request with an answer; its ``stopped`` event names the limit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from agentgraph.config import Settings
from agentgraph.providers.pricing import UsageTotals
from agentgraph.runtime.goal import STATUS_BUDGET, UNPRICED_FIELD, goal_limit, spent
from agentgraph.runtime.spend import SpendLimit

__all__ = [
    "RUNAWAY_REPEATS",
    "STOP_BUDGET",
    "STOP_REPEATED",
    "STOP_STEP_LIMIT",
    "budget_spent",
    "reply_cost",
    "reply_tokens",
    "request_limit",
]

# Times in a row the same tool calls may return the same output before the run stops
# asking for them: a model that asks a fourth time for what it already read three times
# is going round, not working. Three, not two: reading a file again after a failed edit
# is ordinary, and the output is the same then too.
RUNAWAY_REPEATS = 3

STOP_STEP_LIMIT = "max_loops"
"""``stopped`` event reason: the run ended at the loop cap."""
STOP_BUDGET = "budget"
"""``stopped`` event reason: the request's model calls (or its goal's work) spent the
budget."""
STOP_REPEATED = "repeated_calls"
"""``stopped`` event reason: the same tool calls kept returning the same output."""


def reply_tokens(messages: Iterable[BaseMessage]) -> int:
    """Prompt + completion tokens the provider reported for the replies in ``messages``."""
    total = 0
    for msg in messages:
        if isinstance(msg, AIMessage) and msg.usage_metadata:
            usage = msg.usage_metadata
            total += int(usage.get("input_tokens") or 0) + int(usage.get("output_tokens") or 0)
    return total


def reply_cost(messages: Iterable[BaseMessage], model: str | None) -> float | None:
    """Estimated US dollars of the replies in ``messages``; None when a reply's model
    has no known price (a request's dollar budget is refused for one up front, see
    ``check_priced``; a goal's stops, see :func:`agentgraph.runtime.goal.account`)."""
    totals = UsageTotals()
    for msg in messages:
        if isinstance(msg, AIMessage):
            totals.add_message(msg, model)
    return totals.cost_usd


def budget_spent(state: Mapping[str, Any], settings: Settings) -> str | None:
    """What budget the request's calls spent, if one is: the request's own, then the
    goal's.

    Args:
        state: The graph state, its ``turn_tokens`` / ``turn_cost_usd`` / ``goal``
            up to date with the latest reply.
        settings: The request budget's settings.

    Returns:
        ``this request used 1,200 of 1,000 tokens`` / ``the goal's work used $0.52 of
        $0.50``, or None while no budget is spent.
    """
    tokens = int(state.get("turn_tokens") or 0)
    usd = float(state.get("turn_cost_usd") or 0.0)
    limit = SpendLimit(settings.turn_budget_tokens, settings.turn_budget_usd)
    if limit.reached(tokens, usd):
        return f"this request used {limit.describe(tokens, usd)}"
    goal = state.get("goal")
    if isinstance(goal, Mapping) and goal.get("status") == STATUS_BUDGET:
        unpriced = goal.get(UNPRICED_FIELD)
        if unpriced:
            return f"the goal's dollar budget cannot be measured: {unpriced} has no known price"
        return f"the goal's work used {goal_limit(goal).describe(*spent(goal))}"
    return None


def request_limit(loops: int, cap: int, over_budget: bool, repeats: int) -> str | None:
    """The limit a request with pending tool calls has reached, if any.

    Args:
        loops: Model calls the request has made.
        cap: Model calls it may make.
        over_budget: Its calls spent a budget (:func:`budget_spent`).
        repeats: Times in a row the model already made exactly the pending calls with
            the same output.

    Returns:
        :data:`STOP_STEP_LIMIT`, :data:`STOP_BUDGET`, :data:`STOP_REPEATED` or None.
    """
    if loops >= cap:
        return STOP_STEP_LIMIT
    if over_budget:
        return STOP_BUDGET
    if repeats >= RUNAWAY_REPEATS:
        return STOP_REPEATED
    return None
