"""Sessions through the CLI: undo limits, import, locking, continue, resume, subagent sessions."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from agentgraph.config import Settings
from agentgraph.persistence import open_store
from agentgraph.session.agent import Agent
from agentgraph.session.lifecycle import RESUME_PREAMBLE, import_session, load_messages
from agentgraph.session.transcript import export_entries, parse_jsonl
from agentgraph.session.undo import UndoStore
from tests.cli_helpers import cli_env, run_cli, server_env
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.scripts import ai_text
from tests.lease_helpers import lease_holder

KEY = "sk-test-review-sessions-0123456789"


def _env(home: Path, server: FakeOpenAIServer) -> dict[str, str]:
    return server_env(home, server.url, KEY)


def _offline_env(home: Path) -> dict[str, str]:
    return cli_env(home, OPENAI_BASE_URL="http://127.0.0.1:9/v1")


def _rows(home: Path, workspace: Path, *extra: str) -> list[dict]:
    res = run_cli(["sessions", "list", "--json", *extra], cwd=workspace, env=_offline_env(home))
    assert res.returncode == 0, res.stderr
    return list(json.loads(res.stdout))


# --------------------------------------------------------------------------- undo


def test_undo_never_deletes_a_file_that_was_over_the_size_limit(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "big.log").write_bytes(b"x" * 5_000)
    (ws / "small.txt").write_bytes(b"tiny\r\n\x00")
    undo = UndoStore(tmp_path / "snap", max_file_bytes=4_000)
    before = undo.snapshot(ws)
    (ws / "big.log").write_bytes(b"cut short")  # was too big to snapshot: cannot restore
    (ws / "small.txt").write_bytes(b"y" * 5_000)  # grows past the limit: restorable
    changes, _after = undo.record_turn(ws, before)
    assert changes is not None and set(changes.before) == {"small.txt"}
    result = undo.undo(ws, 1)
    assert result.removed == [] and result.restored == ["small.txt"]
    assert (ws / "big.log").read_bytes() == b"cut short"  # kept, not deleted
    assert (ws / "small.txt").read_bytes() == b"tiny\r\n\x00"


def test_undo_with_a_capped_scan_never_deletes_files_it_did_not_see(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    for name in ("a.txt", "b.txt", "c.txt"):
        (ws / name).write_text(f"{name}\n")
    undo = UndoStore(tmp_path / "snap", max_files=2)
    before = undo.snapshot(ws)
    assert len(before) == 2
    (seen, *_), (unseen,) = sorted(before), {"a.txt", "b.txt", "c.txt"} - set(before)
    (ws / seen).unlink()  # the next scan now reaches the file the first one missed
    changes, _after = undo.record_turn(ws, before)
    assert changes is not None and unseen not in changes.before
    result = undo.undo(ws, 1)
    assert result.removed == [] and result.restored == [seen]
    assert (ws / unseen).read_text() == f"{unseen}\n"
    assert (ws / seen).read_text() == f"{seen}\n"


# --------------------------------------------------------------------------- import


def _entry(uid: str, kind: str, **fields: object) -> str:
    return json.dumps({"uuid": uid, "type": kind, "sessionId": "dup1", **fields})


def test_import_skips_duplicate_lines_and_stores_what_it_counts(settings: Settings) -> None:
    lines = [
        _entry("u1", "user", message={"role": "user", "content": "hi"}),
        _entry("a1", "assistant", message={"role": "assistant", "content": ""}),
        _entry("a1#tool_use-0", "tool_use", tool={"id": "c1", "name": "now", "input": {}}),
        _entry("a1#tool_use-0", "tool_use", tool={"id": "c1", "name": "now", "input": {}}),
        _entry("t1", "tool_result", toolResult={"id": "c1", "output": "noon"}, name="now"),
        _entry("a2", "assistant", message={"role": "assistant", "content": "It is noon."}),
        _entry("u1", "user", message={"role": "user", "content": "hi"}),
    ]
    imported = parse_jsonl(lines)
    assert [p.split(":")[0] for p in imported.problems] == ["line 4", "line 7"]
    assert all("duplicate uuid" in p for p in imported.problems)
    ai = imported.messages[1]
    assert [c["id"] for c in ai.tool_calls] == ["c1"]  # no duplicate tool call id
    with open_store(settings) as store:
        info = import_session(store, imported)
        stored = load_messages(store, info.thread_id)
    assert info.message_count == len(stored) == 4
    assert [m.id for m in stored] == ["u1", "a1", "t1", "a2"]


def test_import_tolerates_odd_field_types(settings: Settings) -> None:
    lines = [
        _entry("u1", "user", message={"role": "user", "content": "hi"}, cwd=5),
        _entry(
            "a1",
            "assistant",
            message={"role": "assistant", "content": "hello", "usage": {"input_tokens": None}},
        ),
        _entry(
            "a2",
            "assistant",
            message={"role": "assistant", "content": "x", "usage": {"output_tokens": "many"}},
        ),
    ]
    imported = parse_jsonl(lines)
    assert imported.problems == [] and imported.workspace == ""
    assert [m.content for m in imported.messages] == ["hi", "hello", "x"]
    assert imported.messages[1].usage_metadata["input_tokens"] == 0  # type: ignore[attr-defined]


def test_cli_import_with_bad_usage_is_not_an_internal_error(
    home: Path, workspace: Path, tmp_path: Path
) -> None:
    file = tmp_path / "odd.jsonl"
    file.write_text(
        "\n".join(
            [
                _entry("u1", "user", message={"role": "user", "content": "hi"}),
                _entry(
                    "a1",
                    "assistant",
                    message={"role": "assistant", "content": "yo", "usage": {"input_tokens": None}},
                ),
            ]
        )
        + "\n"
    )
    res = run_cli(["sessions", "import", str(file)], cwd=workspace, env=_offline_env(home))
    assert res.returncode == 0, res.stderr
    assert "internal error" not in res.stderr and "imported 2 messages" in res.stderr


# --------------------------------------------------------------------------- in use


def test_a_session_held_by_another_process_is_not_taken_over(home: Path, workspace: Path) -> None:
    with FakeOpenAIServer([{"content": "first"}]) as server:
        env = _env(home, server)
        seeded = run_cli(["run", "hello", "--thread", "busy1"], cwd=workspace, env=env)
        assert seeded.returncode == 0, seeded.stderr
        with lease_holder(env, "busy1", workspace) as holder:
            before = _rows(home, workspace)
            for args in (["--resume", "busy"], ["--continue"], ["run", "more", "--thread", "busy"]):
                res = run_cli(args, cwd=workspace, env=env, stdin="go on\n/exit\n")
                assert res.returncode == 1, (args, res.stderr)
                assert f"in use by process {holder.pid} since " in res.stderr, res.stderr
                assert len(res.stderr.strip().splitlines()) == 1, res.stderr
                assert len(server.requests) == 1  # no turn was run
            assert _rows(home, workspace) == before  # the store is untouched
            assert holder.poll() is None  # the lease was not taken over: it still runs


# --------------------------------------------------------------------------- --continue


def test_continue_opens_the_most_recent_session_of_this_workspace(
    home: Path, workspace: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    script = [{"content": f"answer {n}"} for n in range(4)]
    with FakeOpenAIServer(script) as server:
        env = _env(home, server)
        for tid, cwd in (("older1", workspace), ("newer1", workspace), ("elsewhere", other)):
            res = run_cli(["run", f"hi {tid}", "--thread", tid], cwd=cwd, env=env)
            assert res.returncode == 0, res.stderr
        res = run_cli(["--continue"], cwd=workspace, env=env, stdin="/current\nhow now\n/exit\n")
        assert res.returncode == 0, res.stderr
        assert "session newer1 " in res.stderr
        sent = server.requests[-1]["messages"]
        assert "hi newer1" in json.dumps(sent) and "hi elsewhere" not in json.dumps(sent)
    empty = tmp_path / "empty"
    empty.mkdir()
    res = run_cli(["--continue"], cwd=empty, env=_offline_env(home), stdin="/exit\n")
    assert res.returncode == 1 and "no previous session" in res.stderr


# --------------------------------------------------------------------------- resume preamble


def _compacted_session(settings: Settings, workspace: Path, thread_id: str) -> None:
    model = ScriptedChatModel([ai_text("answer " + "z" * 50)] * 6 + [ai_text("the summary")])
    with open_store(settings) as store:
        agent = Agent(settings, store, model=model, sleep=lambda _s: None)
        for i in range(6):
            agent.run_turn(thread_id, f"request {i}", workspace)
        assert agent.compact(thread_id) is not None
    # Closing the store released the lease: the CLI may have the session.


def test_resumed_compacted_session_gets_the_preamble_once_through_the_cli(
    make_settings: Callable[..., Settings], home: Path, workspace: Path
) -> None:
    settings = make_settings(AGENTGRAPH_HOME=str(home / ".agentgraph"))
    _compacted_session(settings, workspace.resolve(), "comp1")
    with FakeOpenAIServer([{"content": "resumed"}, {"content": "again"}]) as server:
        env = _env(home, server)
        res = run_cli(
            ["--resume", "comp1"], cwd=workspace, env=env, stdin="where were we?\ngo on\n/exit\n"
        )
        assert res.returncode == 0, res.stderr
        assert server.violations == []
        first, second = (json.dumps(r["messages"]) for r in server.requests)
    assert first.count(RESUME_PREAMBLE) == 1 and "the summary" in first
    assert first.index(RESUME_PREAMBLE) < first.index("where were we?")
    assert second.count(RESUME_PREAMBLE) == 1  # stored once, not added per turn


def test_resumed_session_without_compaction_gets_no_preamble(
    settings: Settings, workspace: Path
) -> None:
    model = ScriptedChatModel([ai_text("one"), ai_text("two")])
    with open_store(settings) as store:
        agent = Agent(settings, store, model=model, sleep=lambda _s: None)
        agent.run_turn("fresh", "hello", workspace)
        agent.sessions.mark_resumed("fresh")
        agent.run_turn("fresh", "again", workspace)
        assert all(RESUME_PREAMBLE not in str(m.content) for m in model.calls[-1])
        assert all(RESUME_PREAMBLE not in str(m.content) for m in agent.messages("fresh"))


# --------------------------------------------------------------------------- subagent sessions


def test_subagent_sessions_are_listed_under_their_parent_and_shown(
    home: Path, workspace: Path
) -> None:
    (workspace / "a.txt").write_text("hello\n")
    script = [
        {"tool_calls": [{"name": "call_subagent", "arguments": {"task": "read a.txt please"}}]},
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]},
        {"content": "SUB: it says hello"},
        {"content": "Parent: hello."},
    ]
    with FakeOpenAIServer(script, on_exhausted="raise") as server:
        env = _env(home, server)
        res = run_cli(["run", "delegate", "--thread", "par1", "--json"], cwd=workspace, env=env)
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout)["answer"] == "Parent: hello."
        assert server.violations == []
    assert [r["thread_id"] for r in _rows(home, workspace)] == ["par1"]  # not without --all
    rows = _rows(home, workspace, "--all")
    assert len(rows) == 2 and rows[0]["thread_id"] == "par1"
    sub = rows[1]
    assert sub["parent_thread_id"] == "par1" and sub["context_id"].startswith("subagent-")
    env = _offline_env(home)
    table = run_cli(["sessions", "list", "--all"], cwd=workspace, env=env).stdout
    assert f"└ {sub['thread_id'][:12]}" in table
    show = run_cli(["sessions", "show", sub["thread_id"][:10], "--json"], cwd=workspace, env=env)
    assert show.returncode == 0, show.stderr
    payload = json.loads(show.stdout)
    assert payload["transcript"]["tool_calls"] == {"read_file": 1}
    assert payload["transcript"]["last_answer"] == "SUB: it says hello"
    parent = json.loads(
        run_cli(["sessions", "show", "par1", "--json"], cwd=workspace, env=env).stdout
    )
    assert parent["children"] == [sub["thread_id"]]
    assert "read_file" not in parent["transcript"]["tool_calls"]  # isolated from the parent
    exported = run_cli(["sessions", "export", sub["thread_id"][:10]], cwd=workspace, env=env)
    types = [json.loads(line)["type"] for line in exported.stdout.splitlines()]
    assert types == ["summary", "user", "assistant", "tool_use", "tool_result", "assistant"]


def test_export_entries_keep_uuid_order_for_reimport(settings: Settings, workspace: Path) -> None:
    model = ScriptedChatModel([ai_text("one")])
    with open_store(settings) as store:
        agent = Agent(settings, store, model=model, sleep=lambda _s: None)
        agent.run_turn("e1", "hello", workspace)
        info = store.index.get("e1")
        assert info is not None
        entries = export_entries(agent.messages("e1"), info)
    assert entries[0]["type"] == "summary" and entries[0]["summary"] == info.title
    entries = entries[1:]  # the title entry is not a message: no uuid
    uuids = [e["uuid"] for e in entries]
    assert len(set(uuids)) == len(uuids)
    assert [e["parentUuid"] for e in entries] == [None, *uuids[:-1]]
