"""The REPL's live output: markdown rendered as it streams, a spinner while waiting.

The answer is re-rendered with rich's ``Markdown`` as tokens arrive, in a ``Live``
region at the bottom of the screen. Only the last screenful is live: lines that scroll
above it are printed for good (they no longer change), so a long answer never
repaints the whole terminal, and when the answer ends every line has been printed
exactly once (the live region is transient). When stdout is not a terminal the text is
written as it comes, unrendered.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import sys
import time
from collections.abc import Callable

from markdown_it import MarkdownIt
from rich.console import Console
from rich.live import Live
from rich.markdown import Markdown
from rich.status import Status
from rich.text import Text

from agentgraph.frontends.cli.render import EventPrinter
from agentgraph.protocol.events import (
    BaseEvent,
    Compaction,
    Diff,
    Hook,
    Notice,
    Progress,
    Retry,
    TextDelta,
    Todos,
    ToolCall,
    ToolResult,
)
from agentgraph.session.interactive import streamed_tokens_text

# Seconds between two re-renders of the streamed answer (rendering is O(answer)).
MARKDOWN_REFRESH_S = 0.1
# Lines of the screen left out of the live region (the prompt, the status line).
LIVE_MARGIN_LINES = 4
LIVE_MIN_LINES = 5
CODE_THEME = "monokai"
SPINNER = "dots"
WAITING_TEXT = "thinking…"
BELL = "\a"
SECONDS_PER_MINUTE = 60
# Events printed while a spinner waits that do not end the wait: it spins on after them.
SPIN_ON_AFTER = (Notice, Retry, Compaction, Todos, Diff, Hook)


def elapsed_text(seconds: float) -> str:
    """``12s``, ``2m 05s``: how long a turn has run."""
    whole = int(seconds)
    if whole < SECONDS_PER_MINUTE:
        return f"{whole}s"
    return f"{whole // SECONDS_PER_MINUTE}m {whole % SECONDS_PER_MINUTE:02d}s"


class SpinnerText:
    """The spinner's line, rendered afresh at each refresh: what it waits for, the
    turn's elapsed time and the tokens the model has streamed in it so far.

    Args:
        label: What the turn waits for (``thinking…``, ``running run_bash…``).
        started: ``time.monotonic()`` when the turn began.
        tokens: Returns the turn's streamed output tokens so far.
    """

    def __init__(self, label: str, started: float, tokens: Callable[[], int]) -> None:
        self.label = label
        self.started = started
        self.tokens = tokens

    def __rich__(self) -> Text:
        parts = [elapsed_text(time.monotonic() - self.started)]
        streamed = streamed_tokens_text(self.tokens())
        if streamed:
            parts.append(streamed)
        return Text(f"{self.label} {' · '.join(parts)}")


class AnswerMarkdown(Markdown):
    """rich's ``Markdown`` with raw HTML shown as the text it is.

    rich renders no HTML: a block such as ``<div>…</div>`` (or the ``<tools>…</tools>``
    a small model writes) disappeared from the answer, and inline tags vanished from
    their sentence. Parsed here with markdown-it's ``html`` option off, the same text
    is shown literally; everything else renders as rich renders it.

    Args:
        markup: The answer's markdown.
        code_theme: Pygments theme of code blocks.
    """

    _parser = MarkdownIt("commonmark", {"html": False}).enable("strikethrough").enable("table")

    def __init__(self, markup: str, code_theme: str = CODE_THEME) -> None:
        super().__init__("", code_theme=code_theme)
        self.markup = markup
        self.parsed = self._parser.parse(markup)


def suppress_input_echo() -> Callable[[], None] | None:
    """Stop the terminal from echoing typed keys; returns the function that restores it.

    While an answer streams, the live region's last line fills the terminal's width, so
    the cursor waits at the right margin: a key the terminal echoed there (``^C`` above
    all) would wrap to a new line, and the next redraw, which assumes the cursor is still
    on the live region, would leave a copy of it on screen. Keys typed meanwhile stay
    queued for the next prompt. None when stdin is not a terminal (or not a POSIX one).
    """
    try:
        import termios
    except ImportError:  # Windows: no termios, and the console does not echo this way
        return None
    try:
        fd = sys.stdin.fileno()
        saved = termios.tcgetattr(fd)
    except (AttributeError, ValueError, OSError, termios.error):
        return None
    quiet = list(saved)
    quiet[3] &= ~termios.ECHO  # the local-modes word
    try:
        termios.tcsetattr(fd, termios.TCSANOW, quiet)
    except termios.error:
        return None

    def restore() -> None:
        atexit.unregister(restore)
        with contextlib.suppress(termios.error, OSError):
            termios.tcsetattr(fd, termios.TCSANOW, saved)

    atexit.register(restore)  # the user's shell gets its echo back whatever happens
    return restore


class MarkdownStream:
    """Streams markdown to ``console``, rendered, the last screenful live.

    Args:
        console: A terminal console (stdout).
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self.text = ""
        self._printed = 0
        self._live: Live | None = None
        self._last_render = 0.0

    def _lines(self) -> list[str]:
        buffer = io.StringIO()
        render = Console(
            file=buffer,
            width=self.console.width,
            force_terminal=True,
            color_system=self.console.color_system,  # type: ignore[arg-type]
            no_color=self.console.no_color,
            highlight=False,
        )
        render.print(AnswerMarkdown(self.text))
        return buffer.getvalue().rstrip("\n").splitlines()

    def update(self, delta: str) -> None:
        """Add streamed text; re-render at most every MARKDOWN_REFRESH_S."""
        self.text += delta
        now = time.monotonic()
        if now - self._last_render >= MARKDOWN_REFRESH_S:
            self._last_render = now
            self._render(final=False)

    def _render(self, *, final: bool) -> None:
        lines = self._lines()
        window = max(self.console.height - LIVE_MARGIN_LINES, LIVE_MIN_LINES)
        stable = len(lines) if final else max(len(lines) - window, 0)
        if self._live is None:
            self._live = Live(Text(""), console=self.console, auto_refresh=False, transient=True)
            self._live.start()
        if final:
            self._live.update(Text(""))  # printed for good below: never shown twice
        if stable > self._printed:
            self._live.console.print(Text.from_ansi("\n".join(lines[self._printed : stable])))
            self._printed = stable
        self._live.update(Text.from_ansi("\n".join(lines[self._printed :])), refresh=True)

    def finish(self) -> None:
        """Print the final rendering once and close the live region."""
        if self._live is None and not self.text.strip():
            return
        self._render(final=True)
        if self._live is not None:
            self._live.update(Text(""), refresh=True)
            self._live.stop()
            self._live = None


