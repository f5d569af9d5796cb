"""Full-text search over a session's whole transcript (``search_history``, ``/search``).

The graph state keeps every message, including those a compaction summarized away or the
prompt view no longer shows. This module indexes them and finds them again:

* **SQLite**: a contentless FTS5 word index (``unicode61``; CJK characters and the parts
  of identifiers are words) in the session database, ranked with bm25, over each
  distinct message text stored once, compressed; see :class:`SqliteHistoryIndex` for
  why it is built this way.
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

import dataclasses
import hashlib
import json
import re
import sqlite3
import sys
import threading
import unicodedata
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage

from agentgraph.capabilities.recall.index_sync import IndexMirror, SyncPlan
from agentgraph.capabilities.tools.workspace_scan import scanned_changes
from agentgraph.context.artifacts import cut_original
from agentgraph.context.masking_text import MASKED_KEY, SUMMARIZED_COPY_KEY
from agentgraph.lazy_re import LazyPattern
from agentgraph.persistence.migrations import (
    SQLITE_SEARCH_FTS,
    SQLITE_SEARCH_TABLES,
    create_search_fts,
    migrate_sqlite,
)
from agentgraph.runtime.history import INTERNAL_KINDS, agentgraph_kind

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
# A stored text of at least this many UTF-8 bytes is kept zlib-compressed (shorter ones
# gain little and are kept as text).
BODY_COMPRESS_MIN_BYTES = 64
BODY_COMPRESS_LEVEL = 6
REF_PREFIX = "msg:"
SEARCH_HISTORY_TOOL = "search_history"
READ_HISTORY_TOOL = "read_history"
# Their own calls and results are not indexed: a search would find earlier searches.
HISTORY_TOOLS = frozenset({SEARCH_HISTORY_TOOL, READ_HISTORY_TOOL})
# Messages rebuilt from the conversation at every compaction, not indexed: the progress
# ledger is derived from the calls, which are indexed themselves, and the newest one is
# in the prompt; its copies, one a compaction, took four of a file name's five hits
# after eight compactions, ahead of the calls that read the file.
DERIVED_KINDS = frozenset({"ledger"})
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
_KIND_ROLES = {
    "summary": "summary",
    "reinjected_file": "file",
    "ledger": "ledger",
    "resume": "resume note",
    "undo_note": "undo note",
    "hook_context": "hook output",
    "mode_note": "mode note",
}


class SearchError(ValueError):
    """A query or reference that cannot be used; the message says why."""


@dataclass(frozen=True)
class HistoryDoc:
    """One searchable message of a transcript.

    Attributes:
        msg_id: The message's id (its position's when it has none).
        position: Where it is in the transcript.
        role: Its label (:func:`message_role`).
        text: Its text as indexed (:func:`message_body`, cut to
            :data:`INDEXED_BODY_MAX_CHARS`).
        whole: Reads the saved whole copy of a cut output in its place, None if none:
            only a document the index adds reads it (a search compares every message's
            id and position with the stored rows, and most are there already).
    """

    msg_id: str
    position: int
    role: str
    text: str
    whole: Callable[[], str | None] | None = field(default=None, compare=False, repr=False)

    @property
    def body(self) -> str:
        """The text indexed: the saved whole copy when :attr:`whole` reads one."""
        original = self.whole() if self.whole is not None else None
        return self.text if original is None else _indexed_text(original)


@dataclass(frozen=True)
class SearchHit:
    """One ranked result."""

    position: int
    role: str
    snippet: str
    matched_terms: int
    # Positions of the results of a hit's tool calls: a file's name is in the call that
    # read it, rarely in what it returned.
    results: tuple[int, ...] = ()

    @property
    def ref(self) -> str:
        """The reference ``read_history`` expands (``msg:N``)."""
        return f"{REF_PREFIX}{self.position}"

    @property
    def line(self) -> str:
        """The hit as the tool and ``/search`` show it."""
        shown = f"{self.ref} [{self.role}] {self.snippet}"
        if self.results:
            refs = ", ".join(f"{REF_PREFIX}{p}" for p in self.results)
            shown += f" → {'result' if len(self.results) == 1 else 'results'} {refs}"
        return shown


class HistoryIndex(Protocol):
    """A full-text index of transcripts (SQLite and Postgres implement it)."""

    rebuilt: int

    def search(
        self,
        thread_id: str,
        messages: Sequence[BaseMessage],
        terms: Sequence[str],
        limit: int,
        folder: str | None = None,
    ) -> list[SearchHit]: ...
    def sync(
        self, thread_id: str, messages: Sequence[BaseMessage], folder: str | None = None
    ) -> None: ...
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


def _readable(msg: BaseMessage) -> bool:
    """Whether ``read_history`` shows a stored message: not a system or internal record,
    nor a history tool's own result."""
    if isinstance(msg, ToolMessage) and msg.name in HISTORY_TOOLS:
        return False
    return not isinstance(msg, SystemMessage) and agentgraph_kind(msg) not in INTERNAL_KINDS


