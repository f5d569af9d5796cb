"""Long-term memory across sessions, in a LangGraph ``BaseStore``.

Memories are short notes the model saves (``memory_save``) and finds again
(``memory_search``) in later sessions; the user lists and forgets them (``/memory``).
They live in a LangGraph store, namespaced by user and workspace:
``("memories", <user_id>, <workspace key>)``. The store is

* SQLite (``langgraph.store.sqlite.SqliteStore``) in ``AGENTGRAPH_HOME/memory.db`` by
  default;
* Postgres (``langgraph.store.postgres.PostgresStore``) with ``AGENTGRAPH_DATABASE_URL``;
* the platform's store under ``langgraph dev`` / LangGraph Platform (the tools use
  whatever store the runtime hands them).

At the first turn of a session the workspace's memories are rendered once into a system
prompt section kept in the session state (``memory_prompt``), so the prompt prefix stays
byte-stable for the whole session: memories saved meanwhile are in the transcript and
found by ``memory_search``, and show in the prompt of the next session.

Secrets are redacted before a memory is stored (:mod:`agentgraph.redaction`, as tool
outputs); oversized memories are refused.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from langgraph.store.base import BaseStore

from agentgraph.recall.search import SearchError, query_terms
from agentgraph.redaction import Redactor

MEMORY_NAMESPACE_ROOT = "memories"
MEMORY_MAX_CHARS = 2_000
# Memories kept per user and workspace; saving more is refused (delete some first).
MEMORY_MAX_ITEMS = 200
MEMORY_SEARCH_LIMIT_DEFAULT = 5
MEMORY_SEARCH_LIMIT_MAX = 20
# The system prompt lists at most this many memories (newest first) in this many chars.
MEMORY_PROMPT_MAX_ITEMS = 30
MEMORY_PROMPT_MAX_CHARS = 6_000
MEMORY_ID_HEX_CHARS = 10
WORKSPACE_KEY_HEX_CHARS = 16


class MemoryRefused(ValueError):
    """A memory operation that cannot be done; the message says why (one line)."""


@dataclass(frozen=True)
class Memory:
    """One stored memory."""

    id: str
    content: str
    created_at: float


def _label(value: str) -> str:
    """A namespace label for any string (LangGraph labels may not contain ``.``)."""
    return quote(value or "default", safe="").replace(".", "%2E") or "default"


def workspace_key(workspace: str) -> str:
    """A short stable key for a workspace path (paths contain ``.`` and ``/``)."""
    return hashlib.sha256(workspace.encode("utf-8")).hexdigest()[:WORKSPACE_KEY_HEX_CHARS]


def namespace(user_id: str, workspace: str) -> tuple[str, ...]:
    """The store namespace of one user's memories about one workspace."""
    return (MEMORY_NAMESPACE_ROOT, _label(user_id), workspace_key(workspace))


def list_memories(store: BaseStore, ns: tuple[str, ...]) -> list[Memory]:
    """All memories of a namespace, oldest first."""
    items = store.search(ns, limit=MEMORY_MAX_ITEMS + 1)
    memories = [
        Memory(
            id=item.key,
            content=str(item.value.get("content", "")),
            created_at=float(item.value.get("created_at") or 0.0),
        )
        for item in items
        if item.namespace == ns
    ]
    return sorted(memories, key=lambda m: (m.created_at, m.id))


