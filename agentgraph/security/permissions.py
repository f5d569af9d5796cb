"""Permission modes: what may run without asking, and the read-only plan mode.

A session is in one of :data:`~agentgraph.config.PERMISSION_MODES`:

- ``plan``: read-only. Commands, file edits, MCP tools, memory changes and subagents do
  not run; each such call gets :func:`plan_mode_refusal`'s error. The model reads, then
  calls ``present_plan``; the user is asked to accept the plan (an approval interrupt);
  accepted, the session switches to :data:`PLAN_ACCEPTED_MODE` (or the mode the answer
  names) and the model is told to carry it out; declined, it gets the user's reason and
  stays in plan mode.
- ``ask``: commands, edits and MCP tools ask.
- ``accept-edits``: edits run; commands and MCP tools ask.
- ``auto``: everything runs (the shell sandbox still applies, and commands that would
  run without the sandbox it should have had still ask).

``AGENTGRAPH_BASH=ask``, ``AGENTGRAPH_EDITS=ask`` and ``AGENTGRAPH_MCP_TOOLS=ask`` are a
floor no mode lowers: each still asks in every mode (the mode can only add questions).

The session's mode lives in its state (``permission_mode``, written by ``/mode``,
Shift-Tab, an accepted plan, or ``--permission-mode`` on a resumed session), so a resumed
session keeps it; a session that never chose one follows ``AGENTGRAPH_PERMISSION_MODE``.
The model learns of a mode change from a note appended before the next request (the
system prompt never changes, so its cached prefix stays valid). ``present_plan`` is
bound from the first turn the model is told of plan mode on (:func:`plan_tool_bound`):
a session that never plans does not send its schema with every request, and the tool
list of one that does changes once.
"""

from __future__ import annotations

import contextvars
import uuid
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import HumanMessage

from agentgraph.capabilities.tools.spec import ApprovalKind, tool_spec
from agentgraph.config import PERMISSION_MODE_DEFAULT, PERMISSION_MODES, Settings
from agentgraph.runtime.history.kinds import AGENTGRAPH_KEY, MODE_NOTE_KIND

PLAN_MODE = "plan"
ASK_MODE = "ask"
ACCEPT_EDITS_MODE = "accept-edits"
AUTO_MODE = "auto"
# What an accepted plan switches to: edits run, commands still ask (a client's answer
# may name another mode, e.g. {"approved": true, "mode": "ask"}).
PLAN_ACCEPTED_MODE = ACCEPT_EDITS_MODE
# The order Shift-Tab cycles through.
MODE_CYCLE = (ASK_MODE, ACCEPT_EDITS_MODE, PLAN_MODE, AUTO_MODE)
PRESENT_PLAN_TOOL = "present_plan"
# The setting an approval question names when the mode (not an ask setting) asks.
MODE_SETTING = "AGENTGRAPH_PERMISSION_MODE"
# State keys: the session's chosen mode, and the mode the model was last told about.
MODE_KEY = "permission_mode"
MODE_TOLD_KEY = "permission_mode_told"
# State key: the model has been told of plan mode in this session (never unset).
PLAN_TOLD_KEY = "plan_mode_told"
MCP_TOOL_PREFIX = "mcp__"
# The built-in questions (ToolSpec.approval) each mode asks before a call; MCP tools
# ask in both.
MODE_ASKED_KINDS: dict[str, frozenset[ApprovalKind]] = {
    ASK_MODE: frozenset({"shell", "edit"}),
    ACCEPT_EDITS_MODE: frozenset({"shell"}),
}

MODE_DESCRIPTIONS = {
    PLAN_MODE: "read-only: nothing is changed until you accept a plan",
    ASK_MODE: "commands, edits and MCP tools ask first",
    ACCEPT_EDITS_MODE: "edits run; commands and MCP tools ask first",
    AUTO_MODE: "everything runs without asking (the shell sandbox still applies)",
}

_MODEL_NOTES = {
    PLAN_MODE: (
        "[Permission mode: plan. You are in read-only plan mode: do not change files, run "
        "commands, call MCP tools, change memories or start subagents (such calls are "
        "refused). Read what you need, then call present_plan with your complete plan; "
        "the user accepts it or tells you what to change.]"
    ),
    ASK_MODE: (
        "[Permission mode: ask. Commands, file edits and MCP tool calls each need the "
        "user's approval; go ahead and call them.]"
    ),
    ACCEPT_EDITS_MODE: (
        "[Permission mode: accept-edits. File edits run without asking; commands and "
        "MCP tool calls need the user's approval.]"
    ),
    AUTO_MODE: "[Permission mode: auto. Tools run without asking.]",
}


