"""The REPL as a daily driver, in a pseudo-terminal against the loopback strict server:
multi-line input."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage

from tests.fakes.openai_server import FakeOpenAIServer
from tests.pty_helpers import (
    ENTER,
    ESCAPE,
    PROMPT,
    close_repl,
    only_session,
    pty_env,
    spawn_repl,
    stored_messages,
)

KEY = "sk-test-secret-0123456789abcdef"
# What a terminal reporting Shift-Enter as its own key sends ("CSI u" encoding).
SHIFT_ENTER_CSI_U = "\x1b[13;2u"


def _last_user_text(body: dict[str, Any]) -> str:
    users = [m for m in body["messages"] if m["role"] == "user"]
    content = users[-1]["content"]
    return content if isinstance(content, str) else str(content)


def _echo_lines(body: dict[str, Any]) -> dict[str, Any]:
    """Answer with how many lines the user's message had."""
    return {"content": f"got {len(_last_user_text(body).splitlines())} lines"}


def test_alt_enter_shift_enter_and_a_trailing_backslash_insert_newlines_enter_sends(
    home: Path, workspace: Path
) -> None:
    with FakeOpenAIServer([_echo_lines], require_key=KEY) as server:
        child = spawn_repl([], cwd=workspace, env=pty_env(home, server.url, KEY))
        try:
            child.expect_exact(PROMPT)
            child.send("first line" + ESCAPE + ENTER)  # Alt-Enter
            child.send("second line\\" + ENTER)  # a trailing backslash continues
            child.send("third line" + SHIFT_ENTER_CSI_U)
            child.send("fourth line")
            assert server.requests == []  # nothing was sent yet
            child.send(ENTER)
            child.expect_exact("got 4 lines")
            child.expect_exact(PROMPT)
            # A backslash inside the line is kept, and Enter sends.
            child.send("a \\ b" + ENTER)
            child.expect_exact("got 1 lines")
            child.expect_exact(PROMPT)
        finally:
            close_repl(child)
    assert server.violations == []
    humans = [
        m.content for m in stored_messages(home, only_session(home)) if isinstance(m, HumanMessage)
    ]
    assert humans == ["first line\nsecond line\nthird line\nfourth line", "a \\ b"]
