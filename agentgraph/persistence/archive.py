"""Archived history: what lies before the last compaction boundary, stored once.

The state keeps the whole transcript (compaction only moves the prompt view's start,
see ``context/compaction.py``), and every full snapshot of the ``messages``
:class:`~langgraph.channels.delta.DeltaChannel` (one per 200 updates) used to
serialize all of it: megabytes per snapshot at a few thousand messages, a stall of
hundreds of milliseconds on the turn that wrote it, and one more copy of the
transcript for every snapshot a store keeps (PostgreSQL never prunes).

Messages before a compaction boundary are history: compaction appends after them and
nothing rewrites them. So a snapshot is stored in two parts:

* **Segments**: the messages from one boundary up to the next one (the first from the
  start), each serialized with the checkpointer's own serializer, zlib-compressed and
  written once to the ``agentgraph_archive`` table of the session database, keyed by
  ``(thread, namespace, digest)``. The digest is the SHA-256 of the serialized bytes:
  the same run of messages is never written twice, and a row whose bytes do not hash
  to its key is corrupt, never silently used.
* **The snapshot** itself holds a small reference instead of the list: the digests and
  message counts of the segments, plus the live tail from the last boundary on. A
  snapshot costs the tail (at most about one context window), not the session.

Loading joins them: the value handed to LangGraph is exactly the list the snapshot
replaced, so resume, export, search and ``sessions show`` see the same state. The
serializer wrapper (:class:`ArchivingSerde`) resolves references wherever a saver
decodes a checkpoint or a blob, so no LangGraph code path ever sees one.

Writing a snapshot does not re-serialize archived segments: the archive remembers,
per thread, the message objects of each segment it wrote or loaded, and a segment
whose messages are the very same objects keeps its digest (the state reuses message
objects from step to step). Anything else (a message before a boundary that did
change, another process's state) is serialized and hashed again, so correctness never
depends on that memory. The segments a snapshot names are checked in the database in
the same transaction that writes the snapshot, so a segment pruned meanwhile is
written again rather than referenced while missing.

Pruning (``persistence/prune.py``) deletes the segments no kept snapshot names;
deleting a session deletes its segments. Databases written before the archive (plain
lists in their snapshots) load as before; their next snapshot is archived. A database
with archived snapshots needs agentgraph's savers to be read (LangGraph's own savers
would see the reference, not the list).
"""

from __future__ import annotations

import collections
import hashlib
import itertools
import operator
import threading
import zlib
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    Checkpoint,
    CheckpointTuple,
    DeltaChannelHistory,
)

from agentgraph.errors import StoreError
from agentgraph.private_api import DeltaSnapshot
from agentgraph.runtime.history import agentgraph_kind

ARCHIVE_TABLE = "agentgraph_archive"
# Key of the reference dict stored in place of an archived snapshot's list; its value
# is the format version.
ARCHIVE_REF_KEY = "agentgraph_archive"
ARCHIVE_FORMAT_VERSION = 1
# zlib level: 6 is zlib's default balance; segments are written once, read on resume.
ARCHIVE_ZLIB_LEVEL = 6
# Hex characters of the SHA-256 digest kept as a segment's key (128 bits).
ARCHIVE_DIGEST_HEX_CHARS = 32
# A segment decompressing to more than this is refused as corrupt (zip bomb guard).
ARCHIVE_SEGMENT_MAX_BYTES = 1 << 30
# Serializer formats a segment row may name; anything else is refused.
ARCHIVE_SEGMENT_TYPES = frozenset({"msgpack"})
# Threads whose segments stay in memory (as the saver's remembered values).
ARCHIVE_CACHE_MAX_THREADS = 8
# Digests per SELECT/DELETE statement (SQLite's limit on host parameters is 32,766).
ARCHIVE_SQL_BATCH = 500
BOUNDARY_KIND = "compact_boundary"

# (type, compressed data, message count, raw bytes) of a stored segment.
SegmentRow = tuple[str, bytes, int, int]
# Reads the rows of some digests of a (thread, namespace); absent digests are omitted.
FetchSegments = Callable[[str, str, Sequence[str]], Mapping[str, SegmentRow]]


class ArchiveError(StoreError):
    """An archived segment a checkpoint needs is missing, corrupt or malformed."""


@dataclass(frozen=True)
class Segment:
    """One encoded segment, ready to insert."""

    digest: str
    type: str
    data: bytes
    messages: int
    raw_bytes: int

    def row(self, thread_id: str, checkpoint_ns: str) -> tuple[str, str, str, str, bytes, int, int]:
        """Values for ``INSERT INTO agentgraph_archive`` in column order."""
        return (
            thread_id,
            checkpoint_ns,
            self.digest,
            self.type,
            self.data,
            self.messages,
            self.raw_bytes,
        )


