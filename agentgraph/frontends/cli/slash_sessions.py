"""REPL commands for sessions: /new, /switch, /load, /reset, /current, /clean, /title, /undo."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from agentgraph.config import CLEANUP_DAYS_DEFAULT, Settings
from agentgraph.errors import AgentGraphError
from agentgraph.frontends.cli.slash import ReplContext, command
from agentgraph.session.agent import new_thread_id
from agentgraph.session.catalog import SessionCatalog, SessionInfo
from agentgraph.session.commands import undo_turns
from agentgraph.session.lifecycle import start_background_maintenance

UNDO_FILES_SHOWN = 20


def catalog_of(ctx: ReplContext) -> SessionCatalog:
    """The stored sessions of the REPL's store."""
    return SessionCatalog(ctx.store, ctx.agent.settings)


def hold_session(catalog: SessionCatalog, thread_id: str, action: str, console: Console) -> None:
    """Take ``thread_id``'s lease; a store locked by another process only delays that.

    Another process's long write transaction is not a holder of the session: the REPL
    starts anyway and its first turn takes the lease (or fails, and the REPL goes on).

    Raises:
        SessionInUse: another live process holds the session.
    """
    if not catalog.take(thread_id, action):
        console.print(
            "the session store is locked by another process; the session is taken at "
            "the first turn",
            style="yellow",
            markup=False,
        )


def session_startup(ctx: ReplContext, settings: Settings, resumed: bool) -> None:
    """REPL start: hold the session, preamble on resume, background cleanup/prune.

    Raises:
        SessionInUse: ``--resume``/``--continue`` of a session another live process holds.
    """
    hold_session(catalog_of(ctx), ctx.thread_id, "resume" if resumed else "start", ctx.console)
    if resumed:
        ctx.agent.sessions.mark_resumed(ctx.thread_id)
    start_background_maintenance(settings, ctx.store, keep=lambda: {ctx.thread_id})


def session_shutdown(ctx: ReplContext, settings: Settings) -> None:
    """REPL exit (``/exit`` or Ctrl-D): let go of the session, say how to come back.

    A session whose turns all failed before the model replied is kept with its prompts,
    as ``agentgraph run`` keeps it: it resumes where the user left it.
    """
    if catalog_of(ctx).release(ctx.thread_id):
        ctx.console.print(f"resume this session with: agentgraph -r {ctx.thread_id}", markup=False)


def _switch_to(ctx: ReplContext, thread_id: str, *, resumed: bool) -> None:
    """Take ``thread_id`` (SessionInUse if another process holds it), then let go of ours."""
    catalog_of(ctx).switch(ctx.thread_id, thread_id)
    ctx.thread_id = thread_id
    if resumed:
        ctx.agent.sessions.mark_resumed(thread_id)


@command("new", "/new [title]", "start a new session (optionally titled)")
def _new(ctx: ReplContext, rest: str) -> None:
    _switch_to(ctx, new_thread_id(), resumed=False)
    title = f" “{_set_title(ctx, rest).title}”" if rest else ""
    ctx.console.print(f"new session {ctx.thread_id[:12]}{title}", markup=False)


def switch_by_prefix(ctx: ReplContext, rest: str) -> None:
    """Switch the REPL to the session ``rest`` names (an id or a unique prefix).

    Problems (no such session, several, held by another process) are printed, in one
    line each; the REPL stays in its session then.
    """
    if not rest:
        ctx.console.print("usage: /switch <id prefix> (see /sessions)", markup=False)
        return
    try:
        info = catalog_of(ctx).resolve(rest)
    except AgentGraphError as exc:
        ctx.console.print(f"[red]{escape(str(exc))}[/]")
        return
    if info.thread_id == ctx.thread_id:
        ctx.console.print(f"already in {info.thread_id[:12]}", markup=False)
        return
    try:
        _switch_to(ctx, info.thread_id, resumed=True)
    except AgentGraphError as exc:  # SessionInUse: another process holds it
        ctx.console.print(f"[red]{escape(str(exc))}[/]")
        return
    from agentgraph.frontends.cli.repl import show_history_briefly

    show_history_briefly(ctx.console, ctx.agent, info.thread_id)


command("switch", "/switch <prefix>", "switch to a session by id prefix")(switch_by_prefix)
command("load", "/load <prefix>", "same as /switch")(switch_by_prefix)


