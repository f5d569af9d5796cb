"""The spiral guard: compactions that make no progress, found from the history alone.

A compaction spiral is the failure users of every long-running agent report: the
summary loses what was done, the model redoes it, the prompt fills again, the next
summary loses it again, and the run burns its budget going round. Seen from the
history, the work between two compactions then holds no request from the user, no
answer in words and no tool call that was not already made before the earlier one with
the same output, or no model call at all.

:func:`stalled_compactions` counts such compactions in a row, ending with the one about
to happen. Derived from the stored history (the boundaries and the calls between them),
so a resumed session counts exactly what the previous process counted.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from agentgraph.errors import AgentGraphError
from agentgraph.history import AGENTGRAPH_KEY, agentgraph_kind, is_user_request

__all__ = [
    "SPIRAL_MAX_STALLS",
    "SPIRAL_MIN_CALLS_BETWEEN",
    "SPIRAL_NOTE",
    "CompactionSpiralError",
    "spiral_note",
    "stalled_compactions",
]

# Compactions with fewer model calls between them than this made no room for work. One
# reply that makes a new call is progress: at a small window (a 4k local model) every
# call may need a compaction of its own.
SPIRAL_MIN_CALLS_BETWEEN = 1
# Stalled compactions in a row after which the run stops: before that each stalled one
# changes course (its ledger opens by telling the model what it repeated); a run still
# stalled this many times in a row would only burn its budget.
SPIRAL_MAX_STALLS = 3

SPIRAL_NOTE = (
    "[agentgraph: since the previous compaction {what}. The progress ledger lists what is "
    "done: do not redo it; continue with what it does not list, or answer.]"
)


def spiral_note(repeated: int, calls: int) -> str:
    """The note that tells the model what the stalled stretch did."""
    if calls:
        what = f"{repeated} of {calls} tool calls repeated calls already made, with the same output"
    else:
        what = "no tool call was made"
    return SPIRAL_NOTE.format(what=what)


class CompactionSpiralError(AgentGraphError):
    """Compaction made no progress several times in a row: the run stops (exit 1)."""


# A compaction keeps its newest messages by moving copies after its boundary, with ids
# ``<original id>~<8 hex>`` (context/compaction.py): their calls were made before it.
_MOVED_ID_RE = re.compile(r"~[0-9a-f]{8}$")


@dataclass
class _Stretch:
    """The work between two compaction boundaries."""

    replies: list[list[str]] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)
    progress: bool = False  # a user request, or an answer in words


def _signature(call: Any, results: dict[str, str]) -> str:
    """A call as the tool, its arguments and a digest of its output: the same command
    run again with a new output (a poll, a test run after an edit) is new work."""
    try:
        args = json.dumps(call.get("args") or {}, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):
        args = str(call.get("args"))
    return f"{call.get('name')}({args})#{results.get(str(call.get('id')), '')}"


def _stretches(messages: Sequence[BaseMessage]) -> list[_Stretch]:
    """The stretches of work between automatic compaction boundaries.

    A manual compaction (``/compact``) is the user's, not a spiral's: its boundary does
    not end a stretch.
    """
    results: dict[str, str] = {}
    for msg in messages:
        if isinstance(msg, ToolMessage) and msg.tool_call_id not in results:
            digest = hashlib.sha1(msg.text.encode("utf-8", "replace")).hexdigest()[:12]
            results[msg.tool_call_id] = digest
    stretches = [_Stretch()]
    for msg in messages:
        kind = agentgraph_kind(msg)
        moved = bool(msg.id and _MOVED_ID_RE.search(msg.id))
        if kind == "compact_boundary":
            record = msg.additional_kwargs.get(AGENTGRAPH_KEY) or {}
            if record.get("trigger") != "manual":
                stretches.append(_Stretch())
        elif is_user_request(msg):
            # The pending request a compaction kept is not a new one.
            stretches[-1].progress = stretches[-1].progress or not moved
        elif isinstance(msg, AIMessage) and kind is None:
            calls = [_signature(c, results) for c in msg.tool_calls]
            if moved:
                stretches[-1].moved.extend(calls)
            elif calls:
                stretches[-1].replies.append(calls)
            elif msg.text.strip():
                stretches[-1].progress = True
    return stretches


def stalled_compactions(messages: Sequence[BaseMessage]) -> tuple[int, int, int]:
    """Stalled compactions in a row, counting the one about to compact ``messages``.

    A compaction is stalled when an automatic compaction came before it and, since
    then, the user asked nothing, the model answered nothing in words, and its tool
    calls were fewer than :data:`SPIRAL_MIN_CALLS_BETWEEN` or all repeated a call made
    before that compaction with the same output (same tool, arguments and result).

    Args:
        messages: The whole stored history.

    Returns:
        ``(stalls in a row, repeated calls, calls)``, the last two of the stretch since
        the last boundary.
    """
    stretches = _stretches(messages)
    if len(stretches) < 2:
        return 0, 0, 0
    seen: set[str] = set()
    before: list[set[str]] = []
    for stretch in stretches:
        seen.update(stretch.moved)  # made before its boundary, moved after it
        before.append(set(seen))
        seen.update(sig for reply in stretch.replies for sig in reply)
    stalls = repeated = calls = 0
    for k in range(len(stretches) - 1, 0, -1):
        stretch = stretches[k]
        made = [sig for reply in stretch.replies for sig in reply]
        again = sum(sig in before[k] for sig in made)
        if k == len(stretches) - 1:
            repeated, calls = again, len(made)
        idle = len(stretch.replies) < SPIRAL_MIN_CALLS_BETWEEN
        if not stretch.progress and (idle or again == len(made)):
            stalls += 1
        else:
            break
    return stalls, repeated, calls
