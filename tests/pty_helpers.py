"""Drive the real REPL in a pseudo-terminal (pexpect), as a user at a terminal would."""

from __future__ import annotations

import contextlib
import io
import re
import sys
import time
from pathlib import Path

import pexpect
import pyte

from agentgraph.config import Settings
from agentgraph.persistence import open_store
from agentgraph.session.lifecycle import load_messages
from tests.cli_helpers import server_env

PTY_TIMEOUT_S = 60
PTY_ROWS = 50
PTY_COLUMNS = 120
# Rows of the emulated screen the output is replayed in (enough never to scroll).
SCREEN_REPLAY_ROWS = 2000
PROMPT = "›"  # prompt_toolkit moves the cursor instead of printing the space
# Keys as a terminal sends them.
CTRL_C = "\x03"
TAB = "\t"
ENTER = "\r"
ESCAPE = "\x1b"
DOWN = "\x1b[B"


def pty_env(home: Path, url: str, key: str, **extra: str) -> dict[str, str]:
    """CLI environment for a pty run: a real terminal type, model titles off.

    Model-written titles are off so the only requests the server sees are the
    conversation's own; prompt_toolkit's cursor-position query is off because
    pexpect does not answer it.
    """
    values = {
        "TERM": "xterm-256color",
        "PROMPT_TOOLKIT_NO_CPR": "1",
        "AGENTGRAPH_TITLES": "first_message",
    }
    values.update(extra)
    env = server_env(home, url, key, **values)
    env.pop("NO_COLOR", None)
    return env


def spawn_repl(args: list[str], *, cwd: Path, env: dict[str, str]) -> pexpect.spawn:
    """Start ``python -m agentgraph ARGS`` in a pty of PTY_ROWS x PTY_COLUMNS.

    Everything the program writes is also kept in ``child.logfile_read`` (a StringIO)
    for :func:`screen_lines`.
    """
    child = pexpect.spawn(
        sys.executable,
        ["-m", "agentgraph", *args],
        cwd=str(cwd),
        env=env,
        encoding="utf-8",
        dimensions=(PTY_ROWS, PTY_COLUMNS),
        timeout=PTY_TIMEOUT_S,
    )
    child.logfile_read = io.StringIO()
    return child


def screen_lines(child: pexpect.spawn) -> list[str]:
    """What the terminal shows now: the output so far replayed in a terminal emulator.

    Uses a screen tall enough never to scroll, so every line ever shown is there once
    (re-rendered regions overwrite themselves, as on a real terminal).
    """
    screen = pyte.Screen(PTY_COLUMNS, SCREEN_REPLAY_ROWS)
    stream = pyte.Stream(screen)
    stream.feed(child.logfile_read.getvalue())
    lines = [line.rstrip() for line in screen.display]
    while lines and not lines[-1]:
        lines.pop()
    return lines


SCREEN_POLL_S = 0.2


def expect_on_screen(child: pexpect.spawn, text: str, timeout_s: float = PTY_TIMEOUT_S) -> None:
    """Wait until ``text`` is on the emulated screen (edits redraw in pieces, so the raw
    output may never hold ``text`` in one run of characters)."""
    deadline = time.monotonic() + timeout_s
    while not any(text in line for line in screen_lines(child)):
        if time.monotonic() > deadline:
            shown = "\n".join(screen_lines(child)[-15:])
            raise AssertionError(f"{text!r} not on screen; last lines:\n{shown}")
        with contextlib.suppress(pexpect.TIMEOUT):
            child.read_nonblocking(size=4096, timeout=SCREEN_POLL_S)


_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>78]")


def plain(text: str) -> str:
    """``text`` without terminal escape sequences."""
    return _ANSI_RE.sub("", text)


def close_repl(child: pexpect.spawn) -> None:
    """End the REPL with Ctrl-D and wait for it (killed if it does not leave)."""
    if child.isalive():
        child.sendeof()
        try:
            child.expect(pexpect.EOF, timeout=PTY_TIMEOUT_S)
        except pexpect.TIMEOUT:
            child.terminate(force=True)
    child.close()


def stored_messages(home: Path, thread_id: str) -> list[object]:
    """The history stored for ``thread_id`` under ``home`` (read while the REPL runs)."""
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None, AGENTGRAPH_HOME=str(home / ".agentgraph"), AGENTGRAPH_MODEL="gpt-4o-mini"
    )
    with open_store(settings) as store:
        return list(load_messages(store, thread_id))


def only_session(home: Path) -> str:
    """The id of the one session stored under ``home``."""
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None, AGENTGRAPH_HOME=str(home / ".agentgraph"), AGENTGRAPH_MODEL="gpt-4o-mini"
    )
    with open_store(settings) as store:
        rows = store.index.list_sessions(include_subagents=False)
    assert len(rows) == 1, rows
    return rows[0].thread_id
