"""The sandbox's command line: what stays read-only inside the writable workspace, and
how a command that failed on it is told."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from agentgraph.capabilities.tools import bash as bash_tool
from agentgraph.capabilities.tools.base import ToolError
from agentgraph.capabilities.tools.bash import BashResult, git_read_only
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
    # A folder bound onto itself from its descriptor (so it cannot be moved) comes before
    # what it holds that stays read-only: bound after, it would cover it.
    pinned = sandbox_args(
        "bwrap", "/ws", network=False, pinned=[(7, "/ws/l")], read_only=["/ws/l/.git"]
    )
    bind = pinned.index("--bind-fd")
    assert pinned[bind : bind + 3] == ["--bind-fd", "7", "/ws/l"]
    assert bind < pinned.index("/ws/l/.git")


def _ended(output: str, exit_code: int) -> BashResult:
    return BashResult(output, exit_code, False, 5.0, 0)


def test_a_failed_write_under_git_is_told_whichever_way_it_is_worded() -> None:
    git = "fatal: Unable to create '/ws/.git/index.lock': Read-only file system\n"
    python = "OSError: [Errno 30] Read-only file system: '.git/config'\n"
    assert git_read_only("git add a.py", _ended(git, 128))
    assert git_read_only("pre-commit install", _ended(python, 1))
    assert git_read_only("git stash", _ended("", 1))  # git says nothing there
    assert git_read_only("git stash -u && make", _ended("", 1))
    notes = "error: unable to create temporary file: Read-only file system\n"
    assert git_read_only("cd src && git notes add -m x", _ended(notes, 1))


def test_other_read_only_errors_and_git_failures_are_not_the_git_folder_s() -> None:
    for line in (
        "cp: cannot create regular file '/usr/share/repo.git/x': Read-only file system",
        "touch: cannot touch '/home/u/.git-credentials': Read-only file system",
        "fatal: Unable to create '/ws/.git/index.lock': File exists.",
    ):
        assert not git_read_only("make", _ended(line + "\n", 1)), line
    assert not git_read_only("git stash", _ended("", 0))
    assert not git_read_only("git stash pop", _ended("CONFLICT (content): a.py\n", 1))
    assert not git_read_only("digit stash", _ended("", 1))
    # Stash commands that only read, failing as a pipeline's last command decides.
    assert not git_read_only("git stash list | grep -q wip", _ended("", 1))
    assert not git_read_only("git stash show -p | grep TODO", _ended("", 1))


@pytest.mark.parametrize("bind_fd", [True, False])
def test_a_launch_binds_the_folders_it_opened_and_hands_them_over_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bind_fd: bool
) -> None:
    """``--bind-fd`` where bwrap has it (0.10, or a backport), else by path."""
    ws = Path(os.path.realpath(tmp_path)) / "ws"
    (ws / "clone" / ".git").mkdir(parents=True)
    monkeypatch.setattr(bash_tool, "bind_fd_supported", lambda _: bind_fd)
    launch = bash_tool.sandbox_launch("bwrap", str(ws), network=False, git=True)
    clone = str(ws / "clone")
    taken: list[int] = []
    try:
        assert launch.git and launch.pinned
        assert ("--bind-fd" in launch.args) is bind_fd
        bind = launch.args.index("--bind-fd" if bind_fd else clone) - (0 if bind_fd else 1)
        assert launch.args[bind + 2] == clone
        assert len(launch.fds) == (1 if bind_fd else 0)
        taken += launch.take_fds()
        assert launch.take_fds() == []  # once: a second close could hit a reused number
    finally:
        launch.close()
        for fd in taken:
            os.close(fd)


def test_a_workspace_that_cannot_be_searched_now_refuses_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command beside this one may change its mode, and back before this one starts:
    with nothing found, nothing would have been bound."""
    ws = Path(os.path.realpath(tmp_path)) / "ws"
    (ws / ".git").mkdir(parents=True)
    lstat = os.lstat

    def shut(path: Any) -> Any:
        if os.path.dirname(os.fspath(path)) == str(ws):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return lstat(path)

    monkeypatch.setattr(os, "lstat", shut)
    with pytest.raises(ToolError, match="cannot keep the workspace's git repositories safe"):
        bash_tool.sandbox_launch("bwrap", str(ws), network=False, git=True)
    launch = bash_tool.sandbox_launch("bwrap", str(ws), network=False, git=False)
    assert not launch.git  # the user's AGENTGRAPH_BASH_GIT_WRITE=on: nothing to keep
