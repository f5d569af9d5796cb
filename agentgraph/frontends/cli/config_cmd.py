"""``agentgraph config``: every setting, its value and where the value came from."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from agentgraph.config import Settings
from agentgraph.frontends.cli.common import flag_settings
from agentgraph.security.redaction import redact_token_formats
from agentgraph.security.settings_sources import (
    WORKSPACE_ENV_NAME,
    Origin,
    env_names,
    setting_origins,
)

PRECEDENCE = (
    "precedence: flag > environment > project (./.env, then ./.agentgraph/config.toml) > "
    "user (AGENTGRAPH_HOME/config.toml) > default"
)
HIDDEN = "***"
UNSET = "(unset)"


def shown_value(value: Any) -> str:
    """A setting's value as ``config`` prints it: secrets never, and no credential a value
    holds (a URL's password, a token) — the redactor tool outputs go through hides them."""
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


def config_rows(
    settings: Settings, flags: dict[str, Any], env_file: Path
) -> list[tuple[str, str, str, str]]:
    """``(setting, environment name, value, origin)`` for every setting, in field order."""
    origins = setting_origins(
        Settings,
        flags=flags,
        env_file=env_file,
        home=settings.home,
        skipped=settings.skipped_project_names,
    )
    names: dict[str, str] = {}
    for env_name, field in env_names(Settings).items():
        names.setdefault(field, env_name)
    rows = []
    for field in Settings.model_fields:
        value = shown_value(getattr(settings, field))
        rows.append((field, names.get(field, ""), value, origin_text(origins[field])))
    return rows


def cmd_config(args: argparse.Namespace, settings: Settings) -> int:
    """Print every setting with its value and origin: flag > environment > project > user >
    default. Secret values are shown as ``***``.

    Args:
        args: Parsed arguments (the flags that set settings).
        settings: The settings this invocation resolved.

    Returns:
        0.
    """
    rows = config_rows(settings, flag_settings(args), Path(WORKSPACE_ENV_NAME))
    header = ("setting", "variable", "value", "from")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(3)]
    for row in [header, *rows]:
        cells = [cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True)]
        print("  ".join([*cells, row[3]]).rstrip())
    print(f"\n{PRECEDENCE}")
    return 0
