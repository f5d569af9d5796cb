"""Session workspaces: the launch directory by default, or an isolated folder per session.

``agentgraph --isolated`` gives each session its own workspace under
``AGENTGRAPH_HOME/workspaces/<thread_id>``; files attached with ``@path`` are copied
into its ``uploads/`` folder. ``/clean-workspaces`` removes isolated workspaces not
touched for :data:`WORKSPACE_MAX_AGE_DAYS` days.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from agentgraph.persistence.thread_ids import InvalidThreadId, check_thread_id, session_path

WORKSPACES_DIR_NAME = "workspaces"
UPLOADS_DIR_NAME = "uploads"
WORKSPACE_MAX_AGE_DAYS = 7
SECONDS_PER_DAY = 86_400
# A thread id that cannot name a workspace folder (a usage error: exit status 2).
WorkspaceError = InvalidThreadId


def workspaces_root(home: Path) -> Path:
    """``AGENTGRAPH_HOME/workspaces``."""
    return Path(home) / WORKSPACES_DIR_NAME


def isolated_workspace(home: Path, thread_id: str) -> Path:
    """Create (if needed) and return the isolated workspace of ``thread_id``.

    Args:
        home: ``AGENTGRAPH_HOME``.
        thread_id: The session id (a uuid hex for sessions agentgraph creates).

    Returns:
        The resolved workspace folder, with an ``uploads/`` subfolder.

    Raises:
        WorkspaceError: The id is not a valid thread id (see ``agentgraph.persistence.thread_ids``).
    """
    check_thread_id(thread_id)
    folder = session_path(home, WORKSPACES_DIR_NAME, thread_id)
    (folder / UPLOADS_DIR_NAME).mkdir(parents=True, exist_ok=True)
    return folder.resolve()


def is_isolated(home: Path, workspace: Path | str) -> bool:
    """Whether ``workspace`` is an isolated session workspace under ``home``."""
    root = os.path.realpath(workspaces_root(home))
    return os.path.dirname(os.path.realpath(workspace)) == root


def _last_touched(folder: Path) -> float:
    """Newest mtime of the folder and its direct entries (cheap; no deep walk)."""
    newest = folder.stat().st_mtime
    try:
        for entry in os.scandir(folder):
            try:
                newest = max(newest, entry.stat(follow_symlinks=False).st_mtime)
            except OSError:
                continue
    except OSError:
        pass
    return newest


@dataclass(frozen=True)
class StaleWorkspace:
    """An isolated workspace old enough to be cleaned."""

    path: Path
    age_days: float


def stale_workspaces(
    home: Path, max_age_days: float = WORKSPACE_MAX_AGE_DAYS, now: float | None = None
) -> list[StaleWorkspace]:
    """Isolated workspaces not touched for more than ``max_age_days``, oldest first."""
    root = workspaces_root(home)
    if not root.is_dir():
        return []
    moment = time.time() if now is None else now
    found: list[StaleWorkspace] = []
    for entry in root.iterdir():
        if entry.is_symlink() or not entry.is_dir():
            continue
        try:
            age = (moment - _last_touched(entry)) / SECONDS_PER_DAY
        except OSError:
            continue
        if age > max_age_days:
            found.append(StaleWorkspace(entry, age))
    return sorted(found, key=lambda s: -s.age_days)


def remove_workspaces(stale: list[StaleWorkspace], home: Path) -> list[str]:
    """Delete the given workspaces (only folders directly under the workspaces root).

    Returns:
        One line per folder that could not be removed.
    """
    root = os.path.realpath(workspaces_root(home))
    problems: list[str] = []
    for item in stale:
        if os.path.dirname(os.path.realpath(item.path)) != root:
            problems.append(f"{item.path}: not an isolated workspace; left alone")
            continue
        try:
            shutil.rmtree(item.path)
        except OSError as exc:
            problems.append(f"{item.path}: {exc.strerror or exc}")
    return problems
