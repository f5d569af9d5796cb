"""Approvals as LangGraph interrupts: shell commands and file edits the user must allow.

With ``AGENTGRAPH_BASH=ask`` every ``run_bash`` call, with ``AGENTGRAPH_EDITS=ask``
every ``write_file`` / ``edit_file`` call, and with ``AGENTGRAPH_MEMORY=ask`` (or
``auto`` while any of these asks) every ``memory_save`` / ``memory_delete`` call, needs
the user's approval. The tools node
asks before it runs any tool of the step: for each such call, in call order, it calls
LangGraph's ``interrupt()`` with an :func:`approval_request` payload. The run stops
there and is checkpointed; whoever drives the graph (the REPL, a ``langgraph dev``
client) shows the question and resumes with ``Command(resume={interrupt_id: answer})``.
Only then do the step's tools run, each once: a declined call gets an error result the
model can read, an approved one runs. When every call of a step that needs approval is
an ``edit_file`` that cannot apply (no such file, ``old_string`` not found or ambiguous),
nothing is asked: each gets the tool's own error and nothing changes. Otherwise every
such call is asked: LangGraph gives resume answers to the interrupts by position, so
which calls are asked must not depend on files that may change while a question waits.

The session's permission mode (``agentgraph/security/permissions.py``) adds questions (``ask``,
``accept-edits``) or refuses write tools outright (``plan``); ``present_plan`` asks the
user to accept a plan. "Always allow" rules (``agentgraph/security/permission_rules.py``) remove
the question for the calls they match. An answer may carry more than yes or no:
``{"approved": true, "always": true}`` (or ``"a"``) also stores the question's proposed
``rule``; ``{"approved": false, "reason": "…"}`` (or ``"n <reason>"``) hands the reason
to the model with the refusal. An answer that names its call (``"tool_call_id"``, as
the REPL's do) and reaches another call's question declines it: answers are matched to
a step's questions by position, and which calls ask may change while one waits (the
mode, a rule added elsewhere).

Because the question lives in the checkpoint, a session killed while it waits asks
the same question when it is resumed. A run that cannot ask (``agentgraph run``,
subagents: ``RunContext.can_ask`` is False) declines such calls with a message that
says why.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.messages import ToolCall
from pydantic import TypeAdapter, ValidationError

from agentgraph.capabilities.tools.base import ToolError, format_tool_error
from agentgraph.capabilities.tools.spec import tool_spec
from agentgraph.capabilities.tools.workspace import display_path, resolve_in_workspace
from agentgraph.config import Settings
from agentgraph.security.permission_rules import Rule, proposed_rule, rule_matches
from agentgraph.security.permissions import (
    ACCEPT_EDITS_MODE,
    ASK_MODE,
    MODE_SETTING,
    PLAN_MODE,
    PRESENT_PLAN_TOOL,
    mode_asks,
)

if TYPE_CHECKING:
    from agentgraph.capabilities.tools.files import PlannedEdit

APPROVAL_TYPE = "approval"
APPROVE_ANSWERS = frozenset({"y", "yes", "approve", "approved", "allow", "ok", "a", "always"})
# Answers that approve and also store the question's proposed rule.
ALWAYS_ANSWERS = frozenset({"a", "always"})
DECLINE_WORDS = frozenset({"n", "no"})
# A reason longer than this reaches the model cut.
DECLINE_REASON_MAX_CHARS = 2_000
# A diff shown with an approval question is a preview: bounded, never the whole file.
APPROVAL_DIFF_MAX_LINES = 400
APPROVAL_DIFF_MAX_CHARS = 20_000
APPROVAL_DIFF_SOURCE_MAX_BYTES = 2 * 1024 * 1024
# The setting named when a command needs approval because no sandbox could start.
SANDBOX_SETTING = "AGENTGRAPH_SANDBOX"
# MCP tools are named mcp__<server>__<tool> (agentgraph/capabilities/mcp.py).
MCP_TOOL_PREFIX = "mcp__"
MCP_ARGS_SHOWN_MAX_CHARS = 2_000
# Its action "apply" writes an isolated subagent's held changes
# (agentgraph/capabilities/subagent_worktrees.py).
SUBAGENT_TASK_TOOL = "subagent_task"


def needs_approval(
    name: str, settings: Settings, *, unsandboxed: bool = False, mode: str | None = None
) -> str | None:
    """The setting that makes tool ``name`` need approval, or None when it does not.

    Args:
        name: The tool.
        settings: ``bash``, ``edits`` and ``mcp_tools`` (each ``ask`` asks in every mode).
        unsandboxed: Commands would run without the sandbox it should have had
            (``AGENTGRAPH_SANDBOX=auto`` where it cannot start): they need approval.
        mode: The session's permission mode (None: ``settings.permission_mode``).
    """
    mode = mode or settings.permission_mode
    kind = tool_spec(name).approval
    if kind == "shell" and settings.bash == "ask":
        return "AGENTGRAPH_BASH"
    if kind == "shell" and unsandboxed:
        return SANDBOX_SETTING
    if kind == "edit" and settings.edits == "ask":
        return "AGENTGRAPH_EDITS"
    if name.startswith(MCP_TOOL_PREFIX) and settings.mcp_tools == "ask":
        return "AGENTGRAPH_MCP_TOOLS"
    if mode_asks(name, mode):
        return MODE_SETTING
    # Memories change what the prompt of every later session in the workspace holds.
    if kind == "memory":
        if settings.memory == "auto" and mode in (ASK_MODE, ACCEPT_EDITS_MODE):
            return settings.memory_approval or MODE_SETTING
        return settings.memory_approval
    return None


def _bounded(text: str, redact: Callable[[str], str] | None = None) -> str:
    """``text`` (redacted first, when ``redact`` is given) cut to
    :data:`APPROVAL_DIFF_MAX_LINES` and :data:`APPROVAL_DIFF_MAX_CHARS`."""
    if redact is not None:
        text = redact(text)
    lines = text.splitlines(keepends=True)
    if len(lines) > APPROVAL_DIFF_MAX_LINES:
        more = len(lines) - APPROVAL_DIFF_MAX_LINES
        text = "".join(lines[:APPROVAL_DIFF_MAX_LINES]) + f"… ({more} more diff lines)\n"
    if len(text) > APPROVAL_DIFF_MAX_CHARS:
        text = text[:APPROVAL_DIFF_MAX_CHARS] + "… (diff cut)\n"
    return text


def _current_text(workspace: str, path: str) -> tuple[str, str] | None:
    """``(shown path, current text)`` of a file the call would change; None if unknowable."""
    try:
        real = resolve_in_workspace(workspace, path)
    except ToolError:
        return None  # the tool itself will refuse the path
    shown = display_path(workspace, real)
    if not os.path.exists(real):
        return shown, ""
    try:
        if os.path.getsize(real) > APPROVAL_DIFF_SOURCE_MAX_BYTES:
            return None
        with open(real, encoding="utf-8") as handle:
            return shown, handle.read()
    except (OSError, UnicodeDecodeError):
        return None


def edit_preview(
    name: str,
    args: Mapping[str, Any],
    workspace: str,
    redact: Callable[[str], str] | None = None,
) -> str | None:
    """The unified diff ``write_file`` / ``edit_file`` would make, or None if unknown.

    Args:
        name: ``write_file`` or ``edit_file``.
        args: The call's arguments.
        workspace: The run's workspace.
        redact: Applied to the diff before it is cut to its size.

    Returns:
        A bounded unified diff (``--- a/path`` / ``+++ b/path``), or None when the
        file cannot be read or the edit would not apply (the tool reports why).
    """
    path = args.get("path")
    if not isinstance(path, str):
        return None
    found = _current_text(workspace, path)
    if found is None:
        return None
    shown, before = found
    if name == "write_file":
        after = args.get("content")
        if not isinstance(after, str):
            return None
    else:
        plan = _planned_edit(args, workspace)
        if plan is None or isinstance(plan, str):
            return None
        shown, before, after = plan.shown, plan.before, plan.after
    diff = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"a/{shown}",
        tofile=f"b/{shown}",
    )
    return _bounded("".join(line if line.endswith("\n") else line + "\n" for line in diff), redact)


def _planned_edit(args: Mapping[str, Any], workspace: str) -> PlannedEdit | str | None:
    """An ``edit_file`` call's checked plan, its error text, or None for bad arguments."""
    from agentgraph.capabilities.tools.files import (
        plan_edit,  # the file tools load LangChain's tools
    )

    path, old, new = args.get("path"), args.get("old_string"), args.get("new_string")
    if not isinstance(path, str) or not isinstance(old, str) or not isinstance(new, str):
        return None  # argument validation answers the call
    try:
        # Read as the tool's schema reads it: "false" is False.
        replace_all = TypeAdapter(bool).validate_python(args.get("replace_all", False))
    except ValidationError:
        return None  # argument validation answers the call
    try:
        return plan_edit(workspace, path, old, new, replace_all)
    except ToolError as exc:
        return format_tool_error(exc)


