"""Terminal rendering of agent events (rich on stderr/stdout)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from agentgraph.protocol.events import (
    HOOK_OUTCOME_BLOCKED,
    HOOK_OUTCOME_ERROR,
    HOOK_OUTCOME_OK,
    Answer,
    BaseEvent,
    Compaction,
    Diff,
    Hook,
    Notice,
    Retry,
    SubagentDone,
    SubagentStarted,
    SubagentTasks,
    SubagentTool,
    TextDelta,
    Todos,
    ToolCall,
    ToolResult,
    event_to_show,
)
from agentgraph.session.interactive import todo_list_text

TOOL_ARGS_PREVIEW_CHARS = 80
TOOL_RESULT_PREVIEW_CHARS = 100
BASH_TOOL_NAME = "run_bash"
# How run_bash's last line starts (agentgraph/capabilities/tools/bash.py, format_bash_result).
BASH_STATUS_PREFIXES = ("[exit code ", "[timed out after ")
# A diff longer than this is folded in the turn's output ("/diff" shows all of it).
DIFF_FOLD_LINES = 40
DIFF_LINE_STYLES = (("+++", "bold"), ("---", "bold"), ("@@", "cyan"), ("+", "green"), ("-", "red"))
# Lines of a subagent's final text shown under its call (the model gets all of it).
SUBAGENT_RESULT_PREVIEW_LINES = 8
SUBAGENT_TOOL_NAME = "call_subagent"
# A hook's command is cut to this many characters on its line (its end names the script).
HOOK_COMMAND_SHOWN_CHARS = 40
# What a hook did, by the ``outcome`` of its event (any other outcome: it said something).
HOOK_OUTCOME_VERBS = {HOOK_OUTCOME_BLOCKED: "blocked", HOOK_OUTCOME_ERROR: "failed"}
# The header note of an approved edit's diff (the approval question showed it).
APPROVED_NOTE = "the diff approved above"


def short_args(args: Any) -> str:
    """One-line preview of tool arguments."""
    if isinstance(args, dict):
        parts = []
        for key, value in args.items():
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            text = " ".join(str(text).split())
            parts.append(f"{key}={text[:40]}" if len(args) > 1 else text)
        joined = ", ".join(parts)
    else:
        joined = str(args)
    if len(joined) > TOOL_ARGS_PREVIEW_CHARS:
        joined = joined[: TOOL_ARGS_PREVIEW_CHARS - 1] + "…"
    return joined


def _preview(line: str) -> str:
    return (
        line
        if len(line) <= TOOL_RESULT_PREVIEW_CHARS
        else line[: TOOL_RESULT_PREVIEW_CHARS - 1] + "…"
    )


def _command_summary(lines: list[str]) -> str | None:
    """A shell command's result by its last output line and its status line.

    A command's verdict comes last (a test run's summary, a build's error, a traceback's
    exception), while its first line is often a banner. None when ``lines`` does not end
    with run_bash's status line (an approval refused, a tool error).
    """
    if not lines or not lines[-1].startswith(BASH_STATUS_PREFIXES):
        return None
    status = lines[-1]
    output = lines[:-1]
    last = next((ln.strip() for ln in reversed(output) if ln.strip()), None)
    if last is None:
        return f"(no output) {status}"
    more = f" (+{len(output) - 1} lines)" if len(output) > 1 else ""
    return f"{_preview(last)} {status}{more}"


def result_summary(content: str, status: str | None, name: str | None = None) -> str:
    """One-line summary of a tool result: its first line, or for a shell command its
    last output line and exit status."""
    lines = content.splitlines()
    summary = _command_summary(lines) if name == BASH_TOOL_NAME else None
    if summary is None:
        first = next((ln.strip() for ln in lines if ln.strip()), "(no output)")
        more = f" (+{len(lines) - 1} lines)" if len(lines) > 1 else ""
        summary = f"{_preview(first)}{more}"
    prefix = "error: " if status == "error" and not summary.lower().startswith("error") else ""
    return f"{prefix}{summary}"


class EventPrinter:
    """Prints streamed events; tokens go to ``out``, progress to ``err``.

    Events enter as the agent emits them (dicts) or already typed; each is typed once,
    on entry (:func:`~agentgraph.protocol.events.to_event`), and rendered by its model.
    """

    def __init__(
        self,
        out: Console,
        err: Console,
        *,
        stream_tokens: bool,
        number_output: Callable[[str], int] | None = None,
    ) -> None:
        self.out = out
        self.err = err
        self.stream_tokens = stream_tokens
        # Tool call id -> the number ``/show N`` opens its output by, shown on its line.
        self.number_output = number_output
        self._mid_line = False
        # Diffs arrive while their tool runs; they are shown under its result line.
        self._open_calls: set[str] = set()
        self._held_diffs: dict[str, list[Diff]] = {}
        # Tool call id -> the diff its approval question showed: the same diff is not
        # printed a second time when the approved edit reports it.
        self.previewed: dict[str, str] = {}
        # Running subagents (their ids), and each finished one's final text by the
        # call_subagent call it answers: shown as its result instead of the tool result.
        self._subagents: set[str] = set()
        self._subagent_text: dict[str, str] = {}

    def _end_line(self) -> None:
        if self._mid_line:
            self.out.file.write("\n")
            self.out.file.flush()
            self._mid_line = False

    def __call__(self, event: Mapping[str, Any] | BaseEvent) -> None:
        """Print one event (the agent's dict of it, or the typed event)."""
        typed = event_to_show(event)
        if typed is not None:
            self.render(typed)

    def render(self, event: BaseEvent) -> None:
        """Print one typed event; types this printer does not show are skipped."""
        match event:
            case TextDelta() if self.stream_tokens:
                self.out.file.write(event.text)
                self.out.file.flush()
                self._mid_line = not event.text.endswith("\n")
            case ToolCall():
                self._end_line()
                self._open_calls.add(event.id)
                name, args = escape(event.name), escape(short_args(event.args))
                self.err.print(f"[cyan]⏺ {name}[/]([dim]{args}[/])")
            case ToolResult():
                self._print_result(event)
            case Diff():
                call_id = str(event.tool_call_id)
                if call_id in self._open_calls:
                    self._held_diffs.setdefault(call_id, []).append(event)
                else:
                    self._end_line()
                    self._print_diff(event)
            case Notice() | Retry():
                self._end_line()
                self.err.print(f"[yellow]{escape(event.text)}[/]")
            case Hook():  # a user's hook said something, blocked or failed
                self._end_line()
                style = "dim" if event.outcome == HOOK_OUTCOME_OK else "yellow"
                self.err.print(f"[{style}]  ⚑ {escape(hook_line(event))}[/]")
            case Compaction():
                self._end_line()
                self.err.print(f"[magenta]{escape(compaction_line(event))}[/]")
            case Todos():  # todo_write changed the list: show all of it
                self._end_line()
                self.err.print(f"[blue]{escape(todo_list_text(event))}[/]")
            case SubagentStarted():
                self._end_line()
                self._subagents.add(event.id)
                where = " (background)" if event.background else ""
                self.err.print(f"[cyan]  ↳ {event.id}{where}: {escape(event.task)}[/]")
            case SubagentTool():
                self._end_line()
                # Parallel subagents' lines interleave: each then names its subagent.
                many = len(self._subagents) > 1
                who = f"[{event.id.rpartition('-')[2]}] " if many else ""
                line = f"{who}{event.name} {short_args(event.args)}".rstrip()
                elapsed = f"{event.elapsed_s:.1f}s"
                self.err.print(f"[dim]    ↳ {escape(line)} · {elapsed}[/]", soft_wrap=True)
            case SubagentDone():
                self._print_subagent_done(event)
            case SubagentTasks():
                self._end_line()
                for line in subagent_task_lines(event.tasks):
                    self.err.print(f"[yellow]{escape(line)}[/]")
            case Answer():
                self._end_line()

    def _print_result(self, event: ToolResult) -> None:
        """A tool's result line (a subagent's final text for its call), then the diffs
        held while it ran."""
        style = "red" if event.status == "error" else "dim"
        number = f"[/show {self.number_output(event.id)}]" if self.number_output else ""
        text = self._subagent_text.pop(event.id, None)
        if text is not None and event.name == SUBAGENT_TOOL_NAME:
            self.err.print(subagent_result_text(text, style), end="", soft_wrap=True)
            if number:
                self.err.print(f"    [dim]{escape(number)}[/]")
        else:
            summary = result_summary(event.content, event.status, event.name)
            tail = f"[dim] {escape(number)}[/]" if number else ""
            self.err.print(f"  [{style}]⎿ {escape(summary)}[/]{tail}")
        self._open_calls.discard(event.id)
        for diff in self._held_diffs.pop(event.id, []):
            self._print_diff(diff)

    def _print_subagent_done(self, event: SubagentDone) -> None:
        self._end_line()
        self._subagents.discard(event.id)
        style = "dim" if event.ok else "red"
        self.err.print(f"[{style}]  ↳ {escape(subagent_done_line(event))}[/]")
        if event.background:  # its call was answered long ago: the text now
            self.err.print(subagent_result_text(event.result, style), end="", soft_wrap=True)
        else:
            self._subagent_text[event.tool_call_id] = event.result

    def _print_diff(self, event: Diff) -> None:
        """A diff event: in full, or only its header when the approval showed the same."""
        preview = self.previewed.get(str(event.tool_call_id))
        if preview is not None and same_hunks(preview, event.diff):
            print_diff(self.err, event.model_copy(update={"diff": "", "note": APPROVED_NOTE}))
            return
        print_diff(self.err, event, fold_at=DIFF_FOLD_LINES)

    def finish(self) -> None:
        """Terminate a partially printed line; show diffs whose result never came."""
        self._end_line()
        for diffs in self._held_diffs.values():
            for diff in diffs:
                self._print_diff(diff)
        self._held_diffs.clear()


def hook_line(event: Hook) -> str:
    """One line for a ``hook`` event: ``PreToolUse hook blocked (guard.sh): reason``."""
    verb = HOOK_OUTCOME_VERBS.get(event.outcome, "said")
    command = " ".join(event.command.split())
    if len(command) > HOOK_COMMAND_SHOWN_CHARS:  # its end names the script
        command = "…" + command[-(HOOK_COMMAND_SHOWN_CHARS - 1) :]
    return f"{event.event} hook {verb} ({command}): {event.text}".rstrip(": ")


def subagent_done_line(event: SubagentDone) -> str:
    """``subagent-1a2b3c4d done · 2 steps · 3.4s · 1,234 tokens`` for a ``subagent_done``."""
    tokens = event.input_tokens + event.output_tokens
    parts = [
        f"{event.id} {event.status or ('done' if event.ok else 'failed')}",
        f"{event.loops} step" + ("" if event.loops == 1 else "s"),
        f"{event.elapsed_s:.1f}s",
    ]
    if tokens:
        parts.append(f"{tokens:,} tokens")
    return " · ".join(parts)


def subagent_task_lines(tasks: list[Any]) -> list[str]:
    """The turn-end list of background subagents whose result the model has not had."""
    lines = ["background subagents whose results the model has not had yet:"]
    for task in tasks:
        elapsed = float(task.get("elapsed_s") or 0.0)
        what = f"{task.get('id')} {task.get('status')} · {elapsed:.1f}s"
        lines.append(f"  {what} — {task.get('task')}")
    return lines


def subagent_result_text(text: str, style: str) -> Text:
    """A subagent's final text under its call: the first lines, then how many more."""
    lines = text.splitlines() or ["(no answer)"]
    shown = lines[:SUBAGENT_RESULT_PREVIEW_LINES]
    out = Text()
    for i, line in enumerate(shown):
        out.append(("  ⎿ " if i == 0 else "    ") + line + "\n", style=style)
    if len(lines) > len(shown):
        out.append(f"    … +{len(lines) - len(shown)} lines\n", style="dim")
    return out


def _hunks(diff: str) -> list[str]:
    """A unified diff's hunk lines (from the first ``@@``), without "no newline" markers."""
    lines = diff.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("@@")), len(lines))
    return [line for line in lines[start:] if not line.startswith("\\")]