@dataclass
class _Piece:
    digest: str
    messages: list[Any]
    encoded: Segment | None


@dataclass
class ArchivePlan:
    """How one snapshot is stored: its reference and the segments it names."""

    thread_id: str
    checkpoint_ns: str
    reference: dict[str, Any]
    pieces: list[_Piece]

    @property
    def digests(self) -> list[str]:
        """Digests of the segments the reference names, in order."""
        return [p.digest for p in self.pieces]


@dataclass
class _Known:
    """The segments of one thread this process wrote or loaded."""

    by_digest: dict[str, list[Any]]
    by_first_id: dict[str, str]


def is_reference(value: Any) -> bool:
    """Whether ``value`` is an archive reference (what an archived snapshot stores)."""
    return isinstance(value, dict) and ARCHIVE_REF_KEY in value


def referenced_digests(value: Any) -> list[str]:
    """The segment digests a decoded channel value names (none for a plain list)."""
    if isinstance(value, DeltaSnapshot):
        value = value.value
    if not is_reference(value):
        return []
    segments = value.get("segments")
    if not isinstance(segments, list):
        return []
    return [s[0] for s in segments if isinstance(s, list | tuple) and s and isinstance(s[0], str)]


def boundary_cuts(messages: Sequence[Any]) -> list[int]:
    """Positions of the compaction boundaries in ``messages`` (none at position 0)."""
    return [
        i
        for i, m in enumerate(messages)
        if i > 0 and isinstance(m, BaseMessage) and agentgraph_kind(m) == BOUNDARY_KIND
    ]


