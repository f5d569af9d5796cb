"""Skills: discovery, progressive disclosure, loading by tool and by @mention, tools."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from agentgraph.capabilities import skills as skills_mod
from agentgraph.capabilities.skills import (
    PERSISTENT_TOOLS,
    SkillError,
    activation_update,
    discover_skills,
    parse_skill,
    skill_sources,
)
from agentgraph.config import Settings
from agentgraph.persistence import Store, open_store
from agentgraph.session.agent import Agent
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.scripts import ai_text, ai_tools

REPO_SKILLS = Path(__file__).resolve().parents[2] / "skills"


def write_skill(
    root: Path, skill_id: str, description: str, body: str = "Body.\n", extra: str = ""
) -> Path:
    folder = root / skill_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {skill_id}\ndescription: {description}\n{extra}---\n{body}", encoding="utf-8"
    )
    return folder


@pytest.fixture
def opened(settings: Settings) -> Iterator[Store]:
    with open_store(settings) as store:
        yield store


def tool_results(messages: list[BaseMessage]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


# --------------------------------------------------------------------------- discovery


def test_repo_ships_two_skills_with_valid_front_matter() -> None:
    for skill_id in ("python-tests", "git-commit-message"):
        skill = parse_skill(REPO_SKILLS / skill_id / "SKILL.md")
        assert skill.id == skill.name == skill_id
        assert skill.description and skill.allowed_tools
        assert (REPO_SKILLS / skill_id / "scripts").is_dir()


def test_later_sources_override_earlier_and_bad_skills_are_reported(
    settings: Settings, workspace: Path
) -> None:
    home_skills = settings.home / "skills"
    write_skill(home_skills, "python-tests", "home version")
    write_skill(home_skills, "only-home", "from home")
    write_skill(workspace / ".agentgraph" / "skills", "only-home", "workspace wins")
    broken = home_skills / "broken"
    broken.mkdir()
    (broken / "SKILL.md").write_text("no front matter here\n")
    catalog = discover_skills(skill_sources(settings.home, workspace))
    assert catalog.skills["python-tests"].description == "home version"
    assert catalog.skills["python-tests"].source == "home"
    assert catalog.skills["only-home"].description == "workspace wins"
    assert "git-commit-message" in catalog.skills  # from the repo
    assert any("broken" in p and "front matter" in p for p in catalog.problems)


def test_missing_repo_folder_is_fine(
    monkeypatch: pytest.MonkeyPatch, settings: Settings, workspace: Path
) -> None:
    monkeypatch.setattr(skills_mod, "repo_skills_dir", lambda: None)
    assert [label for label, _ in skill_sources(settings.home, workspace)] == ["home", "workspace"]
    assert discover_skills(skill_sources(settings.home, workspace)).skills == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("---\nname: x\n---\nbody", "description"),
        ("---\ndescription: d\n---\nbody", "name"),
        ("---\nname: x\ndescription: d\nallowed_tools: 3\n---\n", "allowed_tools"),
        ("---\nname: [unclosed\n---\n", "YAML"),
        ("---\nname: x\ndescription: d\n", "not closed"),
    ],
)
def test_malformed_skill_files_are_refused(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "SKILL.md").write_text(text)
    with pytest.raises(SkillError, match=message):
        parse_skill(tmp_path / "x" / "SKILL.md")


def test_skill_cannot_grant_a_tool_denied_to_a_subagent() -> None:
    skill = parse_skill(REPO_SKILLS / "git-commit-message" / "SKILL.md")
    names = ["run_bash", "read_file", "grep", "glob", "list_dir", "write_file", *PERSISTENT_TOOLS]
    update = activation_update(skill, {"denied_tools": ["run_bash"]}, names)
    assert "run_bash" not in update["allowed_tools"]
    assert "read_file" in update["allowed_tools"] and "write_file" not in update["allowed_tools"]
    assert set(PERSISTENT_TOOLS) <= set(update["allowed_tools"])


# --------------------------------------------------------------------------- through the graph


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def test_skills_are_found_once_per_turn_so_the_prompt_is_stable_within_it(
    settings: Settings, opened: Store, workspace: Path
) -> None:
    """A skill written during a turn is not listed in that turn's later model calls (the
    system prompt stays byte-stable for the provider's cache); the next turn lists it."""
    skill = "---\nname: late-skill\ndescription: added mid-turn\n---\nBody.\n"
    path = ".agentgraph/skills/late-skill/SKILL.md"
    model = ScriptedChatModel(
        [ai_tools(("write_file", {"path": path, "content": skill})), ai_text("ok"), "again"]
    )
    agent = Agent(settings, opened, model=model, sleep=lambda _s: None)
    agent.run_turn("t", "add a skill", workspace)
    agent.run_turn("t", "and now?", workspace)
    systems = [str(call[0].content) for call in model.calls]
    assert len(systems) == 3
    assert systems[0] == systems[1] and "late-skill" not in systems[1]
    assert "late-skill: added mid-turn" in systems[2]


