"""/mode and /permissions on a real Agent and store; the REPL's answer parsing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from agentgraph.config import Settings
from agentgraph.errors import AgentGraphError
from agentgraph.frontends.cli.approval import parse_answer
from agentgraph.frontends.cli.slash import dispatch
from agentgraph.persistence import Store
from agentgraph.security.permission_rules import Rule, add_rule
from agentgraph.session.agent import Agent
from tests.fakes.chat_model import ScriptedChatModel
from tests.slash_helpers import slash_context


@pytest.fixture
def agent(settings: Settings, store: Store) -> Agent:
    import agentgraph.frontends.cli.slash_permissions  # noqa: F401  (registers the commands)

    return Agent(settings, store, model=ScriptedChatModel([]))


def test_mode_shows_and_switches_the_session_mode(agent: Agent, workspace: Path) -> None:
    ctx, out = slash_context(agent, "t", workspace)
    dispatch(ctx, "/mode")
    assert "mode: auto" in out.getvalue() and "accept-edits" in out.getvalue()
    dispatch(ctx, "/mode plan")
    assert agent.permission_mode("t") == "plan"
    assert agent.permission_mode("other") == "auto"
    with pytest.raises(AgentGraphError, match="unknown mode"):
        dispatch(ctx, "/mode yolo")
    assert agent.permission_mode("t") == "plan"


def test_permissions_lists_and_revokes_this_workspaces_rules(
    agent: Agent, workspace: Path, tmp_path: Path
) -> None:
    add_rule(agent.settings.home, str(workspace), Rule("run_bash", "pytest"))
    add_rule(agent.settings.home, str(workspace), Rule("edit", "src/*"))
    add_rule(agent.settings.home, str(tmp_path), Rule("run_bash", "make"))
    ctx, out = slash_context(agent, "t", workspace)
    dispatch(ctx, "/permissions")
    listed = out.getvalue()
    assert "1. run_bash: pytest" in listed and "2. edit: src/*" in listed
    assert "make" not in listed
    dispatch(ctx, "/permissions revoke 1")
    assert "revoked: run_bash: pytest" in out.getvalue()
    with pytest.raises(AgentGraphError, match="no rule 5"):
        dispatch(ctx, "/permissions revoke 5")
    with pytest.raises(AgentGraphError, match="usage"):
        dispatch(ctx, "/permissions revoke x")


@pytest.mark.parametrize(
    ("typed", "offered", "answer"),
    [
        ("y", True, True),
        ("YES", False, True),
        ("a", True, {"approved": True, "always": True}),
        ("always", False, True),  # nothing to store: a plain yes
        ("n", True, False),
        ("", True, False),
        ("n use make instead", True, {"approved": False, "reason": "use make instead"}),
        ("No, use make", True, {"approved": False, "reason": "use make"}),
        ("y please", True, False),
        ("whatever", True, False),
    ],
)
def test_typed_answers(typed: str, offered: bool, answer: object) -> None:
    assert parse_answer(typed, always_offered=offered) == answer


def test_an_unknown_settings_value_is_refused(make_settings: Callable[..., Settings]) -> None:
    with pytest.raises(ValueError):
        make_settings(AGENTGRAPH_PERMISSION_MODE="yolo")


def test_tab_completes_the_modes(workspace: Path) -> None:
    from prompt_toolkit.completion import CompleteEvent
    from prompt_toolkit.document import Document

    from agentgraph.frontends.cli.completion import ReplCompleter

    completer = ReplCompleter(
        commands=lambda: {"mode": "", "permissions": ""},
        sessions=lambda: [],
        skills=lambda: [],
        workspace=lambda: workspace,
    )

    def complete(text: str) -> list[str]:
        found = completer.get_completions(Document(text), CompleteEvent())
        return [c.text for c in found]

    assert complete("/mode a") == ["ask", "accept-edits", "auto"]
    assert complete("/mode p") == ["plan"]
    assert complete("/permissions r") == ["revoke"]
