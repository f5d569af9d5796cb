"""A scripted, recording LangChain chat model for tests that need no HTTP.

``ScriptedChatModel`` answers each call with the next item of its script and records
what it received, so a test can both drive an agent and assert on the exact history the
model saw (e.g. that compaction kept tool calls paired, or that a subagent got a fresh
context).
"""

from __future__ import annotations

import itertools
import json
import math
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal

import httpx2
import openai
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolCallChunk
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict, Field, PrivateAttr

ScriptReply = AIMessage | str
ScriptItem = AIMessage | str | BaseException | Callable[[list[BaseMessage]], ScriptReply]
OnExhausted = Literal["repeat_last", "raise", "answer"]

CHARS_PER_TOKEN = 4
EXHAUSTED_ANSWER = "done"
# Tool-call argument JSON is streamed in pieces of this many characters, like providers do.
STREAM_ARGS_PIECE_CHARS = 8
FAKE_MODEL_NAME = "scripted-fake"

# Ids are process-wide so two fake models in one graph (agent + summarizer, parent +
# subagent) never hand out the same message id: add_messages would merge them.
_ID_COUNTER = itertools.count(1)
_ID_LOCK = threading.Lock()


def _next_id() -> int:
    with _ID_LOCK:
        return next(_ID_COUNTER)


class ScriptExhaustedError(AssertionError):
    """The model was called more times than the script has replies (``on_exhausted="raise"``)."""


