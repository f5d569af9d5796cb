"""The REPL side of approvals: show the question of a LangGraph interrupt, read the answer.

The graph stops at an ``approval`` interrupt (see ``agentgraph/approvals.py``) before
any tool of the step runs; the REPL asks here, on its main thread, after the turn's
output so far is printed and its spinner stopped, so the question is the last thing on
screen; then it resumes the graph with the answer.

The command shown is the one that will run, byte for byte, with control characters
made visible: a model could otherwise hide part of a command behind a carriage return
or a terminal escape sequence. Nothing the model wrote is ever read as rich markup.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rich.console import Console
from rich.text import Text

SHOWN_COMMAND_MAX_CHARS = 2000
APPROVAL_QUESTION = "allow? [y/N] "


def visible(command: str) -> str:
    """``command`` with control characters (except newline and tab) shown as escapes."""
    out = []
    for ch in command:
        if ch in "\n\t" or (ch.isprintable() and ch != "\x7f"):
            out.append(ch)
        else:
            out.append(ch.encode("unicode_escape").decode("ascii"))
    text = "".join(out)
    if len(text) > SHOWN_COMMAND_MAX_CHARS:
        more = len(text) - SHOWN_COMMAND_MAX_CHARS
        text = text[:SHOWN_COMMAND_MAX_CHARS] + f"… ({more} more characters)"
    return text


def show_request(console: Console, request: Mapping[str, Any]) -> None:
    """Print what an approval question is about (the command, or the path and diff)."""
    tool = str(request.get("tool", "a tool"))
    if "command" in request:
        reason = request.get("reason")
        # Why this command asks when the user did not choose to be asked (no sandbox).
        why = f" ({visible(str(reason))}, so it runs with your user's rights)" if reason else ""
        console.print(Text(f"{tool} wants to run{why}:", style="yellow"))
        console.print(Text("  " + visible(str(request.get("command", "")))))
        return
    if "memory" in request:
        console.print(
            Text(
                f"{tool} wants to remember (in the prompt of later sessions here):",
                style="yellow",
            )
        )
        console.print(Text("  " + visible(str(request.get("memory", "")))))
        return
    if "memory_id" in request:
        memory_id = visible(str(request.get("memory_id", "")))
        console.print(Text(f"{tool} wants to forget memory [{memory_id}]", style="yellow"))
        return
    console.print(
        Text(f"{tool} wants to change {visible(str(request.get('path', '')))}:", style="yellow")
    )
    diff = request.get("diff")
    if not diff:
        console.print(Text("  (no preview: the file cannot be read or the edit may not apply)"))
        return
    for line in str(diff).splitlines():
        style = "green" if line.startswith("+") else "red" if line.startswith("-") else "dim"
        console.print(Text(visible(line), style=style))


def ask_approval(console: Console, read: Callable[[str], str], request: Mapping[str, Any]) -> bool:
    """Show ``request`` and ask ``allow? [y/N]`` on the REPL's input.

    Only ``y``/``yes`` approves; end of input or Ctrl-C mean no.

    Args:
        console: Where the request is shown (stderr).
        read: The REPL's line reader; it prints the question itself (plain text).
        request: The interrupt payload.

    Returns:
        Whether the user approved.
    """
    show_request(console, request)
    try:
        answer = read(APPROVAL_QUESTION)
    except (EOFError, KeyboardInterrupt):
        answer = ""
    approved = answer.strip().lower() in ("y", "yes")
    console.print(Text("approved" if approved else "declined", style="dim"))
    return approved
