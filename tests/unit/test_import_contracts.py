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


def _lint_with(tmp_path: Path, module: str, source: str) -> subprocess.CompletedProcess[str]:
    """lint-imports over a copy of the package with ``source`` added to (the end of)
    ``module``."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(
        ROOT / "agentgraph", tmp_path / "agentgraph", ignore=shutil.ignore_patterns("__pycache__")
    )
    path = tmp_path / "agentgraph" / module
    before = path.read_text(encoding="utf-8") if path.exists() else ""
    path.write_text(before + source, encoding="utf-8")
    return _lint(tmp_path)


def test_a_front_end_importing_the_runtime_breaks_the_contract(tmp_path: Path) -> None:
    result = _lint_with(
        tmp_path, "frontends/shortcut.py", "from agentgraph.runtime.graph import build_graph\n"
    )
    assert result.returncode != 0
    assert "agentgraph.frontends.shortcut -> agentgraph.runtime.graph" in result.stdout


def test_a_session_module_importing_a_front_end_breaks_the_contract(tmp_path: Path) -> None:
    result = _lint_with(
        tmp_path, "session/upward.py", "from agentgraph.frontends.cli.common import load_settings\n"
    )
    assert result.returncode != 0
    assert "agentgraph.session.upward -> agentgraph.frontends.cli.common" in result.stdout


def test_the_tool_specs_importing_a_higher_layer_breaks_the_contract(tmp_path: Path) -> None:
    # Security, runtime and context read the specs: the specs may not read them back.
    result = _lint_with(
        tmp_path,
        "capabilities/tools/spec.py",
        "\nfrom agentgraph.security.approvals import needs_approval\n",
    )
    assert result.returncode != 0
    assert "agentgraph.capabilities.tools.spec -> agentgraph.security.approvals" in result.stdout
