"""The real REPL in a pseudo-terminal against the loopback strict server."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pexpect
from langchain_core.messages import AIMessage, HumanMessage

from agentgraph.runtime.history import agentgraph_kind, validate_history
from tests.cli_helpers import run_cli
from tests.fakes.openai_server import FakeOpenAIServer
from tests.pty_helpers import (
    CTRL_C,
    DOWN,
    ENTER,
    ESCAPE,
    PROMPT,
    TAB,
    close_repl,
    expect_on_screen,
    only_session,
    plain,
    pty_env,
    screen_lines,
    spawn_repl,
    stored_messages,
)

KEY = "sk-test-secret-0123456789abcdef"
# Ctrl-C must give the prompt back within 1 s; the bound is generous for a loaded machine.
CANCEL_PROMPT_BOUND_S = 5.0
SLOW_WORDS = 120
SLOW_CHUNK_DELAY_S = 0.25


def test_ctrl_c_while_streaming_returns_at_once_and_records_the_partial_answer(
    home: Path, workspace: Path
) -> None:
    story = " ".join(f"word{i}" for i in range(SLOW_WORDS))
    script = [
        {"content": story, "chunk_delay_s": SLOW_CHUNK_DELAY_S},
        {"content": "Second answer."},
    ]
    with FakeOpenAIServer(script, require_key=KEY) as server:
        child = spawn_repl([], cwd=workspace, env=pty_env(home, server.url, KEY))
        try:
            child.expect_exact(PROMPT)
            child.send("tell me a story" + ENTER)
            child.expect_exact("thinking…")  # the spinner, from the request to the first token
            child.expect_exact("word0 ")
            child.expect_exact("word5 ")
            child.send(CTRL_C)
            pressed = time.monotonic()
            child.expect_exact("cancelled", timeout=CANCEL_PROMPT_BOUND_S)
            child.expect_exact(PROMPT, timeout=CANCEL_PROMPT_BOUND_S)
            assert time.monotonic() - pressed < CANCEL_PROMPT_BOUND_S
            thread_id = only_session(home)
            # Stored at once, not after a later turn.
            history = stored_messages(home, thread_id)
            assert [type(m) for m in history] == [HumanMessage, AIMessage], history
            partial = history[-1]
            assert agentgraph_kind(partial) == "interrupted"
            assert str(partial.content).startswith("word0 word1 word2 word3 word4 word5")
            assert "word119" not in str(partial.content)
            assert _index_row(home, thread_id).message_count == len(history)  # index in step

            child.send("and now?" + ENTER)
            child.expect_exact("Second answer.")
            child.expect_exact(PROMPT)
        finally:
            close_repl(child)
    history = stored_messages(home, thread_id)
    texts = [(type(m).__name__, str(m.content)[:20]) for m in history]
    assert [t for t, _ in texts] == ["HumanMessage", "AIMessage", "HumanMessage", "AIMessage"]
    assert history[2].content == "and now?" and history[3].content == "Second answer."
    assert validate_history(history) == []
    assert "Error in" not in plain(child.logfile_read.getvalue())  # no callback warnings
    # The model saw the partial answer, in order, in a history the strict server accepts.
    assert server.violations == []
    sent = server.requests[-1]["messages"]
    assert [m["role"] for m in sent if m["role"] != "system"] == [
        "user",
        "assistant",
        "user",
    ]


MARKDOWN_ANSWER = (
    "## Changes\n\nFixed **add** in `app.py`:\n\n```python\ndef add(a, b):\n"
    "    return a + b\n```\n\n- first point\n- second point\n"
)
LONG_FILE_LINES = 100


def _turn(child: pexpect.spawn, prompt: str) -> None:
    """Type ``prompt`` and wait for the turn's status line and the next prompt."""
    child.send(prompt + ENTER)
    child.expect_exact("tokens")  # the status line after the turn
    child.expect_exact(PROMPT)


def test_edits_show_coloured_diffs_and_markdown_is_rendered_once(
    home: Path, workspace: Path
) -> None:
    (workspace / "app.py").write_text("def add(a, b):\n    return a - b\n")
    long_text = "".join(f"line {i}\n" for i in range(LONG_FILE_LINES))
    script = [
        {
            "tool_calls": [
                {
                    "name": "edit_file",
                    "arguments": {
                        "path": "app.py",
                        "old_string": "return a - b",
                        "new_string": "return a + b",
                    },
                },
                {"name": "write_file", "arguments": {"path": "big.txt", "content": long_text}},
            ]
        },
        {"content": MARKDOWN_ANSWER, "chunk_delay_s": 0.02},
    ]
    with FakeOpenAIServer(script, require_key=KEY) as server:
        child = spawn_repl([], cwd=workspace, env=pty_env(home, server.url, KEY))
        try:
            child.expect_exact(PROMPT)
            _turn(child, "fix add")
            turn_output = child.logfile_read.getvalue()
            child.send("/diff" + ENTER)
            child.expect_exact("2 file(s) changed in this session")
            child.expect_exact(PROMPT)
            child.send("/diff last" + ENTER)
            child.expect_exact("in this last turn")
            child.expect_exact(PROMPT)
        finally:
            close_repl(child)
    raw = plain(turn_output)
    # Markdown rendered, not printed raw.
    assert "**add**" not in raw and "## Changes" not in raw and "```" not in raw
    # Diff lines are coloured: red removal, green addition.
    assert "\x1b[31m    -    return a - b" in turn_output
    assert "\x1b[32m    +    return a + b" in turn_output
    screen = screen_lines(child)
    text = "\n".join(screen)
    # Each answer line is on screen exactly once (the live region left no copy).
    for line in ("Changes", "Fixed add in app.py:", "• first point", "• second point"):
        assert sum(1 for s in screen if s.strip() == line) == 1, (line, text)
    assert sum(1 for s in screen if s.strip() == "def add(a, b):") >= 1
    # The long new file is folded in the turn, shown whole by /diff.
    folded = f"… {LONG_FILE_LINES + 3 - 40} more lines (/diff shows them all)"
    assert folded in raw
    assert "+line 99" not in raw
    assert "+line 99" in text
    assert "app.py +1 -1" in text and f"big.txt +{LONG_FILE_LINES} -0" in text
    # The status line: context used, then the turn's tokens, cached tokens and cost
    # (gpt-4o-mini has a price; the test server reports its prompt cache).
    status = next(s for s in screen if "tokens (" in s)
    assert " in · " in status and " out · " in status, status
    assert " cached · $0." in status, status


