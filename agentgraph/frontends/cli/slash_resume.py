"""``/resume [id]``: reopen a session, picked from a list when no id is given."""

from __future__ import annotations

from agentgraph.frontends.cli.picker import pick_session
from agentgraph.frontends.cli.slash import ReplContext, command


@command("resume", "/resume [prefix]", "reopen a session (no prefix: pick from a list)")
def _resume(ctx: ReplContext, rest: str) -> None:
    from agentgraph.frontends.cli.slash_sessions import _load

    if rest:
        _load(ctx, rest)
        return
    rows = [
        info
        for info in ctx.store.index.list_sessions(include_subagents=False)
        if info.thread_id != ctx.thread_id
    ]
    if not rows:
        ctx.console.print("no other session to resume", markup=False)
        return
    info = pick_session(rows, ctx.console)
    if info is None:
        ctx.console.print("cancelled: still in this session", markup=False)
        return
    _load(ctx, info.thread_id)
