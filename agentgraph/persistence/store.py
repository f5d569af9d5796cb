"""Open the session store: SQLite by default (embedded, zero set-up)."""

from __future__ import annotations

import collections
import contextlib
import os
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from agentgraph.config import SQLITE_BUSY_TIMEOUT_S_DEFAULT, Settings
from agentgraph.errors import StoreError
from agentgraph.persistence.index import SessionIndex, SqliteSessionIndex
from agentgraph.persistence.leases import LocalLeases, SqliteLeases, ThreadLeases
from agentgraph.persistence.prune import (
    PRUNE_KEEP_LATEST_CHECKPOINTS,
    PruneStats,
    db_bytes,
    prune_database,
    prune_thread,
)

# The checkpointer stack (LangGraph, LangSmith through langgraph.types) costs about
# half a second to import: it is loaded when a store is opened, never for the index
# alone (``sessions list``, ``--help``).
if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.store.base import BaseStore

    from agentgraph.capabilities.recall.search import HistoryIndex
    from agentgraph.persistence.pg_saver import AgentPostgresSaver
    from agentgraph.persistence.saver import AgentSqliteSaver

# Long-term memory (agentgraph/capabilities/recall/memory.py) lives in its own SQLite file.
MEMORY_DB_NAME = "memory.db"

SQLITE_HEADER = b"SQLite format 3\x00"
# A thread is pruned after a turn that wrote a snapshot of its transcript: only then
# has a replay chain (the old snapshot and the writes after it) become unneeded, so
# the file never holds two transcript snapshots for long. Without a new snapshot a
# prune finds nothing but checkpoints off the latest chain (a branch left by a rewind
# from a LangGraph client), and the next snapshot's prune drops those too (they are
# older than it); a prune every ``PRUNE_IDLE_EVERY_TURNS`` turns is a safety net. The
# first turn of a thread in a process prunes too (what an earlier process left). A
# prune reads only the thread's own rows (one snapshot interval, metadata only).
PRUNE_IDLE_EVERY_TURNS = 100


