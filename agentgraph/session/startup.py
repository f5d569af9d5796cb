"""What every front end does before its first turn.

Loading the settings with their sources (the project's files are input: what is wrong
in them is skipped and said; what a folder may not set is reported), the workspace's
trust decision (``agentgraph trust``), where each setting came from (``agentgraph
config``), the process's hardening and log routing, and opening the store, the MCP
servers and the agent.

Imported at start-up by every command: the store, MCP, the shell tool and the agent are
imported inside the functions that need them.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr, ValidationError

from agentgraph.config import Settings
from agentgraph.errors import ConfigError
from agentgraph.security.settings_sources import (
    PROJECT_CONFIG_PATH,
    WORKSPACE_ENV_NAME,
    Origin,
)
from agentgraph.session.overrides import MAX_LOOPS_NAME, MAX_TURNS_MIN

if TYPE_CHECKING:
    # For annotations of the front ends that hold the manager open.
    from agentgraph.capabilities.mcp import McpManager as McpManager
    from agentgraph.persistence import Store
    from agentgraph.session.agent import Agent

__all__ = [
    "HIDDEN",
    "HOOKS_NOTE",
    "LOG_FILE_BACKUPS",
    "LOG_FILE_MAX_BYTES",
    "LOG_FILE_NAME",
    "PROJECT_CONFIG_PATH",
    "UNSET",
    "WORKSPACE_ENV_NAME",
    "IgnoredFile",
    "Origin",
    "SettingRow",
    "Started",
    "TrustedFile",
    "harden_process",
    "ignored_settings_files",
    "load_settings",
    "open_mcp_servers",
    "origin_text",
    "route_logs",
    "setting_rows",
    "shown_value",
    "start_session",
    "trust_settings_files",
]

HIDDEN = "***"
"""How a secret setting's value is shown."""
UNSET = "(unset)"
"""How a setting without a value is shown."""
# Named among what an allowed project file sets: its hooks are commands that will run.
HOOKS_NOTE = "hooks: commands agentgraph will run"

LOG_FILE_NAME = "agentgraph.log"
LOG_FILE_MAX_BYTES = 1_000_000
LOG_FILE_BACKUPS = 1


