"""present_plan: how the model leaves plan mode (see agentgraph/security/permissions.py).

In plan mode the tools node asks the user to accept the plan before this tool runs
(an approval interrupt), so the tool runs only for an accepted plan: it switches the
session's mode and tells the model to carry the plan out. A declined plan never reaches
it: the model gets the user's reason as the call's error result.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.types import Command

from agentgraph.config import Settings
from agentgraph.runtime.runctx import AgentToolRuntime
from agentgraph.security.permissions import (
    ACCEPTED_PLANS,
    MODE_KEY,
    MODE_TOLD_KEY,
    PLAN_MODE,
    PRESENT_PLAN_TOOL,
    effective_mode,
    plan_accepted_text,
    plan_target_mode,
)

NOT_IN_PLAN_MODE_TEXT = (
    "The session is not in plan mode: there is no plan to accept. Go ahead with the task."
)


def make_plan_tool(settings: Settings) -> BaseTool:
    """Build the present_plan tool.

    Args:
        settings: ``permission_mode`` (the mode of a session that never chose one).

    Returns:
        The tool.
    """

    @tool(PRESENT_PLAN_TOOL, parse_docstring=True)
    def present_plan(plan: str, runtime: AgentToolRuntime) -> Command[Any] | str:
        """In plan mode, show the user your plan and ask them to accept it.

        Call it once you have read enough to know what to change; the user accepts the
        plan (then you may make the changes) or says what to change in it.

        Args:
            plan: The plan, in Markdown: what you will change, where, and how you will check it.
        """
        state = runtime.state if isinstance(runtime.state, Mapping) else {}
        if effective_mode(state, settings) != PLAN_MODE:
            return NOT_IN_PLAN_MODE_TEXT
        call_id = runtime.tool_call_id or ""
        target = plan_target_mode((ACCEPTED_PLANS.get() or {}).get(call_id))
        message = ToolMessage(
            content=plan_accepted_text(target), tool_call_id=call_id, name=PRESENT_PLAN_TOOL
        )
        return Command(update={MODE_KEY: target, MODE_TOLD_KEY: target, "messages": [message]})

    return present_plan
