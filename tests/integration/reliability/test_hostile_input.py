"""Hostile paths and commands through the real graph (5, 6) and the loop cap (9)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage

from agentgraph.config import Settings
from agentgraph.persistence import open_store
from agentgraph.runtime.history import validate_history
from agentgraph.session.agent import Agent
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.scripts import ai_text, ai_tools
from tests.integration.reliability.helpers import alive

LONG_PATH = "a/" * 3000 + "x.txt"
BASH_TIMEOUT_S = 2
# Generous: the bound under test is timeout + a 1 s drain + a 2 s kill grace; this only
# catches a hang (the command would otherwise run 1000 s).
HANG_BOUND_S = BASH_TIMEOUT_S + 20


@pytest.fixture
def agent_for(
    make_settings: Callable[..., Settings],
) -> Iterator[Callable[..., Agent]]:
    opened: list[Any] = []

    def make(model: ScriptedChatModel, **env: Any) -> Agent:
        settings = make_settings(**env)
        cm = open_store(settings)
        opened.append(cm)
        return Agent(settings, cm.__enter__(), model=model, sleep=lambda _s: None)

    yield make
    for cm in opened:
        cm.__exit__(None, None, None)


def _escapes(outside: Path, link: str) -> list[str]:
    return [
        "../escape.txt",
        "sub/../../escape.txt",
        str(outside / "escape.txt"),
        "/etc/agentgraph-escape.txt",
        "~/escape.txt",
        f"{link}/escape.txt",
        link,
        "nul\x00byte.txt",
        LONG_PATH,
    ]


def _calls_for(path: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("read_file", {"path": path}),
        ("write_file", {"path": path, "content": "pwned"}),
        ("edit_file", {"path": path, "old_string": "secret", "new_string": "pwned"}),
        ("list_dir", {"path": path}),
        ("glob", {"pattern": "*", "path": path}),
        ("glob", {"pattern": f"{path}/*" if path != LONG_PATH else path}),
        ("grep", {"pattern": "secret", "path": path}),
    ]


def test_path_escapes_through_every_file_tool(
    agent_for: Callable[..., Agent], tmp_path: Path, workspace: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    (outside / "escape.txt").write_text("secret original\n")
    os.symlink(outside, workspace / "link_out")
    os.symlink(outside / "secret.txt", workspace / "file_link")
    (workspace / "sub").mkdir()
    before = {p: p.read_bytes() for p in outside.rglob("*") if p.is_file()}
    paths = [*_escapes(outside, "link_out"), "file_link"]
    turns = [ai_tools(*_calls_for(path)) for path in paths]
    model = ScriptedChatModel([*turns, ai_text("gave up")])
    agent = agent_for(model, MAX_LOOPS=len(turns) + 1, MAX_MESSAGE_HISTORY=100)
    result = agent.run_turn("escape", "try to escape", workspace)
    assert result.answer == "gave up"
    history = agent.messages("escape")
    assert validate_history(history) == []
    results = [m for m in history if isinstance(m, ToolMessage)]
    assert len(results) == len(paths) * len(_calls_for("x"))
    for message in results:
        text = str(message.content)
        # A glob *pattern* through a symlink is not an error: it matches nothing.
        assert message.status == "error" or text.startswith("no files match"), text
        assert "secret" not in text.replace("'secret'", "").replace("secret original", "!"), text
        assert "pwned" not in text
    # Nothing outside the workspace was created or changed.
    after = {p: p.read_bytes() for p in outside.rglob("*") if p.is_file()}
    assert after == before
    assert not (tmp_path / "escape.txt").exists()
    assert not Path("/etc/agentgraph-escape.txt").exists()
    assert not list(tmp_path.glob("home/**/escape.txt"))
    assert {p.name for p in workspace.iterdir()} == {"link_out", "file_link", "sub"}


def test_background_sleep_and_grandchild_holding_the_pipe(
    agent_for: Callable[..., Agent], workspace: Path
) -> None:
    commands = [
        "sleep 1000 & echo $! > bg.pid; wait",
        "(sleep 1000; echo late) & echo $! > grandchild.pid; echo started",
        "bash -c 'sleep 1000 & echo $! > nested.pid; exec sleep 1000' & wait",
    ]
    model = ScriptedChatModel(
        [*(ai_tools(("run_bash", {"command": c})) for c in commands), ai_text("done")]
    )
    # Unsandboxed: the pids the commands write are then host pids this test can check
    # (in the sandbox they are pids of its own namespace; tests/integration/test_tools_bash.py runs
    # the kill tests both ways).
    agent = agent_for(
        model, AGENTGRAPH_BASH_TIMEOUT_S=str(BASH_TIMEOUT_S), AGENTGRAPH_SANDBOX="off"
    )
    started = time.monotonic()
    agent.run_turn("hang", "run them", workspace)
    elapsed = time.monotonic() - started
    assert elapsed < len(commands) * HANG_BOUND_S  # returned: did not wait 1000 s
    results = [str(m.content) for m in agent.messages("hang") if isinstance(m, ToolMessage)]
    assert "timed out after 2s" in results[0]
    assert "started" in results[1] and "late" not in results[1]
    assert "timed out after 2s" in results[2]
    for name in ("bg.pid", "grandchild.pid", "nested.pid"):
        pid = int((workspace / name).read_text())
        deadline = time.monotonic() + 5
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(pid), f"{name}: process {pid} survived"


def test_model_that_calls_tools_forever_stops_at_max_loops(
    agent_for: Callable[..., Agent], workspace: Path
) -> None:
    forever = [ai_tools(("now", {})) for _ in range(4)]
    model = ScriptedChatModel([*forever, ai_text("here is what I found")])
    agent = agent_for(model, MAX_LOOPS=4)
    events: list[dict[str, Any]] = []
    result = agent.run_turn("forever", "loop", workspace, on_event=events.append)
    assert result.answer == "here is what I found"
    assert model.call_count == 5 and model.tool_choices[-1] == "none"
    notices = [e["text"] for e in events if e["type"] == "notice"]
    assert any("step limit reached (4 model calls)" in n for n in notices), notices
    history = agent.messages("forever")
    assert validate_history(history) == []
    # The next turn starts with a fresh budget.
    model2 = ScriptedChatModel([ai_tools(("now", {})), ai_text("fresh")])
    agent.deps.model = model2
    assert agent.run_turn("forever", "again", workspace).answer == "fresh"


def test_a_hard_link_to_a_file_outside_is_refused_like_a_symlink(
    agent_for: Callable[..., Agent], tmp_path: Path, workspace: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "credentials"
    secret.write_text("token = hunter2-outside\n")
    os.link(secret, workspace / "notes.txt")
    # Two links, both inside: an ordinary file to the tools.
    (workspace / "a.txt").write_text("shared inside\n")
    os.link(workspace / "a.txt", workspace / "b.txt")
    calls: list[tuple[str, dict[str, Any]]] = [
        ("read_file", {"path": "notes.txt"}),
        ("edit_file", {"path": "notes.txt", "old_string": "token", "new_string": "pwned"}),
        ("grep", {"pattern": "hunter2|shared", "path": "."}),
        ("grep", {"pattern": "hunter2", "path": "notes.txt"}),
        ("read_file", {"path": "b.txt"}),
    ]
    model = ScriptedChatModel([*(ai_tools(call) for call in calls), ai_text("done")])
    agent = agent_for(model, MAX_LOOPS=len(calls) + 1)
    assert agent.run_turn("hardlink", "read my notes", workspace).answer == "done"
    results = [m for m in agent.messages("hardlink") if isinstance(m, ToolMessage)]
    texts = [str(m.content) for m in results]
    assert all("hunter2-outside" not in text for text in texts), texts
    read, edit, grep_all, grep_one, inside = results
    assert read.status == "error" and "hard link" in str(read.content), read.content
    assert edit.status == "error" and "hard link" in str(edit.content), edit.content
    assert "a.txt:1: shared inside" in str(grep_all.content), grep_all.content
    assert "b.txt:1: shared inside" in str(grep_all.content), grep_all.content
    assert str(grep_one.content).startswith("no matches"), grep_one.content
    assert inside.status != "error" and "shared inside" in str(inside.content), inside.content
    assert secret.read_text() == "token = hunter2-outside\n"
