"""Session operations a front end offers as commands: search, memory, context, diffs,
tool outputs, subagents, MCP servers and the model.

Each function does the work with the lower layers and returns data (or text the user
reads as is); the front end parses its arguments, calls, and renders the result. The
REPL's slash commands are one such front end; the web UI calls the same operations.
Goals live in :mod:`agentgraph.session.goals`, permission modes and rules in
:mod:`agentgraph.session.permissions_ops`, commits in :mod:`agentgraph.session.commits`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage

from agentgraph.capabilities.diffs import FileDiff, diff_event, recorded_diffs
from agentgraph.capabilities.mcp import McpManager, config_paths
from agentgraph.capabilities.recall.memory import MemoryRefused
from agentgraph.capabilities.recall.search import (
    SearchError,
    SearchResult,
    index_errors,
    parse_ref,
)
from agentgraph.capabilities.subagents import SubagentRecord
from agentgraph.context.artifacts import output_artifact_path
from agentgraph.context.report import render_context
from agentgraph.errors import AgentGraphError
from agentgraph.persistence import Store
from agentgraph.providers.model import check_model_available, local_server_url
from agentgraph.session.agent import Agent
from agentgraph.session.undo import UndoResult

__all__ = [
    "STATE_STYLE",
    "ContextView",
    "FileDiff",
    "IndexUnavailable",
    "MemoryRefused",
    "ModelInfo",
    "ModelSwitch",
    "SearchError",
    "SearchResult",
    "Store",
    "SubagentRecord",
    "UndoOutcome",
    "UndoResult",
    "compact_for_window",
    "context_view",
    "full_tool_output",
    "mcp_lines",
    "model_info",
    "search_or_read",
    "session_diffs",
    "subagent_records",
    "switch_model",
    "tool_results",
    "undo_turns",
    "visible",
]

# Control characters other than newline and tab (C0, DEL, C1).
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def visible(text: str) -> str:
    """``text`` with control characters shown as ``\\xNN`` instead of acting on a terminal."""
    return _CONTROL_RE.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


# --- recall -------------------------------------------------------------------------


class IndexUnavailable(AgentGraphError):
    """The search index could not answer now (busy, damaged, server gone); the message
    is the database's."""


def search_or_read(agent: Agent, thread_id: str, text: str) -> SearchResult | str:
    """``msg:N`` (``#N``, ``N``): that stored message in full; anything else: a
    full-text search of the session's whole transcript.

    Raises:
        SearchError: a query or reference that cannot be used (the message says why).
        IndexUnavailable: the index did not answer.
    """
    try:
        try:
            parse_ref(text)
        except SearchError:
            return agent.search_history(thread_id, text)
        return agent.read_history(thread_id, text)
    except index_errors() as exc:
        raise IndexUnavailable(str(exc)) from exc


# --- context ------------------------------------------------------------------------


@dataclass(frozen=True)
class ContextView:
    """What ``/context`` shows.

    Attributes:
        report: The context report (``level``, ``tokens``, breakdown, ``compactions`` …).
        text: Its plain-text view: bar, breakdown, largest messages.
    """

    report: dict[str, Any]
    text: str

    @property
    def compactions(self) -> list[dict[str, Any]]:
        """The session's compaction records, oldest first."""
        return list(self.report.get("compactions", []))


def context_view(agent: Agent, thread_id: str) -> ContextView:
    """The context report of the prompt the next model call would send, and its text."""
    report = agent.context_report(thread_id)
    return ContextView(report, render_context(report))


# --- diffs --------------------------------------------------------------------------


def session_diffs(
    agent: Agent, thread_id: str, workspace: Path, *, last_only: bool = False
) -> list[dict[str, Any]]:
    """The ``diff`` events (see docs/events.md) of the files the session changed, from
    the undo snapshots to the workspace now; with ``last_only``, of its last turn that
    changed files."""
    undo = agent.sessions.undo_store(thread_id)
    return [
        diff_event(change, None) for change in recorded_diffs(undo, workspace, last_only=last_only)
    ]


# --- tool outputs -------------------------------------------------------------------


def tool_results(messages: Sequence[BaseMessage]) -> list[ToolMessage]:
    """The tool results among ``messages``, in order."""
    return [m for m in messages if isinstance(m, ToolMessage)]


def full_tool_output(agent: Agent, thread_id: str, result: ToolMessage) -> str:
    """The whole output of a stored tool result: the one saved beside the session when
    the history holds a cut, else the stored text."""
    artifact = output_artifact_path(agent.deps.artifacts_dir(thread_id), result.tool_call_id)
    try:
        return artifact.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):  # not cut (or its file is gone): the stored text
        return str(result.text)


