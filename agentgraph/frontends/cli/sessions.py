"""``agentgraph sessions …``: list, show, delete, export, import, clean and prune sessions."""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.table import Table

from agentgraph.config import CLEANUP_DAYS_DEFAULT, Settings
from agentgraph.errors import EXIT_USAGE, AgentGraphError
from agentgraph.frontends.cli.common import process_environment, resolve_workspace
from agentgraph.frontends.cli.consoles import make_console
from agentgraph.persistence.index import SessionIndex, SessionInfo, resolve_session
from agentgraph.persistence.thread_ids import check_thread_id
from agentgraph.security.redaction import build_redactor

if TYPE_CHECKING:
    from collections.abc import Callable

    from langchain_core.messages import BaseMessage

    from agentgraph.persistence import Store

SHOW_PREVIEW_CHARS = 200
DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([dhm]?)\s*$")
SECONDS_PER_UNIT = {"d": 86_400.0, "h": 3_600.0, "m": 60.0, "": 86_400.0}
# How an age is said back: the largest unit it is a whole number of, else seconds.
AGE_WORDS = (("day", 86_400), ("hour", 3_600), ("minute", 60), ("second", 1))


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M")


def sessions_table(rows: list[SessionInfo], *, show_workspace: bool = True) -> Table:
    """A rich table of sessions."""
    table = Table(box=None, header_style="bold")
    table.add_column("id")
    table.add_column("title")
    if show_workspace:
        table.add_column("workspace")
    table.add_column("updated")
    table.add_column("msgs", justify="right")
    for info in rows:
        indent = "  └ " if info.parent_thread_id else ""
        cells = [indent + info.thread_id[:12], info.title]
        if show_workspace:
            cells.append(info.workspace)
        cells += [_when(info.updated_at), str(info.message_count)]
        table.add_row(*cells)
    return table


def parse_age_days(text: str) -> float:
    """``30d`` / ``12h`` / ``90m`` (minutes) / ``7`` (days) → days.

    Raises:
        AgentGraphError: not a duration (usage error).
    """
    match = DURATION_RE.match(text)
    if not match:
        raise AgentGraphError(
            f"invalid age {text!r}: use a number with d (days), h (hours) or m (minutes), e.g. 30d",
            EXIT_USAGE,
        )
    value, unit = float(match.group(1)), match.group(2)
    return value * SECONDS_PER_UNIT[unit] / SECONDS_PER_UNIT["d"]


def format_age(days: float) -> str:
    """An age as people say it: ``30 days``, ``12 hours``, ``90 minutes``, ``1 minute``."""
    seconds = round(days * SECONDS_PER_UNIT["d"])
    word, size = next((w, n) for w, n in AGE_WORDS if seconds % n == 0)
    count = seconds // size
    return f"{count} {word}{'' if count == 1 else 's'}"


