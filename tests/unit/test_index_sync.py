"""The transcript index synced incrementally equals the index synced in full.

Random sessions (appends, compaction-like moves, in-place edits, reloaded copies,
deletions, repeated ids) are synced step by step into a real SQLite FTS5 index; after
every step its rows equal the documents of the whole transcript, the FTS index is
consistent, and the plan the mirror computed from the changed tail equals the plan of
the full comparison against the stored rows.

Profiles: ``HYPOTHESIS_PROFILE=ci`` (many examples, derandomized) or ``dev`` (quick; the
default unless ``CI`` is set).
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from agentgraph.capabilities.recall.index_sync import IndexMirror, full_plan
from agentgraph.capabilities.recall.search import (
    DOCS_TABLE,
    FTS_TABLE,
    FTS_TOKENIZER,
    TEXTS_TABLE,
    HistoryDoc,
    SqliteHistoryIndex,
    decode_body,
    history_docs,
    index_text,
)
from agentgraph.persistence.store import connect_sqlite

CI_EXAMPLES = 1_000
DEV_EXAMPLES = 40
settings.register_profile(
    "index-sync-ci",
    max_examples=CI_EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile(
    "index-sync-dev",
    max_examples=DEV_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
PROFILE_NAME = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
PROFILE = settings.get_profile("index-sync-dev" if PROFILE_NAME == "dev" else "index-sync-ci")

TEXTS = ["", "  ", "pool size is 64", "数据库连接池", "ok", "grep -n TODO src/", "x" * 300]
OPS = ["append", "append", "append", "compact", "edit", "reload", "delete", "repeat_id"]


class Session:
    """A transcript edited the way the graph edits one (new lists, messages as values)."""

    def __init__(self) -> None:
        self.messages: list[BaseMessage] = []
        self.n = 0

    def _id(self) -> str:
        self.n += 1
        return f"m{self.n}"

    def make(self, kind: int, text: str) -> BaseMessage:
        mid = self._id()
        if kind == 0:
            return HumanMessage(text, id=mid)
        if kind == 1:
            call = {"name": "read_file", "args": {"path": text[:20]}, "id": f"c{mid}"}
            return AIMessage(text, tool_calls=[call], id=mid)
        if kind == 2:
            return ToolMessage(text, tool_call_id=f"c{mid}", name="read_file", id=mid)
        if kind == 3:
            return ToolMessage(text, tool_call_id=f"c{mid}", name="search_history", id=mid)
        if kind == 4:
            return SystemMessage(text, id=mid)
        if kind == 5:
            meta = {"agentgraph": {"kind": "compact_boundary"}}
            return HumanMessage(text, id=mid, additional_kwargs=meta)
        if kind == 6:
            return HumanMessage(text, id=mid, additional_kwargs={"agentgraph": {"kind": "summary"}})
        return AIMessage(text, id=mid)

    def apply(self, op: str, data: st.DataObject) -> None:
        msgs = list(self.messages)
        texts = st.sampled_from(TEXTS)
        if op == "append":
            for _ in range(data.draw(st.integers(1, 6))):
                msgs.append(self.make(data.draw(st.integers(0, 7)), data.draw(texts)))
        elif op == "compact" and msgs:
            # The kept tail is removed and re-added after a boundary under new ids.
            keep = data.draw(st.integers(0, min(len(msgs), 5)))
            tail = msgs[len(msgs) - keep :]
            msgs = msgs[: len(msgs) - keep]
            msgs.append(self.make(5, "boundary"))
            msgs.append(self.make(6, data.draw(texts)))
            msgs.extend(m.model_copy(update={"id": self._id()}) for m in tail)
        elif op == "edit" and msgs:
            i = data.draw(st.integers(0, len(msgs) - 1))
            msgs[i] = msgs[i].model_copy(update={"content": data.draw(texts)})
        elif op == "reload":
            msgs = [m.model_copy() for m in msgs]  # equal values, new objects
        elif op == "delete" and msgs:
            del msgs[data.draw(st.integers(0, len(msgs) - 1))]
        elif op == "repeat_id" and msgs:
            old = msgs[data.draw(st.integers(0, len(msgs) - 1))]
            msgs.append(HumanMessage(data.draw(texts), id=old.id))
        self.messages = msgs


def rows(conn: sqlite3.Connection, thread: str) -> set[tuple[str, int, str, str]]:
    return {
        (msg_id, position, role, decode_body(body))
        for msg_id, position, role, body in conn.execute(
            f"SELECT msg_id, position, role, body FROM {DOCS_TABLE} h "
            f"JOIN {TEXTS_TABLE} t ON t.id = h.text_id WHERE thread_id = ?",
            (thread,),
        )
    }


def vocabulary(conn: sqlite3.Connection) -> set[tuple[str, int, int]]:
    """(word, documents, occurrences) of the word index, read from the index itself."""
    conn.execute(
        f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.vocab USING fts5vocab(main, {FTS_TABLE}, row)"
    )
    return set(conn.execute("SELECT term, doc, cnt FROM temp.vocab"))


def fresh_vocabulary(conn: sqlite3.Connection, thread: str) -> set[tuple[str, int, int]]:
    """The vocabulary of a word index built from scratch from the thread's texts."""
    scratch = sqlite3.connect(":memory:")
    try:
        scratch.execute(
            f"CREATE VIRTUAL TABLE {FTS_TABLE} USING fts5(words, tokenize='{FTS_TOKENIZER}')"
        )
        scratch.executemany(
            f"INSERT INTO {FTS_TABLE}(words) VALUES (?)",
            [(index_text(body),) for body in {body for _m, _p, _r, body in rows(conn, thread)}],
        )
        return vocabulary(scratch)
    finally:
        scratch.close()


