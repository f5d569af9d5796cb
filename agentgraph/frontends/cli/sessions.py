"""``agentgraph sessions …``: list, show, delete, export, import, clean and prune sessions."""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import datetime
from pathlib import Path

from rich.table import Table

from agentgraph.config import CLEANUP_DAYS_DEFAULT, Settings
from agentgraph.errors import EXIT_USAGE, AgentGraphError
from agentgraph.frontends.cli.common import process_environment, resolve_workspace
from agentgraph.frontends.cli.consoles import make_console
from agentgraph.session.catalog import (
    SessionCatalog,
    SessionInfo,
    check_session_id,
    list_sessions,
    read_transcript,
)

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


def _show(catalog: SessionCatalog, args: argparse.Namespace) -> int:
    info = catalog.resolve(args.id)
    payload = catalog.details(info)
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


def _compact(catalog: SessionCatalog, args: argparse.Namespace) -> int:
    from agentgraph.frontends.cli.render import compaction_line, nothing_to_compact_line

    info = catalog.resolve(args.id)
    outcome = catalog.compact(info.thread_id, focus=args.focus)
    record = outcome.record
    err = make_console(stderr=True)
    if record is None:
        line = nothing_to_compact_line(outcome.compactor, fallback="nothing to compact")
        err.print(line, markup=False)
        return 0
    if record.get("fallback"):
        err.print(f"summary failed: {record.get('reason')}; the session is unchanged", markup=False)
        return 1
    err.print(compaction_line(record), markup=False)
    return 0


def _delete(catalog: SessionCatalog, args: argparse.Namespace) -> int:
    info = catalog.resolve(args.id)
    catalog.ensure_not_in_use(info.thread_id, "delete")  # before asking; taken below
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
    count = catalog.delete(info.thread_id)
    extra = f" (and {count - 1} subagent sessions)" if count > 1 else ""
    make_console(stderr=True).print(f"deleted {info.thread_id[:12]}{extra}", markup=False)
    return 0


def _export(catalog: SessionCatalog, args: argparse.Namespace) -> int:
    info = catalog.resolve(args.id)
    exported = catalog.export(info, args.format, process_environment())
    text = exported.text
    if args.output:
        path = Path(args.output).expanduser()
        try:
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise AgentGraphError(f"cannot write {path}: {exc.strerror}") from None
        make_console(stderr=True).print(
            f"exported {exported.message_count} messages of {info.thread_id[:12]} to {path}",
            markup=False,
        )
    else:
        sys.stdout.write(text)
    return 0


def _import(catalog: SessionCatalog, args: argparse.Namespace) -> int:
    from agentgraph.session.transcript import IMPORT_PROBLEMS_SHOWN

    imported = read_transcript(Path(args.file).expanduser())
    err = make_console(stderr=True)
    for problem in imported.problems[:IMPORT_PROBLEMS_SHOWN]:
        err.print(f"warning: {problem}", markup=False)
    if len(imported.problems) > IMPORT_PROBLEMS_SHOWN:
        err.print(f"warning: {len(imported.problems) - IMPORT_PROBLEMS_SHOWN} more", markup=False)
    existing = catalog.find_imported(imported)
    if existing is not None:
        err.print(
            f"already imported as session {existing.thread_id} (resume with: "
            f"agentgraph --resume {existing.thread_id[:12]})",
            markup=False,
        )
        return 0
    info = catalog.import_transcript(imported)
    err.print(
        f"imported {info.message_count} messages as session {info.thread_id} "
        f"(resume with: agentgraph --resume {info.thread_id[:12]})",
        markup=False,
    )
    return 0


def _clean(catalog: SessionCatalog, args: argparse.Namespace) -> int:
    settings = catalog.settings
    if args.older_than is not None:
        days = parse_age_days(args.older_than)
    else:
        days = float(settings.cleanup_days or CLEANUP_DAYS_DEFAULT)
    result = catalog.clean(days, dry_run=args.dry_run)
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


def _prune(catalog: SessionCatalog, _args: argparse.Namespace) -> int:
    stats = catalog.prune()
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


def _list(settings: Settings, args: argparse.Namespace) -> int:
    workspace = None
    if not args.all:
        workspace = str(resolve_workspace(getattr(args, "workspace", None)))
    rows = list_sessions(settings, workspace=workspace, with_subagents=args.all)
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
    if args.sessions_command == "list":
        return _list(settings, args)
    handler = COMMANDS.get(args.sessions_command)
    if handler is None:
        return EXIT_USAGE
    if getattr(args, "id", None) is not None:
        check_session_id(args.id)
    writes = args.sessions_command not in READ_ONLY_COMMANDS
    with SessionCatalog.open(settings, writes=writes) as catalog:
        return handler(catalog, args)
