"""The layering contracts of pyproject.toml hold, and they catch a front end that breaks them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint(project: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(project)},
    )


def test_the_contracts_are_kept() -> None:
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_a_front_end_importing_the_runtime_breaks_the_contract(tmp_path: Path) -> None:
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(
        ROOT / "agentgraph", tmp_path / "agentgraph", ignore=shutil.ignore_patterns("__pycache__")
    )
    (tmp_path / "agentgraph" / "frontends" / "shortcut.py").write_text(
        "from agentgraph.runtime.graph import build_graph\n", encoding="utf-8"
    )
    result = _lint(tmp_path)
    assert result.returncode != 0
    assert "agentgraph.frontends.shortcut -> agentgraph.runtime.graph" in result.stdout


def test_a_session_module_importing_a_front_end_breaks_the_contract(tmp_path: Path) -> None:
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(
        ROOT / "agentgraph", tmp_path / "agentgraph", ignore=shutil.ignore_patterns("__pycache__")
    )
    (tmp_path / "agentgraph" / "session" / "upward.py").write_text(
        "from agentgraph.frontends.cli.common import load_settings\n", encoding="utf-8"
    )
    result = _lint(tmp_path)
    assert result.returncode != 0
    assert "agentgraph.session.upward -> agentgraph.frontends.cli.common" in result.stdout
