"""``memory_save`` / ``memory_search`` / ``memory_delete``: long-term memory tools.

They use the LangGraph store the run provides (``runtime.store``: the CLI's SQLite or
Postgres store, or the platform's under ``langgraph dev``), namespaced by the run's user
and workspace. See :mod:`agentgraph.capabilities.recall.memory`.
"""

from __future__ import annotations

from langchain_core.tools import BaseTool, tool
from langgraph.store.base import BaseStore

from agentgraph.capabilities.recall.memory import (
    MEMORY_SEARCH_LIMIT_DEFAULT,
    MemoryRefused,
    delete_memory,
    format_memory,
    namespace,
    save_memory,
    search_memories,
)
from agentgraph.capabilities.tools.base import ToolError
from agentgraph.config import Settings
from agentgraph.runtime.runctx import AgentToolRuntime, context_of
from agentgraph.security.redaction import Redactor

MEMORY_TOOLS = ("memory_save", "memory_search", "memory_delete")


def make_memory_tools(settings: Settings, redactor: Redactor) -> list[BaseTool]:
    """Build the three memory tools.

    Args:
        settings: Supplies the default user id.
        redactor: Removes secrets before a memory is stored (the tool outputs' one).

    Returns:
        memory_save, memory_search, memory_delete.
    """

    def scope(runtime: AgentToolRuntime) -> tuple[BaseStore, tuple[str, ...]]:
        store = runtime.store
        if store is None:
            raise ToolError("long-term memory is not available in this run (no store)")
        ctx = context_of(runtime)
        return store, namespace(ctx.user_id or settings.user_id, ctx.workspace_path)

    @tool("memory_save", parse_docstring=True)
    def memory_save(content: str, runtime: AgentToolRuntime) -> str:
        """Save a lasting fact (preference, convention, decision) for later sessions.

        Args:
            content: Self-contained, at most 2000 characters; never a secret.
        """
        store, ns = scope(runtime)
        try:
            memory, new = save_memory(store, ns, content, redactor=redactor)
        except MemoryRefused as exc:
            raise ToolError(str(exc)) from None
        verb = "saved" if new else "already saved"
        return f"{verb} memory {memory.id}"

    @tool("memory_search", parse_docstring=True)
    def memory_search(
        query: str, runtime: AgentToolRuntime, limit: int = MEMORY_SEARCH_LIMIT_DEFAULT
    ) -> str:
        """Search the memories saved in earlier sessions.

        Args:
            query: Words (substrings).
            limit: Most results (1-20).
        """
        store, ns = scope(runtime)
        try:
            found = search_memories(store, ns, query, limit)
        except MemoryRefused as exc:
            raise ToolError(str(exc)) from None
        if not found:
            return f"no memories match {query!r}"
        return "\n".join(format_memory(m) for m in found)

    @tool("memory_delete", parse_docstring=True)
    def memory_delete(id: str, runtime: AgentToolRuntime) -> str:
        """Delete a wrong or outdated memory.

        Args:
            id: The id shown in brackets.
        """
        store, ns = scope(runtime)
        try:
            memory = delete_memory(store, ns, id)
        except MemoryRefused as exc:
            raise ToolError(str(exc)) from None
        return f"deleted memory {memory.id}"

    return [memory_save, memory_search, memory_delete]
