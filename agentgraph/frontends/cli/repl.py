"""The interactive REPL (``agentgraph`` with no subcommand)."""

from __future__ import annotations

import argparse
import importlib
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from agentgraph.config import Settings
from agentgraph.errors import AgentGraphError
from agentgraph.frontends.cli import collector_paused
from agentgraph.frontends.cli.approval import ask_approval
from agentgraph.frontends.cli.common import process_environment, resolve_workspace, start_mcp
from agentgraph.frontends.cli.consoles import make_console
from agentgraph.frontends.cli.render import EventPrinter
from agentgraph.frontends.cli.slash import SUBMIT_KEY, ReplContext, dispatch
from agentgraph.frontends.cli.slash_commit import auto_commit, turn_mark
from agentgraph.frontends.cli.slash_show import number_outputs
from agentgraph.frontends.cli.terminal import TerminalPrinter
from agentgraph.frontends.cli.turns import run_turn_interruptibly
from agentgraph.session.agent import Agent, TurnResult, new_thread_id
from agentgraph.session.interactive import (
    answer_approvals,
    context_status,
    recent_messages,
    skill_names,
    turn_usage_text,
)
from agentgraph.session.run import check_session_ids
from agentgraph.session.startup import start_session
from agentgraph.session.workspaces import isolated_workspace

RESUME_PREVIEW_MESSAGES = 6
RESUME_PREVIEW_CHARS = 160

# Each feature's slash commands live in their own module (see cli/slash.py).
SLASH_MODULES = (
    "agentgraph.frontends.cli.slash_basic",
    "agentgraph.frontends.cli.slash_context",
    "agentgraph.frontends.cli.slash_workspace",
    "agentgraph.frontends.cli.slash_sessions",
    "agentgraph.frontends.cli.slash_integrations",
    "agentgraph.frontends.cli.slash_diff",
    "agentgraph.frontends.cli.slash_resume",
    "agentgraph.frontends.cli.slash_recall",
    "agentgraph.frontends.cli.slash_agents",
    "agentgraph.frontends.cli.slash_show",
    "agentgraph.frontends.cli.slash_commit",
    "agentgraph.frontends.cli.slash_permissions",
    "agentgraph.frontends.cli.slash_goal",
)


def load_slash_commands() -> None:
    """Import every slash-command module so it registers its commands."""
    for name in SLASH_MODULES:
        importlib.import_module(name)


def _completer(get_ctx: Callable[[], ReplContext | None]) -> Any:
    """Tab completion for the REPL line (see cli/completion.py); empty before start-up."""
    from agentgraph.frontends.cli.completion import ReplCompleter
    from agentgraph.frontends.cli.slash import REGISTRY, custom_commands_of

    def sessions() -> list[Any]:
        ctx = get_ctx()
        return ctx.store.index.list_sessions(include_subagents=False) if ctx else []

    def skills() -> list[str]:
        ctx = get_ctx()
        # Found afresh: a skill added since the last turn completes at once.
        return skill_names(ctx.agent.settings.home, ctx.workspace) if ctx else []

    def workspace() -> Path:
        ctx = get_ctx()
        return ctx.workspace if ctx else Path.cwd()

    def commands() -> dict[str, str]:
        ctx = get_ctx()
        custom = custom_commands_of(ctx) if ctx else {}  # found afresh, as skills
        listed = {name: cmd.help for name, cmd in REGISTRY.items()}
        return listed | {name: cmd.help for name, cmd in custom.items()}

    return ReplCompleter(
        commands=commands,
        sessions=sessions,
        skills=skills,
        workspace=workspace,
    )


def _reader(
    settings: Settings,
    completer: Any = None,
    show_last: Callable[[], None] | None = None,
    *,
    key_bindings: Any = None,
    status: Callable[[], str] | None = None,
) -> Callable[[str], str]:
    """The REPL's line reader: prompt_toolkit on a terminal (history, completion, the
    REPL's keys plus ``key_bindings``, ``status`` at the right of the prompt line), else
    ``input``."""
    if not sys.stdin.isatty():
        return input
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory
    from prompt_toolkit.key_binding import merge_key_bindings

    from agentgraph.frontends.cli.keys import input_key_bindings

    settings.home.mkdir(parents=True, exist_ok=True)
    session: PromptSession[str] = PromptSession(
        history=FileHistory(str(settings.home / "input_history")),
        completer=completer,
        complete_while_typing=False,
        key_bindings=merge_key_bindings(
            [input_key_bindings(show_last), *([key_bindings] if key_bindings else [])]
        ),
        rprompt=status,
    )
    return session.prompt


