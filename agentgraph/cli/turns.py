"""A turn run so Ctrl-C (or a wall-clock cap) stops it at once: the REPL's and ``run``'s."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

from agentgraph.agent import Agent, TurnResult

# The worker thread a turn runs in; see turn_still_running.
TURN_THREAD_NAME = "agentgraph-turn"


# After Ctrl-C, how long the turn may take to stop by itself before it is recorded as
# interrupted anyway (the prompt must come back within a second).
CANCEL_GRACE_S = 0.5
EVENT_POLL_S = 0.1


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
    without waiting for a model that is slow to notice.
    """
    events: queue.Queue[tuple[str, Any]] = queue.Queue()
    result: TurnResult | None = None

    def live(event: dict[str, Any]) -> None:
        events.put(("event", event))

    def work() -> None:
        stream = (
            agent.stream_resume(args[0], args[1], resume, live=live)
            if resume is not None
            else agent.stream_turn(*args, live=live, **kwargs)
        )
        try:
            for event in stream:
                live(event)
        except BaseException as exc:  # handed to the main thread, which re-raises
            events.put(("error", exc))
        finally:
            events.put(("done", None))

    worker = threading.Thread(target=work, name=TURN_THREAD_NAME, daemon=True)
    worker.start()
    try:
        while True:
            try:
                kind, payload = events.get(timeout=EVENT_POLL_S)
            except queue.Empty:
                continue
            if kind == "event":
                on_event(payload)
                if payload.get("type") == "turn_end":
                    result = payload["result"]
            elif kind == "error":
                raise payload
            else:
                return result
    except KeyboardInterrupt:
        agent.cancel()
        worker.join(timeout=CANCEL_GRACE_S)
        agent.record_interrupted()
        raise


def turn_still_running() -> bool:
    """Whether a cancelled turn is still waiting for its model (nothing streamed yet)."""
    return any(t.name == TURN_THREAD_NAME and t.is_alive() for t in threading.enumerate())
