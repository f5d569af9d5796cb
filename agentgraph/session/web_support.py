"""The session service the web UI serves (``agentgraph web``), built from the settings."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from pathlib import Path

from agentgraph.capabilities.mcp import McpManager
from agentgraph.config import Settings
from agentgraph.providers.model import check_model_config
from agentgraph.session.service import SessionService
from agentgraph.session.startup import start_session


def web_service(
    settings: Settings,
    workspace: Path,
    *,
    base_env: Mapping[str, str],
    start_mcp: Callable[[], AbstractContextManager[McpManager]],
    building: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext,
) -> AbstractContextManager[SessionService]:
    """The web UI's session service, opened when the returned context is entered.

    The settings are checked now, before the caller takes its port; the store, the MCP
    servers and the agent are opened on entering, and closed (a running turn stopped as
    Ctrl-C stops it) on leaving.

    Args:
        settings: Configuration.
        workspace: The workspace of new sessions.
        base_env: The agent's environment (tools pass on only its allowlisted part).
        start_mcp: Opens the MCP servers (a context manager yielding the manager).
        building: Held while the agent is built (the CLI pauses its garbage collector).

    Raises:
        ConfigError: The settings name no usable model endpoint.
    """
    check_model_config(settings)
    return _opened(settings, workspace, base_env, start_mcp, building)


@contextlib.contextmanager
def _opened(
    settings: Settings,
    workspace: Path,
    base_env: Mapping[str, str],
    start_mcp: Callable[[], AbstractContextManager[McpManager]],
    building: Callable[[], AbstractContextManager[None]],
) -> Iterator[SessionService]:
    with start_session(
        settings, workspace, base_env, open_mcp=start_mcp, building=building
    ) as started:
        service = SessionService(started.agent, started.store, workspace, base_env)
        try:
            yield service
        finally:
            service.close()  # a running turn is stopped as Ctrl-C stops it
