"""Tool-call ids unique in a session, whatever the provider sent.

Providers and local servers send duplicate ids inside one message, reuse an id
from an earlier turn (some count from ``call_0`` on every reply), send ``""``,
or send one constant id. A strict provider then rejects every later request
(duplicate ids), or a result is paired with the wrong call and the model loops.

Two entry points, both pure (inputs never mutated; untouched messages are the
same objects):

* :func:`admit_reply` rewrites the calls of one new assistant message before it
  enters the history (before the tools run, so the results carry the new ids).
* :func:`unique_call_ids` repairs a whole history: an import, or a session
  stored before ids were rewritten. Results are matched to the calls of the
  assistant message they follow, in order, and get the same new ids.

A rewritten call keeps the provider's id in the message's metadata:
``additional_kwargs["agentgraph"]["provider_ids"][new_id] = provider_id``
(exports carry it). Calls whose id is fine keep it.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict, deque
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from agentgraph.runtime.transcript_prefix import common_prefix

__all__ = [
    "PROVIDER_IDS_KEY",
    "SessionCallIds",
    "admit_reply",
    "call_ids",
    "provider_ids",
    "unique_call_ids",
]

# Same key as history.AGENTGRAPH_KEY (history imports this module, not the reverse).
_META_KEY = "agentgraph"
PROVIDER_IDS_KEY = "provider_ids"
"""Key in the agentgraph metadata: ``{rewritten id: the provider's id}``."""

# Fresh ids look like OpenAI's and match Anthropic's ``^[a-zA-Z0-9_-]+$``.
FRESH_ID_PREFIX = "call_ag"
# 96 bits of a hash: a collision between two fresh ids is not a practical concern;
# one with an existing id is still checked.
FRESH_ID_HEX_CHARS = 24


def _calls_of(msg: BaseMessage) -> list[dict[str, Any]]:
    """Every call of an assistant message (valid then invalid), in order."""
    if type(msg) is not AIMessage and not isinstance(msg, AIMessage):
        return []
    return [*msg.tool_calls, *msg.invalid_tool_calls]  # type: ignore[list-item]


def _ids_of(msg: BaseMessage) -> tuple[str, ...]:
    """The non-empty call ids ``msg`` uses (its calls, or the call it answers)."""
    if isinstance(msg, ToolMessage):
        return (msg.tool_call_id,) if msg.tool_call_id else ()
    if isinstance(msg, AIMessage):
        return tuple(cid for cid in (str(tc.get("id") or "") for tc in _calls_of(msg)) if cid)
    return ()


def call_ids(messages: Iterable[BaseMessage]) -> set[str]:
    """Every tool-call id a history uses: calls of assistant messages and results.

    Args:
        messages: A history.

    Returns:
        The set of ids (an empty id is left out).
    """
    out: set[str] = set()
    for msg in messages:
        if isinstance(msg, ToolMessage):
            out.add(msg.tool_call_id)
        elif isinstance(msg, AIMessage):
            out.update(str(tc.get("id") or "") for tc in _calls_of(msg))
    out.discard("")
    return out


def provider_ids(msg: BaseMessage) -> dict[str, str]:
    """The provider's ids of the calls of ``msg`` that were rewritten.

    Args:
        msg: Any message.

    Returns:
        ``{rewritten id: provider id}`` (empty when nothing was rewritten).
    """
    meta = msg.additional_kwargs.get(_META_KEY)
    if isinstance(meta, Mapping):
        ids = meta.get(PROVIDER_IDS_KEY)
        if isinstance(ids, Mapping):
            return {str(k): str(v) for k, v in ids.items()}
    return {}


def _fresh_id(seed: str, *taken: Collection[str]) -> str:
    """A deterministic new id from ``seed`` that is not in ``taken``.

    Deterministic so that building the prompt view twice gives equal messages
    (prompt caching) and replaying a stored history gives the same ids.
    """
    n = 0
    while True:
        digest = hashlib.sha1(f"{seed}#{n}".encode()).hexdigest()[:FRESH_ID_HEX_CHARS]
        candidate = FRESH_ID_PREFIX + digest
        if not any(candidate in ids for ids in taken):
            return candidate
        n += 1


def _renamed(msg: AIMessage, new_ids: list[str]) -> AIMessage:
    """Copy of ``msg`` whose calls (valid then invalid) carry ``new_ids``."""
    old_ids = [str(tc.get("id") or "") for tc in _calls_of(msg)]
    n_valid = len(msg.tool_calls)
    tool_calls = [{**tc, "id": new_ids[i]} for i, tc in enumerate(msg.tool_calls)]
    invalid = [{**tc, "id": new_ids[n_valid + i]} for i, tc in enumerate(msg.invalid_tool_calls)]
    kwargs = dict(msg.additional_kwargs)
    # The raw OpenAI-format calls are renamed too: langchain-openai sends them when
    # ``tool_calls`` is empty, and deserialization rebuilds ``tool_calls`` from them.
    raw = kwargs.get("tool_calls")
    if isinstance(raw, list):
        queues: dict[str, deque[str]] = {}
        for old, new in zip(old_ids, new_ids, strict=True):
            queues.setdefault(old, deque()).append(new)
        renamed_raw: list[Any] = []
        for entry in raw:
            if isinstance(entry, Mapping):
                queue = queues.get(str(entry.get("id") or ""))
                if queue:
                    entry = {**entry, "id": queue.popleft()}
            renamed_raw.append(entry)
        kwargs["tool_calls"] = renamed_raw
    meta = dict(kwargs.get(_META_KEY) or {})
    known = dict(meta.get(PROVIDER_IDS_KEY) or {})
    for old, new in zip(old_ids, new_ids, strict=True):
        if old != new:
            # A call rewritten twice keeps the provider's first id.
            known[new] = known.pop(old, old)
    meta[PROVIDER_IDS_KEY] = known
    kwargs[_META_KEY] = meta
    update = {"tool_calls": tool_calls, "invalid_tool_calls": invalid, "additional_kwargs": kwargs}
    return msg.model_copy(update=update)


def _new_ids(msg: AIMessage, seen: set[str], ordinal: int) -> list[str] | None:
    """Ids for the calls of ``msg`` unique against ``seen`` (updated), or None if all fit."""
    calls = _calls_of(msg)
    ids = [str(tc.get("id") or "") for tc in calls]
    out: list[str] = []
    changed = False
    for k, cid in enumerate(ids):
        if not cid or cid in seen or cid in out:
            # Seeded by the message id (stable across rebuilds of the view); an
            # id-less message (never stored) falls back to its position.
            cid = _fresh_id(f"{msg.id or ordinal}|{k}|{cid}", seen, out, ids)
            changed = True
        out.append(cid)
    seen.update(out)
    return out if changed else None


def unique_call_ids(
    messages: Sequence[BaseMessage], *, seen: Iterable[str] = ()
) -> tuple[list[BaseMessage], int]:
    """Give every tool call of a history an id used by no other call.

    A call whose id is empty, repeats inside its message, or was used by an
    earlier call gets a fresh deterministic id; the results that follow its
    message with the old id are given the new one, matched in call order (the
    n-th result with id X answers the n-th call with id X). Results before any
    such message, and surplus results, are left as they are (repairing their
    pairing is :func:`agentgraph.runtime.history.repair.normalize_with_report` 's job). Messages
    whose message id repeats are passed through untouched (the repair drops them).

    Args:
        messages: A history.
        seen: Ids already used before ``messages`` (e.g. the stored history when
            ``messages`` is new).

    Returns:
        ``(messages, renamed calls)``; the input list itself when nothing changed.
    """
    taken = set(seen)
    seen_msg_ids: set[str] = set()
    queues: dict[str, deque[str]] = {}
    out: list[BaseMessage] | None = None
    renamed = 0
    for i, msg in enumerate(messages):
        cls = type(msg)
        new: BaseMessage = msg
        if msg.id:
            if msg.id in seen_msg_ids:
                if out is not None:
                    out.append(msg)
                continue
            seen_msg_ids.add(msg.id)
        if cls is ToolMessage or (cls is not AIMessage and isinstance(msg, ToolMessage)):
            queue = queues.get(msg.tool_call_id)  # type: ignore[attr-defined]
            if queue:
                target = queue.popleft()
                if target != msg.tool_call_id:  # type: ignore[attr-defined]
                    new = msg.model_copy(update={"tool_call_id": target})
        elif cls is AIMessage or isinstance(msg, AIMessage):
            calls = _calls_of(msg)
            if calls:
                ids = _new_ids(msg, taken, i)  # type: ignore[arg-type]
                old = [str(tc.get("id") or "") for tc in calls]
                final = ids if ids is not None else old
                # The results that follow this message answer its calls: a later
                # use of an id takes over the queue of an earlier one.
                for cid in set(old):
                    queues[cid] = deque()
                for o, f in zip(old, final, strict=True):
                    queues[o].append(f)
                if ids is not None:
                    renamed += sum(1 for o, f in zip(old, ids, strict=True) if o != f)
                    new = _renamed(msg, ids)  # type: ignore[arg-type]
        if new is not msg and out is None:
            out = list(messages[:i])
        if out is not None:
            out.append(new)
    return (out if out is not None else list(messages)), renamed


class _Seen:
    """One session's history as last seen, its call ids per message and their counts."""

    def __init__(self) -> None:
        self.messages: list[BaseMessage] = []
        self.per_message: list[tuple[str, ...]] = []
        self.counts: dict[str, int] = {}

    def update(self, history: Sequence[BaseMessage]) -> None:
        """Become ``history``: only the messages after the first difference are read."""
        k = common_prefix(history, self.messages)
        counts = self.counts
        for ids in self.per_message[k:]:
            for cid in ids:
                left = counts[cid] - 1
                if left:
                    counts[cid] = left
                else:
                    del counts[cid]
        del self.per_message[k:]
        for msg in history[k:]:
            ids = _ids_of(msg)
            self.per_message.append(ids)
            for cid in ids:
                counts[cid] = counts.get(cid, 0) + 1
        self.messages = list(history)


# Sessions whose call ids are remembered (a run's main thread and its subagents).
SESSION_CALL_IDS_MAX = 8


class SessionCallIds:
    """The call ids of each session's history, kept up to date at the cost of the change.

    :func:`admit_reply` needs every id the history uses; reading the whole history for
    each reply made a model turn cost grow with the session. This remembers, per
    session key, the history last seen and the ids of each message; the next history
    is compared with it element by element (identity first) and only the messages
    after the first difference are read. Thread-safe.
    """

    def __init__(self, max_sessions: int = SESSION_CALL_IDS_MAX) -> None:
        self._sessions: OrderedDict[Hashable, _Seen] = OrderedDict()
        self._max = max_sessions
        self._lock = threading.Lock()

    def ids(self, key: Hashable, history: Sequence[BaseMessage]) -> Collection[str]:
        """Every non-empty call id ``history`` uses (equal to :func:`call_ids`).

        The result is a live view: read it before the next call for the same key.
        """
        with self._lock:
            seen = self._sessions.pop(key, None) or _Seen()
            seen.update(history)
            self._sessions[key] = seen
            while len(self._sessions) > self._max:
                self._sessions.popitem(last=False)
            return seen.counts.keys()


def admit_reply(
    reply: AIMessage, history: Sequence[BaseMessage], *, taken: Collection[str] | None = None
) -> AIMessage:
    """The reply with call ids unique in the session, ready to enter the history.

    Args:
        reply: A new assistant message (a provider's reply, streamed or not).
        history: The session's stored history (every id it uses is taken).
        taken: The ids ``history`` uses, when the caller keeps them already
            (:class:`SessionCallIds`); computed from ``history`` otherwise.

    Returns:
        ``reply`` itself when its ids are fine, else a renamed copy (see
        :func:`unique_call_ids`).
    """
    calls = _calls_of(reply)
    if not calls:
        return reply
    used = call_ids(history) if taken is None else taken
    ids = [str(tc.get("id") or "") for tc in calls]
    if all(ids) and len(set(ids)) == len(ids) and not any(cid in used for cid in ids):
        return reply  # what unique_call_ids would return: nothing to rename
    out, _ = unique_call_ids([reply], seen=used)
    result = out[0]
    assert isinstance(result, AIMessage)
    return result
