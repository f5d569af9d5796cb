"""Which built-in tools a session binds: all of them, or the core set a small window gets.

Every tool's schema is sent with every request, before the conversation. At an
8,192-token window agentgraph's nineteen built-in schemas (about 1,900 tokens as an
open model's chat template renders them) took more than a quarter of the prompt's room
before the system prompt, and at 4,096 tokens a local Qwen2.5 server counted the system
prompt and the schemas at 2,624 of the 4,096: what a compaction can keep — the summary,
the ledger, the files being worked on — is what is left. So a window of at most
:data:`CORE_TOOL_SET_MAX_WINDOW_TOKENS` binds only the tools whose spec says ``core``
(files, search, shell, the session's history, plan mode's question;
``agentgraph/capabilities/tools/spec.py``) and says so once, at start. The todo list,
the clock, memory, skills (``@name`` still loads one) and subagents are left out;
``AGENTGRAPH_TOOL_SET=full`` keeps them, ``core`` asks for the core set at any window.

The choice is made once per process, when the agent is built: the tool list never
changes within a session's requests (a provider's prompt cache keys on it). A window
learned later (from an overflow error) applies from the next process, which starts with
it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from langchain_core.tools import BaseTool

from agentgraph.capabilities.tools.spec import tool_spec

__all__ = [
    "CORE_TOOL_SET_MAX_WINDOW_TOKENS",
    "ToolSet",
    "ToolSetting",
    "choose_tool_set",
    "core_tool_set_notice",
    "core_tools",
]

ToolSet = Literal["full", "core"]
ToolSetting = Literal["auto", "full", "core"]

# The largest window (tokens) ``auto`` gives the core set. On the 300-file task of the
# context benchmark at 8,192 tokens the core set took the codes a faithful summary
# kept from 240 to 292 of 300 (a note-taking model: 293 to 300), where the full set's
# schemas are 15% of the usable budget by OpenAI's count and 27% by an open model's
# template; at 16,384 tokens the full set meets every target of that benchmark.
CORE_TOOL_SET_MAX_WINDOW_TOKENS = 12_288


def choose_tool_set(setting: ToolSetting, *, window: int) -> ToolSet:
    """The tool set a session binds.

    Args:
        setting: ``AGENTGRAPH_TOOL_SET``: ``auto`` decides by the window, ``full`` and
            ``core`` are taken as they are.
        window: The model's context window (tokens).

    Returns:
        ``core`` when set, or when ``auto`` and ``window`` is at most
        :data:`CORE_TOOL_SET_MAX_WINDOW_TOKENS`; else ``full``.
    """
    if setting != "auto":
        return setting
    return "core" if window <= CORE_TOOL_SET_MAX_WINDOW_TOKENS else "full"


def core_tools(tools: Sequence[BaseTool]) -> list[BaseTool]:
    """The tools of ``tools`` in the core set, in their order."""
    return [t for t in tools if tool_spec(t.name).core]


def core_tool_set_notice(window: int, *, full_tokens: int, core_tokens: int) -> str:
    """The one line that says a small window got the core tools, and how to get them all.

    Args:
        window: The model's context window (tokens).
        full_tokens: Tokens the full set's schemas would have taken per request.
        core_tokens: Tokens the core set's schemas take.
    """
    return (
        f"context window {window:,} tokens: the core tools only (files, search, shell, "
        f"history; their schemas take {core_tokens:,} tokens of every request, all tools "
        f"{full_tokens:,}) — AGENTGRAPH_TOOL_SET=full adds todos, memory, skills and subagents"
    )
