"""``AGENTGRAPH_EDITS=ask`` in the real REPL, in a pseudo-terminal: the diff a question
shows is not printed again when the approved edit runs."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.openai_server import FakeOpenAIServer
from tests.pty_helpers import (
    ENTER,
    PROMPT,
    close_repl,
    pty_env,
    screen_lines,
    spawn_repl,
)

KEY = "sk-test-secret-0123456789abcdef"
QUESTION = "allow? [y/N]"
ADDED = "+the line the model wrote"


def _edit(path: str, old: str, new: str) -> dict:
    args = {"path": path, "old_string": old, "new_string": new}
    return {"tool_calls": [{"name": "edit_file", "arguments": args}]}


def test_an_approved_edit_shows_its_diff_once(home: Path, workspace: Path) -> None:
    (workspace / "notes.txt").write_text("first\nthe old line\nlast\n")
    script = [_edit("notes.txt", "the old line", ADDED[1:]), {"content": "Edited."}]
    with FakeOpenAIServer(script, require_key=KEY) as server:
        env = pty_env(home, server.url, KEY, AGENTGRAPH_EDITS="ask")
        child = spawn_repl([], cwd=workspace, env=env)
        try:
            child.expect_exact(PROMPT)
            child.send("change the old line" + ENTER)
            child.expect_exact(QUESTION)
            child.send("y" + ENTER)
            child.expect_exact("Edited.")
            child.expect_exact(PROMPT)
        finally:
            close_repl(child)
        assert server.violations == []
    assert (workspace / "notes.txt").read_text() == "first\nthe line the model wrote\nlast\n"
    lines = screen_lines(child)
    assert sum(ADDED in line for line in lines) == 1, "\n".join(lines)
    assert sum("-the old line" in line for line in lines) == 1, "\n".join(lines)
    assert any("notes.txt +1 -1 (the diff approved above)" in line for line in lines), lines
