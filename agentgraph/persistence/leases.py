"""One run per thread: an exclusive lease on a session, taken atomically.

A process that runs a turn on a thread (``run``, the REPL, ``sessions compact`` or
``delete``) first takes the thread's lease; another process asking for the same thread
is refused with one line naming the holder, and nothing of its turn is written.

* SQLite: a row of ``agentgraph_leases`` in the session database, read and written in
  one ``BEGIN IMMEDIATE`` transaction, so two processes can never both see the thread
  free. The row names the holder: pid, its start time (``/proc/<pid>/stat``), host,
  pid namespace, since when, last heartbeat. A row is void when its process is gone,
  is a zombie, or its pid now belongs to another program (start time differs): the
  thread is free at once after a ``kill -9``. A holder in another pid namespace (a
  container, a machine sharing the home) cannot be checked by pid; it refreshes its
  heartbeat every :data:`LEASE_HEARTBEAT_S` and is void after :data:`LEASE_TTL_S`
  without one.
* PostgreSQL: a session-level ``pg_try_advisory_lock`` on a hash of the thread id, on
  one connection per process held open for the run; the server drops it when that
  connection ends, however the process died. A row in ``agentgraph_leases`` only
  describes the holder for the refusal message.

Leases are per process: the holder may take its own lease again (a turn after a turn).
They are released on :meth:`release`, when the store closes, or when the process dies.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from agentgraph.errors import AgentGraphError
from agentgraph.persistence.migrations import migrate_sqlite
from agentgraph.process import pid_alive, pid_space, process_start_time

LEASES_TABLE = "agentgraph_leases"
# A holder whose pid cannot be checked from here renews its lease this often, and is
# considered gone after this long without a renewal.
LEASE_HEARTBEAT_S = 15.0
LEASE_TTL_S = 60.0
# PostgreSQL frees a dead holder's lock when it notices the closed connection (at
# once, in practice), and a new holder names itself just after taking the lock: a
# lock without a live holder named is waited for this long at most.
DEAD_HOLDER_GRACE_S = 5.0
DEAD_HOLDER_POLL_S = 0.05
# PostgreSQL probes an idle lease connection after this many seconds, then every
# interval, and drops it (with its locks) after that many lost probes: a crashed
# machine frees its threads in about a minute and a half.
PG_KEEPALIVE_IDLE_S = 60
PG_KEEPALIVE_INTERVAL_S = 10
PG_KEEPALIVE_COUNT = 3
SHOWN_THREAD_ID_CHARS = 12

_FIELDS = ("pid", "start_time", "host", "pid_space", "since", "heartbeat")


def _stored_holder(conn: Any, thread_id: str, mark: str) -> Holder | None:
    """The holder row of ``thread_id`` (``mark``: the driver's parameter placeholder)."""
    row = conn.execute(
        f"SELECT {','.join(_FIELDS)} FROM {LEASES_TABLE} WHERE thread_id = {mark}", (thread_id,)
    ).fetchone()
    return Holder(*row) if row else None


class SessionInUse(AgentGraphError):
    """Another live process holds the session."""


@dataclass(frozen=True)
class Holder:
    """Who holds a thread's lease."""

    pid: int
    start_time: int | None
    host: str
    pid_space: str
    since: float
    heartbeat: float

    @classmethod
    def me(cls, now: float | None = None) -> Holder:
        """This process, holding from ``now``."""
        moment = time.time() if now is None else now
        pid = os.getpid()
        return cls(pid, process_start_time(pid), socket.gethostname(), pid_space(), moment, moment)

    def is_me(self) -> bool:
        """Whether this row was written by this very process."""
        pid = os.getpid()
        return (
            self.pid == pid
            and self.pid_space == pid_space()
            and self.start_time == process_start_time(pid)
        )

    def alive(self, now: float | None = None) -> bool:
        """Whether the holder still runs (pid check here, heartbeat elsewhere)."""
        if self.pid_space == pid_space():
            return pid_alive(self.pid, self.start_time)
        moment = time.time() if now is None else now
        return moment - self.heartbeat < LEASE_TTL_S

    def describe(self) -> str:
        """``process N [on host] since YYYY-MM-DD HH:MM:SS``."""
        where = "" if self.host == socket.gethostname() else f" on {self.host}"
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.since))
        return f"process {self.pid}{where} since {since}"

    def values(self) -> tuple[Any, ...]:
        """Column values in ``_FIELDS`` order."""
        return tuple(getattr(self, name) for name in _FIELDS)