def _show_last(started: list[ReplContext]) -> Callable[[], None]:
    """Ctrl-O: the last tool output, once the REPL has a session."""

    def show() -> None:
        if started:
            from agentgraph.frontends.cli.slash_show import show_last

            show_last(started[0])

    return show


def show_history_briefly(console: Console, agent: Agent, thread_id: str) -> None:
    """Print the last few messages of a resumed session."""
    total, rows = recent_messages(agent, thread_id, RESUME_PREVIEW_MESSAGES, RESUME_PREVIEW_CHARS)
    console.print(f"[dim]resumed {thread_id[:12]} — {total} messages[/]")
    for row in rows:
        console.print(f"[dim]{row.label}:[/] {escape(row.text)}")


def _ask_yes_no(read: Callable[[str], str], question: str) -> bool:
    """Ask a y/N question on the REPL's input; end of input or Ctrl-C mean no."""
    try:
        return read(f"{question} [y/N] ").strip().lower() in ("y", "yes")
    except (EOFError, KeyboardInterrupt):
        return False


def _initial_thread(
    args: argparse.Namespace, agent: Agent, workspace: Path, err: Console
) -> tuple[str, bool] | None:
    """The session to start in and whether it is resumed; None: the picker was cancelled."""
    if args.resume == "":  # -r without an id: pick one
        from agentgraph.frontends.cli.picker import pick_session

        rows = agent.store.index.list_sessions(include_subagents=False)
        if not rows:
            raise AgentGraphError("no session to resume yet; start one with `agentgraph`")
        info = pick_session(rows, err)
        return (info.thread_id, True) if info is not None else None
    from agentgraph.session.catalog import session_to_reopen

    named = session_to_reopen(agent.store, resume=args.resume, cont=args.cont, workspace=workspace)
    return (named, True) if named is not None else (new_thread_id(), False)


