"""Pruning old checkpoints without breaking the ones that are kept.

Kept per thread (and checkpoint namespace): the latest ``keep_latest`` checkpoints.
A ``DeltaChannel`` value is rebuilt by walking parent links back to the nearest
full snapshot and replaying the writes on the way, so every checkpoint on that
walk, with its writes, is kept too. Everything else goes.

A fork from a kept checkpoint replays the graph's persistent subgraphs
(``compile(checkpointer=True)``) from their own namespaces: each loads its latest
checkpoint older than the one forked from (or than that one's parent, for a fork of an
``update_state``). So in every namespace but the root one, that checkpoint is kept too
for each kept root checkpoint, with its replay chain (:func:`replayed_by`): pruning a
namespace on its own would let the fork run the subgraph from an empty state.

Compaction boundaries pin nothing: compaction never drops a message from the state
(it adds a boundary and moves the kept tail after it), so the latest checkpoint
holds the whole transcript, boundaries included, and resume, export and search
read it there. Keeping the checkpoints around each boundary would keep their
replay chains, i.e. a full snapshot of the transcript per compaction, forever.

Old snapshots hold the whole transcript at their time; once newer checkpoints no
longer walk back to them they are deleted, so a thread keeps one snapshot and at
most one snapshot interval of writes, whatever its length (docs/bench/storage.md).

Snapshots store the history before the last compaction boundary as archived segments
(``persistence/archive.py``). A prune that deletes checkpoints then deletes the
thread's segments that no kept snapshot names, in the same transaction; segments a
kept snapshot names are never touched.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langgraph.checkpoint.serde.base import SerializerProtocol

PRUNE_KEEP_LATEST_CHECKPOINTS = 20
# Bound of one automatic prune (all threads + VACUUM); the next start-up continues.
PRUNE_TIME_BUDGET_S = 20.0
# Ids per DELETE statement (SQLite's default limit on host parameters is 32,766).
DELETE_BATCH_IDS = 500
DELTA_CHANNELS: tuple[str, ...] = ("messages",)
# Checkpoints known to hold (or not) a full snapshot of the delta channels.
SNAPSHOT_CACHE_MAX_ENTRIES = 4_096
_SNAPSHOTS: dict[tuple[str, str, str, tuple[str, ...]], bool] = {}
# Archive segments each kept snapshot names (checkpoints never change).
_REFERENCES: dict[tuple[str, str, str], frozenset[str]] = {}
# Decoded ``counters_since_delta_snapshot`` per checkpoint: a per-turn prune reads
# the thread's ~200 rows, and only the few new ones need their metadata decoded.
COUNTERS_CACHE_MAX_ENTRIES = 16_384
_COUNTERS: dict[tuple[str, str, str], dict[str, Any]] = {}


@dataclass
class PruneStats:
    """What a prune did."""

    threads: int = 0
    checkpoints_deleted: int = 0
    writes_deleted: int = 0
    checkpoints_kept: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    seconds: float = 0.0
    complete: bool = True
    vacuumed: bool = False
    skipped_threads: list[str] = field(default_factory=list)


def db_bytes(path: Path) -> int:
    """Size of an SQLite database with its WAL and shared-memory files."""
    total = 0
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(OSError):
            total += Path(str(path) + suffix).stat().st_size
    return total


def _batched(ids: Sequence[str]) -> Iterable[Sequence[str]]:
    for i in range(0, len(ids), DELETE_BATCH_IDS):
        yield ids[i : i + DELETE_BATCH_IDS]


def prune_thread(
    conn: sqlite3.Connection,
    serde: SerializerProtocol,
    thread_id: str,
    *,
    keep_latest: int = PRUNE_KEEP_LATEST_CHECKPOINTS,
    delta_channels: Sequence[str] = DELTA_CHANNELS,
    lock: threading.Lock | None = None,
) -> tuple[int, int, int]:
    """Prune one thread's checkpoints in one transaction.

    Args:
        conn: Connection to the store (the checkpointer's tables).
        serde: The checkpointer's serializer (to read blobs).
        thread_id: The thread.
        keep_latest: Newest checkpoints kept per namespace.
        delta_channels: Channels rebuilt from writes (their reconstruction chains
            are kept).
        lock: The checkpointer's connection lock, when ``conn`` is shared with it.

    Returns:
        ``(checkpoints deleted, writes deleted, checkpoints kept)``.
    """
    guard = lock if lock is not None else threading.Lock()
    with guard:
        namespaces = [
            row[0]
            for row in conn.execute(
                "SELECT DISTINCT checkpoint_ns FROM checkpoints WHERE thread_id = ?", (thread_id,)
            )
        ]
        deleted_ckpts = deleted_writes = kept_total = 0
        anchors: list[str] = []
        try:
            conn.execute("BEGIN IMMEDIATE")
            # The root namespace first: what it keeps decides what the others keep.
            for ns in sorted(namespaces, key=bool):
                d_c, d_w, kept = _prune_namespace(
                    conn, serde, thread_id, ns, keep_latest, delta_channels, anchors
                )
                deleted_ckpts += d_c
                deleted_writes += d_w
                kept_total += kept
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return deleted_ckpts, deleted_writes, kept_total


CheckpointRow = tuple[str, str | None, Mapping[str, Any]]


@dataclass(frozen=True)
class PrunePlan:
    """What a prune keeps and deletes in one thread namespace."""

    needed: set[str]
    """Checkpoints kept: the latest ones and their replay chains."""
    snapshots: set[str]
    """Kept checkpoints that hold a full snapshot (chain ends)."""
    doomed: list[str]
    """Checkpoints to delete, with their writes, oldest first."""


def _counters(thread_id: str, ns: str, cid: str, meta: Any) -> Mapping[str, Any]:
    """A checkpoint's delta counters from its metadata, decoded once per checkpoint."""
    key = (thread_id, ns, cid)
    known = _COUNTERS.get(key)
    if known is not None:
        return known
    try:
        loaded = json.loads(meta) if meta else {}
    except (TypeError, ValueError):
        loaded = {}
    found = (loaded if isinstance(loaded, dict) else {}).get("counters_since_delta_snapshot")
    counters: dict[str, Any] = found if isinstance(found, dict) else {}
    _COUNTERS[key] = counters
    while len(_COUNTERS) > COUNTERS_CACHE_MAX_ENTRIES:
        del _COUNTERS[next(iter(_COUNTERS))]
    return counters


def replay_anchors(rows: Sequence[CheckpointRow], kept: Iterable[str]) -> list[str]:
    """Checkpoint ids a fork from a kept root checkpoint replays subgraphs before.

    A fork replays each persistent subgraph from its latest checkpoint older than the
    checkpoint forked from, or than that one's parent (a fork of an ``update_state``
    checkpoint): both, for every kept checkpoint.

    Args:
        rows: The root namespace's checkpoints (as for :func:`plan_prune`).
        kept: The root checkpoints the prune keeps.
    """
    parent = {cid: pid for cid, pid, _counters in rows}
    anchors = set(kept)
    anchors |= {pid for cid in kept if (pid := parent.get(cid))}
    return sorted(anchors)


def replayed_by(ids: Sequence[str], anchors: Sequence[str]) -> set[str]:
    """The checkpoints of a subgraph namespace that forks from kept checkpoints load.

    Args:
        ids: The namespace's checkpoint ids, oldest first (ids sort by time).
        anchors: From :func:`replay_anchors`.

    Returns:
        For each anchor, the namespace's latest checkpoint older than it.
    """
    loaded: set[str] = set()
    for anchor in anchors:
        i = bisect.bisect_left(ids, anchor)
        if i > 0:
            loaded.add(ids[i - 1])
    return loaded


def plan_prune(
    rows: Sequence[CheckpointRow],
    keep_latest: int,
    delta_channels: Sequence[str],
    is_snapshot: Callable[[str], bool],
    also_keep: Iterable[str] = (),
) -> PrunePlan:
    """Decide which checkpoints of one thread namespace a prune keeps (no I/O).

    The latest ``keep_latest`` checkpoints newer than (or equal to) the latest one's
    snapshot are kept, with every checkpoint their replay walks reach down to a
    full snapshot. Both backends (SQLite here, PostgreSQL in ``pg_saver``) execute
    this plan, so they keep the same checkpoints.

    Args:
        rows: ``(checkpoint_id, parent_checkpoint_id, counters_since_delta_snapshot)``
            of every checkpoint of the namespace, oldest first.
        keep_latest: Newest checkpoints kept (at least the latest one).
        delta_channels: Channels rebuilt from writes.
        is_snapshot: Whether a checkpoint stores a full value of every delta
            channel; asked only when its counters and its parent's cannot tell.
        also_keep: More checkpoints to keep with their replay chains (those a fork
            replays, :func:`replayed_by`), however old.

    Returns:
        The kept checkpoints, the snapshots among them and the doomed ones.
    """
    parent: dict[str, str | None] = {}
    counters: dict[str, Mapping[str, Any]] = {}
    for cid, pid, counted in rows:
        parent[cid] = pid
        counters[cid] = counted
    ids = [r[0] for r in rows]
    if not ids:
        return PrunePlan(set(), set(), [])
    keep: set[str] = set(ids[-keep_latest:]) if keep_latest > 0 else {ids[-1]}

    def has_all_snapshots(cid: str) -> bool:
        # Cheap test first: a snapshot resets the channel's counters (absent)...
        if any(ch in counters[cid] for ch in delta_channels):
            return False
        # ...and a reset right after a counted checkpoint is a snapshot: no need to
        # ask (decoding reads the whole transcript).
        pid = parent.get(cid)
        if pid in counters and all(ch in counters[pid] for ch in delta_channels):
            return True
        return is_snapshot(cid)

    # Checkpoints older than the latest one's snapshot would keep the previous
    # snapshot (a second copy of the transcript) alive: only the newer ones stay.
    node: str | None = ids[-1]
    while node is not None and node in parent:
        if has_all_snapshots(node):
            keep = {cid for cid in keep if cid >= node}
            break
        node = parent[node]

    keep |= {cid for cid in also_keep if cid in parent}

    needed: set[str] = set()
    snapshots: set[str] = set()
    for start in sorted(keep):
        node = start
        while node is not None and node in parent:
            if node in needed:
                break  # reached a chain already kept (walks complete one by one)
            needed.add(node)
            if has_all_snapshots(node):
                snapshots.add(node)
                break
            node = parent[node]
    return PrunePlan(needed, snapshots, [cid for cid in ids if cid not in needed])


def _prune_namespace(
    conn: sqlite3.Connection,
    serde: SerializerProtocol,
    thread_id: str,
    ns: str,
    keep_latest: int,
    delta_channels: Sequence[str],
    anchors: list[str],
) -> tuple[int, int, int]:
    """Prune one namespace; the root one (``""``) fills ``anchors`` for the others."""
    rows = conn.execute(
        "SELECT checkpoint_id, parent_checkpoint_id, metadata FROM checkpoints "
        "WHERE thread_id = ? AND checkpoint_ns = ? ORDER BY checkpoint_id",
        (thread_id, ns),
    ).fetchall()
    if len(rows) <= keep_latest:
        if not ns:
            anchors.extend(replay_anchors(rows, [r[0] for r in rows]))
        return 0, 0, len(rows)

    def decoded_snapshot(cid: str) -> bool:
        key = (thread_id, ns, cid, tuple(delta_channels))
        known = _SNAPSHOTS.get(key)
        if known is None:
            # Decoding a snapshot reads the whole transcript: done once per checkpoint
            # (checkpoints never change), not at every prune.
            values = _channel_values(conn, serde, thread_id, ns, cid)
            known = _SNAPSHOTS[key] = all(ch in values for ch in delta_channels)
            while len(_SNAPSHOTS) > SNAPSHOT_CACHE_MAX_ENTRIES:
                del _SNAPSHOTS[next(iter(_SNAPSHOTS))]
        return known

    checkpoints = [(cid, pid, _counters(thread_id, ns, cid, meta)) for cid, pid, meta in rows]
    plan = plan_prune(
        checkpoints,
        keep_latest,
        delta_channels,
        decoded_snapshot,
        replayed_by([r[0] for r in rows], anchors) if ns else (),
    )
    if not ns:
        anchors.extend(replay_anchors(checkpoints, plan.needed))
    needed, snapshots, doomed = plan.needed, plan.snapshots, plan.doomed
    deleted_writes = 0
    for batch in _batched(doomed):
        marks = ",".join("?" for _ in batch)
        conn.execute(
            f"DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
            f"AND checkpoint_id IN ({marks})",
            (thread_id, ns, *batch),
        )
        cur = conn.execute(
            f"DELETE FROM writes WHERE thread_id = ? AND checkpoint_ns = ? "
            f"AND checkpoint_id IN ({marks})",
            (thread_id, ns, *batch),
        )
        deleted_writes += max(cur.rowcount, 0)
    if doomed:
        _drop_unreferenced_segments(conn, serde, thread_id, ns, snapshots, delta_channels)
    return len(doomed), deleted_writes, len(needed)


def _channel_values(
    conn: sqlite3.Connection, serde: SerializerProtocol, thread_id: str, ns: str, cid: str
) -> dict[str, Any]:
    """The stored channel values of one checkpoint, archive references left unresolved."""
    row = conn.execute(
        "SELECT type, checkpoint FROM checkpoints "
        "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
        (thread_id, ns, cid),
    ).fetchone()
    values: dict[str, Any] = _raw(serde).loads_typed((row[0], row[1])).get("channel_values") or {}
    return values


def _raw(serde: SerializerProtocol) -> SerializerProtocol:
    """The serializer without archive resolution (see ``persistence/archive.py``)."""
    inner: SerializerProtocol = getattr(serde, "inner", serde)
    return inner


def _drop_unreferenced_segments(
    conn: sqlite3.Connection,
    serde: SerializerProtocol,
    thread_id: str,
    ns: str,
    snapshots: set[str],
    delta_channels: Sequence[str],
) -> None:
    """Delete the thread's archive segments that none of the kept ``snapshots`` names."""
    from agentgraph.persistence.archive import ARCHIVE_TABLE, batched, referenced_digests

    try:
        stored = [
            row[0]
            for row in conn.execute(
                f"SELECT segment FROM {ARCHIVE_TABLE} WHERE thread_id = ? AND checkpoint_ns = ?",
                (thread_id, ns),
            )
        ]
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return  # a store written before the archive existed
        raise
    if not stored:
        return
    referenced: set[str] = set()
    for cid in snapshots:
        key = (thread_id, ns, cid)
        names = _REFERENCES.get(key)
        if names is None:
            values = _channel_values(conn, serde, thread_id, ns, cid)
            names = frozenset(
                digest for ch in delta_channels for digest in referenced_digests(values.get(ch))
            )
            _REFERENCES[key] = names
            while len(_REFERENCES) > SNAPSHOT_CACHE_MAX_ENTRIES:
                del _REFERENCES[next(iter(_REFERENCES))]
        referenced |= names
    unreferenced = [digest for digest in stored if digest not in referenced]
    for batch in batched(unreferenced):
        marks = ",".join("?" for _ in batch)
        conn.execute(
            f"DELETE FROM {ARCHIVE_TABLE} WHERE thread_id = ? AND checkpoint_ns = ? "
            f"AND segment IN ({marks})",
            (thread_id, ns, *batch),
        )


def vacuum(conn: sqlite3.Connection, deadline: float | None = None) -> bool:
    """``VACUUM`` then ``PRAGMA wal_checkpoint(TRUNCATE)``; interrupted at ``deadline``.

    Returns:
        True when VACUUM finished (an interrupted VACUUM changes nothing).
    """
    timer: threading.Timer | None = None
    if deadline is not None:
        timer = threading.Timer(max(deadline - time.monotonic(), 0.0), conn.interrupt)
        timer.daemon = True
        timer.start()
    try:
        conn.execute("VACUUM")
        done = True
    except sqlite3.OperationalError:
        done = False  # interrupted or busy: the database is unchanged
    finally:
        if timer is not None:
            timer.cancel()
    with contextlib.suppress(sqlite3.OperationalError):
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return done


def prune_database(
    conn: sqlite3.Connection,
    serde: SerializerProtocol,
    path: Path,
    *,
    keep_latest: int = PRUNE_KEEP_LATEST_CHECKPOINTS,
    time_budget_s: float | None = None,
    skip: Callable[[str], bool] = lambda _thread: False,
    do_vacuum: bool = True,
    lock: threading.Lock | None = None,
) -> PruneStats:
    """Prune every thread, then VACUUM, within ``time_budget_s`` (None: no bound).

    Args:
        conn: A connection to the store (used for VACUUM too).
        serde: The checkpointer's serializer.
        path: The database file (for the byte counts).
        keep_latest: Newest checkpoints kept per thread.
        time_budget_s: Stop between threads (and interrupt VACUUM) after this long.
        skip: Threads not to touch (e.g. one another process is running).
        do_vacuum: Reclaim the freed pages on disk afterwards.
        lock: The checkpointer's connection lock, when ``conn`` is shared with it.
    """
    start = time.monotonic()
    deadline = start + time_budget_s if time_budget_s is not None else None
    stats = PruneStats(bytes_before=db_bytes(path))
    threads = [r[0] for r in conn.execute("SELECT DISTINCT thread_id FROM checkpoints")]
    for thread_id in threads:
        if deadline is not None and time.monotonic() > deadline:
            stats.complete = False
            break
        if skip(thread_id):
            stats.skipped_threads.append(thread_id)
            continue
        d_c, d_w, kept = prune_thread(conn, serde, thread_id, keep_latest=keep_latest, lock=lock)
        stats.threads += 1
        stats.checkpoints_deleted += d_c
        stats.writes_deleted += d_w
        stats.checkpoints_kept += kept
    if do_vacuum and (deadline is None or time.monotonic() < deadline):
        guard = lock if lock is not None else threading.Lock()
        with guard:
            stats.vacuumed = vacuum(conn, deadline)
    stats.bytes_after = db_bytes(path)
    stats.seconds = time.monotonic() - start
    return stats