@dataclass
class Store:
    """A checkpointer, the session index and the thread leases that live side by side.

    ``path`` is set for the SQLite store only (pruning and VACUUM need the file).
    ``leases`` decide which process may run a thread (see ``persistence/leases.py``).
    """

    checkpointer: BaseCheckpointSaver[Any]
    index: SessionIndex
    location: str
    path: Path | None = None
    leases: ThreadLeases = field(default_factory=LocalLeases)
    keep_latest: int = PRUNE_KEEP_LATEST_CHECKPOINTS
    # Full-text index of transcripts (search_history); None: searched in memory.
    history: HistoryIndex | None = None
    # Long-term memory across sessions (agentgraph/capabilities/recall/memory.py); None: off.
    memory: BaseStore | None = None
    _turns: dict[str, int] = field(default_factory=dict, repr=False)
    # Per thread: the saver's snapshot count at the last prune that ran.
    _pruned_at: dict[str, int] = field(default_factory=dict, repr=False)

    def delete_thread(self, thread_id: str) -> None:
        """Remove a thread's checkpoints and its index row."""
        self.checkpointer.delete_thread(thread_id)
        self.index.delete(thread_id)
        if self.history is not None:
            self.history.delete_thread(thread_id)

    def _sqlite_saver(self) -> AgentSqliteSaver | None:
        from agentgraph.persistence.saver import AgentSqliteSaver

        saver = self.checkpointer
        return saver if isinstance(saver, AgentSqliteSaver) else None

    def _postgres_saver(self) -> AgentPostgresSaver | None:
        if self.path is not None:
            return None  # the SQLite store: psycopg is not even imported
        from agentgraph.persistence.pg_saver import AgentPostgresSaver

        saver = self.checkpointer
        return saver if isinstance(saver, AgentPostgresSaver) else None

    @property
    def prunable(self) -> bool:
        """Whether this store supports :meth:`prune` (the SQLite store)."""
        return self.path is not None and self._sqlite_saver() is not None

    def size_bytes(self) -> int:
        """Bytes on disk (0 when not a file store)."""
        return db_bytes(self.path) if self.path is not None else 0

    def prune(
        self,
        *,
        time_budget_s: float | None = None,
        skip: Callable[[str], bool] = lambda _thread: False,
        do_vacuum: bool = True,
    ) -> PruneStats:
        """Prune old checkpoints of every thread, then VACUUM (SQLite only)."""
        saver = self._sqlite_saver()
        if self.path is None or saver is None:
            return PruneStats(complete=False)
        stats = prune_database(
            saver.conn,
            saver.serde,
            self.path,
            keep_latest=self.keep_latest,
            time_budget_s=time_budget_s,
            skip=skip,
            do_vacuum=do_vacuum,
            lock=saver.lock,
        )
        saver.forget()
        return stats

    def _snapshots_written(self, thread_id: str) -> int:
        """Transcript snapshots of ``thread_id`` this process's saver has written."""
        saver = self._postgres_saver() or self._sqlite_saver()
        return saver.archive.snapshots_written(thread_id) if saver is not None else 0

    def prune_after_turn(self, thread_id: str) -> None:
        """Prune ``thread_id`` after its next turn, snapshot or not (someone else wrote it)."""
        self._pruned_at.pop(thread_id, None)

    def after_turn(self, thread_id: str) -> None:
        """Bookkeeping after a turn: prune the thread when it has something to drop.

        That is after a turn that wrote a snapshot of the transcript, on the thread's
        first turn in this process, after a turn that found the thread written since
        this process's last turn ended (:meth:`prune_after_turn`: another process, a
        server client, or this process outside a turn, e.g. an undo note) and every
        ``PRUNE_IDLE_EVERY_TURNS`` turns. The prune reads only this thread's rows, which
        earlier prunes keep to about one snapshot interval, so its cost does not grow
        with the session.
        """
        count = self._turns.get(thread_id, 0) + 1
        self._turns[thread_id] = count
        snapshots = self._snapshots_written(thread_id)
        if self._pruned_at.get(thread_id) == snapshots and count % PRUNE_IDLE_EVERY_TURNS:
            return
        pg_saver = self._postgres_saver()
        if pg_saver is not None:
            # The same plan in one transaction; a thread another process is pruning
            # or snapshotting is left for the next prune.
            if pg_saver.prune_thread(thread_id, keep_latest=self.keep_latest) is not None:
                self._pruned_at[thread_id] = snapshots
            return
        saver = self._sqlite_saver()
        if saver is not None:
            # Busy (another process writes): skipped, the next prune catches up.
            with contextlib.suppress(sqlite3.OperationalError):
                deleted, _writes, _kept = prune_thread(
                    saver.conn,
                    saver.serde,
                    thread_id,
                    keep_latest=self.keep_latest,
                    lock=saver.lock,
                )
                self._pruned_at[thread_id] = snapshots
                if deleted:
                    # Freed pages go back to the file system instead of the file
                    # keeping the size of its largest moment (auto_vacuum is
                    # incremental on files connect_sqlite creates). executescript:
                    # a plain execute() frees only one page per step.
                    with saver.lock:
                        saver.conn.executescript("PRAGMA incremental_vacuum;")


def _check_sqlite_file(path: Path) -> None:
    """Refuse files that are not SQLite databases before SQLite touches them."""
    if not path.exists():
        return
    try:
        with path.open("rb") as fh:
            header = fh.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise StoreError(f"cannot read session store {path}: {exc.strerror}") from exc
    if header and header != SQLITE_HEADER:
        raise StoreError(
            f"session store {path} is not an SQLite database (corrupt?); it was left "
            "untouched — move it aside or point AGENTGRAPH_HOME elsewhere"
        )


# quick_check reads the whole b-tree (~12 ms for 50 MB here); above this size a
# damaged page is only found when it is read.
QUICK_CHECK_MAX_BYTES = 2 * 1024**3


def connect_read_only(path: Path, busy_timeout_s: float) -> sqlite3.Connection:
    """A connection that never writes ``path`` or its folder.

    ``mode=ro`` first: it reads a WAL another process may be writing, through the
    ``-shm`` file. On a read-only folder without that file SQLite cannot open a WAL
    database so, and the file is opened ``immutable`` (no locks, no ``-shm``): nothing
    can be writing to a file on a read-only folder through this folder either.

    Raises:
        sqlite3.Error: The file cannot be opened even so.
    """
    uri = f"file:{quote(str(path))}"
    try:
        conn = sqlite3.connect(
            f"{uri}?mode=ro", uri=True, timeout=busy_timeout_s, check_same_thread=False
        )
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError as exc:
        if "unable to open" not in str(exc) or not path.is_file():
            raise
    conn = sqlite3.connect(
        f"{uri}?immutable=1", uri=True, timeout=busy_timeout_s, check_same_thread=False
    )
    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    return conn


