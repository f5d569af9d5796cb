"""Every use of a dependency's private name, in one module.

agentgraph relies on a few names its dependencies do not publish: the SQLite
checkpointer's delta-history SQL (our saver remembers rebuilt message lists, see
``persistence/saver.py``), LangGraph's "no stored value" sentinel, and bpe-openai's
compiled counter (the public wrapper caps input size). Private names can change in
any release, so they are imported here and nowhere else, the dependencies are pinned
below their next minor version in ``pyproject.toml``, and
``tests/test_private_api.py`` checks every name and the behaviour we rely on: an
upgrade that changes one fails that test by name instead of breaking a session.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langgraph._internal._typing import MISSING
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite._delta import (
    DELTA_STAGE1_SQL,
    build_delta_channels_writes_history,
    build_delta_stage2_sql,
)

__all__ = [
    "DELTA_STAGE1_SQL",
    "MISSING",
    "bpe_exact_counter",
    "build_delta_channels_writes_history",
    "build_delta_stage2_sql",
    "sqlite_has_task_path",
]


def sqlite_has_task_path(saver: SqliteSaver) -> bool:
    """Whether the saver's ``writes`` table has the ``task_path`` column.

    ``SqliteSaver`` records this in a private attribute when it sets up its tables
    (False only for a read-only database created by an old version).

    Args:
        saver: A set-up SQLite checkpointer.

    Returns:
        The flag to pass to :func:`build_delta_stage2_sql`.
    """
    return bool(getattr(saver, "_has_task_path", True))


def bpe_exact_counter(encoding_name: str) -> Callable[[str], int]:
    """bpe-openai's compiled token counter for ``encoding_name``.

    Its ``count()`` returns the length without building a token list and has none
    of the Python wrapper's input limits. Imported on first use: the tables are
    large and most CLI commands never count.

    Args:
        encoding_name: ``"o200k_base"`` or ``"cl100k_base"``.

    Returns:
        A function from text to its token count.

    Raises:
        ImportError: bpe-openai (or its compiled backend) is not installed.
    """
    from bpe_openai import _bindings

    tokenizer: Any = _bindings.tokenizer_for_encoding(encoding_name)
    count: Callable[[str], int] = tokenizer.count
    return count
