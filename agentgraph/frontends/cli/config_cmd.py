"""``agentgraph config``: every setting, its value and where the value came from."""

from __future__ import annotations

import argparse
from pathlib import Path

from agentgraph.config import Settings
from agentgraph.frontends.cli.common import flag_settings
from agentgraph.session.startup import WORKSPACE_ENV_NAME, setting_rows

PRECEDENCE = (
    "precedence: flag > environment > project (./.env, then ./.agentgraph/config.toml) > "
    "user (AGENTGRAPH_HOME/config.toml) > default"
)


def cmd_config(args: argparse.Namespace, settings: Settings) -> int:
    """Print every setting with its value and origin: flag > environment > project > user >
    default. Secret values are shown as ``***``.

    Args:
        args: Parsed arguments (the flags that set settings).
        settings: The settings this invocation resolved.

    Returns:
        0.
    """
    rows = [
        (row.field, row.env_name, row.value, row.origin)
        for row in setting_rows(settings, flag_settings(args), Path(WORKSPACE_ENV_NAME))
    ]
    header = ("setting", "variable", "value", "from")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(3)]
    for row in [header, *rows]:
        cells = [cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True)]
        print("  ".join([*cells, row[3]]).rstrip())
    print(f"\n{PRECEDENCE}")
    return 0
