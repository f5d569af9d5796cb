"""Untrusted provider tool-call ids, through the real graph and the strict server."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from agentgraph.config import Settings
from agentgraph.persistence import open_store
from agentgraph.persistence.index import SessionInfo
from agentgraph.runtime.history import validate_history
from agentgraph.runtime.tool_ids import provider_ids
from agentgraph.session.agent import Agent
from agentgraph.session.lifecycle import import_session
from agentgraph.session.transcript import export_entries, parse_jsonl
from tests.fakes.openai_server import FakeOpenAIServer, IdMode

FILES = 5
# A model that reads the five files: one call per file, then the answer.
EXPECTED_CALLS = FILES + 1
# A model that never sees a result re-reads forever: stop it well before MAX_LOOPS.
LOOP_GUARD_CALLS = 3 * EXPECTED_CALLS


def _server_settings(make_settings: Callable[..., Settings], server: FakeOpenAIServer) -> Settings:
    return make_settings(
        OPENAI_BASE_URL=server.url,
        OPENAI_API_KEY="sk-test",
        AGENTGRAPH_PROVIDER_MAX_RETRIES="0",
        AGENTGRAPH_MAX_LOOPS=str(LOOP_GUARD_CALLS),
    )


def _make_files(workspace: Path) -> list[str]:
    names = []
    for n in range(FILES):
        name = f"f{n}.txt"
        (workspace / name).write_text(f"FACT-{n}\n", encoding="utf-8")
        names.append(name)
    return names


def _tool_texts(request: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content")) for m in request["messages"] if m["role"] == "tool")


class Reader:
    """A model that reads each file it has not seen a result of yet, one per reply.

    Like a real model, it re-reads a file whose result it cannot see: a hidden
    result shows up as extra calls.
    """

    def __init__(self, names: list[str]) -> None:
        self.names = names

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        seen = _tool_texts(request)
        for n, name in enumerate(self.names):
            if f"FACT-{n}" not in seen:
                return {"tool_calls": [{"name": "read_file", "arguments": {"path": name}}]}
        return {"content": "read all: " + " ".join(f"FACT-{n}" for n in range(FILES))}


@pytest.mark.parametrize("mode", ["duplicate", "reused", "empty", "constant"])
def test_bad_ids_in_one_reply_never_break_later_requests(
    make_settings: Callable[..., Settings], workspace: Path, mode: IdMode
) -> None:
    """Two calls in one reply with bad ids: both run, both results sent, later turns work."""
    names = _make_files(workspace)
    two_reads = {
        "tool_calls": [
            {"name": "read_file", "arguments": {"path": names[0]}},
            {"name": "read_file", "arguments": {"path": names[1]}},
        ]
    }
    script = [two_reads, {"content": "both read"}, two_reads, {"content": "again"}]
    with FakeOpenAIServer(script, id_mode=mode, on_exhausted="raise") as server:
        settings = _server_settings(make_settings, server)
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            first = agent.run_turn("dup", "read two files", workspace)
            second = agent.run_turn("dup", "once more", workspace)
            stored = agent.messages("dup")
            info = store.index.get("dup")
    assert server.violations == []
    assert set(server.statuses) == {200}
    assert (first.answer, second.answer) == ("both read", "again")
    # Each call answered with its own file, in the request after the calls.
    for request in (server.requests[1], server.requests[3]):
        assert "FACT-0" in _tool_texts(request) and "FACT-1" in _tool_texts(request)
    assert validate_history(stored) == []
    calls = [m for m in stored if isinstance(m, AIMessage) and m.tool_calls]
    original = {v for m in calls for v in provider_ids(m).values()}
    assert original  # the provider's ids are kept for the record ...
    if mode == "duplicate":
        assert all(v.startswith("call_r") for v in original)
    else:
        assert original <= {"", "call_0", "call_1"}
    assert info is not None
    exported = [e for e in export_entries(stored, info) if e["type"] == "tool_use"]
    assert any("providerId" in e["tool"] for e in exported)  # ... and exported


def test_five_file_read_with_reused_ids_takes_five_calls(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """A local server numbering calls from call_0 in every reply: no result is hidden."""
    names = _make_files(workspace)
    with FakeOpenAIServer([Reader(names)], id_mode="reused") as server:
        settings = _server_settings(make_settings, server)
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            result = agent.run_turn("five", "read the five files", workspace)
    assert server.violations == []
    assert len(server.requests) == EXPECTED_CALLS
    assert result.answer.startswith("read all")


def _write_jsonl(path: Path, workspace: Path) -> None:
    base = {"sessionId": "imp-dup", "cwd": str(workspace), "timestamp": "2026-01-01T00:00:00Z"}
    entries = [
        {"uuid": "u1", "type": "user", "message": {"role": "user", "content": "read both"}},
        {"uuid": "a1", "type": "assistant", "message": {"role": "assistant", "content": ""}},
        {
            "uuid": "a1#tool_use#0",
            "type": "tool_use",
            "tool": {"id": "dup", "name": "read_file", "input": {"path": "f0.txt"}},
        },
        {
            "uuid": "a1#tool_use#1",
            "type": "tool_use",
            "tool": {"id": "dup", "name": "read_file", "input": {"path": "f1.txt"}},
        },
        {"uuid": "r1", "type": "tool_result", "toolResult": {"id": "dup", "output": "FACT-0"}},
        {"uuid": "r2", "type": "tool_result", "toolResult": {"id": "dup", "output": "FACT-1"}},
        {"uuid": "a2", "type": "assistant", "message": {"role": "assistant", "content": "ok"}},
    ]
    path.write_text("".join(json.dumps({**base, **e}) + "\n" for e in entries), encoding="utf-8")


def test_imported_transcript_with_a_duplicated_call_resumes(
    make_settings: Callable[..., Settings], workspace: Path, tmp_path: Path
) -> None:
    source = tmp_path / "session.jsonl"
    _write_jsonl(source, workspace)
    with source.open(encoding="utf-8") as fh:
        imported = parse_jsonl(fh)
    with FakeOpenAIServer([{"content": "resumed"}], on_exhausted="raise") as server:
        settings = _server_settings(make_settings, server)
        with open_store(settings) as store:
            info: SessionInfo = import_session(store, imported)
            agent = Agent(settings, store, sleep=lambda _s: None)
            stored = agent.messages(info.thread_id)
            result = agent.run_turn(info.thread_id, "what did they say?", workspace)
    assert validate_history(stored) == []  # ids unique from the import on
    assert [m.content for m in stored if isinstance(m, ToolMessage)] == ["FACT-0", "FACT-1"]
    assert server.violations == []
    assert result.answer == "resumed"
    assert "FACT-0" in _tool_texts(server.requests[0])
    assert "FACT-1" in _tool_texts(server.requests[0])


def test_session_stored_with_duplicate_ids_resumes_without_a_manual_step(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """A history written before ids were rewritten: the prompt view repairs it."""
    with FakeOpenAIServer([{"content": "fine"}], on_exhausted="raise") as server:
        settings = _server_settings(make_settings, server)
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            from langchain_core.messages import HumanMessage

            calls = [
                {"name": "read_file", "args": {"path": "f0.txt"}, "id": "x", "type": "tool_call"},
                {"name": "read_file", "args": {"path": "f1.txt"}, "id": "x", "type": "tool_call"},
            ]
            agent.graph.update_state(
                agent.config("old"),
                {
                    "messages": [
                        HumanMessage("read both", id="h1"),
                        AIMessage(content="", id="a1", tool_calls=calls),
                        ToolMessage("FACT-0", tool_call_id="x", id="t1"),
                        ToolMessage("FACT-1", tool_call_id="x", id="t2"),
                        AIMessage(content="", id="a2", tool_calls=calls[:1]),
                        ToolMessage("FACT-0 again", tool_call_id="x", id="t3"),
                        AIMessage(content="read", id="a3"),
                    ],
                    "workspace_path": str(workspace),
                },
                as_node="finalize",
            )
            store.index.upsert(SessionInfo(thread_id="old", workspace=str(workspace)))
            result = agent.run_turn("old", "go on", workspace)
    assert server.violations == []
    assert result.answer == "fine"
    tool_texts = _tool_texts(server.requests[0])
    assert all(t in tool_texts for t in ("FACT-0", "FACT-1", "FACT-0 again"))
