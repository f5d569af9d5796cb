"""Who may set what: the user's settings, and the little a workspace's files may decide.

A repository the user cloned is input, not the user. Its ``.env`` would otherwise pick
the endpoint the user's API key is sent to, turn the shell sandbox off, pass the
user's secrets to commands or trust its own MCP servers. So settings come from:

1. values passed in code: the command-line flags (``--model``, ``--max-turns``), tests,
   the server factory;
2. the process environment (the user's shell);
3. the project: the folder's ``.env``, then its ``.agentgraph/config.toml`` (field names
   as keys, like the user's file) — only the settings in :data:`PROJECT_SETTINGS` (how
   the agent works on this code), unless the user allowed that exact file content with
   ``agentgraph trust``;
4. the user's ``$AGENTGRAPH_HOME/config.toml`` (field names as keys, e.g.
   ``base_url = "http://127.0.0.1:8080/v1"``);
5. the defaults.

What a project file set and was not allowed to is reported once, in one line, by the
CLI (:func:`ignored_workspace_settings`, :func:`ignored_project_config`);
:func:`setting_origins` says where each value came from (``agentgraph config``).
"""

from __future__ import annotations

import tomllib
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource
from pydantic_settings.sources import (
    DotEnvSettingsSource,
    EnvSettingsSource,
    InitSettingsSource,
)

from agentgraph.errors import ConfigError
from agentgraph.security import allowed_files

WORKSPACE_ENV_NAME = ".env"
USER_CONFIG_NAME = "config.toml"
# The project's settings file, in the same folder as its .env.
PROJECT_CONFIG_PATH = Path(".agentgraph") / USER_CONFIG_NAME
# sha256 of each workspace settings file the user allowed as it is, under AGENTGRAPH_HOME.
SETTINGS_TRUST_FILE = "settings-trusted.json"
# Larger settings files are refused: a settings file is a few hundred bytes.
USER_CONFIG_MAX_BYTES = 1024 * 1024
# Tables of a settings file that are not settings: read by their own modules
# (``hooks``: agentgraph/capabilities/hooks.py).
NON_SETTING_TABLES = frozenset({"hooks"})

# The settings (field names) a workspace's files may set: how the agent works on this
# code. Everything else — endpoint, keys, storage, sandbox, the commands' environment,
# approval modes, MCP trust, who the user is — belongs to the user alone. A new setting
# is user-only until it is listed here.
PROJECT_SETTINGS = frozenset(
    {
        "model",
        "summary_model",
        "context_window",
        "max_output_tokens",
        "max_loops",
        "max_message_history",
        "compact_threshold",
        "mask_threshold",
        "distil_threshold",
        "notice_threshold",
        "warn_threshold",
        "tool_output_max_tokens",
        "vision",
        "titles",
        "bash_timeout_s",
        "request_timeout_s",
        "run_timeout_s",
        "provider_max_retries",
        "subagent_max_depth",
        "subagent_timeout_s",
        "mcp_start_timeout_s",
        "mcp_tool_timeout_s",
        "undo_max_file_bytes",
        "undo_max_files",
    }
)


# Environment names (upper-case) whose values in the project's files did not validate:
# set while the settings are read again without them (session/startup.load_settings).
SKIPPED_PROJECT_NAMES: ContextVar[frozenset[str]] = ContextVar(
    "SKIPPED_PROJECT_NAMES", default=frozenset()
)


def _aliases(field: FieldInfo) -> list[str]:
    """The environment names of a field (its validation aliases)."""
    alias = field.validation_alias
    choices = getattr(alias, "choices", None)
    if choices is not None:
        return [str(choice) for choice in choices]
    return [str(alias)] if isinstance(alias, str) else []


def env_names(settings_cls: type[BaseSettings]) -> dict[str, str]:
    """Every environment name of the settings, upper-cased, mapped to its field name."""
    names: dict[str, str] = {}
    for name, field in settings_cls.model_fields.items():
        for alias in _aliases(field):
            names[alias.upper()] = name
    return names


def is_allowed(path: Path, home: Path) -> bool:
    """Whether the user allowed this workspace settings file, as it is now.

    Args:
        path: The workspace's ``.env``.
        home: ``AGENTGRAPH_HOME``, where the allowed files' digests are kept.
    """
    return allowed_files.is_allowed(path, home / SETTINGS_TRUST_FILE, str(path.resolve()))


