"""Permission modes: which calls ask or are refused in each mode, the Shift-Tab cycle,
the note that tells the model, the mode an accepted plan switches to, who may set it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from langchain_core.messages import ToolCall

from agentgraph.config import Settings
from agentgraph.runtime.history.kinds import agentgraph_kind, is_user_request
from agentgraph.security.approvals import (
    SANDBOX_SETTING,
    answered_rule,
    approval_request,
    decline_reason,
    declined_text,
    is_always,
    is_approved,
)
from agentgraph.security.permission_rules import Rule
from agentgraph.security.permissions import (
    MODE_CYCLE,
    MODE_KEY,
    MODE_SETTING,
    MODE_TOLD_KEY,
    PLAN_TOLD_KEY,
    check_mode,
    effective_mode,
    next_mode,
    plan_mode_refusal,
    plan_target_mode,
    plan_tool_bound,
    turn_mode_inputs,
)
from agentgraph.security.settings_sources import PROJECT_SETTINGS

WRITE_CALLS = ["run_bash", "write_file", "edit_file", "mcp__git__git_commit"]


def _call(name: str, **args: object) -> ToolCall:
    return ToolCall(name=name, args=dict(args), id=f"id-{name}", type="tool_call")


@pytest.mark.parametrize(
    ("mode", "asked"),
    [
        ("auto", set()),
        ("accept-edits", {"run_bash", "mcp__git__git_commit"}),
        ("ask", {"run_bash", "write_file", "edit_file", "mcp__git__git_commit"}),
    ],
)
def test_each_mode_asks_for_its_tools(
    make_settings: Callable[..., Settings], tmp_path: Path, mode: str, asked: set[str]
) -> None:
    settings = make_settings()
    got = {
        name
        for name in [*WRITE_CALLS, "read_file", "now"]
        if approval_request(
            _call(name, command="ls", path="a.txt"), settings, str(tmp_path), mode=mode
        )
    }
    assert got == asked


def test_the_ask_settings_still_ask_in_auto_mode(
    make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    settings = make_settings(AGENTGRAPH_BASH="ask", AGENTGRAPH_PERMISSION_MODE="auto")
    request = approval_request(_call("run_bash", command="ls"), settings, str(tmp_path))
    assert request is not None and request["setting"] == "AGENTGRAPH_BASH"


def test_memory_changes_ask_when_the_mode_asks(
    make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    settings = make_settings()
    call = _call("memory_save", content="x")
    assert approval_request(call, settings, str(tmp_path), mode="auto") is None
    request = approval_request(call, settings, str(tmp_path), mode="accept-edits")
    assert request is not None and request["setting"] == MODE_SETTING


def test_plan_mode_refuses_every_write_tool_and_lets_reads_run() -> None:
    for name in [*WRITE_CALLS, "memory_save", "memory_delete", "call_subagent"]:
        text = plan_mode_refusal(name, "plan")
        assert text is not None and "plan mode" in text and "present_plan" in text
    for name in ["read_file", "grep", "glob", "list_dir", "todo_write", "present_plan"]:
        assert plan_mode_refusal(name, "plan") is None
    assert plan_mode_refusal("run_bash", "ask") is None


def test_a_rule_removes_the_question_but_never_the_no_sandbox_one(
    make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    settings = make_settings()
    rules = [Rule("run_bash", "pytest")]
    call = _call("run_bash", command="pytest -q")
    assert approval_request(call, settings, str(tmp_path), mode="ask", rules=rules) is None
    unsandboxed = approval_request(
        call, settings, str(tmp_path), mode="auto", rules=rules, unsandboxed="no bwrap"
    )
    assert unsandboxed is not None and unsandboxed["setting"] == SANDBOX_SETTING
    assert "rule" not in unsandboxed  # and "always" cannot be offered for it
    asked = approval_request(
        _call("run_bash", command="pytest; rm x"), settings, str(tmp_path), mode="ask", rules=rules
    )
    assert asked is not None and "rule" not in asked


def test_present_plan_asks_only_in_plan_mode(
    make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    settings = make_settings()
    call = _call("present_plan", plan="do it")
    request = approval_request(call, settings, str(tmp_path), mode="plan")
    assert request is not None and request["plan"] == "do it"
    assert approval_request(call, settings, str(tmp_path), mode="ask") is None
    assert "still in plan mode" in declined_text(request, "smaller steps")
    assert "The user said: smaller steps" in declined_text(request, "smaller steps")


def test_answers_carry_always_and_reasons() -> None:
    assert is_approved("a") and is_always("a") and is_always({"approved": True, "always": True})
    assert not is_always({"approved": False, "always": True}) and not is_always("y")
    assert not is_approved({"approved": False, "reason": "no"})
    assert decline_reason({"approved": False, "reason": "  use make  "}) == "use make"
    assert decline_reason("n use make") == "use make"
    assert decline_reason("n") is None and decline_reason(False) is None
    request = {"rule": {"tool": "run_bash", "pattern": "pytest"}}
    assert answered_rule(request, {"approved": True, "always": True}) == Rule("run_bash", "pytest")
    assert answered_rule(request, True) is None
    assert answered_rule({}, "always") is None


def test_the_cycle_visits_every_mode() -> None:
    seen, mode = [], "auto"
    for _ in MODE_CYCLE:
        mode = next_mode(mode)
        seen.append(mode)
    assert sorted(seen) == sorted(MODE_CYCLE) and seen[-1] == "auto"
    with pytest.raises(ValueError, match="unknown permission mode"):
        check_mode("yolo")


def test_the_session_mode_beats_the_setting_and_the_model_is_told_once(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings(AGENTGRAPH_PERMISSION_MODE="ask")
    assert effective_mode({}, settings) == "ask"
    assert effective_mode({MODE_KEY: "plan"}, settings) == "plan"
    assert effective_mode({MODE_KEY: "bogus"}, settings) == "ask"
    inputs = turn_mode_inputs({MODE_KEY: "plan"}, settings)
    (note,) = inputs["messages"]
    assert inputs[MODE_TOLD_KEY] == "plan" and "plan mode" in note.content
    assert agentgraph_kind(note) == "mode_note" and not is_user_request(note)
    assert turn_mode_inputs({MODE_KEY: "plan", MODE_TOLD_KEY: "plan"}, settings) == {}
    assert turn_mode_inputs({}, make_settings()) == {}  # the default mode: nothing to tell


def test_present_plan_is_bound_once_plan_mode_was_told_and_stays(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings(AGENTGRAPH_PERMISSION_MODE="ask")
    assert PLAN_TOLD_KEY not in turn_mode_inputs({MODE_KEY: "auto"}, settings)
    told = turn_mode_inputs({MODE_KEY: "plan"}, settings)
    assert told[PLAN_TOLD_KEY] is True
    assert not plan_tool_bound({}) and not plan_tool_bound({MODE_TOLD_KEY: "auto"})
    # After the plan was accepted: told of another mode, the tool stays.
    assert plan_tool_bound({PLAN_TOLD_KEY: True, MODE_TOLD_KEY: "accept-edits"})
    # A session told of plan mode before the flag was kept.
    assert plan_tool_bound({MODE_TOLD_KEY: "plan"})


def test_an_accepted_plan_never_switches_back_to_plan() -> None:
    assert plan_target_mode(True) == "accept-edits"
    assert plan_target_mode({"approved": True, "mode": "ask"}) == "ask"
    assert plan_target_mode({"approved": True, "mode": "plan"}) == "accept-edits"


def test_the_mode_is_the_users_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert "permission_mode" not in PROJECT_SETTINGS
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AGENTGRAPH_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("AGENTGRAPH_PERMISSION_MODE", raising=False)
    (tmp_path / ".env").write_text("AGENTGRAPH_PERMISSION_MODE=plan\n")
    (tmp_path / ".agentgraph").mkdir()
    (tmp_path / ".agentgraph" / "config.toml").write_text('permission_mode = "auto"\n')
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "config.toml").write_text('permission_mode = "ask"\n')
    assert Settings().permission_mode == "ask"  # the user's file, not the project's