@PROFILE
@given(data=st.data())
def test_incremental_sync_equals_full_sync(tmp_path: Path, data: st.DataObject) -> None:
    path = tmp_path / f"s{data.draw(st.integers(0, 10**9))}.db"
    conn = connect_sqlite(path)
    index = SqliteHistoryIndex(conn)
    # The reference: a second index that compares with its stored rows on every sync.
    ref_conn = connect_sqlite(path.with_suffix(".ref.db"))
    reference = SqliteHistoryIndex(ref_conn)
    session = Session()
    try:
        for op in data.draw(st.lists(st.sampled_from(OPS), min_size=1, max_size=12)):
            session.apply(op, data)
            index.sync("t", session.messages)
            reference._mirror.forget()
            reference.sync("t", session.messages)
            assert rows(conn, "t") == rows(ref_conn, "t")
            # Raises (SQLITE_CORRUPT_VTAB) when the FTS index is inconsistent in itself.
            conn.execute(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('integrity-check')")
            # A contentless index is told what to delete: every word of a removed row
            # must be gone, every word of a stored row there, counted once.
            assert vocabulary(conn) == fresh_vocabulary(conn, "t")
            # Each text is stored once, and only while a message holds it.
            texts = conn.execute(f"SELECT count(*) FROM {TEXTS_TABLE}").fetchone()[0]
            assert texts == len({body for _m, _p, _r, body in rows(conn, "t")})
    finally:
        conn.close()
        ref_conn.close()


@PROFILE
@given(data=st.data())
def test_mirror_plan_equals_the_full_comparison(data: st.DataObject) -> None:
    mirror: IndexMirror[HistoryDoc] = IndexMirror(history_docs)
    stored: dict[str, int] = {}
    session = Session()
    for op in data.draw(st.lists(st.sampled_from(OPS), min_size=1, max_size=15)):
        session.apply(op, data)
        docs = {d.msg_id: d for d in history_docs(session.messages)}
        want = full_plan(docs, stored)
        got, synced = mirror.plan("t", session.messages, lambda s=stored: dict(s))
        assert sorted(got.gone) == sorted(want.gone)
        assert sorted(got.moved) == sorted(want.moved)
        assert got.new == want.new
        for msg_id in got.gone:
            del stored[msg_id]
        stored.update(dict(got.moved))
        stored.update({d.msg_id: d.position for d in got.new})
        mirror.commit("t", synced)


def test_appending_turns_reads_the_stored_rows_only_once(tmp_path: Path) -> None:
    """After the first sync, a sync looks at the new messages only (no re-read of the rows)."""
    conn = connect_sqlite(tmp_path / "s.db")
    index = SqliteHistoryIndex(conn)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    session = Session()
    try:
        for _turn in range(30):
            session.messages = [
                *session.messages,
                session.make(0, "question"),
                session.make(7, "answer"),
            ]
            index.sync("t", session.messages)
    finally:
        conn.close()
    # The one full read of the thread's rows (a text is looked up by its digest only).
    reads = [
        s
        for s in statements
        if s.lstrip().upper().startswith("SELECT") and f"FROM {DOCS_TABLE}" in s
    ]
    assert len(reads) == 1, reads
    assert index._mirror.full_syncs == 1


# The definition of the split, as zero-width lookarounds tried at every position: rows
# indexed by earlier versions were written with it, so the text must be the same.
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_CJK_CHAR = re.compile(
    "([\u2e80-\u2fdf\u3005-\u3007\u3021-\u3029\u3040-\u30ff\u3100-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff"
    "\uff66-\uff9f\U00020000-\U0003134f])"
)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.sampled_from([*"aAbBzZ09_ .\n", "é", "É", "中", "フ", "설"])))
def test_index_text_splits_as_the_lookaround_definition_does(text: str) -> None:
    assert index_text(text) == _CAMEL_BOUNDARY.sub(" ", _CJK_CHAR.sub(r" \1 ", text))


def test_a_syncs_own_document_reader_serves_the_full_and_the_tail_plan() -> None:
    """A sync given its own reader of documents (a session's cut outputs read from its
    folder) uses it for the first, full comparison and for the tail after it."""
    seen: list[tuple[int, int]] = []

    def reader(messages: Sequence[BaseMessage], start: int) -> list[HistoryDoc]:
        seen.append((start, len(messages)))
        return history_docs(messages, start)

    mirror: IndexMirror[HistoryDoc] = IndexMirror(history_docs)
    first = [HumanMessage("a", id="m0"), AIMessage("b", id="m1")]
    plan, synced = mirror.plan("t", first, dict, reader)
    mirror.commit("t", synced)
    more = [*first, HumanMessage("c", id="m2")]
    tail, _ = mirror.plan("t", more, dict, reader)
    assert seen == [(0, 2), (2, 1)]
    assert [d.msg_id for d in plan.new] == ["m0", "m1"] and [d.msg_id for d in tail.new] == ["m2"]
