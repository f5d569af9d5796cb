"""Full-text search over a session's whole transcript (``search_history``, ``/search``).

The graph state keeps every message, including those a compaction summarized away or the
prompt view no longer shows. This module indexes them and finds them again:

* **SQLite**: an FTS5 table with the ``trigram`` tokenizer (substring matching, so CJK
  and identifiers are searchable without word splitting) over a content table in the
  session database, ranked with bm25. Terms shorter than three characters (which a
  trigram index cannot match) are found by scanning the session's rows.
* **Postgres**: a generated ``tsvector`` column (``simple`` configuration, GIN index)
  ranked with ``ts_rank``, plus ``ILIKE`` for substrings and CJK, which the ``simple``
  parser does not split into words.
* **No database** (the ``langgraph dev`` server): a scan of the messages in memory.

The index is kept in step incrementally by message id: before every search and after
every turn, new messages are added and messages no longer in the state (moved by a
compaction) removed. A damaged index is dropped and rebuilt from the transcript, which
is never touched. A hit's reference ``msg:N`` is the message's position in the stored
transcript; positions before a compaction boundary never change.
"""

from __future__ import annotations

import json
import re
import sqlite3
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage

from agentgraph.history import INTERNAL_KINDS, agentgraph_kind
from agentgraph.recall.index_sync import IndexMirror, SyncPlan

SEARCH_QUERY_MAX_CHARS = 500
SEARCH_TERMS_MAX = 12
SEARCH_LIMIT_DEFAULT = 5
SEARCH_LIMIT_MAX = 20
# Rows ranked by the index before terms are counted in Python.
SEARCH_CANDIDATES_MAX = 200
SNIPPET_MAX_CHARS = 240
# A message's indexed text is cut here (tsvector values are limited to 1 MB; the full
# message stays readable by reference).
INDEXED_BODY_MAX_CHARS = 200_000
# The trigram tokenizer matches nothing shorter than three characters.
TRIGRAM_MIN_CHARS = 3
REF_PREFIX = "msg:"
SEARCH_HISTORY_TOOL = "search_history"
READ_HISTORY_TOOL = "read_history"
# Their own calls and results are not indexed: a search would find earlier searches.
HISTORY_TOOLS = frozenset({SEARCH_HISTORY_TOOL, READ_HISTORY_TOOL})
READ_HISTORY_MAX_CHARS = 50_000


def index_errors() -> tuple[type[Exception], ...]:
    """Database errors an index operation may raise (busy, damaged, server gone).

    psycopg's errors only when psycopg is loaded: an index on PostgreSQL has imported
    it, and without it none of its errors can be raised. Importing it here would add
    its import to every start on SQLite.
    """
    psycopg = sys.modules.get("psycopg")
    error = getattr(psycopg, "Error", None)
    if isinstance(error, type) and issubclass(error, Exception):
        return (sqlite3.Error, error)
    return (sqlite3.Error,)


_REF_RE = re.compile(r"^\s*(?:msg:|#)?\s*(\d{1,9})\s*$", re.IGNORECASE)
_TERM_RE = re.compile(r'"([^"]+)"|(\S+)')
_KIND_ROLES = {"summary": "summary", "reinjected_file": "file", "resume": "resume note"}


class SearchError(ValueError):
    """A query or reference that cannot be used; the message says why."""


@dataclass(frozen=True)
class HistoryDoc:
    """One searchable message of a transcript."""

    msg_id: str
    position: int
    role: str
    body: str


@dataclass(frozen=True)
class SearchHit:
    """One ranked result."""

    position: int
    role: str
    snippet: str
    matched_terms: int

    @property
    def ref(self) -> str:
        """The reference ``read_history`` expands (``msg:N``)."""
        return f"{REF_PREFIX}{self.position}"


class HistoryIndex(Protocol):
    """A full-text index of transcripts (SQLite and Postgres implement it)."""

    rebuilt: int

    def search(
        self, thread_id: str, messages: Sequence[BaseMessage], terms: Sequence[str], limit: int
    ) -> list[SearchHit]: ...
    def sync(self, thread_id: str, messages: Sequence[BaseMessage]) -> None: ...
    def delete_thread(self, thread_id: str) -> None: ...


# ---------------------------------------------------------------- messages → documents


