"""Where log records of agentgraph and its libraries go: a file, never the terminal.

Without a handler, Python prints WARNING records (and the tracebacks LangGraph's
executor logs when a cancelled step's callback fails) to stderr, which breaks the rule
that the user sees one clear line. Records go to ``$AGENTGRAPH_HOME/agentgraph.log``
(rotated), with known credential formats and the values registered with
``redaction.redact_in_logs`` (what MCP configs expanded) redacted; ``AGENTGRAPH_DEBUG=1``
shows them on stderr as well.
"""

from __future__ import annotations

import logging
import logging.handlers
from pathlib import Path

LOG_FILE_NAME = "agentgraph.log"
LOG_FILE_MAX_BYTES = 1_000_000
LOG_FILE_BACKUPS = 1


class _RedactingFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        from agentgraph.security.redaction import redact_log_text

        try:
            message = record.getMessage()
        except Exception:  # a library's bad format string must not break logging
            return True
        record.msg, record.args = redact_log_text(message), None
        return True


def route_logs(home: Path, *, debug: bool) -> None:
    """Send log records to the log file under ``home`` (and stderr when ``debug``)."""
    # A log file that cannot be written must not print "--- Logging error ---" either.
    logging.raiseExceptions = False
    root = logging.getLogger()
    root.setLevel(logging.DEBUG if debug else logging.WARNING)
    handlers: list[logging.Handler] = []
    try:
        home.mkdir(parents=True, exist_ok=True)
        handlers.append(
            logging.handlers.RotatingFileHandler(
                home / LOG_FILE_NAME,
                maxBytes=LOG_FILE_MAX_BYTES,
                backupCount=LOG_FILE_BACKUPS,
                encoding="utf-8",
                delay=True,
            )
        )
    except OSError:
        handlers.append(logging.NullHandler())
    if debug:
        handlers.append(logging.StreamHandler())
    for handler in handlers:
        handler.addFilter(_RedactingFilter())
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
