"""REPL commands for what agentgraph connects to: /mcp."""

from __future__ import annotations

from agentgraph.cli.slash import ReplContext, command
from agentgraph.mcp import McpManager

STATE_STYLE = {"connected": "green", "failed": "red", "pending": "yellow"}


def mcp_lines(manager: McpManager | None) -> list[tuple[str, str]]:
    """``(style, text)`` lines describing every configured server and its tools."""
    if manager is None or not manager.servers:
        return [("dim", "no MCP servers configured (~/.agentgraph/mcp.json, .agentgraph/mcp.json)")]
    lines: list[tuple[str, str]] = []
    for status in manager.servers.values():
        head = f"{status.name}  {status.transport}  {status.state}"
        if status.error:
            head += f": {status.error}"
        lines.append((STATE_STYLE.get(status.state, ""), head))
        lines.append(("dim", f"    from {status.source}"))
        for name in status.tools:
            lines.append(("", f"    {name}"))
        for name in status.skipped:
            lines.append(("yellow", f"    {name} (skipped: schema too large or not an object)"))
    return lines


@command("mcp", "/mcp", "MCP servers: status and tools")
def _mcp(ctx: ReplContext, _rest: str) -> None:
    for style, text in mcp_lines(ctx.agent.mcp):
        ctx.console.print(text, style=style or None, markup=False, highlight=False)
    for problem in ctx.agent.mcp.problems if ctx.agent.mcp is not None else []:
        if "not started" in problem and "allowed" in problem:
            ctx.console.print(problem, style="yellow", markup=False)
