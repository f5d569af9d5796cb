"""The one line and exit status a failed command reports (stderr, ``--json``, stream-json)."""

from __future__ import annotations

import sqlite3

from agentgraph.errors import EXIT_FAILURE, AgentGraphError

EXIT_INTERRUPTED = 130  # the shell's code for a process stopped by SIGINT
INTERNAL_ERROR_MAX_CHARS = 300


def failure_line(exc: BaseException) -> tuple[str, int] | None:
    """The message (without the ``agentgraph: `` prefix) and exit status for ``exc``.

    Args:
        exc: What ended the command.

    Returns:
        ``(message, status)``, or None for what is not a failure to report (SystemExit).
    """
    if isinstance(exc, AgentGraphError):
        return str(exc), exc.exit_code
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted", EXIT_INTERRUPTED
    if isinstance(exc, sqlite3.Error):
        return f"session store error: {exc}", EXIT_FAILURE
    if isinstance(exc, Exception):
        text = f"internal error: {type(exc).__name__}: {str(exc)[:INTERNAL_ERROR_MAX_CHARS]}"
        return text + " (set AGENTGRAPH_DEBUG=1 for the traceback)", EXIT_FAILURE
    return None
