"""The repo's skills folder: its location is resolved once, its presence checked each time."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentgraph.capabilities import skills


def test_location_is_resolved_once() -> None:
    first = skills._repo_skills_candidate()
    assert skills._repo_skills_candidate() is first
    assert first == Path(__file__).resolve().parents[2] / "skills"


def test_presence_is_checked_on_every_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "skills"
    monkeypatch.setattr(skills, "_repo_skills_candidate", lambda: folder)
    assert skills.repo_skills_dir() is None
    folder.mkdir()
    assert skills.repo_skills_dir() == folder
    folder.rmdir()
    assert skills.repo_skills_dir() is None
