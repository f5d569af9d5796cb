"""Persistence: the LangGraph checkpointer and the session index, in one store.

``Store`` and ``open_store`` are loaded on first use (PEP 562): importing the
light session index (``agentgraph.persistence.index``) for ``sessions list`` must
not pull in LangGraph and the checkpointer stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentgraph.persistence.index import SessionIndex, SessionInfo

if TYPE_CHECKING:
    from agentgraph.persistence.store import Store, open_store

__all__ = ["SessionIndex", "SessionInfo", "Store", "open_store"]


def __getattr__(name: str) -> Any:
    if name in ("Store", "open_store"):
        from agentgraph.persistence import store

        return getattr(store, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
