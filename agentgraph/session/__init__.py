"""The session service: operations over an ``Agent`` and its ``Store`` for front ends.

A front end (the web UI) imports only this package and :mod:`agentgraph.protocol`
(``tests/unit/test_protocol.py`` checks it): what it needs of the rest is here.
"""

from agentgraph.cli.failures import failure_line
from agentgraph.errors import AgentGraphError
from agentgraph.persistence.leases import SessionInUse
from agentgraph.session.service import SessionService, TurnRefused

__all__ = ["AgentGraphError", "SessionInUse", "SessionService", "TurnRefused", "failure_line"]
