"""Errors that end a command with a clear one-line message and an exit code."""

from __future__ import annotations

EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_STEP_LIMIT = 3
"""``agentgraph run`` stopped at MAX_LOOPS, at its token budget, or for repeating the same
tool calls with the same output: the answer may be partial."""
EXIT_RUN_TIMEOUT = 4
"""``agentgraph run`` stopped at AGENTGRAPH_RUN_TIMEOUT_S."""


class AgentGraphError(Exception):
    """A user-facing failure: the CLI prints ``str(self)`` on one line and exits.

    Args:
        message: One line telling the user what went wrong and what to do.
        exit_code: Process exit status (1 for runtime failures, 2 for usage/config).
    """

    def __init__(self, message: str, exit_code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class ConfigError(AgentGraphError):
    """Configuration is missing or invalid."""

    def __init__(self, message: str) -> None:
        super().__init__(message, EXIT_USAGE)


class StoreError(AgentGraphError):
    """The session store cannot be opened or used (corrupt, locked, unreachable)."""


class SchemaTooNew(StoreError):
    """The session store was written by a newer agentgraph (a schema migration this
    version does not know); it is left untouched."""


class SessionNotFound(AgentGraphError):
    """No session matches the given id or prefix (or the prefix is ambiguous)."""


class AmbiguousSession(SessionNotFound):
    """A prefix matches several sessions."""


class ProviderFailure(AgentGraphError):
    """The model endpoint failed in a way retries and recovery could not fix."""
