"""The limits that stop a request while the model still asks for tools.

Three, checked after every reply that makes tool calls, in this order:

* the loop cap (``MAX_LOOPS``): a backstop far above what a long task needs;
* the token budget (``AGENTGRAPH_TURN_BUDGET_TOKENS``, ``run --budget``): prompt +
  completion tokens the request's model calls may spend;
* the runaway guard: the same tool calls (same tool, same arguments) returned the same
  output :data:`RUNAWAY_REPEATS` times in a row
  (:func:`~agentgraph.context.spiral.repeat_streak`).

A limit sends the run to the ``finalize`` node, which answers the pending calls as not
executed and ends the request with an answer; its ``stopped`` event names the limit.
"""

from __future__ import annotations

from collections.abc import Iterable

from langchain_core.messages import AIMessage, BaseMessage

__all__ = [
    "RUNAWAY_REPEATS",
    "STOP_BUDGET",
    "STOP_REPEATED",
    "STOP_STEP_LIMIT",
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
"""``stopped`` event reason: the request's model calls spent the token budget."""
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


def request_limit(loops: int, cap: int, spent: int, budget: int, repeats: int) -> str | None:
    """The limit a request with pending tool calls has reached, if any.

    Args:
        loops: Model calls the request has made.
        cap: Model calls it may make.
        spent: Prompt + completion tokens its model calls used.
        budget: Tokens it may spend (0: no budget).
        repeats: Times in a row the model already made exactly the pending calls with
            the same output.

    Returns:
        :data:`STOP_STEP_LIMIT`, :data:`STOP_BUDGET`, :data:`STOP_REPEATED` or None.
    """
    if loops >= cap:
        return STOP_STEP_LIMIT
    if budget and spent >= budget:
        return STOP_BUDGET
    if repeats >= RUNAWAY_REPEATS:
        return STOP_REPEATED
    return None