class MessageArchive:
    """Splits snapshots into segments + tail and joins them back (backend-neutral).

    Args:
        serde: The checkpointer's own serializer (encodes the segments' messages).
        fetch: Reads segment rows from the database (see :data:`FetchSegments`).
    """

    def __init__(self, serde: Any, fetch: FetchSegments) -> None:
        self.serde = serde
        self._fetch = fetch
        self._known: OrderedDict[tuple[str, str], _Known] = OrderedDict()
        self._lock = threading.Lock()
        self.segments_encoded = 0  # observable in tests and the benchmark
        # Snapshots put, by thread: a prune has something to drop only after one.
        self._snapshots: collections.Counter[str] = collections.Counter()

    # -- memory ---------------------------------------------------------------------

    def _thread(self, thread_id: str, ns: str) -> _Known:
        key = (thread_id, ns)
        known = self._known.get(key)
        if known is None:
            known = self._known[key] = _Known({}, {})
            while len(self._known) > ARCHIVE_CACHE_MAX_THREADS:
                self._known.popitem(last=False)
        self._known.move_to_end(key)
        return known

    def _learn(self, thread_id: str, ns: str, digest: str, messages: list[Any]) -> None:
        with self._lock:
            known = self._thread(thread_id, ns)
            known.by_digest[digest] = messages
            first = messages[0].id if messages else None
            if isinstance(first, str):
                known.by_first_id[first] = digest

    def note_snapshot(self, thread_id: str) -> None:
        """Count a snapshot of ``thread_id``'s transcript being put."""
        with self._lock:
            self._snapshots[thread_id] += 1

    def snapshots_written(self, thread_id: str) -> int:
        """Snapshots of ``thread_id``'s transcript put through this archive."""
        with self._lock:
            return self._snapshots[thread_id]

    def forget(self, thread_id: str | None = None) -> None:
        """Drop remembered segments (of one thread, or all)."""
        with self._lock:
            for key in [k for k in self._known if thread_id is None or k[0] == thread_id]:
                del self._known[key]

    # -- writing --------------------------------------------------------------------

    def encode(self, messages: list[Any]) -> Segment:
        """Serialize and compress a run of messages."""
        type_, raw = self.serde.dumps_typed(messages)
        self.segments_encoded += 1
        return Segment(
            digest=_digest(type_, raw),
            type=type_,
            data=zlib.compress(raw, ARCHIVE_ZLIB_LEVEL),
            messages=len(messages),
            raw_bytes=len(raw),
        )

    def plan(self, thread_id: str, checkpoint_ns: str, value: Any) -> ArchivePlan | None:
        """The archived form of a snapshot's list, or None when there is nothing to archive.

        Args:
            thread_id: The checkpoint's thread.
            checkpoint_ns: Its namespace.
            value: The snapshot's message list.
        """
        if not isinstance(value, list):
            return None
        cuts = boundary_cuts(value)
        if not cuts:
            return None
        with self._lock:
            known = self._thread(thread_id, checkpoint_ns)
            by_first = dict(known.by_first_id)
            by_digest = dict(known.by_digest)
        pieces: list[_Piece] = []
        for start, end in itertools.pairwise([0, *cuts]):
            chunk = value[start:end]
            digest = by_first.get(chunk[0].id) if isinstance(chunk[0].id, str) else None
            remembered = by_digest.get(digest) if digest is not None else None
            if (
                digest is not None
                and remembered is not None
                and len(remembered) == len(chunk)
                and all(map(operator.is_, remembered, chunk))
            ):
                pieces.append(_Piece(digest, remembered, None))
                continue
            segment = self.encode(chunk)
            pieces.append(_Piece(segment.digest, chunk, segment))
        reference = {
            ARCHIVE_REF_KEY: ARCHIVE_FORMAT_VERSION,
            "thread_id": thread_id,
            "checkpoint_ns": checkpoint_ns,
            "segments": [[p.digest, len(p.messages)] for p in pieces],
            "tail": value[cuts[-1] :],
        }
        return ArchivePlan(thread_id, checkpoint_ns, reference, pieces)

    def rows_to_write(self, plan: ArchivePlan, present: Iterable[str]) -> list[Segment]:
        """Segments of ``plan`` not ``present`` in the database, encoded; remembers all."""
        stored = set(present)
        rows: dict[str, Segment] = {}
        for piece in plan.pieces:
            if piece.digest not in stored and piece.digest not in rows:
                rows[piece.digest] = piece.encoded or self.encode(piece.messages)
            self._learn(plan.thread_id, plan.checkpoint_ns, piece.digest, piece.messages)
        return list(rows.values())

    # -- reading --------------------------------------------------------------------

    def resolve(
        self, reference: Mapping[str, Any], fetch: FetchSegments | None = None
    ) -> list[Any]:
        """The message list an archive reference stands for.

        Args:
            reference: What an archived snapshot stores.
            fetch: Reads the segments not in memory (default: the archive's own).

        Raises:
            ArchiveError: the reference is malformed, or a segment it names is missing
                or corrupt.
        """
        thread_id = reference.get("thread_id")
        ns = reference.get("checkpoint_ns")
        segments = reference.get("segments")
        tail = reference.get("tail")
        if (
            reference.get(ARCHIVE_REF_KEY) != ARCHIVE_FORMAT_VERSION
            or not isinstance(thread_id, str)
            or not isinstance(ns, str)
            or not isinstance(segments, list)
            or not isinstance(tail, list)
            or not all(_is_entry(s) for s in segments)
        ):
            raise ArchiveError(
                f"session {thread_id if isinstance(thread_id, str) else '?'}: a stored "
                f"snapshot has a malformed archive reference (format "
                f"{reference.get(ARCHIVE_REF_KEY)!r}); the session cannot be rebuilt"
            )
        with self._lock:
            known = dict(self._thread(thread_id, ns).by_digest)
        missing = [s[0] for s in segments if s[0] not in known]
        if missing:
            rows = (fetch or self._fetch)(thread_id, ns, sorted(set(missing)))
            for digest in dict.fromkeys(missing):
                messages = self._decode(thread_id, digest, rows.get(digest))
                known[digest] = messages
                self._learn(thread_id, ns, digest, messages)
        parts: list[list[Any]] = []
        for digest, count in segments:
            messages = known[digest]
            if len(messages) != count:
                raise _corrupt(thread_id, digest, f"{len(messages)} messages, expected {count}")
            parts.append(messages)
        return [*itertools.chain.from_iterable(parts), *tail]

    def _decode(self, thread_id: str, digest: str, row: SegmentRow | None) -> list[Any]:
        if row is None:
            raise ArchiveError(
                f"session {thread_id}: archived history segment {digest[:12]} is missing "
                f"from the database; the session cannot be rebuilt exactly"
            )
        type_, data, count, raw_bytes = row
        if type_ not in ARCHIVE_SEGMENT_TYPES:
            raise _corrupt(thread_id, digest, f"unknown format {type_!r}")
        if not isinstance(raw_bytes, int) or not 0 <= raw_bytes <= ARCHIVE_SEGMENT_MAX_BYTES:
            raise _corrupt(thread_id, digest, f"size {raw_bytes!r} out of range")
        try:
            inflater = zlib.decompressobj()
            raw = inflater.decompress(bytes(data), raw_bytes + 1)
        except (zlib.error, TypeError) as exc:
            raise _corrupt(thread_id, digest, f"cannot decompress ({exc})") from None
        if len(raw) != raw_bytes or not inflater.eof:
            raise _corrupt(thread_id, digest, "wrong length")
        if _digest(type_, raw) != digest:
            raise _corrupt(thread_id, digest, "content does not match its digest")
        try:
            messages = self.serde.loads_typed((type_, raw))
        except Exception as exc:  # a hostile row must not escape as a traceback
            raise _corrupt(thread_id, digest, f"cannot decode ({type(exc).__name__})") from None
        if (
            not isinstance(messages, list)
            or len(messages) != count
            or not all(isinstance(m, BaseMessage) for m in messages)
        ):
            raise _corrupt(thread_id, digest, "not the messages it claims")
        return messages

    def resolve_in(self, obj: Any, fetch: FetchSegments | None = None) -> Any:
        """``obj`` with archive references replaced by their lists.

        Handles what savers decode: a whole checkpoint (SQLite keeps channel values
        inline) and a single channel value (PostgreSQL keeps them as blobs).

        Args:
            obj: A decoded checkpoint or channel value.
            fetch: Reads the segments not in memory (default: the archive's own).
        """
        if isinstance(obj, DeltaSnapshot):
            return DeltaSnapshot(self.resolve(obj.value, fetch)) if is_reference(obj.value) else obj
        if is_reference(obj):
            return self.resolve(obj, fetch)
        if isinstance(obj, dict):
            values = obj.get("channel_values")
            if isinstance(values, dict) and any(
                isinstance(v, DeltaSnapshot) and is_reference(v.value) for v in values.values()
            ):
                return {
                    **obj,
                    "channel_values": {k: self.resolve_in(v, fetch) for k, v in values.items()},
                }
        return obj

    def unknown_segments(self, obj: Any) -> list[tuple[str, str, list[str]]]:
        """``(thread, namespace, digests)`` of the segments ``obj`` names and memory lacks.

        An async saver cannot read the database while decoding, so it reads these first
        and hands them to :meth:`resolve_in`. A malformed reference names none here;
        :meth:`resolve` then reports it.

        Args:
            obj: A decoded checkpoint or channel value, as for :meth:`resolve_in`.
        """
        found: list[tuple[str, str, list[str]]] = []
        for reference in _references_in(obj):
            thread_id, ns = reference.get("thread_id"), reference.get("checkpoint_ns")
            if not isinstance(thread_id, str) or not isinstance(ns, str):
                continue
            with self._lock:
                known = set(self._thread(thread_id, ns).by_digest)
            digests = [d for d in referenced_digests(reference) if d not in known]
            if digests:
                found.append((thread_id, ns, sorted(set(digests))))
        return found


