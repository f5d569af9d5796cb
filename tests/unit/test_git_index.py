"""The submodule paths of a git index, read without running git, as git lists them."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentgraph.capabilities.tools.git_index import index_gitlinks

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

_BLOB = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"  # the empty blob (SHA-1)
_COMMIT = "a" * 40


def _git(cwd: Path, *args: str, stdin: str | None = None) -> str:
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=env, input=stdin, check=True, capture_output=True, text=True
    )
    return done.stdout


def _listed_by_git(repo: Path) -> set[str]:
    listed = _git(repo, "ls-files", "--stage", "-z").split("\0")
    return {e.split("\t", 1)[1] for e in listed if e.startswith("160000 ")}


def _repo(path: Path, *init: str) -> Path:
    path.mkdir(parents=True)
    _git(path, "init", "-q", *init)
    return path


def _entries(repo: Path, paths: dict[str, bool]) -> None:
    """Index entries: a submodule where the value is True, else an empty file."""
    lines = [
        f"160000 {_COMMIT}\t{p}" if link else f"100644 {_BLOB}\t{p}" for p, link in paths.items()
    ]
    _git(repo, "update-index", "--index-info", stdin="\n".join(lines) + "\n")


PATHS = {
    "a.txt": False,
    "libs/one": True,
    "libs/one-more.txt": False,
    "libs/two": True,
    "x" * 5000: False,  # a name longer than the entry's length field holds
    "z/deep/sub": True,
    "é/ünï": True,
}


@pytest.mark.parametrize("version", ["2", "3", "4"])
def test_every_index_version_lists_what_git_lists(tmp_path: Path, version: str) -> None:
    repo = _repo(tmp_path / "r")
    _entries(repo, PATHS)
    (repo / "new.txt").write_text("")
    _git(repo, "add", "-N", "new.txt")  # intent to add: an entry with extended flags
    _git(repo, "update-index", "--index-version", version)
    assert set(index_gitlinks(str(repo / ".git"))) == _listed_by_git(repo)
    assert _listed_by_git(repo) == {p for p, link in PATHS.items() if link}


def test_a_split_index_lists_its_shared_part_too(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "r")
    _entries(repo, PATHS)
    _git(repo, "update-index", "--split-index")
    _entries(repo, {"later/sub": True})
    assert list((repo / ".git").glob("sharedindex.*"))
    assert set(index_gitlinks(str(repo / ".git"))) == _listed_by_git(repo)


def test_a_sha256_repository_is_read_as_well(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "r", "--object-format=sha256")
    blob = _git(repo, "hash-object", "-w", "--stdin", stdin="").strip()
    lines = f"100644 {blob}\ta.txt\n160000 {'b' * 64}\tlibs/one\n"
    _git(repo, "update-index", "--index-info", stdin=lines)
    assert index_gitlinks(str(repo / ".git")) == ("libs/one",)


def test_what_is_no_index_lists_nothing_and_does_not_block(tmp_path: Path) -> None:
    gitdir = tmp_path / "g"
    gitdir.mkdir()
    assert index_gitlinks(str(gitdir)) == ()
    os.mkfifo(gitdir / "index")  # opened, it would block the reader
    assert index_gitlinks(str(gitdir)) == ()
    (gitdir / "index").unlink()
    (gitdir / "index").write_bytes(b"DIRC\0\0\0\2\0\0\0\5" + b"\xff" * 40)
    assert index_gitlinks(str(gitdir)) == ()


_NAME = st.text(st.sampled_from("ab/é-"), min_size=1, max_size=12).filter(
    lambda p: not p.startswith("/") and not p.endswith("/") and "//" not in p
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.dictionaries(_NAME, st.booleans(), min_size=1, max_size=12), st.sampled_from("234"))
def test_any_index_git_writes_lists_what_git_lists(
    tmp_path_factory: pytest.TempPathFactory, paths: dict[str, bool], version: str
) -> None:
    repo = _repo(tmp_path_factory.mktemp("prop") / "r")
    try:
        _entries(repo, paths)
    except subprocess.CalledProcessError:
        return  # a file and a folder of one name: git refuses the index, as it should
    _git(repo, "update-index", "--index-version", version)
    assert set(index_gitlinks(str(repo / ".git"))) == _listed_by_git(repo)


def _crafted(version: int, entries: bytes, count: int = 1) -> bytes:
    return b"DIRC" + struct.pack(">LL", version, count) + entries + b"\0" * 20


def _fixed(mode: int = 0o160000, flags: int = 0) -> bytes:
    """An entry up to its flags: stat data with ``mode``, a SHA-1 name, ``flags``."""
    return b"\0" * 24 + struct.pack(">L", mode) + b"\0" * 12 + b"\0" * 20 + struct.pack(">H", flags)


@pytest.mark.parametrize(
    "data",
    [
        _crafted(4, _fixed(flags=0x4000)),  # extended flags past the end
        _crafted(4, _fixed(flags=0x4000))[:-20],  # and no checksum: the file ends there
        _crafted(4, _fixed() + b"\xff" * 30),  # a varint running off the end
        _crafted(4, _fixed() + b"\xff" * 100_000 + b"\0"),  # a varint no 64 bits hold
        # a version 4 name growing entry by entry past any path: each entry strips nothing
        _crafted(4, (_fixed() + b"\0" + b"a" * 1000 + b"\0") * 100, 100),
        _crafted(2, _fixed(flags=3) + b"a\0b" + b"\0" * 7),  # a NUL inside a named length
        _crafted(2, _fixed(flags=0) + b"\0" * 2),  # a submodule of no name
    ],
    ids=[
        "ext-at-end",
        "ext-at-file-end",
        "varint-off-end",
        "varint-long",
        "v4-growing",
        "nul-name",
        "empty-name",
    ],
)
def test_an_index_no_git_wrote_lists_nothing(tmp_path: Path, data: bytes) -> None:
    """It stands in a repository a command made: every later command reads it."""
    (tmp_path / "index").write_bytes(data)
    assert index_gitlinks(str(tmp_path)) == ()
