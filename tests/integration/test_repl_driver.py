"""The REPL as a daily driver, in a pseudo-terminal against the loopback strict server:
multi-line input, ``/show`` and Ctrl-O, the spinner and the bell, ``/commit``."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage

from tests.fakes.openai_server import FakeOpenAIServer
from tests.pty_helpers import (
    ENTER,
    ESCAPE,
    PROMPT,
    close_repl,
    expect_on_screen,
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


TEST_LINES = 600
SUMMARY = "=== 1 failed, 599 passed in 0.01s ==="
# A test run's output: a banner first, its verdict last, a colour sequence in between.
TEST_RUN = (
    "echo '=== test session starts ==='; "
    f'for i in $(seq 1 {TEST_LINES}); do echo "tests/test_x.py::test_$i PASSED"; done; '
    "printf 'colour \\033[31mred\\033[0m\\n'; "
    f"echo '{SUMMARY}'; exit 1"
)
# A window small enough that the run's output is cut for the history (its tool output
# cap is a share of the budget): /show must still show all of it.
SMALL_WINDOW = "16000"
CTRL_O = "\x0f"


def _run_tests_then_report(body: dict[str, Any]) -> dict[str, Any]:
    """Run the tests once; then say whether the verdict line reached the model."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        content = str(last["content"])
        middle = "tests/test_x.py::test_300 PASSED" in content
        seen = "verdict seen" if SUMMARY in content else "verdict missing"
        return {"content": f"{seen}, middle {'kept' if middle else 'cut'}"}
    return {"tool_calls": [{"name": "run_bash", "arguments": {"command": TEST_RUN}}]}


def test_show_opens_a_folded_output_whole_and_a_command_line_shows_its_verdict(
    home: Path, workspace: Path
) -> None:
    env = pty_env(home, "", KEY, AGENTGRAPH_CONTEXT_WINDOW=SMALL_WINDOW, PAGER="cat")
    with FakeOpenAIServer([_run_tests_then_report], require_key=KEY) as server:
        env["OPENAI_BASE_URL"] = server.url
        child = spawn_repl([], cwd=workspace, env=env)
        try:
            child.expect_exact(PROMPT)
            child.send("run the tests" + ENTER)
            # The model got the verdict (the tail), the middle went to the saved output.
            child.expect_exact("verdict seen, middle cut")
            child.expect_exact(PROMPT)
            # The folded line gives the verdict and the exit status, and its number (the
            # count of lines is of the cut the model got).
            expect_on_screen(child, f"⎿ {SUMMARY} [exit code 1] (+")
            expect_on_screen(child, " lines) [/show 1]")
            child.send("/show" + ENTER)
            child.expect_exact("output 1: run_bash(")
            child.expect_exact(f"— {TEST_LINES + 4} lines")
            child.expect_exact("test_300 PASSED")  # the part the history no longer holds
            child.expect_exact(SUMMARY)
            child.expect_exact(PROMPT)
            child.send("/show 2" + ENTER)
            child.expect_exact("no output 2: this session has outputs 1-1")
            child.expect_exact(PROMPT)
            shown = child.logfile_read.getvalue()
            child.send(CTRL_O)  # the last output, from the prompt
            child.expect_exact("output 1: run_bash(")
            child.expect_exact(SUMMARY)
        finally:
            close_repl(child)
    assert server.violations == []
    # The command's colour codes are shown as text, never sent to the terminal.
    assert "colour \\x1b[31mred\\x1b[0m" in shown
    assert "\x1b[31mred" not in shown


# The long turn: the reply is held, then its call's arguments stream for seconds (the
# REPL shows nothing else meanwhile: only the spinner tells that work goes on).
HOLD_S = 1.5
FILE_CHARS = 800
ARGS_CHUNK_DELAY_S = 0.03  # ~100 chunks of 8 characters: ~3 s
NOTIFY_AFTER_S = "3"
BELL = "\a"
SPINNER_ELAPSED = r"thinking… [1-9]s"
SPINNER_TOKENS = r"thinking… [0-9]+s · [0-9.]+k? tokens"