def message_role(msg: BaseMessage) -> str:
    """A short label: user, assistant, tool NAME, summary, file…"""
    kind = agentgraph_kind(msg)
    if kind in _KIND_ROLES:
        return _KIND_ROLES[kind]
    if isinstance(msg, ToolMessage):
        return f"tool {msg.name or ''}".strip()
    return {"human": "user", "ai": "assistant"}.get(msg.type, msg.type)


def message_body(msg: BaseMessage) -> str:
    """The text of a message as searched and shown: content, then its tool calls."""
    text = str(msg.text)  # langchain-core joins the text blocks
    if isinstance(msg, AIMessage):
        calls = [
            f"[tool call] {c['name']} {json.dumps(c['args'], ensure_ascii=False)}"
            for c in msg.tool_calls
            if c["name"] not in HISTORY_TOOLS
        ]
        text = "\n".join([text, *calls]) if text else "\n".join(calls)
    return text


def searchable(msg: BaseMessage) -> bool:
    """Whether a stored message is part of the conversation (not a system/internal record)."""
    if isinstance(msg, ToolMessage) and msg.name in HISTORY_TOOLS:
        return False
    return not isinstance(msg, SystemMessage) and agentgraph_kind(msg) not in INTERNAL_KINDS


def history_docs(messages: Sequence[BaseMessage], start: int = 0) -> list[HistoryDoc]:
    """The searchable documents of a transcript, with their positions in it.

    Args:
        messages: The transcript, or its part from position ``start`` on.
        start: Position of ``messages[0]`` in the whole transcript.
    """
    docs: list[HistoryDoc] = []
    for position, msg in enumerate(messages, start):
        if not searchable(msg):
            continue
        body = message_body(msg)
        if not body.strip():
            continue
        docs.append(
            HistoryDoc(
                msg_id=msg.id or f"pos-{position}",
                position=position,
                role=message_role(msg),
                body=body[:INDEXED_BODY_MAX_CHARS].replace("\0", " "),
            )
        )
    return docs


# ---------------------------------------------------------------- queries and ranking


def query_terms(query: str) -> list[str]:
    """Split a user's query into literal terms (``"quoted phrases"`` stay whole).

    Nothing in the query is syntax: ``AND``, ``NEAR``, ``*`` or parentheses are words to
    find like any other.

    Raises:
        SearchError: the query is empty or longer than ``SEARCH_QUERY_MAX_CHARS``.
    """
    # Control characters (NUL ends an FTS5 string early) are never part of a search.
    printable = "".join(c if c.isprintable() else " " for c in str(query or ""))
    text = " ".join(printable.split())
    if not text:
        raise SearchError("the search query is empty: give a word or a phrase to find")
    if len(text) > SEARCH_QUERY_MAX_CHARS:
        raise SearchError(
            f"the search query is {len(text)} characters; the limit is "
            f"{SEARCH_QUERY_MAX_CHARS} (SEARCH_QUERY_MAX_CHARS): search for a few key words"
        )
    terms: list[str] = []
    seen: set[str] = set()
    for match in _TERM_RE.finditer(text):
        term = (match.group(1) or match.group(2) or "").strip().strip('"').strip()
        if term and term.casefold() not in seen:
            seen.add(term.casefold())
            terms.append(term)
    # Only quote marks: they are the text to find.
    return terms[:SEARCH_TERMS_MAX] or [text]


def check_limit(limit: int) -> int:
    """``limit`` checked against ``1..SEARCH_LIMIT_MAX``.

    Raises:
        SearchError: out of range.
    """
    if not 1 <= int(limit) <= SEARCH_LIMIT_MAX:
        raise SearchError(f"limit must be between 1 and {SEARCH_LIMIT_MAX}, not {limit}")
    return int(limit)


