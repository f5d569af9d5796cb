"""docs/architecture.md names every module of agentgraph, and its picture is current."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_architecture", ROOT / "docs" / "gen_architecture.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _module_map(doc: str) -> str:
    return doc.split("## Module map", 1)[1].split("\n## ", 1)[0]


def test_every_top_level_module_and_package_is_in_the_module_map() -> None:
    table = _module_map(DOC.read_text(encoding="utf-8"))
    names = _generator().package_names()
    missing = [n for n in names if f"`agentgraph/{n}`" not in table]
    assert "frontends/" in names and "capabilities/" in names
    assert not missing, f"add a row to the module map of docs/architecture.md for {missing}"


def test_each_top_level_name_has_one_row() -> None:
    table = _module_map(DOC.read_text(encoding="utf-8"))
    rows = [line for line in table.splitlines() if line.startswith("| `agentgraph/")]
    twice = [
        n
        for n in _generator().package_names()
        if sum(line.split("|")[1].count(f"`agentgraph/{n}`") for line in rows) > 1
    ]
    assert not twice, f"listed more than once in the module map: {twice}"


def test_the_system_picture_is_what_the_package_list_generates() -> None:
    doc = DOC.read_text(encoding="utf-8")
    assert doc == _generator().rewrite(doc), "run: python docs/gen_architecture.py"


def test_every_module_of_a_layer_package_is_named_in_the_module_map() -> None:
    table = _module_map(DOC.read_text(encoding="utf-8"))
    unnamed = []
    for name in _generator().package_names():
        if not name.endswith("/"):
            continue
        for child in sorted((ROOT / "agentgraph" / name).iterdir()):
            if child.name.startswith(("_", ".")) or child.name == "static":
                continue
            stem = child.stem if child.suffix == ".py" else child.name
            spelled = (f"{name}{child.name}", f"`{child.name}`", f"`{stem}`", f"`{stem}/`")
            is_module = child.suffix == ".py" or (child / "__init__.py").is_file()
            if is_module and not any(s in table for s in spelled):
                unnamed.append(f"{name}{child.name}")
    assert not unnamed, f"name these in the module map of docs/architecture.md: {unnamed}"