def unappliable_edit(call: ToolCall, workspace: str) -> str | None:
    """The error an ``edit_file`` call would fail with, found without asking or writing.

    Args:
        call: A tool call of the model.
        workspace: The run's workspace.

    Returns:
        The tool's own error text (``Error: …``); None when the call is not an edit
        that fails its checks.
    """
    if call["name"] != "edit_file":
        return None
    plan = _planned_edit(call.get("args") or {}, workspace)
    return plan if isinstance(plan, str) else None


def approval_request(
    call: ToolCall,
    settings: Settings,
    workspace: str,
    *,
    unsandboxed: str | None = None,
    mode: str | None = None,
    rules: Sequence[Rule] = (),
    redact: Callable[[str], str] | None = None,
) -> dict[str, Any] | None:
    """The interrupt payload asking to approve ``call``, or None when it needs none.

    Args:
        call: A tool call of the model.
        settings: Which tools need approval (``bash``, ``edits``, ``permission_mode``).
        workspace: The run's workspace (for the edit preview and the rules' paths).
        unsandboxed: Why commands cannot run in the sandbox (``AGENTGRAPH_SANDBOX=auto``
            where it cannot start): each then needs approval, whatever the rules say;
            None when they can.
        mode: The session's permission mode (None: ``settings.permission_mode``).
        rules: The workspace's "always allow" rules: a call one matches needs none.
        redact: Applied to a change's diff before it is cut to its size (cut first, a
            token the cut fell in no longer matched its pattern, and its head stayed).

    Returns:
        ``{"type": "approval", "tool", "tool_call_id", "setting", "command"}`` for a
        shell command, ``{…, "path", "diff"}`` for a file change (``diff`` may be
        None when no preview is possible), ``{…, "memory"}`` (the text to remember),
        ``{…, "memory_id"}`` (the memory to forget) for a memory change, or ``{…,
        "plan"}`` for ``present_plan`` in plan mode. ``rule`` (``{"tool",
        "pattern"}``), when present, is what an "always" answer stores; ``mode`` is set
        when the permission mode asks.
    """
    name = call["name"]
    mode = mode or settings.permission_mode
    args = call.get("args") or {}
    kind = tool_spec(name).approval
    if name == SUBAGENT_TASK_TOOL:
        return _held_changes_request(call, settings, redact)
    if kind == "edit" and _isolated(workspace, settings):
        return None  # merged back only through an approved subagent_task(action="apply")
    if name == PRESENT_PLAN_TOOL:
        if mode != PLAN_MODE:
            return None  # the tool itself says there is nothing to accept
        return {
            "type": APPROVAL_TYPE,
            "tool": name,
            "tool_call_id": call.get("id") or "",
            "setting": MODE_SETTING,
            "mode": mode,
            "plan": str(args.get("plan", "")),
        }
    unsandboxed_shell = kind == "shell" and unsandboxed is not None
    setting = needs_approval(name, settings, unsandboxed=unsandboxed is not None, mode=mode)
    if setting is None:
        return None
    # A rule never stands in for the question a command without its sandbox asks.
    if not unsandboxed_shell and any(rule_matches(r, name, args, workspace) for r in rules):
        return None
    request: dict[str, Any] = {
        "type": APPROVAL_TYPE,
        "tool": name,
        "tool_call_id": call.get("id") or "",
        "setting": setting,
    }
    if setting == MODE_SETTING:
        request["mode"] = mode
    offered = None if unsandboxed_shell else proposed_rule(name, args, workspace)
    if offered is not None:
        request["rule"] = {"tool": offered.tool, "pattern": offered.pattern}
    if kind == "shell":
        request["command"] = str(args.get("command", ""))
        if setting == SANDBOX_SETTING:
            request["reason"] = f"no sandbox: {unsandboxed}"
    elif name.startswith(MCP_TOOL_PREFIX):
        # Shown like a command: the tool and its arguments, bounded.
        shown = json.dumps(args, ensure_ascii=False, default=str)
        if len(shown) > MCP_ARGS_SHOWN_MAX_CHARS:
            shown = shown[:MCP_ARGS_SHOWN_MAX_CHARS] + "…"
        request["command"] = f"{name} {shown}"
    elif name == "memory_save":
        request["memory"] = str(args.get("content", ""))
    elif name == "memory_delete":
        request["memory_id"] = str(args.get("id", ""))
    else:
        request["path"] = str(args.get("path", ""))
        request["diff"] = edit_preview(name, args, workspace, redact)
    return request


