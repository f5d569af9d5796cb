"""Deferred package ``__init__``: submodules import without it; the first name asked runs it."""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentgraph.frontends.cli.deferred_inits import _DeferredInitFinder, defer_package_inits

PKG = "agdefer_pkg"


@pytest.fixture
def package(tmp_path: Path) -> Iterator[Path]:
    """A package whose ``__init__`` logs each run to ``runs.log`` and re-exports a submodule."""
    root = tmp_path / PKG
    (root / "inner").mkdir(parents=True)
    log = tmp_path / "runs.log"
    (root / "__init__.py").write_text(
        f"open({str(log)!r}, 'a').write('init\\n')\n"
        "from agdefer_pkg.sub import VALUE\n"
        "from agdefer_pkg.sub import VALUE as ALIAS\n"
        "__version__ = '1.0'\n"
    )
    (root / "sub.py").write_text("VALUE = object()\n")
    (root / "inner" / "__init__.py").write_text(
        f"open({str(log)!r}, 'a').write('inner\\n')\nfrom agdefer_pkg.inner.leaf import LEAF\n"
    )
    (root / "inner" / "leaf.py").write_text("LEAF = 'leaf'\n")
    sys.path.insert(0, str(tmp_path))
    try:
        yield log
    finally:
        sys.path.remove(str(tmp_path))
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _DeferredInitFinder)]
        importlib.invalidate_caches()
        for name in [n for n in sys.modules if n == PKG or n.startswith(PKG + ".")]:
            del sys.modules[name]


def _runs(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


def test_a_submodule_imports_without_its_package_init(package: Path) -> None:
    assert defer_package_inits([PKG]) == [PKG]
    sub = importlib.import_module(f"{PKG}.sub")
    assert _runs(package) == []
    pkg = sys.modules[PKG]
    assert f"{PKG}.sub" in sys.modules and pkg.sub is sub
    assert pkg.VALUE is sub.VALUE  # the first name asked runs __init__ ...
    assert pkg.ALIAS is sub.VALUE and pkg.__version__ == "1.0"
    assert _runs(package) == ["init"]  # ... once
    with pytest.raises(AttributeError):
        _ = pkg.missing


def test_from_import_of_a_deferred_package_gets_its_names(package: Path) -> None:
    defer_package_inits([PKG])
    from agdefer_pkg import VALUE  # type: ignore[import-not-found]
    from agdefer_pkg.sub import VALUE as direct  # type: ignore[import-not-found]

    assert VALUE is direct
    assert _runs(package) == ["init"]


def test_a_nested_package_is_deferred_and_bound_on_its_parent(package: Path) -> None:
    assert defer_package_inits([PKG, f"{PKG}.inner"]) == [PKG, f"{PKG}.inner"]
    leaf = importlib.import_module(f"{PKG}.inner.leaf")
    assert leaf.LEAF == "leaf" and _runs(package) == []
    pkg = sys.modules[PKG]
    assert pkg.inner is sys.modules[f"{PKG}.inner"]  # bound as the import system binds it
    assert _runs(package) == []
    assert pkg.inner.LEAF == "leaf"
    assert _runs(package) == ["inner"]


def test_the_parents_of_a_deferred_package_are_imported_as_usual(package: Path) -> None:
    defer_package_inits([f"{PKG}.inner"])
    importlib.import_module(f"{PKG}.inner.leaf")
    assert _runs(package) == ["init"]  # the parent's __init__ ran, the deferred one not yet


def test_dir_and_reload_run_the_init(package: Path) -> None:
    defer_package_inits([PKG])
    pkg = importlib.import_module(PKG)
    assert {"VALUE", "ALIAS", "__version__"} <= set(dir(pkg))
    assert _runs(package) == ["init"]
    importlib.reload(pkg)
    assert _runs(package) == ["init", "init"] and pkg.__version__ == "1.0"


def test_imported_or_missing_packages_import_as_before(package: Path) -> None:
    importlib.import_module(PKG)
    assert defer_package_inits([PKG, "agdefer_not_installed"]) == ["agdefer_not_installed"]
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("agdefer_not_installed")
    assert _runs(package) == ["init"]


def test_a_plain_module_is_not_deferred(package: Path) -> None:
    defer_package_inits([f"{PKG}.sub"])
    sub = importlib.import_module(f"{PKG}.sub")
    assert "VALUE" in vars(sub)  # a module (no __path__) has nothing to defer: its body ran


def test_threads_asking_at_once_run_the_init_once(package: Path) -> None:
    defer_package_inits([PKG])
    pkg = importlib.import_module(PKG)
    start = threading.Barrier(8)
    seen: list[object] = []

    def ask() -> None:
        start.wait()
        seen.append(pkg.VALUE)

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seen) == 8 and len({id(value) for value in seen}) == 1
    assert _runs(package) == ["init"]


def test_an_init_that_fails_fails_again_when_asked_again(package: Path) -> None:
    (package.parent / PKG / "__init__.py").write_text("raise RuntimeError('broken package')\n")
    defer_package_inits([PKG])
    pkg = importlib.import_module(PKG)  # the import itself succeeds: nothing has run
    for _ in range(2):
        with pytest.raises(RuntimeError, match="broken package"):
            _ = pkg.VALUE
