"""Every use of a dependency's private name, in one module.

agentgraph relies on a few names its dependencies do not publish: the SQLite
checkpointer's delta-history SQL (our saver remembers rebuilt message lists, see
``persistence/saver.py``), LangGraph's "no stored value" sentinel, and bpe-openai's
compiled counter (the public wrapper caps input size), and the type of a
``DeltaChannel`` snapshot (the archive stores a reference in place of its list, see
``persistence/archive.py``), and ``ToolNode``'s per-call steps (``InlineToolNode``
runs a step's only call in the calling thread). Private names can change in
any release, so they are imported here and nowhere else, the dependencies are pinned
below their next minor version in ``pyproject.toml``, and
``tests/unit/test_private_api.py`` checks every name and the behaviour we rely on: an
upgrade that changes one fails that test by name instead of breaking a session.
"""

from __future__ import annotations

import contextvars
import importlib.machinery
import importlib.util
import os
import sys
from typing import Any

from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import get_config_list
from langgraph._internal._typing import MISSING
from langgraph.checkpoint.serde.types import _DeltaSnapshot as DeltaSnapshot
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite._delta import (
    DELTA_STAGE1_SQL,
    build_delta_channels_writes_history,
    build_delta_stage2_sql,
)
from langgraph.prebuilt import ToolNode, ToolRuntime
from langgraph.runtime import Runtime

__all__ = [
    "DELTA_STAGE1_SQL",
    "MISSING",
    "DeltaSnapshot",
    "InlineToolNode",
    "bpe_tokenizer",
    "build_delta_channels_writes_history",
    "build_delta_stage2_sql",
    "sqlite_has_task_path",
]


def sqlite_has_task_path(saver: SqliteSaver | Any) -> bool:
    """Whether the saver's ``writes`` table has the ``task_path`` column.

    ``SqliteSaver`` and ``AsyncSqliteSaver`` record this in a private attribute when
    they set up their tables (False only for a read-only database created by an old
    version).

    Args:
        saver: A set-up SQLite checkpointer (sync or async).

    Returns:
        The flag to pass to :func:`build_delta_stage2_sql`.
    """
    return bool(getattr(saver, "_has_task_path", True))


def bpe_tokenizer(encoding_name: str) -> Any:
    """bpe-openai's compiled tokenizer for ``encoding_name``.

    It has ``count(text)`` (the length without building a token list),
    ``count_till_limit(text, limit)`` (None past ``limit``, without counting the rest),
    ``encode`` and ``decode``, and none of the Python wrapper's input limits.
    Imported on first use: the tables are large and most CLI commands never count.

    Args:
        encoding_name: ``"o200k_base"`` or ``"cl100k_base"``.

    Returns:
        The binding's tokenizer object.

    Raises:
        ImportError: bpe-openai (or its compiled backend) is not installed.
    """
    return _bpe_bindings().tokenizer_for_encoding(encoding_name)


BPE_BINDINGS_MODULE = "bpe_openai._bindings"


def _bpe_bindings() -> Any:
    """bpe-openai's compiled module, loaded without running ``bpe_openai/__init__``.

    The package's ``__init__`` builds the special-token tables of every encoding it
    knows (o200k, cl100k and voyage: ~0.5 s of start-up); the compiled module builds
    only the table asked for, when asked. Falls back to the ordinary import.
    """
    known = sys.modules.get(BPE_BINDINGS_MODULE)
    if known is not None:
        return known
    try:
        package = importlib.util.find_spec("bpe_openai")
        folders = list(package.submodule_search_locations or []) if package else []
        for folder in folders:
            for suffix in importlib.machinery.EXTENSION_SUFFIXES:
                path = os.path.join(folder, "_bindings" + suffix)
                spec = importlib.util.spec_from_file_location(BPE_BINDINGS_MODULE, path)
                if not os.path.exists(path) or spec is None or spec.loader is None:
                    continue
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                sys.modules[BPE_BINDINGS_MODULE] = module
                return module
    except (ImportError, OSError):
        pass
    from bpe_openai import _bindings

    return _bindings


class InlineToolNode(ToolNode):
    """LangGraph's ``ToolNode``, running a step's only tool call in the calling thread.

    ``ToolNode`` runs every step's calls through a new thread pool, so a step with one
    call (most steps) starts a thread, copies the context into it and joins it. Here
    such a call runs inline, in a copy of the context as the pool would run it; steps
    with several calls still run them in parallel through ``ToolNode`` itself. Measured
    on the storage benchmark (16k window, two runs at a time on two cores): 2-4% less
    CPU over whole runs. ``tests/unit/test_private_api.py`` checks that both give the
    same results, errors, ``Command`` updates and runtimes.
    """

    def _func(self, input: Any, config: RunnableConfig, runtime: Runtime[Any]) -> Any:
        tool_calls, input_type = self._parse_input(input)
        if len(tool_calls) != 1:
            return super()._func(input, config, runtime)
        (call,) = tool_calls
        (call_config,) = get_config_list(config, 1)
        # As ToolNode._func builds each call's runtime.
        tool_runtime: Any = ToolRuntime(
            state=self._extract_state(input, call_config),
            tool_call_id=call["id"],
            config=call_config,
            context=runtime.context,
            store=runtime.store,
            stream_writer=runtime.stream_writer,
            tools=list(self.tools_by_name.values()),
            execution_info=runtime.execution_info,
            server_info=runtime.server_info,
        )
        output = contextvars.copy_context().run(self._run_one, call, input_type, tool_runtime)
        return self._combine_tool_outputs([output], input_type)