def searchable(msg: BaseMessage) -> bool:
    """Whether a stored message is part of the conversation (readable, and not a copy
    derived from the conversation)."""
    return _readable(msg) and agentgraph_kind(msg) not in DERIVED_KINDS


def whole_body(msg: BaseMessage, folder: str | None) -> str:
    """:func:`message_body`, but a tool output the history holds cut is its saved whole
    copy (:func:`~agentgraph.context.artifacts.cut_original`) when ``folder``, the
    session's artifacts folder, holds it: what the cut took from the model stays
    searchable and readable by reference."""
    if isinstance(msg, ToolMessage):
        original = cut_original(msg, folder)
        if original is not None:
            return original
    return message_body(msg)


def _indexed_text(text: str) -> str:
    """``text`` as a row holds it: cut to :data:`INDEXED_BODY_MAX_CHARS`, no NUL."""
    return text[:INDEXED_BODY_MAX_CHARS].replace("\0", " ")


def _copies_original(msg: BaseMessage) -> bool:
    """Whether ``msg`` is a copy a compaction keeps in view of a message before its
    boundary (masked, or one its summarizer had): indexed as the copy's own text, so a
    search finds what a cut took once, at the original."""
    return bool(
        msg.additional_kwargs.get(MASKED_KEY) or msg.additional_kwargs.get(SUMMARIZED_COPY_KEY)
    )


def _changed_note(msg: BaseMessage) -> str:
    """``msg``'s scan record as indexed text (see :func:`history_docs`), or ""."""
    scanned = scanned_changes(msg) if isinstance(msg, ToolMessage) else None
    if scanned is None or scanned.empty:
        return ""
    parts = [
        f"{kind} {' '.join(paths)}"
        for kind, paths in (
            ("created", scanned.created),
            ("modified", scanned.modified),
            ("deleted", scanned.deleted),
        )
        if paths
    ]
    return "\n[files changed by this step: " + "; ".join(parts) + "]"


def _with_note(read: Callable[[], str | None], note: str) -> str | None:
    """What ``read`` returns, with ``note`` after it (None stays None)."""
    text = read()
    return None if text is None else text + note


def history_docs(
    messages: Sequence[BaseMessage], start: int = 0, folder: str | None = None
) -> list[HistoryDoc]:
    """The searchable documents of a transcript, with their positions in it.

    Args:
        messages: The transcript, or its part from position ``start`` on.
        start: Position of ``messages[0]`` in the whole transcript.
        folder: The session's artifacts folder: a cut output is its saved whole copy
            (:func:`whole_body`; not a compaction's copy of it, see
            :func:`_copies_original`).
    """
    docs: list[HistoryDoc] = []
    for position, msg in enumerate(messages, start):
        if not searchable(msg):
            continue
        body = message_body(msg)
        if not body.strip():
            continue
        # The files a step's commands changed, as the workspace scan recorded them: the
        # ledger counts a build's outputs by folder and says a search finds them.
        changed = _changed_note(msg)
        whole = None
        if folder and isinstance(msg, ToolMessage) and not _copies_original(msg):
            whole = partial(_with_note, partial(cut_original, msg, folder), changed)
        docs.append(
            HistoryDoc(
                msg_id=msg.id or f"pos-{position}",
                position=position,
                role=message_role(msg),
                text=_indexed_text(body[: max(0, INDEXED_BODY_MAX_CHARS - len(changed))] + changed),
                whole=whole,
            )
        )
    return docs


