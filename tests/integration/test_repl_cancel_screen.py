"""Ctrl-C in the middle of a streamed answer, as a terminal shows it."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.openai_server import FakeOpenAIServer
from tests.pty_helpers import (
    CTRL_C,
    ENTER,
    PROMPT,
    close_repl,
    pty_env,
    screen_lines,
    spawn_repl,
)

KEY = "sk-test-secret-0123456789abcdef"
SLOW_WORDS = 120
SLOW_CHUNK_DELAY_S = 0.25


def test_partial_answer_is_on_screen_once_after_ctrl_c(home: Path, workspace: Path) -> None:
    story = " ".join(f"word{i}" for i in range(SLOW_WORDS))
    script = [{"content": story, "chunk_delay_s": SLOW_CHUNK_DELAY_S}]
    with FakeOpenAIServer(script, require_key=KEY) as server:
        child = spawn_repl([], cwd=workspace, env=pty_env(home, server.url, KEY))
        try:
            child.expect_exact(PROMPT)
            child.send("tell me a story" + ENTER)
            child.expect_exact("word5 ")
            child.send(CTRL_C)
            child.expect_exact("cancelled")
            child.expect_exact(PROMPT)
        finally:
            close_repl(child)
    screen = screen_lines(child)
    shown = "\n".join(screen)
    # The partial answer stays on screen, and only once (no copy left by the live region).
    assert sum(line.count("word0 word1") for line in screen) == 1, shown
    assert sum(line.count("word5") for line in screen) == 1, shown
    assert "word119" not in shown
