"""The CLI end to end: real ChatOpenAI over HTTP to a strict loopback server."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.cli_helpers import cli_env, run_cli, server_env
from tests.fakes.openai_server import FakeOpenAIServer

KEY = "sk-test-secret-0123456789abcdef"


def _env(home: Path, server: FakeOpenAIServer, **extra: str) -> dict[str, str]:
    return server_env(home, server.url, KEY, **extra)


def test_run_json_with_tools_and_resume_across_processes(home: Path, workspace: Path) -> None:
    (workspace / "data.txt").write_text("the answer is 42\n")
    script = [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "data.txt"}}]},
        {"content": "It says 42."},
        {"content": "You asked about data.txt before."},
    ]
    with FakeOpenAIServer(script, require_key=KEY) as server:
        env = _env(home, server)
        first = run_cli(
            ["run", "what is in data.txt?", "--json", "--thread", "abc123"], cwd=workspace, env=env
        )
        assert first.returncode == 0, first.stderr
        lines = first.stdout.strip().splitlines()
        assert len(lines) == 1
        payload = json.loads(lines[0])
        assert payload["thread_id"] == "abc123"
        assert payload["answer"] == "It says 42."
        assert payload["tool_calls"] == 1
        assert payload["usage"]["input_tokens"] > 0 and payload["usage"]["output_tokens"] > 0
        assert "read_file" in first.stderr  # progress goes to stderr

        second = run_cli(
            ["run", "what did I ask?", "--json", "--thread", "abc123"], cwd=workspace, env=env
        )
        assert second.returncode == 0, second.stderr
        assert json.loads(second.stdout)["answer"] == "You asked about data.txt before."
        last = server.requests[-1]
        contents = json.dumps(last["messages"])
        assert "what is in data.txt?" in contents and "the answer is 42" in contents
        assert server.violations == []
        assert all(m.get("stream") is True for m in server.requests)

        listed = run_cli(["sessions", "list", "--json"], cwd=workspace, env=env)
        assert listed.returncode == 0, listed.stderr
        rows = json.loads(listed.stdout)
        assert [r["thread_id"] for r in rows] == ["abc123"]
        row = rows[0]
        assert row["title"] == "what is in data.txt?"
        assert row["workspace"] == str(workspace.resolve())
        assert row["messages"] == 6 and row["updated_at"] > 0


def test_no_key_and_no_endpoint_exits_2_with_one_line(home: Path, workspace: Path) -> None:
    result = run_cli(["run", "hi"], cwd=workspace, env=cli_env(home))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert (
        "OPENAI_API_KEY" in lines[0]
        and "OPENAI_BASE_URL" in lines[0]
        and ".env.example" in lines[0]
    )


def test_local_endpoint_needs_no_key(home: Path, workspace: Path) -> None:
    with FakeOpenAIServer([{"content": "hello"}]) as server:
        env = cli_env(home, OPENAI_BASE_URL=server.url, AGENTGRAPH_MODEL="local")
        result = run_cli(["run", "hi"], cwd=workspace, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "hello"


def test_unreachable_endpoint_is_one_line_exit_1(home: Path, workspace: Path) -> None:
    env = cli_env(
        home,
        OPENAI_BASE_URL="http://127.0.0.1:9/v1",
        AGENTGRAPH_PROVIDER_MAX_RETRIES="0",
    )
    result = run_cli(["run", "hi", "--thread", "t-unreach"], cwd=workspace, env=env)
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("options", "needle"),
    [({"require_key": "sk-other-key"}, "401"), ({"known_models": {"other"}}, "404")],
)
def test_auth_and_unknown_model_fail_clearly_and_keep_the_session(
    home: Path, workspace: Path, options: dict, needle: str
) -> None:
    with FakeOpenAIServer([{"content": "first answer"}]) as good:
        ok = run_cli(
            ["run", "remember me", "--thread", "keep"], cwd=workspace, env=_env(home, good)
        )
        assert ok.returncode == 0, ok.stderr
    with FakeOpenAIServer([{"content": "never"}], **options) as bad:
        result = run_cli(["run", "again", "--thread", "keep"], cwd=workspace, env=_env(home, bad))
    assert result.returncode == 1
    err = result.stderr.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in result.stderr
    assert KEY not in result.stderr
    with FakeOpenAIServer([{"content": "back"}]) as good2:
        again = run_cli(
            ["run", "still there?", "--thread", "keep", "--json"],
            cwd=workspace,
            env=_env(home, good2),
        )
        assert again.returncode == 0, again.stderr
        sent = json.dumps(good2.requests[-1]["messages"])
    assert "remember me" in sent and "first answer" in sent


def test_resume_unknown_and_ambiguous_prefix(home: Path, workspace: Path) -> None:
    with FakeOpenAIServer([{"content": "a"}]) as server:
        env = _env(home, server)
        for tid in ("aaa111", "aaa222"):
            assert (
                run_cli(["run", f"hi {tid}", "--thread", tid], cwd=workspace, env=env).returncode
                == 0
            )
        unknown = run_cli(["--resume", "zzz"], cwd=workspace, env=env, stdin="")
        assert unknown.returncode == 1
        assert "no session matches 'zzz'" in unknown.stderr
        ambiguous = run_cli(["--resume", "aaa"], cwd=workspace, env=env, stdin="")
        assert ambiguous.returncode == 1
        assert "aaa111" in ambiguous.stderr and "aaa222" in ambiguous.stderr
        assert "Traceback" not in ambiguous.stderr
        # --thread: a unique prefix continues that session; an ambiguous one is refused.
        cont = run_cli(["run", "more", "--thread", "aaa1", "--json"], cwd=workspace, env=env)
        assert cont.returncode == 0, cont.stderr
        assert json.loads(cont.stdout)["thread_id"] == "aaa111"
        amb = run_cli(["run", "more", "--thread", "aaa"], cwd=workspace, env=env)
        assert amb.returncode == 1 and "matches 2 sessions" in amb.stderr


@pytest.mark.parametrize("damage", ["random", "truncated", "pages"])
def test_corrupt_database_is_reported_and_untouched(
    home: Path, workspace: Path, damage: str
) -> None:
    with FakeOpenAIServer([{"content": "a"}]) as server:
        env = _env(home, server)
        assert run_cli(["run", "hi", "--thread", "x1"], cwd=workspace, env=env).returncode == 0
        db = home / ".agentgraph" / "sessions.db"
        for suffix in ("-wal", "-shm"):
            Path(str(db) + suffix).unlink(missing_ok=True)
        if damage == "random":
            db.write_bytes(b"\x13\x37garbage" * 1000)
        elif damage == "pages":
            # Header intact, b-tree pages further in overwritten.
            data = bytearray(db.read_bytes())
            page = int.from_bytes(data[16:18], "big") or 65536
            data[2 * page : 2 * page + 100] = b"\xff" * 100
            db.write_bytes(bytes(data))
        else:
            data = db.read_bytes()
            db.write_bytes(data[: len(data) // 3])
        before = db.read_bytes()
        for args in (["run", "hi", "--thread", "x1"], ["sessions", "list"], ["--continue"]):
            result = run_cli(args, cwd=workspace, env=env, stdin="")
            assert result.returncode != 0, args
            assert "Traceback" not in result.stderr
            assert len(result.stderr.strip().splitlines()) == 1, result.stderr
            assert "session store" in result.stderr
        assert db.read_bytes() == before


def test_locked_database_is_reported(home: Path, workspace: Path) -> None:
    with FakeOpenAIServer([{"content": "a"}]) as server:
        env = _env(home, server)
        assert run_cli(["run", "hi", "--thread", "x1"], cwd=workspace, env=env).returncode == 0
        db = home / ".agentgraph" / "sessions.db"
        holder = sqlite3.connect(db, isolation_level=None)
        holder.execute("PRAGMA journal_mode=DELETE").fetchone()
        holder.execute("BEGIN EXCLUSIVE")
        try:
            result = run_cli(
                ["sessions", "list"],
                cwd=workspace,
                env={**env, "AGENTGRAPH_SQLITE_BUSY_TIMEOUT_S": "1"},
            )
        finally:
            holder.execute("ROLLBACK")
            holder.close()
    assert result.returncode == 1
    assert "locked" in result.stderr and "Traceback" not in result.stderr


def test_repl_over_piped_stdin(home: Path, workspace: Path) -> None:
    with FakeOpenAIServer([{"content": "pong"}]) as server:
        env = _env(home, server)
        result = run_cli([], cwd=workspace, env=env, stdin="ping\n/current\n/sessions\n/exit\n")
    assert result.returncode == 0, result.stderr
    assert "pong" in result.stdout
    assert "messages 2" in result.stderr
    assert server.violations == []