def snippet(body: str, terms: Sequence[str], max_chars: int = SNIPPET_MAX_CHARS) -> str:
    """A one-line excerpt of ``body`` around the first matched term."""
    folded = body.casefold()
    hits = [i for i in (folded.find(t.casefold()) for t in terms) if i >= 0]
    start = max(min(hits) - max_chars // 3, 0) if hits else 0
    piece = " ".join(body[start : start + max_chars * 2].split())[:max_chars]
    prefix = "…" if start > 0 else ""
    suffix = "…" if len(" ".join(body[start:].split())) > len(piece) else ""
    return f"{prefix}{piece}{suffix}"


def rank(
    rows: Sequence[tuple[int, str, str, float]], terms: Sequence[str], limit: int
) -> list[SearchHit]:
    """Rank candidate rows ``(position, role, body, index_score)``.

    Most distinct terms matched first, then the index's own score (higher is better),
    then the most recent message.
    """
    folded_terms = [t.casefold() for t in terms]
    scored: list[tuple[int, float, int, str, str]] = []
    for position, role, body, score in rows:
        folded = body.casefold()
        matched = sum(1 for t in folded_terms if t in folded)
        if matched:
            scored.append((matched, score, position, role, body))
    scored.sort(key=lambda item: (-item[0], -item[1], -item[2]))
    return [
        SearchHit(position, role, snippet(body, terms), matched)
        for matched, _score, position, role, body in scored[:limit]
    ]


def scan(docs: Sequence[HistoryDoc], terms: Sequence[str], limit: int) -> list[SearchHit]:
    """Search documents in memory (no database index)."""
    return rank([(d.position, d.role, d.body, 0.0) for d in docs], terms, limit)


# ---------------------------------------------------------------- SQLite FTS5


def _busy(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def fts5_phrase(term: str) -> str:
    """``term`` as an FTS5 string literal: never parsed as query syntax."""
    return '"' + term.replace('"', '""') + '"'


_CREATE_FTS = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS agentgraph_history_fts USING fts5("
    "body, content='agentgraph_history', content_rowid='id', tokenize='trigram')"
)
_FTS_SHADOW_TABLES = ("data", "idx", "docsize", "config")


class SqliteHistoryIndex:
    """The transcript index in the session's SQLite file (FTS5, trigram tokenizer).

    ``agentgraph_history`` holds one row per message; ``agentgraph_history_fts`` is an
    external-content FTS5 index over it. Without FTS5 trigram support (SQLite before
    3.34) every search scans the session's rows instead.

    Args:
        conn: A connection of its own to the session database.
    """

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._lock = threading.Lock()
        self._mirror: IndexMirror[HistoryDoc] = IndexMirror(history_docs)
        self.fts = True
        self.rebuilt = 0
        with self._lock:
            self._create()

    def _create(self, conn: sqlite3.Connection | None = None) -> None:
        conn = conn or self._conn
        with conn:
            conn.execute(
                """CREATE TABLE IF NOT EXISTS agentgraph_history (
                    id INTEGER PRIMARY KEY,
                    thread_id TEXT NOT NULL,
                    msg_id TEXT NOT NULL,
                    position INTEGER NOT NULL,
                    role TEXT NOT NULL,
                    body TEXT NOT NULL,
                    UNIQUE (thread_id, msg_id)
                )"""
            )
        try:
            with conn:
                conn.execute(_CREATE_FTS)
        except sqlite3.OperationalError as exc:
            if "trigram" not in str(exc) and "fts5" not in str(exc):
                raise
            self.fts = False

    def _rebuild(self) -> None:
        """Drop both tables and create them empty; sessions re-index on their next sync."""
        try:
            with self._conn:
                self._conn.execute("DROP TABLE IF EXISTS agentgraph_history_fts")
        except sqlite3.DatabaseError:
            # SQLite cannot even drop an FTS5 table whose structure record is damaged:
            # put back the shadow rows of an empty index first.
            self._reset_fts_shadow_tables()
            with self._conn:
                self._conn.execute("DROP TABLE IF EXISTS agentgraph_history_fts")
        with self._conn:
            self._conn.execute("DROP TABLE IF EXISTS agentgraph_history")
        self._mirror.forget()
        self._create()
        self.rebuilt += 1

    def _reset_fts_shadow_tables(self) -> None:
        """Overwrite the FTS5 shadow tables (plain tables) with those of an empty index."""
        scratch = sqlite3.connect(":memory:")
        try:
            self._create(scratch)
            fresh = {
                table: scratch.execute(f"SELECT * FROM agentgraph_history_fts_{table}").fetchall()
                for table in _FTS_SHADOW_TABLES
            }
        finally:
            scratch.close()
        with self._conn:
            for table, rows in fresh.items():
                self._conn.execute(f"DELETE FROM agentgraph_history_fts_{table}")
                if rows:
                    marks = ",".join("?" for _ in rows[0])
                    self._conn.executemany(
                        f"INSERT INTO agentgraph_history_fts_{table} VALUES ({marks})", rows
                    )

    def _stored(self, thread_id: str) -> dict[str, int]:
        """The thread's rows: ``msg_id`` → position."""
        return {
            msg_id: position
            for msg_id, position in self._conn.execute(
                "SELECT msg_id, position FROM agentgraph_history WHERE thread_id = ?",
                (thread_id,),
            )
        }

    def _sync(self, thread_id: str, messages: Sequence[BaseMessage]) -> None:
        # Only what changed since this process last synced the thread is looked at.
        self._mirror.sync(
            thread_id,
            messages,
            lambda: self._stored(thread_id),
            lambda plan: self._write(thread_id, plan),
        )

    def _write(self, thread_id: str, plan: SyncPlan[HistoryDoc]) -> None:
        with self._conn:
            for msg_id in plan.gone:
                if self.fts:
                    self._conn.execute(
                        "INSERT INTO agentgraph_history_fts(agentgraph_history_fts, rowid, body) "
                        "SELECT 'delete', id, body FROM agentgraph_history "
                        "WHERE thread_id = ? AND msg_id = ?",
                        (thread_id, msg_id),
                    )
                self._conn.execute(
                    "DELETE FROM agentgraph_history WHERE thread_id = ? AND msg_id = ?",
                    (thread_id, msg_id),
                )
            self._conn.executemany(
                "UPDATE agentgraph_history SET position = ? WHERE thread_id = ? AND msg_id = ?",
                [(position, thread_id, msg_id) for msg_id, position in plan.moved],
            )
            for doc in plan.new:
                cur = self._conn.execute(
                    "INSERT INTO agentgraph_history (thread_id, msg_id, position, role, body) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (thread_id, doc.msg_id, doc.position, doc.role, doc.body),
                )
                if self.fts:
                    self._conn.execute(
                        "INSERT INTO agentgraph_history_fts(rowid, body) VALUES (?, ?)",
                        (cur.lastrowid, doc.body),
                    )

    def _query(self, thread_id: str, terms: Sequence[str], limit: int) -> list[SearchHit]:
        rows: dict[int, tuple[int, str, str, float]] = {}
        long_terms = [t for t in terms if len(t) >= TRIGRAM_MIN_CHARS] if self.fts else []
        short_terms = [t for t in terms if t not in long_terms]
        if long_terms:
            expression = " OR ".join(fts5_phrase(t) for t in long_terms)
            for position, role, body, score in self._conn.execute(
                "SELECT h.position, h.role, h.body, bm25(agentgraph_history_fts) "
                "FROM agentgraph_history_fts JOIN agentgraph_history h "
                "ON h.id = agentgraph_history_fts.rowid "
                "WHERE agentgraph_history_fts MATCH ? AND h.thread_id = ? "
                "ORDER BY bm25(agentgraph_history_fts) LIMIT ?",
                (expression, thread_id, SEARCH_CANDIDATES_MAX),
            ):
                rows[position] = (position, role, body, -float(score))
        if short_terms:
            clause = " OR ".join("instr(lower(body), lower(?)) > 0" for _ in short_terms)
            for position, role, body in self._conn.execute(
                f"SELECT position, role, body FROM agentgraph_history "
                f"WHERE thread_id = ? AND ({clause}) ORDER BY position DESC LIMIT ?",
                (thread_id, *short_terms, SEARCH_CANDIDATES_MAX),
            ):
                rows.setdefault(position, (position, role, body, 0.0))
        return rank(list(rows.values()), terms, limit)

    def _guarded(self, thread_id: str, messages: Sequence[BaseMessage], work: Any) -> Any:
        """Sync, then ``work()``; a damaged index is rebuilt once and the work retried."""
        with self._lock:
            for attempt in (1, 2):
                try:
                    self._sync(thread_id, messages)
                    return work()
                except sqlite3.DatabaseError as exc:
                    if attempt == 2 or (isinstance(exc, sqlite3.OperationalError) and _busy(exc)):
                        raise
                    self._rebuild()
        return None  # pragma: no cover - the loop returns or raises

    def sync(self, thread_id: str, messages: Sequence[BaseMessage]) -> None:
        """Bring the thread's rows in step with ``messages`` (the whole stored transcript)."""
        self._guarded(thread_id, messages, lambda: None)

    def search(
        self, thread_id: str, messages: Sequence[BaseMessage], terms: Sequence[str], limit: int
    ) -> list[SearchHit]:
        """Sync the thread, then return its best ``limit`` hits for ``terms``."""
        # A search compares with the stored rows in full (the turns' syncs trust what
        # this process wrote): whatever another process did to them is repaired first.
        self._mirror.forget(thread_id)
        result: list[SearchHit] = self._guarded(
            thread_id, messages, lambda: self._query(thread_id, terms, limit)
        )
        return result

    def delete_thread(self, thread_id: str) -> None:
        """Remove a thread's rows (its session was deleted)."""
        with self._lock, self._conn:
            if self.fts:
                self._conn.execute(
                    "INSERT INTO agentgraph_history_fts(agentgraph_history_fts, rowid, body) "
                    "SELECT 'delete', id, body FROM agentgraph_history WHERE thread_id = ?",
                    (thread_id,),
                )
            self._conn.execute("DELETE FROM agentgraph_history WHERE thread_id = ?", (thread_id,))
            self._mirror.forget(thread_id)


# ---------------------------------------------------------------- the tool-facing API


@dataclass
class SearchResult:
    """Hits of one search and whether the index had to be rebuilt for it."""

    query: str
    hits: list[SearchHit]
    rebuilt: bool = False


def search_transcript(
    index: HistoryIndex | None,
    thread_id: str,
    messages: Sequence[BaseMessage],
    query: str,
    limit: int = SEARCH_LIMIT_DEFAULT,
) -> SearchResult:
    """Search a session's whole stored transcript.

    Args:
        index: The store's transcript index, or None to scan ``messages`` in memory.
        thread_id: The session.
        messages: Its whole stored transcript (kept in step with the index first).
        query: The user's or model's words (never parsed as query syntax).
        limit: Most hits to return.

    Raises:
        SearchError: empty or over-long query, bad limit.
    """
    terms = query_terms(query)
    limit = check_limit(limit)
    if index is None:
        return SearchResult(query, scan(history_docs(messages), terms, limit))
    before = index.rebuilt
    hits = index.search(thread_id, messages, terms, limit)
    return SearchResult(query, hits, rebuilt=index.rebuilt != before)


def format_results(result: SearchResult) -> str:
    """The tool's answer: one line per hit with its reference."""
    notes = []
    if result.rebuilt:
        notes.append("(the search index was damaged and has been rebuilt from the transcript)")
    if not result.hits:
        return " ".join([f"no messages of this session match {result.query!r}", *notes])
    lines = [
        f"{len(result.hits)} matches for {result.query!r}, best first "
        "(read one in full with read_history(ref)):",
        *(f"{h.ref} [{h.role}] {h.snippet}" for h in result.hits),
        *notes,
    ]
    return "\n".join(lines)


def parse_ref(ref: str) -> int:
    """The position in ``msg:N`` (``#N`` and ``N`` work too).

    Raises:
        SearchError: not a reference.
    """
    match = _REF_RE.match(str(ref or ""))
    if match is None:
        raise SearchError(
            f"{str(ref)[:60]!r} is not a message reference; use one like msg:12 (or a tool call id)"
        )
    return int(match.group(1))


def _position_of_id(messages: Sequence[BaseMessage], ref: str) -> int | None:
    """Position of the tool result answering call ``ref`` (masking placeholders name the
    ``tool_call_id``), else of the message whose id is ``ref``."""
    key = str(ref or "").strip()
    if not key:
        return None
    for position, msg in enumerate(messages):
        if isinstance(msg, ToolMessage) and msg.tool_call_id == key:
            return position
    for position, msg in enumerate(messages):
        if msg.id == key:
            return position
    return None


def read_message(messages: Sequence[BaseMessage], ref: str) -> str:
    """The message at reference ``ref`` in full, with its role (bounded).

    ``ref`` is ``msg:N`` (from ``search_history``) or a tool call id (from a masked
    output's placeholder).

    Raises:
        SearchError: not a reference, or no such message.
    """
    by_id = _position_of_id(messages, ref) if not _REF_RE.match(str(ref or "")) else None
    position = by_id if by_id is not None else parse_ref(ref)
    if position >= len(messages) or not searchable(messages[position]):
        raise SearchError(
            f"there is no message {REF_PREFIX}{position} in this session "
            f"({len(messages)} stored messages); use a reference search_history returned"
        )
    msg = messages[position]
    body = message_body(msg)
    if len(body) > READ_HISTORY_MAX_CHARS:
        body = (
            body[:READ_HISTORY_MAX_CHARS]
            + f"\n… [{len(body) - READ_HISTORY_MAX_CHARS} more characters not shown]"
        )
    return f"{REF_PREFIX}{position} [{message_role(msg)}]\n{body}"
