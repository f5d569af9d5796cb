"""A session's goal: set, show and clear it, and what it asks for after each turn.

The goal itself (its record in the session state, its budget and how turns are charged
to it) is the runtime's (``agentgraph/runtime/goal.py``); these are the operations a
front end offers on it. The front end keeps the count of turns it started on its own
and stops at :data:`CONTINUATIONS_MAX` in a row.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentgraph.errors import AgentGraphError
from agentgraph.providers.model import check_priced
from agentgraph.runtime.goal import (
    CONTINUATIONS_MAX,
    CONTINUE_PROMPT,
    STATUS_ACTIVE,
    STATUS_BLOCKED,
    STATUS_BUDGET,
    STATUS_DONE,
    UNPRICED_FIELD,
    describe,
    goal_limit,
    goal_prompt,
    new_goal,
    spent,
)
from agentgraph.runtime.nodes.limits import STOP_BUDGET
from agentgraph.runtime.spend import parse_budget
from agentgraph.security.permissions import PLAN_MODE
from agentgraph.session.agent import Agent

__all__ = [
    "CONTINUATIONS_MAX",
    "GOAL_CONTINUE",
    "GOAL_ENDED",
    "GOAL_IDLE",
    "GOAL_PLAN_WAIT",
    "GoalBudgetRefused",
    "GoalNext",
    "GoalStarted",
    "GoalTextMissing",
    "after_turn",
    "clear_goal",
    "goal_line",
    "start_goal",
]

# Field of a goal that ended: its end was told to the user (once, also after a restart).
REPORTED_FIELD = "reported"

# What a goal asks for after a turn (GoalNext.action).
GOAL_IDLE = "idle"
"""No goal, or nothing (more) to say about it."""
GOAL_PLAN_WAIT = "plan_wait"
"""Active, but the session is in plan mode: a plan waits for the user's answer."""
GOAL_CONTINUE = "continue"
"""Active: send :attr:`GoalNext.prompt` as the next turn."""
GOAL_ENDED = "ended"
"""It ended (done, blocked or its budget spent): say :attr:`GoalNext.line`, once."""


class GoalTextMissing(AgentGraphError):
    """A goal without its text (only a budget was given)."""


class GoalBudgetRefused(AgentGraphError):
    """A budget that cannot be read; the message says why."""


@dataclass(frozen=True)
class GoalStarted:
    """A goal just set.

    Attributes:
        prompt: The turn that starts the work on it.
        budget: Its budget as written back (``50,000 tokens``, ``$2.00`` …); None: none.
    """

    prompt: str
    budget: str | None


@dataclass(frozen=True)
class GoalNext:
    """What the session's goal asks for after a turn ended.

    Attributes:
        action: One of :data:`GOAL_IDLE`, :data:`GOAL_PLAN_WAIT`, :data:`GOAL_CONTINUE`,
            :data:`GOAL_ENDED`.
        used: What the goal spent so far, as text.
        prompt: With :data:`GOAL_CONTINUE`: the next turn to send.
        line: With :data:`GOAL_ENDED`: how it ended, in one line.
    """

    action: str
    used: str = ""
    prompt: str = ""
    line: str = ""


def goal_line(agent: Agent, thread_id: str) -> str | None:
    """One line on the session's goal (status, text, budget, spending); None: no goal."""
    goal = agent.goal(thread_id)
    return describe(goal) if goal else None


def clear_goal(agent: Agent, thread_id: str) -> bool:
    """End the session's goal; whether there was one."""
    had = agent.goal(thread_id) is not None
    agent.set_goal(thread_id, None)
    return had


def start_goal(agent: Agent, thread_id: str, text: str, budget_text: str | None) -> GoalStarted:
    """Set the session's goal to ``text`` with the budget ``budget_text`` (none: None).

    Raises:
        GoalBudgetRefused: the budget cannot be read (checked first).
        GoalTextMissing: ``text`` is empty.
        ConfigError: a dollar budget for a model whose price is unknown.
    """
    try:
        limit = parse_budget(budget_text) if budget_text is not None else None
    except ValueError as exc:
        raise GoalBudgetRefused(str(exc)) from exc
    if not text:
        raise GoalTextMissing("a goal needs its text")
    if limit is not None and limit.usd:
        check_priced(agent.settings.model, limit.usd)
    goal = new_goal(text, limit or goal_limit({}))
    agent.set_goal(thread_id, goal)
    return GoalStarted(goal_prompt(text), goal_limit(goal).text() if limit else None)


def after_turn(agent: Agent, thread_id: str, stop_reason: str | None) -> GoalNext:
    """What the session's goal asks for now that a turn ended with ``stop_reason``.

    A goal that ended is reported once (also after a restart): the goal records that it
    was; a spent budget that stopped the turn itself was told by the turn's stop notice.
    """
    goal = agent.goal(thread_id)
    if goal is None:
        return GoalNext(GOAL_IDLE)
    status = goal.get("status")
    limit, used = goal_limit(goal), spent(goal)
    shown = limit.describe(*used) if limit else f"{used[0]:,} tokens"
    if status == STATUS_ACTIVE:
        if agent.permission_mode(thread_id) == PLAN_MODE:
            return GoalNext(GOAL_PLAN_WAIT, shown)
        return GoalNext(GOAL_CONTINUE, shown, prompt=CONTINUE_PROMPT)
    unpriced = goal.get(UNPRICED_FIELD)
    ended = {
        STATUS_DONE: f"goal complete (used {shown})",
        STATUS_BLOCKED: f"goal blocked: the agent needs you (used {shown})",
        STATUS_BUDGET: (
            f"goal stopped: its dollar budget cannot be measured ({unpriced} has no known price)"
            if unpriced
            else f"goal stopped: its budget is spent ({shown})"
        ),
    }
    line = ended.get(str(status))
    if line is None or goal.get(REPORTED_FIELD):
        return GoalNext(GOAL_IDLE, shown)
    agent.set_goal(thread_id, {**goal, REPORTED_FIELD: True})
    if status == STATUS_BUDGET and stop_reason == STOP_BUDGET:
        return GoalNext(GOAL_IDLE, shown)
    return GoalNext(GOAL_ENDED, shown, line=line)