def save_memory(
    store: BaseStore,
    ns: tuple[str, ...],
    content: str,
    *,
    redactor: Redactor | None = None,
    extra: dict[str, Any] | None = None,
) -> tuple[Memory, bool]:
    """Store a memory (secrets redacted); an identical one is not stored twice.

    Returns:
        The memory and whether it was new.

    Raises:
        MemoryRefused: empty, over ``MEMORY_MAX_CHARS``, or the namespace is full.
    """
    text = str(content or "").replace("\0", "").strip()
    if not text:
        raise MemoryRefused("the memory is empty: say what to remember")
    if len(text) > MEMORY_MAX_CHARS:
        raise MemoryRefused(
            f"the memory is {len(text)} characters; the limit is {MEMORY_MAX_CHARS} "
            "(MEMORY_MAX_CHARS): save the essential fact, or save several shorter memories"
        )
    # The same redaction as tool outputs: known secret values, known token formats.
    text = (redactor or Redactor()).redact(text)
    existing = list_memories(store, ns)
    for memory in existing:
        if memory.content == text:
            return memory, False
    if len(existing) >= MEMORY_MAX_ITEMS:
        raise MemoryRefused(
            f"{len(existing)} memories are stored for this workspace, the limit "
            f"(MEMORY_MAX_ITEMS); delete outdated ones with memory_delete first"
        )
    taken = {m.id for m in existing}
    memory_id = uuid.uuid4().hex[:MEMORY_ID_HEX_CHARS]
    while memory_id in taken:  # pragma: no cover - 40 random bits
        memory_id = uuid.uuid4().hex[:MEMORY_ID_HEX_CHARS]
    memory = Memory(id=memory_id, content=text, created_at=time.time())
    store.put(ns, memory.id, {"content": text, "created_at": memory.created_at, **(extra or {})})
    return memory, True


def delete_memory(store: BaseStore, ns: tuple[str, ...], memory_id: str) -> Memory:
    """Delete one memory by id.

    Raises:
        MemoryRefused: no memory with that id in this namespace.
    """
    key = str(memory_id or "").strip()
    item = store.get(ns, key) if key and "\0" not in key else None
    if item is None:
        raise MemoryRefused(
            f"no memory {key[:40]!r} for this workspace; memory_search or /memory list them"
        )
    store.delete(ns, key)
    return Memory(key, str(item.value.get("content", "")), float(item.value.get("created_at", 0)))


def search_memories(
    store: BaseStore, ns: tuple[str, ...], query: str, limit: int = MEMORY_SEARCH_LIMIT_DEFAULT
) -> list[Memory]:
    """Memories matching ``query``: most distinct terms matched first, then newest.

    Raises:
        MemoryRefused: empty or over-long query, bad limit.
    """
    try:
        terms = [t.casefold() for t in query_terms(query)]
    except SearchError as exc:
        raise MemoryRefused(str(exc)) from None
    if not 1 <= int(limit) <= MEMORY_SEARCH_LIMIT_MAX:
        raise MemoryRefused(f"limit must be between 1 and {MEMORY_SEARCH_LIMIT_MAX}, not {limit}")
    scored = []
    for memory in list_memories(store, ns):
        folded = memory.content.casefold()
        matched = sum(1 for t in terms if t in folded)
        if matched:
            scored.append((matched, memory.created_at, memory))
    scored.sort(key=lambda item: (-item[0], -item[1]))
    return [memory for _, _, memory in scored[: int(limit)]]


def format_memory(memory: Memory) -> str:
    """``[id] content`` on one line per memory line."""
    return f"[{memory.id}] {memory.content}"


def memory_prompt_section(memories: list[Memory]) -> str:
    """The system prompt section listing a workspace's memories ("" when none).

    Newest first, bounded by ``MEMORY_PROMPT_MAX_ITEMS`` and ``MEMORY_PROMPT_MAX_CHARS``.
    """
    if not memories:
        return ""
    header = (
        "Long-term memory: notes saved in earlier sessions about this workspace (by you or "
        "the user). Use them; save new lasting facts with memory_save, find more with "
        "memory_search, remove wrong ones with memory_delete(id)."
    )
    lines: list[str] = []
    used = len(header)
    newest = sorted(memories, key=lambda m: m.created_at, reverse=True)
    for memory in newest[:MEMORY_PROMPT_MAX_ITEMS]:
        line = "- " + format_memory(memory).replace("\n", " ")
        if used + len(line) + 1 > MEMORY_PROMPT_MAX_CHARS:
            break
        lines.append(line)
        used += len(line) + 1
    hidden = len(memories) - len(lines)
    if hidden > 0:
        lines.append(f"- … {hidden} more (memory_search finds them)")
    return "\n".join([header, *lines])


def load_memory_prompt(store: BaseStore | None, user_id: str, workspace: str) -> str:
    """The prompt section for this user and workspace, read once at session start."""
    if store is None:
        return ""
    return memory_prompt_section(list_memories(store, namespace(user_id, workspace)))
