"""``/goal`` in the real REPL, in a pseudo-terminal: set, shown, worked on across turns.

A goal is sent once, as a turn; the REPL then sends "continue" turns on its own until
the model ends an answer with the done marker, or the goal's budget (summed over its
turns) is spent. The scripted models are stateless: each reply is a function of the
request alone.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import pexpect

from agentgraph.runtime.goal import CONTINUE_PROMPT, DONE_MARKER
from tests.fakes.openai_server import FakeOpenAIServer
from tests.pty_helpers import (
    CTRL_C,
    ENTER,
    PROMPT,
    PTY_TIMEOUT_S,
    close_repl,
    expect_on_screen,
    pty_env,
    screen_lines,
    spawn_repl,
)

KEY = "sk-test-secret-goal-0123456789abcdef"
GOAL_OPENING = "Goal for this session:"
# Answers the model gives before it says the goal is achieved.
STEPS_BEFORE_DONE = 2
# Reported per call by the budget test's model: three calls pass the budget.
CALL_PROMPT_TOKENS = 1_000
GOAL_BUDGET_TOKENS = 2_500
CALLS_TO_BUDGET = 3
THANKS = "thanks"


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)


def _users(request: dict[str, Any]) -> list[str]:
    return [_text(m["content"]) for m in request["messages"] if m.get("role") == "user"]


def _works_in_steps(request: dict[str, Any]) -> dict[str, Any]:
    """Answer "step N" for each continue request, then the done marker."""
    users = _users(request)
    if users[-1] == THANKS:
        return {"content": "you are welcome"}
    steps = users.count(CONTINUE_PROMPT)
    if steps < STEPS_BEFORE_DONE:
        return {"content": f"worked on it, step {steps}"}
    return {"content": f"all three notes are written\n{DONE_MARKER}"}


def _reads_for_ever(request: dict[str, Any]) -> dict[str, Any]:
    """Read one more file per call, reporting a fixed usage; never done."""
    read = sum(1 for m in request["messages"] if m.get("role") == "tool")
    usage = {"prompt_tokens": CALL_PROMPT_TOKENS, "completion_tokens": 0, "cached_tokens": 0}
    call = {"name": "read_file", "arguments": {"path": f"n{read}.txt"}}
    return {"tool_calls": [call], "usage": usage}


def _chat_requests(server: FakeOpenAIServer) -> list[dict[str, Any]]:
    return [r for r in server.requests if "messages" in (r or {})]


def test_a_goal_is_worked_on_until_done_shown_and_kept(home: Path, workspace: Path) -> None:
    with FakeOpenAIServer([_works_in_steps], on_exhausted="repeat_last") as server:
        env = pty_env(home, server.url, KEY)
        child = spawn_repl([], cwd=workspace, env=env)
        try:
            child.expect_exact(PROMPT)
            child.send("/goal" + ENTER)
            expect_on_screen(child, "no goal set")
            child.send("/goal write three notes" + ENTER)
            expect_on_screen(child, "goal complete (used")
            child.send("/goal" + ENTER)
            expect_on_screen(child, "goal (complete): write three notes")
            child.send(THANKS + ENTER)  # an ordinary turn after the goal ended
            expect_on_screen(child, "you are welcome")
        finally:
            close_repl(child)
        requests = _chat_requests(server)
        # The goal turn, two continue turns, then the user's own: no continue after it.
        assert len(requests) == STEPS_BEFORE_DONE + 2
        last = _users(requests[-1])
        assert sum(1 for text in last if text.startswith(GOAL_OPENING)) == 1  # told once
        assert last.count(CONTINUE_PROMPT) == STEPS_BEFORE_DONE
        assert last[-1] == THANKS
        # The system prompt is the same in every request: the goal never rewrites it.
        systems = {_text(r["messages"][0]["content"]) for r in requests}
        assert len(systems) == 1
        lines = screen_lines(child)
        assert sum("goal complete" in line for line in lines) == 1, "\n".join(lines)
        assert sum("goal: continuing" in line for line in lines) == STEPS_BEFORE_DONE

        # Stored with the session: a reopened REPL shows it.
        child = spawn_repl(["-c"], cwd=workspace, env=env)
        try:
            child.expect_exact(PROMPT)
            child.send("/goal" + ENTER)
            expect_on_screen(child, "goal (complete): write three notes")
            child.send("/goal clear" + ENTER)
            expect_on_screen(child, "goal cleared")
            child.send("/goal" + ENTER)
            expect_on_screen(child, "no goal set")
        finally:
            close_repl(child)


def test_a_goal_stops_when_its_budget_is_spent(home: Path, workspace: Path) -> None:
    for n in range(10):
        (workspace / f"n{n}.txt").write_text(f"note {n}\n")
    with FakeOpenAIServer([_reads_for_ever], on_exhausted="repeat_last") as server:
        child = spawn_repl([], cwd=workspace, env=pty_env(home, server.url, KEY))
        try:
            child.expect_exact(PROMPT)
            child.send(f"/goal read every note --budget {GOAL_BUDGET_TOKENS}" + ENTER)
            expect_on_screen(child, f"goal set (budget {GOAL_BUDGET_TOKENS:,} tokens)")
            expect_on_screen(child, "stopped at the budget")
            child.send("/goal" + ENTER)
            expect_on_screen(child, "goal (budget_limited): read every note")
        finally:
            close_repl(child)
        requests = _chat_requests(server)
    assert len(requests) == CALLS_TO_BUDGET  # stopped at the reply that spent it
    lines = screen_lines(child)
    spent = CALLS_TO_BUDGET * CALL_PROMPT_TOKENS
    stop = [line for line in lines if "stopped at the budget" in line]
    assert len(stop) == 1, "\n".join(lines)
    assert f"the goal's work used {spent:,} of {GOAL_BUDGET_TOKENS:,} tokens" in stop[0]
    assert not any("goal: continuing" in line for line in lines), "\n".join(lines)


def test_a_dollar_goal_budget_needs_a_priced_model(home: Path, workspace: Path) -> None:
    with FakeOpenAIServer([_works_in_steps]) as server:
        env = pty_env(home, server.url, KEY, AGENTGRAPH_MODEL="my-local-model")
        child = spawn_repl([], cwd=workspace, env=env)
        try:
            child.expect_exact(PROMPT)
            child.send("/goal fix the tests --budget $1" + ENTER)
            expect_on_screen(child, "my-local-model has none")
            child.send("/goal" + ENTER)
            expect_on_screen(child, "no goal set")
        finally:
            close_repl(child)
        assert _chat_requests(server) == []


def _edits_then_finishes(request: dict[str, Any]) -> dict[str, Any]:
    """Write a file (asked about), answer without the marker, then finish on "continue"."""
    if not any(m.get("role") == "tool" for m in request["messages"]):
        args = {"path": "notes.txt", "content": "one\n"}
        return {"tool_calls": [{"name": "write_file", "arguments": args}]}
    if CONTINUE_PROMPT not in _users(request):
        return {"content": "wrote the first note"}
    return {"content": f"all notes written\n{DONE_MARKER}"}


def test_a_goal_goes_on_after_an_approval_question(home: Path, workspace: Path) -> None:
    """A turn stopped at an approval question and then answered still ends in the
    goal's next turn."""
    with FakeOpenAIServer([_edits_then_finishes], on_exhausted="repeat_last") as server:
        env = pty_env(home, server.url, KEY, AGENTGRAPH_EDITS="ask")
        child = spawn_repl([], cwd=workspace, env=env)
        try:
            child.expect_exact(PROMPT)
            child.send("/goal write the notes" + ENTER)
            child.expect_exact("allow? [y/N]")
            child.send("y" + ENTER)
            expect_on_screen(child, "goal complete (used")
        finally:
            close_repl(child)
        requests = _chat_requests(server)
    assert (workspace / "notes.txt").read_text() == "one\n"
    assert len(requests) == 3  # the call, the answer, the continue turn's answer