def cmd_repl(args: argparse.Namespace, settings: Settings) -> int:
    """Run the interactive loop until /exit or end of input."""
    check_session_ids({"--resume": args.resume or None})  # "": -r without an id, the picker
    workspace = resolve_workspace(getattr(args, "workspace", None))
    out = make_console()
    err = make_console(stderr=True)
    started: list[ReplContext] = []  # the REPL's context, once there is one
    from agentgraph.frontends.cli.slash_permissions import mode_key_bindings, mode_label

    current: Callable[[], ReplContext | None] = lambda: started[0] if started else None  # noqa: E731
    read = _reader(
        settings,
        _completer(current),
        _show_last(started),
        key_bindings=mode_key_bindings(current),  # Shift-Tab: the next permission mode
        status=mode_label(current),
    )
    ask = (lambda q: _ask_yes_no(read, q)) if sys.stdin.isatty() else None
    with start_session(
        settings,
        workspace,
        process_environment(),
        open_mcp=lambda: start_mcp(settings, workspace, ask=ask),
        building=collector_paused,  # the chat model's import, tool schemas, the graph
        interactive=sys.stdin.isatty(),
    ) as opened:
        store, mcp, agent = opened.store, opened.mcp, opened.agent
        initial = _initial_thread(args, agent, workspace, err)
        if initial is None:
            err.print("no session picked", markup=False)
            return 0
        thread_id, resumed = initial
        # One run per thread: refused here, in one line, before anything is shown or made.
        from agentgraph.frontends.cli.slash_sessions import hold_session
        from agentgraph.session.catalog import SessionCatalog

        hold_session(
            SessionCatalog(store, settings), thread_id, "resume" if resumed else "start", err
        )
        # --isolated: each session works in its own folder; @files come from the launch dir.
        launch_dir = workspace if getattr(args, "isolated", False) else None
        if launch_dir is not None:
            workspace = isolated_workspace(settings.home, thread_id)
        load_slash_commands()
        ctx = ReplContext(
            agent=agent, store=store, console=err, thread_id=thread_id, workspace=workspace
        )
        started.append(ctx)
        err.print(f"[bold]agentgraph[/] — {settings.model} — {workspace} — /help for commands")
        # Servers connect in the background (the prompt does not wait for them): what
        # is known now is shown now, later failures at the next turn, all in /mcp.
        for notice in [*mcp.new_problems(), *agent.notices()]:
            err.print(f"[yellow]{escape(notice)}[/]")
        if resumed:
            show_history_briefly(err, agent, thread_id)
            from agentgraph.frontends.cli.slash_integrations import follow_session_model

            if getattr(args, "model", None) is not None:  # -m NAME: as /model NAME would
                agent.set_model_preference(thread_id, settings.model)
            follow_session_model(ctx, settings.model)  # the session's /model choice
        from agentgraph.frontends.cli.slash_sessions import session_shutdown, session_startup

        session_startup(ctx, settings, resumed)
        hook_printer = EventPrinter(out, err, stream_tokens=False)
        for event in agent.start_session(thread_id, workspace, resumed=resumed):
            hook_printer(event)  # SessionStart hooks' output, before the first prompt
        if ctx.confirm is ReplContext.confirm:  # not wired by another feature yet
            ctx.confirm = lambda question: _ask_yes_no(read, question)
        if resumed:  # a session killed at an approval question asks it again, first
            answer_pending_approvals(ctx, out, err, read)
        # After those questions (asked under the mode they were asked in): kept with
        # the session from here on.
        if getattr(args, "permission_mode", None) is not None:
            agent.set_permission_mode(ctx.thread_id, settings.permission_mode)
        from agentgraph.frontends.cli.slash_goal import after_turn, take_queued_turn

        while True:
            line = take_queued_turn(ctx)  # a goal's next turn, sent without asking
            try:
                line = line or read("› ").strip()
            except KeyboardInterrupt:
                continue
            except EOFError:
                break
            if not line:
                continue
            if line.startswith("/"):
                try:
                    if dispatch(ctx, line) == "exit":
                        break
                except (AgentGraphError, sqlite3.Error) as exc:  # the command fails, not the REPL
                    err.print(f"[red]{escape(str(exc))}[/]")
                from agentgraph.frontends.cli.slash_integrations import follow_session_model

                follow_session_model(ctx, settings.model)  # /switch, /resume, /new
                # A command may hand the agent a request (/init): it runs as a turn.
                line = str(ctx.extras.pop(SUBMIT_KEY, "") or "")
                if not line:
                    continue
            printer = TerminalPrinter(
                out, err, number_outputs(ctx), notify_after_s=ctx.agent.settings.notify_after_s
            )
            printer.begin()
            commit_mark = turn_mark(ctx)
            if launch_dir is not None and ctx.workspace.name != ctx.thread_id:
                ctx.workspace = isolated_workspace(settings.home, ctx.thread_id)  # after /new
            try:
                result = run_turn_interruptibly(
                    ctx.agent,  # /model may have replaced it
                    printer,
                    ctx.thread_id,
                    line,
                    ctx.workspace,
                    attach_root=launch_dir,
                )
                printer.finish()
                if result is not None and result.pending_approvals:
                    answer_pending_approvals(ctx, out, err, read)
            except KeyboardInterrupt:
                printer.finish()
                err.print("[yellow]cancelled — the session is kept; continue or /new[/]")
                continue
            except AgentGraphError as exc:
                printer.finish()
                err.print(f"[red]{escape(str(exc))}[/]")
                continue
            except sqlite3.Error as exc:  # e.g. locked by another process: fail the turn only
                printer.finish()
                err.print(f"[red]session store error: {escape(str(exc))} — try again[/]")
                continue
            printer.finish()
            print_status_line(err, ctx.agent, ctx.thread_id, result)
            auto_commit(ctx, commit_mark)  # AGENTGRAPH_AUTO_COMMIT=on: the turn's files
            after_turn(ctx, result)  # an active goal queues its next turn
        session_shutdown(ctx, settings)
    return 0


def answer_pending_approvals(
    ctx: ReplContext, out: Console, err: Console, read: Callable[[str], str]
) -> None:
    """Ask the session's pending approval questions and resume, until none is left.

    Each question is asked after everything before it is printed; the graph then
    continues with ``Command(resume={interrupt_id: answer})`` and may stop at the next.
    Ctrl-C while the resumed part runs cancels it, like a turn.
    """
    pending = ctx.agent.pending_approvals(ctx.thread_id)
    while pending:
        # Each answer names its call: one that reaches another question is refused.
        answered = answer_approvals(pending, lambda q: ask_approval(err, read, q))
        printer = TerminalPrinter(
            out, err, number_outputs(ctx), notify_after_s=ctx.agent.settings.notify_after_s
        )
        printer.previewed = answered.approved_diffs
        printer.begin()
        try:
            result = run_turn_interruptibly(
                ctx.agent, printer, ctx.thread_id, ctx.workspace, resume=answered.answers
            )
        finally:
            printer.finish()
        pending = result.pending_approvals if result is not None else []


def print_status_line(
    console: Console, agent: Agent, thread_id: str, result: TurnResult | None = None
) -> None:
    """Context used and percent of budget after a turn, coloured at the thresholds,
    then the turn's tokens (and cost when known)."""
    from agentgraph.frontends.cli.slash_context import LEVEL_STYLES

    text, level = context_status(agent, thread_id)
    usage = turn_usage_text(result)
    tail = f"[dim] · {escape(usage)}[/]" if usage else ""
    console.print(f"[{LEVEL_STYLES.get(level, 'dim')}]{escape(text)}[/]{tail}")
