"""``agentgraph sessions …`` end to end: the real CLI in a subprocess, a strict fake server."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from tests.cli_helpers import cli_env, run_cli, server_env
from tests.fakes.openai_server import FakeOpenAIServer
from tests.lease_helpers import lease_holder
from tests.pty_helpers import only_session

KEY = "sk-test-secret-sessions-0123456789"


def _env(home: Path, server: FakeOpenAIServer) -> dict[str, str]:
    return server_env(home, server.url, KEY)


def _seed(workspace: Path, env: dict[str, str], *ids: str) -> None:
    for tid in ids:
        result = run_cli(
            ["run", f"read data.txt for {tid}", "--thread", tid], cwd=workspace, env=env
        )
        assert result.returncode == 0, result.stderr


def _script(n: int) -> list[dict]:
    out: list[dict] = []
    for _ in range(n):
        out += [
            {"tool_calls": [{"name": "read_file", "arguments": {"path": "data.txt"}}]},
            {"content": "It says 42."},
        ]
    return out


def test_an_export_dates_each_message_when_it_was_written(home: Path, workspace: Path) -> None:
    """Two turns run minutes (here: a process) apart are exported with their own times,
    not every message with the session's start."""
    (workspace / "data.txt").write_text("the answer is 42\n")
    with FakeOpenAIServer(_script(2)) as server:
        env = _env(home, server)
        _seed(workspace, env, "abc123")
        time.sleep(0.05)
        _seed(workspace, env, "abc123")
        exported = run_cli(["sessions", "export", "abc"], cwd=workspace, env=env)
    assert exported.returncode == 0, exported.stderr
    entries = [json.loads(line) for line in exported.stdout.splitlines()][1:]
    stamps = [e["timestamp"] for e in entries]
    assert stamps == sorted(stamps)
    users = [e["timestamp"] for e in entries if e["type"] == "user"]
    assert len(users) == 2 and users[0] < users[1]
    assert all("agentgraph" not in e for e in entries)  # the time is not also metadata


def test_show_export_import_round_trip(home: Path, workspace: Path, tmp_path: Path) -> None:
    (workspace / "data.txt").write_text("the answer is 42\n")
    with FakeOpenAIServer(_script(1)) as server:
        env = _env(home, server)
        _seed(workspace, env, "abc123")
        show = run_cli(["sessions", "show", "abc", "--json"], cwd=workspace, env=env)
        assert show.returncode == 0, show.stderr
        payload = json.loads(show.stdout)
        assert payload["thread_id"] == "abc123"
        assert payload["transcript"]["tool_calls"] == {"read_file": 1}
        assert payload["transcript"]["last_answer"] == "It says 42."
        human = run_cli(["sessions", "show", "abc"], cwd=workspace, env=env)
        assert human.returncode == 0 and "It says 42." in human.stdout

        exported = run_cli(["sessions", "export", "abc"], cwd=workspace, env=env)
        assert exported.returncode == 0, exported.stderr
        assert KEY not in exported.stdout
        entries = [json.loads(line) for line in exported.stdout.splitlines()]
        assert [e["type"] for e in entries] == [
            "summary",  # the title, as Claude Code's transcripts carry it
            "user",
            "assistant",
            "tool_use",
            "tool_result",
            "assistant",
        ]
        assert all(e["sessionId"] == "abc123" and e["version"] for e in entries)
        assert entries[0]["summary"] == payload["title"]
        assert entries[4]["toolResult"]["id"] == entries[3]["tool"]["id"]

        file = tmp_path / "s.jsonl"
        file.write_text(exported.stdout)
        # The session is still here: importing its file again stores no copy.
        same = run_cli(["sessions", "import", str(file)], cwd=workspace, env=env)
        assert same.returncode == 0, same.stderr
        assert "already imported as session abc123" in same.stderr
        listed = run_cli(["sessions", "list", "--json"], cwd=workspace, env=env)
        assert [row["thread_id"] for row in json.loads(listed.stdout)] == ["abc123"]
        # Into another home: the same id, title and token counts; exported again, the same.
        (tmp_path / "home2").mkdir()
        env2 = _env(tmp_path / "home2", server)
        imported = run_cli(["sessions", "import", str(file)], cwd=workspace, env=env2)
        assert imported.returncode == 0, imported.stderr
        assert imported.stderr.split("as session ")[1].split()[0] == "abc123"
        shown = json.loads(
            run_cli(["sessions", "show", "abc", "--json"], cwd=workspace, env=env2).stdout
        )
        assert shown["title"] == payload["title"]
        assert shown["usage"]["input_tokens"] == payload["usage"]["input_tokens"] > 0
        assert shown["usage"]["output_tokens"] == payload["usage"]["output_tokens"]
        again = run_cli(["sessions", "export", "abc"], cwd=workspace, env=env2)
        assert again.stdout == exported.stdout

        md = tmp_path / "s.md"
        res = run_cli(
            ["sessions", "export", "abc", "--format", "md", "-o", str(md)], cwd=workspace, env=env
        )
        assert res.returncode == 0 and res.stdout == ""
        assert "## User" in md.read_text() and "the answer is 42" in md.read_text()
        assert server.violations == []


