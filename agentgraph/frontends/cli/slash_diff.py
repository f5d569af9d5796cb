"""``/diff``: the session's file changes (or the last turn's), from the undo snapshots."""

from __future__ import annotations

from agentgraph.capabilities.diffs import diff_event, recorded_diffs
from agentgraph.frontends.cli.render import print_diff
from agentgraph.frontends.cli.slash import ReplContext, command

LAST_ARGS = ("last", "--last")


@command("diff", "/diff [last]", "show the files this session changed (last: the last turn's)")
def _diff(ctx: ReplContext, rest: str) -> None:
    arg = rest.strip().lower()
    if arg and arg not in LAST_ARGS:
        ctx.console.print("usage: /diff [last]", markup=False)
        return
    undo = ctx.agent.sessions.undo_store(ctx.thread_id)
    changes = recorded_diffs(undo, ctx.workspace, last_only=bool(arg))
    if not changes:
        ctx.console.print("no file changes recorded in this session", markup=False)
        return
    for change in changes:
        print_diff(ctx.console, diff_event(change, None))
    added = sum(c.added for c in changes)
    removed = sum(c.removed for c in changes)
    scope = "last turn" if arg else "session"
    ctx.console.print(
        f"{len(changes)} file(s) changed in this {scope}, +{added} -{removed}", markup=False
    )
