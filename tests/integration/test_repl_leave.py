"""Leaving the REPL (Ctrl-D or /exit), in a real pseudo-terminal: how to come back, also
to a session the model never answered (kept with its prompt, as ``run`` keeps it)."""

from __future__ import annotations

import json
from pathlib import Path

import pexpect

from tests.cli_helpers import cli_env, run_cli
from tests.fakes.openai_server import FakeOpenAIServer
from tests.pty_helpers import ENTER, PROMPT, only_session, plain, pty_env, spawn_repl

KEY = "sk-test-secret-0123456789abcdef"
# The discard port: nothing listens there, the connection is refused at once.
REFUSED_URL = "http://127.0.0.1:9/v1"


def _leave(child: pexpect.spawn, how: str) -> str:
    """Leave with Ctrl-D (``eof``) or ``/exit``; everything the REPL printed, plain."""
    if how == "eof":
        child.sendeof()
    else:
        child.send("/exit" + ENTER)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    return plain(child.logfile_read.getvalue())


def test_ctrl_d_and_exit_both_say_how_to_resume(home: Path, workspace: Path) -> None:
    script = [{"content": "Hello there."}, {"content": "Still here."}]
    with FakeOpenAIServer(script, require_key=KEY) as server:
        env = pty_env(home, server.url, KEY)
        child = spawn_repl([], cwd=workspace, env=env)
        child.expect_exact(PROMPT)
        child.send("hi" + ENTER)
        child.expect_exact("Hello there.")
        child.expect_exact(PROMPT)
        by_eof = _leave(child, "eof")
        thread_id = only_session(home)
        assert f"resume this session with: agentgraph -r {thread_id}" in by_eof

        child = spawn_repl(["-c"], cwd=workspace, env=env)
        child.expect_exact(PROMPT)
        child.send("again" + ENTER)
        child.expect_exact("Still here.")
        child.expect_exact(PROMPT)
        by_exit = _leave(child, "exit")
        assert f"resume this session with: agentgraph -r {thread_id}" in by_exit


def test_a_session_the_model_never_answered_is_kept_with_its_prompt_and_resumes(
    home: Path, workspace: Path
) -> None:
    """As with ``agentgraph run`` (tests/integration/test_failed_first_turn.py): the
    prompt sent is never thrown away, and the session resumes with it."""
    env = pty_env(home, REFUSED_URL, KEY)
    child = spawn_repl([], cwd=workspace, env=env)
    child.expect_exact(PROMPT)
    child.send("remember the blue door" + ENTER)
    child.expect_exact("cannot reach the model endpoint")
    child.expect_exact(PROMPT)
    shown = _leave(child, "eof")
    thread_id = only_session(home)
    assert f"resume this session with: agentgraph -r {thread_id}" in shown
    listed = run_cli(["sessions", "list", "--all", "--json"], cwd=workspace, env=cli_env(home))
    assert listed.returncode == 0, listed.stderr
    [row] = json.loads(listed.stdout)
    assert (row["title"], row["message_count"]) == ("remember the blue door", 1)

    with FakeOpenAIServer([{"content": "The blue door."}], require_key=KEY) as server:
        child = spawn_repl(["-r", thread_id], cwd=workspace, env=pty_env(home, server.url, KEY))
        child.expect_exact(PROMPT)
        child.send("what did I ask you to remember?" + ENTER)
        child.expect_exact("The blue door.")
        child.expect_exact(PROMPT)
        _leave(child, "exit")
        users = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "user"]
    assert users == ["remember the blue door", "what did I ask you to remember?"]