def _isolated(workspace: str, settings: Settings) -> bool:
    """Whether ``workspace`` is an isolated subagent's own tree (under AGENTGRAPH_HOME)."""
    from agentgraph.capabilities.subagent_worktrees import worktrees_dir

    try:
        return Path(workspace).resolve().is_relative_to(worktrees_dir(settings.home).resolve())
    except (OSError, ValueError):
        return False


def _held_changes_request(
    call: ToolCall, settings: Settings, redact: Callable[[str], str] | None = None
) -> dict[str, Any] | None:
    """Applying an isolated subagent's held changes is an edit: asked with its diff."""
    args = call.get("args") or {}
    if settings.edits != "ask" or args.get("action") != "apply":
        return None
    from agentgraph.capabilities.subagent_worktrees import approval_text

    task_id = str(args.get("task_id", ""))
    diff = approval_text(settings.home, task_id)
    return {
        "type": APPROVAL_TYPE,
        "tool": SUBAGENT_TASK_TOOL,
        "tool_call_id": call.get("id") or "",
        "setting": "AGENTGRAPH_EDITS",
        "path": f"the workspace (the changes of {task_id})",
        "diff": _bounded(diff, redact) if diff is not None else None,
    }


def is_approved(answer: Any) -> bool:
    """Whether a resume value approves: True, ``"y"``/``"yes"``…, or ``{"approved": True}``.

    Anything else (None, ``"n"``, an empty string, an unknown shape) declines: a
    client that answers something unexpected never runs a command by accident.
    """
    if isinstance(answer, Mapping):
        answer = answer.get("approved")
    if answer is True:
        return True
    return isinstance(answer, str) and answer.strip().lower() in APPROVE_ANSWERS


