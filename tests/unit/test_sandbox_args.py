"""The sandbox's command line: what stays read-only inside the writable workspace."""

from __future__ import annotations

import os
from pathlib import Path

from agentgraph.capabilities.tools.sandbox import protected_paths, sandbox_args


def test_the_git_folder_or_file_of_a_workspace_is_protected(tmp_path: Path) -> None:
    repo, worktree, plain, linked = (tmp_path / n for n in ("repo", "wt", "plain", "linked"))
    for folder in (repo, worktree, plain, linked):
        folder.mkdir()
    (repo / ".git").mkdir()
    (worktree / ".git").write_text("gitdir: /elsewhere/.git/worktrees/wt\n")
    os.symlink(repo / ".git", linked / ".git")
    assert protected_paths(str(repo)) == [str(repo / ".git")]
    assert protected_paths(str(worktree)) == [str(worktree / ".git")]
    assert protected_paths(str(plain)) == []
    # A bind would follow the link to its target; the link itself stays the workspace's.
    assert protected_paths(str(linked)) == []


def test_read_only_paths_are_bound_over_the_writable_workspace() -> None:
    args = sandbox_args("bwrap", "/ws", network=False, read_only=["/ws/.git"])
    workspace_bind = args.index("--bind")
    protect = args.index("--ro-bind", workspace_bind)
    assert args[workspace_bind : workspace_bind + 3] == ["--bind", "/ws", "/ws"]
    assert args[protect : protect + 3] == ["--ro-bind", "/ws/.git", "/ws/.git"]
    assert "/ws/.git" not in sandbox_args("bwrap", "/ws", network=False)
