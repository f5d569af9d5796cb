"""Small helpers shared by the nodes."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage, SystemMessage
from langchain_core.tools import BaseTool

from agentgraph.capabilities.tools.spec import tool_spec
from agentgraph.runtime.deps import AgentDeps
from agentgraph.runtime.history.calls import hit_output_limit
from agentgraph.runtime.prompts import build_system_prompt
from agentgraph.runtime.state import AppState
from agentgraph.security.permissions import PRESENT_PLAN_TOOL, plan_tool_bound

# Placeholder argument for a tool call whose JSON the model got wrong; the tools
# node answers it with an error so the model can re-issue the call.
INVALID_ARGS_KEY = "__invalid_json_arguments__"
# Set beside it when the reply stopped at the output token limit while the call was
# being written: its arguments are incomplete even when what arrived parses.
CUT_ARGS_KEY = "__cut_at_output_limit__"


def system_messages(state: AppState, deps: AgentDeps, *, workspace: str) -> list[SystemMessage]:
    """The live system prompt for this state and run (never read back from history)."""
    extra = deps.extra_system_sections(state, workspace) if deps.extra_system_sections else ()
    todos = any(tool_spec(t.name).ledger == "todos" for t in deps.tools)
    return [
        SystemMessage(content=build_system_prompt(workspace, extra_sections=extra, todos=todos))
    ]


def allowed_tools(state: AppState, deps: AgentDeps) -> list[BaseTool]:
    """Tools sent to the model in this state: all but a subagent's exclusions, and
    ``present_plan`` until the session first enters plan mode (``plan_tool_bound``).

    A skill's ``allowed_tools`` does not shorten the list: the tools node refuses a
    disallowed call with an error instead. The list then changes at most once within a
    session, so the prompt prefix (tool schemas come first) stays cacheable.
    """
    denied = set(state.get("denied_tools") or [])  # fixed for a subagent's whole run
    if not plan_tool_bound(state):
        denied.add(PRESENT_PLAN_TOOL)
    return [t for t in deps.tools if t.name not in denied]


def repair_invalid_tool_calls(ai: AIMessage) -> AIMessage:
    """Turn calls with unparseable or cut-off arguments into calls the tools node answers.

    A provider replays ``invalid_tool_calls`` as tool calls, so each needs a result;
    keeping them as ordinary calls with a marker argument gets them one. When the reply
    stopped at the output token limit, the call being written then is the cut one: one
    whose JSON did not close is invalid already (the model call keeps only whole calls,
    :mod:`agentgraph.runtime.tool_arguments`); when none is, the last parsed call is treated as
    cut, since where the raw arguments were not at hand LangChain's partial-JSON parser
    may have closed it (a cut ``write_file`` would write a truncated file and report
    success). If it was complete after all, the model is asked to send it again: a
    retry, never a truncated file.
    """
    calls = list(ai.tool_calls)
    invalid: list[Any] = list(ai.invalid_tool_calls)
    cut = hit_output_limit(ai)
    if cut and calls and not invalid:
        last = calls.pop()
        text = json.dumps(last["args"], ensure_ascii=False)
        invalid.append({"name": last["name"], "args": text, "id": last["id"]})
    if not invalid:
        return ai
    for n, bad in enumerate(invalid):
        marker: dict[str, Any] = {INVALID_ARGS_KEY: str(bad.get("args") or "")[:2000]}
        if cut:
            marker[CUT_ARGS_KEY] = True
        calls.append(
            {
                "name": bad.get("name") or "unknown_tool",
                "args": marker,
                "id": bad.get("id") or f"invalid_call_{n}",
                "type": "tool_call",
            }
        )
    return ai.model_copy(update={"tool_calls": calls, "invalid_tool_calls": []})
