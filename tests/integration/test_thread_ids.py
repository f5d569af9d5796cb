"""Thread ids from outside are checked at the edges; paths derived from any id stay home."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgraph.config import Settings
from agentgraph.persistence import open_store
from agentgraph.persistence.thread_ids import (
    THREAD_ID_MAX_CHARS,
    InvalidThreadId,
    check_thread_id,
    is_valid_thread_id,
    safe_name,
    session_path,
)
from agentgraph.session.agent import Agent, new_thread_id
from agentgraph.session.lifecycle import import_session, session_dirs
from agentgraph.session.transcript import parse_jsonl
from agentgraph.session.undo import snapshots_dir
from agentgraph.session.workspaces import isolated_workspace
from tests.cli_helpers import cli_env, run_cli, server_env
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.scripts import ai_text, ai_tools

KEY = "sk-test-thread-ids-key"
HOSTILE_IDS = [
    "/abs-escape",
    "../../x",
    "a" * 300,
    "a\x00b",
    "ünïcödé",
    "",
    ".",
    "..",
    "-starts-with-dash",
    "a/b",
    "a\nb",
    "tab\there",
    "x" * (THREAD_ID_MAX_CHARS + 1),
]


def _files_outside(root: Path, allowed: list[Path]) -> list[Path]:
    """Files and folders under ``root`` that are not inside one of ``allowed``."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            if not any(path == a or a in path.parents or path in a.parents for a in allowed):
                found.append(path)
    return found


def test_ordinary_ids_are_valid_and_keep_their_folders(tmp_path: Path) -> None:
    tid = new_thread_id()
    assert is_valid_thread_id(tid) and safe_name(tid) == tid
    assert session_path(tmp_path, "artifacts", tid) == tmp_path / "artifacts" / tid
    assert snapshots_dir(tmp_path, tid) == tmp_path / "snapshots" / tid
    assert isolated_workspace(tmp_path, tid) == (tmp_path / "workspaces" / tid).resolve()
    for ok in ("busy1", "a", "my-thread_2.v1", "A" * THREAD_ID_MAX_CHARS, str(os.urandom(4).hex())):
        assert check_thread_id(ok) == ok and safe_name(ok) == ok


@pytest.mark.parametrize("bad", HOSTILE_IDS)
def test_hostile_ids_are_refused_in_one_line(bad: str) -> None:
    with pytest.raises(InvalidThreadId) as info:
        check_thread_id(bad, "--thread")
    text = str(info.value)
    assert "\n" not in text and "\x00" not in text and len(text) < 200
    assert text.startswith("invalid --thread ") and info.value.exit_code == 2


@settings(max_examples=400, deadline=None)
@given(st.text(min_size=0, max_size=400))
def test_any_id_maps_to_one_component_inside_its_folder(tid: str) -> None:
    home = Path("/home/u/.agentgraph")
    for kind in ("artifacts", "snapshots", "workspaces"):
        path = session_path(home, kind, tid)
        assert path.parent == home / kind
        name = path.name
        assert name not in ("", ".", "..") and "/" not in name and "\x00" not in name
        assert len(name.encode()) <= 255  # NAME_MAX on Linux
        # A derived name never equals a valid id: no two sessions share a folder.
        assert is_valid_thread_id(tid) == (name == tid)
        assert os.path.normpath(path).startswith(str(home / kind) + os.sep)


def test_an_id_that_bypassed_the_edge_still_writes_only_under_home(
    make_settings: Callable[..., Settings], tmp_path: Path, workspace: Path
) -> None:
    """Artifacts, snapshots and session folders of a hostile id stay inside home."""
    settings_ = make_settings(AGENTGRAPH_TOOL_OUTPUT_MAX_TOKENS="200")
    home = settings_.home
    big = "python3 -c \"print('line of output ' * 4000)\""
    for hostile in (str(tmp_path / "abs-escape"), "../../x", "y" * 300):
        model = ScriptedChatModel([ai_tools(("run_bash", {"command": big})), ai_text("done")])
        with open_store(settings_) as store:
            agent = Agent(settings_, store, model=model, sleep=lambda _s: None)
            result = agent.run_turn(hostile, "make a big output", workspace)
            assert result.answer == "done"
            tool_result = [m for m in agent.messages(hostile) if m.type == "tool"][-1]
            assert "File name too long" not in str(tool_result.content)
            assert str(home / "artifacts") in str(tool_result.content)  # the full output
        for folder in session_dirs(home, hostile):
            assert folder.parent.parent == home
    assert _files_outside(tmp_path, [home, workspace]) == []


def test_import_never_reuses_a_hostile_session_id(settings: Settings) -> None:
    for hostile in ("../../x", "/abs", "a" * 300, "ü"):
        entry = {
            "uuid": "u1",
            "sessionId": hostile,
            "type": "user",
            "message": {"role": "user", "content": "hi"},
        }
        with open_store(settings) as store:
            info = import_session(store, parse_jsonl([json.dumps(entry)]))
        assert info.thread_id != hostile and is_valid_thread_id(info.thread_id)


def test_the_cli_refuses_bad_ids_with_one_line(home: Path, workspace: Path, tmp_path: Path) -> None:
    escape = tmp_path / "abs-escape"
    with FakeOpenAIServer([{"content": "should not run"}]) as server:
        env = server_env(home, server.url, KEY)
        cases = [
            ["run", "hello", "--thread", str(escape)],
            ["run", "hello", "--thread", "../../x"],
            ["run", "hello", "--thread", "a" * 300],
            ["run", "hello", "--thread", "ünïcödé"],
            ["--resume", str(escape)],
            ["-r", "../x"],
            ["sessions", "show", "../../x"],
            ["sessions", "delete", str(escape), "--yes"],
            ["sessions", "export", "a" * 300],
            ["sessions", "compact", "ü"],
        ]
        for args in cases:
            res = run_cli(args, cwd=workspace, env=env, stdin="/exit\n")
            assert res.returncode == 2, (args, res.stderr)
            lines = res.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("agentgraph: invalid "), (args, lines)
            assert "Traceback" not in res.stderr
        assert server.requests == []
    assert not escape.exists() and not Path(f"{escape}.pid").exists()
    assert _files_outside(tmp_path, [home, workspace]) == []


def test_repl_switch_refuses_a_bad_id_and_the_session_goes_on(home: Path, workspace: Path) -> None:
    env = cli_env(home, OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    res = run_cli(
        [], cwd=workspace, env=env, stdin="/switch ../../x\n/switch a\x00b\n/current\n/exit\n"
    )
    assert res.returncode == 0, res.stderr
    assert res.stderr.count("invalid session id") == 2
    assert "session " in res.stderr and "Traceback" not in res.stderr