def in_use_error(thread_id: str, action: str, holder: Holder | None) -> SessionInUse:
    """The one-line refusal naming the holder."""
    known = holder is not None and holder.pid > 0
    who = holder.describe() if holder is not None and known else "another agentgraph process"
    return SessionInUse(
        f"cannot {action} session {thread_id[:SHOWN_THREAD_ID_CHARS]}: it is in use by "
        f"{who}; try again when that process has finished"
    )


class ThreadLeases(Protocol):
    """Exclusive, per-process leases on threads (one implementation per store)."""

    def acquire(self, thread_id: str, action: str) -> None:
        """Take ``thread_id`` for this process (a no-op when it already holds it).

        Raises:
            SessionInUse: another live process holds it.
        """

    def release(self, thread_id: str) -> None:
        """Give ``thread_id`` back (a no-op unless this process holds it)."""

    def holder(self, thread_id: str) -> Holder | None:
        """Another live process holding ``thread_id`` (with what it is known by), else None.

        A holder whose details are unknown is reported with pid 0.
        """

    def held(self) -> set[str]:
        """Threads this process holds."""

    def close(self) -> None:
        """Release every lease of this process."""


@contextlib.contextmanager
def holding(leases: ThreadLeases, thread_id: str, action: str) -> Iterator[None]:
    """Hold ``thread_id`` for a block; released after unless it was held before."""
    held_before = thread_id in leases.held()
    leases.acquire(thread_id, action)
    try:
        yield
    finally:
        if not held_before:
            leases.release(thread_id)


class LocalLeases:
    """Leases within one process only (an in-memory store: nothing else can see it)."""

    def __init__(self) -> None:
        self._held: set[str] = set()
        self._lock = threading.Lock()

    def acquire(self, thread_id: str, action: str) -> None:
        """Take ``thread_id`` (always free: no other process shares this store)."""
        with self._lock:
            self._held.add(thread_id)

    def release(self, thread_id: str) -> None:
        """Give ``thread_id`` back."""
        with self._lock:
            self._held.discard(thread_id)

    def holder(self, thread_id: str) -> Holder | None:
        """Always None: no other process shares an in-memory store."""
        return None

    def held(self) -> set[str]:
        """Threads held."""
        with self._lock:
            return set(self._held)

    def close(self) -> None:
        """Release everything."""
        with self._lock:
            self._held.clear()


