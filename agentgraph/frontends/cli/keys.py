"""Keys of the REPL's input line, beyond prompt_toolkit's defaults.

Enter sends the message. A newline goes in with Alt-Enter (Escape then Enter, which
every terminal can send), with Shift-Enter where the terminal sends it as its own key
(xterm's ``modifyOtherKeys``, or a terminal set to send the "CSI u" encoding or Escape
Enter for it; most terminals send Shift-Enter as a plain Enter), or with a ``\\`` typed
at the end of the line before Enter (the backslash is removed). Ctrl-O shows the last
tool output whole (``/show``), as in Claude Code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

CONTINUATION_MARK = "\\"
# What terminals that tell Shift-Enter from Enter send for it: xterm's modifyOtherKeys
# and the "CSI u" encoding. prompt_toolkit reads both as a plain Enter.
SHIFT_ENTER_SEQUENCES = ("\x1b[27;2;13~", "\x1b[13;2u")


def _read_shift_enter_as_alt_enter() -> None:
    """Make prompt_toolkit's terminal parser read Shift-Enter as Alt-Enter (a newline)."""
    from prompt_toolkit.input.ansi_escape_sequences import ANSI_SEQUENCES
    from prompt_toolkit.keys import Keys

    for sequence in SHIFT_ENTER_SEQUENCES:
        ANSI_SEQUENCES[sequence] = (Keys.Escape, Keys.ControlM)


def input_key_bindings(show_last: Callable[[], None] | None = None) -> KeyBindings:
    """The REPL's own keys: newline insertion (Alt-Enter, Shift-Enter, a trailing ``\\``)
    and Ctrl-O.

    Args:
        show_last: What Ctrl-O runs (above the prompt, which comes back after it).

    Returns:
        Bindings for ``PromptSession(key_bindings=...)``; they win over the defaults.
    """
    from prompt_toolkit.filters import Condition
    from prompt_toolkit.key_binding import KeyBindings

    _read_shift_enter_as_alt_enter()
    bindings = KeyBindings()

    @bindings.add("escape", "enter")
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.newline(copy_margin=False)

    @Condition
    def _continued() -> bool:
        from prompt_toolkit.application import get_app

        buffer = get_app().current_buffer
        return buffer.document.is_cursor_at_the_end and buffer.text.endswith(CONTINUATION_MARK)

    @bindings.add("enter", filter=_continued)
    def _continue_line(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        buffer.delete_before_cursor(len(CONTINUATION_MARK))
        buffer.newline(copy_margin=False)

    if show_last is not None:
        shown = show_last

        @bindings.add("c-o")
        def _show_last(event: KeyPressEvent) -> None:
            from prompt_toolkit.application import run_in_terminal

            run_in_terminal(shown)

    return bindings