def is_always(answer: Any) -> bool:
    """Whether an approving answer also asks to store the question's rule (``"a"``,
    ``"always"``, ``{"approved": true, "always": true}``)."""
    if isinstance(answer, Mapping):
        return is_approved(answer) and answer.get("always") is True
    return isinstance(answer, str) and answer.strip().lower() in ALWAYS_ANSWERS


def decline_reason(answer: Any) -> str | None:
    """The reason a declining answer gives (``{"reason": …}`` or ``"n <reason>"``), bounded."""
    if isinstance(answer, Mapping):
        reason = answer.get("reason")
    elif isinstance(answer, str):
        word, _, rest = answer.strip().partition(" ")
        reason = rest if word.lower().rstrip(",.:;!-") in DECLINE_WORDS else None
    else:
        reason = None
    if not isinstance(reason, str) or not reason.strip():
        return None
    return reason.strip()[:DECLINE_REASON_MAX_CHARS]


def bound_answer(request: Mapping[str, Any], answer: Any) -> dict[str, Any]:
    """``answer`` as a dict naming the call it is for (``tool_call_id``), so the tools
    node can refuse it when it reaches another call's question."""
    bound = dict(answer) if isinstance(answer, Mapping) else {}
    bound["approved"] = is_approved(answer)
    if is_always(answer):
        bound["always"] = True
    bound["tool_call_id"] = request.get("tool_call_id", "")
    return bound


