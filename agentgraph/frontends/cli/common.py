"""Shared CLI plumbing: settings at the edge, workspace and store opening."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from agentgraph.config import Settings
from agentgraph.errors import ConfigError
from agentgraph.runtime.spend import BudgetArg
from agentgraph.security.settings_sources import WORKSPACE_ENV_NAME

if TYPE_CHECKING:
    from agentgraph.capabilities.mcp import McpManager


# Command-line flags that set a setting for one invocation: flag -> (its argparse dest,
# the setting's environment name). They beat the environment and every file.
SETTING_FLAGS = {
    "--model": ("model", "AGENTGRAPH_MODEL"),
    "--max-turns": ("max_turns", "MAX_LOOPS"),
    "--budget": ("budget", "AGENTGRAPH_TURN_BUDGET_TOKENS"),
    "--permission-mode": ("permission_mode", "AGENTGRAPH_PERMISSION_MODE"),
}
# The setting ``--budget $X`` sets instead.
BUDGET_USD_NAME = "AGENTGRAPH_TURN_BUDGET_USD"


# --max-turns N: at most N model calls, so at least one.
MAX_TURNS_MIN = 1


def flag_settings(args: object) -> dict[str, Any]:
    """The settings the command line gives (keyed by environment name), for Settings."""
    values: dict[str, Any] = {}
    for dest, name in SETTING_FLAGS.values():
        value = getattr(args, dest, None)
        if isinstance(value, BudgetArg):  # --budget N sets tokens, --budget $X dollars
            name = BUDGET_USD_NAME if value.dollars else name
            value = value.limit.usd if value.dollars else value.limit.tokens
        if value is not None:
            values[name] = value
    return values


def load_settings(
    env_file: str | None = WORKSPACE_ENV_NAME,
    flags: Mapping[str, Any] | None = None,
    problems: list[str] | None = None,
) -> Settings:
    """Build Settings from the flags, the environment, the project's files and the user's
    config.

    What is wrong in the project's files (a file that does not parse, an unknown key, a
    value that is not valid) is skipped and said in ``problems``: a cloned repository's
    files are input, and must not stop every command in its folder. What is wrong in the
    user's own settings (flags, environment, their config file) stops the command.

    Args:
        env_file: The project's ``.env`` (None: no project files).
        flags: Values from the command line, keyed by environment name (see
            :func:`flag_settings`).
        problems: Receives one line per skipped project value or file; None drops them.

    Bad values become ConfigError (naming the flag when a flag gave it).
    """
    from agentgraph.security.settings_sources import (
        PROJECT_CONFIG_PATH,
        SKIPPED_PROJECT_NAMES,
        project_config_values,
    )

    found = problems if problems is not None else []
    if env_file is not None:
        found.extend(
            project_config_values(Path(env_file).parent / PROJECT_CONFIG_PATH, Settings)[1]
        )
    try:
        return _build_settings(env_file, flags)
    except _ProjectValueError as exc:
        found.extend(exc.lines)
        token = SKIPPED_PROJECT_NAMES.set(exc.names)
        try:
            settings = _build_settings(env_file, flags, project_errors=False)
        finally:
            SKIPPED_PROJECT_NAMES.reset(token)
        settings.skip_project_names(exc.names)
        return settings


class _ProjectValueError(Exception):
    """Only values from the project's files failed validation."""

    def __init__(self, names: frozenset[str], lines: list[str]) -> None:
        super().__init__(", ".join(sorted(names)))
        self.names = names
        self.lines = lines


def _project_value_errors(
    exc: ValidationError, given: Mapping[str, Any], env_file: str | None
) -> _ProjectValueError | None:
    """The errors of ``exc`` as skippable project values; None when any is not one."""
    from agentgraph.config import DEFAULT_HOME
    from agentgraph.security.settings_sources import ORIGIN_PROJECT, env_names, setting_origins

    if env_file is None:
        return None
    home = Path(os.environ.get("AGENTGRAPH_HOME") or DEFAULT_HOME).expanduser()
    origins = setting_origins(Settings, flags=dict(given), env_file=Path(env_file), home=home)
    fields = env_names(Settings)
    names: set[str] = set()
    lines: list[str] = []
    for error in exc.errors():
        loc = error.get("loc", ())
        name = str(loc[0]).upper() if loc else ""
        origin = origins.get(fields.get(name, ""))
        if origin is None or origin.kind != ORIGIN_PROJECT:
            return None
        names.add(name)
        # Named as the file writes it: TOML files use the field names.
        shown = fields[name] if Path(origin.where).suffix == ".toml" else name
        lines.append(f"ignored {shown} from {origin.where}: {error.get('msg', 'invalid value')}")
    return _ProjectValueError(frozenset(names), lines) if names else None