def allow(path: Path, home: Path) -> None:
    """Record a workspace settings file, as it is now, as allowed (any change asks again).

    Args:
        path: The workspace's ``.env``.
        home: ``AGENTGRAPH_HOME``.

    Raises:
        ConfigError: The file cannot be read or the record cannot be written.
    """
    try:
        recorded = allowed_files.allow(path, home / SETTINGS_TRUST_FILE, str(path.resolve()))
    except OSError as exc:
        raise ConfigError(f"cannot record the allowed file in {home}: {exc.strerror}") from None
    if not recorded:
        raise ConfigError(f"cannot read {path}")


def _home_of(state: dict[str, Any], default: Path) -> Path:
    """``AGENTGRAPH_HOME`` as the higher-priority sources (code, environment) set it."""
    for key, value in state.items():
        named = key.upper() == "AGENTGRAPH_HOME" or key == "home"
        if named and isinstance(value, str | Path) and str(value):
            return Path(value).expanduser()
    return default.expanduser()


def split_workspace_values(
    values: dict[str, Any], settings_cls: type[BaseSettings]
) -> tuple[dict[str, Any], list[str]]:
    """Split a workspace file's values into those it may set and the names it may not.

    Args:
        values: The file's values, keyed by environment name (as the dotenv source reads them).
        settings_cls: The settings class (for the names' fields).

    Returns:
        The values to keep, and the environment names ignored (sorted, upper-case).
    """
    fields = env_names(settings_cls)
    kept: dict[str, Any] = {}
    ignored: list[str] = []
    for key, value in values.items():
        field = fields.get(key.upper())
        if field is None:
            continue  # not a setting (the project's own variables): never ours to read
        if field in PROJECT_SETTINGS:
            kept[key] = value
        else:
            ignored.append(key.upper())
    return kept, sorted(ignored)


def limit_to_project(
    values: dict[str, Any], path: Path, home: Path, settings_cls: type[BaseSettings]
) -> tuple[dict[str, Any], list[str]]:
    """What a project file may set, and the names it may not: everything when the user
    allowed that file as it is.

    Args:
        values: The file's values, keyed by environment name.
        path: The file (its content is what the user allowed, or not).
        home: ``AGENTGRAPH_HOME``, where the allowed files' digests are kept.
        settings_cls: The settings class.

    Returns:
        The values to keep, and the environment names ignored (sorted, upper-case).
    """
    if not values or is_allowed(path, home):
        return values, []
    return split_workspace_values(values, settings_cls)


class WorkspaceEnvSource(PydanticBaseSettingsSource):
    """The workspace's ``.env``, limited to :data:`PROJECT_SETTINGS` unless allowed."""

    def __init__(
        self, settings_cls: type[BaseSettings], dotenv: PydanticBaseSettingsSource, home: Path
    ) -> None:
        super().__init__(settings_cls)
        self._dotenv = dotenv
        self._default_home = home

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        """Unused: :meth:`__call__` filters the whole file at once."""
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        values = self._dotenv()
        path = workspace_env_path(self._dotenv)
        if path is None:
            return values
        home = _home_of(self.current_state, self._default_home)
        return _without_skipped(limit_to_project(values, path, home, self.settings_cls)[0])


def workspace_env_path(dotenv: PydanticBaseSettingsSource) -> Path | None:
    """The ``.env`` file a dotenv source reads, or None (none configured or several)."""
    if not isinstance(dotenv, DotEnvSettingsSource):
        return None
    env_file = dotenv.env_file
    if isinstance(env_file, str | Path) and str(env_file):
        return Path(env_file)
    return None


class UserConfigSource(PydanticBaseSettingsSource):
    """The user's ``$AGENTGRAPH_HOME/config.toml``: any setting, by field name."""

    def __init__(self, settings_cls: type[BaseSettings], home: Path) -> None:
        super().__init__(settings_cls)
        self._default_home = home

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        """Unused: :meth:`__call__` reads the whole file at once."""
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        home = _home_of(self.current_state, self._default_home)
        path = home / USER_CONFIG_NAME
        return config_values(read_user_config(path), self.settings_cls, path)