@dataclass(frozen=True)
class ArchivedPut:
    """What a saver writes for a checkpoint whose ``messages`` snapshot gets archived.

    Attributes:
        thread_id: The checkpoint's thread.
        checkpoint_ns: Its namespace.
        plan: The segments to store (``MessageArchive.rows_to_write``) and the reference.
        checkpoint: The checkpoint with the reference in place of the message list.
    """

    thread_id: str
    checkpoint_ns: str
    plan: ArchivePlan
    checkpoint: Checkpoint


def archived_put(
    archive: MessageArchive, config: RunnableConfig, checkpoint: Checkpoint, channel: str
) -> ArchivedPut | None:
    """The archived form of ``checkpoint``, or None when it is stored as it is.

    Shared by the SQLite and PostgreSQL savers, which differ only in how they write the
    segments and lock against a prune.

    Args:
        archive: The saver's archive.
        config: The ``put`` config (thread id, namespace).
        checkpoint: The checkpoint being stored.
        channel: The delta channel whose snapshot is archived.
    """
    snapshot = (checkpoint.get("channel_values") or {}).get(channel)
    if not isinstance(snapshot, DeltaSnapshot):
        return None
    thread_id = str(config["configurable"]["thread_id"])
    checkpoint_ns = str(config["configurable"].get("checkpoint_ns", ""))
    archive.note_snapshot(thread_id)
    plan = archive.plan(thread_id, checkpoint_ns, snapshot.value)
    if plan is None:
        return None
    archived: Checkpoint = {
        **checkpoint,
        "channel_values": {**checkpoint["channel_values"], channel: DeltaSnapshot(plan.reference)},
    }
    return ArchivedPut(thread_id, checkpoint_ns, plan, archived)


