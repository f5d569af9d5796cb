"""Undo restores the bytes a turn changed, exactly, through the real agent."""

from __future__ import annotations

import os
from pathlib import Path

from agentgraph.config import Settings
from agentgraph.persistence import open_store
from agentgraph.session.agent import Agent
from agentgraph.session.undo import UndoStore
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.scripts import ai_text, ai_tools


def _tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }


def test_undo_restores_created_changed_and_deleted_files(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "a.py").write_bytes(b"print('a')\r\n\x00\xff binary tail")
    (ws / "keep.txt").write_text("unchanged\n")
    (ws / "gone.txt").write_text("will be deleted\n")
    (ws / ".git").mkdir()
    (ws / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (ws / "big.bin").write_bytes(b"0" * 5_000)
    original = _tree(ws)
    undo = UndoStore(tmp_path / "snap", max_file_bytes=4_000)

    before = undo.snapshot(ws)
    (ws / "src" / "a.py").write_bytes(b"changed")
    (ws / "src" / "new.py").write_text("new file\n")
    (ws / "gone.txt").unlink()
    (ws / ".git" / "HEAD").write_text("ref: refs/heads/other\n")
    (ws / "big.bin").write_bytes(b"1" * 5_000)
    changes, _after = undo.record_turn(ws, before)
    assert changes is not None
    assert set(changes.before) == {"src/a.py", "src/new.py", "gone.txt"}  # not .git, not big

    result = undo.undo(ws, 1)
    assert sorted(result.restored) == ["gone.txt", "src/a.py"]
    assert result.removed == ["src/new.py"] and result.failed == []
    now = _tree(ws)
    for rel in ("src/a.py", "gone.txt", "keep.txt"):
        assert now[rel] == original[rel]
    assert "src/new.py" not in now
    assert (ws / ".git" / "HEAD").read_text() == "ref: refs/heads/other\n"  # never touched
    assert now["big.bin"] == b"1" * 5_000  # over the size limit: not managed
    assert undo.turns() == []


def test_undo_n_turns_restores_the_oldest_state(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "f.txt").write_text("v0")
    undo = UndoStore(tmp_path / "snap")
    scan = undo.snapshot(ws)
    for version in ("v1", "v2", "v3"):
        (ws / "f.txt").write_text(version)
        os.utime(ws / "f.txt", ns=(0, len(version) * 10**9 + int(version[1])))
        (ws / f"{version}.txt").write_text(version)
        _changes, scan = undo.record_turn(ws, scan)
    assert len(undo.turns()) == 3
    undo.undo(ws, 1)
    assert (ws / "f.txt").read_text() == "v2" and not (ws / "v3.txt").exists()
    result = undo.undo(ws, 5)  # more than recorded: all of them
    assert result.turns == 2
    assert (ws / "f.txt").read_text() == "v0"
    assert not (ws / "v1.txt").exists() and not (ws / "v2.txt").exists()


def test_agent_turn_records_changes_for_undo(settings: Settings, workspace: Path) -> None:
    (workspace / "notes.txt").write_text("original\n")
    model = ScriptedChatModel(
        [
            ai_tools(("write_file", {"path": "notes.txt", "content": "rewritten\n"})),
            ai_text("done"),
        ]
    )
    with open_store(settings) as store:
        agent = Agent(settings, store, model=model, sleep=lambda _s: None)
        agent.run_turn("u1", "rewrite notes", workspace)
        assert (workspace / "notes.txt").read_text() == "rewritten\n"
        undo = agent.sessions.undo_store("u1")
        assert [list(t.before) for t in undo.turns()] == [["notes.txt"]]
        result = undo.undo(workspace, 1)
        assert result.restored == ["notes.txt"]
        assert (workspace / "notes.txt").read_text() == "original\n"
        # Nothing about snapshots is in the transcript the model sees.
        assert all("snapshot" not in str(m.content) for m in agent.messages("u1"))
