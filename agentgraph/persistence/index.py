"""The session index: one row per thread, for listing, resuming and cleanup."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from agentgraph.errors import AmbiguousSession, SessionNotFound
from agentgraph.persistence.migrations import migrate_sqlite

TITLE_MAX_CHARS = 80
AMBIGUOUS_CANDIDATES_SHOWN = 5

_COLUMNS = (
    "thread_id",
    "title",
    "title_source",
    "workspace",
    "git_branch",
    "created_at",
    "updated_at",
    "message_count",
    "input_tokens",
    "output_tokens",
    "context_tokens",
    "parent_thread_id",
    "context_id",
    "compactions",
    "cached_input_tokens",
    "cost_usd",
    "model",
)


@dataclass
class SessionInfo:
    """One row of the session index."""

    thread_id: str
    title: str = ""
    title_source: str = "first_message"
    workspace: str = ""
    git_branch: str | None = None
    created_at: float = field(default_factory=time.time)
    updated_at: float = field(default_factory=time.time)
    message_count: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    context_tokens: int = 0
    parent_thread_id: str | None = None
    context_id: str = "main"
    compactions: int = 0
    # Prompt tokens served from the provider's cache, and the estimated cost in USD
    # (None: a model without a known price was used, or usage predates costs).
    cached_input_tokens: int = 0
    cost_usd: float | None = 0.0
    # The model the session's last turn ran with ("": not recorded yet).
    model: str = ""

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form used by ``sessions list --json``."""
        from agentgraph.providers.pricing import usage_json

        data = asdict(self)
        data["messages"] = self.message_count
        data["usage"] = usage_json(
            self.input_tokens, self.output_tokens, self.cached_input_tokens, self.cost_usd
        )
        return data


def shorten_title(text: str, limit: int = TITLE_MAX_CHARS) -> str:
    """First line of ``text``, whitespace folded, cut to ``limit`` characters."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


class SessionIndex(Protocol):
    """Storage-agnostic session index (SQLite and Postgres implement it)."""

    def upsert(self, info: SessionInfo) -> None: ...
    def set_message_count(self, thread_id: str, count: int) -> None: ...
    def get(self, thread_id: str) -> SessionInfo | None: ...
    def delete(self, thread_id: str) -> None: ...
    def list_sessions(
        self, *, workspace: str | None = None, include_subagents: bool = False
    ) -> list[SessionInfo]: ...
    def children(self, thread_id: str) -> list[SessionInfo]: ...


def list_filter(
    placeholder: str, *, workspace: str | None, include_subagents: bool
) -> tuple[str, list[Any]]:
    """``WHERE …`` clause and parameters of ``list_sessions`` (``?`` or ``%s`` style)."""
    where: list[str] = []
    params: list[Any] = []
    if workspace is not None:
        where.append(f"workspace = {placeholder}")
        params.append(workspace)
    if not include_subagents:
        where.append("parent_thread_id IS NULL")
    return ("WHERE " + " AND ".join(where)) if where else "", params


def resolve_session(index: SessionIndex, prefix: str) -> SessionInfo:
    """Find the one session whose id is ``prefix`` or starts with it.

    Raises:
        SessionNotFound: nothing matches, or several sessions do (they are listed).
    """
    exact = index.get(prefix)
    if exact is not None:
        return exact
    everything = index.list_sessions(include_subagents=True)
    matches = [s for s in everything if s.thread_id.startswith(prefix)]
    if not prefix or not matches:
        raise SessionNotFound(f"no session matches {prefix!r} (see `agentgraph sessions list`)")
    if len(matches) > 1:
        shown = ", ".join(
            f"{m.thread_id[:12]} ({shorten_title(m.title, 30)})"
            for m in matches[:AMBIGUOUS_CANDIDATES_SHOWN]
        )
        more = len(matches) - AMBIGUOUS_CANDIDATES_SHOWN
        extra = f" and {more} more" if more > 0 else ""
        raise AmbiguousSession(
            f"{prefix!r} matches {len(matches)} sessions: {shown}{extra}; use a longer prefix"
        )
    return matches[0]


class SqliteSessionIndex:
    """Session index in the same SQLite file as the checkpoints."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._lock = threading.Lock()
        with self._lock:
            migrate_sqlite(self._conn)

    def upsert(self, info: SessionInfo) -> None:
        """Insert or replace the row for ``info.thread_id``."""
        values = [getattr(info, c) for c in _COLUMNS]
        placeholders = ",".join("?" for _ in _COLUMNS)
        updates = ",".join(f"{c}=excluded.{c}" for c in _COLUMNS if c != "thread_id")
        with self._lock, self._conn:
            self._conn.execute(
                f"INSERT INTO agentgraph_sessions ({','.join(_COLUMNS)}) "
                f"VALUES ({placeholders}) ON CONFLICT(thread_id) DO UPDATE SET {updates}",
                values,
            )

    def set_message_count(self, thread_id: str, count: int) -> None:
        """Set the stored message count of an existing row, and nothing else of it (a
        running turn's progress: a title written meanwhile stays)."""
        with self._lock, self._conn:
            self._conn.execute(
                "UPDATE agentgraph_sessions SET message_count = ? WHERE thread_id = ?",
                (count, thread_id),
            )

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[SessionInfo]:
        with self._lock:
            cur = self._conn.execute(
                f"SELECT {','.join(_COLUMNS)} FROM agentgraph_sessions {sql}", params
            )
            return [SessionInfo(*row) for row in cur.fetchall()]

    def get(self, thread_id: str) -> SessionInfo | None:
        """The row for ``thread_id``, if any."""
        rows = self._rows("WHERE thread_id = ?", (thread_id,))
        return rows[0] if rows else None

    def delete(self, thread_id: str) -> None:
        """Remove the row (checkpoints are removed by the caller)."""
        with self._lock, self._conn:
            self._conn.execute("DELETE FROM agentgraph_sessions WHERE thread_id = ?", (thread_id,))

    def list_sessions(
        self, *, workspace: str | None = None, include_subagents: bool = False
    ) -> list[SessionInfo]:
        """Sessions, most recently updated first."""
        clause, params = list_filter("?", workspace=workspace, include_subagents=include_subagents)
        return self._rows(f"{clause} ORDER BY updated_at DESC", params)

    def children(self, thread_id: str) -> list[SessionInfo]:
        """Subagent sessions started by ``thread_id``."""
        return self._rows("WHERE parent_thread_id = ? ORDER BY created_at", (thread_id,))
