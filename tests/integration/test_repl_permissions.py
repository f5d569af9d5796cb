"""Permission modes and rules in the real REPL, in a pseudo-terminal: Shift-Tab and
/mode switch the mode, a plan is accepted before its edit runs, an "always" answer holds
in the next session, a decline's reason reaches the model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.fakes.openai_server import FakeOpenAIServer
from tests.pty_helpers import (
    ENTER,
    PROMPT,
    close_repl,
    expect_on_screen,
    pty_env,
    screen_lines,
    spawn_repl,
)

KEY = "sk-test-secret-0123456789abcdef"
SHIFT_TAB = "\x1b[Z"
QUESTION = "allow? [y/N]"
PLAN_QUESTION = "accept this plan? [y/N]"


def _tool_results(body: dict[str, Any]) -> list[str]:
    return [str(m.get("content")) for m in body["messages"] if m.get("role") == "tool"]


def _user_texts(body: dict[str, Any]) -> str:
    return " ".join(str(m.get("content")) for m in body["messages"] if m.get("role") == "user")


def _call(name: str, **args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": args}]}


def _touch_what_was_asked(body: dict[str, Any]) -> dict[str, Any]:
    """``touch <word>.txt`` for the last word of the latest request; then echo the result."""
    last = body["messages"][-1]
    if last.get("role") == "tool":
        return {"content": "SAW: " + str(last.get("content")).replace("\n", " ")}
    word = str(last.get("content")).split()[-1]
    return _call("run_bash", command=f"touch {word}.txt")


def test_shift_tab_and_mode_switch_the_mode_and_a_resumed_session_keeps_it(
    home: Path, workspace: Path
) -> None:
    with FakeOpenAIServer([{"content": "ok"}], require_key=KEY) as server:
        env = pty_env(home, server.url, KEY)
        child = spawn_repl([], cwd=workspace, env=env)
        try:
            child.expect_exact(PROMPT)
            expect_on_screen(child, "mode: auto (shift-tab to cycle)")
            child.send(SHIFT_TAB)
            expect_on_screen(child, "mode: ask (shift-tab to cycle)")
            child.send(SHIFT_TAB)
            expect_on_screen(child, "mode: accept-edits (shift-tab to cycle)")
            child.send("/mode plan" + ENTER)
            expect_on_screen(child, "mode: plan — read-only")
            child.send("hello" + ENTER)
            child.expect_exact("ok")
            child.expect_exact(PROMPT)
        finally:
            close_repl(child)
        resumed = spawn_repl(["-c"], cwd=workspace, env=env)
        try:
            resumed.expect_exact(PROMPT)
            expect_on_screen(resumed, "mode: plan (shift-tab to cycle)")
        finally:
            close_repl(resumed)
        assert server.violations == []
    # The model was told about the mode in a note before the request.
    (request,) = server.requests
    assert "Permission mode: plan" in _user_texts(request)


def _plan_then_write(body: dict[str, Any]) -> dict[str, Any]:
    results = _tool_results(body)
    if not results:
        return _call("write_file", path="planned.txt", content="planned\n")
    last = results[-1]
    if "plan mode" in last and "did not run" in last:
        return _call("present_plan", plan="1. write planned.txt")
    if last.startswith("The user accepted the plan"):
        return _call("write_file", path="planned.txt", content="planned\n")
    return {"content": "FINISHED after " + last.split()[0]}


def test_a_plan_is_accepted_and_only_then_its_edit_runs(home: Path, workspace: Path) -> None:
    with FakeOpenAIServer([_plan_then_write], require_key=KEY) as server:
        env = pty_env(home, server.url, KEY)
        child = spawn_repl(["--permission-mode", "plan"], cwd=workspace, env=env)
        try:
            child.expect_exact(PROMPT)
            child.send("write planned.txt" + ENTER)
            child.expect_exact(PLAN_QUESTION)
            expect_on_screen(child, "1. write planned.txt")
            assert not (workspace / "planned.txt").exists()
            child.send("y" + ENTER)
            child.expect_exact("FINISHED after")
            child.expect_exact(PROMPT)
            expect_on_screen(child, "mode: accept-edits (shift-tab to cycle)")
        finally:
            close_repl(child)
        assert server.violations == []
    assert (workspace / "planned.txt").read_text() == "planned\n"
    lines = screen_lines(child)
    assert not any(QUESTION in line for line in lines), "\n".join(lines)  # accept-edits


def test_an_always_answer_holds_in_the_next_session_until_revoked(
    home: Path, workspace: Path
) -> None:
    with FakeOpenAIServer([_touch_what_was_asked], require_key=KEY) as server:
        env = pty_env(home, server.url, KEY, AGENTGRAPH_PERMISSION_MODE="ask")
        first = spawn_repl([], cwd=workspace, env=env)
        try:
            first.expect_exact(PROMPT)
            first.send("touch one" + ENTER)
            first.expect_exact(QUESTION)
            expect_on_screen(first, "a = always allow run_bash: touch")
            first.send("a" + ENTER)
            first.expect_exact("SAW:")
            first.expect_exact(PROMPT)
        finally:
            close_repl(first)
        assert (workspace / "one.txt").exists()
        second = spawn_repl([], cwd=workspace, env=env)  # a new session
        try:
            second.expect_exact(PROMPT)
            second.send("touch two" + ENTER)
            second.expect_exact("SAW:")
            second.expect_exact(PROMPT)
            assert (workspace / "two.txt").exists()
            second.send("/permissions" + ENTER)
            expect_on_screen(second, "1. run_bash: touch")
            second.send("/permissions revoke 1" + ENTER)
            expect_on_screen(second, "revoked: run_bash: touch")
            second.send("touch three" + ENTER)
            second.expect_exact(QUESTION)  # asks again
            second.send("n" + ENTER)
            second.expect_exact("SAW:")
            second.expect_exact(PROMPT)
        finally:
            close_repl(second)
        assert server.violations == []
    assert not (workspace / "three.txt").exists()
    lines = screen_lines(second)
    assert sum(QUESTION in line for line in lines) == 1, "\n".join(lines)


def test_a_decline_reason_reaches_the_model_and_the_mode_holds_at_the_question(
    home: Path, workspace: Path
) -> None:
    with FakeOpenAIServer([_touch_what_was_asked], require_key=KEY) as server:
        env = pty_env(home, server.url, KEY, AGENTGRAPH_PERMISSION_MODE="ask")
        child = spawn_repl([], cwd=workspace, env=env)
        try:
            child.expect_exact(PROMPT)
            child.send("touch nope" + ENTER)
            child.expect_exact(QUESTION)
            # The mode stays while a question waits (its answer is matched by position).
            child.send(SHIFT_TAB)
            child.send("n run make instead" + ENTER)
            expect_on_screen(child, "The user said: run make instead")
            child.send("/mode" + ENTER)
            expect_on_screen(child, "mode: ask — commands")
        finally:
            close_repl(child)
        assert server.violations == []
    assert not (workspace / "nope.txt").exists()
