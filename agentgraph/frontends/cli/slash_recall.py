"""Recall commands: /search over the session's whole transcript, /memory across sessions."""

from __future__ import annotations

import time

from agentgraph.frontends.cli.slash import ReplContext, command
from agentgraph.session.commands import (
    IndexUnavailable,
    MemoryRefused,
    SearchError,
    search_or_read,
)


@command("search", "/search QUERY | msg:N", "search this session's whole transcript; show msg:N")
def _search(ctx: ReplContext, rest: str) -> None:
    if not rest:
        ctx.console.print("usage: /search WORDS (or /search msg:N to show one message)")
        return
    try:
        result = search_or_read(ctx.agent, ctx.thread_id, rest)
    except SearchError as exc:
        ctx.console.print(f"search: {exc}", markup=False)
        return
    except IndexUnavailable as exc:
        ctx.console.print(f"search: the index is not available ({exc}); try again", markup=False)
        return
    if isinstance(result, str):  # one message, by its msg:N reference
        ctx.console.print(result, markup=False)
        return
    if result.rebuilt:
        ctx.console.print("(the search index was damaged and has been rebuilt)", markup=False)
    if not result.hits:
        ctx.console.print(f"no messages match {rest!r}", markup=False)
        return
    for hit in result.hits:
        ctx.console.print(f"{' ' * max(0, 8 - len(hit.ref))}{hit.line}", markup=False)


@command("memory", "/memory [forget ID]", "long-term memories of this workspace; forget one")
def _memory(ctx: ReplContext, rest: str) -> None:
    verb, _, arg = rest.partition(" ")
    if verb == "forget":
        if not arg.strip():
            ctx.console.print("usage: /memory forget ID (ids are listed by /memory)")
            return
        try:
            memory = ctx.agent.forget_memory(ctx.workspace, arg.strip())
        except MemoryRefused as exc:
            ctx.console.print(f"memory: {exc}", markup=False)
            return
        ctx.console.print(f"forgot [{memory.id}] {memory.content}", markup=False)
        return
    if rest:
        ctx.console.print("usage: /memory, or /memory forget ID", markup=False)
        return
    memories = ctx.agent.memories(ctx.workspace)
    if not memories:
        ctx.console.print(
            "no memories for this workspace yet (the agent saves them with memory_save)",
            markup=False,
        )
        return
    for memory in memories:
        when = time.strftime("%Y-%m-%d", time.localtime(memory.created_at))
        ctx.console.print(f"[{memory.id}] {when}  {memory.content}", markup=False)
    ctx.console.print(
        "(the prompt of this session lists the memories as they were when it started)",
        markup=False,
    )