def answers_another_call(request: Mapping[str, Any], answer: Any) -> bool:
    """Whether ``answer`` names a call other than ``request``'s (an answer given by
    position that reached the wrong question: what was allowed changed meanwhile)."""
    if not isinstance(answer, Mapping) or "tool_call_id" not in answer:
        return False
    return str(answer.get("tool_call_id")) != str(request.get("tool_call_id", ""))


def answered_rule(request: Mapping[str, Any], answer: Any) -> Rule | None:
    """The rule to store for an "always" answer to ``request``; None otherwise."""
    offered = request.get("rule")
    if not is_always(answer) or not isinstance(offered, Mapping):
        return None
    tool, pattern = offered.get("tool"), offered.get("pattern")
    if isinstance(tool, str) and isinstance(pattern, str) and tool and pattern:
        return Rule(tool, pattern)
    return None


def declined_text(request: Mapping[str, Any], reason: str | None = None) -> str:
    """The tool result of a call the user declined (with the user's reason, if given)."""
    tool = str(request.get("tool", ""))
    kind = tool_spec(tool).approval
    said = f" The user said: {reason}" if reason else ""
    if tool == PRESENT_PLAN_TOOL:
        return (
            "Error: the user did not accept the plan; the session is still in plan mode "
            f"(read-only).{said} Revise the plan and call present_plan again, or ask."
        )
    what = (
        "command"
        if kind == "shell"
        else "tool call"
        if tool.startswith(MCP_TOOL_PREFIX)
        else "memory change"
        if kind == "memory"
        else "change"
    )
    return f"Error: the user declined this {what}; it was not made.{said} Ask or try another way."


def misdirected_text(request: Mapping[str, Any]) -> str:
    """The tool result of a call whose question got the answer to another call."""
    return (
        f"Error: {request.get('tool')} was not run: the answer that reached its approval "
        "question was given for another call (what needs approval changed while the "
        "question waited). Call it again if it is still needed."
    )


def cannot_ask_text(request: Mapping[str, Any]) -> str:
    """The tool result of a call that needs approval in a run that cannot ask."""
    if request.get("tool") == PRESENT_PLAN_TOOL:
        return (
            "Error: this run cannot ask the user to accept a plan (non-interactive "
            "`agentgraph run`, or a subagent); nothing was changed. Give the plan as your "
            "final answer."
        )
    if request.get("setting") == SANDBOX_SETTING:
        return (
            f"Error: commands cannot run here: the shell sandbox cannot start "
            f"({request.get('reason', 'no sandbox')}) and unsandboxed commands need the "
            "user's approval, which this run cannot ask for (non-interactive `agentgraph "
            "run`, or a subagent); it was not run. Do without it or tell the user what to run."
        )
    return (
        f"Error: {request.get('tool')} needs the user's approval "
        f"({request.get('setting')}={request.get('mode', 'ask')}) "
        "but this run cannot ask for it (non-interactive `agentgraph run`, or a subagent); "
        "it was not run. Do without it or tell the user what to run."
    )