def docs_reading(
    folder: str | None,
) -> Callable[[Sequence[BaseMessage], int], list[HistoryDoc]] | None:
    """:func:`history_docs` reading cut outputs' copies from ``folder``; None without one
    (an index's mirror then uses its own, which reads none)."""
    return None if folder is None else partial(history_docs, folder=folder)


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


def fold(text: str) -> str:
    """``text`` case-folded and without diacritics, as the word index compares words."""
    if text.isascii():
        return text.casefold()
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def _find(body: str, term: str) -> int:
    """Where ``term`` is in ``body`` (case-insensitive, then also ignoring diacritics)."""
    at = body.casefold().find(term.casefold())
    if at < 0:
        at = fold(body).find(fold(term))  # the position is approximate when folding shifts
    return min(at, len(body) - 1) if at >= 0 else -1


def contains(body: str, term: str) -> bool:
    """Whether ``term`` is literally in ``body`` (case and diacritics ignored)."""
    return term.casefold() in body.casefold() or fold(term) in fold(body)


def snippet(body: str, terms: Sequence[str], max_chars: int = SNIPPET_MAX_CHARS) -> str:
    """A one-line excerpt of ``body`` around the first matched term."""
    hits = [i for i in (_find(body, t) for t in terms) if i >= 0]
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
    scored: list[tuple[int, float, int, str, str]] = []
    for position, role, body, score in rows:
        matched = sum(1 for t in terms if contains(body, t))
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


# Scripts written without spaces between words: each character is made a word of its
# own (Han, Hiragana, Katakana, Bopomofo, Hangul, their compatibility and extension
# blocks), so any run of characters is found as a phrase of single characters.
# Compiled at first use: its large character class takes ~2 ms to compile.
_CJK_RE = LazyPattern(
    "([\u2e80-\u2fdf\u3005-\u3007\u3021-\u3029\u3040-\u30ff\u3100-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff"
    "\uff66-\uff9f\U00020000-\U0003134f])"
)
# camelCase and HTTPServer word boundaries: ``parseConfig`` is found by ``config``.
# An upper-case letter after a lower-case one or a digit (parseConfig), or ending a run
# of capitals before a lower-case one (HTTPServer); the space goes before it. Matching
# the letter first, the lookbehinds only where one is, is 5x faster on code than
# trying zero-width lookarounds at every position.
_CAMEL_RE = re.compile(r"[A-Z](?:(?<=[a-z0-9][A-Z])|(?<=[A-Z][A-Z])(?=[a-z]))")


def index_text(text: str) -> str:
    """The text the word index tokenizes for ``text`` (queries are transformed alike).

    ``unicode61`` splits on spaces and punctuation (``parse_config`` → ``parse``,
    ``config``); this adds a split at camelCase boundaries and around every CJK
    character. The result is only ever tokenized, never shown.
    """
    if not text.isascii():
        text = _CJK_RE.sub(r" \1 ", text)
    return _CAMEL_RE.sub(r" \g<0>", text)


def _has_words(term: str) -> bool:
    """Whether the word index holds anything of ``term`` (else it is scanned for)."""
    return any(c.isalnum() for c in term)


def fts5_term(term: str) -> str:
    """``term`` as an FTS5 phrase of its words; the last one a prefix if ``term`` ends
    inside a word (``Kerne`` finds ``Kernel``)."""
    phrase = fts5_phrase(index_text(term))
    last = term[-1]
    if last.isalnum() and not _CJK_RE.match(last):
        return phrase + " *"
    return phrase


def encode_body(body: str) -> str | bytes:
    """A message's text as stored: zlib-compressed when that is worth it."""
    raw = body.encode("utf-8")
    if len(raw) < BODY_COMPRESS_MIN_BYTES:
        return body
    packed = zlib.compress(raw, BODY_COMPRESS_LEVEL)
    return packed if len(packed) < len(raw) else body


def decode_body(value: str | bytes) -> str:
    """A stored text (see :func:`encode_body`) as text again.

    Raises:
        sqlite3.DatabaseError: the stored bytes are damaged (the index is rebuilt).
    """
    if isinstance(value, str):
        return value
    try:
        return zlib.decompress(value).decode("utf-8")
    except (zlib.error, UnicodeDecodeError) as exc:
        raise sqlite3.DatabaseError(f"damaged search text: {exc}") from exc


