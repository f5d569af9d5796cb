"""Tool calls run only when their arguments arrived whole.

When a reply is streamed, LangChain merges the chunks and reads each call's arguments
with its partial-JSON parser, which closes what was left open: a call cut inside its
JSON (``{"command": "echo hi > a.txt``), with nothing else saying it was cut (finish
reason ``tool_calls``), comes out as a complete-looking call and would run. The merged
message keeps only the parsed arguments, so the raw argument strings are taken where
they still exist: from the streamed chunks (:class:`StreamedArguments`, a callback on
the model call), else from a non-streamed OpenAI-style reply's
``additional_kwargs["tool_calls"]``. :func:`whole_calls` then keeps as a call only what
is one complete JSON object; the rest become ``invalid_tool_calls`` with their raw
text, which the model turn answers with an error the model can correct (see
:func:`agentgraph.runtime.nodes.common.repair_invalid_tool_calls`).

Whether the arguments fit the tool's schema is checked where the call runs: LangGraph's
``ToolNode`` validates them and answers a mismatch with an error result.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.messages.tool import invalid_tool_call, tool_call
from langchain_core.outputs import ChatGenerationChunk

__all__ = ["RawCall", "StreamedArguments", "parse_arguments", "raw_calls", "whole_calls"]


@dataclass(frozen=True)
class RawCall:
    """One tool call as the provider sent it.

    Attributes:
        name: The tool's name.
        arguments: The arguments exactly as received (a JSON text, whole or not).
        id: The provider's call id.
    """

    name: str
    arguments: str
    id: str | None


def parse_arguments(text: str) -> dict[str, Any] | None:
    """The arguments object ``text`` holds, or None unless it is one whole JSON object.

    An empty text means no arguments, as LangChain's own parser of non-streamed replies
    reads it (a tool without parameters). Control characters inside strings are
    accepted, as that parser accepts them: the JSON is still complete.
    """
    if not text.strip():
        return {}
    try:
        value = json.loads(text, strict=False)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


class StreamedArguments(BaseCallbackHandler):
    """Keeps the tool-call chunks of a streamed model reply (their raw argument text).

    Attach one to a single model call's config; :meth:`calls` then gives that reply's
    calls with their arguments as streamed. Nothing is kept for a reply that was not
    streamed or had no calls.
    """

    def __init__(self) -> None:
        # Per model run, per call (in the order calls first appear): name, id and the
        # argument pieces, joined once at the end. Merging the chunks instead re-copies
        # the arguments so far at every chunk: quadratic in a large file's size.
        self._runs: dict[UUID, list[_PendingCall]] = {}
        self._by_index: dict[UUID, dict[int, _PendingCall]] = {}
        self._lock = threading.Lock()

    def on_llm_new_token(
        self,
        token: Any,
        *,
        chunk: Any = None,
        run_id: UUID,
        **kwargs: Any,
    ) -> None:
        """Keep the chunk when it carries a piece of a tool call."""
        if not isinstance(chunk, ChatGenerationChunk):
            return
        message = chunk.message
        if not isinstance(message, AIMessageChunk) or not message.tool_call_chunks:
            return
        with self._lock:
            calls = self._runs.setdefault(run_id, [])
            by_index = self._by_index.setdefault(run_id, {})
            for piece in message.tool_call_chunks:
                # As LangChain merges chunks: pieces with one index are one call, each
                # piece without an index a call of its own.
                index = piece.get("index")
                pending = by_index.get(index) if index is not None else None
                if pending is None:
                    pending = _PendingCall()
                    calls.append(pending)
                    if index is not None:
                        by_index[index] = pending
                pending.add(piece)

    def calls(self) -> list[RawCall] | None:
        """The streamed reply's calls in order, or None when no call was streamed.

        Also None when more than one model run streamed through this handler: which one
        the reply came from is then unknown.
        """
        with self._lock:
            runs = list(self._runs.values())
            if len(runs) != 1:
                return None
            return [pending.raw() for pending in runs[0]]


@dataclass
class _PendingCall:
    """One streamed call's pieces so far."""

    name: str = ""
    id: str | None = None
    pieces: list[str] = field(default_factory=list)

    def add(self, piece: Mapping[str, Any]) -> None:
        """Add a streamed piece: its name and id parts, its argument text."""
        self.name += piece.get("name") or ""
        if piece.get("id"):
            self.id = (self.id or "") + str(piece["id"])
        if piece.get("args"):
            self.pieces.append(str(piece["args"]))

    def raw(self) -> RawCall:
        """The call as streamed, its arguments joined."""
        return RawCall(name=self.name, arguments="".join(self.pieces), id=self.id)


def raw_calls(ai: AIMessage) -> list[RawCall] | None:
    """The calls of a non-streamed OpenAI-style reply as sent, or None when not given."""
    sent = ai.additional_kwargs.get("tool_calls")
    if not isinstance(sent, list):
        return None
    found: list[RawCall] = []
    for item in sent:
        function = item.get("function") if isinstance(item, dict) else None
        if not isinstance(function, dict):
            return None
        arguments = function.get("arguments")
        call_id = item.get("id")
        found.append(
            RawCall(
                name=str(function.get("name") or ""),
                arguments=arguments if isinstance(arguments, str) else "",
                id=call_id if isinstance(call_id, str) else None,
            )
        )
    return found


def whole_calls(ai: AIMessage, raw: Sequence[RawCall] | None) -> AIMessage:
    """``ai`` with only the calls whose raw arguments are one whole JSON object.

    The other calls become ``invalid_tool_calls`` holding their raw text, so each still
    gets a result. ``ai`` is returned as it is when ``raw`` is None or does not list
    exactly its calls (then the parsed calls are all there is to go by).

    Args:
        ai: The reply as LangChain assembled it.
        raw: Its calls as the provider sent them, in order.

    Returns:
        The reply to record.
    """
    if raw is None or len(raw) != len(ai.tool_calls) + len(ai.invalid_tool_calls):
        return ai
    calls = []
    invalid = []
    for sent in raw:
        args = parse_arguments(sent.arguments)
        if args is None:
            invalid.append(
                invalid_tool_call(
                    name=sent.name,
                    args=sent.arguments,
                    id=sent.id,
                    error="the arguments are not one complete JSON object",
                )
            )
        else:
            calls.append(tool_call(name=sent.name, args=args, id=sent.id))
    if not invalid and [c["args"] for c in calls] == [c["args"] for c in ai.tool_calls]:
        return ai
    return ai.model_copy(update={"tool_calls": calls, "invalid_tool_calls": invalid})
