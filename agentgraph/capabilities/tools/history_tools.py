"""``search_history`` / ``read_history``: the model's way back to anything it no longer sees.

Compaction summaries and elided tool outputs leave the prompt, never the stored
transcript; these tools search it (ranked snippets with ``msg:N`` references) and show
one message in full. See :mod:`agentgraph.capabilities.recall.search`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_core.tools import BaseTool, tool

from agentgraph.capabilities.recall.search import (
    READ_HISTORY_TOOL,
    SEARCH_HISTORY_TOOL,
    SEARCH_LIMIT_DEFAULT,
    HistoryIndex,
    SearchError,
    format_results,
    read_message,
    search_transcript,
)
from agentgraph.capabilities.tools.base import ToolError
from agentgraph.runtime.runctx import AgentToolRuntime, RunContext


def thread_id_of(runtime: AgentToolRuntime) -> str:
    """The session a tool call runs in (the run config's ``thread_id``)."""
    configurable = (runtime.config or {}).get("configurable") or {}
    thread_id = configurable.get("thread_id")
    if not thread_id and isinstance(runtime.state, dict):
        thread_id = runtime.state.get("thread_id")
    return str(thread_id or "")


def _artifacts(runtime: AgentToolRuntime) -> str | None:
    """The run's artifacts folder (whole copies of the outputs the tools node cut), or
    None: a run without agentgraph's context (the tools in another graph) has none."""
    ctx = getattr(runtime, "context", None)
    return (ctx.artifacts_dir or None) if isinstance(ctx, RunContext) else None


def _messages(runtime: AgentToolRuntime) -> list[Any]:
    state = runtime.state
    return list((state.get("messages") if isinstance(state, dict) else None) or [])


def make_history_tools(index: Callable[[], HistoryIndex | None]) -> list[BaseTool]:
    """Build ``search_history`` and ``read_history``.

    Args:
        index: Returns the store's transcript index (None: search in memory).

    Returns:
        The two tools.
    """

    @tool(SEARCH_HISTORY_TOOL, parse_docstring=True)
    def search_history(
        query: str, runtime: AgentToolRuntime, limit: int = SEARCH_LIMIT_DEFAULT
    ) -> str:
        """Search this session's whole transcript, masked and summarized parts too.

        Returns references like msg:42 with snippets (read_history shows one).

        Args:
            query: Words (substrings) or a "quoted phrase".
            limit: Most results (1-20).
        """
        try:
            result = search_transcript(
                index(),
                thread_id_of(runtime),
                _messages(runtime),
                query,
                limit,
                _artifacts(runtime),
            )
        except SearchError as exc:
            raise ToolError(str(exc)) from None
        return format_results(result)

    @tool(READ_HISTORY_TOOL, parse_docstring=True)
    def read_history(ref: str, runtime: AgentToolRuntime) -> str:
        """Show an earlier message of this session in full.

        Args:
            ref: A search_history reference like msg:42, or a masked output's call id.
        """
        try:
            return read_message(_messages(runtime), ref, _artifacts(runtime))
        except SearchError as exc:
            raise ToolError(str(exc)) from None

    return [search_history, read_history]
