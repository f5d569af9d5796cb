"""Which session ``--continue`` reopens."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from agentgraph.config import Settings
from agentgraph.errors import AgentGraphError
from agentgraph.persistence import open_store
from agentgraph.persistence.index import SessionInfo
from agentgraph.session.catalog import session_to_reopen


def test_continue_skips_a_newer_empty_session(settings: Settings, workspace: Path) -> None:
    now = time.time()
    with open_store(settings) as store:
        with pytest.raises(AgentGraphError, match="no previous session"):
            session_to_reopen(store, resume=None, cont=True, workspace=workspace)
        store.index.upsert(
            SessionInfo("empty1", workspace=str(workspace), updated_at=now, message_count=0)
        )
        # Only empty sessions: the newest of them.
        assert session_to_reopen(store, resume=None, cont=True, workspace=workspace) == "empty1"
        for tid, age_s, count in (("worked1", 60, 6), ("older1", 600, 4)):
            store.index.upsert(
                SessionInfo(
                    tid, workspace=str(workspace), updated_at=now - age_s, message_count=count
                )
            )
        # A session opened with /new and left empty does not hide the one worked in.
        assert session_to_reopen(store, resume=None, cont=True, workspace=workspace) == "worked1"
