"""The typed protocol between the agent and its front ends: operations in, events out."""

from agentgraph.protocol.events import Event, UnknownEvent, dump_event, to_event
from agentgraph.protocol.ops import Op, parse_op

__all__ = ["Event", "Op", "UnknownEvent", "dump_event", "parse_op", "to_event"]
