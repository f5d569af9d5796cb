"""``agentgraph trust``: the user allows this folder's settings files, as they are now."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agentgraph.config import Settings
from agentgraph.errors import EXIT_FAILURE
from agentgraph.session.startup import PROJECT_CONFIG_PATH, WORKSPACE_ENV_NAME, trust_settings_files


def cmd_trust(args: argparse.Namespace, settings: Settings) -> int:
    """Allow the current folder's ``.env`` and ``.agentgraph/config.toml`` to set every
    setting until they change.

    Prints, for each file, the names it sets beyond what a project may (never their
    values).

    Args:
        args: Parsed arguments (unused: the files are always ``./.env`` and
            ``./.agentgraph/config.toml``).
        settings: Configuration (``AGENTGRAPH_HOME`` keeps the record).

    Returns:
        0, or 1 when neither file is here.
    """
    del args
    trusted = trust_settings_files(settings.home)
    if not trusted:
        print(
            f"agentgraph: no {WORKSPACE_ENV_NAME} or {PROJECT_CONFIG_PATH} in {Path.cwd()}",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    for file in trusted:
        if file.already:
            print(f"./{file.path} is already allowed as it is")
            continue
        sets = f" (it sets {', '.join(file.names)})" if file.names else ""
        print(f"allowed ./{file.path} as it is now{sets}; any change to it asks again")
    return 0
