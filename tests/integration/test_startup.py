"""Start-up stays light: what each entry point imports (no timing, only ``sys.modules``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.cli_helpers import cli_env

HEAVY_PREFIXES = ("langgraph", "langsmith", "langchain_core", "langchain_openai", "openai")
PROBE_TIMEOUT_S = 120


def _modules_after(code: str, home: Path, cwd: Path) -> tuple[list[str], str]:
    """Run ``code`` in a fresh interpreter; the loaded module names and its stdout."""
    probe = f"import json, sys\n{code}\nprint('\\nMODULES=' + json.dumps(sorted(sys.modules)))\n"
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=cwd,
        env=cli_env(home),
        capture_output=True,
        text=True,
        timeout=PROBE_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr
    out, _, modules = done.stdout.rpartition("\nMODULES=")
    return json.loads(modules), out


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if m.split(".")[0] in HEAVY_PREFIXES]


def test_importing_the_cli_and_building_its_parser_loads_no_langgraph(
    home: Path, workspace: Path
) -> None:
    modules, _ = _modules_after(
        "import agentgraph.frontends.cli\nagentgraph.frontends.cli.build_parser().format_help()",
        home,
        workspace,
    )
    assert _heavy(modules) == []
    assert "agentgraph.persistence.store" not in modules


def test_help_exits_before_loading_settings_or_langgraph(home: Path, workspace: Path) -> None:
    code = (
        "from agentgraph.frontends.cli import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit as exc:\n"
        "    assert exc.code == 0\n"
    )
    modules, out = _modules_after(code, home, workspace)
    assert "sessions" in out and "run" in out
    assert _heavy(modules) == []
    assert "pydantic" not in modules


def test_sessions_list_reads_the_index_without_the_checkpointer(
    home: Path, workspace: Path
) -> None:
    code = (
        "from agentgraph.frontends.cli import main\n"
        "assert main(['sessions', 'list', '--json']) == 0\n"
    )
    modules, out = _modules_after(code, home, workspace)
    assert json.loads(out.strip()) == []
    assert _heavy(modules) == []
    assert "agentgraph.persistence.saver" not in modules


def test_exact_counter_loads_only_the_compiled_tokenizer(home: Path, workspace: Path) -> None:
    # bpe_openai's package __init__ (bpe_openai.compat) builds every table it knows.
    code = (
        "from agentgraph.context.tokens import TokenCounter\n"
        "c = TokenCounter('gpt-4o')\n"
        "print(c.source, c.count_text('hello world'))\n"
    )
    modules, out = _modules_after(code, home, workspace)
    assert out.split() == ["exact", "2"]
    assert "bpe_openai._bindings" in modules
    assert "bpe_openai.compat" not in modules


def test_run_path_leaves_error_and_cjk_patterns_uncompiled(home: Path, workspace: Path) -> None:
    # Classifying a failed call and indexing CJK text compile their (costly) patterns
    # at first use: importing the run path compiles none of them.
    code = (
        "import agentgraph.frontends.cli.common, agentgraph.frontends.cli.run\n"
        "from agentgraph.providers import provider_errors\n"
        "from agentgraph.lazy_re import LazyPattern\n"
        "from agentgraph.capabilities.recall import search\n"
        "lazy = [v for m in (provider_errors, search) for v in vars(m).values()\n"
        "        if isinstance(v, LazyPattern)]\n"
        "print(len(lazy), sum(p._compiled is not None for p in lazy))\n"
    )
    _modules, out = _modules_after(code, home, workspace)
    patterns, compiled = (int(n) for n in out.split())
    assert patterns > 10
    assert compiled == 0