def same_hunks(first: str, second: str) -> bool:
    """Whether two unified diffs of a file change the same lines (headers aside)."""
    hunks = _hunks(first)
    return bool(hunks) and hunks == _hunks(second)


def diff_text(diff: str, *, fold_at: int | None = None, indent: str = "    ") -> Text:
    """A unified diff coloured line by line, folded after ``fold_at`` lines."""
    lines = diff.splitlines()
    shown = lines if fold_at is None else lines[:fold_at]
    text = Text()
    for line in shown:
        style = next((s for prefix, s in DIFF_LINE_STYLES if line.startswith(prefix)), "")
        text.append(indent + line + "\n", style=style)
    hidden = len(lines) - len(shown)
    if hidden > 0:
        text.append(f"{indent}… {hidden} more lines (/diff shows them all)\n", style="dim")
    return text


def print_diff(
    console: Console, event: Diff | Mapping[str, Any], *, fold_at: int | None = None
) -> None:
    """Print one ``diff`` event (see docs/events.md): a header, then the coloured diff."""
    diff = event if isinstance(event, Diff) else Diff.model_validate({**event, "type": "diff"})
    note = f" ({diff.note})" if diff.note else ""
    console.print(
        Text.assemble(
            ("    ", ""),
            (diff.path, "bold"),
            (f" +{diff.added}", "green"),
            (f" -{diff.removed}", "red"),
            (note, "dim"),
        ),
        soft_wrap=True,
    )
    if diff.diff:
        console.print(diff_text(diff.diff, fold_at=fold_at), end="", soft_wrap=True)


