"""Archived history through the real CLI: export is exact, a damaged segment is one line."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentgraph.config import Settings
from agentgraph.persistence import open_store
from agentgraph.persistence.archive import ARCHIVE_TABLE
from agentgraph.session.agent import Agent
from agentgraph.session.transcript import export_jsonl
from tests.cli_helpers import cli_env, run_cli
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.scripts import ai_text, ai_tools

TURNS = 56  # 4 updates a turn: the snapshot at 200 updates comes after 3 compactions
COMPACT_EVERY_TURNS = 15


def _session(settings: Settings, workspace: Path) -> str:
    script: list[Any] = []
    for i in range(TURNS):
        script.append(ai_tools(("write_file", {"path": "notes.txt", "content": f"v{i}"})))
        script.append(ai_text(f"answer {i} " + "y" * 800))
        if i % COMPACT_EVERY_TURNS == COMPACT_EVERY_TURNS - 1:
            script.append(ai_text(f"summary {i}"))
    with open_store(settings) as store:
        agent = Agent(settings, store, model=ScriptedChatModel(script), sleep=lambda _s: None)
        for i in range(TURNS):
            agent.run_turn("arch1", f"question {i} " + "q" * 800, workspace)
            if i % COMPACT_EVERY_TURNS == COMPACT_EVERY_TURNS - 1:
                assert agent.compact("arch1") is not None
        info = store.index.get("arch1")
        assert info is not None
        return export_jsonl(agent.messages("arch1"), info)


def test_export_of_an_archived_session_is_exact_and_damage_is_one_line(
    home: Path, workspace: Path, make_settings: Callable[..., Settings]
) -> None:
    settings = make_settings(AGENTGRAPH_HOME=str(home / ".agentgraph"))
    expected = _session(settings, workspace)
    env = cli_env(home)
    db = settings.db_path
    conn = sqlite3.connect(db)
    assert conn.execute(f"SELECT count(*) FROM {ARCHIVE_TABLE}").fetchone()[0] >= 3
    exported = run_cli(["sessions", "export", "arch1"], cwd=workspace, env=env)
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout.rstrip("\n") == expected.rstrip("\n")
    assert any(
        json.loads(line).get("subtype") == "compact_boundary"
        for line in exported.stdout.splitlines()
    )

    conn.execute(f"UPDATE {ARCHIVE_TABLE} SET data = substr(data, 1, 10)")
    conn.commit()
    conn.close()
    for args in (["sessions", "export", "arch1"], ["sessions", "show", "arch1"]):
        broken = run_cli(args, cwd=workspace, env=env)
        assert broken.returncode != 0
        assert "Traceback" not in broken.stderr
        lines = broken.stderr.strip().splitlines()
        assert len(lines) == 1 and "archived history segment" in lines[0], broken.stderr
        assert "corrupt" in lines[0] and broken.stdout.strip() == ""
