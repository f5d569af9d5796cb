"""A real MCP server for the tests (the `mcp` SDK's FastMCP), over stdio or streamable HTTP.

python demo.py                 # stdio
python demo.py --http PORT     # streamable HTTP on 127.0.0.1:PORT/mcp
python demo.py --hang          # never answers initialize (a server that hangs at start)
"""

from __future__ import annotations

import os
import sys
import time

from mcp.server.fastmcp import FastMCP


def build(port: int = 8000) -> FastMCP:
    server = FastMCP("demo", host="127.0.0.1", port=port, log_level="ERROR")

    @server.tool()
    def add(a: int, b: int) -> str:
        """Add two integers."""
        return str(a + b)

    @server.tool()
    def env_value(name: str) -> str:
        """The value of an environment variable of the server process ('' when unset)."""
        return os.environ.get(name, "")

    @server.tool()
    def big(chars: int) -> str:
        """A result of `chars` characters."""
        return "x" * chars

    @server.tool()
    def fail(reason: str) -> str:
        """Always fails."""
        raise RuntimeError(reason)

    return server


if __name__ == "__main__":
    if "--hang" in sys.argv:
        time.sleep(3600)
    elif "--http" in sys.argv:
        build(int(sys.argv[sys.argv.index("--http") + 1])).run(transport="streamable-http")
    else:
        build().run()