def home_is_read_only(settings: Settings) -> bool:
    """Whether the SQLite store's folder exists and nothing can be written in it.

    Args:
        settings: Supplies the store's path.

    Returns:
        False for a Postgres store, a writable folder or one not made yet.
    """
    database_url = settings.database_url.get_secret_value() if settings.database_url else ""
    folder = settings.db_path.parent
    return not database_url.strip() and folder.is_dir() and _write_problem(folder) is not None


def verify_sqlite_file(path: Path, busy_timeout_s: float) -> None:
    """Check the file's structure through a read-only connection, before any write.

    SQLite would otherwise write to a file with damaged pages (a checkpoint or an
    index row) before it reads a damaged page and fails, changing the user's file.

    Raises:
        StoreError: the file is damaged or locked.
    """
    if not path.exists() or path.stat().st_size > QUICK_CHECK_MAX_BYTES:
        return
    try:
        conn = connect_read_only(path, busy_timeout_s)
    except sqlite3.Error as exc:
        raise describe_sqlite_error(path, exc, busy_timeout_s) from exc
    try:
        row = conn.execute("PRAGMA quick_check").fetchone()
    except sqlite3.Error as exc:
        raise describe_sqlite_error(path, exc, busy_timeout_s) from exc
    finally:
        conn.close()
    if not row or row[0] != "ok":
        detail = " ".join(str(row[0]).split()) if row else "no answer"
        raise StoreError(
            f"session store {path} is damaged ({detail[:120]}); it was left untouched — "
            "move it aside or point AGENTGRAPH_HOME elsewhere"
        )


def _write_problem(folder: Path) -> str | None:
    """Why a file cannot be created in ``folder``, or None when it can."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            return None
    except OSError as exc:
        return exc.strerror or str(exc)


def describe_sqlite_error(
    path: Path, exc: sqlite3.Error, busy_timeout_s: float = SQLITE_BUSY_TIMEOUT_S_DEFAULT
) -> StoreError:
    """Turn an SQLite error into a one-line, actionable message."""
    text = str(exc)
    if "unable to open" in text or "readonly" in text:
        # SQLite says "unable to open database file" for a folder it cannot write
        # (read-only home, full disk, permissions): name the real cause.
        reason = _write_problem(path.parent)
        if reason is not None:
            return StoreError(
                f"cannot write the session store in {path.parent}: {reason}; "
                "AGENTGRAPH_HOME must be a writable folder"
            )
    if "locked" in text or "busy" in text:
        return StoreError(
            f"session store {path} is locked by another process (waited "
            f"{busy_timeout_s:g}s); try again when it finishes"
        )
    if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
        return StoreError(
            f"session store {path} is damaged ({text}); it was left untouched — "
            "move it aside or point AGENTGRAPH_HOME elsewhere"
        )
    return StoreError(f"session store {path}: {text}")


# Switching a new file to WAL needs an exclusive lock and SQLite reports "locked" at
# once, without its busy handler, when several processes open the file together.
WAL_SWITCH_RETRY_S = 0.05


def _enable_wal(conn: sqlite3.Connection, busy_timeout_s: float) -> None:
    """Put the file in WAL mode, retrying while another process holds it briefly."""
    deadline = time.monotonic() + busy_timeout_s
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL").fetchone()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(WAL_SWITCH_RETRY_S)


def connect_sqlite(
    path: Path,
    busy_timeout_s: float = SQLITE_BUSY_TIMEOUT_S_DEFAULT,
    *,
    check_header: bool = True,
    read_only: bool = False,
) -> sqlite3.Connection:
    """Open ``path`` with WAL and a busy timeout so several processes can share it.

    Args:
        path: The database file.
        busy_timeout_s: How long to wait for another process's lock.
        check_header: Read the file's header first. Must be False when this process
            already has the file open through SQLite: closing any other descriptor of
            the file drops the process's POSIX locks on it, among them the shared lock
            telling other processes the WAL is in use; the next process to close its
            last connection then deletes the WAL under this one, whose later commits
            go to the deleted file and are lost.
        read_only: Only read (:func:`connect_read_only`): nothing created or set.

    Raises:
        StoreError: the file is corrupt, locked or unreadable.
    """
    if read_only:
        if check_header:
            _check_sqlite_file(path)
        try:
            return connect_read_only(path, busy_timeout_s)
        except sqlite3.Error as exc:
            raise describe_sqlite_error(path, exc, busy_timeout_s) from exc
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create {path.parent}: {exc.strerror}") from exc
    if check_header:
        _check_sqlite_file(path)
    try:
        conn = sqlite3.connect(str(path), timeout=busy_timeout_s, check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        # On a new (empty) file only: lets the per-turn prune give freed pages back
        # (``PRAGMA incremental_vacuum``). On an existing file the pragma needs the
        # write lock, so another process's transaction would fail a mere open.
        if conn.execute("PRAGMA page_count").fetchone()[0] == 0:
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        _enable_wal(conn, busy_timeout_s)
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        raise describe_sqlite_error(path, exc, busy_timeout_s) from exc
    return conn


# SQLite files this process has open through a store, with how many stores hold each.
# Closing any descriptor of a file drops every POSIX lock this process holds on it, among
# them the shared lock telling other processes that the WAL is in use (see
# connect_sqlite): another process closing its last connection would then delete the WAL
# under this one's connections, and a third process's commits would be lost. So while a
# store holds a file, another store opened in this process does not read its header.
_FILES_IN_USE: collections.Counter[str] = collections.Counter()
_FILES_IN_USE_LOCK = threading.Lock()


def _connect_checked(path: Path, timeout: float, *, read_only: bool = False) -> sqlite3.Connection:
    """A connection to ``path`` for a store, the file checked first unless already held.

    Raises:
        StoreError: the file is not a database, damaged, locked or unreadable.
    """
    key = os.path.realpath(path)
    with _FILES_IN_USE_LOCK:
        first = _FILES_IN_USE[key] == 0
        if first:
            _check_sqlite_file(path)
            verify_sqlite_file(path, timeout)
        conn = connect_sqlite(path, timeout, check_header=first, read_only=read_only)
        _FILES_IN_USE[key] += 1
    return conn


@contextmanager
def _holding(users: list[Any]) -> Iterator[None]:
    """Hold the lock each of ``users`` takes around its use of its connection (its
    ``lock`` or ``_lock``)."""
    with contextlib.ExitStack() as stack:
        for user in users:
            lock = getattr(user, "lock", None) or getattr(user, "_lock", None)
            if lock is not None:
                stack.enter_context(lock)
        yield


def _release(path: Path, *conns: sqlite3.Connection) -> None:
    """Close a store's connections to ``path`` (the first from :func:`_connect_checked`)."""
    key = os.path.realpath(path)
    with _FILES_IN_USE_LOCK:  # closed before another store may read the header again
        for conn in conns:
            conn.close()
        _FILES_IN_USE[key] -= 1
        if _FILES_IN_USE[key] <= 0:
            del _FILES_IN_USE[key]


