"""@mentions: parsing, and attaching files / recording agents through the real graph."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from agentgraph.config import Settings
from agentgraph.persistence import Store, open_store
from agentgraph.session.agent import Agent
from agentgraph.session.mentions import MENTION_FILE_MAX_TOKENS, parse_mentions, resolve_mentions
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.scripts import ai_text


@pytest.fixture
def opened(settings: Settings) -> Iterator[Store]:
    with open_store(settings) as store:
        yield store


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("look at @src/app.py, please", ["src/app.py"]),
        ("mail me@example.com about @README.md.", ["README.md"]),
        ('open @"my notes.txt" and (@b.txt)', ["my notes.txt", "b.txt"]),
        ("@subagent do it; @subagent again", ["subagent"]),
        ("no mentions here @", []),
    ],
)
def test_parse_mentions(text: str, expected: list[str]) -> None:
    assert parse_mentions(text) == expected


def _turn(
    settings: Settings, store: Store, workspace: Path, text: str
) -> tuple[Agent, ScriptedChatModel, list[dict[str, Any]]]:
    model = ScriptedChatModel([ai_text("ok")])
    agent = Agent(settings, store, model=model, sleep=lambda _s: None)
    events: list[dict[str, Any]] = []
    agent.run_turn("t", text, workspace, on_event=events.append)
    return agent, model, events


def test_at_file_attaches_content_and_records_upload(
    settings: Settings, opened: Store, workspace: Path
) -> None:
    (workspace / "docs").mkdir()
    (workspace / "docs" / "notes.txt").write_text("the launch code is 4711\n")
    agent, model, events = _turn(settings, opened, workspace, "summarize @docs/notes.txt please")
    user = [m for m in model.calls[0] if isinstance(m, HumanMessage)][-1]
    assert str(user.content).startswith("summarize @docs/notes.txt please")
    assert '<attached_file path="docs/notes.txt">' in str(user.content)
    assert "the launch code is 4711" in str(user.content)
    values = agent.graph.get_state(agent.config("t")).values
    assert values["uploaded_files"] == ["docs/notes.txt"]
    assert any(e.get("text") == "attached docs/notes.txt" for e in events)


def test_large_attachment_is_capped_in_tokens(
    settings: Settings, opened: Store, workspace: Path
) -> None:
    (workspace / "big.log").write_text("".join(f"line {i} of the log\n" for i in range(40_000)))
    agent, model, events = _turn(settings, opened, workspace, "what failed in @big.log")
    user = str([m for m in model.calls[0] if isinstance(m, HumanMessage)][-1].content)
    assert "tokens truncated" in user and "line 0 of the log" in user
    assert "line 39999 of the log" in user  # head and tail kept
    assert agent.deps.counter.count_text(user) <= MENTION_FILE_MAX_TOKENS + 100
    assert any("(truncated)" in str(e.get("text")) for e in events)


def test_paths_outside_the_workspace_and_binaries_are_not_attached(
    settings: Settings, opened: Store, workspace: Path, tmp_path: Path
) -> None:
    (tmp_path / "secret.txt").write_text("TOP SECRET\n")
    (workspace / "link.txt").symlink_to(tmp_path / "secret.txt")
    (workspace / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(200))
    text = "read @../secret.txt and @link.txt and @img.png and @missing.txt"
    agent, model, events = _turn(settings, opened, workspace, text)
    user = str([m for m in model.calls[0] if isinstance(m, HumanMessage)][-1].content)
    assert user == text
    assert "TOP SECRET" not in str(model.calls)
    notices = [str(e.get("text")) for e in events if e["type"] == "notice"]
    assert any("@../secret.txt not attached" in n and "escapes" in n for n in notices)
    assert any("@link.txt not attached" in n and "symlink" in n for n in notices)
    assert any("@img.png not attached" in n and "PNG" in n for n in notices)
    assert any("@missing.txt not attached" in n for n in notices)
    assert not agent.graph.get_state(agent.config("t")).values.get("uploaded_files")


def test_agent_and_skill_mentions_are_recorded(
    settings: Settings, opened: Store, workspace: Path
) -> None:
    agent, _model, _events = _turn(
        settings, opened, workspace, "@subagent split this, @python-tests"
    )
    values = agent.graph.get_state(agent.config("t")).values
    assert values["mentioned_agents"] == ["python-tests", "subagent"]


def test_isolated_copy_goes_to_uploads(tmp_path: Path) -> None:
    launch = tmp_path / "launch"
    launch.mkdir()
    (launch / "data.csv").write_text("a,b\n1,2\n")
    isolated = tmp_path / "iso"
    isolated.mkdir()
    found = resolve_mentions(
        "load @data.csv", root=launch, skill_ids=[], count=len, copy_to=isolated
    )
    assert [a.path for a in found.attachments] == ["uploads/data.csv"]
    assert (isolated / "uploads" / "data.csv").read_text() == "a,b\n1,2\n"
