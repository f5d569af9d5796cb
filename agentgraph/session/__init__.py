"""The session layer: the service front ends drive, and the session's own bookkeeping.

A front end imports only this package and :mod:`agentgraph.protocol` (an import-linter
contract in ``pyproject.toml`` checks it). The names below are loaded on first use, so
that the lower layers may import the session's small modules (titles, undo, workspaces)
without pulling in the agent.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentgraph.errors import AgentGraphError
    from agentgraph.persistence.leases import SessionInUse
    from agentgraph.session.failures import failure_line
    from agentgraph.session.service import SessionService, TurnRefused

# Public name -> the module that defines it.
_EXPORTS = {
    "AgentGraphError": "agentgraph.errors",
    "SessionInUse": "agentgraph.persistence.leases",
    "SessionService": "agentgraph.session.service",
    "TurnRefused": "agentgraph.session.service",
    "failure_line": "agentgraph.session.failures",
}

__all__ = ["AgentGraphError", "SessionInUse", "SessionService", "TurnRefused", "failure_line"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(module), name)
