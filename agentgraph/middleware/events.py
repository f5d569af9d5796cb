"""UI events from inside a graph run: the run's own sink, else LangGraph's ``custom`` stream.

:class:`agentgraph.session.agent.Agent` streams its graph without LangGraph's ``custom`` mode and
puts a sink into the run's config instead (:data:`EVENT_SINK_KEY`): with ``custom`` (or
``messages``) among the stream modes LangGraph runs every task in a pool thread, with a
second thread waiting on the stream, so that writes reach the consumer while a task
runs; the handoffs cost ~2 ms CPU per user turn (measured: 21.9 -> 20.0 ms median at
5,000 messages, six alternating pairs of ``bench/bench_storage.py --quick``). A sink is
called in the thread that emits, at once, so the agent runs each task inline and still
streams tokens live. Anyone else running the graph (the LangGraph server, a LangChain
agent using these middleware) gets the events on the ``custom`` stream as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langgraph.config import get_config, get_stream_writer

Emit = Callable[[dict[str, Any]], None]

# Key of the run's event sink in ``config["configurable"]`` (a callable; the leading
# underscores keep LangGraph from copying it into checkpoint metadata).
EVENT_SINK_KEY = "__agentgraph_event_sink"


def event_sink() -> Emit | None:
    """Where UI events of the current run go: its own sink, else LangGraph's writer.

    Returns:
        A callable taking one event, or None outside a graph run.
    """
    try:
        config = get_config()
    except RuntimeError:
        return None
    sink = (config.get("configurable") or {}).get(EVENT_SINK_KEY)
    if callable(sink):
        return sink  # type: ignore[no-any-return]
    try:
        return get_stream_writer()
    except (RuntimeError, KeyError):  # inside a runnable but not a graph run: no writer
        return None


def emit(event: dict[str, Any]) -> None:
    """Send a UI event to the current run's sink or ``custom`` stream (no-op outside a run)."""
    sink = event_sink()
    if sink is not None:
        sink(event)