def test_import_bad_files(home: Path, workspace: Path, tmp_path: Path) -> None:
    env = cli_env(home, OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    lines = [
        json.dumps(
            {
                "uuid": "u1",
                "sessionId": "imp1",
                "type": "user",
                "cwd": str(workspace),
                "message": {"role": "user", "content": "hello"},
            }
        ),
        "{corrupt",
        json.dumps(
            {"uuid": "a1", "type": "assistant", "message": {"role": "assistant", "content": "hi!"}}
        ),
    ]
    ok = tmp_path / "ok.jsonl"
    ok.write_text("\n".join(lines) + "\n")
    res = run_cli(["sessions", "import", str(ok)], cwd=workspace, env=env)
    assert res.returncode == 0, res.stderr
    assert "warning: line 2: not valid JSON (skipped)" in res.stderr
    assert "imported 2 messages as session imp1" in res.stderr

    for name, text, expected in (
        ("notes.md", "# Title\nsome text\n", "not a JSONL session transcript"),
        (
            "orphan.jsonl",
            lines[0]
            + "\n"
            + json.dumps(
                {"uuid": "r", "type": "tool_result", "toolResult": {"id": "call_x", "output": "?"}}
            )
            + "\n",
            "unknown tool call id 'call_x'",
        ),
        ("bin.jsonl", None, "not UTF-8"),
    ):
        path = tmp_path / name
        if text is None:
            path.write_bytes(b"\xff\xfe\x00garbage")
        else:
            path.write_text(text)
        res = run_cli(["sessions", "import", str(path)], cwd=workspace, env=env)
        assert res.returncode == 1, (name, res.stderr)
        assert expected in res.stderr and "Traceback" not in res.stderr
        assert len(res.stderr.strip().splitlines()) == 1
    listed = run_cli(["sessions", "list", "--all", "--json"], cwd=workspace, env=env)
    assert [r["thread_id"] for r in json.loads(listed.stdout)] == ["imp1"]  # store intact
    missing = run_cli(["sessions", "import", str(tmp_path / "nope.jsonl")], cwd=workspace, env=env)
    assert missing.returncode == 1 and "no such file" in missing.stderr


def test_delete_unknown_ambiguous_and_confirmation(home: Path, workspace: Path) -> None:
    (workspace / "data.txt").write_text("x\n")
    with FakeOpenAIServer(_script(3)) as server:
        env = _env(home, server)
        _seed(workspace, env, "aaa1", "aaa2", "bbb1")
    env = cli_env(home, OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    for args in (["delete", "zzz", "--yes"], ["export", "zzz"], ["show", "zzz"]):
        res = run_cli(["sessions", *args], cwd=workspace, env=env)
        assert res.returncode == 1 and "no session matches 'zzz'" in res.stderr
    amb = run_cli(["sessions", "delete", "aaa", "--yes"], cwd=workspace, env=env)
    assert amb.returncode == 1 and "matches 2 sessions" in amb.stderr
    refused = run_cli(["sessions", "delete", "bbb"], cwd=workspace, env=env, stdin="y\n")
    assert refused.returncode == 2 and "pass --yes" in refused.stderr
    artifacts = home / ".agentgraph" / "artifacts" / "bbb1"
    artifacts.mkdir(parents=True, exist_ok=True)  # tool-call start records may be there
    (artifacts / "tool-full-output.txt").write_text("kept until the session goes\n")
    done = run_cli(["sessions", "delete", "bbb", "--yes"], cwd=workspace, env=env)
    assert done.returncode == 0 and "deleted bbb1" in done.stderr
    assert not artifacts.exists()
    listed = run_cli(["sessions", "list", "--json"], cwd=workspace, env=env)
    assert sorted(r["thread_id"] for r in json.loads(listed.stdout)) == ["aaa1", "aaa2"]


def test_session_in_use_by_another_process(home: Path, workspace: Path) -> None:
    (workspace / "data.txt").write_text("x\n")
    with FakeOpenAIServer(_script(1)) as server:
        env = _env(home, server)
        _seed(workspace, env, "busy1")
    env = cli_env(home, OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    with lease_holder(env, "busy1", workspace) as holder:
        for args in (["export", "busy"], ["delete", "busy", "--yes"], ["compact", "busy"]):
            res = run_cli(["sessions", *args], cwd=workspace, env=env)
            assert res.returncode == 1, res.stderr
            assert f"in use by process {holder.pid}" in res.stderr
        show = run_cli(["sessions", "show", "busy1", "--json"], cwd=workspace, env=env)
        assert json.loads(show.stdout)["in_use_by_pid"] == holder.pid
        clean = run_cli(["sessions", "clean", "--older-than", "0d"], cwd=workspace, env=env)
        assert clean.returncode == 0 and "kept busy1 (in use" in clean.stderr
    assert os.path.exists(home / ".agentgraph" / "sessions.db")
    res = run_cli(["sessions", "show", "busy1", "--json"], cwd=workspace, env=env)
    assert json.loads(res.stdout)["message_count"] == 4


def test_clean_and_prune(home: Path, workspace: Path) -> None:
    (workspace / "data.txt").write_text("x\n")
    with FakeOpenAIServer(_script(2)) as server:
        env = _env(home, server)
        _seed(workspace, env, "c1", "c2")
    env = cli_env(home, OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    bad = run_cli(["sessions", "clean", "--older-than", "soon"], cwd=workspace, env=env)
    assert bad.returncode == 2 and "invalid age 'soon'" in bad.stderr
    keep = run_cli(["sessions", "clean", "--older-than", "30d"], cwd=workspace, env=env)
    assert keep.returncode == 0 and "deleted 0 sessions" in keep.stderr
    dry = run_cli(["sessions", "clean", "--older-than", "0d", "--dry-run"], cwd=workspace, env=env)
    assert dry.returncode == 0 and "would delete 2 sessions" in dry.stderr
    prune = run_cli(["sessions", "prune"], cwd=workspace, env=env)
    assert prune.returncode == 0 and "of 2 sessions" in prune.stderr, prune.stderr
    gone = run_cli(["sessions", "clean", "--older-than", "0d"], cwd=workspace, env=env)
    assert gone.returncode == 0 and "deleted 2 sessions" in gone.stderr
    listed = run_cli(["sessions", "list", "--all", "--json"], cwd=workspace, env=env)
    assert json.loads(listed.stdout) == []


def _age_session(home: Path, thread_id: str, seconds: float) -> None:
    """Make ``thread_id`` look last updated ``seconds`` ago (its row in the real index)."""
    from agentgraph.config import Settings
    from agentgraph.persistence import open_store

    settings = Settings(  # type: ignore[call-arg]
        _env_file=None, AGENTGRAPH_HOME=str(home / ".agentgraph"), AGENTGRAPH_MODEL="gpt-4o-mini"
    )
    with open_store(settings) as store:
        info = store.index.get(thread_id)
        assert info is not None
        info.updated_at = time.time() - seconds
        store.index.upsert(info)


def test_clean_ages_read_m_as_minutes_and_are_said_back_in_words(
    home: Path, workspace: Path
) -> None:
    (workspace / "data.txt").write_text("x\n")
    with FakeOpenAIServer(_script(2)) as server:
        env = _env(home, server)
        _seed(workspace, env, "old1", "new1")
    _age_session(home, "old1", 5 * 60)
    env = cli_env(home, OPENAI_BASE_URL="http://127.0.0.1:9/v1")

    def clean(*args: str) -> str:
        result = run_cli(["sessions", "clean", *args], cwd=workspace, env=env)
        assert result.returncode == 0, result.stderr
        return result.stderr

    assert "would delete 0 sessions not updated for 30 days" in clean("--dry-run")
    assert "would delete 0 sessions not updated for 12 hours" in clean(
        "--older-than", "12h", "--dry-run"
    )
    assert "would delete 0 sessions not updated for 90 minutes" in clean(
        "--older-than", "90m", "--dry-run"
    )
    # m is minutes: the session idle for five minutes goes, the one just used stays.
    done = clean("--older-than", "1m")
    assert "deleted old1" in done and "new1" not in done
    assert "deleted 1 sessions not updated for 1 minute\n" in done, done
    bad = run_cli(["sessions", "clean", "--older-than", "1M"], cwd=workspace, env=env)
    assert bad.returncode == 2
    assert "invalid age '1M': use a number with d (days), h (hours) or m (minutes)" in bad.stderr


def test_repl_undo_title_switch_reset(home: Path, workspace: Path) -> None:
    (workspace / "notes.txt").write_text("original\n")
    script = [
        {
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": "notes.txt", "content": "new\n"}}
            ]
        },
        {"content": "Rewrote it."},
    ]
    with FakeOpenAIServer(script) as server:
        env = _env(home, server)
        stdin = "\n".join(
            [
                "rewrite notes.txt",
                "/undo",
                "/undo",
                "/title  Notes   rewrite  ",
                "/current",
                "/new second one",
                "/switch nope",
                "/reset",
                "/exit",
            ]
        )
        res = run_cli([], cwd=workspace, env=env, stdin=stdin + "\n")
        assert res.returncode == 0, res.stderr
        assert server.violations == []
    assert (workspace / "notes.txt").read_text() == "original\n"
    err = res.stderr
    assert "undid 1 turn(s):" in err and "restored notes.txt" in err
    assert "nothing to undo" in err
    # 4 messages of the turn and the note telling the model about the undo.
    assert "title: “Notes rewrite”" in err and "“Notes rewrite”  messages 5" in err
    assert "no session matches 'nope'" in err and "nothing to clear" in err
    env = cli_env(home, OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    rows = json.loads(run_cli(["sessions", "list", "--json"], cwd=workspace, env=env).stdout)
    assert {(r["title"], r["title_source"]) for r in rows} == {
        ("Notes rewrite", "user"),
        ("second one", "user"),
    }


def test_after_undo_the_model_is_told_which_files_are_back(home: Path, workspace: Path) -> None:
    """The history still says the model wrote the file: the next request says it was
    undone, before the user's message, and the note is not taken for a request."""
    (workspace / "notes.txt").write_text("original\n")
    script = [
        {
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": "notes.txt", "content": "new\n"}},
                {"name": "write_file", "arguments": {"path": "added.txt", "content": "x\n"}},
            ]
        },
        {"content": "Rewrote it."},
        {"content": "It says original."},
    ]
    with FakeOpenAIServer(script) as server:
        env = _env(home, server)
        stdin = "rewrite notes.txt\n/undo\nwhat does notes.txt say?\n/exit\n"
        res = run_cli([], cwd=workspace, env=env, stdin=stdin)
        assert res.returncode == 0, res.stderr
        assert server.violations == []
        sent = server.requests[-1]["messages"]
    users = [str(m["content"]) for m in sent if m["role"] == "user"]
    note, request = users[-2], users[-1]
    assert "undid the file changes of the last 1 turn(s)" in note
    assert "restored: notes.txt" in note and "removed: added.txt" in note
    assert request == "what does notes.txt say?"
    env = cli_env(home, OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    shown = run_cli(["sessions", "show", only_session(home), "--json"], cwd=workspace, env=env)
    transcript = json.loads(shown.stdout)["transcript"]
    assert transcript["last_request"] == "what does notes.txt say?"
    assert transcript["user_requests"] == 2


def test_show_counts_the_context_for_the_model_the_session_ran_with(
    home: Path, workspace: Path
) -> None:
    """Shown later under another configured model, the budget is still the session's."""
    with FakeOpenAIServer([{"content": "hi"}]) as server:
        ran = run_cli(["run", "hello", "--thread", "m1"], cwd=workspace, env=_env(home, server))
        assert ran.returncode == 0, ran.stderr
    env = cli_env(home, OPENAI_BASE_URL="http://127.0.0.1:9/v1", AGENTGRAPH_MODEL="gpt-4")
    shown = run_cli(["sessions", "show", "m1", "--json"], cwd=workspace, env=env)
    assert shown.returncode == 0, shown.stderr
    payload = json.loads(shown.stdout)
    assert payload["model"] == "gpt-4o-mini"
    assert payload["context"]["window"] == 128_000  # gpt-4o-mini's, not gpt-4's 8,192
    text = run_cli(["sessions", "show", "m1"], cwd=workspace, env=env)
    assert "model  gpt-4o-mini" in text.stdout


def test_output_to_a_pipe_keeps_each_session_on_one_line(home: Path, workspace: Path) -> None:
    """Not a terminal: no wrapping at any width, so grep and scripts see whole rows."""
    (workspace / "data.txt").write_text("the answer is 42\n")
    prompt = "read data.txt and tell me what the answer is, then explain why it matters"
    with FakeOpenAIServer(_script(1)) as server:
        env = _env(home, server)
        result = run_cli(["run", prompt, "--thread", "pipe1"], cwd=workspace, env=env)
        assert result.returncode == 0, result.stderr
        listed = run_cli(["sessions", "list"], cwd=workspace, env=env)
    assert listed.returncode == 0, listed.stderr
    rows = [line for line in listed.stdout.splitlines() if "pipe1" in line]
    assert len(rows) == 1 and prompt[:40] in rows[0] and str(workspace) in rows[0], listed.stdout