def _open_checked_sqlite(
    settings: Settings, *, read_only: bool = False
) -> tuple[Path, float, sqlite3.Connection]:
    """The SQLite file's path, busy timeout and a connection, after the file checks."""
    path = settings.db_path
    timeout = settings.sqlite_busy_timeout_s
    return path, timeout, _connect_checked(path, timeout, read_only=read_only)


@contextmanager
def open_store(settings: Settings, *, read_only: bool = False) -> Iterator[Store]:
    """Open the configured store (SQLite file under ``AGENTGRAPH_HOME``, or PostgreSQL
    when ``AGENTGRAPH_DATABASE_URL`` is set).

    Args:
        settings: Supplies the home folder or the database URL.
        read_only: Only read the SQLite files (a read-only home): no set-up or
            migration runs, the long-term memory is not opened and leases are only read.

    Raises:
        StoreError: the store cannot be opened.
    """
    database_url = settings.database_url.get_secret_value() if settings.database_url else ""
    if database_url.strip():
        from agentgraph.persistence.postgres import open_postgres_store

        with open_postgres_store(
            database_url.strip(),
            pool_max_size=settings.postgres_pool_max_size,
            connect_timeout_s=settings.postgres_connect_timeout_s,
        ) as store:
            yield store
        return
    if read_only:
        with _open_read_only_store(settings) as store:
            yield store
        return
    path, timeout, conn = _open_checked_sqlite(settings)
    conns = [conn]
    memory_path = settings.home / MEMORY_DB_NAME
    try:
        conns.append(connect_sqlite(path, timeout, check_header=False))  # the index's
        conns.append(connect_sqlite(path, timeout, check_header=False))  # search history's
        memory_conn = _connect_checked(memory_path, timeout)
    except StoreError:
        _release(path, *conns)
        raise
    index_conn, history_conn = conns[1:]
    # Released when the store closes; a crashed process's leases are void (pid check).
    leases = SqliteLeases(path, timeout)
    # The objects that use the connections, as they are built (see the close below).
    users: list[Any] = []
    memory_users: list[Any] = []
    try:
        from agentgraph.capabilities.recall.search import SqliteHistoryIndex
        from agentgraph.persistence.delta import messages_delta_reducer
        from agentgraph.persistence.saver import AgentSqliteSaver

        # agentgraph's graph rebuilds ``messages`` with this reducer (AppState).
        saver = AgentSqliteSaver(conn, reducers={"messages": messages_delta_reducer})
        users.append(saver)
        try:
            saver.setup()
            index = SqliteSessionIndex(index_conn)
            users.append(index)
            history = SqliteHistoryIndex(history_conn)
            users.append(history)
        except sqlite3.Error as exc:
            raise describe_sqlite_error(path, exc, timeout) from exc
        try:
            memory = open_sqlite_memory(
                memory_conn, memory_path.with_name(memory_path.name + ".setup-lock")
            )
            memory_users.append(memory)
        except sqlite3.Error as exc:
            raise describe_sqlite_error(memory_path, exc, timeout) from exc
        except OSError as exc:
            raise StoreError(f"cannot lock {memory_path} for set-up: {exc.strerror}") from exc
        yield Store(
            checkpointer=saver,
            index=index,
            location=str(path),
            path=path,
            leases=leases,
            history=history,
            memory=memory,
        )
    finally:
        leases.close()
        # A thread may still be writing (a cancelled subagent's last checkpoint): the
        # connections close under the locks their users take, so such a write fails
        # with sqlite3.ProgrammingError afterwards instead of crashing the process.
        with _holding(users):
            _release(path, conn, index_conn, history_conn)
        with _holding(memory_users):
            _release(memory_path, memory_conn)


