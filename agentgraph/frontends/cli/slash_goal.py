"""``/goal``: a goal the agent keeps working toward, turn after turn (see runtime/goal.py).

``/goal TEXT [--budget N|$X]`` sets it and sends it as the next turn; ``/goal`` shows it;
``/goal clear`` ends it. While it is active, the REPL sends the next turn itself after
each turn that ends (:func:`after_turn`, :func:`take_queued_turn`).
"""

from __future__ import annotations

import re

from rich.markup import escape

from agentgraph.frontends.cli.slash import SUBMIT_KEY, ReplContext, command
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
from agentgraph.session.agent import TurnResult

# ctx.extras keys: the goal's next turn, queued by the turn before; turns the REPL
# started on its own since the user last typed.
NEXT_TURN_KEY = "goal_next_turn"
RUN_LENGTH_KEY = "goal_run_length"

# Field of a goal that ended: its end was told to the user (once, also after a restart).
REPORTED_FIELD = "reported"

_BUDGET_RE = re.compile(r"(?:^|\s)--budget(?:\s+|=)(\S+)\s*$")


@command(
    "goal",
    "/goal [TEXT [--budget N|$X] | clear]",
    "a goal the agent works on across turns until done or its budget is spent",
)
def _goal(ctx: ReplContext, rest: str) -> None:
    if not rest:
        goal = ctx.agent.goal(ctx.thread_id)
        ctx.console.print(describe(goal) if goal else "no goal set", markup=False)
        return
    if rest == "clear":
        had = ctx.agent.goal(ctx.thread_id) is not None
        ctx.agent.set_goal(ctx.thread_id, None)
        ctx.console.print("goal cleared" if had else "no goal set", markup=False)
        return
    text, limit_text = rest, None
    found = _BUDGET_RE.search(rest)
    if found is not None:
        text, limit_text = rest[: found.start()].strip(), found.group(1)
    try:
        limit = parse_budget(limit_text) if limit_text is not None else None
    except ValueError as exc:
        ctx.console.print(f"{exc}; nothing set", markup=False)
        return
    if not text:
        ctx.console.print("usage: /goal TEXT [--budget N|$X]", markup=False)
        return
    if limit is not None and limit.usd:
        from agentgraph.providers.model import check_priced

        check_priced(ctx.agent.settings.model, limit.usd)  # ConfigError: one line
    goal = new_goal(text, limit or goal_limit({}))
    ctx.agent.set_goal(ctx.thread_id, goal)
    budget = f" (budget {goal_limit(goal).text()})" if limit else " (no budget)"
    ctx.console.print(
        f"goal set{budget}: the agent works on it until it says it is done; "
        "Ctrl-C pauses it, /goal clear ends it",
        markup=False,
    )
    ctx.extras[SUBMIT_KEY] = goal_prompt(text)


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
    goal = ctx.agent.goal(ctx.thread_id)
    # ``result`` is the turn's first part when it stopped at approval questions: those
    # are answered, and the turn over, by the time this runs.
    if goal is None or result is None:
        return
    status = goal.get("status")
    limit, used = goal_limit(goal), spent(goal)
    shown = limit.describe(*used) if limit else f"{used[0]:,} tokens"
    if status == STATUS_ACTIVE:
        if ctx.agent.permission_mode(ctx.thread_id) == PLAN_MODE:
            # A plan waits for the user's answer: continuing would only plan again.
            ctx.console.print("[dim]goal: waits while in plan mode (/mode to go on)[/]")
            return
        run = int(ctx.extras.get(RUN_LENGTH_KEY) or 0) + 1
        ctx.extras[RUN_LENGTH_KEY] = run
        if run > CONTINUATIONS_MAX:
            ctx.console.print(
                f"[yellow]goal paused after {CONTINUATIONS_MAX} turns in a row: send a "
                "message to go on, /goal clear to end it[/]"
            )
            return
        ctx.console.print(f"[dim]goal: continuing (used {escape(shown)})[/]")
        # Sent as the next turn (the REPL takes it instead of reading a line).
        ctx.extras[NEXT_TURN_KEY] = CONTINUE_PROMPT
        return
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
        return  # said after the turn it ended in
    ctx.agent.set_goal(ctx.thread_id, {**goal, REPORTED_FIELD: True})
    if status == STATUS_BUDGET and result.stop_reason == STOP_BUDGET:
        return  # the turn's own stop notice named the goal's budget
    ctx.console.print(line, markup=False)
