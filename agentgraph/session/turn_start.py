"""The state a turn starts with, shared by every front end.

The CLI and the web UI start a turn in :meth:`Agent.stream_turn` (which writes this
input before the graph runs); the LangGraph server starts it in its graph's
``turn_start`` node (agentgraph/session/server_support.py), where the client's message is
already in the state. Both build the same input here: answers for the calls a dead
process left running, the one-time resume preamble, a note when the permission mode
changed, what hooks printed for the model, the loop counters reset, and the long-term
memories on a session's first turn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage
from langgraph.store.base import BaseStore

from agentgraph.capabilities.recall.memory import (
    list_memories,
    memory_notice,
    memory_prompt_section,
    unseen_memories,
)
from agentgraph.capabilities.recall.memory import namespace as memory_namespace
from agentgraph.runtime.call_records import interrupted_results
from agentgraph.runtime.history.kinds import stamped
from agentgraph.security.permissions import turn_mode_inputs

if TYPE_CHECKING:
    from agentgraph.session.agent import Agent


def turn_inputs(
    agent: Agent,
    thread_id: str,
    stored: Mapping[str, Any],
    prompt: Sequence[BaseMessage],
    *,
    artifacts_dir: Path,
    user_id: str,
    context_id: str,
) -> dict[str, Any]:
    """The state update that starts a turn of ``thread_id`` (before its first model call).

    Args:
        agent: The agent running the turn (its session upkeep and hook output).
        thread_id: The session.
        stored: The session's stored state before the turn's own messages.
        prompt: The turn's own messages (the user's, a mentioned skill's body…).
        artifacts_dir: The session's artifacts folder (where call records are).
        user_id: Whose turn it is.
        context_id: The context the turn runs in.

    Returns:
        The update: ``messages`` (what goes before the prompt, then the prompt), the
        mode's key when it changed, and the turn's counters reset.
    """
    history = list(stored.get("messages") or [])
    preamble = agent.sessions.preamble(thread_id, lambda: history)
    # Calls that were running when a previous process died: "may have completed".
    interrupted = interrupted_results(history, artifacts_dir)
    # The model learns of a mode change from a note before the request: the system
    # prompt (the cached prefix) stays as it was.
    mode_inputs = turn_mode_inputs(stored, agent.settings)
    # Hook output for the model: appended, before the prompt it came with.
    hooked = [stamped(m) for m in agent.take_hook_context(thread_id)]
    messages = [
        *interrupted,
        *preamble,
        *mode_inputs.pop("messages", []),
        *hooked,
        *prompt,
    ]
    return {
        **mode_inputs,
        "messages": messages,
        "loops": 0,
        "turn_tokens": 0,
        "turn_cost_usd": 0.0,
        "context_id": context_id,
        "user_id": user_id,
    }


def memory_inputs(
    memory: BaseStore | None,
    stored: Mapping[str, Any],
    *,
    user_id: str,
    workspace: Path | str,
    notices: list[str] | None,
) -> dict[str, Any]:
    """The memory prompt of a session's first turn (none stored yet), else nothing.

    Args:
        memory: The long-term memory store (None: memory is off or there is none).
        stored: The session's stored state.
        user_id: Whose memories.
        workspace: The workspace they were saved in.
        notices: Receives the one-line notice of memories new since the user's last
            session here (which marks them seen); None: a front end that shows no
            notices leaves them unseen.

    Returns:
        ``{"memory_prompt": …}`` or ``{}``.
    """
    if memory is None or stored.get("memory_prompt") is not None:
        return {}
    ns = memory_namespace(user_id, str(workspace))
    memories = list_memories(memory, ns)
    if notices is not None:
        news = memory_notice(unseen_memories(memory, ns, memories))
        if news is not None:
            notices.append(news)
    return {"memory_prompt": memory_prompt_section(memories)}