def text_digest(body: str) -> bytes:
    """The key under which a text is stored once however many messages hold it."""
    return hashlib.blake2b(body.encode("utf-8"), digest_size=TEXT_DIGEST_BYTES).digest()


TEXT_DIGEST_BYTES = 16
TEXTS_TABLE = "agentgraph_search_texts"
DOCS_TABLE = "agentgraph_search_docs"
FTS_TABLE = "agentgraph_search_fts"
# The word index's tokenizer, as the search migration (persistence/migrations.py) names it.
FTS_TOKENIZER = "unicode61 remove_diacritics 2"
# The first index (an FTS5 trigram index over the plain text, 4× the transcript's size):
# dropped when a database that has it is opened; sessions re-index on their next sync.
LEGACY_FTS_TABLE = "agentgraph_history_fts"
LEGACY_DOCS_TABLE = "agentgraph_history"
_CREATE_LEGACY_FTS = (
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {LEGACY_FTS_TABLE} USING fts5("
    f"body, content='{LEGACY_DOCS_TABLE}', content_rowid='id', tokenize='trigram')"
)
_FTS_SHADOW_TABLES = ("data", "idx", "docsize", "config")


class SqliteHistoryIndex:
    """The transcript index in the session's SQLite file.

    * ``agentgraph_search_texts``: each distinct message text once (keyed by its
      blake2b digest), zlib-compressed from ``BODY_COMPRESS_MIN_BYTES`` on. A file read
      twice, or the tail a compaction re-adds under new ids, is stored and indexed once.
    * ``agentgraph_search_docs``: one row per message (thread, id, position, role, text).
    * ``agentgraph_search_fts``: a contentless FTS5 index (``unicode61``, diacritics
      removed) of :func:`index_text` of each text, ranked with bm25. Contentless, it
      is told the words to remove when a text goes (:meth:`_drop_orphans`), so
      :func:`index_text` must never change for an existing table.

    A query term is a phrase of its words, the last one a prefix; the candidates'
    texts are read back, a hit is a message that literally contains the term (case
    and diacritics ignored) and its snippet is cut from that text. Terms without a
    letter or digit (``->``, ``%``) are found by scanning the session's texts.

    Why this layout (``bench/bench_storage.py``, 1,000 messages, 1.45 MB of transcript
    text, measured on the same session): the earlier trigram index over a plain-text
    content table took 4.0 + 1.8 MB, so the session file was 4-5× the transcript. The
    word index takes 0.55 MB (``detail=column`` 0.37 MB, but it cannot match phrases,
    which CJK runs and identifiers need; ``detail=none`` cannot either) and the
    compressed texts 0.65 MB (zlib level 9 and zstd gain under 1%). What the trigram
    index found and this one does not: a piece from inside a word (``onfig``); whole
    words, word beginnings, identifiers (``parse_config``, ``parseConfig``, their
    parts) and any run of CJK characters are found.

    Without FTS5 (an SQLite built without it) every search scans the session's texts.

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
            migrate_sqlite(self._conn)
            self._drop_legacy()
            self.fts = self._has_fts()

    def _has_fts(self) -> bool:
        """Whether the word index exists (the migration skips it without FTS5)."""
        row = self._conn.execute(
            "SELECT 1 FROM sqlite_master WHERE name = ?", (FTS_TABLE,)
        ).fetchone()
        return row is not None

    def _recreate(self) -> None:
        """The tables of the search migration again, empty (after :meth:`_rebuild`)."""
        with self._conn:
            for statement in SQLITE_SEARCH_TABLES:
                self._conn.execute(statement)
            self.fts = create_search_fts(self._conn)

    def _drop_legacy(self) -> None:
        """Drop the trigram index of a database written before this layout."""
        present = {
            name
            for (name,) in self._conn.execute(
                "SELECT name FROM sqlite_master WHERE name IN (?, ?)",
                (LEGACY_FTS_TABLE, LEGACY_DOCS_TABLE),
            )
        }
        if not present:
            return
        if LEGACY_FTS_TABLE in present:
            self._drop_fts(LEGACY_FTS_TABLE, _CREATE_LEGACY_FTS)
        with self._conn:
            self._conn.execute(f"DROP TABLE IF EXISTS {LEGACY_DOCS_TABLE}")
        # The freed pages go back to the file system (auto_vacuum is incremental on
        # files connect_sqlite creates; elsewhere this does nothing).
        self._conn.executescript("PRAGMA incremental_vacuum;")

    def _drop_fts(self, table: str, create: str) -> None:
        try:
            with self._conn:
                self._conn.execute(f"DROP TABLE IF EXISTS {table}")
        except sqlite3.DatabaseError:
            # SQLite cannot even drop an FTS5 table whose structure record is damaged:
            # put back the shadow rows of an empty index first.
            self._reset_fts_shadow_tables(table, create)
            with self._conn:
                self._conn.execute(f"DROP TABLE IF EXISTS {table}")

    def _rebuild(self) -> None:
        """Drop the tables and create them empty; sessions re-index on their next sync."""
        self._drop_fts(FTS_TABLE, SQLITE_SEARCH_FTS)
        with self._conn:
            self._conn.execute(f"DROP TABLE IF EXISTS {DOCS_TABLE}")
            self._conn.execute(f"DROP TABLE IF EXISTS {TEXTS_TABLE}")
        self._mirror.forget()
        self._recreate()
        self.rebuilt += 1

    def _reset_fts_shadow_tables(self, table: str, create: str) -> None:
        """Overwrite an FTS5 table's shadow tables (plain tables) with an empty index's."""
        scratch = sqlite3.connect(":memory:")
        try:
            with scratch:
                scratch.execute(create)
            fresh = {
                shadow: scratch.execute(f"SELECT * FROM {table}_{shadow}").fetchall()
                for shadow in _FTS_SHADOW_TABLES
            }
        finally:
            scratch.close()
        with self._conn:
            for shadow, rows in fresh.items():
                self._conn.execute(f"DELETE FROM {table}_{shadow}")
                if rows:
                    marks = ",".join("?" for _ in rows[0])
                    self._conn.executemany(f"INSERT INTO {table}_{shadow} VALUES ({marks})", rows)

    def _stored(self, thread_id: str) -> dict[str, int]:
        """The thread's rows: ``msg_id`` → position."""
        return {
            msg_id: position
            for msg_id, position in self._conn.execute(
                f"SELECT msg_id, position FROM {DOCS_TABLE} WHERE thread_id = ?",
                (thread_id,),
            )
        }

    def _sync(self, thread_id: str, messages: Sequence[BaseMessage], folder: str | None) -> None:
        # Only what changed since this process last synced the thread is looked at.
        self._mirror.sync(
            thread_id,
            messages,
            lambda: self._stored(thread_id),
            lambda plan: self._write(thread_id, plan),
            docs_reading(folder),
        )

    def _text_id(self, body: str) -> int:
        """The stored text ``body`` (added and indexed if no message held it yet)."""
        digest = text_digest(body)
        row = self._conn.execute(
            f"SELECT id FROM {TEXTS_TABLE} WHERE digest = ?", (digest,)
        ).fetchone()
        if row is not None:
            return int(row[0])
        cur = self._conn.execute(
            f"INSERT INTO {TEXTS_TABLE} (digest, body) VALUES (?, ?)",
            (digest, encode_body(body)),
        )
        text_id = int(cur.lastrowid or 0)
        if self.fts:
            self._conn.execute(
                f"INSERT INTO {FTS_TABLE}(rowid, words) VALUES (?, ?)",
                (text_id, index_text(body)),
            )
        return text_id

    def _drop_orphans(self, text_ids: set[int]) -> None:
        """Remove the texts no message holds any more, from the word index too.

        A contentless index is told exactly the text a row was indexed with.
        """
        for text_id in sorted(text_ids):
            row = self._conn.execute(
                f"SELECT body FROM {TEXTS_TABLE} t WHERE id = ? AND NOT EXISTS "
                f"(SELECT 1 FROM {DOCS_TABLE} WHERE text_id = t.id)",
                (text_id,),
            ).fetchone()
            if row is None:
                continue
            if self.fts:
                self._conn.execute(
                    f"INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, words) VALUES ('delete', ?, ?)",
                    (text_id, index_text(decode_body(row[0]))),
                )
            self._conn.execute(f"DELETE FROM {TEXTS_TABLE} WHERE id = ?", (text_id,))

    def _delete_docs(self, where: str, args: tuple[str, ...]) -> set[int]:
        """Delete message rows; the ids of the texts they held."""
        text_ids = {
            int(text_id)
            for (text_id,) in self._conn.execute(
                f"SELECT text_id FROM {DOCS_TABLE} WHERE {where}", args
            ).fetchall()
        }
        self._conn.execute(f"DELETE FROM {DOCS_TABLE} WHERE {where}", args)
        return text_ids

    def _begin_write(self) -> None:
        """Take the write lock before the first read: texts are shared between threads,
        and another process must not drop a text this write has just found."""
        if not self._conn.in_transaction:
            self._conn.execute("BEGIN IMMEDIATE")

    def _write(self, thread_id: str, plan: SyncPlan[HistoryDoc]) -> None:
        with self._conn:
            self._begin_write()
            released: set[int] = set()
            for msg_id in plan.gone:
                released.update(
                    self._delete_docs("thread_id = ? AND msg_id = ?", (thread_id, msg_id))
                )
            self._conn.executemany(
                f"UPDATE {DOCS_TABLE} SET position = ? WHERE thread_id = ? AND msg_id = ?",
                [(position, thread_id, msg_id) for msg_id, position in plan.moved],
            )
            # New rows first: a compaction re-adds the tail it removed, same texts.
            for doc in plan.new:
                self._conn.execute(
                    f"INSERT INTO {DOCS_TABLE} (thread_id, msg_id, position, role, text_id) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (thread_id, doc.msg_id, doc.position, doc.role, self._text_id(doc.body)),
                )
            self._drop_orphans(released)

    def _query(self, thread_id: str, terms: Sequence[str], limit: int) -> list[SearchHit]:
        rows: dict[int, tuple[int, str, str, float]] = {}
        word_terms = [t for t in terms if _has_words(t)] if self.fts else []
        scan_terms = [t for t in terms if t not in word_terms]
        if word_terms:
            expression = " OR ".join(fts5_term(t) for t in word_terms)
            texts: dict[int, str] = {}
            for position, role, text_id, body, score in self._conn.execute(
                f"SELECT h.position, h.role, t.id, t.body, f.score FROM ("
                f"SELECT rowid, bm25({FTS_TABLE}) AS score FROM {FTS_TABLE} "
                f"WHERE {FTS_TABLE} MATCH ?) AS f JOIN {TEXTS_TABLE} t ON t.id = f.rowid "
                f"JOIN {DOCS_TABLE} h ON h.text_id = t.id "
                "WHERE h.thread_id = ? ORDER BY f.score, h.position DESC LIMIT ?",
                (expression, thread_id, SEARCH_CANDIDATES_MAX),
            ):
                if text_id not in texts:
                    texts[text_id] = decode_body(body)
                rows[position] = (position, role, texts[text_id], -float(score))
        if scan_terms:
            # Newest first, stopping at SEARCH_CANDIDATES_MAX matches.
            found = 0
            for position, role, stored in self._conn.execute(
                f"SELECT h.position, h.role, t.body FROM {DOCS_TABLE} h "
                f"JOIN {TEXTS_TABLE} t ON t.id = h.text_id "
                "WHERE h.thread_id = ? ORDER BY h.position DESC",
                (thread_id,),
            ):
                body = decode_body(stored)
                if any(contains(body, t) for t in scan_terms):
                    rows.setdefault(position, (position, role, body, 0.0))
                    found += 1
                    if found >= SEARCH_CANDIDATES_MAX:
                        break
        return rank(list(rows.values()), terms, limit)

    def _guarded(
        self, thread_id: str, messages: Sequence[BaseMessage], work: Any, folder: str | None
    ) -> Any:
        """Sync, then ``work()``; a damaged index is rebuilt once and the work retried."""
        with self._lock:
            for attempt in (1, 2):
                try:
                    self._sync(thread_id, messages, folder)
                    return work()
                except sqlite3.DatabaseError as exc:
                    if attempt == 2 or (isinstance(exc, sqlite3.OperationalError) and _busy(exc)):
                        raise
                    self._rebuild()
        return None  # pragma: no cover - the loop returns or raises

    def sync(
        self, thread_id: str, messages: Sequence[BaseMessage], folder: str | None = None
    ) -> None:
        """Bring the thread's rows in step with ``messages`` (the whole stored transcript;
        ``folder``: the session's artifacts folder, see :func:`history_docs`)."""
        self._guarded(thread_id, messages, lambda: None, folder)

    def search(
        self,
        thread_id: str,
        messages: Sequence[BaseMessage],
        terms: Sequence[str],
        limit: int,
        folder: str | None = None,
    ) -> list[SearchHit]:
        """Sync the thread, then return its best ``limit`` hits for ``terms``."""
        # A search compares with the stored rows in full (the turns' syncs trust what
        # this process wrote): whatever another process did to them is repaired first.
        self._mirror.forget(thread_id)
        result: list[SearchHit] = self._guarded(
            thread_id, messages, lambda: self._query(thread_id, terms, limit), folder
        )
        return result

    def delete_thread(self, thread_id: str) -> None:
        """Remove a thread's rows (its session was deleted)."""
        with self._lock, self._conn:
            self._begin_write()
            released = self._delete_docs("thread_id = ?", (thread_id,))
            self._drop_orphans(released)
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
    folder: str | None = None,
) -> SearchResult:
    """Search a session's whole stored transcript.

    Args:
        index: The store's transcript index, or None to scan ``messages`` in memory.
        thread_id: The session.
        messages: Its whole stored transcript (kept in step with the index first).
        query: The user's or model's words (never parsed as query syntax).
        limit: Most hits to return.
        folder: The session's artifacts folder: a cut output is searched as its saved
            whole copy (:func:`history_docs`).

    Raises:
        SearchError: empty or over-long query, bad limit.
    """
    terms = query_terms(query)
    limit = check_limit(limit)
    if index is None:
        hits = scan(history_docs(messages, folder=folder), terms, limit)
        return SearchResult(query, [_with_results(h, messages) for h in hits])
    before = index.rebuilt
    hits = index.search(thread_id, messages, terms, limit, folder=folder)
    return SearchResult(
        query, [_with_results(h, messages) for h in hits], rebuilt=index.rebuilt != before
    )


