"""Run a few dependencies' package ``__init__`` only when a name is asked of the package.

Python runs a package's ``__init__`` before any of its submodules, and some of our
dependencies' ``__init__`` files import far more than the submodules we use:

* ``langgraph_sdk``: LangGraph imports only ``langgraph_sdk.auth.types``; the package's
  ``__init__`` imports the whole HTTP client with its websocket transport (and, through
  ``httpx``'s command line, ``click``);
* ``langchain_openai`` and ``langchain_openai.chat_models``: we use ``ChatOpenAI``
  (``agentgraph.model`` imports it from ``langchain_openai.chat_models.base``); these
  ``__init__`` files also import the Azure models, the embeddings and the legacy
  completion model;
* ``langsmith.types``: LangSmith's run trees (imported by LangChain's tracers, traced or
  not) need a few of its types; its ``__init__`` imports all of LangSmith's API types;
* ``openai.types`` and ``openai.types.responses``: ``ChatOpenAI`` needs the chat types
  and a few Responses types; these ``__init__`` files import every type of every API.

:func:`defer_package_inits` puts each of these packages into ``sys.modules`` before
anything imports it, as a module whose ``__init__`` has not run: its submodules import as
usual (the module has its ``__path__``), and the first name looked up on the package
itself (``from langchain_openai import ChatOpenAI``, ``openai.types.Batch``,
``__version__``) runs the real ``__init__`` then, once, so every name is there when asked.
The standard library's ``importlib.util.LazyLoader`` does not do this: importing a
submodule reads the package's ``__path__``, which makes a lazy module load in full.

It is only safe for a package whose ``__init__`` does nothing but import and name things
(its effects are the names it binds, so running it later changes when, not what):
``tests/integration/test_startup_imports.py`` checks that of each package listed here,
that the names they bind are the same objects deferred or not, and that ``agentgraph
run`` never asks them for a name (else the saving is gone);
``tests/unit/test_deferred_inits.py`` checks the mechanism. Only the command line defers
(:func:`agentgraph.cli.main`); importing agentgraph as a library changes nothing.

Measured: CPU to import the modules ``agentgraph run`` needs (``agentgraph.cli.run``,
``agentgraph.agent``, ``ChatOpenAI``), collector paused, 0.85 s -> 0.47 s.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any

DEFERRED_PACKAGES: tuple[str, ...] = (
    "langgraph_sdk",
    "langchain_openai",
    "langchain_openai.chat_models",
    "langsmith.types",
    "openai.types",
    "openai.types.responses",
)
"""Packages whose ``__init__`` runs at the first name asked of them (parents before children)."""


def defer_package_inits(names: Sequence[str] = DEFERRED_PACKAGES) -> list[str]:
    """Put each package of ``names`` into ``sys.modules`` with its ``__init__`` not yet run.

    A package already imported, or not installed, is left alone. Nothing is imported:
    a dotted name's parents are located, not run.

    Args:
        names: Package names, a parent before its children.

    Returns:
        The names deferred.
    """
    deferred = []
    for name in names:
        if name in sys.modules:
            continue
        spec = _package_spec(name)
        if spec is None:
            continue
        sys.modules[name] = _deferred_module(spec)
        deferred.append(name)
    return deferred


def _package_spec(name: str) -> importlib.machinery.ModuleSpec | None:
    """The spec of package ``name``, found without running any parent's ``__init__``."""
    top, *parts = name.split(".")
    spec = importlib.util.find_spec(top) if top not in sys.modules else sys.modules[top].__spec__
    for part in parts:
        if spec is None or spec.submodule_search_locations is None:
            return None
        parent = spec.name
        spec = importlib.machinery.PathFinder.find_spec(
            f"{parent}.{part}", list(spec.submodule_search_locations)
        )
    if spec is None or spec.submodule_search_locations is None or spec.loader is None:
        return None  # not a package of files: nothing to defer
    return spec


def _deferred_module(spec: importlib.machinery.ModuleSpec) -> ModuleType:
    """A module for package ``spec`` that runs its ``__init__`` at its first missing name.

    Other threads asking meanwhile wait for it to finish (a lock per package); names the
    ``__init__`` itself asks of its own package while it runs are missing, as in any
    partly imported module.
    """
    module = importlib.util.module_from_spec(spec)
    loader = spec.loader
    assert loader is not None  # _package_spec returns loadable specs only
    lock = threading.RLock()
    running = False

    def __getattr__(attr: str) -> Any:
        nonlocal running
        with lock:
            if vars(module).get("__getattr__") is __getattr__:
                if running:  # the __init__ asking of itself: not there yet
                    raise AttributeError(
                        f"partially initialized module {spec.name!r} has no attribute {attr!r}"
                    )
                running = True
                try:
                    loader.exec_module(module)
                finally:
                    running = False
                if vars(module).get("__getattr__") is __getattr__:
                    del module.__getattr__  # unless the package defined its own
        return getattr(module, attr)

    module.__getattr__ = __getattr__  # type: ignore[method-assign]  # PEP 562's hook
    return module
