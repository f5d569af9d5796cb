"""The session picker: ``agentgraph -r`` without an id, and ``/resume``.

On a terminal it is a small inline prompt_toolkit list (↑/↓ or the row's number, Enter
picks, Esc or Ctrl-C cancels); on piped input a numbered list and a line with the
number (an empty line or end of input cancels).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from rich.console import Console
from rich.markup import escape

from agentgraph.session.catalog import SessionInfo

PICKER_MAX_ROWS = 20
PICKER_TITLE_CHARS = 50
SECONDS_PER_MINUTE = 60
SECONDS_PER_HOUR = 3_600
SECONDS_PER_DAY = 86_400


def age(ts: float, now: float | None = None) -> str:
    """``5m``, ``3h``, ``2d`` ago (``now`` under a minute)."""
    seconds = max((time.time() if now is None else now) - ts, 0)
    if seconds < SECONDS_PER_MINUTE:
        return "now"
    if seconds < SECONDS_PER_HOUR:
        return f"{int(seconds // SECONDS_PER_MINUTE)}m ago"
    if seconds < SECONDS_PER_DAY:
        return f"{int(seconds // SECONDS_PER_HOUR)}h ago"
    return f"{int(seconds // SECONDS_PER_DAY)}d ago"


def row_text(n: int, info: SessionInfo) -> str:
    """``3. Fix the parser  ·  2h ago  ·  14 msgs  ·  /home/me/proj``."""
    title = info.title or "(untitled)"
    if len(title) > PICKER_TITLE_CHARS:
        title = title[: PICKER_TITLE_CHARS - 1] + "…"
    return (
        f"{n}. {title}  ·  {age(info.updated_at)}  ·  {info.message_count} msgs"
        f"  ·  {info.workspace}"
    )


def _pick_interactive(rows: list[SessionInfo]) -> SessionInfo | None:
    from prompt_toolkit.application import Application
    from prompt_toolkit.formatted_text import StyleAndTextTuples
    from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
    from prompt_toolkit.layout import Layout
    from prompt_toolkit.layout.containers import Window
    from prompt_toolkit.layout.controls import FormattedTextControl

    selected = [0]

    def lines() -> StyleAndTextTuples:
        out: StyleAndTextTuples = [("bold", "Resume which session? (↑/↓, Enter; Esc cancels)\n")]
        for i, info in enumerate(rows):
            marker, style = ("› ", "reverse") if i == selected[0] else ("  ", "")
            out.append((style, marker + row_text(i + 1, info) + "\n"))
        return out

    keys = KeyBindings()

    @keys.add("up")
    def _up(event: KeyPressEvent) -> None:
        selected[0] = (selected[0] - 1) % len(rows)

    @keys.add("down")
    def _down(event: KeyPressEvent) -> None:
        selected[0] = (selected[0] + 1) % len(rows)

    @keys.add("enter")
    def _enter(event: KeyPressEvent) -> None:
        event.app.exit(result=selected[0])

    @keys.add("escape", eager=True)
    @keys.add("c-c")
    @keys.add("c-d")
    def _cancel(event: KeyPressEvent) -> None:
        event.app.exit(result=None)

    for digit in range(1, min(len(rows), 9) + 1):

        @keys.add(str(digit))
        def _number(event: KeyPressEvent, n: int = digit) -> None:
            event.app.exit(result=n - 1)

    app: Application[int | None] = Application(
        layout=Layout(Window(FormattedTextControl(lines, focusable=True), wrap_lines=False)),
        key_bindings=keys,
        full_screen=False,
        erase_when_done=True,
    )
    choice = app.run()
    return rows[choice] if choice is not None else None


def _pick_from_lines(
    rows: list[SessionInfo], console: Console, read: Callable[[str], str]
) -> SessionInfo | None:
    for i, info in enumerate(rows):
        console.print(escape(row_text(i + 1, info)))
    try:
        answer = read("number (empty cancels): ").strip()
    except (EOFError, KeyboardInterrupt):
        return None
    if answer.isdigit() and 1 <= int(answer) <= len(rows):
        return rows[int(answer) - 1]
    return None


def pick_session(
    rows: list[SessionInfo],
    console: Console,
    *,
    read: Callable[[str], str] = input,
    interactive: bool | None = None,
) -> SessionInfo | None:
    """Let the user pick one of ``rows`` (most recent first); None when cancelled.

    Args:
        rows: Sessions to offer (the first PICKER_MAX_ROWS are shown).
        console: Where the list goes when not interactive (stderr).
        read: Reads a line when not interactive.
        interactive: Use the arrow-key list (default: when stdin is a terminal).
    """
    rows = rows[:PICKER_MAX_ROWS]
    if not rows:
        return None
    if interactive is None:
        interactive = sys.stdin.isatty()
    if interactive:
        return _pick_interactive(rows)
    return _pick_from_lines(rows, console, read)
