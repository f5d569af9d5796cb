"""An MCP server (the SDK's low-level Server, stdio) that lists hostile tools.

One tool has a 200 KB input schema, one a schema that is not an object, one is fine.
"""

from __future__ import annotations

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

server: Server = Server("hostile")


@server.list_tools()
async def list_tools() -> list[types.Tool]:
    huge = {
        "type": "object",
        "properties": {f"p{i}": {"type": "string", "description": "y" * 200} for i in range(1000)},
    }
    return [
        types.Tool(name="huge_schema", description="too big", inputSchema=huge),
        types.Tool(name="not_object", description="array schema", inputSchema={"type": "array"}),
        types.Tool(
            name="ok tool/with:odd chars",
            description="fine",
            inputSchema={"type": "object", "properties": {}},
        ),
    ]


@server.call_tool()
async def call_tool(name: str, arguments: dict) -> list[types.TextContent]:
    return [types.TextContent(type="text", text=f"called {name}")]


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
