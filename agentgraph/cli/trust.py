"""``agentgraph trust``: the user allows this folder's ``.env``, as it is now."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agentgraph.config import Settings
from agentgraph.errors import EXIT_FAILURE
from agentgraph.settings_sources import (
    WORKSPACE_ENV_NAME,
    allow,
    ignored_workspace_settings,
    is_allowed,
)


def cmd_trust(args: argparse.Namespace, settings: Settings) -> int:
    """Allow the current folder's ``.env`` to set every setting until it changes.

    Prints the names it sets beyond what a project may (never their values).

    Args:
        args: Parsed arguments (unused: the file is always ``./.env``).
        settings: Configuration (``AGENTGRAPH_HOME`` keeps the record).

    Returns:
        0, or 1 when there is no ``.env`` here.
    """
    del args
    path = Path(WORKSPACE_ENV_NAME)
    if not path.is_file():
        print(f"agentgraph: no {WORKSPACE_ENV_NAME} in {Path.cwd()}", file=sys.stderr)
        return EXIT_FAILURE
    if is_allowed(path, settings.home):
        print(f"./{WORKSPACE_ENV_NAME} is already allowed as it is")
        return 0
    names = ignored_workspace_settings(path, settings.home, Settings)
    allow(path, settings.home)
    sets = f" (it sets {', '.join(names)})" if names else ""
    print(f"allowed ./{WORKSPACE_ENV_NAME} as it is now{sets}; any change to it asks again")
    return 0
