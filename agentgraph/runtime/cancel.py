"""Cancelling a running turn (Ctrl-C) without waiting for the model, and recording it.

A sync LangGraph run cannot be stopped from outside: closing its stream waits for the
running node (a model call streaming for many seconds), and that node then writes its
checkpoint, possibly after the user's next turn has begun. So every turn runs with a
:class:`CancelGuard` callback handler bound to the turn's own cancel event: once the
event is set, the next callback of any run inside the graph (a streamed token, the end
of a model call, a tool or a node) raises :class:`TurnCancelled`. A node that raises
writes nothing, so a cancelled turn can never add to the history later. What the model
had streamed so far is recorded at once by the canceller as an assistant message marked
``interrupted`` (:func:`interrupted_message`).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage

from agentgraph.errors import AgentGraphError
from agentgraph.persistence.index import SessionInfo
from agentgraph.runtime.history import AGENTGRAPH_KEY

T = TypeVar("T")

INTERRUPTED_KIND = "interrupted"
EXIT_CANCELLED = 130  # the shell's code for a process stopped by SIGINT
# Appended to a cut-off answer so the model knows why it stops mid-sentence.
INTERRUPTED_NOTE = "[interrupted by the user]"


class _DropCancelWarnings(logging.Filter):
    """LangChain logs every exception a callback raises before re-raising it; a
    cancellation is not an error worth a warning line on the user's terminal."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not any(isinstance(arg, str) and "TurnCancelled" in arg for arg in record.args or ())


logging.getLogger("langchain_core.callbacks.manager").addFilter(_DropCancelWarnings())


class TurnCancelled(AgentGraphError):
    """The turn was cancelled (Ctrl-C); raised inside the graph so its step writes nothing."""

    def __init__(self) -> None:
        super().__init__("the turn was cancelled", EXIT_CANCELLED)


class CancelGuard(BaseCallbackHandler):
    """Callback handler that stops every run of a turn once ``event`` is set.

    ``raise_error`` makes LangChain propagate the exception instead of logging it,
    and ``run_inline`` keeps it in the thread of the run it stops.
    """

    raise_error = True
    run_inline = True

    def __init__(self, event: threading.Event) -> None:
        self.event = event

    def _check(self, *_args: Any, **_kwargs: Any) -> None:
        if self.event.is_set():
            raise TurnCancelled()

    on_llm_new_token = _check
    on_llm_end = _check
    on_chat_model_start = _check
    on_tool_start = _check
    on_tool_end = _check
    on_chain_end = _check


def interrupted_message(partial: str) -> AIMessage | None:
    """The assistant message recording a cut-off answer (None when nothing was said).

    Args:
        partial: The text the model had streamed when the turn was cancelled.
    """
    text = partial.strip()
    if not text:
        return None
    return AIMessage(
        content=f"{text}\n\n{INTERRUPTED_NOTE}",
        id=f"interrupted-{uuid.uuid4().hex}",
        additional_kwargs={AGENTGRAPH_KEY: {"kind": INTERRUPTED_KIND}},
    )


@dataclass
class RunningTurn:
    """The turn in progress: its own cancel event and what the model has streamed.

    Each turn has its own event, so a cancelled turn still winding down in another
    thread never sees the next turn's state. Its outcome is recorded exactly once:
    by the turn itself at its end, or by the canceller (:meth:`settle` decides).

    Attributes:
        thread_id: The session.
        workspace: The session workspace.
        info: The session's index row as the turn started.
        cancelled: Set by ``Agent.cancel``.
        partial: Text of the model reply being streamed (cleared once it is stored).
    """

    thread_id: str
    workspace: Path
    info: SessionInfo
    cancelled: threading.Event = field(default_factory=threading.Event)
    partial: list[str] = field(default_factory=list)
    _settled: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def settle(self) -> bool:
        """Claim the recording of this turn's outcome: True for the first caller only."""
        with self._lock:
            if self._settled:
                return False
            self._settled = True
            return True

    def guard(self, stream: Iterator[T], record: Callable[[RunningTurn], None]) -> Iterator[T]:
        """``stream`` until the turn is cancelled; then ``record`` it and raise.

        Raises:
            TurnCancelled: The turn was cancelled (a KeyboardInterrupt or another
                failure of a cancelled turn is re-raised as it is).
        """
        try:
            for item in stream:
                if self.cancelled.is_set():
                    break
                yield item
        except BaseException:
            if self.cancelled.is_set():
                record(self)
            raise
        if self.cancelled.is_set():
            record(self)
            close = getattr(stream, "close", None)
            if close is not None:
                close()  # the running node raises TurnCancelled at its next callback
            raise TurnCancelled()
