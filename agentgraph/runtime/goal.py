"""A session's goal (the REPL's ``/goal``): work that goes on across turns until done.

The goal lives in the session's state (``goal``, checkpointed with it, so it survives a
restart and ``-r``): its text, an optional budget, what the model calls made under it
spent, and its status. The model is told the goal once, as the prompt of the turn
``/goal`` starts (appended like any request: the system prompt never changes); after
each turn that ends while the goal is active, the REPL sends :data:`CONTINUE_PROMPT`
as the next turn, until the model ends an answer with :data:`DONE_MARKER` (or
:data:`BLOCKED_MARKER`), the budget is spent, :data:`CONTINUATIONS_MAX` turns ran in
a row, or the user presses Ctrl-C.

The model-turn node adds every model call's tokens and estimated cost to the goal
while it is active (:func:`account`), and a spent goal budget stops the request the
way the per-request budget does (``stopped`` reason ``budget``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from agentgraph.runtime.spend import SpendLimit

__all__ = [
    "BLOCKED_MARKER",
    "CONTINUATIONS_MAX",
    "CONTINUE_PROMPT",
    "DONE_MARKER",
    "STATUS_ACTIVE",
    "STATUS_BLOCKED",
    "STATUS_BUDGET",
    "STATUS_DONE",
    "UNPRICED_FIELD",
    "account",
    "active_goal",
    "describe",
    "goal_limit",
    "goal_prompt",
    "new_goal",
    "spent",
]

STATUS_ACTIVE = "active"
STATUS_DONE = "complete"
STATUS_BLOCKED = "blocked"
STATUS_BUDGET = "budget_limited"
# Field of a goal stopped because its dollar budget could not be measured: the model
# that had no known price.
UNPRICED_FIELD = "unpriced"

# The line an answer ends with when the goal is achieved, or cannot go on without the
# user. Plain text rather than a tool: the tool list is part of the cached prompt
# prefix, and a goal must not change it.
DONE_MARKER = "GOAL COMPLETE"
BLOCKED_MARKER = "GOAL BLOCKED"
_MARKER_RE = re.compile(
    rf"^\W*({re.escape(DONE_MARKER)}|{re.escape(BLOCKED_MARKER)})\b", re.MULTILINE
)

# Turns the REPL starts on its own, one after another, before it waits for the user
# again: a goal without a budget must not run unattended for ever.
CONTINUATIONS_MAX = 20

GOAL_PROMPT = (
    "Goal for this session: {text}\n\n"
    "Work toward this goal until it is achieved; after each of your answers the session "
    "asks you to continue, without waiting for me. When the goal is achieved and you "
    "have checked it, end your answer with a line `{done}`. If you cannot go on without "
    "me, say what you need and end with a line `{blocked}`."
)
CONTINUE_PROMPT = (
    "Continue working toward the goal. End your answer with a line `"
    + DONE_MARKER
    + "` once it is achieved, or `"
    + BLOCKED_MARKER
    + "` if you need me."
)


def goal_prompt(text: str) -> str:
    """The request that tells the model the goal (the first turn of its work)."""
    return GOAL_PROMPT.format(text=text, done=DONE_MARKER, blocked=BLOCKED_MARKER)


def new_goal(text: str, limit: SpendLimit) -> dict[str, Any]:
    """The state value of a goal just set: active, nothing spent."""
    return {
        "text": text,
        "budget_tokens": limit.tokens,
        "budget_usd": limit.usd,
        "spent_tokens": 0,
        "spent_usd": 0.0,
        "status": STATUS_ACTIVE,
    }


def active_goal(state: Mapping[str, Any]) -> dict[str, Any] | None:
    """The state's goal while it is active, else None."""
    goal = state.get("goal")
    if isinstance(goal, Mapping) and goal.get("status") == STATUS_ACTIVE:
        return dict(goal)
    return None


def goal_limit(goal: Mapping[str, Any]) -> SpendLimit:
    """The goal's budget."""
    return SpendLimit(int(goal.get("budget_tokens") or 0), float(goal.get("budget_usd") or 0))


def spent(goal: Mapping[str, Any]) -> tuple[int, float]:
    """Tokens and estimated dollars the goal's work has spent."""
    return int(goal.get("spent_tokens") or 0), float(goal.get("spent_usd") or 0.0)


def account(
    goal: Mapping[str, Any],
    tokens: int,
    usd: float | None,
    answer: str | None,
    *,
    model: str = "",
) -> dict[str, Any]:
    """The goal after one model call under it.

    Args:
        goal: The active goal.
        tokens: The call's prompt + completion tokens.
        usd: Its estimated cost; None when the model's price is unknown.
        answer: The reply's text when it is an answer (no tool calls), else None.
        model: The model that made the call (named when its price is unknown).

    Returns:
        The goal with the call added; its status is :data:`STATUS_BUDGET` once the
        budget is spent, or at once when a dollar budget cannot be measured (the model
        has no known price: the work stops rather than go on without its limit);
        :data:`STATUS_DONE` / :data:`STATUS_BLOCKED` after an answer with the marker.
    """
    updated = dict(goal)
    updated["spent_tokens"] = int(goal.get("spent_tokens") or 0) + tokens
    updated["spent_usd"] = float(goal.get("spent_usd") or 0.0) + (usd or 0.0)
    marks = _MARKER_RE.findall(answer) if answer is not None else []
    if marks:  # an answer that ends the work, even if it also spent the budget
        updated["status"] = STATUS_DONE if marks[-1] == DONE_MARKER else STATUS_BLOCKED
    elif usd is None and goal_limit(updated).usd:
        updated["status"] = STATUS_BUDGET
        updated[UNPRICED_FIELD] = model or "the model"
    elif goal_limit(updated).reached(*spent(updated)):
        updated["status"] = STATUS_BUDGET
    return updated


def describe(goal: Mapping[str, Any]) -> str:
    """One line for ``/goal``: status, text, budget and spending."""
    limit = goal_limit(goal)
    tokens, usd = spent(goal)
    used = limit.describe(tokens, usd) if limit else f"{tokens:,} tokens, no budget"
    return f"goal ({goal.get('status')}): {goal.get('text')} — used {used}"
