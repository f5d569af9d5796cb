"""The ``messages`` channel stored as deltas: linear storage for long sessions.

LangGraph's default channel stores the whole message list in every checkpoint, so
a session's database grows quadratically (7 GB after 1,000 realistic messages).
:class:`~langgraph.channels.delta.DeltaChannel` stores only each step's new writes
plus a full snapshot every ``snapshot_frequency`` updates, and rebuilds the value
by replaying the writes after the nearest snapshot through a *batch* reducer.

:func:`messages_delta_reducer` is that reducer. It has exactly the semantics of
LangGraph's default channel with :func:`~langgraph.graph.message.add_messages`:
the default channel folds ``add_messages`` over the writes one by one, and so does
this reducer, in one pass. Because it is a fold it is batching-invariant
(``r(r(s, xs), ys) == r(s, xs + ys)``), as ``DeltaChannel`` requires. Note that
a single ``add_messages`` call over the concatenated writes would *not* be: a
``RemoveMessage(id)`` followed by a re-add of the same id keeps the message in
place within one call but moves it to the end across two.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import (
    AnyMessage,
    BaseMessage,
    BaseMessageChunk,
    RemoveMessage,
    convert_to_messages,
    message_chunk_to_message,
)
from langgraph.channels.delta import DeltaChannel
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages

# Updates to ``messages`` between two full snapshots. Each snapshot stores the
# whole list; between snapshots a load replays at most this many writes. 200
# keeps a load to a few ms of replay while snapshots stay a small share of the
# bytes until pruning drops the older ones (see persistence/prune.py).
MESSAGES_SNAPSHOT_FREQUENCY_UPDATES = 200


def _as_list(write: Any) -> list[Any]:
    return write if isinstance(write, list) else [write]


def _coerce(items: list[Any]) -> list[Any]:
    """Messages as ``add_messages`` would see them (dicts/tuples/chunks converted)."""
    # Checking the few distinct types is much cheaper than isinstance per item.
    if all(
        issubclass(t, BaseMessage) and not issubclass(t, BaseMessageChunk)
        for t in set(map(type, items))
    ):
        return items
    return [
        message_chunk_to_message(m) if isinstance(m, BaseMessageChunk) else m
        for m in convert_to_messages(items)
    ]


# Recent outputs of the reducer remembered, with their id → position index.
# LangGraph reads a channel through copies (conditional edges apply the step's
# writes to a copy), so a few outputs are alive at once; one per thread the REPL,
# a subagent or a server worker runs is at most a few more.
MEMO_MAX_RESULTS = 8
# A remembered index is a shared base plus the ids added since it was built; past
# this many additions the two are merged into a new base.
INDEX_OVERLAY_MAX_IDS = 512


class _Positions:
    """id → position of one list: a shared base mapping plus this list's own changes.

    The base is never changed once built, so the outputs of consecutive steps share
    it and a step copies only the few ids it added (copying a 5,000-entry dict at
    every step, and freeing it later, was most of the reducer's time).
    """

    __slots__ = ("added", "base", "gone")

    def __init__(self, base: dict[str, int], added: dict[str, int] | None = None) -> None:
        self.base = base
        self.added: dict[str, int] = dict(added) if added else {}
        self.gone: set[str] = set()

    def get(self, mid: str) -> int | None:
        pos = self.added.get(mid)
        if pos is not None or mid in self.gone:
            return pos
        return self.base.get(mid)

    def add(self, mid: str, pos: int) -> None:
        self.added[mid] = pos

    def remove(self, mid: str) -> int | None:
        pos = self.get(mid)
        self.added.pop(mid, None)
        self.gone.add(mid)
        return pos

    def shareable(self) -> tuple[dict[str, int], dict[str, int]]:
        """(base, additions) to remember with the output (nothing was removed)."""
        if len(self.added) > INDEX_OVERLAY_MAX_IDS:
            return {**self.base, **self.added}, {}
        return self.base, self.added


class _Memo:
    """Recent lists this reducer returned and their indexes, shared by all threads.

    The channel feeds the reducer (a shallow copy of) its own previous output on
    every step, so reusing the index makes a step cost its writes, not the
    session length. Shared rather than per thread: LangGraph runs nodes in
    worker threads, so a per-thread memory missed on most steps and rebuilt the
    index of the whole transcript ~15 times per turn. A hit is decided by
    element identity, so another thread's entry can only match the very same
    messages, and only the entry's own additions are copied before use.
    """

    def __init__(self) -> None:
        self.entries: list[tuple[list[Any], dict[str, int], dict[str, int]]] = []
        self.lock = threading.Lock()


_MEMO = _Memo()


def _index_of(state: list[Any]) -> _Positions | None:
    """A fresh id → position index of ``state``, or None when it needs the slow path."""
    # List equality compares identity element by element first: for a shallow copy
    # of a remembered output this is a C-speed pointer scan.
    with _MEMO.lock:
        entries = list(_MEMO.entries)
    for result, base, added in entries[::-1]:
        if len(result) == len(state) and (state is result or state == result):
            return _Positions(base, added)
    index: dict[str, int] = {}
    for i, m in enumerate(state):
        if m.id is None:
            # add_messages gives id-less messages a random id; only the slow path
            # can reproduce that exactly (stored state always has ids).
            return None
        index[m.id] = i
    if len(index) != len(state):
        return None  # duplicate ids: add_messages' "last one wins" needs the fold
    return _Positions(index)


def _memorize(result: list[Any], index: _Positions | None) -> None:
    if index is None:
        return
    base, added = index.shareable()
    with _MEMO.lock:
        _MEMO.entries.append((result, base, added))
        del _MEMO.entries[:-MEMO_MAX_RESULTS]


def messages_delta_reducer(state: Sequence[Any], writes: Sequence[Any]) -> list[AnyMessage]:
    """Apply a batch of ``messages`` writes, exactly as ``add_messages`` write by write.

    Args:
        state: The current list of messages (never mutated).
        writes: Writes in order; each is a message or a list of messages (the value
            a node returned for ``messages``).

    Returns:
        A new list equal to ``functools.reduce(add_messages, writes, state)``.

    Raises:
        ValueError: A ``RemoveMessage`` names an id that does not exist (as
            ``add_messages``).
    """
    base: list[Any] = state if isinstance(state, list) else list(state)
    index = _index_of(base)
    if index is None:
        base = _coerce(base)
        index = _index_of(base)
        if index is None:
            return _fold(base, writes)
    result: list[Any] = list(base)
    tombstones = False
    for n, write in enumerate(writes):
        items = _coerce(_as_list(write))
        if any(m.id is None for m in items) or any(
            isinstance(m, RemoveMessage) and m.id == REMOVE_ALL_MESSAGES for m in items
        ):
            # Rare shapes (no ids, remove-all): exact fold for this write and the rest.
            return _fold([m for m in result if m is not None], writes[n:])
        removed: set[str] = set()
        for m in items:
            mid: str = m.id or ""  # every id is set here (checked above)
            pos = index.get(mid)
            if pos is not None:
                if isinstance(m, RemoveMessage):
                    removed.add(mid)
                else:
                    removed.discard(mid)
                    result[pos] = m
            elif isinstance(m, RemoveMessage):
                raise ValueError(
                    f"Attempting to delete a message with an ID that doesn't exist ('{mid}')"
                )
            else:
                index.add(mid, len(result))
                result.append(m)
        for mid in removed:
            gone = index.remove(mid)
            if gone is not None:
                result[gone] = None
            tombstones = True
    if tombstones:
        result = [m for m in result if m is not None]
        _memorize(result, None)  # positions moved: rebuilt on the next call
    else:
        _memorize(result, index)
    return result


def _fold(state: list[Any], writes: Sequence[Any]) -> list[AnyMessage]:
    """The reference semantics: ``add_messages`` applied to each write in turn."""
    value: Any = list(state)
    for write in writes:
        value = add_messages(value, write)
    return list(value)


def messages_channel(
    snapshot_frequency: int = MESSAGES_SNAPSHOT_FREQUENCY_UPDATES,
) -> DeltaChannel[list[AnyMessage]]:
    """The ``DeltaChannel`` used for ``AppState.messages``."""
    return DeltaChannel(messages_delta_reducer, list, snapshot_frequency=snapshot_frequency)
