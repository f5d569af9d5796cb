"""``/diff``: the session's file changes (or the last turn's), from the undo snapshots."""

from __future__ import annotations

from agentgraph.frontends.cli.render import print_diff
from agentgraph.frontends.cli.slash import ReplContext, command
from agentgraph.session.commands import session_diffs

LAST_ARGS = ("last", "--last")


@command("diff", "/diff [last]", "show the files this session changed (last: the last turn's)")
def _diff(ctx: ReplContext, rest: str) -> None:
    arg = rest.strip().lower()
    if arg and arg not in LAST_ARGS:
        ctx.console.print("usage: /diff [last]", markup=False)
        return
    events = session_diffs(ctx.agent, ctx.thread_id, ctx.workspace, last_only=bool(arg))
    if not events:
        ctx.console.print("no file changes recorded in this session", markup=False)
        return
    for event in events:
        print_diff(ctx.console, event)
    added = sum(int(e["added"]) for e in events)
    removed = sum(int(e["removed"]) for e in events)
    scope = "last turn" if arg else "session"
    ctx.console.print(
        f"{len(events)} file(s) changed in this {scope}, +{added} -{removed}", markup=False
    )
