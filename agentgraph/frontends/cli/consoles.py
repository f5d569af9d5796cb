"""Rich consoles of the CLI: rendered for a terminal, unwrapped for a pipe or a file."""

from __future__ import annotations

from rich.console import Console

# Output to a pipe or a file is never wrapped: one record stays one line for grep and
# scripts (Rich would otherwise wrap at 80 columns, splitting titles and messages).
PIPE_WIDTH_COLUMNS = 1_000


def make_console(*, stderr: bool = False) -> Console:
    """A console for stdout (or stderr) that wraps only on a terminal.

    Args:
        stderr: Write to standard error instead of standard output.

    Returns:
        A console sized to the terminal, or an unwrapped one when the stream is not a
        terminal.
    """
    made = Console(stderr=stderr, highlight=False)
    if made.is_terminal:
        return made
    return Console(stderr=stderr, highlight=False, width=PIPE_WIDTH_COLUMNS, soft_wrap=True)
