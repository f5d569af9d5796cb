"""Which folders and entries keep the ``.git`` entries inside a workspace as they are."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agentgraph.capabilities.tools import git_guard as git_guard_module
from agentgraph.capabilities.tools.git_guard import (
    NESTED_DEPTH_MAX,
    GitGuard,
    GitGuardRefused,
    GitGuardTooBig,
    git_guard,
    open_folders,
)

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

_COMMIT = "a" * 40


def _git(cwd: Path, *args: str) -> None:
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1"}
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)


def _repository(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    _git(path, "init", "-q")
    return path


def _link(top: Path, path: str) -> None:
    """A submodule entry in ``top``'s index, as ``git submodule add`` leaves one."""
    _git(top, "update-index", "--add", "--cacheinfo", f"160000,{_COMMIT},{path}")


def _checked_out(top: Path, path: str) -> Path:
    """A submodule at ``path`` whose ``.git`` file names a git dir under ``top/.git``."""
    _link(top, path)
    gitdir = _repository(top / ".git" / "modules" / path / "tree") / ".git"
    (top / path).mkdir(parents=True, exist_ok=True)
    (top / path / ".git").write_text(f"gitdir: {gitdir}\n")
    return gitdir


def test_no_repository_or_none_inside_one_needs_nothing(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert git_guard(plain) == GitGuard()
    repo = _repository(tmp_path / "repo")
    (repo / "a.txt").write_text("a\n")
    _git(repo, "add", "a.txt")
    assert git_guard(repo) == GitGuard()


def test_each_folder_down_to_a_submodule_is_pinned_and_its_git_entry_read_only(
    tmp_path: Path,
) -> None:
    top = _repository(tmp_path / "ws")
    _checked_out(top, "libs/one")
    _link(top, "raw")  # never checked out: git left an empty folder
    (top / "raw").mkdir()
    _link(top, "gone")  # its folder removed: nothing to bind
    guard = git_guard(top)
    assert guard.pinned == (str(top / "libs"), str(top / "libs" / "one"))
    assert guard.read_only == (str(top / "libs" / "one" / ".git"), str(top / "raw"))


def test_the_submodules_of_a_submodule_are_found_through_its_own_git_dir(tmp_path: Path) -> None:
    top = _repository(tmp_path / "ws")
    _link(top, "mid")
    mid = _repository(top / "mid")  # a .git folder of its own
    _link(mid, "deep/leaf")
    (mid / "deep" / "leaf").mkdir(parents=True)
    (mid / "deep" / "leaf" / ".git").write_text("gitdir: ../../.git/modules/leaf\n")
    guard = git_guard(top)
    assert guard.pinned == tuple(str(top / p) for p in ("mid", "mid/deep", "mid/deep/leaf"))
    assert guard.read_only == (str(mid / ".git"), str(mid / "deep" / "leaf" / ".git"))


def test_a_git_entry_naming_a_git_dir_already_listed_or_none_ends_the_walk(
    tmp_path: Path,
) -> None:
    top = _repository(tmp_path / "ws")
    _link(top, "loop")
    (top / "loop").mkdir()
    (top / "loop" / ".git").write_text(f"gitdir: {top / '.git'}\n")
    _link(top, "fifo")
    (top / "fifo").mkdir()
    os.mkfifo(top / "fifo" / ".git")  # not read: it would block
    assert git_guard(top).read_only == (
        str(top / "fifo" / ".git"),
        str(top / "loop" / ".git"),
    )


def test_a_folder_reached_through_a_link_or_outside_the_workspace_is_left_out(
    tmp_path: Path,
) -> None:
    top = _repository(tmp_path / "ws")
    _checked_out(top, "inside/one")
    _checked_out(top, "outside/two")
    _link(top, "linked/three")
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "three").mkdir(parents=True)
    (elsewhere / "three" / ".git").write_text("gitdir: /nowhere\n")
    os.symlink(elsewhere, top / "linked")  # git does not step through a link either
    guard = git_guard(top / "inside")  # the workspace: a folder of the repository
    assert guard.pinned == (str(top / "inside" / "one"),)
    assert guard.read_only == (str(top / "inside" / "one" / ".git"),)
    assert git_guard(top).read_only == (
        str(top / "inside" / "one" / ".git"),
        str(top / "outside" / "two" / ".git"),
    )


