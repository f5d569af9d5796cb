"""One oversized tool argument grows the store by about its own size, not a multiple.

A model that writes a large file sends the whole content as one streamed argument; it
is stored in the checkpoint's history, the archive and the search index. Any of those
keeping it once per step, per chunk or per compaction would multiply it.
"""

from __future__ import annotations

from pathlib import Path

from tests.cli_helpers import run_cli
from tests.fakes.openai_server import FakeOpenAIServer
from tests.integration.reliability.helpers import agent_env

# Large enough that the argument dominates the store and the next request compacts
# (about 80k tokens against gpt-4o-mini's budget), small enough to stream in seconds.
ARGUMENT_BYTES = 320_000
# The home may hold the argument this many times over (history, archive, index).
STORE_GROWTH_MAX_RATIO = 2.0


def _store_bytes(root: Path) -> int:
    """Bytes under AGENTGRAPH_HOME but the undo snapshots (copies of workspace files)."""
    return sum(
        p.stat().st_size
        for p in root.rglob("*")
        if p.is_file() and "snapshots" not in p.relative_to(root).parts
    )


def test_one_large_write_grows_the_store_by_about_its_size(home: Path, workspace: Path) -> None:
    content = ("y" * 79 + "\n") * (ARGUMENT_BYTES // 80)
    script = [
        {
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": "big.txt", "content": content}}
            ]
        },
        {"content": "written"},
    ]
    with FakeOpenAIServer([{"content": "hi"}], on_exhausted="answer") as server:
        env = agent_env(home, server)
        warm = run_cli(["run", "hello", "--thread", "warm"], cwd=workspace, env=env)
        assert warm.returncode == 0, warm.stderr
        before = _store_bytes(home / ".agentgraph")
        server.add_replies(*script)
        done = run_cli(["run", "write the big file", "--thread", "big"], cwd=workspace, env=env)
        assert done.returncode == 0, done.stderr
    assert (workspace / "big.txt").read_text() == content
    grown = _store_bytes(home / ".agentgraph") - before
    assert grown <= STORE_GROWTH_MAX_RATIO * len(content), (grown, len(content))