# Seconds a "continue" reply waits before its first byte: long enough to press Ctrl-C in.
SLOW_REPLY_S = 30.0


def _slow_to_continue(request: dict[str, Any]) -> dict[str, Any]:
    """Answer the goal and the user's messages at once; a continue request slowly."""
    if _users(request)[-1] == CONTINUE_PROMPT:
        return {"content": "still working", "first_byte_delay_s": SLOW_REPLY_S}
    return {"content": "started"}


def _wait_for_count(child: Any, text: str, count: int) -> None:
    """Wait until ``text`` is on ``count`` lines of the screen."""
    deadline = time.monotonic() + PTY_TIMEOUT_S
    while sum(text in line for line in screen_lines(child)) < count:
        assert time.monotonic() < deadline, "\n".join(screen_lines(child)[-15:])
        with contextlib.suppress(pexpect.TIMEOUT):
            child.read_nonblocking(size=4096, timeout=0.2)


def test_ctrl_c_pauses_a_goal_until_the_next_message(home: Path, workspace: Path) -> None:
    with FakeOpenAIServer([_slow_to_continue], on_exhausted="repeat_last") as server:
        child = spawn_repl([], cwd=workspace, env=pty_env(home, server.url, KEY))
        try:
            child.expect_exact(PROMPT)
            child.send("/goal tidy the notes" + ENTER)
            expect_on_screen(child, "goal: continuing")
            child.send(CTRL_C)  # during the continue turn
            expect_on_screen(child, "cancelled")
            asked = len(_chat_requests(server))
            child.send("/goal" + ENTER)
            expect_on_screen(child, "goal (active): tidy the notes")
            assert len(_chat_requests(server)) == asked  # no turn sent on its own
            child.send("and the drafts too" + ENTER)  # the next message goes on with it
            expect_on_screen(child, "started")
            _wait_for_count(child, "goal: continuing", 2)
            child.send(CTRL_C)
            _wait_for_count(child, "cancelled", 2)
            child.send("/goal clear" + ENTER)
            expect_on_screen(child, "goal cleared")
        finally:
            close_repl(child)
        users = [_users(r)[-1] for r in _chat_requests(server)]
    assert users[0].startswith(GOAL_OPENING)
    assert users[1:] == [CONTINUE_PROMPT, "and the drafts too", CONTINUE_PROMPT]


def test_a_goal_waits_in_plan_mode(home: Path, workspace: Path) -> None:
    """A plan waits for the user: the REPL sends no continue turn in plan mode."""
    with FakeOpenAIServer([_works_in_steps], on_exhausted="repeat_last") as server:
        child = spawn_repl([], cwd=workspace, env=pty_env(home, server.url, KEY))
        try:
            child.expect_exact(PROMPT)
            child.send("/mode plan" + ENTER)
            expect_on_screen(child, "mode: plan")
            child.send("/goal write three notes" + ENTER)
            expect_on_screen(child, "goal: waits while in plan mode")
            child.send("/goal" + ENTER)
            expect_on_screen(child, "goal (active): write three notes")
        finally:
            close_repl(child)
        requests = _chat_requests(server)
    assert len(requests) == 1
