"""``agentgraph run --output-format stream-json``: one JSON event per line on stdout.

The schema of every line is documented in ``docs/events.md``. Events are written and
flushed as they happen, so a consumer sees text deltas while the model streams.
"""

from __future__ import annotations

import json
from typing import IO, Any

from agentgraph.agent import TurnResult

# Internal event types and the names they have on the stream.
RENAMED = {"token": "text_delta"}
# Internal bookkeeping, not part of the public stream.
HIDDEN = frozenset({"turn_end", "prompt_tokens", "progress"})
USAGE_OPTIONAL_FIELDS = ("cached_input_tokens", "cost_usd")


def usage_payload(result: TurnResult) -> dict[str, Any]:
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
        self.prompt_tokens: int | None = None

    def write(self, event: dict[str, Any]) -> None:
        """Write one event as a line and flush it."""
        self.out.write(json.dumps(event, ensure_ascii=False, default=str) + "\n")
        self.out.flush()

    def __call__(self, event: dict[str, Any]) -> None:
        kind = str(event.get("type"))
        if kind == "prompt_tokens":
            self.prompt_tokens = int(event["tokens"])
        if kind == "turn_end":
            result: TurnResult = event["result"]
            self.write({"type": "usage", **usage_payload(result)})
            self.write(
                {
                    "type": "result",
                    "thread_id": result.thread_id,
                    "answer": result.answer,
                    "tool_calls": result.tool_calls,
                    "prompt_tokens": result.prompt_tokens,
                    "stopped": getattr(result, "stop_reason", None),
                    "usage": usage_payload(result),
                }
            )
            return
        if kind in HIDDEN:
            return
        self.write({**event, "type": RENAMED.get(kind, kind)})

    def error(self, message: str, exit_code: int) -> None:
        """The run failed: the last line says why."""
        self.write({"type": "error", "message": message, "exit_code": exit_code})
