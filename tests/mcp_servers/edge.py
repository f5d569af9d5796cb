"""A real MCP server (the SDK's FastMCP, stdio) with tools at the edges of the MCP layer.

Two tools whose names share their first 60 characters (``mcp__edge__`` + the name is
over the 64-character limit providers set), two whose names read the same once
sanitized (``same.name``, ``same_name``) and a tool that never answers.

python edge.py                  # all tools
python edge.py --no-long-names  # without the two long names
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import anyio
from mcp.server.fastmcp import FastMCP

# The shared part of the two long names: with "mcp__edge__" they pass 64 characters.
LONG_PREFIX = "report_quarterly_revenue_by_region_and_product_line_"
LONG_NAMES = (LONG_PREFIX + "for_europe", LONG_PREFIX + "for_america")
# Distinct MCP names that are one provider name once "." becomes "_".
SAME_NAMES = ("same.name", "same_name")
# Longer than any test waits: only the client's time limit ends the call.
HANG_S = 3600


def _reporter(name: str) -> Callable[[], str]:
    def report() -> str:
        return f"called {name}"

    return report


def build(long_names: bool = True) -> FastMCP:
    server = FastMCP("edge", log_level="ERROR")
    for name in (*LONG_NAMES, *SAME_NAMES) if long_names else ():
        server.add_tool(_reporter(name), name=name, description=f"The {name} report.")

    @server.tool()
    async def hang() -> str:
        """Never answers (other calls are still served meanwhile)."""
        await anyio.sleep(HANG_S)
        return "woke up"

    @server.tool()
    def ping() -> str:
        """Answers at once."""
        return "pong"

    return server


if __name__ == "__main__":
    build(long_names="--no-long-names" not in sys.argv).run()