def _with_results(hit: SearchHit, messages: Sequence[BaseMessage]) -> SearchHit:
    """``hit`` with the positions of its tool calls' results, when it is a call."""
    msg = messages[hit.position] if 0 <= hit.position < len(messages) else None
    if not isinstance(msg, AIMessage):
        return hit
    ids = {c.get("id") for c in msg.tool_calls if c["name"] not in HISTORY_TOOLS}
    found: list[int] = []
    # The results follow their calls, before the next model reply; the first of each.
    for position in range(hit.position + 1, len(messages)):
        later = messages[position]
        if isinstance(later, AIMessage) or not ids:
            break
        if isinstance(later, ToolMessage) and later.tool_call_id in ids:
            ids.discard(later.tool_call_id)
            found.append(position)
    return dataclasses.replace(hit, results=tuple(found)) if found else hit


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
        *(h.line for h in result.hits),
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


def read_message(messages: Sequence[BaseMessage], ref: str, folder: str | None = None) -> str:
    """The message at reference ``ref`` in full, with its role (bounded).

    ``ref`` is ``msg:N`` (from ``search_history``) or a tool call id (from a masked
    output's placeholder). A tool output the history holds cut is its saved whole copy
    when ``folder`` (the session's artifacts folder) holds it (:func:`whole_body`).

    Raises:
        SearchError: not a reference, or no such message.
    """
    by_id = _position_of_id(messages, ref) if not _REF_RE.match(str(ref or "")) else None
    position = by_id if by_id is not None else parse_ref(ref)
    # A derived message is not searched but is still read: a search made before it
    # left the index may have named it.
    if position >= len(messages) or not _readable(messages[position]):
        raise SearchError(
            f"there is no message {REF_PREFIX}{position} in this session "
            f"({len(messages)} stored messages); use a reference search_history returned"
        )
    msg = messages[position]
    body = whole_body(msg, folder)
    if len(body) > READ_HISTORY_MAX_CHARS:
        body = (
            body[:READ_HISTORY_MAX_CHARS]
            + f"\n… [{len(body) - READ_HISTORY_MAX_CHARS} more characters not shown]"
        )
    return f"{REF_PREFIX}{position} [{message_role(msg)}]\n{body}"