def test_a_submodule_the_user_adds_later_is_guarded_from_the_next_command_on(
    tmp_path: Path,
) -> None:
    top = _repository(tmp_path / "ws")
    _checked_out(top, "one")
    assert git_guard(top).read_only == (str(top / "one" / ".git"),)
    _checked_out(top, "two")  # the index changed: listed again
    assert git_guard(top).read_only == (str(top / "one" / ".git"), str(top / "two" / ".git"))


def test_no_git_is_run_to_list_a_submodule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Git run on a repository runs what its config names: the index is read as a file."""
    top = _repository(tmp_path / "ws")
    _link(top, "raw")
    (top / "raw").mkdir()
    programs = tmp_path / "programs"
    programs.mkdir()
    ran = tmp_path / "git-ran"
    (programs / "git").write_text(f"#!/bin/sh\ntouch {ran}\n")
    (programs / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{programs}{os.pathsep}{os.environ.get('PATH', '')}")
    assert git_guard(top).read_only == (str(top / "raw"),)
    assert not ran.exists()


def test_repositories_the_workspace_holds_are_guarded_as_deep_as_the_limit(tmp_path: Path) -> None:
    ws = tmp_path / "ws"  # no repository itself: a folder of clones
    clone = _repository(ws / "app")
    _link(clone, "sub")  # a clone's own submodules too
    (clone / "sub").mkdir()
    (ws / "tree").mkdir()
    (ws / "tree" / ".git").write_text("gitdir: /elsewhere/.git/worktrees/tree\n")
    deepest = ws.joinpath(*(f"d{i}" for i in range(1, NESTED_DEPTH_MAX + 1)))
    _repository(deepest)
    _repository(deepest / "past")  # one folder past the limit
    _repository(ws / "node_modules" / "pkg")  # a folder the scan does not enter either
    (ws / "linked").mkdir()
    os.symlink(clone / ".git", ws / "linked" / ".git")  # a bind would follow it
    guard = git_guard(ws)
    assert guard.read_only == (
        str(clone / ".git"),
        str(clone / "sub"),
        str(deepest / ".git"),
        str(ws / "tree" / ".git"),
    )
    chain = [
        ws.joinpath(*(f"d{i}" for i in range(1, n + 1))) for n in range(1, NESTED_DEPTH_MAX + 1)
    ]
    assert set(guard.pinned) == {str(p) for p in (clone, ws / "tree", *chain)}


def test_a_git_dir_a_git_file_names_in_the_workspace_is_guarded_with_its_common_dir(
    tmp_path: Path,
) -> None:
    """``git init --separate-git-dir`` and linked worktrees: git reads the config there."""
    ws = tmp_path / "ws"
    (ws / "store" / "tool.git").mkdir(parents=True)
    (ws / "store" / "tool.git" / "commondir").write_text("../common.git\n")
    (ws / "store" / "common.git").mkdir()
    (ws / "tool").mkdir()
    (ws / "tool" / ".git").write_text("gitdir: ../store/tool.git\n")
    (ws / "meta" / "own.git").mkdir(parents=True)
    (ws / ".git").write_text("gitdir: meta/own.git\n")  # the workspace's own, named inside it
    guard = git_guard(ws)
    assert guard.read_only == tuple(
        str(ws / p) for p in ("meta/own.git", "store/common.git", "store/tool.git", "tool/.git")
    )
    assert guard.pinned == (str(ws / "meta"), str(ws / "store"), str(ws / "tool"))


def test_what_was_guarded_stays_guarded_while_it_is_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command could make the folders too many to look through, or unlistable, before
    the next command's guard looked again."""
    ws = tmp_path / "ws"
    first = _repository(ws / "clones" / "a")
    _link(first, "sub")
    (first / "sub").mkdir()
    assert git_guard(ws).read_only == (str(first / ".git"), str(first / "sub"))
    monkeypatch.setattr(git_guard_module, "NESTED_FOLDERS_MAX", 1)  # a flood of folders
    assert git_guard(ws).read_only == (str(first / ".git"), str(first / "sub"))
    lstat = os.lstat

    def shut(path: Any) -> Any:  # ``chmod 600 clones``: nothing in it can be looked at
        if os.path.dirname(os.fspath(path)) == str(ws / "clones"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return lstat(path)

    monkeypatch.setattr(git_guard_module.os, "lstat", shut)
    guard = git_guard(ws)
    assert guard.read_only == (str(ws / "clones"),)  # bound whole
    assert guard.pinned == ()
    monkeypatch.setattr(git_guard_module.os, "lstat", lstat)
    _git(first / "sub", "init", "-q")  # the user checks the submodule out
    assert git_guard(ws).read_only == (str(first / ".git"), str(first / "sub" / ".git"))
    shutil.rmtree(ws / "clones")  # the user removes it: nothing to bind
    assert git_guard(ws) == GitGuard()


def test_more_binds_than_bwrap_takes_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = tmp_path / "ws"
    for name in ("a", "b"):
        _repository(ws / name)
    monkeypatch.setattr(git_guard_module, "GUARD_BINDS_MAX", 3)
    with pytest.raises(GitGuardTooBig, match="4 folders and git entries"):
        git_guard(ws)


def test_a_workspace_that_cannot_be_searched_for_a_while_keeps_what_was_guarded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``chmod 000 .`` by one command while another's guard looked would have emptied
    what the process remembered."""
    ws = tmp_path / "ws"
    clone = _repository(ws / "third" / "lib")
    assert git_guard(ws).read_only == (str(clone / ".git"),)
    lstat, scandir = os.lstat, os.scandir

    def shut(path: Any) -> Any:
        if os.path.dirname(os.fspath(path)) == str(ws):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return lstat(path)

    def unlisted(path: Any) -> Any:
        if os.fspath(path) == str(ws):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return scandir(path)

    monkeypatch.setattr(git_guard_module.os, "lstat", shut)
    monkeypatch.setattr(git_guard_module.os, "scandir", unlisted)
    # Refused: its mode may be back before the sandbox starts, with nothing bound.
    with pytest.raises(GitGuardRefused, match="cannot be searched"):
        git_guard(ws)
    monkeypatch.setattr(git_guard_module.os, "lstat", lstat)
    monkeypatch.setattr(git_guard_module, "NESTED_FOLDERS_MAX", 1)  # ``chmod 311 third``
    assert git_guard(ws).read_only == (str(clone / ".git"),)


def test_a_search_that_fails_keeps_what_was_guarded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    top = _repository(tmp_path / "ws")
    _checked_out(top, "one")
    assert git_guard(top).read_only == (str(top / "one" / ".git"),)

    def broken(gitdir: str) -> tuple[str, ...]:
        raise RuntimeError(f"an index no parser foresaw: {gitdir}")

    monkeypatch.setattr(git_guard_module, "index_gitlinks", broken)
    (top / ".git" / "index").touch()  # read again
    assert git_guard(top).read_only == (str(top / "one" / ".git"),)


def test_a_folder_is_opened_as_it_is_now_through_no_link(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "a" / "b").mkdir(parents=True)
    (ws / "c" / "d").mkdir(parents=True)
    (tmp_path / "outside" / "d").mkdir(parents=True)
    (ws / "c").rename(ws / "c-real")
    (ws / "c").symlink_to(tmp_path / "outside")  # swapped after the guard looked
    folders = [str(ws / p) for p in ("a", "c", "a/b", "c/d")]
    opened = open_folders(str(ws), folders)
    try:
        assert [path for _, path in opened] == [str(ws / "a"), str(ws / "a" / "b")]
        assert all(os.path.samefile(f"/proc/self/fd/{fd}", path) for fd, path in opened)
    finally:
        for fd, _ in opened:
            os.close(fd)


def test_a_folder_that_cannot_be_opened_now_refuses_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Left out, a folder a command made unsearchable for a moment could be moved."""
    ws = tmp_path / "ws"
    (ws / "a" / "b").mkdir(parents=True)
    opening = os.open

    def shut(path: Any, *args: Any, **kwargs: Any) -> int:
        if path == "b":
            raise PermissionError(13, "Permission denied", path)
        return opening(path, *args, **kwargs)

    monkeypatch.setattr(git_guard_module.os, "open", shut)
    with pytest.raises(GitGuardRefused, match="cannot be opened"):
        open_folders(str(ws), [str(ws / "a"), str(ws / "a" / "b")])


def test_more_folders_than_descriptors_left_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = tmp_path / "ws"
    _repository(ws / "a" / "b")
    monkeypatch.setattr(git_guard_module.resource, "getrlimit", lambda _: (257, 4096))
    with pytest.raises(GitGuardTooBig, match="2 folders to keep in place \\(at most 1 here\\)"):
        git_guard(ws)
