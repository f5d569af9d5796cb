"""A subagent that raises: the parent gets ``ok: false`` and carries on (12)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from langchain_core.messages import ToolMessage

from agentgraph.config import Settings
from agentgraph.persistence import open_store
from agentgraph.runtime.history import validate_history
from agentgraph.session.agent import Agent
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.scripts import ai_text, ai_tools

subagents = pytest.importorskip(
    "agentgraph.capabilities.subagents", reason="call_subagent not built yet"
)


def test_subagent_that_raises_returns_ok_false_and_the_parent_continues(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    settings = make_settings(AGENTGRAPH_PROVIDER_MAX_RETRIES="0")
    model = ScriptedChatModel(
        [
            ai_tools((subagents.SUBAGENT_TOOL, {"task": "count the files and report"})),
            RuntimeError("subagent model exploded"),  # the subagent's first model call
            ai_text("the helper failed, so I counted myself: 0 files"),
        ]
    )
    with open_store(settings) as store:
        agent = Agent(settings, store, model=model, sleep=lambda _s: None)
        events: list[dict] = []
        result = agent.run_turn("parent", "delegate", workspace, on_event=events.append)
        assert result.answer == "the helper failed, so I counted myself: 0 files"
        history = agent.messages("parent")
        assert validate_history(history) == []
        answer = next(m for m in history if isinstance(m, ToolMessage))
        payload = {**answer.artifact, "result": answer.text}
        assert payload["ok"] is False and answer.status == "error"
        assert "exploded" in payload["result"] or "crashed" in payload["result"]
        assert any(e["type"] == "subagent_done" and e["ok"] is False for e in events)
        children = store.index.children("parent")
        assert len(children) == 1 and children[0].context_id == payload["context_id"]
        # The parent session stays usable.
        agent.deps.model = ScriptedChatModel([ai_text("still here")])
        assert agent.run_turn("parent", "next", workspace).answer == "still here"
