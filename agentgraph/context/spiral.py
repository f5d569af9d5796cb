"""The spiral guard: compactions that make no progress, found from the history alone.

A compaction spiral is the failure users of every long-running agent report: the
summary loses what was done, the model redoes it, the prompt fills again, the next
summary loses it again, and the run burns its budget going round. Seen from the
history, the work between two compactions then holds no tool call that was not already
made before the earlier one, or no model call at all.

:func:`stalled_compactions` counts such compactions in a row, ending with the one about
to happen. Derived from the stored history (the boundaries and the calls between them),
so a resumed session counts exactly what the previous process counted.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from agentgraph.errors import AgentGraphError
from agentgraph.history import agentgraph_kind

__all__ = [
    "SPIRAL_MAX_STALLS",
    "SPIRAL_MIN_CALLS_BETWEEN",
    "SPIRAL_NOTE",
    "CompactionSpiralError",
    "stalled_compactions",
]

# Compactions with fewer model calls between them than this made no room for work. One
# reply that makes a new call is progress: at a small window (a 4k local model) every
# call may need a compaction of its own.
SPIRAL_MIN_CALLS_BETWEEN = 1
# Stalled compactions in a row after which the run stops: before that each stalled one
# changes course (its summary opens by telling the model what it repeated); a run still
# stalled this many times in a row would only burn its budget.
SPIRAL_MAX_STALLS = 3

SPIRAL_NOTE = (
    "[agentgraph: since the previous compaction the work repeated tool calls that were "
    "already made before it ({repeated} of {calls}). The progress ledger lists what is "
    "done: do not redo it; continue with what it does not list, or answer.]\n\n"
)


class CompactionSpiralError(AgentGraphError):
    """Compaction made no progress several times in a row: the run stops (exit 1)."""


def _signature(call: Any) -> str:
    try:
        args = json.dumps(call.get("args") or {}, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):
        args = str(call.get("args"))
    return f"{call.get('name')}({args})"


def _segments(messages: Sequence[BaseMessage]) -> list[list[list[str]]]:
    """The tool calls of each model reply, per stretch between compaction boundaries."""
    segments: list[list[list[str]]] = [[]]
    for msg in messages:
        if agentgraph_kind(msg) == "compact_boundary":
            segments.append([])
        elif isinstance(msg, AIMessage) and agentgraph_kind(msg) is None:
            segments[-1].append([_signature(c) for c in msg.tool_calls])
    return segments


def stalled_compactions(messages: Sequence[BaseMessage]) -> tuple[int, int, int]:
    """Stalled compactions in a row, counting the one about to compact ``messages``.

    A compaction is stalled when a compaction came before it and the model calls since
    that one were fewer than :data:`SPIRAL_MIN_CALLS_BETWEEN`, or made no tool call that
    was not already made before it (same tool, same arguments). Moved copies of kept
    messages carry calls made before their boundary, so they count as repeats.

    Args:
        messages: The whole stored history.

    Returns:
        ``(stalls in a row, repeated calls, calls)``, the last two of the stretch since
        the last boundary.
    """
    segments = _segments(messages)
    if len(segments) < 2:
        return 0, 0, 0
    seen: set[str] = set()
    before: list[set[str]] = []
    for segment in segments:
        before.append(set(seen))
        seen.update(sig for reply in segment for sig in reply)
    stalls = 0
    repeated = calls = 0
    for k in range(len(segments) - 1, 0, -1):
        replies = segments[k]
        made = [sig for reply in replies for sig in reply]
        again = sum(sig in before[k] for sig in made)
        if k == len(segments) - 1:
            repeated, calls = again, len(made)
        # Replies with no tool call (a conversation) are progress of their own.
        if len(replies) < SPIRAL_MIN_CALLS_BETWEEN or (made and again == len(made)):
            stalls += 1
        else:
            break
    return stalls, repeated, calls
