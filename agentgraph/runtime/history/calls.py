"""Tool calls of a message and the groups a cut must keep whole.

An assistant message with tool calls and the results that directly follow it
form one group; every other message is a group of its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

NO_CALLS: list[tuple[str, str]] = []

# Finish/stop reasons meaning "the output token limit was reached": OpenAI-compatible
# servers ("length"), Anthropic and Bedrock ("max_tokens"), Gemini ("MAX_TOKENS"),
# OpenAI's Responses API ("max_output_tokens").
OUTPUT_LIMIT_REASONS = frozenset({"length", "max_tokens", "MAX_TOKENS", "max_output_tokens"})


def message_calls(msg: BaseMessage) -> list[tuple[str, str]]:
    """``(id, name)`` of every call of an assistant message, in order.

    Invalid tool calls count: langchain-openai sends them as tool calls, so the
    provider requires a result for them too. A missing id becomes ``""``.
    The returned list must not be mutated (it may be shared).
    """
    cls = type(msg)
    # Exact class checks first: this runs several times per message per model
    # call, and isinstance on pydantic message classes is comparatively slow.
    if cls is not AIMessage and (
        cls is ToolMessage
        or cls is HumanMessage
        or cls is SystemMessage
        or not isinstance(msg, AIMessage)
    ):
        return NO_CALLS
    tool_calls = msg.tool_calls  # type: ignore[attr-defined]
    invalid = msg.invalid_tool_calls  # type: ignore[attr-defined]
    if not tool_calls and not invalid:
        return NO_CALLS
    out = [(tc.get("id") or "", tc.get("name") or "") for tc in tool_calls]
    if invalid:
        out.extend((tc.get("id") or "", tc.get("name") or "") for tc in invalid)
    return out


def is_empty_content(content: Any) -> bool:
    if isinstance(content, str):
        return not content.strip()
    return not content


def is_blank_answer(msg: BaseMessage) -> bool:
    """An assistant message with no tool calls and no text (a model's empty answer).

    Strict providers reject such a turn anywhere but at the very end, so a single
    empty answer stored in the history would make every later request fail.
    """
    cls = type(msg)
    if cls is not AIMessage and (
        cls is HumanMessage or cls is ToolMessage or not isinstance(msg, AIMessage)
    ):
        return False
    if message_calls(msg) or msg.additional_kwargs.get("tool_calls"):
        return False
    if msg.additional_kwargs.get("function_call"):
        return False
    content = msg.content
    if isinstance(content, str):
        return not content.strip()
    for part in content:
        if isinstance(part, str):
            if part.strip():
                return False
        elif not (
            isinstance(part, Mapping)
            and part.get("type") == "text"
            and not str(part.get("text", "")).strip()
        ):
            return False
    return True


def without_calls(msg: AIMessage, keep: set[str]) -> AIMessage:
    """Copy of ``msg`` keeping only the calls whose id is in ``keep``.

    The raw ``additional_kwargs["tool_calls"]`` are filtered too: langchain-openai
    falls back to them when ``tool_calls`` is empty, and deserialization rebuilds
    ``tool_calls`` from them.
    """
    update: dict[str, Any] = {
        "tool_calls": [tc for tc in msg.tool_calls if tc.get("id") in keep],
        "invalid_tool_calls": [tc for tc in msg.invalid_tool_calls if tc.get("id") in keep],
    }
    raw = msg.additional_kwargs.get("tool_calls")
    if raw is not None:
        kwargs = dict(msg.additional_kwargs)
        kept_raw = [tc for tc in raw if isinstance(tc, Mapping) and tc.get("id") in keep]
        if kept_raw:
            kwargs["tool_calls"] = kept_raw
        else:
            del kwargs["tool_calls"]
        update["additional_kwargs"] = kwargs
    return msg.model_copy(update=update)


def group_messages(messages: Sequence[BaseMessage]) -> list[list[BaseMessage]]:
    """Split a history into the units a cut must keep whole.

    A group is an assistant message with tool calls plus the results of those
    calls that directly follow it (each call id once); any other message is a
    group of its own. Concatenating the groups gives back ``messages``.

    Args:
        messages: A history.

    Returns:
        The groups, in order.
    """
    groups: list[list[BaseMessage]] = []
    n = len(messages)
    i = 0
    while i < n:
        msg = messages[i]
        group = [msg]
        i += 1
        open_ids = {cid for cid, _ in message_calls(msg)}
        while open_ids and i < n:
            nxt = messages[i]
            if not isinstance(nxt, ToolMessage) or nxt.tool_call_id not in open_ids:
                break
            open_ids.discard(nxt.tool_call_id)
            group.append(nxt)
            i += 1
        groups.append(group)
    return groups


def hit_output_limit(ai: AIMessage) -> bool:
    """Whether the provider says the reply stopped at its output token limit."""
    meta: dict[str, Any] = ai.response_metadata or {}
    details = meta.get("incomplete_details")
    reasons = (
        meta.get("finish_reason"),
        meta.get("stop_reason"),
        meta.get("stopReason"),  # Bedrock Converse
        details.get("reason") if isinstance(details, dict) else None,
    )
    return any(isinstance(r, str) and r in OUTPUT_LIMIT_REASONS for r in reasons)
