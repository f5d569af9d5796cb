"""The session operations front ends offer as commands, called without any front end.

A real Agent on a real SQLite store, a stateless scripted model (each reply a function
of the request alone), a real git repository: what the web UI gets when it calls the
same operations the REPL's slash commands do.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage

from agentgraph.config import Settings
from agentgraph.persistence import Store
from agentgraph.runtime.goal import CONTINUE_PROMPT, STATUS_DONE
from agentgraph.session.agent import Agent
from agentgraph.session.commands import SearchError, SearchResult, search_or_read, session_diffs
from agentgraph.session.commits import CommitRefused, commit, draft_message, plan_commit
from agentgraph.session.goals import (
    GOAL_CONTINUE,
    GOAL_ENDED,
    GOAL_IDLE,
    GOAL_PLAN_WAIT,
    GoalBudgetRefused,
    GoalTextMissing,
    after_turn,
    clear_goal,
    goal_line,
    start_goal,
)
from agentgraph.session.permissions_ops import (
    cycle_mode,
    permission_rules,
    revoke_permission_rule,
)
from tests.fakes.chat_model import ScriptedChatModel

COMMIT_SUBJECT = "Add a.txt with its greeting"
WRITTEN = "hello from the agent\n"


def _reply(messages: list[BaseMessage]) -> AIMessage | str:
    """Write a.txt, then answer; a commit-message request gets the subject."""
    first = messages[0] if messages else None
    if isinstance(first, SystemMessage) and "commit messages" in str(first.content):
        return COMMIT_SUBJECT
    if any(isinstance(m, ToolMessage) for m in messages):
        return "wrote it"
    call = {"name": "write_file", "args": {"path": "a.txt", "content": WRITTEN}, "id": "w1"}
    return AIMessage(content="", tool_calls=[call])


@pytest.fixture
def agent(settings: Settings, store: Store) -> Agent:
    return Agent(settings, store, model=ScriptedChatModel([_reply]))


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, check=True, timeout=30
    )
    return done.stdout


def _repository(workspace: Path) -> None:
    _git(workspace, "init", "-q")
    _git(workspace, "config", "user.email", "dev@example.invalid")
    _git(workspace, "config", "user.name", "Dev")
    (workspace / "other.txt").write_text("committed\n")
    _git(workspace, "add", "other.txt")
    _git(workspace, "commit", "-q", "-m", "start")


def test_a_turn_s_changes_are_its_diffs_and_a_commit_of_those_files_only(
    agent: Agent, workspace: Path
) -> None:
    _repository(workspace)
    (workspace / "other.txt").write_text("changed by the user\n")
    agent.run_turn("t", "write a.txt", workspace)

    events = session_diffs(agent, "t", workspace)
    assert [(e["type"], e["path"], e["added"], e["removed"]) for e in events] == [
        ("diff", "a.txt", 1, 0)
    ]
    assert session_diffs(agent, "t", workspace, last_only=True) == events

    plan = plan_commit(agent, "t", workspace)
    assert plan.paths == ["a.txt"]
    message, drafted = draft_message(agent, plan)
    assert (message, drafted) == (COMMIT_SUBJECT, True)
    short = commit(plan, message)
    assert _git(workspace, "log", "-1", "--format=%h %s").strip() == f"{short} {COMMIT_SUBJECT}"
    assert _git(workspace, "show", "--name-only", "--format=", "HEAD").split() == ["a.txt"]
    # The user's own change stays theirs: not committed, not staged.
    assert _git(workspace, "status", "--porcelain").splitlines() == [" M other.txt"]


def test_a_commit_runs_no_monitor_the_repository_names(
    agent: Agent, workspace: Path, tmp_path: Path
) -> None:
    """The monitor is a program the repository's config names, and a repository a
    sandboxed command created (``git init`` where there was none) is the command's."""
    _repository(workspace)
    marker = tmp_path / "monitor-ran"
    _git(workspace, "config", "core.fsmonitor", f"touch {marker}; false")
    agent.run_turn("t", "write a.txt", workspace)
    plan = plan_commit(agent, "t", workspace)
    commit(plan, COMMIT_SUBJECT)
    assert _git(workspace, "show", "--name-only", "--format=", "HEAD").split() == ["a.txt"]
    assert not marker.exists()


def test_a_repository_made_after_the_session_first_worked_here_is_not_committed(
    agent: Agent, workspace: Path
) -> None:
    """A command may make a repository where there was none; its hooks would run here."""
    agent.run_turn("t", "write a.txt", workspace)
    _repository(workspace)
    with pytest.raises(CommitRefused, match="commit from your own shell"):
        plan_commit(agent, "t", workspace)


def test_search_finds_words_and_reads_a_message_by_its_reference(
    agent: Agent, workspace: Path
) -> None:
    agent.run_turn("t", "write a.txt", workspace)
    found = search_or_read(agent, "t", "write")
    assert isinstance(found, SearchResult) and found.hits
    shown = search_or_read(agent, "t", "msg:1")
    assert isinstance(shown, str) and shown.startswith("msg:1 [assistant]")
    assert "[tool call] write_file" in shown
    with pytest.raises(SearchError):
        search_or_read(agent, "t", "msg:999")


def test_a_goal_is_refused_set_continued_and_its_end_told_once(
    agent: Agent, workspace: Path
) -> None:
    with pytest.raises(GoalBudgetRefused):
        start_goal(agent, "g", "", "lots")  # the budget is read first
    with pytest.raises(GoalTextMissing):
        start_goal(agent, "g", "", "5000")
    assert goal_line(agent, "g") is None

    started = start_goal(agent, "g", "ship the parser", "5000")
    assert started.budget == "5,000 tokens"
    assert "ship the parser" in started.prompt
    assert "ship the parser" in str(goal_line(agent, "g"))

    step = after_turn(agent, "g", None)
    assert (step.action, step.prompt) == (GOAL_CONTINUE, CONTINUE_PROMPT)
    agent.set_permission_mode("g", "plan")
    assert after_turn(agent, "g", None).action == GOAL_PLAN_WAIT

    goal = agent.goal("g")
    assert goal is not None
    agent.set_goal("g", {**goal, "status": STATUS_DONE})
    ended = after_turn(agent, "g", None)
    assert ended.action == GOAL_ENDED and ended.line.startswith("goal complete (used ")
    assert after_turn(agent, "g", None).action == GOAL_IDLE  # told once
    assert clear_goal(agent, "g") is True
    assert clear_goal(agent, "g") is False


def test_modes_cycle_and_rules_are_listed_and_revoked(agent: Agent, workspace: Path) -> None:
    from agentgraph.security.permission_rules import Rule, add_rule

    first = agent.permission_mode("t")
    second = cycle_mode(agent, "t")
    assert second is not None and second != first
    assert agent.permission_mode("t") == second

    add_rule(agent.settings.home, str(workspace), Rule("run_bash", "pytest"))
    assert [r.describe() for r in permission_rules(agent, workspace)] == ["run_bash: pytest"]
    assert revoke_permission_rule(agent, workspace, 2) is None
    gone = revoke_permission_rule(agent, workspace, 1)
    assert gone is not None and gone.describe() == "run_bash: pytest"
    assert permission_rules(agent, workspace) == []
