"""The spiral guard: compactions that make no progress, found from the history alone.

A compaction spiral is the failure users of every long-running agent report: the
summary loses what was done, the model redoes it, the prompt fills again, the next
summary loses it again, and the run burns its budget going round. Seen from the
history, the work between two compactions then holds no request from the user, no
answer in words and no tool call that was not already made before the earlier one with
the same output, or no model call at all. A call that searches or reads the session's
own history again (the same query, the same reference) is no new work whatever its
output: a search's output grows with the transcript, so a model searching again for
what each compaction summarized away looked busy until its loop cap.

:func:`stalled_compactions` counts such compactions in a row, ending with the one about
to happen. Derived from the stored history (the boundaries and the calls between them),
so a resumed session counts exactly what the previous process counted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from agentgraph.capabilities.tools.spec import tools_where
from agentgraph.errors import AgentGraphError
from agentgraph.runtime.history import AGENTGRAPH_KEY, agentgraph_kind, is_user_request

__all__ = [
    "SPIRAL_MAX_STALLS",
    "SPIRAL_MIN_CALLS_BETWEEN",
    "SPIRAL_NOTE",
    "CompactionSpiralError",
    "Stalls",
    "repeat_streak",
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


def spiral_note(repeated: int, calls: int, *, recalled: int = 0) -> str:
    """The note that tells the model what the stalled stretch did: of ``calls`` tool
    calls, ``repeated`` repeated earlier ones with the same output and ``recalled``
    searched or read the history again."""
    if calls:
        what = f"{repeated} of {calls} tool calls repeated calls already made, with the same output"
        if recalled:
            what += f", and {recalled} searched or read the session's history again"
    else:
        what = "no tool call was made"
    return SPIRAL_NOTE.format(what=what)


class CompactionSpiralError(AgentGraphError):
    """Compaction made no progress several times in a row: the run stops (exit 1)."""


# A compaction keeps its newest messages by moving copies after its boundary, with ids
# ``<original id>~<8 hex>`` (context/compaction.py): their calls were made before it.
_MOVED_ID_RE = re.compile(r"~[0-9a-f]{8}$")

# Tools whose results are the session's history brought back (search_history,
# read_history).
_RECALL_TOOLS = tools_where(lambda spec: spec.recall)


@dataclass
class _Stretch:
    """The work between two compaction boundaries."""

    replies: list[list[_Call]] = field(default_factory=list)
    moved: list[_Call] = field(default_factory=list)
    progress: bool = False  # a user request, or an answer in words


class _Call(NamedTuple):
    """One tool call as the guards compare it."""

    key: str  # the tool and its arguments
    result: ToolMessage | None
    recall: bool  # it brings back the session's history: made again, no new work


def _signature(call: Any, results: dict[str, ToolMessage]) -> _Call:
    """A call as the tool, its arguments and its output's hash: the same command run
    again with a new output (a poll, a test run after an edit) is new work. The hash is
    Python's own (the stall count is never stored, so it need not be stable across
    processes), taken lazily: only calls made twice compare outputs."""
    try:
        args = json.dumps(call.get("args") or {}, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):
        args = str(call.get("args"))
    name = call.get("name")
    return _Call(f"{name}({args})", results.get(str(call.get("id"))), str(name) in _RECALL_TOOLS)


def output_hash(result: ToolMessage) -> int:
    """The hash of a tool result's text: what "the same output" means to the guards.

    A string content is hashed itself, whose hash Python keeps on the string: the
    ``text`` property builds a new string on every access, rehashed each time (a
    history's outputs are compared at every step and every compaction).
    """
    content = result.content
    return hash(content if isinstance(content, str) else result.text)


def repeat_streak(messages: Sequence[BaseMessage], reply: AIMessage) -> int:
    """Times in a row, just before ``reply``, the model made exactly ``reply``'s tool
    calls and got the same output each time.

    A repeat is the spiral guard's: the same tool, the same arguments and the same
    output (the same command polled until its output changes is progress). Counted
    back from the end of ``messages`` over the replies of the current request; an
    answer in words, a different set of calls, a new user request or a compaction
    boundary ends the streak.

    Args:
        messages: The history before ``reply`` (its tool results included).
        reply: The model's newest reply, whose calls have not run yet.

    Returns:
        0 when ``reply`` makes no call or the previous reply made other calls.
    """
    if not reply.tool_calls:
        return 0
    wanted = sorted(_signature(call, {}).key for call in reply.tool_calls)
    results: dict[str, ToolMessage] = {}
    streak = 0
    previous: list[tuple[str, int]] | None = None
    for msg in reversed(messages):
        kind = agentgraph_kind(msg)
        if isinstance(msg, ToolMessage):
            results.setdefault(msg.tool_call_id, msg)
            continue
        if kind == "compact_boundary" or is_user_request(msg):
            break
        if not isinstance(msg, AIMessage) or kind is not None:
            continue
        if not msg.tool_calls:
            break  # an answer in words
        calls = [_signature(call, results) for call in msg.tool_calls]
        if sorted(c.key for c in calls) != wanted or any(c.result is None for c in calls):
            break
        made = sorted((c.key, output_hash(c.result)) for c in calls if c.result is not None)
        if previous is not None and made != previous:
            break
        previous = made
        streak += 1
    return streak


def _stretches(messages: Sequence[BaseMessage]) -> list[_Stretch]:
    """The stretches of work between automatic compaction boundaries.

    A manual compaction (``/compact``) is the user's, not a spiral's: its boundary does
    not end a stretch.
    """
    results: dict[str, ToolMessage] = {}
    for msg in messages:
        if isinstance(msg, ToolMessage) and msg.tool_call_id not in results:
            results[msg.tool_call_id] = msg
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


class Stalls(NamedTuple):
    """Stalled compactions in a row, and what the newest stretch of work did."""

    stalls: int
    repeated: int  # calls that repeated one made before, with the same output
    recalled: int  # searches or reads of the session's history made before
    calls: int


def stalled_compactions(messages: Sequence[BaseMessage]) -> Stalls:
    """Stalled compactions in a row, counting the one about to compact ``messages``.

    A compaction is stalled when an automatic compaction came before it and, since
    then, the user asked nothing, the model answered nothing in words, and its tool
    calls were fewer than :data:`SPIRAL_MIN_CALLS_BETWEEN` or all repeated a call made
    before that compaction: with the same output (same tool, arguments and result), or
    a search or read of the session's history with the same arguments.

    Args:
        messages: The whole stored history.

    Returns:
        The stalls in a row; the calls repeated with the same output, the searches or
        reads of the history repeated, and all calls of the stretch since the last
        boundary.
    """
    stretches = _stretches(messages)
    if len(stretches) < 2:
        return Stalls(0, 0, 0, 0)
    outputs: dict[int, int] = {}  # id of a result message -> hash of its text, once

    def output(result: ToolMessage | None) -> int:
        if result is None:
            return 0
        key = id(result)
        if key not in outputs:
            outputs[key] = output_hash(result)
        return outputs[key]

    # Per call (tool and arguments): its results, with the stretch of each (a moved
    # copy's call counts as made before its stretch).
    made_in: dict[str, list[tuple[float, ToolMessage | None]]] = {}
    for k, stretch in enumerate(stretches):
        for call in stretch.moved:
            made_in.setdefault(call.key, []).append((k - 0.5, call.result))
        for reply in stretch.replies:
            for call in reply:
                made_in.setdefault(call.key, []).append((k, call.result))

    def made_before(call: _Call, k: int) -> bool:
        earlier = [result for at, result in made_in.get(call.key, ()) if at < k]
        if not earlier:
            return False
        if call.recall:
            return True  # brought back again: its output only grew with the transcript
        text = output(call.result)
        return any(output(result) == text for result in earlier)

    stalls = repeated = recalled = calls = 0
    for k in range(len(stretches) - 1, 0, -1):
        stretch = stretches[k]
        made = [sig for reply in stretch.replies for sig in reply]
        repeats = [sig for sig in made if made_before(sig, k)]
        recalls = sum(sig.recall for sig in repeats)
        again = len(repeats) - recalls
        if k == len(stretches) - 1:
            repeated, recalled, calls = again, recalls, len(made)
        idle = len(stretch.replies) < SPIRAL_MIN_CALLS_BETWEEN
        if not stretch.progress and (idle or again + recalls == len(made)):
            stalls += 1
        else:
            break
    return Stalls(stalls, repeated, recalled, calls)
