"""The answer streams as ``token`` events through the real graph (runtime/token_stream.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentgraph.config import Settings
from agentgraph.persistence import open_store
from agentgraph.session.agent import Agent
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.scripts import ai_text, ai_tools


def _events(settings: Settings, workspace: Path, model: ScriptedChatModel) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    with open_store(settings) as store:
        agent = Agent(settings, store, model=model, sleep=lambda _s: None)
        agent.run_turn("t1", "read a.txt and tell me", workspace, on_event=events.append)
    return events


def test_tokens_of_every_model_reply_stream_in_order(settings: Settings, workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    model = ScriptedChatModel(
        [
            ai_tools(("read_file", {"path": "a.txt"}), content="Let me look."),
            ai_text("The file says alpha, and nothing else."),
        ]
    )
    events = _events(settings, workspace, model)
    kinds = [e["type"] for e in events]
    tokens = [e for e in events if e["type"] == "token"]
    assert len(tokens) > 2  # streamed in pieces, not as one message at the end
    assert "".join(e["text"] for e in tokens) == (
        "Let me look.The file says alpha, and nothing else."
    )
    # The first reply's tokens come before its tool call, the answer's after the result.
    first_answer_token = next(
        i for i, e in enumerate(events) if e["type"] == "token" and "file" in e["text"]
    )
    assert kinds.index("tool_call") < kinds.index("tool_result") < first_answer_token
    assert kinds.index("token") < kinds.index("tool_call")
    answer = next(e for e in events if e["type"] == "answer")
    assert answer["text"] == "The file says alpha, and nothing else."
