"""``agentgraph trust``: the user allows this folder's settings files, as they are now."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agentgraph.capabilities.hooks import hook_commands_in
from agentgraph.config import Settings
from agentgraph.errors import EXIT_FAILURE
from agentgraph.security.settings_sources import (
    PROJECT_CONFIG_PATH,
    WORKSPACE_ENV_NAME,
    allow,
    ignored_project_config,
    ignored_workspace_settings,
    is_allowed,
)

# Named among what an allowed project file sets: its hooks are commands that will run.
HOOKS_NOTE = "hooks: commands agentgraph will run"


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
    env_file, project_file = Path(WORKSPACE_ENV_NAME), PROJECT_CONFIG_PATH
    present = [path for path in (env_file, project_file) if path.is_file()]
    if not present:
        print(
            f"agentgraph: no {WORKSPACE_ENV_NAME} or {PROJECT_CONFIG_PATH} in {Path.cwd()}",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    for path in present:
        if is_allowed(path, settings.home):
            print(f"./{path} is already allowed as it is")
            continue
        if path == env_file:
            names = ignored_workspace_settings(path, settings.home, Settings)
        else:
            names = ignored_project_config(path, settings.home, Settings)
            names += [HOOKS_NOTE] if hook_commands_in(path) else []
        allow(path, settings.home)
        sets = f" (it sets {', '.join(names)})" if names else ""
        print(f"allowed ./{path} as it is now{sets}; any change to it asks again")
    return 0
