"""The session catalog every front end shares, on real SQLite stores (and a real second
process holding a lease)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from agentgraph.config import Settings
from agentgraph.errors import AmbiguousSession, SessionNotFound
from agentgraph.persistence import open_store
from agentgraph.persistence.leases import SessionInUse
from agentgraph.persistence.thread_ids import InvalidThreadId, session_path
from agentgraph.session.catalog import SessionCatalog, SessionInfo, list_sessions
from agentgraph.session.titles import SOURCE_USER

ROOT = Path(__file__).resolve().parents[2]
# How long the holder process may take to end once told to.
HOLDER_EXIT_TIMEOUT_S = 60
# The holder: opens the same store, takes the lease, keeps it until its stdin closes.
HOLDER_CODE = """
import sys
from agentgraph.config import Settings
from agentgraph.persistence import open_store

settings = Settings(
    _env_file=None,
    AGENTGRAPH_HOME=sys.argv[1],
    OPENAI_BASE_URL="http://127.0.0.1:9/v1",
    AGENTGRAPH_MODEL="gpt-4o-mini",
)
with open_store(settings) as store:
    store.leases.acquire(sys.argv[2], "hold")
    print("held", flush=True)
    sys.stdin.read()
"""


@contextmanager
def held_by_another_process(settings: Settings, thread_id: str) -> Iterator[int]:
    """Another live process holds ``thread_id``'s lease while the block runs; its pid."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER_CODE, str(settings.home), thread_id],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # "" if it failed before taking the lease
        assert line.strip() == "held", line
        yield proc.pid
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=HOLDER_EXIT_TIMEOUT_S)


def _row(thread_id: str, workspace: Path, *, age_s: float = 0.0, **fields: object) -> SessionInfo:
    now = time.time()
    info = SessionInfo(
        thread_id, workspace=str(workspace), created_at=now - age_s, updated_at=now - age_s
    )
    for name, value in fields.items():
        setattr(info, name, value)
    return info


def test_resolve_finds_an_id_by_a_unique_prefix_and_refuses_an_ambiguous_one(
    settings: Settings, workspace: Path
) -> None:
    with SessionCatalog.open(settings) as catalog:
        for tid, title in (("abc111", "first"), ("abc222", "second"), ("xyz999", "third")):
            catalog.store.index.upsert(_row(tid, workspace, title=title))
        assert catalog.resolve("xyz999").title == "third"
        assert catalog.resolve("abc1").thread_id == "abc111"
        with pytest.raises(AmbiguousSession) as ambiguous:
            catalog.resolve("abc")
        # The candidates are named, so the user can pick a longer prefix.
        assert "abc111 (first)" in str(ambiguous.value)
        assert "abc222 (second)" in str(ambiguous.value)
        with pytest.raises(SessionNotFound, match="no session matches 'nope'"):
            catalog.resolve("nope")
        with pytest.raises(InvalidThreadId, match="session id"):
            catalog.resolve("../etc")


def test_delete_refuses_a_session_another_process_holds(
    settings: Settings, workspace: Path
) -> None:
    with SessionCatalog.open(settings) as catalog:
        catalog.store.index.upsert(_row("main1", workspace, title="kept while held"))
        catalog.store.index.upsert(_row("child1", workspace, parent_thread_id="main1"))
        artifacts = session_path(settings.home, "artifacts", "main1")
        artifacts.mkdir(parents=True)
        (artifacts / "out.txt").write_text("big output", encoding="utf-8")
        with held_by_another_process(settings, "main1") as pid:
            with pytest.raises(SessionInUse, match=f"in use by process {pid}"):
                catalog.ensure_not_in_use("main1", "delete")
            with pytest.raises(SessionInUse, match=f"in use by process {pid}"):
                catalog.delete("main1")
            assert catalog.get("main1") is not None
            assert catalog.get("child1") is not None
            assert artifacts.is_dir()
        # Let go of: deleted with its subagent session and its files.
        assert catalog.delete("main1") == 2
        assert catalog.get("main1") is None and catalog.get("child1") is None
        assert not artifacts.exists()
        assert catalog.store.leases.holder("main1") is None


def test_clean_keeps_a_held_session_and_the_kept_one(settings: Settings, workspace: Path) -> None:
    day = 86_400.0
    with SessionCatalog.open(settings) as catalog:
        for tid in ("old1", "old2", "old3"):
            catalog.store.index.upsert(_row(tid, workspace, age_s=40 * day))
        catalog.store.index.upsert(_row("new1", workspace, age_s=day))
        with held_by_another_process(settings, "old2"):
            preview = catalog.clean(30, dry_run=True, keep={"old3"})
            assert [i.thread_id for i in preview.sessions] == ["old1"]
            assert preview.skipped_in_use == ["old2"]
            assert catalog.get("old1") is not None  # a dry run deletes nothing
            done = catalog.clean(30, keep={"old3"})
        assert [i.thread_id for i in done.sessions] == ["old1"]
        assert {i.thread_id for i in catalog.resumable()} == {"old2", "old3", "new1"}