def _slow_write_then_done(body: dict[str, Any]) -> dict[str, Any]:
    last = body["messages"][-1]
    if last["role"] == "tool":
        return {"content": "written"}
    if "quick" in _last_user_text(body):
        return {"content": "quick answer"}
    content = "x" * (FILE_CHARS - 1) + "\n"
    return {
        "tool_calls": [
            {"name": "write_file", "arguments": {"path": "out.txt", "content": content}}
        ],
        "first_byte_delay_s": HOLD_S,
        "chunk_delay_s": ARGS_CHUNK_DELAY_S,
    }


def test_spinner_shows_elapsed_time_and_tokens_and_a_long_turn_rings_the_bell(
    home: Path, workspace: Path
) -> None:
    env = pty_env(home, "", KEY, AGENTGRAPH_NOTIFY_AFTER_S=NOTIFY_AFTER_S)
    with FakeOpenAIServer([_slow_write_then_done], require_key=KEY) as server:
        env["OPENAI_BASE_URL"] = server.url
        child = spawn_repl([], cwd=workspace, env=env)
        try:
            child.expect_exact(PROMPT)
            child.send("write the file" + ENTER)
            child.expect(SPINNER_ELAPSED)  # while the reply is held: time goes on
            child.expect(SPINNER_TOKENS)  # while the arguments stream: tokens come in
            child.expect_exact("written")
            child.expect_exact(PROMPT)
            long_turn = child.logfile_read.getvalue()
            child.send("quick" + ENTER)
            child.expect_exact("quick answer")
            child.expect_exact(PROMPT)
            quick_turn = child.logfile_read.getvalue()[len(long_turn) :]
        finally:
            close_repl(child)
    assert server.violations == []
    assert (workspace / "out.txt").read_text() == "x" * (FILE_CHARS - 1) + "\n"
    assert long_turn.count(BELL) == 1  # rung once, when the long turn ended
    assert long_turn.rindex(BELL) > long_turn.rindex("written")
    assert BELL not in quick_turn  # a turn shorter than the setting is silent


GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.com",
    "GIT_COMMITTER_NAME": "Test Author",
    "GIT_COMMITTER_EMAIL": "author@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
}
COMMIT_MESSAGE = "Fix add to return the sum\n\nadd subtracted its arguments."
# What the model answers: the message with a control character, which is dropped.
DRAFTED_MESSAGE = "```\nFix add to return the sum\n\nadd subtracted its\x1b arguments.\n```"


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, **GIT_IDENTITY, "HOME": str(repo.parent)}
    done = subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


def _repository(workspace: Path) -> None:
    """A repository with two committed files; the user's own edit of one, uncommitted."""
    _git(workspace, "init", "-q")
    (workspace / "app.py").write_text("def add(a, b):\n    return a - b\n")
    (workspace / "notes.txt").write_text("mine\n")
    _git(workspace, "add", "-A")
    _git(workspace, "commit", "-q", "-m", "initial")
    (workspace / "notes.txt").write_text("mine, edited by me\n")


def _is_commit_request(body: dict[str, Any]) -> bool:
    return any(
        m["role"] == "system" and "git commit messages" in str(m["content"])
        for m in body["messages"]
    )


def _fix_add(body: dict[str, Any], commit_reply: dict[str, Any]) -> dict[str, Any]:
    if _is_commit_request(body):
        return commit_reply
    if body["messages"][-1]["role"] == "tool":
        return {"content": "Fixed."}
    return {
        "tool_calls": [
            {
                "name": "edit_file",
                "arguments": {
                    "path": "app.py",
                    "old_string": "return a - b",
                    "new_string": "return a + b",
                },
            },
            {"name": "write_file", "arguments": {"path": "test_app.py", "content": "import app\n"}},
        ]
    }


