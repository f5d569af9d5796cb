"""Start-up stays light: commands do not import what they do not use (no timing asserts)."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentgraph.frontends.cli.deferred_inits import DEFERRED_PACKAGES
from tests.cli_helpers import server_env
from tests.fakes.openai_server import FakeOpenAIServer

ROOT = Path(__file__).resolve().parents[2]


def _python(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """A fresh interpreter running ``args``, which must succeed."""
    proc = subprocess.run(
        [sys.executable, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def _imported(args: list[str], tmp_path: Path) -> set[str]:
    """Modules a real ``python -X importtime`` subprocess imported (from its stderr)."""
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(tmp_path),
        "AGENTGRAPH_HOME": str(tmp_path / ".agentgraph"),
        "OPENAI_API_KEY": "sk-test-fake-key",
        "PYTHONPATH": str(ROOT),
    }
    proc = _python(["-X", "importtime", *args], env, tmp_path)
    return {
        line.rsplit("|", 1)[1].strip()
        for line in proc.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def test_help_imports_no_framework(tmp_path: Path) -> None:
    modules = _imported(["-m", "agentgraph", "--help"], tmp_path)
    assert "agentgraph.frontends.cli.parser" in modules
    assert not {"langgraph", "langchain_core", "pydantic", "openai"} & modules


def test_sessions_list_imports_no_graph_stack(tmp_path: Path) -> None:
    modules = _imported(["-m", "agentgraph", "sessions", "list"], tmp_path)
    assert "agentgraph.persistence.index" in modules
    assert not {"langgraph", "langchain_core", "openai", "psycopg"} & modules


def test_run_path_on_sqlite_does_not_import_postgres_or_spare_http_stacks(tmp_path: Path) -> None:
    # What `agentgraph run` imports before building the model: psycopg is for a
    # PostgreSQL store only; error classification must not pull in HTTP stacks.
    code = "import agentgraph.frontends.cli.common, agentgraph.frontends.cli.run"
    modules = _imported(["-c", code], tmp_path)
    assert "agentgraph.session.agent" in modules
    assert not {"psycopg", "httpcore", "prompt_toolkit"} & modules


def _init_statements(package: str) -> list[ast.stmt]:
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.origin is not None, package
    return ast.parse(Path(spec.origin).read_text(encoding="utf-8")).body


@pytest.mark.parametrize("package", DEFERRED_PACKAGES)
def test_a_deferred_package_init_only_imports_and_names(package: str) -> None:
    # Running such an __init__ later changes when its names exist, not what they are.
    for node in _init_statements(package):
        if isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the docstring
        assert isinstance(node, ast.Assign), f"{package}: {ast.unparse(node)[:200]}"
        assert all(
            isinstance(t, ast.Name) and t.id in {"__all__", "__version__"} for t in node.targets
        )
        assert all(
            isinstance(n, ast.Constant | ast.List | ast.Tuple | ast.expr_context)
            for n in ast.walk(node.value)
        )


@pytest.mark.parametrize("package", DEFERRED_PACKAGES)
def test_no_module_of_a_deferred_package_imports_from_the_package_itself(package: str) -> None:
    # Such an import would run the deferred __init__ while that module is half imported
    # (a circular import eager loading does not have) and, in another thread, wait on
    # the __init__ while holding that module's import lock.
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.submodule_search_locations is not None
    root = Path(next(iter(spec.submodule_search_locations)))
    offending = []
    for path in sorted(root.rglob("*.py")):
        if path == root / "__init__.py":
            continue
        parts = path.relative_to(root).with_suffix("").parts
        module = ".".join([package, *parts])
        if parts[-1] == "__init__":
            module = module.rpartition(".")[0]
            parts = parts[:-1]
        # the package a relative import of level n in this file starts from
        here = [package, *parts] if path.name == "__init__.py" else [package, *parts[:-1]]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = here[: len(here) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if target == package:
                offending.append(f"{module}:{node.lineno}: {ast.unparse(node)}")
    assert offending == []


NAMES_SCRIPT = """
import json, sys
from agentgraph.frontends.cli.deferred_inits import DEFERRED_PACKAGES, defer_package_inits
if sys.argv[1] == "deferred":
    defer_package_inits()
    import agentgraph.frontends.cli.run, agentgraph.session.agent, agentgraph.providers.model
    from langchain_openai.chat_models.base import ChatOpenAI
    import importlib
    for package in DEFERRED_PACKAGES:
        importlib.import_module(package)
out = {}
for package, names in json.loads(sys.argv[2]).items():
    module = sys.modules[package] if package in sys.modules else __import__(package, fromlist=["x"])
    for name in names:
        value = getattr(module, name)
        out[f"{package}.{name}"] = [
            getattr(value, "__module__", None), getattr(value, "__qualname__", None),
            getattr(value, "__name__", None), repr(value) if isinstance(value, str) else None,
        ]
print(json.dumps(out, sort_keys=True))
"""


def test_deferred_packages_give_the_same_names_as_imported_ones(tmp_path: Path) -> None:
    names: dict[str, list[str]] = {}
    for package in DEFERRED_PACKAGES:
        bound = names.setdefault(package, [])
        for node in _init_statements(package):
            if isinstance(node, ast.ImportFrom):
                bound += [alias.asname or alias.name for alias in node.names]
            elif isinstance(node, ast.Assign):
                bound += [t.id for t in node.targets if isinstance(t, ast.Name)]
        assert bound, package
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(tmp_path),
        "PYTHONPATH": str(ROOT),
    }
    seen = []
    for mode in ("deferred", "imported"):
        proc = _python(["-c", NAMES_SCRIPT, mode, json.dumps(names)], env, tmp_path)
        seen.append(json.loads(proc.stdout))
    assert seen[0] == seen[1]
    assert len(seen[0]) == sum(len(set(v)) for v in names.values())


UNRUN_SCRIPT = """
import json, sys
from agentgraph.frontends.cli import main
from agentgraph.frontends.cli.deferred_inits import DEFERRED_PACKAGES
code = main(["run", "say hi"])
unrun = [p for p in DEFERRED_PACKAGES if "__getattr__" in vars(sys.modules.get(p, sys))]
unbound = [  # read from the parent's namespace: a lookup could run the parent's __init__
    p for p in DEFERRED_PACKAGES
    if "." in p and vars(sys.modules[p.rpartition(".")[0]]).get(p.rpartition(".")[2])
    is not sys.modules[p]
]
print(json.dumps({"code": code, "unrun": unrun, "unbound": unbound}))
"""


def test_a_run_never_needs_the_deferred_package_inits(home: Path, workspace: Path) -> None:
    # What the deferral saves is real only while the command never asks these packages
    # for a name; a dependency or a change of ours that does shows up here by name.
    with FakeOpenAIServer([{"content": "hi"}]) as server:
        env = server_env(home, server.url, "sk-test-fake-key", PYTHONPATH=str(ROOT))
        proc = _python(["-c", UNRUN_SCRIPT], env, workspace)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result == {"code": 0, "unrun": list(DEFERRED_PACKAGES), "unbound": []}
