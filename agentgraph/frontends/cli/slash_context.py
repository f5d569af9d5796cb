"""Context commands: /context (usage, breakdown) and /compact [focus]."""

from __future__ import annotations

from rich.markup import escape

from agentgraph.frontends.cli.render import compaction_line, nothing_to_compact_line
from agentgraph.frontends.cli.slash import ReplContext, command
from agentgraph.session.commands import context_view

LEVEL_STYLES = {"ok": "green", "notice": "yellow", "warn": "red", "compact": "bold red"}


@command("context", "/context", "context usage: bar, breakdown, largest messages")
def _context(ctx: ReplContext, _rest: str) -> None:
    view = context_view(ctx.agent, ctx.thread_id)
    style = LEVEL_STYLES.get(str(view.report.get("level")), "white")
    ctx.console.print(f"[{style}]{escape(view.text)}[/]")
    for record in view.compactions:
        ctx.console.print(
            f"[magenta]{record.get('trigger', '?')}: {escape(compaction_line(record))}[/]"
        )


@command("compact", "/compact [focus]", "summarize older history now (optional focus)")
def _compact(ctx: ReplContext, rest: str) -> None:
    with ctx.console.status("compacting…", spinner="dots"):
        record = ctx.agent.compact(ctx.thread_id, focus=rest or None)
    if record is None:
        line = nothing_to_compact_line(ctx.agent.deps.compactor, fallback="nothing to compact yet")
        ctx.console.print(line, markup=False)
        return
    if record.get("fallback"):
        reason = escape(str(record.get("reason")))
        ctx.console.print(f"[yellow]summary failed: {reason}; the session is unchanged[/]")
        return
    ctx.console.print(f"[magenta]{escape(compaction_line(record))}[/]")
