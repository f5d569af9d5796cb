"""AGENTS.md / CLAUDE.md discovery, limits and once-per-session caching."""

from __future__ import annotations

from pathlib import Path

from agentgraph.instructions import (
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
    first = cache.section("t1", repo)
    (repo / "AGENTS.md").write_text("version two")
    assert cache.section("t1", repo) == first  # same session: byte-stable
    assert "version two" in cache.section("t2", repo)  # a new session reads it again
    cache.forget("t1")
    assert "version two" in cache.section("t1", repo)
