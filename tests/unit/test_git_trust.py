"""The repository the agent's own git trusts: the one a workspace had when first seen."""

from __future__ import annotations

import os
from pathlib import Path

from agentgraph.security.git_trust import (
    git_dir,
    git_dir_unchanged,
    named_git_dir,
    remember_git_dir,
)


def test_the_git_dir_is_found_as_git_finds_it(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "src" / "pkg").mkdir(parents=True)
    assert git_dir(repo / "src" / "pkg") == os.path.realpath(repo / ".git")
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / ".git").write_text(f"gitdir: {repo}/.git/worktrees/tree\n")
    assert git_dir(tree) == os.path.realpath(repo / ".git" / "worktrees" / "tree")
    (tree / ".git").write_text("gitdir: ../repo/.git\n")  # relative to its folder
    assert git_dir(tree) == os.path.realpath(repo / ".git")
    (tree / ".git").write_text("not a pointer\n")
    assert git_dir(tree) is None
    (tree / ".git").write_text("gitdir: a\0b\n")  # no path at all
    assert git_dir(tree) is None and named_git_dir(tree / ".git") is None
    os.symlink(repo, tmp_path / "link")
    assert git_dir(tmp_path / "link" / "src") == os.path.realpath(repo / ".git")


def test_a_repository_made_or_repointed_after_the_first_sight_is_not_trusted(
    tmp_path: Path,
) -> None:
    plain, outer = tmp_path / "plain", tmp_path / "outer"
    (outer / ".git").mkdir(parents=True)
    inner = outer / "ws"
    for folder in (plain, inner):
        folder.mkdir()
        remember_git_dir(folder)
    assert git_dir_unchanged(inner)
    assert not git_dir_unchanged(plain)  # no repository at all
    (plain / ".git").mkdir()  # ``git init`` by a command
    (inner / ".git").mkdir()  # one shadowing the repository it sits in
    assert not git_dir_unchanged(plain) and not git_dir_unchanged(inner)
    late = tmp_path / "late"
    (late / ".git").mkdir(parents=True)
    assert git_dir_unchanged(late)  # first seen now: as it is now
