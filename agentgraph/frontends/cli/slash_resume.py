"""``/resume [id]``: reopen a session, picked from a list when no id is given."""

from __future__ import annotations

from agentgraph.frontends.cli.picker import pick_session
from agentgraph.frontends.cli.slash import ReplContext, command


@command("resume", "/resume [prefix]", "reopen a session (no prefix: pick from a list)")
def _resume(ctx: ReplContext, rest: str) -> None:
    from agentgraph.frontends.cli.slash_sessions import catalog_of, switch_by_prefix

    if rest:
        switch_by_prefix(ctx, rest)
        return
    rows = catalog_of(ctx).resumable(besides=ctx.thread_id)
    if not rows:
        ctx.console.print("no other session to resume", markup=False)
        return
    info = pick_session(rows, ctx.console)
    if info is None:
        ctx.console.print("cancelled: still in this session", markup=False)
        return
    switch_by_prefix(ctx, info.thread_id)