def _build_settings(
    env_file: str | None, flags: Mapping[str, Any] | None, *, project_errors: bool = True
) -> Settings:
    """Settings from every source; bad values as ConfigError, except values from the
    project's files, raised as :class:`_ProjectValueError` when ``project_errors``."""
    given = dict(flags or {})
    turns = given.get(SETTING_FLAGS["--max-turns"][1])
    if isinstance(turns, int) and turns < MAX_TURNS_MIN:
        # A cap for one invocation caps; lifting the cap is the setting's (MAX_LOOPS=0).
        raise ConfigError(
            f"invalid --max-turns {turns}: must be at least {MAX_TURNS_MIN} "
            "(MAX_LOOPS=0 lifts the cap)"
        )
    try:
        return Settings(_env_file=env_file, **given)  # type: ignore[call-arg]
    except ValidationError as exc:
        skippable = _project_value_errors(exc, given, env_file) if project_errors else None
        if skippable is not None:
            raise skippable from None
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first.get("loc", ()))
        message = first.get("msg", "invalid value")
        for flag, (_dest, name) in SETTING_FLAGS.items():
            if name in given and loc == name:
                raise ConfigError(f"invalid {flag} {given[name]}: {message}") from None
        raise ConfigError(f"invalid setting {loc or '?'}: {message} (see .env.example)") from None


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
    from agentgraph.security.settings_sources import (
        PROJECT_CONFIG_PATH,
        ignored_project_config,
        ignored_workspace_settings,
    )

    env_path = Path(env_file)
    project_file = env_path.parent / PROJECT_CONFIG_PATH
    found = (
        (env_path, ignored_workspace_settings(env_path, settings.home, Settings)),
        (project_file, ignored_project_config(project_file, settings.home, Settings)),
    )
    for path, ignored in found:
        if ignored:
            print(
                f"agentgraph: ignored {', '.join(ignored)} from ./{path}: a folder's files "
                "cannot choose the endpoint, keys, sandbox, approvals or trust (set them in "
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
    """Open the MCP servers for a CLI run (a context manager yielding the manager).

    Args:
        settings: Configuration (``AGENTGRAPH_MCP``, ``AGENTGRAPH_MCP_TRUST_WORKSPACE``).
        workspace: The session workspace.
        ask: Asks the user to allow the workspace's servers (the REPL); None never asks.
    """
    from agentgraph.capabilities.mcp import is_trusted, open_mcp, trust, untrusted_servers
    from agentgraph.capabilities.tools.bash import tool_environment

    trusted = settings.mcp_trust_workspace or is_trusted(workspace, settings.home)
    names = [] if trusted or settings.mcp == "off" else untrusted_servers(workspace, settings.home)
    if names and ask is not None:
        question = (
            f"this workspace's .agentgraph/mcp.json starts MCP servers ({', '.join(names)}), "
            "which run commands on this machine; allow them?"
        )
        if ask(question):
            trust(workspace, settings.home)
            trusted = True
    # Servers start with the shell tool's allowlisted environment; the secrets they
    # need are named in their mcp.json "env" ("KEY": "${KEY}").
    env = tool_environment(process_environment(), settings.bash_env_allow_names)
    return open_mcp(
        workspace,
        settings.home,
        enabled=settings.mcp == "on",
        base_env=env,
        workspace_trusted=trusted,
        start_timeout_s=settings.mcp_start_timeout_s,
        tool_timeout_s=settings.mcp_tool_timeout_s,
        secrets=settings.secret_values(),
    )
