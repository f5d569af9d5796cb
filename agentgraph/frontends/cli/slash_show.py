"""``/show [N]``: a tool output whole, as the session stored it, through a pager.

The REPL folds each tool output to one line ending in ``[/show N]``; N is the output's
place among the session's tool outputs (the first is 1), so the numbers continue across
turns and resumes. The text shown is the stored result, which the context engine never
changes (masking and summaries only shape the prompt), or, when the result was cut for
the history, the full output saved beside the session. Control characters in it (a
command's colours, cursor moves) are shown as escapes, never sent to the terminal.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from rich.text import Text

from agentgraph.errors import AgentGraphError
from agentgraph.frontends.cli.render import short_args
from agentgraph.frontends.cli.slash import ReplContext, command
from agentgraph.session.commands import full_tool_output, tool_results, visible

OUTPUTS_KEY = "tool_outputs"
# An output longer than the screen less this many lines goes through the pager.
PAGER_MARGIN_LINES = 2
_NUMBER_RE = re.compile(r"[0-9]{1,9}")


@dataclass
class ToolOutputs:
    """The numbers the REPL showed for tool outputs, per session: number -> call id."""

    shown: dict[tuple[str, int], str] = field(default_factory=dict)
    next_number: int = 1
    thread_id: str = ""


def number_outputs(ctx: ReplContext) -> Callable[[str], int]:
    """Number the outputs of the turn about to run, after those the session stored.

    Returns:
        A function giving each tool call id its number (for the REPL's printer).
    """
    outputs: ToolOutputs = ctx.extras.setdefault(OUTPUTS_KEY, ToolOutputs())
    outputs.thread_id = ctx.thread_id
    outputs.next_number = len(tool_results(ctx.agent.messages(ctx.thread_id))) + 1

    def number(call_id: str) -> int:
        n = outputs.next_number
        outputs.next_number += 1
        outputs.shown[(outputs.thread_id, n)] = call_id
        return n

    return number


def _find(
    ctx: ReplContext, messages: Sequence[BaseMessage], number: int | None
) -> tuple[int, ToolMessage] | str:
    """The stored output ``number`` (the last one when None), or why there is none."""
    results = tool_results(messages)
    if not results:
        return "no tool output in this session yet"
    if number is None:
        return len(results), results[-1]
    outputs: ToolOutputs | None = ctx.extras.get(OUTPUTS_KEY)
    call_id = outputs.shown.get((ctx.thread_id, number)) if outputs else None
    if call_id is not None:  # shown in this REPL: found by its call, wherever it is stored
        found = next((m for m in results if m.tool_call_id == call_id), None)
        if found is None:
            return f"output {number} was not kept (its turn was cancelled)"
        return number, found
    if not 1 <= number <= len(results):
        return f"no output {number}: this session has outputs 1-{len(results)}"
    return number, results[number - 1]


def _call_line(messages: Sequence[BaseMessage], result: ToolMessage) -> str:
    """``name(args)`` of the call ``result`` answers."""
    for message in messages:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                if call.get("id") == result.tool_call_id:
                    return f"{call['name']}({short_args(call['args'])})"
    return str(result.name or "tool")


def show_output(ctx: ReplContext, number: int | None) -> None:
    """Print tool output ``number`` (the last when None) whole; paged when longer than the
    terminal."""
    messages = ctx.agent.messages(ctx.thread_id)
    found = _find(ctx, messages, number)
    if isinstance(found, str):
        ctx.console.print(found, markup=False)
        return
    n, result = found
    body = visible(full_tool_output(ctx.agent, ctx.thread_id, result)).rstrip("\n")
    status = " (error)" if result.status == "error" else ""
    header = f"output {n}: {_call_line(messages, result)}{status}"
    header += f" — {len(body.splitlines())} lines"
    console = ctx.console
    text = Text(f"{header}\n{body}")
    if console.is_terminal and len(body.splitlines()) > console.height - PAGER_MARGIN_LINES:
        with console.pager():
            console.print(text, highlight=False, soft_wrap=True)
        return
    console.print(text, highlight=False, soft_wrap=True)


def show_last(ctx: ReplContext) -> None:
    """The last tool output (Ctrl-O at the prompt); a failure is a line, not an exit."""
    try:
        show_output(ctx, None)
    except (AgentGraphError, sqlite3.Error) as exc:
        ctx.console.print(f"show: {exc}", markup=False)


@command("show", "/show [N]", "a tool output whole (the last, or number N); Ctrl-O: the last")
def _show(ctx: ReplContext, rest: str) -> None:
    number: int | None = None
    if rest.strip():
        text = rest.strip().lstrip("#")
        if not _NUMBER_RE.fullmatch(text) or int(text) < 1:
            ctx.console.print("usage: /show [N] (N: the number on an output's line)", markup=False)
            return
        number = int(text)
    show_output(ctx, number)