@command("current", "/current", "this session: id, title, messages, workspace, mentions, files")
def _current(ctx: ReplContext, _rest: str) -> None:
    info = catalog_of(ctx).get(ctx.thread_id)
    state = ctx.agent.graph.get_state(ctx.agent.config(ctx.thread_id)).values or {}
    count = len(state.get("messages") or [])
    title = info.title if info is not None else "(new, not saved yet)"
    compactions = info.compactions if info is not None else 0
    ctx.console.print(
        f"session {ctx.thread_id}  “{title}”  messages {count}  compactions {compactions}  "
        f"workspace {ctx.workspace}",
        markup=False,
    )
    # What the user brought into the session: @agent/@skill mentions and @file uploads.
    shown = (("mentioned", "mentioned_agents"), ("files", "uploaded_files"), ("images", "images"))
    for label, key in shown:
        values = state.get(key) or []
        if values:
            ctx.console.print(f"  {label}: {', '.join(map(str, values))}", markup=False)
    if state.get("user_id"):
        ctx.console.print(f"  user: {state['user_id']}", markup=False)


def _set_title(ctx: ReplContext, text: str) -> SessionInfo:
    return catalog_of(ctx).rename(ctx.thread_id, ctx.workspace, text)


@command("title", "/title <text>", "rename this session")
def _title(ctx: ReplContext, rest: str) -> None:
    if not rest:
        info = catalog_of(ctx).get(ctx.thread_id)
        shown = f"“{info.title}” ({info.title_source})" if info is not None else "(none yet)"
        ctx.console.print(f"title: {shown}; usage: /title <text>", markup=False)
        return
    info = _set_title(ctx, rest)
    ctx.console.print(f"title: “{info.title}”", markup=False)


@command("reset", "/reset", "clear this session's history (same id, title kept)")
def _reset(ctx: ReplContext, _rest: str) -> None:
    count = len(ctx.agent.messages(ctx.thread_id))
    if count == 0:
        ctx.console.print("nothing to clear", markup=False)
        return
    if not ctx.confirm(f"Clear all {count} messages of session {ctx.thread_id[:12]}?"):
        ctx.console.print("kept", markup=False)
        return
    catalog_of(ctx).reset(ctx.thread_id)
    ctx.console.print(f"cleared {count} messages; same session {ctx.thread_id[:12]}", markup=False)


@command("clean", "/clean", "delete sessions not updated for AGENTGRAPH_CLEANUP_DAYS days")
def _clean(ctx: ReplContext, _rest: str) -> None:
    catalog = catalog_of(ctx)
    days = float(catalog.settings.cleanup_days or CLEANUP_DAYS_DEFAULT)
    keep = {ctx.thread_id}
    preview = catalog.clean(days, dry_run=True, keep=keep)
    if not preview.sessions:
        ctx.console.print(f"no session older than {days:g} days", markup=False)
        return
    for info in preview.sessions:
        ctx.console.print(f"  {info.thread_id[:12]}  {info.title}", markup=False)
    if not ctx.confirm(f"Delete these {len(preview.sessions)} sessions and their files?"):
        ctx.console.print("kept", markup=False)
        return
    done = catalog.clean(days, keep=keep)
    ctx.console.print(f"deleted {len(done.sessions)} sessions", markup=False)


@command("undo", "/undo [N]", "restore the files changed by the last (N) turns")
def _undo(ctx: ReplContext, rest: str) -> None:
    try:
        count = int(rest) if rest else 1
    except ValueError:
        ctx.console.print("usage: /undo [N] (N = number of turns)", markup=False)
        return
    if count < 1:
        ctx.console.print("usage: /undo [N] with N ≥ 1", markup=False)
        return
    outcome = undo_turns(ctx.agent, ctx.thread_id, ctx.workspace, count)
    if outcome is None:
        ctx.console.print("nothing to undo: no turn of this session changed files", markup=False)
        return
    result, available = outcome.result, outcome.available
    note = f" (only {available} recorded)" if count > available else ""
    ctx.console.print(f"undid {result.turns} turn(s){note}:", markup=False)
    for label, paths in (("restored", result.restored), ("removed", result.removed)):
        for path in paths[:UNDO_FILES_SHOWN]:
            ctx.console.print(f"  {label} {path}", markup=False)
        if len(paths) > UNDO_FILES_SHOWN:
            ctx.console.print(f"  … {len(paths) - UNDO_FILES_SHOWN} more {label}", markup=False)
    for path in result.failed:
        ctx.console.print(f"[red]  could not restore {escape(path)}[/]")
