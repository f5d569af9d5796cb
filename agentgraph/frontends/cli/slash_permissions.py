"""Permission commands: ``/mode`` (and Shift-Tab at the prompt), ``/permissions``.

The mode is the session's (agentgraph/session/permissions_ops.py): switched here, it is
kept when the session resumes and the model is told before its next request.
``/permissions`` lists the workspace's "always allow" rules and revokes them by number.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.markup import escape

from agentgraph.config import PERMISSION_MODES
from agentgraph.errors import AgentGraphError
from agentgraph.frontends.cli.slash import ReplContext, command
from agentgraph.session.permissions_ops import (
    MODE_DESCRIPTIONS,
    cycle_mode,
    permission_rules,
    revoke_permission_rule,
)

# prompt_toolkit's name of the Shift-Tab key.
CYCLE_KEY = "s-tab"


def switch_mode(ctx: ReplContext, mode: str) -> None:
    """Switch the session to ``mode`` and say so."""
    ctx.agent.set_permission_mode(ctx.thread_id, mode)
    ctx.console.print(f"[bold]mode: {mode}[/] — {escape(MODE_DESCRIPTIONS[mode])}")


@command("mode", "/mode [NAME]", "show or switch the permission mode (Shift-Tab cycles)")
def _mode(ctx: ReplContext, rest: str) -> None:
    current = ctx.agent.permission_mode(ctx.thread_id)
    if not rest:
        ctx.console.print(f"[bold]mode: {current}[/] — {escape(MODE_DESCRIPTIONS[current])}")
        for name in PERMISSION_MODES:
            ctx.console.print(f"  {name:<13}{escape(MODE_DESCRIPTIONS[name])}")
        return
    if rest not in PERMISSION_MODES:
        raise AgentGraphError(f"unknown mode {rest!r}; one of: {', '.join(PERMISSION_MODES)}")
    switch_mode(ctx, rest)


@command("permissions", "/permissions [revoke N]", "list or revoke the always-allow rules")
def _permissions(ctx: ReplContext, rest: str) -> None:
    verb, _, arg = rest.partition(" ")
    if verb == "revoke":
        try:
            number = int(arg.strip())
        except ValueError:
            raise AgentGraphError("usage: /permissions revoke N (N from /permissions)") from None
        gone = revoke_permission_rule(ctx.agent, ctx.workspace, number)
        if gone is None:
            raise AgentGraphError(f"no rule {number}; /permissions lists them")
        ctx.console.print(f"revoked: {gone.describe()}", markup=False)
        return
    if rest:
        raise AgentGraphError("usage: /permissions [revoke N]")
    mode = ctx.agent.permission_mode(ctx.thread_id)
    ctx.console.print(f"mode: {mode} — {MODE_DESCRIPTIONS[mode]}", markup=False)
    rules = permission_rules(ctx.agent, ctx.workspace)
    if not rules:
        ctx.console.print(
            "no always-allow rules for this workspace (answer a to a question to add one)",
            markup=False,
        )
        return
    for number, rule in enumerate(rules, start=1):
        ctx.console.print(f"{number}. {rule.describe()}", markup=False)


def mode_label(get_ctx: Callable[[], ReplContext | None]) -> Callable[[], str]:
    """The prompt's status text: the session's mode and how to switch it."""

    def label() -> str:
        ctx = get_ctx()
        if ctx is None:
            return ""
        return f" mode: {ctx.agent.permission_mode(ctx.thread_id)} (shift-tab to cycle)"

    return label


def mode_key_bindings(get_ctx: Callable[[], ReplContext | None]) -> Any:
    """prompt_toolkit key bindings: Shift-Tab switches the session to the next mode."""
    from prompt_toolkit.key_binding import KeyBindings

    bindings = KeyBindings()

    @bindings.add(CYCLE_KEY)
    def _cycle(event: Any) -> None:
        ctx = get_ctx()
        # While an approval question waits the mode stays (cycle_mode says None).
        if ctx is None or cycle_mode(ctx.agent, ctx.thread_id) is None:
            return
        event.app.invalidate()  # redraw the status line

    return bindings