@contextmanager
def _open_read_only_store(settings: Settings) -> Iterator[Store]:
    """The SQLite store opened only to read: checkpoints, the index, leases to check.

    The tables a writing process created are used as they are (a store from before a
    migration is read as far as it goes); search history and memory are left closed.
    """
    path, timeout, conn = _open_checked_sqlite(settings, read_only=True)
    try:
        index_conn = connect_sqlite(path, timeout, check_header=False, read_only=True)
    except StoreError:
        _release(path, conn)
        raise
    leases = SqliteLeases(path, timeout, read_only=True)
    try:
        from agentgraph.persistence.saver import AgentSqliteSaver

        saver = AgentSqliteSaver(conn)
        saver.is_setup = True  # set up by the process that wrote the file
        try:
            index = SqliteSessionIndex(index_conn)
        except sqlite3.Error as exc:
            raise describe_sqlite_error(path, exc, timeout) from exc
        yield Store(checkpointer=saver, index=index, location=str(path), path=path, leases=leases)
    finally:
        leases.close()
        _release(path, conn, index_conn)


def open_sqlite_memory(conn: sqlite3.Connection, lock_path: Path | None = None) -> BaseStore:
    """LangGraph's ``SqliteStore`` over ``conn`` (its own file), set up.

    ``SqliteStore.setup()`` reads the migration version and applies the missing ones
    outside one transaction: two processes opening a new file at once would both apply
    them. An exclusive lock on ``lock_path`` (a file next to the database) serializes it.
    """
    import fcntl

    from langgraph.store.sqlite import SqliteStore

    # SqliteStore issues its own BEGIN/COMMIT: the connection must not open transactions.
    conn.isolation_level = None
    memory = SqliteStore(conn)
    if lock_path is None:
        memory.setup()
        return memory
    with lock_path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            memory.setup()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return memory


@contextmanager
def open_index(settings: Settings, *, read_only: bool = False) -> Iterator[SessionIndex]:
    """Open the session index alone (``sessions list``): no checkpointer is loaded.

    Args:
        settings: Supplies the home folder or the database URL.
        read_only: Only read the SQLite file (a read-only home).

    Raises:
        StoreError: the store cannot be opened.
    """
    database_url = settings.database_url.get_secret_value() if settings.database_url else ""
    if database_url.strip():
        with open_store(settings) as store:
            yield store.index
        return
    path, timeout, conn = _open_checked_sqlite(settings, read_only=read_only)
    try:
        try:
            index = SqliteSessionIndex(conn)
        except sqlite3.Error as exc:
            raise describe_sqlite_error(path, exc, timeout) from exc
        yield index
    finally:
        _release(path, conn)
