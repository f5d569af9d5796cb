"""Small helpers shared by the nodes."""

from __future__ import annotations

from langchain_core.messages import AIMessage, SystemMessage
from langchain_core.tools import BaseTool

from agentgraph.deps import AgentDeps
from agentgraph.prompts import build_system_prompt
from agentgraph.state import AppState

# Placeholder argument for a tool call whose JSON the model got wrong; the tools
# node answers it with an error so the model can re-issue the call.
INVALID_ARGS_KEY = "__invalid_json_arguments__"


def system_messages(state: AppState, deps: AgentDeps, *, workspace: str) -> list[SystemMessage]:
    """The live system prompt for this state and run (never read back from history)."""
    extra = deps.extra_system_sections(state, workspace) if deps.extra_system_sections else ()
    return [SystemMessage(content=build_system_prompt(workspace, extra_sections=extra))]


def allowed_tools(state: AppState, deps: AgentDeps) -> list[BaseTool]:
    """Tools sent to the model in this state: all but a subagent's exclusions.

    A skill's ``allowed_tools`` does not shorten the list: the tools node refuses a
    disallowed call with an error instead. The list then never changes within a
    session, so the prompt prefix (tool schemas come first) stays cacheable.
    """
    denied = set(state.get("denied_tools") or [])  # fixed for a subagent's whole run
    return [t for t in deps.tools if t.name not in denied]


def repair_invalid_tool_calls(ai: AIMessage) -> AIMessage:
    """Turn calls with unparseable JSON arguments into calls the tools node answers.

    A provider replays ``invalid_tool_calls`` as tool calls, so each needs a result;
    keeping them as ordinary calls with a marker argument gets them one.
    """
    if not ai.invalid_tool_calls:
        return ai
    repaired = list(ai.tool_calls)
    for n, bad in enumerate(ai.invalid_tool_calls):
        repaired.append(
            {
                "name": bad.get("name") or "unknown_tool",
                "args": {INVALID_ARGS_KEY: str(bad.get("args") or "")[:2000]},
                "id": bad.get("id") or f"invalid_call_{n}",
                "type": "tool_call",
            }
        )
    return ai.model_copy(update={"tool_calls": repaired, "invalid_tool_calls": []})
