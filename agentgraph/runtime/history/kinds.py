"""The message-kind convention: agentgraph's marker in ``additional_kwargs``.

A message agentgraph writes for itself (a compaction summary, a re-injected
file, a synthetic tool result, an internal record) carries
``additional_kwargs["agentgraph"] = {"kind": ...}``; an ordinary message carries
no marker. These helpers read the marker and find the user's latest request.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TypeVar

from langchain_core.messages import BaseMessage, HumanMessage

AGENTGRAPH_KEY = "agentgraph"
"""Key in ``additional_kwargs`` holding agentgraph's marker dict (``{"kind": ...}``)."""

TIMESTAMP_KEY = "timestamp"
"""Key in the marker dict: when the message entered the history (Unix seconds)."""

# The range of datetime (years 1 to 9999), in Unix seconds.
TIMESTAMP_MIN_S = -62_135_596_800
TIMESTAMP_MAX_S = 253_402_300_799

_M = TypeVar("_M", bound=BaseMessage)

INTERNAL_KINDS = frozenset({"compact_boundary", "snapshot", "notice"})
"""Marker kinds that are records for agentgraph only and never reach the model."""

UNDO_NOTE_KIND = "undo_note"
"""A note telling the model that the user's /undo put files back (sent, not a request)."""

MODE_NOTE_KIND = "mode_note"
"""A note telling the model the session's permission mode changed (sent, not a request)."""

SUBAGENT_NOTICE_KIND = "subagent_notice"
"""A background subagent's outcome, delivered to the model at its next call (sent)."""

HOOK_CONTEXT_KIND = "hook_context"
"""What a ``SessionStart`` / ``UserPromptSubmit`` hook printed, given to the model (sent)."""

NON_REQUEST_KINDS = INTERNAL_KINDS | frozenset(
    {
        "summary",
        "reinjected_file",
        "ledger",
        "resume",
        UNDO_NOTE_KIND,
        SUBAGENT_NOTICE_KIND,
        HOOK_CONTEXT_KIND,
        MODE_NOTE_KIND,
    }
)
"""Kinds of HumanMessage that carry context, not a request typed by the user."""

SYNTHETIC_RESULT_KIND = "synthetic_result"
SYNTHETIC_RESULT_TEMPLATE = "aborted: no result was recorded for this call ({reason})"
SYNTHETIC_REASON_INTERRUPTED = "interrupted"
# Deterministic ids: rebuilding the view twice yields equal messages, and a
# synthetic result persisted into the state is replaced, not duplicated, by
# LangGraph's add_messages reducer.
SYNTHETIC_ID_PREFIX = "agentgraph-synthetic-"


def agentgraph_kind(msg: BaseMessage) -> str | None:
    """Return the agentgraph marker kind of a message.

    Args:
        msg: Any message.

    Returns:
        ``msg.additional_kwargs["agentgraph"]["kind"]`` when it is a string,
        else ``None`` (an ordinary message).
    """
    meta = msg.additional_kwargs.get(AGENTGRAPH_KEY)
    if meta is None:  # the common case; isinstance against an ABC is slow
        return None
    if type(meta) is dict or isinstance(meta, Mapping):
        kind = meta.get("kind")
        if isinstance(kind, str):
            return kind
    return None


def is_user_request(msg: BaseMessage) -> bool:
    """Whether ``msg`` is a request from the user (not a summary or re-injected file).

    Args:
        msg: Any message.

    Returns:
        True for a HumanMessage whose kind is not in :data:`NON_REQUEST_KINDS`.
    """
    return isinstance(msg, HumanMessage) and agentgraph_kind(msg) not in NON_REQUEST_KINDS


def latest_user_request_index(messages: Sequence[BaseMessage]) -> int | None:
    """Index of the latest user request, the message that must never be dropped.

    Args:
        messages: A history.

    Returns:
        The index of the last :func:`is_user_request` message; failing that, of
        the last HumanMessage of any kind (e.g. a compaction summary); ``None``
        when there is no HumanMessage at all.
    """
    last_human: int | None = None
    for i in range(len(messages) - 1, -1, -1):
        msg = messages[i]
        if isinstance(msg, HumanMessage):
            if is_user_request(msg):
                return i
            if last_human is None:
                last_human = i
    return last_human


def message_time(msg: BaseMessage) -> float | None:
    """When ``msg`` entered the history (Unix seconds), if it was stamped."""
    meta = msg.additional_kwargs.get(AGENTGRAPH_KEY)
    value = meta.get(TIMESTAMP_KEY) if isinstance(meta, Mapping) else None
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    # NaN, or an imported or hand-edited value outside what a date can show, is no time.
    return float(value) if TIMESTAMP_MIN_S <= value <= TIMESTAMP_MAX_S else None


def stamped(msg: _M, when: float | None = None, *, again: bool = False) -> _M:
    """``msg`` with the time it enters the history (now, or ``when``) in its marker dict.

    Not sent to any provider (``additional_kwargs["agentgraph"]`` never is) and not
    counted; exports date each message with it. A message already stamped is returned
    as it is, unless ``again`` (an import dates it as its file says).
    """
    if not again and message_time(msg) is not None:
        return msg
    return with_marker(msg, **{TIMESTAMP_KEY: time.time() if when is None else when})


# Marker field of the answer a request ended with at a limit: the limit's reason
# (agentgraph.runtime.nodes.limits: max_loops, budget, repeated_calls).
STOPPED_KEY = "stopped"


def stopped_reason(msg: BaseMessage) -> str | None:
    """The limit a request stopped at, on the answer it ended with; None otherwise."""
    meta = msg.additional_kwargs.get(AGENTGRAPH_KEY)
    reason = meta.get(STOPPED_KEY) if isinstance(meta, Mapping) else None
    return str(reason) if reason else None


def with_marker(msg: _M, **fields: object) -> _M:
    """A copy of ``msg`` whose marker dict has ``fields`` set (the rest of it kept)."""
    meta = msg.additional_kwargs.get(AGENTGRAPH_KEY)
    marker = {**(meta if isinstance(meta, Mapping) else {}), **fields}
    kwargs = {**msg.additional_kwargs, AGENTGRAPH_KEY: marker}
    return msg.model_copy(update={"additional_kwargs": kwargs})
