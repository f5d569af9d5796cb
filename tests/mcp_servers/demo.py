"""A real MCP server for the tests (the `mcp` SDK's FastMCP), over stdio or streamable HTTP.

python demo.py                 # stdio
python demo.py --http PORT     # streamable HTTP on 127.0.0.1:PORT/mcp
python demo.py --hang          # never answers initialize (a server that hangs at start)
python demo.py --wait-for PATH # answers only once PATH exists (a start the test releases)
python demo.py --delay S       # answers after S seconds (a slow start)
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

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


GATE_POLL_S = 0.1


def _option(name: str) -> str | None:
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else None


if __name__ == "__main__":
    # Requests sent meanwhile wait in the stdin pipe, as with a server that is slow to start.
    gate = _option("--wait-for")
    while gate is not None and not Path(gate).exists():
        time.sleep(GATE_POLL_S)
    delay = _option("--delay")
    if delay is not None:
        time.sleep(float(delay))
    if "--hang" in sys.argv:
        time.sleep(3600)
    elif "--http" in sys.argv:
        build(int(sys.argv[sys.argv.index("--http") + 1])).run(transport="streamable-http")
    else:
        build().run()
