"""Run a few dependencies' package ``__init__`` only when a name is asked of the package.

Python runs a package's ``__init__`` before any of its submodules, and some of our
dependencies' ``__init__`` files import far more than the submodules we use:

* ``langgraph_sdk``: LangGraph imports only ``langgraph_sdk.auth.types``; the package's
  ``__init__`` imports the whole HTTP client with its websocket transport (and, through
  ``httpx``'s command line, ``click``);
* ``langchain_openai`` and ``langchain_openai.chat_models``: we use ``ChatOpenAI``
  (``agentgraph.providers.model`` imports it from ``langchain_openai.chat_models.base``); these
  ``__init__`` files also import the Azure models, the embeddings and the legacy
  completion model;
* ``langsmith.types``: LangSmith's run trees (imported by LangChain's tracers, traced or
  not) need a few of its types; its ``__init__`` imports all of LangSmith's API types;
* ``openai.types`` and ``openai.types.responses``: ``ChatOpenAI`` needs the chat types
  and a few Responses types; these ``__init__`` files import every type of every API.

:func:`defer_package_inits` puts a finder at the head of ``sys.meta_path`` that, for
these packages only, hands the import system the package's own spec with a loader that
does not run its ``__init__`` yet: the import system still imports the parents first,
binds the package on its parent, and lets its submodules import as usual (the module
has its ``__path__``); the first name looked up on the package itself (``from
langchain_openai import ChatOpenAI``, ``openai.types.Batch``, ``dir()``, ``__version__``)
runs the real ``__init__`` then, once, so every name is there when asked. The standard
library's ``importlib.util.LazyLoader`` does not do this: importing a submodule reads the
package's ``__path__``, which makes a lazy module load in full.

It is only safe for a package whose ``__init__`` does nothing but import and name things
(its effects are the names it binds, so running it later changes when, not what) and
whose submodules never import a name from the package itself (run later, the
``__init__`` would find them half imported, and a thread importing one would wait on the
other's lock): ``tests/integration/test_startup_imports.py`` checks both of each package
listed here, that the names they bind are the same deferred or not, and that
``agentgraph run`` never asks them for a name (else the saving is gone);
``tests/unit/test_deferred_inits.py`` checks the mechanism. A deferred ``__init__`` that
fails raises at the first name asked, not at the import. Only the command line defers
(:func:`agentgraph.frontends.cli.main`); importing agentgraph as a library changes nothing.

Measured: CPU to import the modules ``agentgraph run`` needs (``agentgraph.frontends.cli.run``,
``agentgraph.session.agent``, ``ChatOpenAI``), collector paused, 0.85 s -> 0.47 s.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
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
"""Packages whose ``__init__`` runs at the first name asked of them."""


def defer_package_inits(names: Sequence[str] = DEFERRED_PACKAGES) -> list[str]:
    """Have each package of ``names`` imported with its ``__init__`` not yet run.

    A package already imported is left alone; one not installed fails to import as
    before. Nothing is imported here.

    Args:
        names: Package names.

    Returns:
        The names that will be deferred when imported.
    """
    finder = next((f for f in sys.meta_path if isinstance(f, _DeferredInitFinder)), None)
    if finder is None:
        finder = _DeferredInitFinder()
        sys.meta_path.insert(0, finder)
    wanted = [name for name in names if name not in sys.modules]
    finder.names.update(wanted)
    return wanted


class _DeferredInitFinder(importlib.abc.MetaPathFinder):
    """Finds the listed packages as the other finders do, with a deferring loader."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.names:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is None:
                continue
            if spec.submodule_search_locations is None or spec.loader is None:
                return spec  # not a package of files: imported as usual
            self.names.discard(fullname)  # once: a reload runs the real __init__
            spec.loader = _DeferredInitLoader(spec.loader)
            return spec
        return None


class _DeferredInitLoader(importlib.abc.Loader):
    """Loads a package without its ``__init__``; the first name asked of it runs it."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self.loader = loader
        self.ran = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)  # resource readers, get_source, is_package ...

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        if self.ran:  # importlib.reload
            self.loader.exec_module(module)
            return
        lock = threading.RLock()  # other threads asking meanwhile wait for the __init__
        running = False

        def run_init() -> None:
            nonlocal running
            with lock:
                if self.ran:
                    return
                if running:  # the __init__ asking of its own package: not there yet
                    raise AttributeError(f"partially initialized module {module.__name__!r}")
                running = True
                try:
                    self.loader.exec_module(module)
                finally:
                    running = False
                self.ran = True
                for hook, ours in (("__getattr__", __getattr__), ("__dir__", __dir__)):
                    if vars(module).get(hook) is ours:  # unless the package defined its own
                        del vars(module)[hook]

        def __getattr__(attr: str) -> Any:
            run_init()
            return getattr(module, attr)

        def __dir__() -> list[str]:
            run_init()
            return sorted(vars(module))

        vars(module).update(__getattr__=__getattr__, __dir__=__dir__)
