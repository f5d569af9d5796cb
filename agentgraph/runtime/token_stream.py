"""The model's answer as it is written: tokens of the planner and finalize calls as UI events.

LangGraph's ``stream_mode="messages"`` would give these tokens, but its handler also
records the id of every message in every node's input (the whole transcript) at every
node start, to avoid re-sending messages a node passes through: a cost per step that
grows with the session, for messages the agent never reads from that stream.

:class:`TokenStreamer` is a callback handler that does only what the agent needs: for
chat-model runs of the graph's ``planner`` and ``finalize`` nodes (not of a subgraph,
not tagged ``nostream`` like the compaction summarizer and the title writer), each
new chunk's text goes out on LangGraph's ``custom`` stream as
``{"type": "token", "text": ...}``, in order with the graph's other events. Like
LangGraph's handler it provides ``tap_output_iter``/``tap_output_aiter``, which is how
a chat model's ``invoke`` knows a consumer wants tokens and streams the reply.

A call a local model writes as text (``<tool_call>`` tags, a fenced JSON block, a
reply that is bare JSON; see :mod:`agentgraph.runtime.text_tool_calls`) is not streamed as
answer text: from where such syntax starts, the reply's tokens are held until the
model is done, then dropped when the text is calls of the declared tools (the
``tool_call`` events show them) or sent as one ``token`` event when it is not.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.outputs import ChatGenerationChunk, GenerationChunk

from agentgraph.context.tokens import estimate_tokens
from agentgraph.middleware.events import emit
from agentgraph.runtime.text_tool_calls import (
    CALL_TAGS,
    FENCE_OPEN_PATTERN,
    FUNCTION_ELEMENT_START_PATTERN,
    extract_text_tool_calls,
)

__all__ = ["NOSTREAM_TAG", "PROGRESS_EVENT", "STREAMED_NODES", "TOKEN_EVENT", "TokenStreamer"]

TOKEN_EVENT = "token"
# ``{"type": "progress", "output_tokens": N}``: the tokens the turn's replies have
# streamed so far (text and tool-call arguments, estimated), at most every
# PROGRESS_INTERVAL_S while a reply streams: the REPL's spinner shows it.
PROGRESS_EVENT = "progress"
PROGRESS_INTERVAL_S = 0.5
STREAMED_NODES = frozenset({"planner", "finalize"})
# The tag LangGraph's own handler honours: such a model's tokens are never streamed.
NOSTREAM_TAG = "nostream"
# Separates a subgraph's namespace from its parent's in ``langgraph_checkpoint_ns``.
NAMESPACE_SEPARATOR = "|"

T = TypeVar("T")

# Where a call written as text starts (the syntaxes text_tool_calls accepts): a tag, a
# function element, or a fence of JSON or of no language.
_CALL_START = re.compile(
    rf"<(?:{'|'.join(CALL_TAGS)})>|{FUNCTION_ELEMENT_START_PATTERN}|{FENCE_OPEN_PATTERN}",
    re.IGNORECASE,
)
_TAG_STARTS = (*(f"<{tag}>" for tag in CALL_TAGS), "<function ", "<function=")
_FENCE_START = re.compile(r"`{1,2}|```[ \t]*[A-Za-z_]*[ \t]*")
# A tail longer than this is not the start of a call syntax (the longest is a fence
# with a language and some spaces).
_CALL_START_MAX_CHARS = 24


def _may_start_call(tail: str) -> bool:
    """Whether ``tail`` (the end of the text so far) may become a call syntax's start."""
    low = tail.lower()
    return any(tag.startswith(low) for tag in _TAG_STARTS) or bool(_FENCE_START.fullmatch(tail))


def _call_start_cut(text: str) -> int:
    """Where a possible start of call syntax at the end of ``text`` begins (else its end)."""
    for pos in range(max(len(text) - _CALL_START_MAX_CHARS, 0), len(text)):
        if text[pos] in "<`" and _may_start_call(text[pos:]):
            return pos
    return len(text)


@dataclass
class _Reply:
    """One streamed model call: the tools it declared and the text not yet sent."""

    tools: frozenset[str]
    sent: list[str] = field(default_factory=list)
    pending: str = ""  # received, not sent: a possible call start, or a held call
    holding: bool = False  # a call syntax started: everything after it waits for the end
    fences: int = 0  # ``` sent so far: odd inside a code block, whose closing is no call
    received: list[str] = field(default_factory=list)  # text and arguments not counted yet
    tokens: int = 0  # estimated tokens counted so far


def _declared_tools(params: Mapping[str, Any] | None) -> frozenset[str]:
    """Names of the tools a model call declared (none when it may not call any)."""
    if not params or params.get("tool_choice") == "none":
        return frozenset()
    names: set[str] = set()
    for tool in params.get("tools") or ():
        if not isinstance(tool, Mapping):
            continue
        inner = tool.get("function")
        spec = inner if isinstance(inner, Mapping) else tool
        name = spec.get("name")
        if isinstance(name, str) and name:
            names.add(name)
    return frozenset(names)