def _index_row(home: Path, thread_id: str) -> Any:
    from agentgraph.config import Settings
    from agentgraph.persistence import open_store

    settings = Settings(  # type: ignore[call-arg]
        _env_file=None, AGENTGRAPH_HOME=str(home / ".agentgraph"), AGENTGRAPH_MODEL="gpt-4o-mini"
    )
    with open_store(settings) as store:
        return store.index.get(thread_id)


def _sessions(home: Path) -> dict[str, str]:
    """Title → id of the stored top-level sessions."""
    from agentgraph.config import Settings
    from agentgraph.persistence import open_store

    settings = Settings(  # type: ignore[call-arg]
        _env_file=None, AGENTGRAPH_HOME=str(home / ".agentgraph"), AGENTGRAPH_MODEL="gpt-4o-mini"
    )
    with open_store(settings) as store:
        return {s.title: s.thread_id for s in store.index.list_sessions()}


def test_resume_picker_and_tab_completion(home: Path, workspace: Path) -> None:
    (workspace / "notes_for_agent.md").write_text("remember the milk\n")
    script = [{"content": "one"}, {"content": "two"}, {"content": "Noted."}]
    with FakeOpenAIServer(script, require_key=KEY) as server:
        env = pty_env(home, server.url, KEY)
        for task in ("first task", "second task"):
            res = run_cli(["run", task], cwd=workspace, env=env)
            assert res.returncode == 0, res.stderr
        ids = _sessions(home)

        # -r without an id: Esc cancels cleanly.
        child = spawn_repl(["-r"], cwd=workspace, env=env)
        try:
            child.expect_exact("Resume which session?")
            child.expect_exact("first task")
            child.send(ESCAPE)
            child.expect_exact("no session picked")
            child.expect(pexpect.EOF)
        finally:
            child.close()
        assert child.exitstatus == 0

        # -r: ↓ then Enter picks the second row (the older session).
        child = spawn_repl(["-r"], cwd=workspace, env=env)
        try:
            child.expect_exact("Resume which session?")
            child.send(DOWN)
            child.send(ENTER)
            child.expect_exact(f"resumed {ids['first task'][:12]}")
            child.expect_exact(PROMPT)
            # Slash command names complete…
            child.send("/swi" + TAB)
            expect_on_screen(child, "› /switch")
            # …and so do session ids, from a prefix.
            child.send(" " + ids["second task"][:6] + TAB)
            expect_on_screen(child, "› /switch " + ids["second task"][:12])
            child.send(ENTER)
            child.expect_exact(f"resumed {ids['second task'][:12]}")
            child.expect_exact(PROMPT)
            # /resume without an id opens the picker; "1" picks the first row.
            child.send("/resume" + ENTER)
            child.expect_exact("Resume which session?")
            child.send("1")
            child.expect_exact(f"resumed {ids['first task'][:12]}")
            child.expect_exact(PROMPT)
            # @path completes workspace files; the completed mention attaches the file.
            child.send("read @notes" + TAB)
            expect_on_screen(child, "› read @notes_for_agent.md")
            child.send(ENTER)
            child.expect_exact("attached notes_for_agent.md")
            child.expect_exact("Noted.")
            child.expect_exact(PROMPT)
        finally:
            close_repl(child)
    sent = server.requests[-1]["messages"]
    assert "remember the milk" in str(sent[-1]["content"])
    assert next(m["content"] for m in sent if m["role"] == "user") == "first task"


def test_raw_html_in_an_answer_is_shown_not_dropped(home: Path, workspace: Path) -> None:
    """An answer holding an HTML block or inline tags outside code shows them as text
    (rich's renderer drops HTML: the answer was an empty screen)."""
    answer = '<tools>\n{"name": "make_file"}\n</tools>\n\nUse <b>bold</b> here.'
    with FakeOpenAIServer([{"content": answer}], require_key=KEY) as server:
        child = spawn_repl([], cwd=workspace, env=pty_env(home, server.url, KEY))
        try:
            child.expect_exact(PROMPT)
            _turn(child, "what now?")
            shown = "\n".join(screen_lines(child))
        finally:
            close_repl(child)
    assert '<tools> {"name": "make_file"} </tools>' in shown
    assert "Use <b>bold</b> here." in shown