def test_switch_keeps_the_current_session_when_the_target_is_held(
    settings: Settings, workspace: Path
) -> None:
    with SessionCatalog.open(settings) as catalog:
        assert catalog.take("here1", "start")
        with held_by_another_process(settings, "there1"), pytest.raises(SessionInUse):
            catalog.switch("here1", "there1")
        assert "here1" in catalog.store.leases.held()
        catalog.switch("here1", "there1")
        assert catalog.store.leases.held() == {"there1"}
        # Not stored yet: nothing to resume.
        assert catalog.release("there1") is False
        catalog.store.index.upsert(_row("there1", workspace))
        assert catalog.release("there1") is True


def test_rename_indexes_a_new_session_and_reset_keeps_its_title(
    settings: Settings, workspace: Path
) -> None:
    with SessionCatalog.open(settings) as catalog:
        info = catalog.rename("fresh1", workspace, "  Fix   the\nparser  ")
        assert (info.title, info.title_source) == ("Fix the parser", SOURCE_USER)
        stored = catalog.get("fresh1")
        assert stored is not None and stored.workspace == str(workspace)
        stored.message_count, stored.input_tokens, stored.compactions = 12, 3_000, 2
        catalog.store.index.upsert(stored)
        catalog.reset("fresh1")
        after = catalog.get("fresh1")
        assert after is not None
        assert (after.title, after.message_count, after.input_tokens, after.compactions) == (
            "Fix the parser",
            0,
            0,
            0,
        )


def test_search_and_list_order_and_filter(settings: Settings, workspace: Path) -> None:
    other = workspace.parent / "elsewhere"
    with SessionCatalog.open(settings) as catalog:
        catalog.store.index.upsert(_row("top1", workspace, age_s=300, title="Parser work"))
        catalog.store.index.upsert(_row("top2", other, age_s=100, title="Docs"))
        catalog.store.index.upsert(
            _row("sub1", workspace, age_s=10, title="Parser helper", parent_thread_id="top1")
        )
        # Every workspace, newest first, no subagents; the query matches title,
        # workspace or id.
        assert [i.thread_id for i in catalog.search()] == ["top2", "top1"]
        assert [i.thread_id for i in catalog.search("PARSER")] == ["top1"]
        assert [i.thread_id for i in catalog.search("elsewhere")] == ["top2"]
        assert [i.thread_id for i in catalog.search(limit=1)] == ["top2"]
        assert [i.thread_id for i in catalog.resumable(besides="top2")] == ["top1"]
    # The index alone: one workspace, or all with each subagent under its parent.
    mine = list_sessions(settings, workspace=str(workspace), with_subagents=False)
    assert [i.thread_id for i in mine] == ["top1"]
    everything = list_sessions(settings, workspace=None, with_subagents=True)
    assert [i.thread_id for i in everything] == ["top2", "top1", "sub1"]


def test_export_redacts_a_secret_of_the_environment(settings: Settings, workspace: Path) -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    from agentgraph.session.transcript import ImportedSession

    secret = "tok-catalog-export-0123456789abcdef"
    now = time.time()
    imported = ImportedSession(
        session_id=None,
        messages=[
            HumanMessage(content="what is my token?", id="h1"),
            AIMessage(content=f"it is {secret}", id="a1"),
        ],
        workspace=str(workspace),
        git_branch=None,
        created_at=now,
        updated_at=now,
        compactions=0,
    )
    with open_store(settings) as store:
        catalog = SessionCatalog(store, settings)
        info = catalog.import_transcript(imported)
        assert info.title == "what is my token?"
        exported = catalog.export(info, "md", {"MY_SERVICE_TOKEN": secret})
        assert exported.message_count == 2
        assert "what is my token?" in exported.text
        assert secret not in exported.text
        with held_by_another_process(settings, info.thread_id), pytest.raises(SessionInUse):
            catalog.export(info, "jsonl")


def test_take_gives_way_to_a_long_write_of_another_process(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings(AGENTGRAPH_SQLITE_BUSY_TIMEOUT_S="0.2")
    with SessionCatalog.open(settings) as catalog:
        assert catalog.take("warm1", "start")  # the lease table exists from here on
        writer = sqlite3.connect(settings.db_path, isolation_level=None)
        writer.execute("BEGIN EXCLUSIVE")
        try:
            # Not a holder of the session: the caller goes on without the lease.
            assert catalog.take("busy1", "start") is False
            assert "busy1" not in catalog.store.leases.held()
        finally:
            writer.execute("ROLLBACK")
            writer.close()
        assert catalog.take("busy1", "start") is True
