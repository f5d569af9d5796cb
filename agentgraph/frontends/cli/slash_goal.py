"""``/goal``: a goal the agent keeps working toward, turn after turn (agentgraph/session/goals.py).

``/goal TEXT [--budget N|$X]`` sets it and sends it as the next turn; ``/goal`` shows it;
``/goal clear`` ends it. While it is active, the REPL sends the next turn itself after
each turn that ends (:func:`after_turn`, :func:`take_queued_turn`).
"""

from __future__ import annotations

import re

from rich.markup import escape

from agentgraph.frontends.cli.slash import SUBMIT_KEY, ReplContext, command
from agentgraph.session.agent import TurnResult
from agentgraph.session.goals import (
    CONTINUATIONS_MAX,
    GOAL_CONTINUE,
    GOAL_ENDED,
    GOAL_PLAN_WAIT,
    GoalBudgetRefused,
    GoalTextMissing,
    clear_goal,
    goal_line,
    start_goal,
)
from agentgraph.session.goals import after_turn as goal_after_turn

# ctx.extras keys: the goal's next turn, queued by the turn before; turns the REPL
# started on its own since the user last typed.
NEXT_TURN_KEY = "goal_next_turn"
RUN_LENGTH_KEY = "goal_run_length"

_BUDGET_RE = re.compile(r"(?:^|\s)--budget(?:\s+|=)(\S+)\s*$")


@command(
    "goal",
    "/goal [TEXT [--budget N|$X] | clear]",
    "a goal the agent works on across turns until done or its budget is spent",
)
def _goal(ctx: ReplContext, rest: str) -> None:
    if not rest:
        ctx.console.print(goal_line(ctx.agent, ctx.thread_id) or "no goal set", markup=False)
        return
    if rest == "clear":
        had = clear_goal(ctx.agent, ctx.thread_id)
        ctx.console.print("goal cleared" if had else "no goal set", markup=False)
        return
    text, limit_text = rest, None
    found = _BUDGET_RE.search(rest)
    if found is not None:
        text, limit_text = rest[: found.start()].strip(), found.group(1)
    try:
        started = start_goal(ctx.agent, ctx.thread_id, text, limit_text)
    except GoalBudgetRefused as exc:
        ctx.console.print(f"{exc}; nothing set", markup=False)
        return
    except GoalTextMissing:
        ctx.console.print("usage: /goal TEXT [--budget N|$X]", markup=False)
        return
    budget = f" (budget {started.budget})" if started.budget is not None else " (no budget)"
    ctx.console.print(
        f"goal set{budget}: the agent works on it until it says it is done; "
        "Ctrl-C pauses it, /goal clear ends it",
        markup=False,
    )
    ctx.extras[SUBMIT_KEY] = started.prompt


def take_queued_turn(ctx: ReplContext) -> str:
    """The goal's next turn, if the last turn queued one; else the user types, and the
    count of turns started on their own starts again."""
    queued = str(ctx.extras.pop(NEXT_TURN_KEY, "") or "")
    if not queued:
        ctx.extras[RUN_LENGTH_KEY] = 0
    return queued


def after_turn(ctx: ReplContext, result: TurnResult | None) -> None:
    """After a turn that ended: queue the goal's next turn while it is active, or say in
    one line how it ended (a spent budget that stopped the turn said so already)."""
    # ``result`` is the turn's first part when it stopped at approval questions: those
    # are answered, and the turn over, by the time this runs.
    if result is None:
        return
    step = goal_after_turn(ctx.agent, ctx.thread_id, result.stop_reason)
    if step.action == GOAL_PLAN_WAIT:
        # A plan waits for the user's answer: continuing would only plan again.
        ctx.console.print("[dim]goal: waits while in plan mode (/mode to go on)[/]")
        return
    if step.action == GOAL_CONTINUE:
        run = int(ctx.extras.get(RUN_LENGTH_KEY) or 0) + 1
        ctx.extras[RUN_LENGTH_KEY] = run
        if run > CONTINUATIONS_MAX:
            ctx.console.print(
                f"[yellow]goal paused after {CONTINUATIONS_MAX} turns in a row: send a "
                "message to go on, /goal clear to end it[/]"
            )
            return
        ctx.console.print(f"[dim]goal: continuing (used {escape(step.used)})[/]")
        # Sent as the next turn (the REPL takes it instead of reading a line).
        ctx.extras[NEXT_TURN_KEY] = step.prompt
        return
    if step.action == GOAL_ENDED:
        ctx.console.print(step.line, markup=False)