def nothing_to_compact_line(compactor: object, *, fallback: str) -> str:
    """The line for a compaction that was not applied, with the compactor's reason.

    Args:
        compactor: The agent's compactor (its ``last_skipped`` says why, when known).
        fallback: The line when it gives no reason.
    """
    why = getattr(compactor, "last_skipped", None)
    return f"nothing to compact: {why}" if why else fallback


# What the status line adds for a compaction that was not the usual one at the threshold.
COMPACTION_NOTES = {"distil": " — what masking hid, distilled into the summary"}
SUMMARY_CUT_NOTE = " — the summary was cut to fit (search_history finds the rest)"
SPIRAL_NOTE = " — no progress since the last compaction: the model was told to stop repeating"


def compaction_line(record: Compaction | Mapping[str, Any]) -> str:
    """``Compacted: 51,204 → 8,113 tokens (−84.2%); files: a.py, b.py``.

    Args:
        record: A ``compaction`` event, or a compaction record of the session.
    """
    event = (
        record
        if isinstance(record, Compaction)
        else Compaction.model_validate({**record, "type": "compaction"})
    )
    before, after = event.tokens_before, event.tokens_after
    pct = (after - before) / before * 100 if before else 0.0
    tail = f"; files: {', '.join(event.files)}" if event.files else ""
    failed = " (fallback: summary failed)" if event.fallback else ""
    why = COMPACTION_NOTES.get(event.trigger, "")
    why += SUMMARY_CUT_NOTE if event.summary_cut else ""
    why += SPIRAL_NOTE if event.course_change else ""
    change = f"{pct:+.1f}%".replace("-", "−")
    return f"Compacted: {before:,} → {after:,} tokens ({change}){tail}{failed}{why}"
