"""Slash-command registry for the REPL: each feature registers its commands here.

A command module (``slash_*.py``) calls :func:`command` at import time;
``repl.py`` imports the modules listed in ``SLASH_MODULES``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from agentgraph.session.agent import Agent
from agentgraph.session.custom_commands import (
    CustomCommand,
    custom_commands,
    expand,
    parse_command_text,
    read_command_file,
)

if TYPE_CHECKING:
    from agentgraph.session.commands import Store


@dataclass
class ReplContext:
    """What a slash command can see and change."""

    agent: Agent
    store: Store
    console: Console
    thread_id: str
    workspace: Path
    # Free-form per-feature REPL state (e.g. the last shown todo list).
    extras: dict[str, Any] = field(default_factory=dict)
    confirm: Callable[[str], bool] = lambda _question: False


# A command that puts a request here (ctx.extras[SUBMIT_KEY] = text) has the REPL run it
# as the next turn, as if the user had typed it.
SUBMIT_KEY = "submit"

# Returns "exit" to leave the REPL, anything else to continue.
Handler = Callable[[ReplContext, str], str | None]


@dataclass(frozen=True)
class SlashCommand:
    """A registered command."""

    name: str
    usage: str
    help: str
    handler: Handler


REGISTRY: dict[str, SlashCommand] = {}


def command(name: str, usage: str, help_text: str) -> Callable[[Handler], Handler]:
    """Register ``handler`` as ``/name`` (decorator)."""

    def register(handler: Handler) -> Handler:
        REGISTRY[name] = SlashCommand(name, usage, help_text, handler)
        return handler

    return register


def help_text() -> str:
    """The /help listing, in registration order."""
    width = max((len(c.usage) for c in REGISTRY.values()), default=10) + 2
    lines = [f"{c.usage:<{width}}{c.help}" for c in REGISTRY.values()]
    lines.append("Ctrl-C during a run cancels the run, not the program.")
    return "\n".join(lines)


def custom_commands_of(ctx: ReplContext) -> dict[str, CustomCommand]:
    """The custom commands (``.agentgraph/commands``, ``~/.agentgraph/commands``) here."""
    return custom_commands(ctx.agent.settings.home, ctx.workspace, REGISTRY)


def dispatch(ctx: ReplContext, line: str) -> str | None:
    """Run one slash command line: a built-in command, else a custom one (its prompt
    becomes the next turn)."""
    name, _, rest = line.partition(" ")
    cmd = REGISTRY.get(name.lstrip("/"))
    if cmd is None:
        custom = custom_commands_of(ctx).get(name.lstrip("/"))
        if custom is None:
            ctx.console.print(f"unknown command {name}; /help lists them", markup=False)
            return None
        # Read again: the file may have changed since it was listed.
        _description, body = parse_command_text(read_command_file(custom.path))
        ctx.extras[SUBMIT_KEY] = expand(body, rest.strip())
        return None
    return cmd.handler(ctx, rest.strip())
