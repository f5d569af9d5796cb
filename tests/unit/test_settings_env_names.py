"""Every setting's environment names, frozen: the names a user's shell, a ``.env`` or the
code may use to set it, no more and no fewer.

The table was computed from the settings class while each field spelled its names as
aliases; the class now reads most of them through ``env_prefix``, and a user's existing
environment must keep meaning the same thing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from agentgraph.config import Settings
from agentgraph.security.settings_sources import allow, env_names, ignored_workspace_settings

# field -> its environment names, the first being the one `agentgraph config` shows.
ACCEPTED: dict[str, tuple[str, ...]] = {
    "model": ("AGENTGRAPH_MODEL",),
    "base_url": ("OPENAI_BASE_URL",),
    "api_key": ("OPENAI_API_KEY",),
    "home": ("AGENTGRAPH_HOME",),
    "database_url": ("AGENTGRAPH_DATABASE_URL",),
    "postgres_pool_max_size": ("AGENTGRAPH_POSTGRES_POOL_MAX_SIZE",),
    "postgres_connect_timeout_s": ("AGENTGRAPH_POSTGRES_CONNECT_TIMEOUT_S",),
    "context_window": ("AGENTGRAPH_CONTEXT_WINDOW",),
    "max_output_tokens": ("AGENTGRAPH_MAX_OUTPUT_TOKENS",),
    "max_loops": ("MAX_LOOPS", "AGENTGRAPH_MAX_LOOPS"),
    "turn_budget_tokens": ("AGENTGRAPH_TURN_BUDGET_TOKENS",),
    "turn_budget_usd": ("AGENTGRAPH_TURN_BUDGET_USD",),
    "max_message_history": ("MAX_MESSAGE_HISTORY", "AGENTGRAPH_MAX_MESSAGE_HISTORY"),
    "compact_threshold": ("AGENTGRAPH_COMPACT_THRESHOLD",),
    "mask_threshold": ("AGENTGRAPH_MASK_THRESHOLD",),
    "distil_threshold": ("AGENTGRAPH_DISTIL_THRESHOLD",),
    "notice_threshold": ("AGENTGRAPH_NOTICE_THRESHOLD",),
    "warn_threshold": ("AGENTGRAPH_WARN_THRESHOLD",),
    "summary_model": ("AGENTGRAPH_SUMMARY_MODEL",),
    "tool_output_max_tokens": ("AGENTGRAPH_TOOL_OUTPUT_MAX_TOKENS", "TOOL_OUTPUT_MAX_TOKENS"),
    "bash": ("AGENTGRAPH_BASH",),
    "mcp": ("AGENTGRAPH_MCP",),
    "mcp_tools": ("AGENTGRAPH_MCP_TOOLS",),
    "mcp_start_timeout_s": ("AGENTGRAPH_MCP_START_TIMEOUT_S",),
    "mcp_tool_timeout_s": ("AGENTGRAPH_MCP_TOOL_TIMEOUT_S",),
    "mcp_trust_workspace": ("AGENTGRAPH_MCP_TRUST_WORKSPACE",),
    "text_tool_calls": ("AGENTGRAPH_TEXT_TOOL_CALLS",),
    "vision": ("AGENTGRAPH_VISION",),
    "tool_set": ("AGENTGRAPH_TOOL_SET",),
    "edits": ("AGENTGRAPH_EDITS",),
    "permission_mode": ("AGENTGRAPH_PERMISSION_MODE",),
    "memory": ("AGENTGRAPH_MEMORY",),
    "user_id": ("AGENTGRAPH_USER_ID",),
    "bash_timeout_s": ("AGENTGRAPH_BASH_TIMEOUT_S",),
    "sandbox": ("AGENTGRAPH_SANDBOX",),
    "bash_network": ("AGENTGRAPH_BASH_NETWORK",),
    "bash_git_write": ("AGENTGRAPH_BASH_GIT_WRITE",),
    "bash_env_allow": ("AGENTGRAPH_BASH_ENV_ALLOW",),
    "request_timeout_s": ("AGENTGRAPH_REQUEST_TIMEOUT_S",),
    "run_timeout_s": ("AGENTGRAPH_RUN_TIMEOUT_S",),
    "notify_after_s": ("AGENTGRAPH_NOTIFY_AFTER_S",),
    "auto_commit": ("AGENTGRAPH_AUTO_COMMIT",),
    "provider_max_retries": ("AGENTGRAPH_PROVIDER_MAX_RETRIES",),
    "cleanup_days": ("AGENTGRAPH_CLEANUP_DAYS",),
    "prune_threshold_mb": ("AGENTGRAPH_PRUNE_THRESHOLD_MB",),
    "prune_time_budget_s": ("AGENTGRAPH_PRUNE_TIME_BUDGET_S",),
    "undo_max_file_bytes": ("AGENTGRAPH_UNDO_MAX_FILE_BYTES",),
    "undo_max_files": ("AGENTGRAPH_UNDO_MAX_FILES",),
    "titles": ("AGENTGRAPH_TITLES",),
    "subagent_max_depth": ("AGENTGRAPH_SUBAGENT_MAX_DEPTH",),
    "subagent_timeout_s": ("AGENTGRAPH_SUBAGENT_TIMEOUT_S",),
    "subagent_max_background": ("AGENTGRAPH_SUBAGENT_MAX_BACKGROUND",),
    "subagent_server": ("AGENTGRAPH_SUBAGENT_SERVER",),
    "subagent_server_api_key": ("AGENTGRAPH_SUBAGENT_SERVER_API_KEY",),
    "sqlite_busy_timeout_s": ("AGENTGRAPH_SQLITE_BUSY_TIMEOUT_S",),
    "server_workspace": ("AGENTGRAPH_SERVER_WORKSPACE",),
    "debug": ("AGENTGRAPH_DEBUG",),
}

# field -> a value as the environment writes it, and the value the setting then holds;
# none is a default, so a name that is not read shows.
SAMPLE: dict[str, tuple[str, object]] = {
    "model": ("sample-model", "sample-model"),
    "base_url": ("http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1"),
    "api_key": ("sk-sample", "sk-sample"),
    "home": ("/tmp/agentgraph-sample-home", Path("/tmp/agentgraph-sample-home")),
    "database_url": ("postgresql://u@h/db", "postgresql://u@h/db"),
    "postgres_pool_max_size": ("7", 7),
    "postgres_connect_timeout_s": ("3.5", 3.5),
    "context_window": ("4096", 4096),
    "max_output_tokens": ("512", 512),
    "max_loops": ("77", 77),
    "turn_budget_tokens": ("1000", 1000),
    "turn_budget_usd": ("1.5", 1.5),
    "max_message_history": ("20", 20),
    "compact_threshold": ("0.7", 0.7),
    "mask_threshold": ("0.5", 0.5),
    "distil_threshold": ("2.0", 2.0),
    "notice_threshold": ("0.5", 0.5),
    "warn_threshold": ("0.9", 0.9),
    "summary_model": ("sample-summary", "sample-summary"),
    "tool_output_max_tokens": ("300", 300),
    "bash": ("ask", "ask"),
    "mcp": ("off", "off"),
    "mcp_tools": ("ask", "ask"),
    "mcp_start_timeout_s": ("5", 5.0),
    "mcp_tool_timeout_s": ("6", 6.0),
    "mcp_trust_workspace": ("true", True),
    "text_tool_calls": ("on", "on"),
    "vision": ("off", "off"),
    "tool_set": ("core", "core"),
    "edits": ("ask", "ask"),
    "permission_mode": ("plan", "plan"),
    "memory": ("off", "off"),
    "user_id": ("sample-user", "sample-user"),
    "bash_timeout_s": ("9", 9),
    "sandbox": ("off", "off"),
    "bash_network": ("on", "on"),
    "bash_git_write": ("on", "on"),
    "bash_env_allow": ("SAMPLE_VAR", "SAMPLE_VAR"),
    "request_timeout_s": ("11", 11.0),
    "run_timeout_s": ("12", 12.0),
    "notify_after_s": ("13", 13.0),
    "auto_commit": ("on", "on"),
    "provider_max_retries": ("2", 2),
    "cleanup_days": ("3", 3),
    "prune_threshold_mb": ("4", 4),
    "prune_time_budget_s": ("5", 5.0),
    "undo_max_file_bytes": ("1024", 1024),
    "undo_max_files": ("10", 10),
    "titles": ("first_message", "first_message"),
    "subagent_max_depth": ("1", 1),
    "subagent_timeout_s": ("14", 14.0),
    "subagent_max_background": ("1", 1),
    "subagent_server": ("http://127.0.0.1:9", "http://127.0.0.1:9"),
    "subagent_server_api_key": ("sample-key", "sample-key"),
    "sqlite_busy_timeout_s": ("16", 16.0),
    "server_workspace": ("/tmp/agentgraph-sample-ws", Path("/tmp/agentgraph-sample-ws")),
    "debug": ("true", True),
}

EVERY_NAME = [(field, name) for field, names in ACCEPTED.items() for name in names]
# Names a setting does not answer to: its bare field name, and the prefixed field name of
# a setting named after another vendor (AGENTGRAPH_BASE_URL is not OPENAI_BASE_URL).
NOT_NAMES = [
    (field, name)
    for field, names in ACCEPTED.items()
    for name in (field.upper(), f"AGENTGRAPH_{field.upper()}")
    # HOME is the OS's: it moves the default settings home (~/.agentgraph) by design.
    if name not in names and name != "HOME"
]


def _value(settings: Settings, field: str) -> Any:
    value = getattr(settings, field)
    return value.get_secret_value() if isinstance(value, SecretStr) else value


@pytest.fixture
def clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No setting in the environment, HOME (so the default settings home) in tmp_path."""
    for name in list(os.environ):
        upper = name.upper()
        if upper in {n for _, n in EVERY_NAME} | {n for _, n in NOT_NAMES}:
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_table_covers_every_setting() -> None:
    assert set(ACCEPTED) == set(Settings.model_fields) == set(SAMPLE)


