"""REPL commands for isolated workspaces: /clean-workspaces."""

from __future__ import annotations

from agentgraph.frontends.cli.slash import ReplContext, command
from agentgraph.session.workspaces import (
    WORKSPACE_MAX_AGE_DAYS,
    remove_workspaces,
    stale_workspaces,
)

CLEAN_SHOWN_MAX = 10
YES_FLAGS = ("--yes", "-y")


@command(
    "clean-workspaces",
    "/clean-workspaces [--yes]",
    f"delete isolated workspaces untouched for {WORKSPACE_MAX_AGE_DAYS}+ days (asks first)",
)
def _clean_workspaces(ctx: ReplContext, rest: str) -> None:
    home = ctx.agent.settings.home
    stale = [s for s in stale_workspaces(home) if s.path.resolve() != ctx.workspace.resolve()]
    if not stale:
        ctx.console.print(
            f"no isolated workspace is older than {WORKSPACE_MAX_AGE_DAYS} days", markup=False
        )
        return
    for item in stale[:CLEAN_SHOWN_MAX]:
        ctx.console.print(f"  {item.path}  ({item.age_days:.0f} days)", markup=False)
    if len(stale) > CLEAN_SHOWN_MAX:
        ctx.console.print(f"  … and {len(stale) - CLEAN_SHOWN_MAX} more", markup=False)
    question = f"delete these {len(stale)} workspace folder(s)?"
    if rest.strip() not in YES_FLAGS and not ctx.confirm(question):
        ctx.console.print(
            "kept them (nothing deleted); `/clean-workspaces --yes` deletes without asking",
            markup=False,
        )
        return
    problems = remove_workspaces(stale, home)
    for line in problems:
        ctx.console.print(line, markup=False)
    ctx.console.print(f"deleted {len(stale) - len(problems)} workspace folder(s)", markup=False)
