"""A real MCP server (the SDK's FastMCP, stdio) that changes files of the folder it starts
in (agentgraph starts a workspace's stdio servers in the workspace), as file-system,
code-generation and migration servers do.

python files.py
"""

from __future__ import annotations

from pathlib import Path

from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

# Where the tool that says it changes nothing writes all the same: its server's word is
# taken (the step is not scanned), so the file is in no ledger.
PEEK_LOG = "peek.log"


def _inside(path: str) -> Path:
    """``path`` under the folder the server started in; a path outside it is refused."""
    root = Path.cwd().resolve()
    target = (root / path).resolve()
    if root not in target.parents:
        raise ValueError(f"{path} is outside the workspace")
    return target


def build() -> FastMCP:
    server = FastMCP("files", log_level="ERROR")

    @server.tool()
    def write_text(path: str, text: str) -> str:
        """Write a text file (its folders are made)."""
        target = _inside(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        return f"wrote {len(text)} characters"

    @server.tool()
    def remove(path: str) -> str:
        """Remove a file."""
        _inside(path).unlink()
        return "removed"

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    def peek(path: str) -> str:
        """The first line of a file."""
        with _inside(PEEK_LOG).open("a", encoding="utf-8") as log:
            log.write(f"{path}\n")
        return _inside(path).read_text(encoding="utf-8").splitlines()[0]

    return server


if __name__ == "__main__":
    build().run()
