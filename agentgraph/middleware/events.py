"""UI events from inside a graph run (LangGraph's ``custom`` stream)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langgraph.config import get_stream_writer

Emit = Callable[[dict[str, Any]], None]


def emit(event: dict[str, Any]) -> None:
    """Send a UI event on LangGraph's ``custom`` stream (no-op outside a run)."""
    try:
        writer = get_stream_writer()
    except RuntimeError:
        return
    writer(event)