def load_settings(
    env_file: str | None = WORKSPACE_ENV_NAME,
    flags: Mapping[str, Any] | None = None,
    problems: list[str] | None = None,
    *,
    flag_names: Mapping[str, str] | None = None,
) -> Settings:
    """Build Settings from the overrides, the environment, the project's files and the
    user's config.

    What is wrong in the project's files (a file that does not parse, an unknown key, a
    value that is not valid) is skipped and said in ``problems``: a cloned repository's
    files are input, and must not stop every front end in its folder. What is wrong in
    the user's own settings (overrides, environment, their config file) stops it.

    Args:
        env_file: The project's ``.env`` (None: no project files).
        flags: Values this invocation overrides, keyed by environment name (see
            :mod:`agentgraph.session.overrides`).
        problems: Receives one line per skipped project value or file; None drops them.
        flag_names: How the front end names each override (environment name → e.g.
            ``--model``), for the error that a bad override raises.

    Raises:
        ConfigError: A value is not valid (naming its flag when a flag gave it).
    """
    from agentgraph.security.settings_sources import (
        SKIPPED_PROJECT_NAMES,
        project_config_values,
    )

    found = problems if problems is not None else []
    names = dict(flag_names or {})
    if env_file is not None:
        found.extend(
            project_config_values(Path(env_file).parent / PROJECT_CONFIG_PATH, Settings)[1]
        )
    try:
        return _build_settings(env_file, flags, names)
    except _ProjectValueError as exc:
        found.extend(exc.lines)
        token = SKIPPED_PROJECT_NAMES.set(exc.names)
        try:
            settings = _build_settings(env_file, flags, names, project_errors=False)
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
    env_file: str | None,
    flags: Mapping[str, Any] | None,
    flag_names: Mapping[str, str],
    *,
    project_errors: bool = True,
) -> Settings:
    """Settings from every source; bad values as ConfigError, except values from the
    project's files, raised as :class:`_ProjectValueError` when ``project_errors``."""
    given = dict(flags or {})
    turns = given.get(MAX_LOOPS_NAME)
    if isinstance(turns, int) and turns < MAX_TURNS_MIN:
        # A cap for one invocation caps; lifting the cap is the setting's (MAX_LOOPS=0).
        raise ConfigError(
            f"invalid {flag_names.get(MAX_LOOPS_NAME, MAX_LOOPS_NAME)} {turns}: must be at "
            f"least {MAX_TURNS_MIN} (MAX_LOOPS=0 lifts the cap)"
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
        for name, flag in flag_names.items():
            if name in given and loc == name:
                raise ConfigError(f"invalid {flag} {given[name]}: {message}") from None
        raise ConfigError(f"invalid setting {loc or '?'}: {message} (see .env.example)") from None


@dataclass(frozen=True)
class IgnoredFile:
    """A folder's settings file and the names in it a folder may not set.

    Attributes:
        path: The file, relative to the folder (``.env``, ``.agentgraph/config.toml``).
        names: The settings it sets that were ignored (never their values).
    """

    path: Path
    names: list[str]


def ignored_settings_files(
    settings: Settings, env_file: str = WORKSPACE_ENV_NAME
) -> list[IgnoredFile]:
    """The current folder's ``.env`` and ``.agentgraph/config.toml``, each with the
    settings it sets that a folder's files may not (only files that set some).

    Args:
        settings: The settings just loaded (for ``AGENTGRAPH_HOME``).
        env_file: The workspace's settings file (the project file is beside it).
    """
    from agentgraph.security.settings_sources import (
        ignored_project_config,
        ignored_workspace_settings,
    )

    env_path = Path(env_file)
    project_file = env_path.parent / PROJECT_CONFIG_PATH
    found = (
        IgnoredFile(env_path, ignored_workspace_settings(env_path, settings.home, Settings)),
        IgnoredFile(project_file, ignored_project_config(project_file, settings.home, Settings)),
    )
    return [entry for entry in found if entry.names]


@dataclass(frozen=True)
class TrustedFile:
    """What ``trust_settings_files`` did with one of the folder's settings files.

    Attributes:
        path: The file, relative to the folder.
        already: It was allowed as it is before (nothing changed).
        names: What it sets beyond what a project may (never the values).
    """

    path: Path
    already: bool
    names: list[str]


def trust_settings_files(home: Path) -> list[TrustedFile]:
    """Allow the current folder's ``.env`` and ``.agentgraph/config.toml`` to set every
    setting until they change (the user's decision, recorded under ``home``).

    Args:
        home: ``AGENTGRAPH_HOME``, which keeps the record.

    Returns:
        One entry per file present, in that order; empty when neither is here.
    """
    from agentgraph.capabilities.hooks import hook_commands_in
    from agentgraph.security.settings_sources import (
        allow,
        ignored_project_config,
        ignored_workspace_settings,
        is_allowed,
    )

    env_file = Path(WORKSPACE_ENV_NAME)
    done = []
    for path in (env_file, PROJECT_CONFIG_PATH):
        if not path.is_file():
            continue
        if is_allowed(path, home):
            done.append(TrustedFile(path, already=True, names=[]))
            continue
        if path == env_file:
            names = ignored_workspace_settings(path, home, Settings)
        else:
            names = ignored_project_config(path, home, Settings)
            names += [HOOKS_NOTE] if hook_commands_in(path) else []
        allow(path, home)
        done.append(TrustedFile(path, already=False, names=names))
    return done


def shown_value(value: Any) -> str:
    """A setting's value as a front end shows it: secrets never, and no credential a
    value holds (a URL's password, a token) — the redactor tool outputs go through hides
    them."""
    from agentgraph.security.redaction import redact_token_formats

    if value is None:
        return UNSET
    if isinstance(value, SecretStr):
        return HIDDEN
    if isinstance(value, bool):
        return "true" if value else "false"
    return redact_token_formats(str(value))


def origin_text(origin: Origin) -> str:
    """``environment (OPENAI_BASE_URL)``, ``project (.env)``, ``default`` …"""
    return f"{origin.kind} ({origin.where})" if origin.where else origin.kind


@dataclass(frozen=True)
class SettingRow:
    """One setting as ``agentgraph config`` lists it.

    Attributes:
        field: The setting's field name.
        env_name: Its environment name (empty when it has none).
        value: Its value as shown (:func:`shown_value`).
        origin: Where the value came from (:func:`origin_text`).
    """

    field: str
    env_name: str
    value: str
    origin: str


def setting_rows(settings: Settings, flags: Mapping[str, Any], env_file: Path) -> list[SettingRow]:
    """Every setting with its shown value and origin, in field order.

    Args:
        settings: The settings this invocation resolved.
        flags: The overrides it was given, keyed by environment name.
        env_file: The workspace's ``.env`` (the project file is beside it).
    """
    from agentgraph.security.settings_sources import env_names, setting_origins

    origins = setting_origins(
        Settings,
        flags=dict(flags),
        env_file=env_file,
        home=settings.home,
        skipped=settings.skipped_project_names,
    )
    names: dict[str, str] = {}
    for env_name, field in env_names(Settings).items():
        names.setdefault(field, env_name)
    return [
        SettingRow(
            field,
            names.get(field, ""),
            shown_value(getattr(settings, field)),
            origin_text(origins[field]),
        )
        for field in Settings.model_fields
    ]


def harden_process() -> bool:
    """Keep this process out of reach of the commands the agent runs (its environment
    and memory hold the keys); a no-op where the platform cannot.

    Returns:
        Whether the process is now protected.
    """
    from agentgraph.security.hardening import forbid_inspection

    return forbid_inspection()


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
    """Send log records of agentgraph and its libraries to a file, never the terminal.

    Without a handler, Python prints WARNING records (and the tracebacks LangGraph's
    executor logs when a cancelled step's callback fails) to stderr, which breaks the
    rule that the user sees one clear line. Records go to ``home/agentgraph.log``
    (rotated), with known credential formats and the values registered with
    ``redaction.redact_in_logs`` (what MCP configs expanded) redacted.

    Args:
        home: ``AGENTGRAPH_HOME``.
        debug: Show the records on stderr as well (``AGENTGRAPH_DEBUG=1``).
    """
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


def open_mcp_servers(
    settings: Settings,
    workspace: Path,
    base_env: Mapping[str, str],
    *,
    ask: Callable[[str], bool] | None = None,
) -> AbstractContextManager[McpManager]:
    """Open the MCP servers of a session (a context manager yielding the manager).

    Args:
        settings: Configuration (``AGENTGRAPH_MCP``, ``AGENTGRAPH_MCP_TRUST_WORKSPACE``).
        workspace: The session workspace.
        base_env: The process's environment (servers get its allowlisted part).
        ask: Asks the user to allow the workspace's servers; None never asks.
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
    env = tool_environment(base_env, settings.bash_env_allow_names)
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


@dataclass(frozen=True)
class Started:
    """A session ready for its first turn.

    Attributes:
        store: The open session store.
        mcp: The MCP servers' manager (its ``new_problems`` not yet read).
        agent: The agent (its ``notices`` say what the user should know first).
    """

    store: Store
    mcp: McpManager
    agent: Agent


@contextmanager
def start_session(
    settings: Settings,
    workspace: Path,
    base_env: Mapping[str, str],
    *,
    open_mcp: Callable[[], AbstractContextManager[McpManager]] | None = None,
    building: Callable[[], AbstractContextManager[Any]] = nullcontext,
    wait_for_servers: bool = False,
    interactive: bool = False,
) -> Iterator[Started]:
    """Check the model's configuration, open the store and the MCP servers, and build the
    agent; everything is closed on exit.

    Args:
        settings: Configuration.
        workspace: The session workspace (MCP servers are the workspace's).
        base_env: The process's environment (tools pass on only its allowlisted part).
        open_mcp: Opens the MCP servers (default: :func:`open_mcp_servers`, which never
            asks the user).
        building: Entered around building the agent (e.g. pausing the garbage
            collector while long-lived objects are created).
        wait_for_servers: Wait for every MCP server up to its start limit: with nobody
            to type a next message, the first request should get them all.
        interactive: A person types the messages (the REPL on a terminal): sessions may
            get model-written titles (``AGENTGRAPH_TITLES=model``).

    Raises:
        ConfigError: The settings name no usable model endpoint.
    """
    from agentgraph.capabilities.mcp import MCP_WAIT_SLACK_S
    from agentgraph.capabilities.tools.bash import home_scope, kill_orphaned_commands
    from agentgraph.persistence import open_store
    from agentgraph.providers.model import check_model_config
    from agentgraph.session.agent import Agent
    from agentgraph.session.titles import build_titler

    check_model_config(settings)
    servers = open_mcp or (lambda: open_mcp_servers(settings, workspace, base_env))
    with open_store(settings) as store, servers() as mcp:
        # Left by an agentgraph of this home that was killed mid-command.
        kill_orphaned_commands(home_scope(settings.home))
        with building():
            titler = build_titler(settings, interactive=interactive)
            agent = Agent(settings, store, base_env=base_env, titler=titler, mcp=mcp)
        if wait_for_servers:
            mcp.wait(settings.mcp_start_timeout_s + MCP_WAIT_SLACK_S)
        yield Started(store, mcp, agent)
