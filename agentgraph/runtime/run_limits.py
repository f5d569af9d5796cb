"""Limits of one non-interactive run: the wall-clock cap (``AGENTGRAPH_RUN_TIMEOUT_S``)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["RunTimedOut", "wall_clock_cap"]


class RunTimedOut(KeyboardInterrupt):
    """The run's wall-clock cap expired.

    A ``KeyboardInterrupt`` on purpose: the run unwinds exactly as on Ctrl-C
    (LangGraph stops at a step boundary, nothing catches it as a tool or model
    error), so the stored session stays as consistent as after a Ctrl-C.
    """


@contextmanager
def wall_clock_cap(seconds: float, on_expiry: Callable[[], None]) -> Iterator[None]:
    """Raise :class:`RunTimedOut` in the main thread after ``seconds`` (0 = no cap).

    ``on_expiry`` runs first (e.g. ``Agent.cancel``: running commands and
    subagents stop at once). Uses ``SIGALRM``, which also interrupts a blocking
    read such as a model call that never answers; off the main thread, or where
    there is no ``setitimer``, the block runs without a cap.

    Args:
        seconds: The cap in seconds; ``0`` disables it.
        on_expiry: Called once when the cap expires, before the exception.
    """
    if (
        seconds <= 0
        or not hasattr(signal, "setitimer")
        or threading.current_thread() is not threading.main_thread()
    ):
        yield
        return

    def expire(signum: int, frame: FrameType | None) -> None:
        on_expiry()
        raise RunTimedOut

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