UNKNOWN_SETTING_HINT = (
    "keys are the setting names `agentgraph config` lists; home is set by AGENTGRAPH_HOME"
)


def _split_config(
    data: dict[str, Any], settings_cls: type[BaseSettings]
) -> tuple[dict[str, Any], list[str]]:
    """A TOML settings file's values keyed by environment name, and its unknown keys."""
    values: dict[str, Any] = {}
    unknown: list[str] = []
    for name, value in data.items():
        if name in NON_SETTING_TABLES:
            continue
        field = settings_cls.model_fields.get(name)
        if field is None or name == "home":
            unknown.append(name)
            continue
        aliases = _aliases(field)
        values[aliases[0] if aliases else name] = value
    return values, unknown


def config_values(
    data: dict[str, Any], settings_cls: type[BaseSettings], path: Path
) -> dict[str, Any]:
    """The user's TOML settings file's values keyed by environment name, as the other
    sources.

    Raises:
        ConfigError: A key is not a setting (or is ``home``, which only
            ``AGENTGRAPH_HOME`` sets).
    """
    values, unknown = _split_config(data, settings_cls)
    if unknown:
        raise ConfigError(f"{path}: unknown setting {unknown[0]!r} ({UNKNOWN_SETTING_HINT})")
    return values


def project_config_values(
    path: Path, settings_cls: type[BaseSettings]
) -> tuple[dict[str, Any], list[str]]:
    """The project's ``.agentgraph/config.toml`` values (keyed by environment name),
    without what is wrong in it, and what is wrong in it.

    A project's file is input, as the repository it comes with: a file that cannot be
    read or parsed is skipped, an unknown key is skipped; none of it stops a command.

    Args:
        path: The project's settings file.
        settings_cls: The settings class.

    Returns:
        The values, and one line per problem (naming the file); ({}, []) without a file.
    """
    try:
        data = read_user_config(path)
    except ConfigError as exc:
        return {}, [f"ignored {exc}"]
    values, unknown = _split_config(data, settings_cls)
    problems = [
        f"ignored unknown setting {name!r} in {path} ({UNKNOWN_SETTING_HINT})" for name in unknown
    ]
    return values, problems


def skipped_project_names() -> frozenset[str]:
    """Environment names (upper-case) the project's files set to values that are not
    valid: the project sources leave them out (see :data:`SKIPPED_PROJECT_NAMES`)."""
    return SKIPPED_PROJECT_NAMES.get()


def _without_skipped(values: dict[str, Any]) -> dict[str, Any]:
    skipped = skipped_project_names()
    if not skipped:
        return values
    return {key: value for key, value in values.items() if key.upper() not in skipped}


class ProjectConfigSource(PydanticBaseSettingsSource):
    """The project's ``.agentgraph/config.toml``, limited to :data:`PROJECT_SETTINGS`
    unless allowed (as the ``.env``)."""

    def __init__(self, settings_cls: type[BaseSettings], path: Path | None, home: Path) -> None:
        super().__init__(settings_cls)
        self._path = path
        self._default_home = home

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        """Unused: :meth:`__call__` reads the whole file at once."""
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        if self._path is None:
            return {}
        values = project_config_values(self._path, self.settings_cls)[0]
        home = _home_of(self.current_state, self._default_home)
        return _without_skipped(limit_to_project(values, self._path, home, self.settings_cls)[0])


def project_config_path(dotenv: PydanticBaseSettingsSource) -> Path | None:
    """The project settings file beside the ``.env`` a dotenv source reads (None: no
    project folder, as when the ``.env`` is turned off)."""
    env_file = workspace_env_path(dotenv)
    return env_file.parent / PROJECT_CONFIG_PATH if env_file is not None else None


def ignored_project_config(path: Path, home: Path, settings_cls: type[BaseSettings]) -> list[str]:
    """Keys the project's ``.agentgraph/config.toml`` sets that it may not (not allowed).

    Args:
        path: The project's settings file.
        home: ``AGENTGRAPH_HOME``.
        settings_cls: The settings class.

    Returns:
        The ignored keys (field names, as written in the file), sorted; [] when there
        is no such file.
    """
    if not path.is_file():
        return []
    values = project_config_values(path, settings_cls)[0]
    ignored = limit_to_project(values, path, home, settings_cls)[1]
    names = env_names(settings_cls)
    return sorted(names[name] for name in ignored)


