"""The graph state: a TypedDict whose every field has an explicit reducer.

Nodes return partial updates; they never mutate the state they receive.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypedDict

from langchain_core.messages import AnyMessage

from agentgraph.persistence.delta import messages_channel

MAIN_CONTEXT_ID = "main"
MESSAGES_CHANNEL = messages_channel()


def replace(_old: Any, new: Any) -> Any:
    """Last write wins (the explicit form of LangGraph's default channel)."""
    return new


def merge_unique(old: list[str] | None, new: list[str] | None) -> list[str]:
    """Union of two string lists, first occurrence order kept."""
    out: list[str] = list(old or [])
    seen = set(out)
    for item in new or []:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def once_true(old: bool | None, new: bool | None) -> bool:
    """True from the first True on: a fact about the session that never becomes untrue."""
    return bool(old) or bool(new)


class Todo(TypedDict):
    """One entry of the agent's task list."""

    content: str
    status: Literal["pending", "in_progress", "done"]


class AppState(TypedDict, total=False):
    """State that flows planner -> tools -> planner ... -> finalize.

    Run data (workspace, thread id, artifacts folder, loop cap) is not here: it travels
    in the runtime context (``agentgraph/runtime/runctx.py``) and is never checkpointed.
    """

    # Stored as deltas (only each step's new messages + periodic snapshots), with
    # exactly add_messages' semantics: see persistence/delta.py.
    messages: Annotated[list[AnyMessage], MESSAGES_CHANNEL]
    todos: Annotated[list[Todo], replace]
    allowed_tools: Annotated[list[str] | None, replace]
    persistent_tools: Annotated[list[str], merge_unique]
    active_skill: Annotated[str | None, replace]
    # @agent / @skill names the user mentioned; shown by the REPL's /current.
    mentioned_agents: Annotated[list[str], merge_unique]
    context_id: Annotated[str, replace]
    parent_context: Annotated[str | None, replace]
    # Model calls in the current turn; reset to 0 by every turn's input.
    loops: Annotated[int, replace]
    # Prompt + completion tokens of the current turn's model calls (as the provider
    # reported them); reset to 0 by every turn's input, like ``loops``.
    turn_tokens: Annotated[int, replace]
    # Their estimated cost in US dollars (0 while the model's price is unknown); reset
    # with ``turn_tokens``.
    turn_cost_usd: Annotated[float, replace]
    # The session's goal (/goal): its text, budget, what its work spent and its status
    # (agentgraph/runtime/goal.py); None when none is set.
    goal: Annotated[dict[str, Any] | None, replace]
    # The session's chosen model: written by /model, reapplied when the session resumes.
    model_pref: Annotated[str | None, replace]
    # Who ran the latest turn (AGENTGRAPH_USER_ID): the scope of per-user memory; /current.
    user_id: Annotated[str | None, replace]
    # Long-term memories listed in the system prompt, rendered once at the session's
    # first turn and then kept, so the prompt prefix stays cache-stable (recall/memory.py).
    memory_prompt: Annotated[str | None, replace]
    # Files attached with @path (workspace-relative); shown by /current.
    uploaded_files: Annotated[list[str], merge_unique]
    # Image files attached with @path (workspace-relative); shown by /current.
    images: Annotated[list[str], merge_unique]
    # Tools a subagent's caller excluded: neither a skill nor allowed_tools brings them back.
    denied_tools: Annotated[list[str], merge_unique]
    # The session's permission mode (agentgraph/security/permissions.py), once chosen (/mode,
    # Shift-Tab, an accepted plan); None: AGENTGRAPH_PERMISSION_MODE. Kept on resume.
    permission_mode: Annotated[str | None, replace]
    # The mode the model was last told about (a note goes out when the two differ).
    permission_mode_told: Annotated[str | None, replace]
    # Whether the model has been told of plan mode in this session: present_plan is
    # bound from then on (agentgraph/security/permissions.py, plan_tool_bound).
    plan_mode_told: Annotated[bool, once_true]
    # Folders of loaded skills: read_file may read them even outside the workspace.
    skill_dirs: Annotated[list[str], merge_unique]
