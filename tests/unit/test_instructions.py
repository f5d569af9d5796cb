"""AGENTS.md / CLAUDE.md discovery, limits and once-per-session caching."""

from __future__ import annotations

from pathlib import Path

from agentgraph.runtime.instructions import (
    INSTRUCTIONS_MAX_BYTES,
    InstructionsCache,
    instruction_paths,
    instructions_section,
    load_instructions,
)


def make_repo(tmp_path: Path) -> tuple[Path, Path, Path]:
    home = tmp_path / "home"
    home.mkdir()
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    sub = repo / "pkg" / "mod"
    sub.mkdir(parents=True)
    return home, repo, sub


def test_home_then_root_then_nested_and_claude_md_only_without_agents_md(tmp_path: Path) -> None:
    home, repo, sub = make_repo(tmp_path)
    (home / "AGENTS.md").write_text("user rules")
    (repo / "AGENTS.md").write_text("root rules")
    (repo / "CLAUDE.md").write_text("ignored: AGENTS.md wins in the same folder")
    (repo / "pkg" / "CLAUDE.md").write_text("pkg rules")
    (sub / "AGENTS.md").write_text("module rules")
    (tmp_path / "AGENTS.md").write_text("outside the repository: never read")
    paths = instruction_paths(sub, home)
    assert paths == [
        home / "AGENTS.md",
        (repo / "AGENTS.md").resolve(),
        (repo / "pkg" / "CLAUDE.md").resolve(),
        (sub / "AGENTS.md").resolve(),
    ]
    section = instructions_section(load_instructions(sub, home), sub)
    assert section.index("user rules") < section.index("root rules") < section.index("module")
    assert "ignored" not in section and "never read" not in section


def test_no_repository_reads_only_the_workspace(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    ws = tmp_path / "a" / "b"
    ws.mkdir(parents=True)
    (tmp_path / "a" / "AGENTS.md").write_text("parent, not a repo root")
    (ws / "AGENTS.md").write_text("here")
    assert instruction_paths(ws, home) == [(ws / "AGENTS.md").resolve()]


def test_total_size_is_capped_and_bad_bytes_do_not_fail(tmp_path: Path) -> None:
    home, repo, _ = make_repo(tmp_path)
    (repo / "AGENTS.md").write_bytes(b"\xff\xfe" + b"x" * (INSTRUCTIONS_MAX_BYTES * 2))
    files = load_instructions(repo, home)
    assert len(files) == 1 and files[0].truncated
    assert len(files[0].text.encode()) <= INSTRUCTIONS_MAX_BYTES + 8
    assert "(truncated)" in instructions_section(files, repo)


def test_unreadable_file_is_skipped(tmp_path: Path) -> None:
    home, repo, _ = make_repo(tmp_path)
    (repo / "AGENTS.md").mkdir()  # a folder named like the file
    (repo / "CLAUDE.md").write_text("fallback")
    assert [f.text for f in load_instructions(repo, home)] == ["fallback"]


def test_cache_keeps_a_session_stable_until_forgotten(tmp_path: Path) -> None:
    home, repo, _ = make_repo(tmp_path)
    (repo / "AGENTS.md").write_text("version one")
    cache = InstructionsCache(home)
    first = cache.section(repo)
    (repo / "AGENTS.md").write_text("version two")
    assert cache.section(repo) == first  # same process: byte-stable
    assert "version two" in InstructionsCache(home).section(repo)  # next start reads again
    cache.forget(repo)
    assert "version two" in cache.section(repo)


def test_agent_puts_instructions_in_a_system_prompt_that_stays_byte_stable(
    tmp_path: Path,
) -> None:
    from langchain_core.messages import SystemMessage

    from agentgraph.config import Settings
    from agentgraph.persistence import open_store
    from agentgraph.session.agent import Agent
    from tests.fakes.chat_model import ScriptedChatModel
    from tests.fakes.scripts import ai_text, ai_tools

    home, repo, _ = make_repo(tmp_path)
    (repo / "AGENTS.md").write_text("Always run `make check` before answering.")
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        AGENTGRAPH_HOME=str(home),
        OPENAI_BASE_URL="http://127.0.0.1:9/v1",
        AGENTGRAPH_MODEL="gpt-4o-mini",
    )
    model = ScriptedChatModel(
        [
            ai_tools(("write_file", {"path": "AGENTS.md", "content": "changed"})),
            ai_text("ok"),
            ai_text("again"),
        ]
    )
    with open_store(settings) as store:
        agent = Agent(settings, store, model=model, sleep=lambda _s: None)
        agent.run_turn("t1", "hello", repo)
        agent.run_turn("t1", "and again", repo)
        report = agent.context_report("t1")
    systems = [str(call[0].content) for call in model.calls if isinstance(call[0], SystemMessage)]
    assert len(systems) == 3 and len(set(systems)) == 1  # the edit did not change the prompt
    assert "Always run `make check` before answering." in systems[0]
    assert report["by_category"]["instructions"] > 5