class SqliteLeases:
    """Leases as rows of the SQLite session database (see the module docstring).

    Args:
        path: The database file.
        busy_timeout_s: How long to wait for another process's write transaction.
    """

    _MARK = "?"  # sqlite3's parameter placeholder

    def __init__(self, path: Path, busy_timeout_s: float, *, read_only: bool = False) -> None:
        """Leases in the SQLite file ``path``, connected when first used.

        Args:
            path: The store's file.
            busy_timeout_s: How long to wait for another process's lock.
            read_only: Only check holders (a read-only home): nothing is created.
        """
        self._path = path
        self._timeout = busy_timeout_s
        self._read_only = read_only
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.RLock()
        self._held: set[str] = set()
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            from agentgraph.persistence.store import connect_sqlite

            # The store's connections have the file open: no header read (see there).
            conn = connect_sqlite(
                self._path, self._timeout, check_header=False, read_only=self._read_only
            )
            conn.isolation_level = None  # transactions are begun explicitly below
            if not self._read_only:
                migrate_sqlite(conn)
            self._conn = conn
        return self._conn

    def acquire(self, thread_id: str, action: str) -> None:
        """Take ``thread_id``: check and write in one ``BEGIN IMMEDIATE`` transaction.

        Raises:
            SessionInUse: another live process holds it.
        """
        with self._lock:
            if thread_id in self._held:
                return
            conn = self._db()
            conn.execute("BEGIN IMMEDIATE")
            try:
                current = _stored_holder(conn, thread_id, self._MARK)
                if current is not None and not current.is_me() and current.alive():
                    raise in_use_error(thread_id, action, current)
                me = Holder.me()
                conn.execute(
                    f"INSERT OR REPLACE INTO {LEASES_TABLE} (thread_id, {','.join(_FIELDS)}) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (thread_id, *me.values()),
                )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            self._held.add(thread_id)
            self._start_heartbeat()

    def release(self, thread_id: str) -> None:
        """Delete this process's row of ``thread_id``."""
        with self._lock:
            if thread_id not in self._held:
                return
            self._held.discard(thread_id)
            if self._conn is None:
                return
            me = Holder.me()
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute(
                    f"DELETE FROM {LEASES_TABLE} WHERE thread_id = ? AND pid = ? AND pid_space = ?",
                    (thread_id, me.pid, me.pid_space),
                )

    def holder(self, thread_id: str) -> Holder | None:
        """Another live process holding ``thread_id``, else None."""
        with self._lock:
            if thread_id in self._held:
                return None
            try:
                current = _stored_holder(self._db(), thread_id, self._MARK)
            except sqlite3.OperationalError as exc:
                # A read-only file no process has taken a lease in has no table.
                if not self._read_only or "no such table" not in str(exc):
                    raise
                current = None
        if current is None or current.is_me() or not current.alive():
            return None
        return current

    def held(self) -> set[str]:
        """Threads this process holds."""
        with self._lock:
            return set(self._held)

    def _start_heartbeat(self) -> None:
        if self._beat is None:
            self._beat = threading.Thread(
                target=self._heartbeat, daemon=True, name="agentgraph-lease-heartbeat"
            )
            self._beat.start()

    def _heartbeat(self) -> None:
        """Renew this process's rows (for holders that cannot check our pid)."""
        while not self._stop.wait(LEASE_HEARTBEAT_S):
            with self._lock, contextlib.suppress(sqlite3.Error):
                if self._conn is not None and self._held:
                    me = Holder.me()
                    marks = ",".join("?" for _ in self._held)
                    self._conn.execute(
                        f"UPDATE {LEASES_TABLE} SET heartbeat = ? WHERE pid = ? "
                        f"AND pid_space = ? AND thread_id IN ({marks})",
                        (me.heartbeat, me.pid, me.pid_space, *self._held),
                    )

    def close(self) -> None:
        """Release every lease and close the connection."""
        self._stop.set()
        with self._lock:
            for thread_id in list(self._held):
                self.release(thread_id)
            if self._conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.close()
                self._conn = None


def pg_lease_key(thread_id: str) -> int:
    """The advisory lock key of a thread: a signed 64-bit hash of its id."""
    digest = hashlib.sha256(b"agentgraph-thread\0" + thread_id.encode("utf-8", "surrogatepass"))
    return int.from_bytes(digest.digest()[:8], "big", signed=True)


