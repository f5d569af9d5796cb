"""Start-up stays light: commands do not import what they do not use (no timing asserts)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _imported(args: list[str], tmp_path: Path) -> set[str]:
    """Modules a real ``python -X importtime`` subprocess imported (from its stderr)."""
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(tmp_path),
        "AGENTGRAPH_HOME": str(tmp_path / ".agentgraph"),
        "OPENAI_API_KEY": "sk-test-fake-key",
        "PYTHONPATH": str(ROOT),
    }
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {
        line.rsplit("|", 1)[1].strip()
        for line in proc.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def test_help_imports_no_framework(tmp_path: Path) -> None:
    modules = _imported(["-m", "agentgraph", "--help"], tmp_path)
    assert "agentgraph.cli.parser" in modules
    assert not {"langgraph", "langchain_core", "pydantic", "openai"} & modules


def test_sessions_list_imports_no_graph_stack(tmp_path: Path) -> None:
    modules = _imported(["-m", "agentgraph", "sessions", "list"], tmp_path)
    assert "agentgraph.persistence.index" in modules
    assert not {"langgraph", "langchain_core", "openai", "psycopg"} & modules


def test_run_path_on_sqlite_does_not_import_postgres_or_spare_http_stacks(tmp_path: Path) -> None:
    # What `agentgraph run` imports before building the model: psycopg is for a
    # PostgreSQL store only; error classification must not pull in HTTP stacks.
    code = "import agentgraph.cli.common, agentgraph.cli.run"
    modules = _imported(["-c", code], tmp_path)
    assert "agentgraph.agent" in modules
    assert not {"psycopg", "httpcore", "prompt_toolkit"} & modules