def test_the_settings_know_exactly_these_names() -> None:
    expected = {name: field for field, name in EVERY_NAME}
    assert env_names(Settings) == expected
    # The first name is the one shown, in that order.
    shown = {
        field: next(n for n, f in env_names(Settings).items() if f == field) for field in ACCEPTED
    }
    assert shown == {field: names[0] for field, names in ACCEPTED.items()}


@pytest.mark.parametrize(("field", "name"), EVERY_NAME)
@pytest.mark.parametrize("spelling", [str.upper, str.lower])
def test_each_name_sets_its_setting_from_the_environment(
    field: str, name: str, spelling: Any, clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    raw, expected = SAMPLE[field]
    monkeypatch.setenv(spelling(name), raw)
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    assert _value(settings, field) == expected


@pytest.mark.parametrize(("field", "name"), EVERY_NAME)
@pytest.mark.parametrize("spelling", [str.upper, str.lower])
def test_each_name_is_a_keyword_of_the_settings(
    field: str, name: str, spelling: Any, clean_env: Path
) -> None:
    raw, expected = SAMPLE[field]
    settings = Settings(_env_file=None, **{spelling(name): raw})  # type: ignore[arg-type]
    assert _value(settings, field) == expected


@pytest.mark.parametrize(("field", "name"), EVERY_NAME)
def test_each_name_sets_its_setting_from_an_allowed_dotenv(
    field: str, name: str, clean_env: Path
) -> None:
    raw, expected = SAMPLE[field]
    env_file = clean_env / ".env"
    env_file.write_text(f"{name}={raw}\n", encoding="utf-8")
    allow(env_file, clean_env / ".agentgraph")  # the default home, under HOME
    settings = Settings(_env_file=env_file)  # type: ignore[call-arg]
    assert _value(settings, field) == expected


@pytest.mark.parametrize(("field", "name"), NOT_NAMES)
def test_no_other_name_sets_a_setting(
    field: str, name: str, clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    baseline = _value(Settings(_env_file=None), field)  # type: ignore[call-arg]
    raw, _expected = SAMPLE[field]
    monkeypatch.setenv(name, raw)
    env_file = clean_env / ".env"
    env_file.write_text(f"{name}={raw}\n", encoding="utf-8")
    allow(env_file, clean_env / ".agentgraph")
    assert _value(Settings(_env_file=env_file), field) == baseline  # type: ignore[call-arg]
    # Nor is it a setting a workspace's file would be told it may not set.
    assert ignored_workspace_settings(env_file, clean_env / "elsewhere", Settings) == []
    if name.startswith("AGENTGRAPH_"):
        settings = Settings(_env_file=None, **{name: raw})  # type: ignore[arg-type]
        assert _value(settings, field) == baseline