class PostgresLeases:
    """Leases as session-level advisory locks (see the module docstring).

    Args:
        url: The database URL (the lease connection is opened on first use).
        connect_timeout_s: Seconds to wait for the server when connecting.
    """

    _MARK = "%s"  # psycopg's parameter placeholder

    def __init__(self, url: str, connect_timeout_s: float) -> None:
        self._url = url
        self._timeout = connect_timeout_s
        self._conn: Any = None
        self._lock = threading.RLock()
        self._held: set[str] = set()

    def _db(self) -> Any:
        if self._conn is None:
            import psycopg

            conn = psycopg.connect(
                self._url,
                autocommit=True,
                prepare_threshold=None,
                connect_timeout=max(1, round(self._timeout)),
            )
            # The server drops this connection, and so this process's locks, when the
            # client machine stops answering (not only when the process exits).
            conn.execute(f"SET tcp_keepalives_idle = {PG_KEEPALIVE_IDLE_S}")
            conn.execute(f"SET tcp_keepalives_interval = {PG_KEEPALIVE_INTERVAL_S}")
            conn.execute(f"SET tcp_keepalives_count = {PG_KEEPALIVE_COUNT}")
            self._conn = conn
        return self._conn

    def _try_lock(self, conn: Any, thread_id: str) -> bool:
        row = conn.execute("SELECT pg_try_advisory_lock(%s)", (pg_lease_key(thread_id),))
        return bool(row.fetchone()[0])

    def acquire(self, thread_id: str, action: str) -> None:
        """Take ``thread_id``'s advisory lock, then record this process as its holder.

        Raises:
            SessionInUse: another live process holds it.
        """
        with self._lock:
            if thread_id in self._held:
                return
            conn = self._db()
            deadline = time.monotonic() + DEAD_HOLDER_GRACE_S
            while not self._try_lock(conn, thread_id):
                current = _stored_holder(conn, thread_id, self._MARK)
                # The lock proves a holder; the row names it once written (just after
                # the lock). A row naming a dead local process is a crashed holder's
                # whose lock the server has yet to drop, or an older holder's.
                named = current is not None and (
                    current.pid_space != pid_space() or pid_alive(current.pid, current.start_time)
                )
                if named or time.monotonic() > deadline:
                    raise in_use_error(thread_id, action, current)
                time.sleep(DEAD_HOLDER_POLL_S)
            self._held.add(thread_id)
            me = Holder.me()
            conn.execute(
                f"INSERT INTO {LEASES_TABLE} (thread_id, {','.join(_FIELDS)}) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (thread_id) DO UPDATE SET "
                + ",".join(f"{name} = EXCLUDED.{name}" for name in _FIELDS),
                (thread_id, *me.values()),
            )

    def release(self, thread_id: str) -> None:
        """Delete this process's row and unlock."""
        with self._lock:
            if thread_id not in self._held:
                return
            self._held.discard(thread_id)
            if self._conn is None or self._conn.closed:
                return
            me = Holder.me()
            with contextlib.suppress(Exception):
                self._conn.execute(
                    f"DELETE FROM {LEASES_TABLE} WHERE thread_id = %s AND pid = %s "
                    "AND pid_space = %s",
                    (thread_id, me.pid, me.pid_space),
                )
                self._conn.execute(
                    "SELECT pg_advisory_unlock(%s)", (pg_lease_key(thread_id),)
                ).fetchone()

    def holder(self, thread_id: str) -> Holder | None:
        """Another process holding ``thread_id`` (pid 0 when not yet described), else None."""
        with self._lock:
            if thread_id in self._held:
                return None
            conn = self._db()
            if self._try_lock(conn, thread_id):
                conn.execute("SELECT pg_advisory_unlock(%s)", (pg_lease_key(thread_id),))
                return None
            current = _stored_holder(conn, thread_id, self._MARK)
        return current or Holder(0, None, "", "", time.time(), time.time())

    def held(self) -> set[str]:
        """Threads this process holds."""
        with self._lock:
            return set(self._held)

    def close(self) -> None:
        """Release every lease and close the connection (which also drops the locks)."""
        with self._lock:
            for thread_id in list(self._held):
                self.release(thread_id)
            if self._conn is not None:
                with contextlib.suppress(Exception):
                    self._conn.close()
                self._conn = None
