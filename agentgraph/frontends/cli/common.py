"""Shared CLI plumbing: the flags that set settings, their loading and reports, the workspace."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentgraph.config import Settings
from agentgraph.errors import ConfigError
from agentgraph.session import startup
from agentgraph.session.overrides import (
    BUDGET_TOKENS_NAME,
    MAX_LOOPS_NAME,
    MODEL_NAME,
    PERMISSION_MODE_NAME,
    BudgetOverride,
)
from agentgraph.session.startup import WORKSPACE_ENV_NAME

if TYPE_CHECKING:
    from agentgraph.session.startup import McpManager


# Command-line flags that set a setting for one invocation: flag -> (its argparse dest,
# the setting's environment name). They beat the environment and every file.
SETTING_FLAGS = {
    "--model": ("model", MODEL_NAME),
    "--max-turns": ("max_turns", MAX_LOOPS_NAME),
    "--budget": ("budget", BUDGET_TOKENS_NAME),
    "--permission-mode": ("permission_mode", PERMISSION_MODE_NAME),
}
# How an error about a setting a flag gave names it: environment name -> flag.
FLAG_NAMES = {name: flag for flag, (_dest, name) in SETTING_FLAGS.items()}


def flag_settings(args: object) -> dict[str, Any]:
    """The settings the command line gives (keyed by environment name), for Settings."""
    values: dict[str, Any] = {}
    for dest, name in SETTING_FLAGS.values():
        value = getattr(args, dest, None)
        if isinstance(value, BudgetOverride):  # --budget N sets tokens, --budget $X dollars
            name, value = value
        if value is not None:
            values[name] = value
    return values


def load_settings(
    env_file: str | None = WORKSPACE_ENV_NAME,
    flags: Mapping[str, Any] | None = None,
    problems: list[str] | None = None,
) -> Settings:
    """Build Settings as :func:`agentgraph.session.startup.load_settings` does, naming
    the flag that gave a bad value.

    Args:
        env_file: The project's ``.env`` (None: no project files).
        flags: Values from the command line, keyed by environment name (see
            :func:`flag_settings`).
        problems: Receives one line per skipped project value or file; None drops them.

    Raises:
        ConfigError: A value is not valid.
    """
    return startup.load_settings(env_file, flags, problems, flag_names=FLAG_NAMES)


def report_project_problems(problems: list[str]) -> None:
    """Say, one line each on stderr, what was skipped in the project's settings files."""
    for line in problems:
        print(f"agentgraph: {line}", file=sys.stderr)


def report_ignored_settings(settings: Settings, env_file: str = WORKSPACE_ENV_NAME) -> None:
    """Say, in one line on stderr per file, which settings the current folder's ``.env``
    and ``.agentgraph/config.toml`` may not set.

    Args:
        settings: The settings just loaded (for ``AGENTGRAPH_HOME``).
        env_file: The workspace's settings file (the project file is beside it).
    """
    for ignored in startup.ignored_settings_files(settings, env_file):
        print(
            f"agentgraph: ignored {', '.join(ignored.names)} from ./{ignored.path}: a folder's "
            "files cannot choose the endpoint, keys, sandbox, approvals or trust (set them in "
            "your environment or ~/.agentgraph/config.toml, or run `agentgraph trust` to "
            "allow this file as it is)",
            file=sys.stderr,
        )


def resolve_workspace(value: str | None) -> Path:
    """The workspace directory (default: the current directory), which must exist."""
    path = Path(value).expanduser() if value else Path.cwd()
    try:
        path = path.resolve(strict=True)
    except (OSError, RuntimeError):
        raise ConfigError(f"workspace {value!r} does not exist") from None
    if not path.is_dir():
        raise ConfigError(f"workspace {str(path)!r} is not a directory")
    return path


def process_environment() -> Mapping[str, str]:
    """Snapshot of the agent's environment (tools pass on only its allowlisted part)."""
    return dict(os.environ)


def start_mcp(
    settings: Settings, workspace: Path, *, ask: Callable[[str], bool] | None = None
) -> AbstractContextManager[McpManager]:
    """Open the MCP servers for a CLI session (a context manager yielding the manager).

    Args:
        settings: Configuration (``AGENTGRAPH_MCP``, ``AGENTGRAPH_MCP_TRUST_WORKSPACE``).
        workspace: The session workspace.
        ask: Asks the user to allow the workspace's servers (the REPL); None never asks.
    """
    return startup.open_mcp_servers(settings, workspace, process_environment(), ask=ask)
