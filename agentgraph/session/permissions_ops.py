"""A session's permission mode and its workspace's "always allow" rules.

The mode is the session's (``agentgraph/security/permissions.py``): switched here, it
is kept when the session resumes and the model is told before its next request. The
rules (``agentgraph/security/permission_rules.py``) belong to the user's workspace and
are listed and revoked by number, in the order they were made.
"""

from __future__ import annotations

from pathlib import Path

from agentgraph.security.permission_rules import Rule, load_rules, revoke_rule
from agentgraph.security.permissions import MODE_DESCRIPTIONS, next_mode
from agentgraph.session.agent import Agent

__all__ = [
    "MODE_DESCRIPTIONS",
    "Rule",
    "cycle_mode",
    "permission_rules",
    "revoke_permission_rule",
]


def cycle_mode(agent: Agent, thread_id: str) -> str | None:
    """Switch the session to the mode after its current one (Shift-Tab); the new mode.

    Returns:
        The new mode, or None when an approval question waits: the step's questions
        are answered by position, so which calls ask must not change under them.
    """
    if agent.pending_approvals(thread_id):
        return None
    mode = next_mode(agent.permission_mode(thread_id))
    agent.set_permission_mode(thread_id, mode)
    return mode


def permission_rules(agent: Agent, workspace: Path) -> list[Rule]:
    """The always-allow rules of ``workspace``, in the order they were made."""
    return load_rules(agent.settings.home, str(workspace))


def revoke_permission_rule(agent: Agent, workspace: Path, number: int) -> Rule | None:
    """Remove rule ``number`` (1-based, as :func:`permission_rules` lists them) of
    ``workspace``; the rule removed, or None when there is no such rule."""
    return revoke_rule(agent.settings.home, str(workspace), number)