def test_commit_drafts_a_message_asks_and_commits_only_the_sessions_files(
    home: Path, workspace: Path
) -> None:
    _repository(workspace)

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        return _fix_add(body, {"content": DRAFTED_MESSAGE})

    env = pty_env(home, "", KEY, **GIT_IDENTITY)
    with FakeOpenAIServer([reply], require_key=KEY) as server:
        env["OPENAI_BASE_URL"] = server.url
        child = spawn_repl([], cwd=workspace, env=env)
        try:
            child.expect_exact(PROMPT)
            child.send("/commit" + ENTER)
            child.expect_exact("commit: nothing to commit: this session has changed no files")
            child.expect_exact(PROMPT)
            child.send("fix add" + ENTER)
            child.expect_exact("Fixed.")
            child.expect_exact(PROMPT)
            child.send("/commit" + ENTER)
            child.expect_exact("commit message (drafted by the model):")
            child.expect_exact("Fix add to return the sum")
            child.expect_exact("app.py +1 -1")
            child.expect_exact("test_app.py +1 -0")
            child.expect_exact("commit these 2 file(s)? [y/N]")
            child.send("n" + ENTER)
            child.expect_exact("not committed")
            child.expect_exact(PROMPT)
            assert _git(workspace, "rev-list", "--count", "HEAD").strip() == "1"
            child.send("/commit" + ENTER)
            child.expect_exact("[y/N]")
            child.send("y" + ENTER)
            child.expect(r"committed [0-9a-f]{7,}: Fix add to return the sum")
            child.expect_exact(PROMPT)
            child.send("/commit" + ENTER)  # all of it is committed now
            child.expect_exact("nothing to commit: the files this session changed are as committed")
            child.expect_exact(PROMPT)
        finally:
            close_repl(child)
    assert server.violations == []
    assert _git(workspace, "log", "-1", "--format=%B").strip() == COMMIT_MESSAGE
    committed = _git(workspace, "show", "--name-only", "--format=", "HEAD").split()
    assert sorted(committed) == ["app.py", "test_app.py"]
    # The user's own change of a file the session never touched stays uncommitted.
    assert _git(workspace, "status", "--porcelain").splitlines() == [" M notes.txt"]
    # The model wrote the message from the diff.
    asked = [r for r in server.requests if _is_commit_request(r)]
    assert len(asked) == 2 and "+    return a + b" in str(asked[0]["messages"])


def test_auto_commit_commits_each_turn_with_a_plain_message_when_the_model_fails(
    home: Path, workspace: Path
) -> None:
    _repository(workspace)
    failing = {"error": {"status": 500, "body": {"error": {"message": "boom"}}}}

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        return _fix_add(body, failing)

    env = pty_env(home, "", KEY, AGENTGRAPH_AUTO_COMMIT="on", **GIT_IDENTITY)
    with FakeOpenAIServer([reply], require_key=KEY) as server:
        env["OPENAI_BASE_URL"] = server.url
        child = spawn_repl([], cwd=workspace, env=env)
        try:
            child.expect_exact(PROMPT)
            child.send("fix add" + ENTER)
            child.expect(r"committed [0-9a-f]{7,}: Update app.py, test_app.py")
            child.expect_exact(PROMPT)
        finally:
            close_repl(child)
    assert _git(workspace, "log", "-1", "--format=%B").strip() == (
        "Update app.py, test_app.py\n\n- app.py: +1 -1\n- test_app.py: +1 -0"
    )
    assert _git(workspace, "status", "--porcelain").splitlines() == [" M notes.txt"]


def test_commit_outside_a_git_repository_is_refused_in_one_line(
    home: Path, workspace: Path
) -> None:
    def reply(body: dict[str, Any]) -> dict[str, Any]:
        return _fix_add(body, {"content": COMMIT_MESSAGE})

    (workspace / "app.py").write_text("def add(a, b):\n    return a - b\n")
    env = pty_env(home, "", KEY, GIT_CEILING_DIRECTORIES=str(workspace.parent))
    with FakeOpenAIServer([reply], require_key=KEY) as server:
        env["OPENAI_BASE_URL"] = server.url
        child = spawn_repl([], cwd=workspace, env=env)
        try:
            child.expect_exact(PROMPT)
            child.send("fix add" + ENTER)
            child.expect_exact("Fixed.")
            child.expect_exact(PROMPT)
            child.send("/commit" + ENTER)
            child.expect_exact(f"commit: {workspace} is not in a git repository")
            child.expect_exact(PROMPT)
        finally:
            close_repl(child)
    assert not any(_is_commit_request(r) for r in server.requests)