# --- subagents ----------------------------------------------------------------------


def subagent_records(agent: Agent, thread_id: str) -> list[SubagentRecord]:
    """The subagents this process ran or runs for the session ``thread_id``."""
    return [r for r in list(agent.subagents.records.values()) if r.parent_thread == thread_id]


# --- MCP ----------------------------------------------------------------------------

# Style of a server's line by its state (a rich style name).
STATE_STYLE = {"connected": "green", "failed": "red", "connecting": "yellow"}


def mcp_lines(manager: McpManager | None) -> list[tuple[str, str]]:
    """``(style, text)`` lines describing every configured server and its tools.

    ``style`` is a rich style name ("" for plain text).
    """
    if manager is None or not manager.servers:
        where = (
            " or ".join(str(p) for p in config_paths(manager.workspace, manager.home))
            if manager is not None
            else "mcp.json"
        )
        return [("dim", f"no MCP servers configured ({where})")]
    lines: list[tuple[str, str]] = []
    for status in manager.servers.values():
        head = f"{status.name}  {status.transport}  {status.state}"
        if status.state == "connecting":
            head += f" ({time.monotonic() - status.since:.0f}s)"
        elif status.state == "connected":
            head += f" ({len(status.tools)} tools)"
        if status.error:
            head += f": {status.error}"
        lines.append((STATE_STYLE.get(status.state, ""), head))
        lines.append(("dim", f"    from {status.source}"))
        for name in status.tools:
            lines.append(("", f"    {name}"))
        for name in status.skipped:
            why = status.skip_reasons.get(name, "schema too large or not an object")
            lines.append(("yellow", f"    {name} (skipped: {why})"))
    return lines


# --- the model ----------------------------------------------------------------------


@dataclass(frozen=True)
class ModelInfo:
    """The model an agent calls and the window it plans with.

    Attributes:
        name: The model's name as configured (``ollama:qwen2.5-coder:7b`` …).
        served_at: The local server its prefix picks (which serves it whatever
            ``OPENAI_BASE_URL`` says), or None.
        window: Its context window, in tokens.
        usable: The prompt budget within the window, in tokens.
        source_notice: Where a guessed or learned window came from, or "".
    """

    name: str
    served_at: str | None
    window: int
    usable: int
    source_notice: str


def model_info(agent: Agent) -> ModelInfo:
    """The model ``agent`` calls, where it is served and its window."""
    budget = agent.deps.budget
    name = agent.settings.model
    return ModelInfo(
        name, local_server_url(name), budget.window, budget.usable, budget.source_notice or ""
    )


@dataclass(frozen=True)
class ModelSwitch:
    """A switch of the session's model.

    Attributes:
        agent: The agent on the new model (the front end uses it from now on).
        model: The new model's name, server and window.
        needs_compaction: The session no longer fits the new window: compact it
            (:func:`compact_for_window`) before the next model call.
    """

    agent: Agent
    model: ModelInfo
    needs_compaction: bool


def switch_model(agent: Agent, thread_id: str, name: str, *, record: bool = True) -> ModelSwitch:
    """Make ``name`` the model of the session ``thread_id``.

    Args:
        agent: The agent in use.
        thread_id: The session.
        name: The model to switch to.
        record: Keep the choice with the session (resumed sessions use it again).

    Raises:
        ConfigError: the model cannot be built or is not served (nothing changes).
    """
    check_model_available(agent.settings, name)
    switched = agent.with_model(name)
    report = switched.context_report(thread_id)
    if record:
        switched.set_model_preference(thread_id, name)
    needs = int(report.get("tokens") or 0) >= switched.deps.budget.compact_at
    return ModelSwitch(switched, model_info(switched), needs)


def compact_for_window(agent: Agent, thread_id: str) -> dict[str, Any] | None:
    """Compact the session for its (smaller) window now.

    Returns:
        The compaction record when one was applied, else None.
    """
    record = agent.compact(thread_id)
    if record is not None and record.get("applied", True):
        return record
    return None


@dataclass(frozen=True)
class UndoOutcome:
    """What an undo did, and how many turns had recorded changes before it."""

    result: UndoResult
    available: int


def undo_turns(agent: Agent, thread_id: str, workspace: Path, count: int) -> UndoOutcome | None:
    """Restore the files the last ``count`` turns changed (``/undo [N]``); None when no
    turn of the session changed files. The model is told which files went back."""
    undo = agent.sessions.undo_store(thread_id)
    available = len(undo.turns())
    if available == 0:
        return None
    result = undo.undo(workspace, count)
    agent.record_undo(thread_id, result)  # else the model trusts its own edits
    return UndoOutcome(result, available)