def check_mode(name: str) -> str:
    """``name`` if it is a permission mode.

    Raises:
        ValueError: Not a mode (the message lists them).
    """
    if name not in PERMISSION_MODES:
        raise ValueError(
            f"unknown permission mode {name!r} (one of: {', '.join(PERMISSION_MODES)})"
        )
    return name


def effective_mode(state: Mapping[str, Any] | None, settings: Settings) -> str:
    """The session's mode: its own choice (state), else ``AGENTGRAPH_PERMISSION_MODE``."""
    chosen = (state or {}).get(MODE_KEY)
    if isinstance(chosen, str) and chosen in PERMISSION_MODES:
        return chosen
    return settings.permission_mode


def next_mode(mode: str) -> str:
    """The mode Shift-Tab switches to after ``mode``."""
    index = MODE_CYCLE.index(mode) if mode in MODE_CYCLE else -1
    return MODE_CYCLE[(index + 1) % len(MODE_CYCLE)]


def mode_asks(name: str, mode: str) -> bool:
    """Whether ``mode`` asks before tool ``name`` runs (plan mode refuses, it never asks)."""
    asked = MODE_ASKED_KINDS.get(mode)
    if asked is None:
        return False
    return tool_spec(name).approval in asked or name.startswith(MCP_TOOL_PREFIX)


def plan_mode_refusal(name: str, mode: str) -> str | None:
    """The error result of a call that may not run in plan mode; None when it may."""
    if mode != PLAN_MODE:
        return None
    # Tools that change something outside the conversation (ToolSpec.plan_blocked).
    if tool_spec(name).plan_blocked or name.startswith(MCP_TOOL_PREFIX):
        return (
            f"Error: {name} did not run: the session is in plan mode (read-only). Read "
            "what you need, then call present_plan with your plan; once the user accepts "
            "it you can make changes."
        )
    return None


def mode_note(mode: str) -> HumanMessage:
    """The note that tells the model the session's mode (kind ``mode_note``, not a request)."""
    return HumanMessage(
        content=_MODEL_NOTES[mode],
        id=f"mode-{uuid.uuid4().hex}",
        additional_kwargs={AGENTGRAPH_KEY: {"kind": MODE_NOTE_KIND, "mode": mode}},
    )


def turn_mode_inputs(stored: Mapping[str, Any], settings: Settings) -> dict[str, Any]:
    """What a turn's input adds for the mode: a note when it changed since the model was
    last told (a session that never left the default mode gets none).

    Args:
        stored: The session's stored state.
        settings: ``permission_mode``.

    Returns:
        ``{"messages": [note], MODE_TOLD_KEY: mode}`` (with ``PLAN_TOLD_KEY: True`` for
        plan mode), or ``{}``.
    """
    mode = effective_mode(stored, settings)
    told = stored.get(MODE_TOLD_KEY) or PERMISSION_MODE_DEFAULT
    if mode == told:
        return {}
    update: dict[str, Any] = {"messages": [mode_note(mode)], MODE_TOLD_KEY: mode}
    if mode == PLAN_MODE:
        update[PLAN_TOLD_KEY] = True
    return update


def plan_tool_bound(state: Mapping[str, Any]) -> bool:
    """Whether the model is sent ``present_plan``: once it has been told of plan mode.

    Its schema (about 120 tokens) is the only way out of plan mode and of no use
    before it. It stays after the plan is accepted, so a session's tool list changes at
    most once and the provider's cached prefix is lost at most once. ``MODE_TOLD_KEY``
    covers a session told of plan mode before ``PLAN_TOLD_KEY`` was kept.
    """
    return bool(state.get(PLAN_TOLD_KEY)) or state.get(MODE_TOLD_KEY) == PLAN_MODE


def plan_target_mode(answer: Any) -> str:
    """The mode an accepted plan switches to: the answer's ``mode``, else
    :data:`PLAN_ACCEPTED_MODE` (never plan again)."""
    chosen = answer.get("mode") if isinstance(answer, Mapping) else None
    if isinstance(chosen, str) and chosen in PERMISSION_MODES and chosen != PLAN_MODE:
        return chosen
    return PLAN_ACCEPTED_MODE


def plan_accepted_text(mode: str) -> str:
    """The ``present_plan`` result once the user accepted the plan."""
    return (
        f"The user accepted the plan. The session is now in {mode} mode "
        f"({MODE_DESCRIPTIONS[mode]}). Carry out the plan now."
    )


# Tool-call id -> the user's answer, for the present_plan calls of the running step that
# were accepted. Set by the tools node around its ToolNode run (the threads running the
# calls copy it); the tool reads the mode the answer chose.
ACCEPTED_PLANS: contextvars.ContextVar[Mapping[str, Any] | None] = contextvars.ContextVar(
    "agentgraph_accepted_plans", default=None
)
