"""Slash commands dispatched in-process on a real Agent, their output captured."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from agentgraph.frontends.cli.slash import ReplContext
from agentgraph.session.agent import Agent

SLASH_OUTPUT_WIDTH = 200


def slash_context(
    agent: Agent, thread_id: str, workspace: Path, *, width: int = SLASH_OUTPUT_WIDTH
) -> tuple[ReplContext, io.StringIO]:
    """The REPL context of ``thread_id`` on ``agent`` and the buffer its console writes."""
    out = io.StringIO()
    ctx = ReplContext(
        agent=agent,
        store=agent.store,
        console=Console(file=out, width=width, no_color=True),
        thread_id=thread_id,
        workspace=workspace,
    )
    return ctx, out
