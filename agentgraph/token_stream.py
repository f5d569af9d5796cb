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
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any, TypeVar
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.outputs import ChatGenerationChunk, GenerationChunk

from agentgraph.middleware.events import emit

__all__ = ["NOSTREAM_TAG", "STREAMED_NODES", "TOKEN_EVENT", "TokenStreamer"]

TOKEN_EVENT = "token"
STREAMED_NODES = frozenset({"planner", "finalize"})
# The tag LangGraph's own handler honours: such a model's tokens are never streamed.
NOSTREAM_TAG = "nostream"
# Separates a subgraph's namespace from its parent's in ``langgraph_checkpoint_ns``.
NAMESPACE_SEPARATOR = "|"

T = TypeVar("T")


class TokenStreamer(BaseCallbackHandler):
    """Sends the text of each new chunk of the graph's own model calls as a UI event."""

    run_inline = True  # in the model's thread: the node's stream writer is in its context

    def __init__(self) -> None:
        self._runs: set[UUID] = set()
        self._lock = threading.Lock()

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
        with self._lock:
            self._runs.add(run_id)

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
        """Send the chunk's text as a ``token`` event."""
        if not isinstance(chunk, ChatGenerationChunk) or run_id not in self._runs:
            return
        text = chunk.message.text
        if text:
            emit({"type": TOKEN_EVENT, "text": text})

    def _done(self, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            self._runs.discard(run_id)

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        """Forget the run."""
        self._done(run_id=run_id)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """Forget the run."""
        self._done(run_id=run_id)