def transcript_summary(messages: list[Any]) -> dict[str, Any]:
    """Counts and previews of a stored transcript (``sessions show``)."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from agentgraph.runtime.history import agentgraph_kind, is_user_request

    kinds: Counter[str] = Counter()
    tools: Counter[str] = Counter()
    for msg in messages:
        kind = agentgraph_kind(msg)
        kinds[kind or msg.type] += 1
        if isinstance(msg, AIMessage):
            tools.update(c["name"] for c in msg.tool_calls)
    requests = [m for m in messages if isinstance(m, HumanMessage) and is_user_request(m)]
    answers = [m for m in messages if isinstance(m, AIMessage) and not m.tool_calls]

    def preview(msg: Any) -> str:
        text = " ".join(msg.text.split())
        return text if len(text) <= SHOW_PREVIEW_CHARS else text[: SHOW_PREVIEW_CHARS - 1] + "…"

    return {
        "messages": len(messages),
        "by_type": dict(kinds),
        "user_requests": len(requests),
        "tool_results": sum(1 for m in messages if isinstance(m, ToolMessage)),
        "tool_calls": dict(tools),
        "compaction_boundaries": kinds.get("compact_boundary", 0),
        "first_request": preview(requests[0]) if requests else None,
        "last_request": preview(requests[-1]) if requests else None,
        "last_answer": preview(answers[-1]) if answers else None,
    }


def _show(store: Store, settings: Settings, args: argparse.Namespace) -> int:
    from agentgraph.session.lifecycle import load_messages

    info = resolve_session(store.index, args.id)
    messages = load_messages(store, info.thread_id)
    payload: dict[str, Any] = info.to_json()
    holder = store.leases.holder(info.thread_id)
    payload["in_use_by_pid"] = holder.pid if holder is not None else None
    payload["children"] = [c.thread_id for c in store.index.children(info.thread_id)]
    payload["transcript"] = transcript_summary(messages)
    # Counted for the model the session ran with, not the one configured now.
    if info.model and info.model != settings.model:
        settings = settings.model_copy(update={"model": info.model})
    payload["context"] = _reporting_agent(store, settings).context_report(info.thread_id)
    if args.json:
        sys.stdout.write(json.dumps(payload, ensure_ascii=False, indent=2) + "\n")
        return 0
    out = make_console()
    summary = payload["transcript"]
    out.print(f"[bold]{info.title or '(untitled)'}[/]  ({info.title_source})", markup=True)
    for label, value in (
        ("id", info.thread_id),
        ("workspace", info.workspace),
        ("branch", info.git_branch or "-"),
        ("model", info.model or "-"),
        ("created", _when(info.created_at)),
        ("updated", _when(info.updated_at)),
        ("messages", f"{summary['messages']} ({summary['user_requests']} requests)"),
        ("tokens", f"{info.input_tokens:,} in / {info.output_tokens:,} out"),
        ("compactions", str(info.compactions)),
        (
            "context",
            f"{payload['context']['tokens']:,} / {payload['context']['budget']:,} tokens "
            f"({payload['context']['percent']}%, {payload['context']['source']})",
        ),
        ("tools", ", ".join(f"{k}×{v}" for k, v in summary["tool_calls"].items()) or "-"),
        ("first request", summary["first_request"] or "-"),
        ("last request", summary["last_request"] or "-"),
        ("last answer", summary["last_answer"] or "-"),
    ):
        out.print(f"{label:>14}  {value}", markup=False)
    return 0


def _reporting_agent(store: Store, settings: Settings) -> Any:
    """An Agent for counting only: no model is called.

    With a local endpoint its chat model is built (never called) so that the window
    the server serves is asked, as a run's agent asks it: the report measures against it.
    """
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    from agentgraph.providers.model import build_chat_model, endpoint_url
    from agentgraph.providers.served_windows import is_local_endpoint
    from agentgraph.session.agent import Agent

    model: Any = None
    if settings.context_window is None and is_local_endpoint(
        endpoint_url(settings, settings.model)
    ):
        with contextlib.suppress(Exception):  # a report never fails for want of a model
            model = build_chat_model(settings)
    return Agent(settings, store, model=model or FakeListChatModel(responses=["unused"]))


def _compact(store: Store, settings: Settings, args: argparse.Namespace) -> int:
    from agentgraph.frontends.cli.render import compaction_line, nothing_to_compact_line
    from agentgraph.persistence.leases import holding
    from agentgraph.providers.model import check_model_config
    from agentgraph.session.agent import Agent

    info = resolve_session(store.index, args.id)
    check_model_config(settings)
    with holding(store.leases, info.thread_id, "compact"):
        agent = Agent(settings, store)
        record = agent.compact(info.thread_id, focus=args.focus)
    err = make_console(stderr=True)
    if record is None:
        line = nothing_to_compact_line(agent.deps.compactor, fallback="nothing to compact")
        err.print(line, markup=False)
        return 0
    if record.get("fallback"):
        err.print(f"summary failed: {record.get('reason')}; the session is unchanged", markup=False)
        return 1
    err.print(compaction_line(record), markup=False)
    return 0


def _delete(store: Store, settings: Settings, args: argparse.Namespace) -> int:
    from agentgraph.session.lifecycle import delete_session, ensure_not_in_use

    info = resolve_session(store.index, args.id)
    ensure_not_in_use(store, info.thread_id, "delete")  # before asking; taken below
    if not args.yes:
        if not sys.stdin.isatty():
            raise AgentGraphError(
                "refusing to delete without confirmation: stdin is not a terminal; "
                "pass --yes to delete",
                EXIT_USAGE,
            )
        answer = input(
            f"Delete session {info.thread_id[:12]} “{info.title}” "
            f"({info.message_count} messages) and its files? [y/N] "
        )
        if answer.strip().lower() not in ("y", "yes"):
            make_console(stderr=True).print("kept", markup=False)
            return 1
    from agentgraph.persistence.leases import holding

    with holding(store.leases, info.thread_id, "delete"):
        count = delete_session(store, settings.home, info.thread_id)
    extra = f" (and {count - 1} subagent sessions)" if count > 1 else ""
    make_console(stderr=True).print(f"deleted {info.thread_id[:12]}{extra}", markup=False)
    return 0


def _export(store: Store, settings: Settings, args: argparse.Namespace) -> int:
    from agentgraph.session.lifecycle import ensure_not_in_use, load_messages
    from agentgraph.session.transcript import export_jsonl, export_markdown

    info = resolve_session(store.index, args.id)
    ensure_not_in_use(store, info.thread_id, "export")
    messages = load_messages(store, info.thread_id)
    text = export_markdown(messages, info) if args.format == "md" else export_jsonl(messages, info)
    # Tool results were redacted when stored; sessions stored before that, and any
    # credential that got into the history another way, must not leave either.
    text = build_redactor(settings.secret_values(), process_environment()).redact(text)
    if args.output:
        path = Path(args.output).expanduser()
        try:
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise AgentGraphError(f"cannot write {path}: {exc.strerror}") from None
        make_console(stderr=True).print(
            f"exported {len(messages)} messages of {info.thread_id[:12]} to {path}", markup=False
        )
    else:
        sys.stdout.write(text)
    return 0


def _offloader(settings: Settings) -> Callable[[str, list[BaseMessage]], list[BaseMessage]]:
    """Cuts huge imported user messages to the tool-output cap (full text in artifacts)."""
    from agentgraph.context.tokens import get_counter
    from agentgraph.context.truncation import default_tool_output_max_tokens
    from agentgraph.context.windows import budget_for
    from agentgraph.providers.learned_windows import apply_learned_window
    from agentgraph.runtime.runctx import artifacts_dir_for
    from agentgraph.runtime.user_offload import offload_user_messages

    budget = budget_for(settings)
    apply_learned_window(budget, settings, settings.model)
    cap = settings.tool_output_max_tokens or default_tool_output_max_tokens(budget.usable)
    counter = get_counter(settings.model)

    def prepare(thread_id: str, messages: list[BaseMessage]) -> list[BaseMessage]:
        folder = artifacts_dir_for(settings, thread_id)
        return offload_user_messages(messages, folder=folder, max_tokens=cap, counter=counter)

    return prepare


def _import(store: Store, settings: Settings, args: argparse.Namespace) -> int:
    from agentgraph.session.lifecycle import find_imported, import_session
    from agentgraph.session.transcript import IMPORT_PROBLEMS_SHOWN, TranscriptError, parse_jsonl

    path = Path(args.file).expanduser()
    try:
        with path.open(encoding="utf-8") as fh:
            imported = parse_jsonl(fh)
    except FileNotFoundError:
        raise AgentGraphError(f"no such file: {path}") from None
    except UnicodeDecodeError:
        raise TranscriptError(f"{path} is not UTF-8 text (not a JSONL transcript)") from None
    except OSError as exc:
        raise AgentGraphError(f"cannot read {path}: {exc.strerror}") from None
    err = make_console(stderr=True)
    for problem in imported.problems[:IMPORT_PROBLEMS_SHOWN]:
        err.print(f"warning: {problem}", markup=False)
    if len(imported.problems) > IMPORT_PROBLEMS_SHOWN:
        err.print(f"warning: {len(imported.problems) - IMPORT_PROBLEMS_SHOWN} more", markup=False)
    existing = find_imported(store, imported)
    if existing is not None:
        err.print(
            f"already imported as session {existing.thread_id} (resume with: "
            f"agentgraph --resume {existing.thread_id[:12]})",
            markup=False,
        )
        return 0
    info = import_session(store, imported, prepare=_offloader(settings))
    err.print(
        f"imported {info.message_count} messages as session {info.thread_id} "
        f"(resume with: agentgraph --resume {info.thread_id[:12]})",
        markup=False,
    )
    return 0


def _clean(store: Store, settings: Settings, args: argparse.Namespace) -> int:
    from agentgraph.session.lifecycle import clean_sessions

    if args.older_than is not None:
        days = parse_age_days(args.older_than)
    else:
        days = float(settings.cleanup_days or CLEANUP_DAYS_DEFAULT)
    result = clean_sessions(store, settings.home, days, dry_run=args.dry_run)
    err = make_console(stderr=True)
    verb = "would delete" if args.dry_run else "deleted"
    for info in result.sessions:
        err.print(
            f"{verb} {info.thread_id[:12]}  {_when(info.updated_at)}  {info.title}", markup=False
        )
    for tid in result.skipped_in_use:
        err.print(f"kept {tid[:12]} (in use by another process)", markup=False)
    err.print(
        f"{verb} {len(result.sessions)} sessions not updated for {format_age(days)}",
        markup=False,
    )
    return 0


def _prune(store: Store, settings: Settings, _args: argparse.Namespace) -> int:
    if not store.prunable:
        raise AgentGraphError("sessions prune works on the SQLite store only")
    stats = store.prune(skip=lambda tid: store.leases.holder(tid) is not None)
    err = make_console(stderr=True)
    err.print(
        f"pruned {stats.checkpoints_deleted} checkpoints and {stats.writes_deleted} writes "
        f"of {stats.threads} sessions (kept {stats.checkpoints_kept}); "
        f"{stats.bytes_before / 1e6:,.1f} MB → {stats.bytes_after / 1e6:,.1f} MB"
        + ("" if stats.vacuumed else " (VACUUM skipped: store busy)"),
        markup=False,
    )
    for tid in stats.skipped_threads:
        err.print(f"skipped {tid[:12]} (in use by another process)", markup=False)
    return 0


def _list(index: SessionIndex, args: argparse.Namespace) -> int:
    workspace = None
    if not args.all:
        workspace = str(resolve_workspace(getattr(args, "workspace", None)))
    rows = index.list_sessions(workspace=workspace, include_subagents=args.all)
    if args.all:
        ordered: list[SessionInfo] = []
        for top in [r for r in rows if r.parent_thread_id is None]:
            ordered.append(top)
            ordered.extend(index.children(top.thread_id))
        rows = ordered
    if args.json:
        sys.stdout.write(json.dumps([r.to_json() for r in rows], ensure_ascii=False) + "\n")
    elif not rows:
        make_console(stderr=True).print("no sessions yet")
    else:
        make_console().print(sessions_table(rows))
    return 0


COMMANDS = {
    "show": _show,
    "delete": _delete,
    "export": _export,
    "import": _import,
    "clean": _clean,
    "prune": _prune,
    "compact": _compact,
}


# The subcommands that never write the store.
READ_ONLY_COMMANDS = frozenset({"list", "show", "export"})


def cmd_sessions(args: argparse.Namespace, settings: Settings) -> int:
    """Dispatch ``sessions`` subcommands."""
    from agentgraph.persistence.store import home_is_read_only, open_index, open_store

    # Commands that only read serve a read-only home (a backup, a shared volume): the
    # store is opened without set-up, migrations or upkeep.
    read_only = args.sessions_command in READ_ONLY_COMMANDS and home_is_read_only(settings)
    if args.sessions_command == "list":
        # The index alone: listing must not pay for loading the checkpointer stack.
        with open_index(settings, read_only=read_only) as index:
            return _list(index, args)
    handler = COMMANDS.get(args.sessions_command)
    if handler is None:
        return EXIT_USAGE
    if getattr(args, "id", None) is not None:
        check_thread_id(args.id, "session id")
    with open_store(settings, read_only=read_only) as store:
        return handler(store, settings, args)
