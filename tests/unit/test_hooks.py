"""Hooks (capabilities/hooks.py): real commands, written as small scripts, on Claude Code's
contract: the event as JSON on stdin, exit 2 or JSON ``decision: "block"`` blocks, other
failures are shown and block nothing; timeouts, crashes and missing commands never raise;
a project's hooks run only once the user allowed its settings file."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

from agentgraph.capabilities.hooks import (
    HOOK_OUTPUT_MAX_BYTES,
    OUTCOME_BLOCKED,
    OUTCOME_ERROR,
    OUTCOME_OK,
    POST_TOOL_USE,
    PRE_TOOL_USE,
    HookCommand,
    HookConfig,
    HookMatcher,
    HookRun,
    Hooks,
    HookVerdict,
    kill_running_hooks,
    load_hooks,
    parse_hooks,
    run_hook,
)
from agentgraph.security.settings_sources import allow

PY = sys.executable
# Seconds a timed-out hook may take in all (its timeout plus the kill and the pipes).
TIMEOUT_SLACK_S = 5.0


def _script(tmp_path: Path, name: str, body: str) -> str:
    """A Python hook script; the command line that runs it."""
    path = tmp_path / name
    path.write_text(body)
    return f"{PY} {path}"


def _hooks(event: str, command: str, *, matcher: str | None = None, timeout: float = 10) -> Hooks:
    table = {event: [{"hooks": [{"type": "command", "command": command, "timeout": timeout}]}]}
    if matcher is not None:
        table[event][0]["matcher"] = matcher
    matchers, problems = parse_hooks(table, "test")
    assert problems == []
    return Hooks(HookConfig(tuple(matchers)), {"PATH": "/usr/bin:/bin"})


def _pre(hooks: Hooks, cwd: Path, tool: str = "run_bash", **args: object) -> HookVerdict:
    return hooks.run(
        PRE_TOOL_USE,
        session_id="s1",
        cwd=str(cwd),
        tool_name=tool,
        fields={"tool_input": args or {"command": "rm -rf /"}},
    )


def test_exit_2_blocks_with_stderr_as_the_reason_and_the_event_on_stdin(tmp_path: Path) -> None:
    seen = tmp_path / "seen.json"
    command = _script(
        tmp_path,
        "guard.py",
        "import json, sys\n"
        f"open({str(seen)!r}, 'w').write(sys.stdin.read())\n"
        "print('no deleting here', file=sys.stderr)\n"
        "sys.exit(2)\n",
    )
    verdict = _pre(_hooks(PRE_TOOL_USE, command), tmp_path)
    assert verdict.blocked and verdict.reasons == ["no deleting here"]
    [event] = verdict.events
    assert event["outcome"] == OUTCOME_BLOCKED and event["text"] == "no deleting here"
    payload = json.loads(seen.read_text())
    assert payload == {
        "session_id": "s1",
        "cwd": str(tmp_path),
        "hook_event_name": PRE_TOOL_USE,
        "tool_name": "run_bash",
        "tool_input": {"command": "rm -rf /"},
    }


def test_json_decision_block_and_permission_deny_block(tmp_path: Path) -> None:
    decision = _script(
        tmp_path,
        "decide.py",
        "import json\nprint(json.dumps({'decision': 'block', 'reason': 'use pytest -q'}))\n",
    )
    verdict = _pre(_hooks(PRE_TOOL_USE, decision), tmp_path)
    assert verdict.blocked and verdict.reasons == ["use pytest -q"]
    deny = _script(
        tmp_path,
        "deny.py",
        "import json\nprint(json.dumps({'hookSpecificOutput': {'permissionDecision': 'deny',"
        " 'permissionDecisionReason': 'not on main'}}))\n",
    )
    verdict = _pre(_hooks(PRE_TOOL_USE, deny), tmp_path)
    assert verdict.blocked and verdict.reasons == ["not on main"]


def test_exit_0_shows_stdout_and_blocks_nothing(tmp_path: Path) -> None:
    command = _script(tmp_path, "ok.py", "print('checked')\n")
    verdict = _pre(_hooks(PRE_TOOL_USE, command), tmp_path)
    assert not verdict.blocked
    [event] = verdict.events
    assert (event["outcome"], event["text"], event["exit_code"]) == (OUTCOME_OK, "checked", 0)
    quiet = _script(tmp_path, "quiet.py", "pass\n")
    assert _pre(_hooks(PRE_TOOL_USE, quiet), tmp_path).events == []


def test_a_crash_is_shown_and_blocks_nothing(tmp_path: Path) -> None:
    command = _script(tmp_path, "crash.py", "raise RuntimeError('hook bug')\n")
    verdict = _pre(_hooks(PRE_TOOL_USE, command), tmp_path)
    assert not verdict.blocked
    [event] = verdict.events
    assert event["outcome"] == OUTCOME_ERROR and event["exit_code"] == 1
    assert "RuntimeError: hook bug" in event["text"]


def test_a_missing_command_is_shown_and_blocks_nothing(tmp_path: Path) -> None:
    verdict = _pre(_hooks(PRE_TOOL_USE, "no-such-hook-command-here --x"), tmp_path)
    assert not verdict.blocked
    [event] = verdict.events
    assert event["outcome"] == OUTCOME_ERROR and event["exit_code"] == 127
    assert "not found" in event["text"]


def test_a_missing_workspace_is_shown_and_blocks_nothing(tmp_path: Path) -> None:
    verdict = _pre(_hooks(PRE_TOOL_USE, "true"), tmp_path / "gone")
    [event] = verdict.events
    assert event["outcome"] == OUTCOME_ERROR and "could not start" in event["text"]


def test_a_hanging_hook_and_its_children_are_killed_at_the_timeout(tmp_path: Path) -> None:
    marker = tmp_path / "child-alive"
    command = _script(
        tmp_path,
        "hang.py",
        "import subprocess, sys, time\n"
        f"subprocess.Popen(['sh', '-c', 'sleep 2; touch {marker}'])\n"
        "time.sleep(60)\n",
    )
    start = time.monotonic()
    verdict = _pre(_hooks(PRE_TOOL_USE, command, timeout=0.5), tmp_path)
    assert time.monotonic() - start < TIMEOUT_SLACK_S
    assert not verdict.blocked
    [event] = verdict.events
    assert event["outcome"] == OUTCOME_ERROR and event["text"] == "timed out after 0.5 s"
    time.sleep(2.5)
    assert not marker.exists()  # the hook's own child went with it


def test_a_cancelled_turn_stops_a_running_hook_at_once(tmp_path: Path) -> None:
    command = _script(tmp_path, "slow.py", "import time\ntime.sleep(60)\n")
    runs: list[HookRun] = []
    thread = threading.Thread(
        target=lambda: runs.append(
            run_hook(HookCommand(command, 60, "t"), {}, cwd=str(tmp_path), env={"PATH": "/bin"})
        )
    )
    start = time.monotonic()
    thread.start()
    deadline = start + TIMEOUT_SLACK_S
    while kill_running_hooks() == 0 and time.monotonic() < deadline:
        time.sleep(0.05)  # until the hook has started
    thread.join(TIMEOUT_SLACK_S)
    assert not thread.is_alive() and time.monotonic() - start < TIMEOUT_SLACK_S
    [run] = runs
    assert run.exit_code is not None and run.exit_code < 0
    assert kill_running_hooks() == 0  # nothing left registered


def test_output_is_bounded(tmp_path: Path) -> None:
    command = _script(
        tmp_path, "loud.py", "import sys\nsys.stdout.write('x' * (8 * 1024 * 1024))\n"
    )
    run = run_hook(HookCommand(command, 10, "test"), {}, cwd=str(tmp_path), env={"PATH": "/bin"})
    assert run.exit_code == 0 and len(run.stdout) == HOOK_OUTPUT_MAX_BYTES


def test_a_hook_that_does_not_read_stdin_is_fine(tmp_path: Path) -> None:
    run = run_hook(
        HookCommand("exit 0", 10, "test"), {"big": "y" * 1_000_000}, cwd=str(tmp_path), env={}
    )
    assert run.exit_code == 0 and run.error == ""


def test_matchers_select_tools_by_name(tmp_path: Path) -> None:
    hooks = _hooks(POST_TOOL_USE, "echo ran", matcher="write_file|edit_file")
    for tool, runs in (("edit_file", True), ("write_file", True), ("run_bash", False)):
        verdict = hooks.run(POST_TOOL_USE, session_id="s", cwd=str(tmp_path), tool_name=tool)
        assert bool(verdict.events) is runs, tool
    every = _hooks(POST_TOOL_USE, "echo ran", matcher="*")
    assert every.commands(POST_TOOL_USE, "anything")


def test_broken_config_is_reported_line_by_line_never_raised() -> None:
    table = {
        "NoSuchEvent": [{"hooks": [{"command": "x"}]}],
        PRE_TOOL_USE: [
            {"matcher": "(", "hooks": [{"command": "x"}]},
            {"hooks": [{"type": "http", "command": "x"}, {"command": ""}, "nope"]},
            {"hooks": [{"command": "ok", "timeout": -1}]},
            "not a table",
        ],
        POST_TOOL_USE: "not a list",
    }
    matchers, problems = parse_hooks(table, "cfg")
    assert matchers == [HookMatcher(PRE_TOOL_USE, None, (HookCommand("ok", 60.0, "cfg"),))]
    assert len(problems) == 8 and all(line.startswith("cfg: hooks.") for line in problems)
    assert parse_hooks(["x"], "cfg") == ([], ["cfg: [hooks] must be a table; ignored"])


HOOKS_TOML = '[[hooks.PreToolUse]]\nmatcher = "run_bash"\n[[hooks.PreToolUse.hooks]]\n'


def test_project_hooks_run_only_once_the_user_allowed_the_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(HOOKS_TOML + 'command = "user-hook"\n')
    project = tmp_path / "repo" / ".agentgraph" / "config.toml"
    project.parent.mkdir(parents=True)
    project.write_text(HOOKS_TOML + 'command = "project-hook"\n')

    config = load_hooks(home, project)
    assert [c.command for m in config.matchers for c in m.commands] == ["user-hook"]
    [line] = config.problems
    assert str(project) in line and "agentgraph trust" in line

    allow(project, home)
    config = load_hooks(home, project)
    assert [c.command for m in config.matchers for c in m.commands] == [
        "user-hook",
        "project-hook",
    ]
    assert config.problems == ()

    project.write_text(HOOKS_TOML + 'command = "changed-hook"\n')  # a change asks again
    assert [c.command for m in load_hooks(home, project).matchers for c in m.commands] == [
        "user-hook"
    ]


def test_an_unreadable_config_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("[hooks\n")
    config = load_hooks(tmp_path, tmp_path / "none.toml")
    assert config.matchers == () and len(config.problems) == 1
    assert "not valid TOML" in config.problems[0]


def test_the_redactor_sees_everything_a_hook_printed(tmp_path: Path) -> None:
    command = _script(
        tmp_path, "leak.py", "import sys\nprint('key=SECRET', file=sys.stderr)\nsys.exit(2)\n"
    )
    table = {PRE_TOOL_USE: [{"hooks": [{"command": command}]}]}
    hooks = Hooks(
        HookConfig(tuple(parse_hooks(table, "t")[0])),
        {},
        redact=lambda text: text.replace("SECRET", "[redacted]"),
    )
    verdict = _pre(hooks, tmp_path)
    assert verdict.reasons == ["key=[redacted]"]
    assert verdict.events[0]["text"] == "key=[redacted]"
