"""Which tool set a session binds (agentgraph/capabilities/tools/tool_set.py)."""

from __future__ import annotations

import pytest
from langchain_core.tools import BaseTool, tool

from agentgraph.capabilities.tools.spec import BUILTIN_TOOLS
from agentgraph.capabilities.tools.tool_set import (
    CORE_TOOL_SET_MAX_WINDOW_TOKENS,
    choose_tool_set,
    core_tool_set_notice,
    core_tools,
)


@pytest.mark.parametrize(
    ("setting", "window", "chosen"),
    [
        ("auto", CORE_TOOL_SET_MAX_WINDOW_TOKENS, "core"),
        ("auto", CORE_TOOL_SET_MAX_WINDOW_TOKENS + 1, "full"),
        ("full", 4_096, "full"),
        ("core", 200_000, "core"),
    ],
)
def test_auto_takes_the_core_set_up_to_its_window(setting: str, window: int, chosen: str) -> None:
    assert choose_tool_set(setting, window=window) == chosen  # type: ignore[arg-type]


def _named(name: str) -> BaseTool:
    @tool(name)
    def probe() -> str:
        """A probe."""
        return name

    return probe


def test_core_tools_keeps_the_core_built_ins_in_order_and_drops_the_rest() -> None:
    names = ["todo_write", "read_file", "mcp__x__y", "run_bash", "call_subagent", "grep"]
    kept = [t.name for t in core_tools([_named(n) for n in names])]
    assert kept == ["read_file", "run_bash", "grep"]


def test_the_core_set_can_still_read_change_search_run_recall_and_plan() -> None:
    core = {name for name, spec in BUILTIN_TOOLS.items() if spec.core}
    assert {"read_file", "edit_file", "grep", "run_bash", "search_history"} <= core
    assert "present_plan" in core  # plan mode must still be able to ask
    assert not {"todo_write", "memory_save", "load_skill", "call_subagent"} & core


def test_the_notice_is_one_line_with_the_override() -> None:
    text = core_tool_set_notice(8_192, full_tokens=1_870, core_tokens=1_074)
    assert "\n" not in text
    assert text.startswith("context window 8,192 tokens: the core tools only")
    assert "1,074" in text and "1,870" in text and "AGENTGRAPH_TOOL_SET=full" in text
