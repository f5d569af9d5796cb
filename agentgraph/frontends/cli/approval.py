"""The REPL side of approvals: show the question of a LangGraph interrupt, read the answer.

The graph stops at an ``approval`` interrupt (see ``agentgraph/security/approvals.py``) before
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
PLAN_QUESTION = "accept this plan? [y/N] "
PLAN_SHOWN_MAX_CHARS = 20_000
ALWAYS_WORDS = frozenset({"a", "always"})
YES_WORDS = frozenset({"y", "yes"})
NO_WORDS = frozenset({"n", "no"})
ANSWER_PUNCTUATION = ",.:;!-"


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
    if "plan" in request:
        console.print(Text("the agent presents its plan:", style="yellow"))
        plan = str(request.get("plan", ""))
        if len(plan) > PLAN_SHOWN_MAX_CHARS:
            plan = plan[:PLAN_SHOWN_MAX_CHARS] + "… (plan cut)"
        for line in plan.splitlines():
            console.print(Text("  " + visible(line)))
        console.print(
            Text("y: accept (edits then run; commands ask) · n <what to change>", style="dim")
        )
        return
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


def parse_answer(text: str, *, always_offered: bool) -> bool | dict[str, Any]:
    """The resume value for a typed answer.

    ``y``/``yes`` approve (True); ``a``/``always`` approve and store the offered rule
    (``{"approved": True, "always": True}``; a plain yes when none is offered);
    ``n <reason>`` declines with a reason for the model (``{"approved": False,
    "reason": …}``); anything else declines (False).
    """
    word, _, rest = text.strip().partition(" ")
    word = word.lower().rstrip(ANSWER_PUNCTUATION)  # "no, use make" is "n use make"
    if word in YES_WORDS and not rest.strip():
        return True
    if word in ALWAYS_WORDS and not rest.strip():
        return {"approved": True, "always": True} if always_offered else True
    if word in NO_WORDS and rest.strip():
        return {"approved": False, "reason": rest.strip()}
    return False


def ask_approval(
    console: Console, read: Callable[[str], str], request: Mapping[str, Any]
) -> bool | dict[str, Any]:
    """Show ``request`` and ask ``allow? [y/N]`` on the REPL's input (a rule on offer is
    named on the line before).

    Only ``y``/``yes`` (or ``a``/``always``) approves; end of input or Ctrl-C mean no.
    ``n <reason>`` declines and hands the reason to the model.

    Args:
        console: Where the request is shown (stderr).
        read: The REPL's line reader; it prints the question itself (plain text).
        request: The interrupt payload.

    Returns:
        The resume value: True, False, or a dict (see :func:`parse_answer`).
    """
    show_request(console, request)
    rule = request.get("rule")
    offered = isinstance(rule, Mapping) and bool(rule.get("pattern"))
    if offered and isinstance(rule, Mapping):
        shown = visible(f"{rule.get('tool')}: {rule.get('pattern')}")
        console.print(
            Text(f"a = always allow {shown} here · n <reason> tells the agent why", style="dim")
        )
    question = PLAN_QUESTION if "plan" in request else APPROVAL_QUESTION
    try:
        typed = read(question)
    except (EOFError, KeyboardInterrupt):
        typed = ""
    answer = parse_answer(typed, always_offered=offered)
    approved = answer is True or (isinstance(answer, dict) and answer.get("approved") is True)
    always = isinstance(answer, dict) and answer.get("always") is True
    console.print(
        Text("always allowed" if always else "approved" if approved else "declined", style="dim")
    )
    return answer
