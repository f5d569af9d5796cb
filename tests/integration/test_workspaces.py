"""Isolated workspaces (--isolated, uploads/, /clean-workspaces) and todo display, from the CLI."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from agentgraph.errors import ConfigError
from agentgraph.session.workspaces import (
    SECONDS_PER_DAY,
    WORKSPACE_MAX_AGE_DAYS,
    isolated_workspace,
    remove_workspaces,
    stale_workspaces,
)
from tests.cli_helpers import run_cli, server_env
from tests.fakes.openai_server import FakeOpenAIServer

KEY = "sk-test-secret-0123456789abcdef"


def _env(home: Path, server: FakeOpenAIServer) -> dict[str, str]:
    return server_env(home, server.url, KEY)


def _age(folder: Path, days: float) -> None:
    moment = time.time() - days * SECONDS_PER_DAY
    for path in [folder, *folder.iterdir()]:
        os.utime(path, (moment, moment))


def test_isolated_workspace_names_are_safe(tmp_path: Path) -> None:
    ws = isolated_workspace(tmp_path, "abc123")
    assert ws == (tmp_path / "workspaces" / "abc123").resolve() and (ws / "uploads").is_dir()
    for bad in ("../escape", "a/b", "", ".."):
        with pytest.raises(ConfigError):
            isolated_workspace(tmp_path, bad)


def test_stale_workspaces_only_old_ones_under_the_root(tmp_path: Path) -> None:
    old = isolated_workspace(tmp_path, "old")
    fresh = isolated_workspace(tmp_path, "fresh")
    _age(old, WORKSPACE_MAX_AGE_DAYS + 1)
    stale = stale_workspaces(tmp_path)
    assert [s.path.name for s in stale] == ["old"]
    assert remove_workspaces(stale, tmp_path) == []
    assert not old.exists() and fresh.exists()


def test_run_isolated_copies_mentioned_files_to_uploads(home: Path, workspace: Path) -> None:
    (workspace / "data.txt").write_text("forty-two\n")
    script = [
        {"tool_calls": [{"name": "list_dir", "arguments": {"path": "uploads"}}]},
        {"content": "I see data.txt."},
    ]
    with FakeOpenAIServer(script, require_key=KEY) as server:
        env = _env(home, server)
        result = run_cli(
            ["run", "--isolated", "check @data.txt", "--thread", "iso1", "--json"],
            cwd=workspace,
            env=env,
        )
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["answer"] == "I see data.txt."
        isolated = home / ".agentgraph" / "workspaces" / "iso1"
        assert (isolated / "uploads" / "data.txt").read_text() == "forty-two\n"
        first = json.dumps(server.requests[0]["messages"])
        assert "forty-two" in first and str(isolated.resolve()) in first
        assert "data.txt" in json.dumps(server.requests[1]["messages"])  # list_dir saw it
        listed = run_cli(["sessions", "list", "--all", "--json"], cwd=workspace, env=env)
        (row,) = json.loads(listed.stdout)
        assert row["workspace"] == str(isolated.resolve())
    assert server.violations == []


def test_bad_thread_id_for_isolated_is_one_line(home: Path, workspace: Path) -> None:
    with FakeOpenAIServer([{"content": "x"}], require_key=KEY) as server:
        result = run_cli(
            ["run", "--isolated", "hi", "--thread", "../x"], cwd=workspace, env=_env(home, server)
        )
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "invalid --thread" in result.stderr


def test_todo_list_is_shown_when_it_changes(home: Path, workspace: Path) -> None:
    todos = [
        {"content": "write the parser", "status": "in_progress"},
        {"content": "test the parser", "status": "pending"},
    ]
    script = [
        {"tool_calls": [{"name": "todo_write", "arguments": {"todos": todos}}]},
        {"content": "planned"},
    ]
    with FakeOpenAIServer(script, require_key=KEY) as server:
        result = run_cli(["run", "plan it"], cwd=workspace, env=_env(home, server))
    assert result.returncode == 0, result.stderr
    assert "2 todos: 0 done, 1 in progress, 1 pending" in result.stderr
    assert "[~] write the parser" in result.stderr and "[ ] test the parser" in result.stderr


def test_repl_clean_workspaces_asks_then_deletes_old_ones(home: Path, workspace: Path) -> None:
    root = home / ".agentgraph"
    old = isolated_workspace(root, "oldsession")
    fresh = isolated_workspace(root, "freshsession")
    _age(old, WORKSPACE_MAX_AGE_DAYS + 3)
    with FakeOpenAIServer([], require_key=KEY) as server:
        env = _env(home, server)
        asked = run_cli([], cwd=workspace, env=env, stdin="/clean-workspaces\nn\n/exit\n")
        assert asked.returncode == 0, asked.stderr
        assert "oldsession" in asked.stderr and "kept them" in asked.stderr
        assert old.exists()
        done = run_cli([], cwd=workspace, env=env, stdin="/clean-workspaces\ny\n/exit\n")
        assert done.returncode == 0, done.stderr
        assert "deleted 1 workspace folder(s)" in done.stderr
        assert server.requests == []
    assert not old.exists() and fresh.exists()