def test_load_skill_tool_refuses_other_tools_and_its_script_runs(
    settings: Settings, opened: Store, workspace: Path
) -> None:
    _git(workspace, "init", "-q")
    (workspace / "src").mkdir()
    (workspace / "src" / "lexer.py").write_text("def lex(text):\n    return text.split()\n")
    _git(workspace, "add", "src/lexer.py")
    script = REPO_SKILLS / "git-commit-message" / "scripts" / "draft_commit.py"
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"
    model = ScriptedChatModel(
        [
            ai_tools(("load_skill", {"name": "git-commit-message"})),
            ai_tools(("write_file", {"path": "x.txt", "content": "no"})),
            ai_tools(("run_bash", {"command": command})),
            ai_text("feat(src): add lexer"),
        ]
    )
    agent = Agent(settings, opened, model=model, sleep=lambda _s: None, base_env=dict(os.environ))
    agent.run_turn("t", "write a commit message", workspace)

    # Progressive disclosure: the first prompt lists names and descriptions, not bodies.
    system = str(model.calls[0][0].content)
    assert "git-commit-message: Draft a Conventional Commits message" in system
    assert "python-tests:" in system
    assert "Refine it" not in system and "untested.py" not in system
    assert "call_subagent" in system

    loaded, refused, drafted = tool_results(agent.messages("t"))
    assert "Refine it" in str(loaded.content) and str(script.parent.parent) in str(loaded.content)
    # After loading, the tool list and the system prompt stay byte-identical (the
    # prompt prefix stays cacheable); a call outside the skill's tools is refused.
    assert model.bound_tools[1] == model.bound_tools[0]
    assert all(call[0].content == model.calls[0][0].content for call in model.calls)
    assert refused.status == "error" and "not allowed" in str(refused.content)
    assert "run_bash, read_file, grep, glob, list_dir" in str(refused.content)
    assert not (workspace / "x.txt").exists()
    assert str(drafted.content).startswith("feat(src): add 1 file")
    assert "src/lexer.py (+2 -0)" in str(drafted.content)
    values = agent.graph.get_state(agent.config("t")).values
    assert values["active_skill"] == "git-commit-message"


def test_at_mention_loads_skill_and_its_files_are_readable_outside_the_workspace(
    settings: Settings, opened: Store, workspace: Path
) -> None:
    pkg = workspace / "pkg"
    pkg.mkdir()
    (pkg / "calc.py").write_text(
        "def add(a, b):\n    return a + b\n\ndef mul(a, b):\n    return a * b\n"
    )
    (workspace / "tests").mkdir()
    (workspace / "tests" / "test_calc.py").write_text("from pkg.calc import add\n")
    script = REPO_SKILLS / "python-tests" / "scripts" / "untested.py"
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(script))} pkg tests"
    model = ScriptedChatModel(
        [
            ai_tools(("read_file", {"path": str(script)}), ("run_bash", {"command": command})),
            ai_text("mul is untested"),
        ]
    )
    agent = Agent(settings, opened, model=model, sleep=lambda _s: None, base_env=dict(os.environ))
    events: list[dict] = []
    agent.run_turn("m", "@python-tests cover pkg", workspace, on_event=events.append)

    first = model.calls[0]
    humans = [m for m in first if isinstance(m, HumanMessage)]
    # The skill body arrives as a message before the user's request.
    assert "Writing pytest tests" in str(humans[0].content)
    assert str(humans[-1].content) == "@python-tests cover pkg"
    read, ran = tool_results(agent.messages("m"))
    assert read.status != "error" and "def public_functions" in str(read.content)
    assert "pkg/calc.py:4 mul" in str(ran.content) and "pkg/calc.py:1 add" not in str(ran.content)
    values = agent.graph.get_state(agent.config("m")).values
    assert values["active_skill"] == "python-tests"
    assert values["mentioned_agents"] == ["python-tests"]
    assert str(script.parent.parent) in values["skill_dirs"]
    assert any(e.get("text") == "loaded skill python-tests" for e in events)
    assert isinstance(agent.messages("m")[-1], AIMessage)


def test_files_of_skills_not_loaded_stay_unreadable(
    settings: Settings, opened: Store, workspace: Path
) -> None:
    script = REPO_SKILLS / "python-tests" / "scripts" / "untested.py"
    model = ScriptedChatModel([ai_tools(("read_file", {"path": str(script)})), ai_text("no")])
    agent = Agent(settings, opened, model=model, sleep=lambda _s: None)
    agent.run_turn("u", "read it", workspace)
    (result,) = tool_results(agent.messages("u"))
    assert result.status == "error" and "outside the workspace" in str(result.content)
