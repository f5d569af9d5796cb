"""``/agents``: the subagents this process ran or runs, with status, elapsed time and tokens."""

from __future__ import annotations

from agentgraph.frontends.cli.slash import ReplContext, command
from agentgraph.session.commands import SubagentRecord, subagent_records


def agent_lines(records: list[SubagentRecord]) -> list[str]:
    """One line per subagent, running ones first, then the latest first."""
    ordered = sorted(records, key=lambda r: (r.outcome is not None, -r.started))
    lines = []
    for r in ordered:
        tokens = f" · {r.tokens():,} tokens" if r.tokens() else ""
        where = " (background)" if r.background else ""
        calls = f"{r.tool_calls} tool call" + ("" if r.tool_calls == 1 else "s")
        lines.append(
            f"{r.context_id}{where} {r.status} · {r.elapsed_s():.1f}s · {calls}{tokens} — {r.task}"
        )
    return lines


@command("agents", "/agents", "list the subagents run in this session: status, time, tokens")
def _agents(ctx: ReplContext, _rest: str) -> None:
    records = subagent_records(ctx.agent, ctx.thread_id)
    if not records:
        ctx.console.print("no subagents have run in this session yet", markup=False)
        return
    for line in agent_lines(records):
        ctx.console.print(line, markup=False, soft_wrap=True)
