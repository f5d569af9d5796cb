"""Every built-in tool declares its traits once, in its ToolSpec; the old sets derive from them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from agentgraph.capabilities.subagents import SUBAGENT_WRITE_TOOLS
from agentgraph.capabilities.tools import FILE_PATH_ARGS, TOOLS_THAT_MODIFY_FILES
from agentgraph.capabilities.tools.spec import BUILTIN_TOOLS, ToolSpec, tool_spec, tools_where
from agentgraph.config import Settings
from agentgraph.persistence import open_store
from agentgraph.runtime.call_records import READ_ONLY_TOOLS, needs_record
from agentgraph.security.approvals import declined_text, needs_approval
from agentgraph.security.permission_rules import proposed_rule
from agentgraph.security.permissions import mode_asks, plan_mode_refusal
from agentgraph.session.agent import Agent
from tests.fakes.chat_model import ScriptedChatModel

# The trait sets as the modules that act on them spelled them before the specs existed
# (checked equal to those constants on the code before the change).
TODAY: dict[str, object] = {
    "read_only": frozenset(
        {
            "read_file",
            "list_dir",
            "glob",
            "grep",
            "todo_read",
            "now",
            "search_history",
            "read_history",
            "memory_search",
            "load_skill",
        }
    ),
    "modifies_files": frozenset({"write_file", "edit_file", "run_bash"}),
    "path_arg": {"read_file": "path", "write_file": "path", "edit_file": "path"},
    "plan_blocked": frozenset(
        {"run_bash", "write_file", "edit_file", "memory_save", "memory_delete", "call_subagent"}
    ),
    "approval": {
        "run_bash": "shell",
        "write_file": "edit",
        "edit_file": "edit",
        "memory_save": "memory",
        "memory_delete": "memory",
    },
    "files_role": {"read_file": "reads", "write_file": "writes", "edit_file": "writes"},
    "ledger": {
        "read_file": "read",
        "write_file": "write",
        "edit_file": "edit",
        "run_bash": "command",
        "call_subagent": "subagent",
        "todo_write": "todos",
    },
    "mask_exempt": frozenset({"load_skill"}),
}


def _flags(trait: str) -> frozenset[str]:
    return tools_where(lambda spec: bool(getattr(spec, trait)))


def _values(trait: str) -> dict[str, object]:
    return {
        name: getattr(spec, trait)
        for name, spec in BUILTIN_TOOLS.items()
        if getattr(spec, trait) is not None
    }


def test_the_derived_sets_are_todays() -> None:
    for trait in ("read_only", "modifies_files", "plan_blocked", "mask_exempt"):
        assert _flags(trait) == TODAY[trait], trait
    for trait in ("path_arg", "approval", "files_role", "ledger"):
        assert _values(trait) == TODAY[trait], trait
    # The names kept for their callers are the registry's.
    assert TODAY["read_only"] == READ_ONLY_TOOLS
    assert TODAY["modifies_files"] == TOOLS_THAT_MODIFY_FILES
    assert TODAY["path_arg"] == FILE_PATH_ARGS
    assert SUBAGENT_WRITE_TOOLS == ("write_file", "edit_file")


def test_every_tool_the_agent_binds_has_a_spec_and_every_spec_a_tool(
    make_settings: Callable[..., Settings],
) -> None:
    """With every optional tool on, the bound list and the registry name the same tools."""
    settings = make_settings(
        AGENTGRAPH_BASH="on",
        AGENTGRAPH_SANDBOX="off",
        AGENTGRAPH_MEMORY="auto",
        AGENTGRAPH_SUBAGENT_MAX_DEPTH="2",
        AGENTGRAPH_SUBAGENT_MAX_BACKGROUND="2",
    )
    with open_store(settings) as store:
        agent = Agent(settings, store, model=ScriptedChatModel([]), sleep=lambda _s: None)
        bound = [tool.name for tool in agent.deps.tools]
        schemas = {
            tool.name: tool.tool_call_schema.model_json_schema() for tool in agent.deps.tools
        }
    assert len(bound) == len(set(bound))
    assert set(bound) == set(BUILTIN_TOOLS)
    for name, spec in BUILTIN_TOOLS.items():
        assert spec.name == name
        if spec.path_arg is not None:
            assert spec.path_arg in schemas[name]["properties"], name


def test_a_tool_without_a_spec_keeps_the_defaults(make_settings: Callable[..., Settings]) -> None:
    """MCP and user tools: a crash record, no built-in question, not refused by name."""
    asking = make_settings(AGENTGRAPH_BASH="ask", AGENTGRAPH_EDITS="ask", AGENTGRAPH_MEMORY="ask")
    for name in ("my_tool", "mcp__srv__read_file"):
        assert tool_spec(name) == ToolSpec(name)
        assert needs_record(name)
    for mode in ("ask", "accept-edits", "auto"):
        assert needs_approval("my_tool", asking, mode=mode) is None
        assert not mode_asks("my_tool", mode)
    assert plan_mode_refusal("my_tool", "plan") is None
    assert proposed_rule("my_tool", {"command": "ls", "path": "a"}, str(Path.cwd())) is None
    assert "declined this change" in declined_text({"tool": "my_tool"})