def read_user_config(path: Path) -> dict[str, Any]:
    """A TOML settings file (the user's or the project's) as a dict ({} when there is none).

    Raises:
        ConfigError: The file is unreadable, too large or not valid TOML.
    """
    try:
        with path.open("rb") as handle:
            raw = handle.read(USER_CONFIG_MAX_BYTES + 1)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror})") from None
    if len(raw) > USER_CONFIG_MAX_BYTES:
        raise ConfigError(f"{path}: larger than {USER_CONFIG_MAX_BYTES} bytes")
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None


def ignored_workspace_settings(
    env_file: Path, home: Path, settings_cls: type[BaseSettings]
) -> list[str]:
    """Names a workspace ``.env`` sets that it may not (and the user has not allowed).

    Args:
        env_file: The workspace's ``.env``.
        home: ``AGENTGRAPH_HOME``.
        settings_cls: The settings class.

    Returns:
        The ignored environment names, sorted; [] when there is no such file.
    """
    if not env_file.is_file():
        return []
    values = DotEnvSettingsSource(settings_cls, env_file=env_file)()
    return limit_to_project(values, env_file, home, settings_cls)[1]


ORIGIN_FLAG = "flag"
ORIGIN_ENVIRONMENT = "environment"
ORIGIN_PROJECT = "project"
ORIGIN_USER = "user"
ORIGIN_DEFAULT = "default"


@dataclass(frozen=True)
class Origin:
    """Where a setting's value came from.

    Attributes:
        kind: ``flag``, ``environment``, ``project``, ``user`` or ``default``.
        where: The variable (environment) or the file (project, user); "" otherwise.
    """

    kind: str
    where: str = ""


def setting_origins(
    settings_cls: type[BaseSettings],
    *,
    flags: dict[str, Any],
    env_file: Path | None,
    home: Path,
    skipped: frozenset[str] = frozenset(),
) -> dict[str, Origin]:
    """Where each setting's value comes from, by the same sources, in the same order,
    as the settings class reads them.

    Args:
        settings_cls: The settings class.
        flags: The values given on the command line (keyed by environment name).
        env_file: The project's ``.env`` (its folder holds ``.agentgraph/config.toml``),
            or None for no project files.
        home: ``AGENTGRAPH_HOME`` as the settings resolved it.
        skipped: Environment names the project's files set to values that were left
            out as not valid (``Settings.skipped_project_names``).

    Returns:
        Every field name mapped to its origin.
    """
    dotenv = DotEnvSettingsSource(settings_cls, env_file=env_file)
    project_file = project_config_path(dotenv)
    layers: list[tuple[Origin, PydanticBaseSettingsSource]] = [
        (Origin(ORIGIN_FLAG), InitSettingsSource(settings_cls, init_kwargs=flags)),
        (Origin(ORIGIN_ENVIRONMENT), EnvSettingsSource(settings_cls)),
        (Origin(ORIGIN_PROJECT, str(env_file)), WorkspaceEnvSource(settings_cls, dotenv, home)),
        (
            Origin(ORIGIN_PROJECT, str(project_file)),
            ProjectConfigSource(settings_cls, project_file, home),
        ),
        (Origin(ORIGIN_USER, str(home / USER_CONFIG_NAME)), UserConfigSource(settings_cls, home)),
    ]
    names = env_names(settings_cls)
    origins: dict[str, Origin] = {}
    token = SKIPPED_PROJECT_NAMES.set(skipped)
    try:
        read = [(origin, source()) for origin, source in layers]
    finally:
        SKIPPED_PROJECT_NAMES.reset(token)
    for origin, values in read:
        for key in values:
            field = names.get(key.upper()) or (key if key in settings_cls.model_fields else None)
            if field is None or field in origins:
                continue
            where = key.upper() if origin.kind == ORIGIN_ENVIRONMENT else origin.where
            origins[field] = Origin(origin.kind, where)
    for field in settings_cls.model_fields:
        origins.setdefault(field, Origin(ORIGIN_DEFAULT))
    return origins
