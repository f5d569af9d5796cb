"""What a transcript index must change to match a thread's messages, at the cost of the change.

Both transcript indexes (SQLite FTS5 and Postgres) keep one row per searchable message
(``msg_id`` → position, role, body) and are synced after every turn. Computing the
documents of the whole transcript and reading back every stored row of the thread each
time made a turn cost grow with the session (at 5,000 messages it was the largest
per-turn cost).

:class:`IndexMirror` remembers, per thread, the message list it last synced and the rows
that sync left in the index. The next sync compares the new list with the remembered one
element by element (identity first, a pointer scan), so only the messages after the
first difference are turned into documents: a turn's new messages, or the tail a
compaction moved. The change it computes is exactly the one the full comparison gives
(see :func:`full_plan`); whenever it cannot be sure (first sync of a thread in this
process, a message id that repeats, an index rebuilt) it falls back to that full
comparison against the stored rows.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from langchain_core.messages import BaseMessage

from agentgraph.runtime.transcript_prefix import common_prefix

__all__ = ["MIRROR_MAX_THREADS", "Doc", "IndexMirror", "SyncPlan", "full_plan"]

# Threads whose last synced transcript is remembered (the REPL uses one or two;
# subagents add a few). Each entry holds references to messages the state holds anyway.
MIRROR_MAX_THREADS = 8


class Doc(Protocol):
    """A searchable message: its index key and its position in the transcript."""

    @property
    def msg_id(self) -> str: ...
    @property
    def position(self) -> int: ...


D = TypeVar("D", bound=Doc)

DocsOf = Callable[[Sequence[BaseMessage], int], list[D]]
"""``docs_of(messages, start)``: the documents of ``messages``, numbered from ``start``."""


@dataclass
class SyncPlan(Generic[D]):
    """The rows to change so that the index matches a transcript.

    Attributes:
        gone: Message ids whose rows are deleted.
        moved: ``(msg_id, new position)`` of rows whose position changed.
        new: Documents to insert.
    """

    gone: list[str] = field(default_factory=list)
    moved: list[tuple[str, int]] = field(default_factory=list)
    new: list[D] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.gone or self.moved or self.new)


def full_plan(docs: Mapping[str, D], stored: Mapping[str, int]) -> SyncPlan[D]:
    """The change from ``stored`` rows (``msg_id`` → position) to ``docs`` (the reference)."""
    return SyncPlan(
        gone=[msg_id for msg_id in stored if msg_id not in docs],
        moved=[
            (msg_id, d.position)
            for msg_id, d in docs.items()
            if msg_id in stored and stored[msg_id] != d.position
        ],
        new=[d for msg_id, d in docs.items() if msg_id not in stored],
    )


@dataclass
class _Synced:
    """One thread as last synced: its messages, the doc id at each position, the rows."""

    messages: list[BaseMessage]
    doc_ids: list[str | None]
    stored: dict[str, int]


class IndexMirror(Generic[D]):
    """Per thread, the transcript last synced into an index and the rows it left there.

    :meth:`sync` plans the change for a transcript, has it written, and remembers the
    result only once the write succeeded; :meth:`forget` whenever the index changed
    behind the mirror's back (a rebuild, a deleted thread). The owner serializes the
    calls for one index (both indexes hold a lock around a sync).

    Args:
        docs_of: The index's documents of a slice of a transcript.
        max_threads: Threads remembered (least recently synced dropped first).
    """

    def __init__(self, docs_of: DocsOf[D], max_threads: int = MIRROR_MAX_THREADS) -> None:
        self._docs_of = docs_of
        self._threads: OrderedDict[str, _Synced] = OrderedDict()
        self._max_threads = max_threads
        self._lock = threading.Lock()
        self.full_syncs = 0  # observable in tests and the benchmark

    def forget(self, thread_id: str | None = None) -> None:
        """Drop what is remembered (of one thread, or all)."""
        with self._lock:
            if thread_id is None:
                self._threads.clear()
            else:
                self._threads.pop(thread_id, None)

    def plan(
        self,
        thread_id: str,
        messages: Sequence[BaseMessage],
        read_stored: Callable[[], dict[str, int]],
        docs_of: DocsOf[D] | None = None,
    ) -> tuple[SyncPlan[D], _Synced | None]:
        """The change that makes the thread's rows match ``messages``.

        Args:
            thread_id: The thread.
            messages: Its whole stored transcript.
            read_stored: Reads the thread's rows (``msg_id`` → position); called only
                when nothing usable is remembered.
            docs_of: The documents of the thread's messages, when not the mirror's own
                (a thread's documents may read files of that thread).

        Returns:
            The plan, and the state to pass to :meth:`commit` after writing it.
        """
        docs_of = docs_of or self._docs_of
        with self._lock:
            synced = self._threads.get(thread_id)
        if synced is not None:
            incremental = self._tail_plan(synced, messages, docs_of)
            if incremental is not None:
                return incremental
        self.full_syncs += 1
        all_docs = docs_of(messages, 0)
        docs = {d.msg_id: d for d in all_docs}
        plan = full_plan(docs, read_stored())
        if len(docs) != len(all_docs):
            return plan, None  # a repeated id: no mirror, always the full comparison
        doc_ids: list[str | None] = [None] * len(messages)
        for d in all_docs:
            doc_ids[d.position] = d.msg_id
        stored = {msg_id: d.position for msg_id, d in docs.items()}
        return plan, _Synced(list(messages), doc_ids, stored)

    @staticmethod
    def _tail_plan(
        synced: _Synced, messages: Sequence[BaseMessage], docs_of: DocsOf[D]
    ) -> tuple[SyncPlan[D], _Synced] | None:
        """The plan from the first message that differs on, or None to compare in full."""
        k = common_prefix(messages, synced.messages)
        old_tail = {i for i in synced.doc_ids[k:] if i is not None}
        tail_docs = docs_of(messages[k:], k)
        tail = {d.msg_id: d for d in tail_docs}
        if len(tail) != len(tail_docs):
            return None
        stored = synced.stored
        plan: SyncPlan[D] = SyncPlan()
        for msg_id, d in tail.items():
            before = stored.get(msg_id)
            if before is None:
                plan.new.append(d)
            elif msg_id not in old_tail:
                return None  # the id is also an older message's: full comparison
            elif before != d.position:
                plan.moved.append((msg_id, d.position))
        plan.gone = [msg_id for msg_id in old_tail if msg_id not in tail]
        # Updated in place (no copy of a 5,000-entry mirror per turn): a failed write
        # makes the caller forget the thread (see :meth:`sync`).
        doc_ids = synced.doc_ids
        del doc_ids[k:]
        doc_ids.extend([None] * (len(messages) - k))
        for d in tail_docs:
            doc_ids[d.position] = d.msg_id
        for msg_id in plan.gone:
            del stored[msg_id]
        for msg_id, position in plan.moved:
            stored[msg_id] = position
        for d in plan.new:
            stored[d.msg_id] = d.position
        return plan, _Synced(list(messages), doc_ids, stored)

    def sync(
        self,
        thread_id: str,
        messages: Sequence[BaseMessage],
        read_stored: Callable[[], dict[str, int]],
        write: Callable[[SyncPlan[D]], None],
        docs_of: DocsOf[D] | None = None,
    ) -> None:
        """Plan the change for ``messages``, ``write`` it when not empty, remember it.

        Args:
            thread_id: The thread.
            messages: Its whole stored transcript.
            read_stored: Reads the thread's rows (``msg_id`` → position); called only
                when nothing usable is remembered.
            write: Applies a non-empty plan to the index (in one transaction).
            docs_of: See :meth:`plan`.
        """
        try:
            plan, synced = self.plan(thread_id, messages, read_stored, docs_of)
            if plan:
                write(plan)
        except BaseException:
            self.forget(thread_id)  # the index may not hold what the mirror says
            raise
        self.commit(thread_id, synced)

    def commit(self, thread_id: str, synced: _Synced | None) -> None:
        """Remember ``synced`` (from :meth:`plan`) once its plan is in the index."""
        with self._lock:
            if synced is None:
                self._threads.pop(thread_id, None)
                return
            self._threads[thread_id] = synced
            self._threads.move_to_end(thread_id)
            while len(self._threads) > self._max_threads:
                self._threads.popitem(last=False)
