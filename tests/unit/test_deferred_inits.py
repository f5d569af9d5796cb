"""Deferred package ``__init__``: submodules import without it; the first name asked runs it."""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentgraph.cli.deferred_inits import defer_package_inits

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
        for name in [n for n in sys.modules if n == PKG or n.startswith(PKG + ".")]:
            del sys.modules[name]


def _runs(log: Path) -> list[str]:
    return log.read_text().split() if log.exists() else []


def test_a_submodule_imports_without_its_package_init(package: Path) -> None:
    assert defer_package_inits([PKG]) == [PKG]
    sub = importlib.import_module(f"{PKG}.sub")
    assert _runs(package) == []
    pkg = sys.modules[PKG]
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


def test_a_nested_package_is_deferred_without_running_its_parents(package: Path) -> None:
    assert defer_package_inits([PKG, f"{PKG}.inner"]) == [PKG, f"{PKG}.inner"]
    leaf = importlib.import_module(f"{PKG}.inner.leaf")
    assert leaf.LEAF == "leaf" and _runs(package) == []
    assert sys.modules[f"{PKG}.inner"].LEAF == "leaf"
    assert _runs(package) == ["inner"]


def test_imported_or_missing_packages_are_left_alone(package: Path) -> None:
    importlib.import_module(PKG)
    assert defer_package_inits([PKG, "agdefer_not_installed", f"{PKG}.sub"]) == []
    assert _runs(package) == ["init"]  # a plain module (not a package) is not deferred either


def test_threads_asking_at_once_run_the_init_once(package: Path) -> None:
    defer_package_inits([PKG])
    pkg = sys.modules[PKG]
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
    pkg = sys.modules[PKG]
    for _ in range(2):
        with pytest.raises(RuntimeError, match="broken package"):
            _ = pkg.VALUE
