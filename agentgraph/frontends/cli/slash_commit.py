"""``/commit``: commit the files this session changed, with a message the model drafts.

What is committed, how the message is drafted and the commit itself are the session
layer's (``agentgraph/session/commits.py``); the REPL shows the message and the files
and asks first. With ``AGENTGRAPH_AUTO_COMMIT=on`` each turn that changed files ends
with a commit of those files, unasked (aider's habit).
"""

from __future__ import annotations

import contextlib

from agentgraph.frontends.cli.slash import ReplContext, command
from agentgraph.session.commands import visible
from agentgraph.session.commits import (
    CommitRefused,
    PlannedCommit,
    auto_commit_due,
    commit,
    draft_message,
    plan_commit,
)
from agentgraph.session.commits import turn_mark as _turn_mark


def _plan(ctx: ReplContext, *, last_turn: bool = False) -> PlannedCommit:
    return plan_commit(ctx.agent, ctx.thread_id, ctx.workspace, last_turn=last_turn)


def _draft(ctx: ReplContext, plan: PlannedCommit) -> tuple[str, bool]:
    """The drafted message (a spinner while the model writes it, on a terminal)."""
    waiting = (
        ctx.console.status("drafting the commit message…")
        if ctx.console.is_terminal
        else contextlib.nullcontext()
    )
    with waiting:
        return draft_message(ctx.agent, plan)


def _print_plan(ctx: ReplContext, plan: PlannedCommit, message: str, drafted: bool) -> None:
    ctx.console.print(
        f"commit message ({'drafted by the model' if drafted else 'the model gave none'}):",
        markup=False,
    )
    for line in message.splitlines() or [""]:
        ctx.console.print(f"  {line}", markup=False, highlight=False)
    ctx.console.print(f"files ({len(plan.paths)}):", markup=False)
    for d in plan.diffs:
        line = f"  {visible(d.path)} +{d.added} -{d.removed}"
        ctx.console.print(line, markup=False, highlight=False)


def _subject(message: str) -> str:
    return message.splitlines()[0] if message else ""


@command("commit", "/commit", "commit the files this session changed (drafts the message, asks)")
def _commit(ctx: ReplContext, rest: str) -> None:
    if rest.strip():
        ctx.console.print("usage: /commit (the message is drafted for you)", markup=False)
        return
    try:
        plan = _plan(ctx)
        message, drafted = _draft(ctx, plan)
        _print_plan(ctx, plan, message, drafted)
        if not ctx.confirm(f"commit these {len(plan.paths)} file(s)?"):
            ctx.console.print("not committed", markup=False)
            return
        short = commit(plan, message)
    except CommitRefused as exc:
        ctx.console.print(f"commit: {exc}", markup=False)
        return
    ctx.console.print(f"committed {short}: {_subject(message)}", markup=False)


def turn_mark(ctx: ReplContext) -> float | None:
    """When the session's last file-changing turn was recorded (taken before a turn)."""
    return _turn_mark(ctx.agent, ctx.thread_id)


def auto_commit(ctx: ReplContext, mark: float | None) -> None:
    """With ``AGENTGRAPH_AUTO_COMMIT=on``: commit what the turn that just ended changed.

    Args:
        ctx: The REPL's context.
        mark: :func:`turn_mark` before the turn (no new record: the turn changed nothing).
    """
    if not auto_commit_due(ctx.agent, ctx.thread_id, mark):
        return
    try:
        plan = _plan(ctx, last_turn=True)
        message, _ = _draft(ctx, plan)
        short = commit(plan, message)
    except CommitRefused as exc:
        ctx.console.print(f"auto-commit: {exc}", markup=False)
        return
    ctx.console.print(f"committed {short}: {_subject(message)}", markup=False)
