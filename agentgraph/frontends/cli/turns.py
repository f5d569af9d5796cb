"""A turn run so Ctrl-C (or a wall-clock cap) stops it at once: the REPL's and ``run``'s."""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import Any

from agentgraph.session.agent import TURN_THREAD_NAME, Agent, TurnResult


def run_turn_interruptibly(
    agent: Agent,
    on_event: Callable[[dict[str, Any]], None],
    *args: Any,
    resume: dict[str, Any] | None = None,
    **kwargs: Any,
) -> TurnResult | None:
    """Run a turn (or, with ``resume``, continue one) in a worker thread so Ctrl-C is
    handled at once; returns the turn's result.

    On Ctrl-C the agent is cancelled (running commands are killed; the graph raises at
    its next model token or step, so nothing of the turn is written later), the partial
    answer is recorded as interrupted, and KeyboardInterrupt is re-raised to the caller
    without waiting for a model that is slow to notice (see :meth:`Agent.drive_turn`).
    """
    if resume is not None:
        return agent.drive_turn(partial(agent.stream_resume, args[0], args[1], resume), on_event)
    return agent.drive_turn(partial(agent.stream_turn, *args, **kwargs), on_event)


def turn_still_running() -> bool:
    """Whether a cancelled turn is still waiting for its model (nothing streamed yet)."""
    return any(t.name == TURN_THREAD_NAME and t.is_alive() for t in threading.enumerate())
