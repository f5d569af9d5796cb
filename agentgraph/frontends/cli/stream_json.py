"""``agentgraph run --output-format stream-json``: one JSON event per line on stdout.

Each line is the dump of a typed event (:mod:`agentgraph.protocol.events`); the table of
``docs/events.md`` is generated from those models. Events are written and flushed as
they happen, so a consumer sees text deltas while the model streams.
"""

from __future__ import annotations

import json
from typing import IO, Any

from pydantic import BaseModel

from agentgraph.protocol.events import (
    STREAM_TYPES,
    Error,
    Result,
    TurnEnd,
    UnknownEvent,
    Usage,
    dump_event,
    event_to_show,
    to_event,
)
from agentgraph.session.agent import TurnResult

USAGE_OPTIONAL_FIELDS = ("cached_input_tokens", "cost_usd")
_STREAMED = frozenset(STREAM_TYPES)


def usage_payload(result: TurnResult | TurnEnd) -> dict[str, Any]:
    """The turn's token usage (cached tokens and cost when the result has them)."""
    usage: dict[str, Any] = {
        "input_tokens": result.input_tokens,
        "output_tokens": result.output_tokens,
    }
    for name in USAGE_OPTIONAL_FIELDS:
        if hasattr(result, name):
            usage[name] = getattr(result, name)
    return usage


class StreamJsonPrinter:
    """Writes agent events as JSON lines (see docs/events.md).

    Args:
        out: The text stream to write to (stdout).
    """

    def __init__(self, out: IO[str]) -> None:
        self.out = out

    def write(self, event: dict[str, Any] | BaseModel) -> None:
        """Write one event (typed, or the dict of one) as a line and flush it."""
        line = dump_event(to_event(event))
        self.out.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
        self.out.flush()

    def __call__(self, raw: dict[str, Any]) -> None:
        event = event_to_show(raw)
        if event is None:
            return
        if isinstance(event, TurnEnd):
            usage = usage_payload(event)
            self.write(Usage(**usage))
            result = Result(
                thread_id=event.thread_id,
                answer=event.answer,
                tool_calls=event.tool_calls,
                prompt_tokens=event.prompt_tokens,
                stopped=event.stop_reason,
                usage=usage,
            )
            self.write(result)
            return
        # In-process events (prompt sizes, approval questions) are not on the stream; a
        # type no model names yet is passed on as it came.
        if event.type in _STREAMED or isinstance(event, UnknownEvent):
            self.write(dump_event(event))

    def error(self, message: str, exit_code: int) -> None:
        """The run failed: the last line says why."""
        self.write(Error(message=message, exit_code=exit_code))