def _references_in(obj: Any) -> list[Mapping[str, Any]]:
    """The archive references in a decoded checkpoint or channel value."""
    if isinstance(obj, DeltaSnapshot):
        obj = obj.value
    if is_reference(obj):
        return [obj]
    if isinstance(obj, dict) and isinstance(obj.get("channel_values"), dict):
        return [r for v in obj["channel_values"].values() for r in _references_in(v)]
    return []


def _is_entry(value: Any) -> bool:
    return (
        isinstance(value, list | tuple)
        and len(value) == 2
        and isinstance(value[0], str)
        and isinstance(value[1], int)
    )


def _digest(type_: str, raw: bytes) -> str:
    sha = hashlib.sha256(type_.encode("utf-8") + b"\0")
    sha.update(raw)
    return sha.hexdigest()[:ARCHIVE_DIGEST_HEX_CHARS]


def _corrupt(thread_id: str, digest: str, why: str) -> ArchiveError:
    return ArchiveError(
        f"session {thread_id}: archived history segment {digest[:12]} is corrupt ({why}); "
        f"the session cannot be rebuilt exactly"
    )


class ArchivingSerde:
    """The checkpointer's serializer, resolving archive references when decoding.

    Encoding is unchanged (the saver puts the reference in the checkpoint before it is
    encoded). Everything else (allowlists, typed methods) is the inner serializer's.

    Args:
        inner: The serializer the saver was built with.
        archive: Resolves references.
    """

    def __init__(self, inner: Any, archive: MessageArchive) -> None:
        self.inner = inner
        self.archive = archive

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        """Encode ``obj`` with the inner serializer."""
        result: tuple[str, bytes] = self.inner.dumps_typed(obj)
        return result

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """Decode ``data``, then join any archived snapshot back into its list."""
        return self.archive.resolve_in(self.inner.loads_typed(data))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def batched(items: Sequence[str]) -> Iterable[Sequence[str]]:
    """``items`` in slices of :data:`ARCHIVE_SQL_BATCH`."""
    for i in range(0, len(items), ARCHIVE_SQL_BATCH):
        yield items[i : i + ARCHIVE_SQL_BATCH]


class AsyncArchiveReads(BaseCheckpointSaver[str]):
    """Async reads of an archiving saver: references resolved after each read.

    A sync saver resolves references while decoding (:class:`ArchivingSerde` reads the
    segments on the spot); an async one cannot wait on its database inside the
    serializer, so it decodes with the plain serializer, then reads the segments the
    result names (:meth:`_afetch_segments`) and joins them in. Put this class before the
    stock async saver in the bases: its reads go through the stock ones.
    """

    archive: MessageArchive

    async def _afetch_segments(
        self, thread_id: str, checkpoint_ns: str, digests: Sequence[str]
    ) -> Mapping[str, SegmentRow]:
        """Read the rows of ``digests`` of a (thread, namespace); absent ones omitted."""
        raise NotImplementedError

    async def _aresolve(self, obj: Any) -> Any:
        """``obj`` (a decoded checkpoint or channel value) with its references resolved."""
        fetched: dict[tuple[str, str], Mapping[str, SegmentRow]] = {}
        for thread_id, ns, digests in self.archive.unknown_segments(obj):
            fetched[(thread_id, ns)] = await self._afetch_segments(thread_id, ns, digests)

        def fetch(thread_id: str, ns: str, digests: Sequence[str]) -> dict[str, SegmentRow]:
            rows = fetched.get((thread_id, ns), {})
            return {d: rows[d] for d in digests if d in rows}

        return self.archive.resolve_in(obj, fetch)

    async def _aresolve_tuple(self, found: CheckpointTuple) -> CheckpointTuple:
        checkpoint = await self._aresolve(found.checkpoint)
        return found if checkpoint is found.checkpoint else found._replace(checkpoint=checkpoint)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The stock read, archived history joined back in."""
        found = await super().aget_tuple(config)
        return None if found is None else await self._aresolve_tuple(found)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """The stock listing, archived history joined back in."""
        async for found in super().alist(config, filter=filter, before=before, limit=limit):
            yield await self._aresolve_tuple(found)

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """The stock delta history, an archived seed joined back in."""
        history = await super().aget_delta_channel_history(config=config, channels=channels)
        resolved: dict[str, DeltaChannelHistory] = {}
        for channel, entry in history.items():
            if "seed" in entry:
                entry = {**entry, "seed": await self._aresolve(entry["seed"])}
            resolved[channel] = entry
        return resolved