def _sendable(reply: _Reply) -> str:
    """Take from ``reply.pending`` what can be shown now; start holding at a call."""
    text = reply.pending
    if not reply.sent:
        head = text.lstrip()
        if not head:
            return ""  # leading whitespace: wait for the first visible character
        if head[0] == "[":  # a list of calls, or prose such as "[1] …"
            head = head[1:].lstrip()
            if not head:
                return ""  # not known yet
        if head[0] == "{":
            reply.holding = True  # a reply that may be nothing but JSON: a bare call
            return ""
    for start in _CALL_START.finditer(text):
        before = text[: start.start()]
        if start.group(0).startswith("`") and (reply.fences + before.count("```")) % 2:
            continue  # the end of a code block
        reply.holding = True
        reply.pending = text[start.start() :]
        return before
    cut = _call_start_cut(text)
    reply.pending = text[cut:]
    return text[:cut]


class TokenStreamer(BaseCallbackHandler):
    """Sends the text of each new chunk of the graph's own model calls as a UI event.

    Args:
        hold_text_calls: Hold calls written as text (off when nothing turns them into
            tool calls: ``AGENTGRAPH_TEXT_TOOL_CALLS=false``).
    """

    run_inline = True  # in the model's thread: the node's stream writer is in its context

    def __init__(self, *, hold_text_calls: bool = True) -> None:
        self._runs: dict[UUID, _Reply] = {}
        self._lock = threading.Lock()
        self.hold_text_calls = hold_text_calls
        self._done_tokens = 0  # of the turn's finished replies
        self._last_progress = time.monotonic()

    # Their presence makes ``invoke`` stream (langchain-core checks for these methods).
    def tap_output_iter(self, run_id: UUID, output: Iterator[T]) -> Iterator[T]:
        """Pass ``output`` through (tokens arrive through :meth:`on_llm_new_token`)."""
        return output

    def tap_output_aiter(self, run_id: UUID, output: AsyncIterator[T]) -> AsyncIterator[T]:
        """Async :meth:`tap_output_iter`."""
        return output

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[Any]],
        *,
        run_id: UUID,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Remember the run when it is a streamed node's own model call."""
        if not metadata or (tags and NOSTREAM_TAG in tags):
            return
        if metadata.get("langgraph_node") not in STREAMED_NODES:
            return
        if NAMESPACE_SEPARATOR in str(metadata.get("langgraph_checkpoint_ns") or ""):
            return  # a subgraph's model
        tools = _declared_tools(kwargs.get("invocation_params")) if self.hold_text_calls else None
        reply = _Reply(tools or frozenset())
        with self._lock:
            self._runs[run_id] = reply
            self._last_progress = time.monotonic()

    def on_llm_new_token(
        self,
        token: str | list[str | dict[str, Any]],
        *,
        chunk: GenerationChunk | ChatGenerationChunk | None = None,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        """Send the chunk's text as a ``token`` event (held while it may be a call)."""
        if not isinstance(chunk, ChatGenerationChunk):
            return
        reply = self._runs.get(run_id)
        if reply is None:
            return
        text = chunk.message.text
        self._progress(reply, text, chunk)
        if not text:
            return
        if not reply.tools:
            emit({"type": TOKEN_EVENT, "text": text})
            return
        reply.pending += text
        if reply.holding:
            return
        ready = _sendable(reply)
        if ready:
            reply.sent.append(ready)
            reply.fences += ready.count("```")
            emit({"type": TOKEN_EVENT, "text": ready})

    def _progress(self, reply: _Reply, text: str, chunk: ChatGenerationChunk) -> None:
        """Count the chunk's text and call arguments; say how many now and then."""
        if text:
            reply.received.append(text)
        for call in getattr(chunk.message, "tool_call_chunks", None) or ():
            args = call.get("args")
            if isinstance(args, str) and args:
                reply.received.append(args)
        now = time.monotonic()
        if now - self._last_progress < PROGRESS_INTERVAL_S:
            return
        self._last_progress = now
        reply.tokens += estimate_tokens("".join(reply.received))
        reply.received.clear()
        emit({"type": PROGRESS_EVENT, "output_tokens": self._done_tokens + reply.tokens})

    def _finished(self, reply: _Reply, response: Any) -> None:
        """Add a finished reply's tokens: the provider's count when it gave one."""
        reported = None
        for generations in getattr(response, "generations", None) or ():
            for generation in generations:
                usage = getattr(getattr(generation, "message", None), "usage_metadata", None)
                if usage:
                    reported = usage.get("output_tokens")
        if isinstance(reported, int) and reported >= 0:
            self._done_tokens += reported
        else:
            self._done_tokens += reply.tokens + estimate_tokens("".join(reply.received))

    def _done(self, *, run_id: UUID, **kwargs: Any) -> _Reply | None:
        with self._lock:
            return self._runs.pop(run_id, None)

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """Send what was held unless it is calls of the declared tools; forget the run."""
        reply = self._done(run_id=run_id)
        if reply is None:
            return
        self._finished(reply, response)
        if not reply.pending:
            return
        if reply.holding:
            whole = "".join(reply.sent) + reply.pending
            if extract_text_tool_calls(whole, reply.tools).calls:
                return  # shown as tool calls once the text tool-call unit rewrote them
        emit({"type": TOKEN_EVENT, "text": reply.pending})

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """Forget the run (a retry streams its own reply)."""
        self._done(run_id=run_id)
