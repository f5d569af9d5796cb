"""What each built-in tool is, declared once: the traits the rest of the agent acts on.

The modules that record, approve, refuse, compact, mask and summarize tool calls ask
:func:`tool_spec` instead of keeping their own lists of tool names, so a new built-in
tool is one :class:`ToolSpec` in :data:`BUILTIN_TOOLS` (a test checks that every tool
the agent binds has one, and that every spec names a tool the agent binds).

A tool without a spec (an MCP server's, a test's probe) gets ``ToolSpec(name)``: not
read-only (a call cut off by a crash gets an honest "interrupted" result), no
built-in approval question, not refused by name in plan mode, and counted in the ledger
by name; unless its metadata declares it read-only (:data:`DECLARED_READ_ONLY_KEY`), the
workspace is scanned around its step and the files it changed are listed too. MCP
tools' own rules key on their ``mcp__`` prefix where they are applied.

This module imports nothing of the agent: every layer may depend on it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

__all__ = [
    "BUILTIN_TOOLS",
    "DECLARED_READ_ONLY_KEY",
    "ApprovalKind",
    "FilesRole",
    "LedgerKind",
    "ToolSpec",
    "tool_spec",
    "tools_where",
]

# Metadata key of a tool without a spec that declares it changes nothing (an MCP server's
# ``readOnlyHint``): the tools node scans the workspace around a step of any other such
# tool, as around a command's (``agentgraph/runtime/nodes/tools.py``).
DECLARED_READ_ONLY_KEY = "declared_read_only"

ApprovalKind = Literal["shell", "edit", "memory"]
"""Which question a call asks before it runs (``agentgraph/security/approvals.py``):
a command (``AGENTGRAPH_BASH``, asked in the ``ask`` and ``accept-edits`` modes), a
file change (``AGENTGRAPH_EDITS``, asked in ``ask`` mode) or a memory change
(``AGENTGRAPH_MEMORY``)."""

FilesRole = Literal["reads", "writes"]
"""How a tool touches the file its path argument names: after a compaction the files
the conversation wrote or edited and touched last (a read touches too) are re-read into
the prompt."""

LedgerKind = Literal["read", "write", "edit", "command", "subagent", "todos"]
"""The line a call adds to the ledger a compaction keeps (``agentgraph/context/ledger.py``);
a tool without one is counted by name."""


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """The traits of one tool. The defaults are those of a tool nobody declared.

    Attributes:
        name: The tool's name, as the model calls it.
        read_only: It changes nothing, so a call cut off by a crash may simply run again
            and gets no start record (``agentgraph/runtime/call_records.py``).
        modifies_files: It may change files in the workspace.
        path_arg: The argument that names the file it acts on, or None.
        approval: The question its calls may need before they run, or None.
        plan_blocked: It changes something outside the conversation, so plan mode
            refuses it (``agentgraph/security/permissions.py``).
        files_role: Whether it reads or writes the file of ``path_arg``, for the files
            re-injected after a compaction (``agentgraph/context/compaction.py``).
        ledger: The kind of line it adds to the ledger, or None (counted by name).
        mask_exempt: Observation masking never replaces its results: they are
            instructions the model keeps following (``agentgraph/context/masking_text.py``).
        core: It stays in the core tool set a small window gets: files, search, shell,
            the session's history and plan mode's question
            (``agentgraph/capabilities/tools/tool_set.py``).
        recall: Its result is the session's own history brought back: the spiral
            guard counts a call of it made again (the same arguments) as no new work,
            whatever its output (``agentgraph/context/spiral.py``).
        applies_changes: Its result's artifact may say which files a subagent's changes,
            applied to the workspace, changed (``changes``): the ledger lists them
            (``agentgraph/context/ledger.py``).
    """

    name: str
    read_only: bool = False
    modifies_files: bool = False
    path_arg: str | None = None
    approval: ApprovalKind | None = None
    plan_blocked: bool = False
    files_role: FilesRole | None = None
    ledger: LedgerKind | None = None
    mask_exempt: bool = False
    core: bool = False
    recall: bool = False
    applies_changes: bool = False


# In the order the agent binds them (agentgraph/session/agent.py).
_SPECS = (
    ToolSpec(
        "read_file",
        read_only=True,
        path_arg="path",
        files_role="reads",
        ledger="read",
        core=True,
    ),
    ToolSpec(
        "write_file",
        modifies_files=True,
        path_arg="path",
        approval="edit",
        plan_blocked=True,
        files_role="writes",
        ledger="write",
        core=True,
    ),
    ToolSpec(
        "edit_file",
        modifies_files=True,
        path_arg="path",
        approval="edit",
        plan_blocked=True,
        files_role="writes",
        ledger="edit",
        core=True,
    ),
    ToolSpec("list_dir", read_only=True, core=True),
    ToolSpec("glob", read_only=True, core=True),
    ToolSpec("grep", read_only=True, core=True),
    ToolSpec(
        "run_bash",
        modifies_files=True,
        approval="shell",
        plan_blocked=True,
        ledger="command",
        core=True,
    ),
    ToolSpec("todo_write", ledger="todos"),
    ToolSpec("todo_read", read_only=True),
    ToolSpec("now", read_only=True),
    ToolSpec("search_history", read_only=True, core=True, recall=True),
    ToolSpec("read_history", read_only=True, core=True, recall=True),
    ToolSpec("memory_save", approval="memory", plan_blocked=True),
    ToolSpec("memory_search", read_only=True),
    ToolSpec("memory_delete", approval="memory", plan_blocked=True),
    # Asks to accept a plan itself (in plan mode), not through an approval kind.
    ToolSpec("present_plan", core=True),
    ToolSpec("load_skill", read_only=True, mask_exempt=True),
    ToolSpec("call_subagent", plan_blocked=True, ledger="subagent", applies_changes=True),
    # Its "apply" action asks on its own terms (the subagent's held changes).
    ToolSpec("subagent_task", applies_changes=True),
)

BUILTIN_TOOLS: Mapping[str, ToolSpec] = MappingProxyType({spec.name: spec for spec in _SPECS})
"""Every built-in tool's spec by name, in the order the agent binds the tools."""


def tool_spec(name: str) -> ToolSpec:
    """The spec of tool ``name``: its declared one, or the defaults for a tool without one."""
    return BUILTIN_TOOLS.get(name) or ToolSpec(name)


def tools_where(trait: Callable[[ToolSpec], bool]) -> frozenset[str]:
    """The names of the built-in tools whose spec has ``trait``."""
    return frozenset(name for name, spec in BUILTIN_TOOLS.items() if trait(spec))
