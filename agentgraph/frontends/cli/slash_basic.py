"""Basic REPL commands: help, exit, sessions (session switching lives in slash_sessions)."""

from __future__ import annotations

from agentgraph.frontends.cli.sessions import sessions_table
from agentgraph.frontends.cli.slash import ReplContext, command, custom_commands_of, help_text


@command("help", "/help", "this help")
def _help(ctx: ReplContext, _rest: str) -> None:
    ctx.console.print(help_text(), markup=False)
    custom = custom_commands_of(ctx)
    if custom:
        width = max(len(name) for name in custom) + 3
        lines = [f"{'/' + name:<{width}}{cmd.help}" for name, cmd in custom.items()]
        ctx.console.print("Custom commands:\n" + "\n".join(lines), markup=False)


@command("exit", "/exit", "leave (Ctrl-D works too)")
def _exit(_ctx: ReplContext, _rest: str) -> str:
    return "exit"


@command("sessions", "/sessions", "list this workspace's sessions")
def _sessions(ctx: ReplContext, _rest: str) -> None:
    rows = ctx.store.index.list_sessions(workspace=str(ctx.workspace))
    ctx.console.print(sessions_table(rows, show_workspace=False) if rows else "no sessions yet")