class TerminalPrinter(EventPrinter):
    """Event printer for a terminal: rendered markdown, spinners, folded diffs.

    A "thinking…" spinner runs on stderr from the moment the turn starts (and again
    after each tool result) until the first token or tool call; a "running …" spinner
    while a tool runs. Both show the turn's elapsed time and the tokens streamed so far.
    A turn that ran at least ``notify_after_s`` rings the terminal bell when it ends.

    Args:
        out: Where the answer goes (stdout).
        err: Where progress goes (stderr).
        number_output: Numbers each tool output by its call id (``/show N``).
        notify_after_s: Ring the bell after a turn this long (0: never).
    """

    def __init__(
        self,
        out: Console,
        err: Console,
        number_output: Callable[[str], int] | None = None,
        *,
        notify_after_s: float = 0.0,
    ) -> None:
        super().__init__(out, err, stream_tokens=True, number_output=number_output)
        self._status: Status | None = None
        self._status_text = WAITING_TEXT
        self.notify_after_s = notify_after_s
        self._started: float | None = None
        self._output_tokens = 0
        self._markdown: MarkdownStream | None = None
        self.render_markdown = out.is_terminal
        self._restore_echo: Callable[[], None] | None = None

    # -- spinner -----------------------------------------------------------------

    def _may_spin(self) -> bool:
        """Whether a spinner may start now (subclasses hold it back during a question)."""
        return True

    def _spin(self, text: str) -> None:
        self._stop()
        self._status_text = text
        if self.err.is_terminal and self._may_spin():
            started = self._started if self._started is not None else time.monotonic()
            line = SpinnerText(text, started, lambda: self._output_tokens)
            self._status = self.err.status(line, spinner=SPINNER)
            self._status.start()

    def _stop(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def begin(self) -> None:
        """The request is on its way: spin until the first token or tool call.

        Typed keys are not echoed until :meth:`finish` (see suppress_input_echo).
        """
        if self._restore_echo is None and self.out.is_terminal:
            self._restore_echo = suppress_input_echo()
        if self._started is None:
            self._started = time.monotonic()
        self._spin(WAITING_TEXT)

    # -- events ------------------------------------------------------------------

    def _end_answer(self) -> None:
        if self._markdown is not None:
            self._markdown.finish()
            self._markdown = None

    def render(self, event: BaseEvent) -> None:
        """Print one typed event, stopping and restarting the spinner around it."""
        if isinstance(event, Progress):  # the spinner shows it at its next refresh
            self._output_tokens = event.output_tokens
            return
        waiting = self._status is not None
        self._stop()
        if isinstance(event, TextDelta):
            if self.render_markdown:
                if self._markdown is None:
                    self._markdown = MarkdownStream(self.out)
                self._markdown.update(event.text)
                return
        else:
            self._end_answer()
        super().render(event)
        if isinstance(event, ToolCall):
            self._spin(f"running {event.name}…")
        elif isinstance(event, ToolResult):
            self._spin(WAITING_TEXT)  # the model is called again with the result
        elif waiting and isinstance(event, SPIN_ON_AFTER):
            self._spin(self._status_text)  # still waiting for the same thing

    def finish(self) -> None:
        """Stop the spinner, print the rest of the answer, end the line, echo keys again."""
        self._stop()
        self._end_answer()
        super().finish()
        if self._restore_echo is not None:
            self._restore_echo()
            self._restore_echo = None
        self._ring_after_long_turn()

    def _ring_after_long_turn(self) -> None:
        """The bell, once, when a turn of at least ``notify_after_s`` is over."""
        started, self._started = self._started, None
        if started is None or not self.notify_after_s or not self.err.is_terminal:
            return
        if time.monotonic() - started >= self.notify_after_s:
            self.err.file.write(BELL)
            self.err.file.flush()
