"""Typed settings, built once at the edge (CLI, server factory) and passed down.

Library code never reads ``os.environ``: everything configurable lives here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, AliasGenerator, Field, PrivateAttr, SecretStr, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from agentgraph.providers.endpoints import is_local_endpoint

# A setting's environment name is this prefix and its field name, upper-case
# (AGENTGRAPH_MODEL sets ``model``), unless the field declares names of its own.
ENV_PREFIX = "AGENTGRAPH_"
DEFAULT_MODEL = "gpt-4o-mini"
DEFAULT_HOME = Path("~/.agentgraph")
SESSIONS_DB_NAME = "sessions.db"

# Model calls per request. The cap is a backstop, not the runaway guard (that one looks
# at behaviour: nodes/model_turn.py), so it sits far above what a long task needs.
# 0 = no cap: the run is then bounded only by MAX_LOOPS_UNCAPPED, because LangGraph's
# recursion limit (derived from the cap) must stay finite.
MAX_LOOPS_DEFAULT = 1000
MAX_LOOPS_MIN = 0
MAX_LOOPS_MAX = 10_000
MAX_LOOPS_UNCAPPED = 1_000_000
# Prompt + completion tokens the model calls of one request may spend before the run
# stops (AGENTGRAPH_TURN_BUDGET_TOKENS, `run --budget`); 0 = no budget (the default).
TURN_BUDGET_TOKENS_DEFAULT = 0
# The same in estimated US dollars (AGENTGRAPH_TURN_BUDGET_USD, `run --budget $X`; needs a
# model with a known price); 0 = no budget (the default).
TURN_BUDGET_USD_DEFAULT = 0.0
# Window of the history helpers when a caller names none; the setting itself is unset
# by default (the token budget alone decides what the model sees).
# Share of the usable budget of outputs masked since the last summary that triggers their
# distillation into one (AGENTGRAPH_DISTIL_THRESHOLD).
DISTIL_THRESHOLD_DEFAULT = 1.0
MAX_MESSAGE_HISTORY_DEFAULT = 40
MAX_MESSAGE_HISTORY_MIN = 10
MAX_MESSAGE_HISTORY_MAX = 100
BASH_TIMEOUT_S_DEFAULT = 120
# Wall-clock cap of one `agentgraph run`; 0 = no cap (the default).
RUN_TIMEOUT_S_DEFAULT = 0.0
REQUEST_TIMEOUT_S_DEFAULT = 600.0
# The REPL rings the terminal bell when a turn that took at least this many seconds
# ends (AGENTGRAPH_NOTIFY_AFTER_S; 0 = never).
NOTIFY_AFTER_S_DEFAULT = 30.0
# Commit each turn's changed files with a generated message (AGENTGRAPH_AUTO_COMMIT).
AUTO_COMMIT_DEFAULT: Literal["off", "on"] = "off"
# An MCP server that has not answered initialize + tools/list by then is reported as hung
# (Claude Code's MCP_TIMEOUT); it connects in the background, so this delays no prompt.
MCP_START_TIMEOUT_S_DEFAULT = 20.0
# One MCP tool call that has not answered by then ends with an error result the model
# reads; the run goes on (AGENTGRAPH_MCP_TOOL_TIMEOUT_S).
MCP_TOOL_TIMEOUT_S_DEFAULT = 120.0
PROVIDER_MAX_RETRIES_DEFAULT = 4
CLEANUP_DAYS_DEFAULT = 30
# Sessions: prune old checkpoints when the SQLite file passes this size (0 disables),
# spending at most this long at start-up; undo snapshot limits; model-written titles.
PRUNE_THRESHOLD_MB_DEFAULT = 512
PRUNE_TIME_BUDGET_S_DEFAULT = 20.0
UNDO_MAX_FILE_BYTES_DEFAULT = 2 * 1024 * 1024
UNDO_MAX_FILES_DEFAULT = 20_000
# Long enough for another agentgraph process to finish a checkpoint write, short
# enough that a stuck lock is reported instead of hanging the CLI.
SQLITE_BUSY_TIMEOUT_S_DEFAULT = 15.0
SUBAGENT_MAX_DEPTH_DEFAULT = 2
# A subagent that runs longer is abandoned (it stops at its next step) with ok: false.
SUBAGENT_TIMEOUT_S_DEFAULT = 900.0
# Background subagents (call_subagent(background=true)) one process runs at once.
SUBAGENT_MAX_BACKGROUND_DEFAULT = 4
POSTGRES_POOL_MAX_SIZE_DEFAULT = 10
POSTGRES_CONNECT_TIMEOUT_S_DEFAULT = 10.0
# Shorter database passwords, and shorter keys of a local endpoint, are not redacted from
# tool output (characters): replacing every occurrence of, say, "pg" would garble ordinary
# text, and a local server takes any key, so its users set a word ("local", "ollama",
# "EMPTY") that redacted turned every "localhost" a tool printed into "[REDACTED]host".
SECRET_REDACT_MIN_CHARS = 8


# Text-written tool calls understood only where needed (a local endpoint) by default.
TEXT_TOOL_CALLS_DEFAULT: Literal["auto", "on", "off"] = "auto"
# How an on/off setting that used to be a boolean may still be written.
TEXT_TOOL_CALLS_TRUE_WORDS = frozenset({"true", "1", "yes"})
TEXT_TOOL_CALLS_FALSE_WORDS = frozenset({"false", "0", "no"})

DEFAULT_USER_ID = "user"
# Permission modes, strictest first (agentgraph/security/permissions.py): plan = read-only until the
# user accepts a plan; ask = commands, edits and MCP tools ask; accept-edits = edits run,
# commands and MCP tools ask; auto = everything runs (the sandbox still applies).
PermissionMode = Literal["plan", "ask", "accept-edits", "auto"]
PERMISSION_MODES: tuple[PermissionMode, ...] = ("plan", "ask", "accept-edits", "auto")
# auto keeps what AGENTGRAPH_BASH / AGENTGRAPH_EDITS / AGENTGRAPH_MCP_TOOLS alone decide.
PERMISSION_MODE_DEFAULT: PermissionMode = "auto"
USER_ID_MAX_CHARS = 128


def os_user_name() -> str:
    """The OS user name (``AGENTGRAPH_USER_ID``'s default), or ``"user"`` if unknown."""
    import getpass

    try:
        name = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry and no USER/LOGNAME (containers)
        return DEFAULT_USER_ID
    return name or DEFAULT_USER_ID


def _env_name(field_name: str) -> str:
    """The environment name of a setting that declares none: ``AGENTGRAPH_<FIELD>``."""
    return f"{ENV_PREFIX}{field_name.upper()}"


def _url_password(url: str) -> str:
    """The password in a ``scheme://user:password@host/…`` URL, or ``""``."""
    from urllib.parse import unquote, urlsplit

    try:
        password = urlsplit(url).password
    except ValueError:
        return ""
    return unquote(password) if password else ""


class Settings(BaseSettings):
    """All of agentgraph's configuration.

    Read from the values passed in code (the CLI's flags), the process environment,
    the project's ``.env`` and ``.agentgraph/config.toml`` in the current directory
    (only what a project may decide) and the user's ``$AGENTGRAPH_HOME/config.toml``
    (see :mod:`agentgraph.security.settings_sources`). Every field is documented in
    ``.env.example``.
    """

    # Each setting's validation alias is its environment name, generated from the field
    # name, so code (Settings(AGENTGRAPH_HOME=…)), the environment, the files and the
    # validation errors all name a setting alike. (env_prefix reads the same variables,
    # but validates, and reports, a setting under its field name.)
    model_config = SettingsConfigDict(
        alias_generator=AliasGenerator(validation_alias=_env_name),
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
    )
    # Environment names whose values in the project's files were not valid and were
    # left out (session/startup.load_settings), so `agentgraph config` tells the same story.
    _skipped_project_names: frozenset[str] = PrivateAttr(default_factory=frozenset)

    model: str = DEFAULT_MODEL
    # The OpenAI SDK's own names, so a shell already set up for it works as it is.
    base_url: str | None = Field(None, validation_alias=AliasChoices("OPENAI_BASE_URL"))
    api_key: SecretStr | None = Field(None, validation_alias=AliasChoices("OPENAI_API_KEY"))
    home: Path = Field(DEFAULT_HOME, validate_default=True)
    # SecretStr: the URL usually carries a password (never printed, stored or passed on).
    database_url: SecretStr | None = None
    postgres_pool_max_size: int = Field(POSTGRES_POOL_MAX_SIZE_DEFAULT, ge=1, le=100)
    postgres_connect_timeout_s: float = Field(POSTGRES_CONNECT_TIMEOUT_S_DEFAULT, gt=0, le=300)
    context_window: int | None = Field(None, ge=1024)
    max_output_tokens: int | None = Field(None, ge=256)
    # MAX_LOOPS, MAX_MESSAGE_HISTORY, TOOL_OUTPUT_MAX_TOKENS: earlier names, still read.
    max_loops: int = Field(
        MAX_LOOPS_DEFAULT,
        ge=MAX_LOOPS_MIN,
        le=MAX_LOOPS_MAX,
        validation_alias=AliasChoices("MAX_LOOPS", "AGENTGRAPH_MAX_LOOPS"),
    )
    turn_budget_tokens: int = Field(TURN_BUDGET_TOKENS_DEFAULT, ge=0)
    turn_budget_usd: float = Field(TURN_BUDGET_USD_DEFAULT, ge=0, allow_inf_nan=False)
    # Unset (the default): no message-count window, the token budget alone decides,
    # so nothing is summarized while the prompt has room. Set: at most this many
    # messages after the last summary (reaching it compacts).
    max_message_history: int | None = Field(
        None,
        ge=MAX_MESSAGE_HISTORY_MIN,
        le=MAX_MESSAGE_HISTORY_MAX,
        validation_alias=AliasChoices("MAX_MESSAGE_HISTORY", "AGENTGRAPH_MAX_MESSAGE_HISTORY"),
    )
    compact_threshold: float = Field(0.90, gt=0.1, le=1.0)
    # Old tool outputs are masked in the prompt view from this share of the budget on
    # (1.0: never); below compact_threshold, so a summary comes only when masking is
    # not enough.
    mask_threshold: float = Field(0.60, gt=0.1, le=1.0)
    # Outputs masked since the last summary are distilled into one (a compaction) once
    # they add up to this share of the budget (10: never): what masking hides reaches a
    # summary instead of leaving for good.
    distil_threshold: float = Field(DISTIL_THRESHOLD_DEFAULT, gt=0.0, le=10.0)
    notice_threshold: float = Field(0.75, gt=0.0, le=1.0)
    warn_threshold: float = Field(0.85, gt=0.0, le=1.0)
    summary_model: str | None = None
    tool_output_max_tokens: int | None = Field(
        None,
        ge=200,
        validation_alias=AliasChoices(
            "AGENTGRAPH_TOOL_OUTPUT_MAX_TOKENS", "TOOL_OUTPUT_MAX_TOKENS"
        ),
    )
    bash: Literal["off", "ask", "on"] = "on"
    # MCP servers from ~/.agentgraph/mcp.json and the workspace's .agentgraph/mcp.json.
    mcp: Literal["on", "off"] = "on"
    # MCP tool calls: "ask" pauses the run for the user's approval of each call.
    mcp_tools: Literal["ask", "on"] = "on"
    # Per-server limit for an MCP server to connect and list its tools.
    mcp_start_timeout_s: float = Field(MCP_START_TIMEOUT_S_DEFAULT, gt=0, le=3600)
    # Per-call limit of an MCP tool; past it the call is an error result and the run goes on.
    mcp_tool_timeout_s: float = Field(MCP_TOOL_TIMEOUT_S_DEFAULT, gt=0, le=86_400)
    # Start the workspace's MCP servers without asking (scripts, CI, trusted checkouts).
    mcp_trust_workspace: bool = False
    # Turn tool calls a model wrote as text (JSON, <tool_call> tags) into real calls:
    # auto = only for a local endpoint (agentgraph.providers.model.text_tool_calls_on), on, off.
    text_tool_calls: Literal["auto", "on", "off"] = TEXT_TOOL_CALLS_DEFAULT
    # Which built-in tools every request carries: auto = the core set (files, search,
    # shell, history) for a window of at most 12,288 tokens, else all; full; core
    # (agentgraph/capabilities/tools/tool_set.py).
    tool_set: Literal["auto", "full", "core"] = "auto"
    # Whether the model takes images: auto = its profile, else known model families.
    vision: Literal["auto", "on", "off"] = "auto"
    # write_file / edit_file: "ask" pauses the run for the user's approval of each change.
    edits: Literal["ask", "on"] = "on"
    # What may run without asking (PERMISSION_MODES); the ask settings above still ask in
    # every mode. User-only: a project's files cannot set it.
    permission_mode: PermissionMode = PERMISSION_MODE_DEFAULT
    # Long-term memory (memory_save / memory_delete change what later sessions' prompts
    # hold): auto = ask whenever any approval mode asks, else on; ask; on; off = no memory
    # tools and no memories in the prompt.
    memory: Literal["auto", "ask", "on", "off"] = "auto"
    # Who runs the agent: recorded in each turn's state (the scope of per-user data).
    user_id: str = Field(default_factory=os_user_name, min_length=1, max_length=USER_ID_MAX_CHARS)
    bash_timeout_s: int = Field(BASH_TIMEOUT_S_DEFAULT, ge=1, le=3600)
    # Shell sandbox (bubblewrap, Linux): auto = use it when it can start, else say so
    # once and run unsandboxed; on = refuse commands without it; off = never.
    sandbox: Literal["auto", "on", "off"] = "auto"
    bash_network: Literal["off", "on"] = "off"
    # on = sandboxed commands may write the workspace's .git and the others inside it
    # (commit, stash, checkout), and with it the programs git runs for the user later
    # (hooks, a config's monitor).
    bash_git_write: Literal["off", "on"] = "off"
    # Comma-separated names of more variables passed to shell commands.
    bash_env_allow: str = ""
    request_timeout_s: float = Field(REQUEST_TIMEOUT_S_DEFAULT, gt=0)
    run_timeout_s: float = Field(RUN_TIMEOUT_S_DEFAULT, ge=0)
    notify_after_s: float = Field(NOTIFY_AFTER_S_DEFAULT, ge=0)
    auto_commit: Literal["off", "on"] = AUTO_COMMIT_DEFAULT
    provider_max_retries: int = Field(PROVIDER_MAX_RETRIES_DEFAULT, ge=0, le=10)
    cleanup_days: int = Field(CLEANUP_DAYS_DEFAULT, ge=0)
    prune_threshold_mb: int = Field(PRUNE_THRESHOLD_MB_DEFAULT, ge=0)
    prune_time_budget_s: float = Field(PRUNE_TIME_BUDGET_S_DEFAULT, gt=0, le=3600)
    undo_max_file_bytes: int = Field(UNDO_MAX_FILE_BYTES_DEFAULT, ge=0)
    undo_max_files: int = Field(UNDO_MAX_FILES_DEFAULT, ge=0)
    titles: Literal["model", "first_message"] = "model"
    subagent_max_depth: int = Field(SUBAGENT_MAX_DEPTH_DEFAULT, ge=0, le=5)
    subagent_timeout_s: float = Field(SUBAGENT_TIMEOUT_S_DEFAULT, gt=0, le=86_400)
    subagent_max_background: int = Field(SUBAGENT_MAX_BACKGROUND_DEFAULT, ge=0, le=64)
    # A LangGraph server (its URL) whose agentgraph graph runs the subagents instead of
    # this process (agentgraph/capabilities/remote_subagents.py); None: they run here.
    subagent_server: str | None = None
    subagent_server_api_key: SecretStr | None = None
    sqlite_busy_timeout_s: float = Field(SQLITE_BUSY_TIMEOUT_S_DEFAULT, gt=0, le=600)
    # The workspace of the LangGraph server graph (agentgraph/frontends/server.py); None: the
    # server's working directory. Clients cannot choose another one.
    server_workspace: Path | None = None
    debug: bool = False

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Code (flags), then the environment, then the project's ``.env`` and
        ``.agentgraph/config.toml`` (limited), then the user's config file: a cloned
        repository cannot act as the user."""
        from agentgraph.security.settings_sources import (
            ProjectConfigSource,
            UserConfigSource,
            WorkspaceEnvSource,
            project_config_path,
        )

        return (
            init_settings,
            env_settings,
            WorkspaceEnvSource(settings_cls, dotenv_settings, DEFAULT_HOME),
            ProjectConfigSource(settings_cls, project_config_path(dotenv_settings), DEFAULT_HOME),
            UserConfigSource(settings_cls, DEFAULT_HOME),
            file_secret_settings,
        )

    @field_validator("text_tool_calls", mode="before")
    @classmethod
    def _text_tool_calls_switch(cls, value: object) -> object:
        # The setting was a boolean before it had "auto": true/false still mean on/off.
        text = str(value).strip().lower()
        if value is True or text in TEXT_TOOL_CALLS_TRUE_WORDS:
            return "on"
        if value is False or text in TEXT_TOOL_CALLS_FALSE_WORDS:
            return "off"
        return text if isinstance(value, str) else value

    @field_validator("home", mode="after")
    @classmethod
    def _expand_home(cls, value: Path) -> Path:
        return value.expanduser()

    @field_validator("base_url", "subagent_server", mode="after")
    @classmethod
    def _http_base_url(cls, value: str | None) -> str | None:
        # A URL without a scheme would be retried as a dropped connection: refuse it now.
        if value and not value.strip().lower().startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value.strip() if value else value

    @property
    def bash_env_allow_names(self) -> list[str]:
        """``AGENTGRAPH_BASH_ENV_ALLOW`` as a list of variable names."""
        return [name.strip() for name in self.bash_env_allow.split(",") if name.strip()]

    @property
    def memory_approval(self) -> str | None:
        """The setting that makes memory changes need approval, or None when they do not.

        ``AGENTGRAPH_MEMORY=auto`` follows the approval modes: a memory is a lasting
        write into the prompt of later sessions, so whoever approves commands, edits or
        MCP calls approves memories too.
        """
        if self.memory == "ask":
            return "AGENTGRAPH_MEMORY"
        if self.memory != "auto":
            return None
        modes = (
            ("AGENTGRAPH_EDITS", self.edits),
            ("AGENTGRAPH_BASH", self.bash),
            ("AGENTGRAPH_MCP_TOOLS", self.mcp_tools),
        )
        return next((name for name, mode in modes if mode == "ask"), None)

    @property
    def loop_cap(self) -> int:
        """Model calls a request may make: ``max_loops``, or MAX_LOOPS_UNCAPPED for 0."""
        return self.max_loops or MAX_LOOPS_UNCAPPED

    @property
    def db_path(self) -> Path:
        """The SQLite file holding checkpoints and the session index."""
        return self.home / SESSIONS_DB_NAME

    @property
    def compaction_keep_messages(self) -> int | None:
        """Most messages a compaction keeps verbatim: half of ``MAX_MESSAGE_HISTORY``.

        None when the setting is unset: the kept part is bounded by tokens alone.
        """
        if self.max_message_history is None:
            return None
        return self.max_message_history // 2

    @property
    def skipped_project_names(self) -> frozenset[str]:
        """Environment names (upper-case) left out of the project's files as not valid."""
        return self._skipped_project_names

    def skip_project_names(self, names: frozenset[str]) -> None:
        """Record the project values left out as not valid (see the property)."""
        self._skipped_project_names = names

    def secret_values(self) -> list[str]:
        """Secret strings that must never be written anywhere: the API keys (the key of
        a local endpoint from :data:`SECRET_REDACT_MIN_CHARS` characters on: a shorter one
        is the placeholder word a local server takes), the database URL, and its password
        from that length on."""
        values: list[str] = []
        if self.api_key is not None:
            key = self.api_key.get_secret_value()
            if len(key) >= SECRET_REDACT_MIN_CHARS or not is_local_endpoint(self.base_url):
                values.append(key)
        if self.subagent_server_api_key is not None:
            values.append(self.subagent_server_api_key.get_secret_value())
        if self.database_url is not None:
            url = self.database_url.get_secret_value()
            password = _url_password(url)
            values.append(url)
            if len(password) >= SECRET_REDACT_MIN_CHARS:
                values.append(password)
        return [value for value in values if value]