def _ceil_div(n: int, d: int) -> int:
    return -(-n // d)


def _content_chars(content: Any) -> int:
    if isinstance(content, str):
        return len(content)
    total = 0
    if isinstance(content, list):
        for part in content:
            if isinstance(part, str):
                total += len(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                total += len(part["text"])
    return total


def message_chars(message: BaseMessage) -> int:
    """Count the characters a message contributes to a prompt (content + tool-call args).

    Args:
        message: Any LangChain message.

    Returns:
        Characters of text content plus the JSON of each tool call's args.
    """
    chars = _content_chars(message.content)
    if isinstance(message, AIMessage):
        for tc in message.tool_calls:
            chars += len(tc["name"]) + len(json.dumps(tc["args"]))
    return chars


def estimate_tokens(messages: Sequence[BaseMessage]) -> int:
    """Estimate prompt tokens the way ``ScriptedChatModel`` reports them (chars / 4, ceil).

    Args:
        messages: Messages as received by the model.

    Returns:
        The estimated input token count.
    """
    return _ceil_div(sum(message_chars(m) for m in messages), CHARS_PER_TOKEN)


def context_overflow_error(window: int, tokens: int) -> openai.BadRequestError:
    """Build the exact exception ``ChatOpenAI`` raises when OpenAI rejects a long prompt.

    Args:
        window: The model's context window in tokens.
        tokens: The prompt size the provider counted.

    Returns:
        An ``openai.BadRequestError`` with ``code == "context_length_exceeded"`` and the
        real OpenAI body.
    """
    body = {
        "message": (
            f"This model's maximum context length is {window} tokens. However, your messages "
            f"resulted in {tokens} tokens. Please reduce the length of the messages."
        ),
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
    request = httpx2.Request("POST", "http://127.0.0.1/v1/chat/completions")
    response = httpx2.Response(400, request=request, json={"error": body})
    return openai.BadRequestError(
        f"Error code: 400 - {{'error': {body}}}", response=response, body=body
    )


class ScriptedChatModel(BaseChatModel):
    """Chat model that replays a script and records every call.

    Script items, consumed one per call:

    * ``AIMessage`` — returned (a copy; ``id`` and tool-call ids filled when absent).
    * ``str`` — returned as a plain text ``AIMessage``.
    * an exception instance — raised on that call.
    * ``callable(messages) -> AIMessage | str`` — decides from what was received.

    Thread-safe: one instance may serve concurrent subagents and several graphs. Deep
    copies return the same instance so recordings stay shared.

    Attributes:
        script: The replies, in order.
        on_exhausted: When the script runs out: ``"repeat_last"`` reuses the last item,
            ``"raise"`` raises :class:`ScriptExhaustedError`, ``"answer"`` says ``"done"``.
        max_input_tokens: If set, a call whose estimated input exceeds it raises the real
            ``openai.BadRequestError`` (``context_length_exceeded``) without consuming a
            script item, like a provider would.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    script: list[Any] = Field(default_factory=list)
    on_exhausted: OnExhausted = "repeat_last"
    max_input_tokens: int | None = None

    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _cursor: int = PrivateAttr(default=0)
    _calls: list[list[BaseMessage]] = PrivateAttr(default_factory=list)
    _bound_tools: list[list[str]] = PrivateAttr(default_factory=list)
    _tool_choices: list[Any] = PrivateAttr(default_factory=list)
    _overflow_count: int = PrivateAttr(default=0)

    def __init__(self, script: Sequence[ScriptItem] = (), /, **data: Any) -> None:
        """Create the model.

        Args:
            script: Replies consumed one per call (see class docstring).
            **data: Other fields (``on_exhausted``, ``max_input_tokens``, callbacks...).
        """
        super().__init__(**{**data, "script": list(script)})

    # --- recordings -------------------------------------------------------------------

    @property
    def calls(self) -> list[list[BaseMessage]]:
        """Messages received by each call, oldest call first (a snapshot)."""
        with self._lock:
            return [list(c) for c in self._calls]

    @property
    def bound_tools(self) -> list[list[str]]:
        """Tool names bound for each call (``[]`` for an unbound call), a snapshot."""
        with self._lock:
            return [list(t) for t in self._bound_tools]

    @property
    def tool_choices(self) -> list[Any]:
        """The ``tool_choice`` passed to each call (``None`` when not set), a snapshot."""
        with self._lock:
            return list(self._tool_choices)

    @property
    def call_count(self) -> int:
        """Number of calls received so far (including ones that raised)."""
        with self._lock:
            return len(self._calls)

    @property
    def overflow_count(self) -> int:
        """Number of calls rejected because of ``max_input_tokens``."""
        with self._lock:
            return self._overflow_count

    @property
    def remaining(self) -> int:
        """Script items not yet consumed."""
        with self._lock:
            return max(0, len(self.script) - self._cursor)

    # --- copying: share, never duplicate ----------------------------------------------

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> ScriptedChatModel:
        # LangGraph may deep-copy configs holding the model; a copy would split the
        # recordings and choke on the lock, so copies are the same object.
        return self

    def __copy__(self) -> ScriptedChatModel:
        return self

    def __getstate__(self) -> dict[Any, Any]:
        state = super().__getstate__()
        private = dict(state.get("__pydantic_private__") or {})
        private.pop("_lock", None)
        state["__pydantic_private__"] = private
        return state

    def __setstate__(self, state: dict[Any, Any]) -> None:
        private = dict(state.get("__pydantic_private__") or {})
        private["_lock"] = threading.Lock()
        state["__pydantic_private__"] = private
        super().__setstate__(state)

    # --- LangChain plumbing -----------------------------------------------------------

    @property
    def _llm_type(self) -> str:
        return "scripted-fake-chat-model"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": FAKE_MODEL_NAME}

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | Any],
        *,
        tool_choice: str | dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind tools; each call then records their names and the ``tool_choice``.

        Args:
            tools: Tools in any form ``convert_to_openai_tool`` accepts.
            tool_choice: Optional tool choice (recorded, not enforced).
            **kwargs: Extra bound kwargs passed to each call.

        Returns:
            A runnable binding of this model.
        """
        formatted = [convert_to_openai_tool(t) for t in tools]
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return self.bind(tools=formatted, **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        message = self._respond(messages, kwargs)
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        message = self._respond(messages, kwargs)
        yield from _to_chunks(message)

    # --- core -------------------------------------------------------------------------

    def _respond(self, messages: list[BaseMessage], kwargs: dict[str, Any]) -> AIMessage:
        tool_names = [_tool_name(t) for t in kwargs.get("tools") or []]
        received = [m.model_copy(deep=True) for m in messages]
        input_tokens = estimate_tokens(received)
        with self._lock:
            self._calls.append(received)
            self._bound_tools.append(tool_names)
            self._tool_choices.append(kwargs.get("tool_choice"))
            if self.max_input_tokens is not None and input_tokens > self.max_input_tokens:
                self._overflow_count += 1
                raise context_overflow_error(self.max_input_tokens, input_tokens)
            item = self._take()
        if isinstance(item, BaseException):
            raise item
        if callable(item) and not isinstance(item, AIMessage):
            item = item(list(received))
        reply = AIMessage(content=item) if isinstance(item, str) else item.model_copy(deep=True)
        return _finish(reply, input_tokens)

    def _take(self) -> ScriptItem:
        # Caller holds the lock.
        if self._cursor < len(self.script):
            item: ScriptItem = self.script[self._cursor]
            self._cursor += 1
            return item
        if self.on_exhausted == "answer":
            return EXHAUSTED_ANSWER
        if self.on_exhausted == "raise" or not self.script:
            raise ScriptExhaustedError(
                f"ScriptedChatModel called {len(self._calls)} times; "
                f"script has {len(self.script)} replies"
            )
        last: ScriptItem = self.script[-1]
        return last


class OutCountingModel(ScriptedChatModel):
    """A provider whose tokenizer and chat template count ``ratio`` times ``counter``.

    Each reply reports ``ceil(ratio * our count)`` input tokens for the prompt it got
    (messages and tool schemas); :attr:`reported` lists them in call order. ``ratio``
    may be a function of the call's index (0-based), for a ratio that drifts.
    """

    def __init__(
        self, script: list[Any], counter: Any, ratio: float | Callable[[int], float]
    ) -> None:
        super().__init__(script)
        object.__setattr__(self, "counter_", counter)  # a pydantic model: no new fields
        object.__setattr__(self, "ratio_", ratio)
        object.__setattr__(self, "reported", [])

    def _respond(self, messages: list[BaseMessage], kwargs: dict[str, Any]) -> AIMessage:
        reply = super()._respond(messages, kwargs)
        counter = self.counter_  # type: ignore[attr-defined]
        ours = counter.count_messages(messages) + counter.count_tools(
            list(kwargs.get("tools") or [])
        )
        ratio = self.ratio_  # type: ignore[attr-defined]
        reported: list[int] = self.reported  # type: ignore[attr-defined]
        prompt = math.ceil(ours * (ratio(len(reported)) if callable(ratio) else ratio))
        reported.append(prompt)
        usage = UsageMetadata(input_tokens=prompt, output_tokens=10, total_tokens=prompt + 10)
        return reply.model_copy(update={"usage_metadata": usage})


def _tool_name(tool: Any) -> str:
    if isinstance(tool, dict):
        function = tool.get("function")
        if isinstance(function, dict) and "name" in function:
            return str(function["name"])
        if "name" in tool:
            return str(tool["name"])
    return str(convert_to_openai_tool(tool)["function"]["name"])


def _finish(reply: AIMessage, input_tokens: int) -> AIMessage:
    """Return ``reply`` with id, tool-call ids, usage and model name filled when absent."""
    updates: dict[str, Any] = {}
    if reply.id is None:
        updates["id"] = f"ai-{_next_id()}"
    if any(not tc.get("id") for tc in reply.tool_calls):
        updates["tool_calls"] = [
            {**tc, "id": tc.get("id") or f"call_{_next_id()}"} for tc in reply.tool_calls
        ]
    if reply.usage_metadata is None:
        output_tokens = _ceil_div(message_chars(reply), CHARS_PER_TOKEN)
        updates["usage_metadata"] = UsageMetadata(
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            total_tokens=input_tokens + output_tokens,
        )
    metadata = dict(reply.response_metadata)
    metadata.setdefault("model_name", FAKE_MODEL_NAME)
    metadata.setdefault("finish_reason", "tool_calls" if reply.tool_calls else "stop")
    updates["response_metadata"] = metadata
    return reply.model_copy(update=updates)


def _to_chunks(message: AIMessage) -> Iterator[ChatGenerationChunk]:
    """Split a finished reply into the chunks a streaming provider would send."""
    msg_id = message.id
    first = True

    def chunk(**fields: Any) -> ChatGenerationChunk:
        nonlocal first
        if first:
            fields.setdefault("additional_kwargs", dict(message.additional_kwargs))
            first = False
        return ChatGenerationChunk(message=AIMessageChunk(id=msg_id, **fields))

    content = message.content
    if isinstance(content, str):
        for piece in (p for p in re.split(r"(\s+)", content) if p):
            yield chunk(content=piece)
    elif content:
        yield chunk(content=content)
    # Invalid calls stream their raw (unparseable) arguments, as a provider would; the
    # aggregated chunk then reports them as invalid_tool_calls.
    streamed = [(tc["name"], json.dumps(tc["args"]), tc["id"]) for tc in message.tool_calls]
    streamed += [
        (bad.get("name"), str(bad.get("args") or ""), bad.get("id"))
        for bad in message.invalid_tool_calls
    ]
    for index, (name, args, call_id) in enumerate(streamed):
        pieces = [
            args[i : i + STREAM_ARGS_PIECE_CHARS]
            for i in range(0, len(args), STREAM_ARGS_PIECE_CHARS)
        ] or [""]
        for n, piece in enumerate(pieces):
            tcc = ToolCallChunk(
                name=name if n == 0 else None,
                args=piece,
                id=call_id if n == 0 else None,
                index=index,
                type="tool_call_chunk",
            )
            yield chunk(content="", tool_call_chunks=[tcc])
    yield chunk(
        content="" if isinstance(content, str) else [],
        usage_metadata=message.usage_metadata,
        response_metadata=dict(message.response_metadata),
        chunk_position="last",
    )
