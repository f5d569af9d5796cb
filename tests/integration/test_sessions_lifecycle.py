"""Session index, titles, resume preamble, cleanup and transcripts through the real agent."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage

from agentgraph.config import Settings
from agentgraph.persistence import open_store
from agentgraph.runtime.history import build_prompt_view, validate_history
from agentgraph.session.agent import Agent
from agentgraph.session.lifecycle import (
    RESUME_PREAMBLE,
    SECONDS_PER_DAY,
    SessionInUse,
    clean_sessions,
    ensure_not_in_use,
    import_session,
    load_messages,
)
from agentgraph.session.titles import SOURCE_MODEL, SOURCE_USER, clean_title
from agentgraph.session.transcript import TranscriptError, export_entries, export_jsonl, parse_jsonl
from tests.cli_helpers import cli_env
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.scripts import ai_text, ai_tools
from tests.lease_helpers import lease_holder

KEY = "sk-test-super-secret-key-123456"


def _agent(store, replies, **kw) -> Agent:  # type: ignore[no-untyped-def]
    return Agent(store=store, model=ScriptedChatModel(replies), sleep=lambda _s: None, **kw)


def test_index_contents_after_runs(settings: Settings, workspace: Path) -> None:
    (workspace / ".git").mkdir()
    (workspace / ".git" / "HEAD").write_text("ref: refs/heads/feature/x\n")
    (workspace / "a.txt").write_text("alpha\n")
    with open_store(settings) as store:
        agent = Agent(
            settings,
            store,
            model=ScriptedChatModel(
                [ai_tools(("read_file", {"path": "a.txt"})), ai_text("alpha"), ai_text("bye")]
            ),
            sleep=lambda _s: None,
        )
        agent.run_turn("idx1", "What is in a.txt? Please read it carefully and tell me", workspace)
        first = store.index.get("idx1")
        assert first is not None
        agent.run_turn("idx1", "thanks", workspace)
        info = store.index.get("idx1")
        assert info is not None
        assert info.title == "What is in a.txt? Please read it carefully and tell me"
        assert info.title_source == "first_message"
        assert info.workspace == str(workspace.resolve())
        assert info.git_branch == "feature/x"
        assert info.message_count == len(agent.messages("idx1")) == 6
        assert info.input_tokens > 0 and info.output_tokens > 0
        assert info.created_at == first.created_at <= info.updated_at
        assert info.parent_thread_id is None and info.compactions == 0


def test_model_title_after_first_exchange_and_user_title_wins(
    settings: Settings, workspace: Path
) -> None:
    titler = ScriptedChatModel([ai_text('"Fix the flaky login test in CI"')])
    with open_store(settings) as store:
        agent = Agent(
            settings,
            store,
            model=ScriptedChatModel([ai_text("done"), ai_text("ok")]),
            sleep=lambda _s: None,
            titler=titler,
        )
        agent.run_turn("t1", "the login test fails sometimes on CI, fix it", workspace)
        assert agent.sessions.titles is not None
        agent.sessions.titles.wait()
        info = store.index.get("t1")
        assert info is not None
        assert (info.title, info.title_source) == ("Fix the flaky login test in CI", SOURCE_MODEL)
        # The title request is tagged so it never streams into the REPL.
        assert "the login test fails" in str(titler.calls[0][-1].content)
        # A later turn keeps it (and asks no second title).
        agent.run_turn("t1", "thanks", workspace)
        info = store.index.get("t1")
        assert info is not None and info.title_source == SOURCE_MODEL
        assert len(titler.calls) == 1


def test_title_fallback_when_model_fails(settings: Settings, workspace: Path) -> None:
    titler = ScriptedChatModel([ai_text("")])  # unusable answer
    with open_store(settings) as store:
        agent = Agent(
            settings,
            store,
            model=ScriptedChatModel([ai_text("done")]),
            sleep=lambda _s: None,
            titler=titler,
        )
        agent.run_turn("t2", "   refactor\n the   parser module  ", workspace)
        assert agent.sessions.titles is not None
        agent.sessions.titles.wait()
        info = store.index.get("t2")
        assert info is not None
        assert (info.title, info.title_source) == ("refactor the parser module", "first_message")
    assert clean_title("Title: Add retry logic to uploads.") == "Add retry logic to uploads"
    assert clean_title("word") is None and clean_title(" ".join(["w"] * 20)) is None
    assert SOURCE_USER == "user"


def test_resume_preamble_sent_once_after_compaction(settings: Settings, workspace: Path) -> None:
    model = ScriptedChatModel(
        [ai_text("first answer " + "z" * 50)] * 6
        + [ai_text("summary of it all")]
        + [ai_text("resumed answer"), ai_text("next answer")]
    )
    with open_store(settings) as store:
        agent = Agent(settings, store, model=model, sleep=lambda _s: None)
        for i in range(6):
            agent.run_turn("r1", f"request {i}", workspace)
        assert agent.compact("r1") is not None
        agent.sessions.mark_resumed("r1")
        agent.run_turn("r1", "where were we?", workspace)
        prompt = model.calls[-1]
        texts = [str(m.content) for m in prompt]
        assert sum(RESUME_PREAMBLE in t for t in texts) == 1
        assert texts.index(next(t for t in texts if RESUME_PREAMBLE in t)) < texts.index(
            "where were we?"
        )
        assert validate_history(prompt) == []
        agent.run_turn("r1", "go on", workspace)
        assert sum(RESUME_PREAMBLE in str(m.content) for m in model.calls[-1]) == 1  # stored once
        # A session without compaction gets no preamble.
        agent.sessions.mark_resumed("fresh")
        model.calls.clear()


def test_cleanup_by_age_with_fake_clock(settings: Settings, workspace: Path) -> None:
    home = settings.home
    with open_store(settings) as store:
        agent = _agent(store, [ai_text("a"), ai_text("b"), ai_text("c")], settings=settings)
        for tid in ("old1", "old2", "new1"):
            agent.run_turn(tid, f"hello {tid}", workspace)
        for tid in ("old1", "old2"):
            (home / "artifacts" / tid).mkdir(parents=True, exist_ok=True)
            (home / "workspaces" / tid).mkdir(parents=True, exist_ok=True)
        now = time.time() + 31 * SECONDS_PER_DAY
        new = store.index.get("new1")
        assert new is not None
        new.updated_at = now - 5 * SECONDS_PER_DAY
        store.index.upsert(new)
        dry = clean_sessions(store, home, 30, dry_run=True, now=now)
        assert sorted(s.thread_id for s in dry.sessions) == ["old1", "old2"]
        assert store.index.get("old1") is not None  # dry run deletes nothing
        done = clean_sessions(store, home, 30, now=now, keep={"old2"})
        assert [s.thread_id for s in done.sessions] == ["old1"]
        assert store.index.get("old1") is None and agent.messages("old1") == []
        assert not (home / "artifacts" / "old1").exists()
        assert not (home / "workspaces" / "old1").exists()
        assert (home / "workspaces" / "old2").exists()  # the session in use is kept
        assert agent.messages("new1") != []


def test_export_import_round_trip_keeps_whole_transcript(make_settings, workspace: Path) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings(OPENAI_API_KEY=KEY)
    (workspace / "a.txt").write_text("alpha\n")
    replies = [ai_tools(("read_file", {"path": "a.txt"})), ai_text("alpha")]
    # Long enough answers that a summary makes the prompt smaller (else compact skips it).
    detail = " ".join(f"detail {n} of the answer." for n in range(60))
    replies += [ai_text(f"answer {i}: {detail}") for i in range(4)] + [ai_text("the summary")]
    with open_store(settings) as store:
        agent = Agent(settings, store, model=ScriptedChatModel(replies), sleep=lambda _s: None)
        agent.run_turn("x1", "read a.txt", workspace)
        for i in range(4):
            agent.run_turn("x1", f"more {i}", workspace)
        assert agent.compact("x1") is not None
        messages = agent.messages("x1")
        info = store.index.get("x1")
        assert info is not None
        text = export_jsonl(messages, info)
        assert KEY not in text
        entries = [json.loads(line) for line in text.splitlines()]
        types = {e["type"] for e in entries}
        assert {"user", "assistant", "tool_use", "tool_result", "system"} <= types
        boundary = next(e for e in entries if e.get("subtype") == "compact_boundary")
        assert boundary["compactMetadata"]["trigger"] == "manual"
        assert any(e.get("isCompactSummary") for e in entries)
        # The whole transcript is there: every request and the tool output.
        contents = json.dumps(entries)
        assert all(f"more {i}" in contents for i in range(4)) and "read a.txt" in contents
        assert "alpha" in contents

        imported = import_session(store, parse_jsonl(text.splitlines()))
        assert imported.thread_id != "x1" and imported.message_count == len(messages)
        again = load_messages(store, imported.thread_id)
        info2 = store.index.get(imported.thread_id)
        assert info2 is not None and info2.compactions == 1
        strip = lambda es: [{k: v for k, v in e.items() if k != "sessionId"} for e in es]  # noqa: E731
        assert strip(export_entries(again, info2)) == strip(export_entries(messages, info))
        view = build_prompt_view(again, counter=lambda ms: 10 * len(ms))
        assert validate_history(view.messages) == []
        # It resumes: the next turn runs on the imported history.
        agent2 = Agent(
            settings, store, model=ScriptedChatModel([ai_text("resumed")]), sleep=lambda _s: None
        )
        assert agent2.run_turn(imported.thread_id, "continue", workspace).answer == "resumed"


def test_import_reports_corrupt_lines_and_refuses_bad_files(settings: Settings) -> None:
    good = [
        {
            "uuid": "u1",
            "parentUuid": None,
            "sessionId": "s",
            "type": "user",
            "timestamp": "2024-01-15T10:00:00Z",
            "cwd": "/p",
            "message": {"role": "user", "content": "hi"},
        },
        {"uuid": "a1", "type": "assistant", "message": {"role": "assistant", "content": ""}},
        {
            "uuid": "t1",
            "type": "tool_use",
            "tool": {"id": "call_1", "name": "read_file", "input": {}},
        },
        {"uuid": "r1", "type": "tool_result", "toolResult": {"id": "call_1", "output": "x"}},
    ]
    lines = [json.dumps(e) for e in good]
    lines.insert(2, "{not json")
    parsed = parse_jsonl(lines)
    assert parsed.problems == ["line 3: not valid JSON (skipped)"]
    assert [m.type for m in parsed.messages] == ["human", "ai", "tool"]
    assert parsed.messages[1].tool_calls[0]["id"] == "call_1"  # type: ignore[attr-defined]
    with pytest.raises(TranscriptError, match="line 2: tool result for unknown tool call id"):
        parse_jsonl([lines[0], json.dumps({**good[3], "toolResult": {"id": "nope", "output": ""}})])
    with pytest.raises(TranscriptError, match="not a JSONL"):
        parse_jsonl(["hello world", "# markdown"])
    with open_store(settings) as store:
        info = import_session(store, parsed)
        assert info.thread_id == "s" and info.workspace == "/p"  # id was free
        assert isinstance(load_messages(store, "s")[0], HumanMessage)


def test_a_lease_held_elsewhere_blocks_export(settings: Settings, workspace: Path) -> None:
    env = cli_env(workspace, AGENTGRAPH_HOME=str(settings.home))
    with open_store(settings) as store:
        with (
            lease_holder(env, "busy", workspace) as holder,
            pytest.raises(SessionInUse, match=f"in use by process {holder.pid} since"),
        ):
            ensure_not_in_use(store, "busy", "export")
        ensure_not_in_use(store, "busy", "export")  # the holder is gone: free
