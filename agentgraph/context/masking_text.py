"""The one-line placeholder that stands in for a masked tool output.

Shared by the observation-masking unit (old outputs in the prompt view) and by
compaction (older outputs among the messages a compaction keeps). Deterministic, so
a prompt that carries it stays byte-stable for the provider's prefix cache.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from itertools import pairwise
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from agentgraph.capabilities.tools.spec import tools_where

__all__ = [
    "MASKED_KEY",
    "MASKED_TOKENS_KEY",
    "MASK_ARGS_MAX_CHARS",
    "MASK_EXEMPT_TOOLS",
    "MASK_MIN_OUTPUT_TOKENS",
    "SUMMARIZED_COPY_KEY",
    "mask_output",
    "mask_outputs_before",
    "maskable",
    "note_words",
    "placeholder",
    "restates",
]

# Outputs smaller than this stay: a placeholder would save next to nothing.
MASK_MIN_OUTPUT_TOKENS = 100
# Outputs of these tools are instructions the model keeps following (a skill's
# playbook): never masked (ToolSpec.mask_exempt).
MASK_EXEMPT_TOOLS = tools_where(lambda spec: spec.mask_exempt)
# Arguments shown in a placeholder, in characters.
MASK_ARGS_MAX_CHARS = 120
# ``additional_kwargs`` key marking a masked copy.
MASKED_KEY = "agentgraph_masked"
# Marks the copies a compaction keeps in view of messages its summarizer had whole (the
# readings a summary left out, the results the model had not seen): a later compaction
# does not summarize them again (the summary carried beside them holds them; summarized
# again, each batch of eight parallel reads at an 8k window went to two compactions'
# summarizers, 25 summarizer calls for 13 compactions).
SUMMARIZED_COPY_KEY = "agentgraph_summarized_copy"
# Key of a model request's state (that request only, never stored) with the tokens of the
# outputs masked in its view since the last summary, in the provider's tokens.
MASKED_TOKENS_KEY = "agentgraph_masked_tokens"

_ARTIFACT_RE = re.compile(r"full output: (\S+) — page through it")
# A word of a reply that can show the model restated something from an output: a number
# or identifier, not an everyday word (``ORBIT-4402``, ``parse_config``, ``8080``,
# ``parseConfig``, ``README``).
_WORD_RE = re.compile(r"[^\W_][\w.:/+-]*[^\W_]|_\w+")
NOTE_WORD_MIN_CHARS = 4
# Words of one reply checked against its outputs: a long reply's first ones suffice.
NOTE_WORDS_MAX = 200


def note_words(text: str, limit: int | None = NOTE_WORDS_MAX) -> set[str]:
    """The words of ``text`` distinctive enough to show what it restates.

    Args:
        text: A reply's text.
        limit: At most this many words (the first found); None for all of them.

    Returns:
        Its words of at least NOTE_WORD_MIN_CHARS characters that hold a digit or an
        underscore, are all capitals, or have a capital after a lower-case letter.
    """
    out: set[str] = set()
    for word in _WORD_RE.findall(text):
        if len(word) < NOTE_WORD_MIN_CHARS:
            continue
        if (
            any(c.isdigit() or c == "_" for c in word)
            or (word.isupper() and word.isalpha())
            or any(a.islower() and b.isupper() for a, b in pairwise(word))
        ):
            out.add(word)
            if limit is not None and len(out) >= limit:
                break
    return out


def restates(words: set[str], output: str) -> bool:
    """Whether a reply whose :func:`note_words` are ``words`` restates ``output``."""
    return any(word in output for word in words)


def maskable(message: ToolMessage, tokens: int) -> bool:
    """Whether an output of ``tokens`` may stand as a placeholder once it is restated.

    Args:
        message: A tool result.
        tokens: Its size in tokens.

    Returns:
        False for a small output (the placeholder would save next to nothing) and for a
        skill's playbook (the model keeps following it).
    """
    return tokens >= MASK_MIN_OUTPUT_TOKENS and message.name not in MASK_EXEMPT_TOOLS


def _short_args(args: Any) -> str:
    try:
        text = json.dumps(args, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        text = str(args)
    if len(text) > MASK_ARGS_MAX_CHARS:
        text = text[: MASK_ARGS_MAX_CHARS - 1] + "…"
    return text


def placeholder(message: ToolMessage, call: dict[str, Any] | None, tokens: int) -> str:
    """The one-line stand-in for a masked tool output.

    Short on purpose: a long task carries one per call it made, so every token of the
    placeholder is paid once per call for the rest of the task.

    Args:
        message: The tool result being masked.
        call: The tool call it answers, when found in the view.
        tokens: Size of the output in tokens.

    Returns:
        ``[tool output masked: NAME(ARGS) returned N tokens; read_history("ID") shows
        it]``, or, when the output names its saved artifact, ``…; full output saved in
        PATH (read it with read_file)]``.
    """
    name = (call or {}).get("name") or message.name or "tool"
    args = _short_args((call or {}).get("args") or {})
    found = _ARTIFACT_RE.search(message.text)
    if found:
        where = f"full output saved in {found.group(1)} (read it with read_file)"
    else:
        where = f"read_history({json.dumps(message.tool_call_id)}) shows it"
    return f"[tool output masked: {name}({args}) returned {tokens:,} tokens; {where}]"


def mask_outputs_before(
    messages: Sequence[BaseMessage], end: int, count: Callable[[BaseMessage], int]
) -> list[BaseMessage]:
    """``messages`` with the tool outputs at indices below ``end`` masked (copies).

    Args:
        messages: The messages; never modified.
        end: Outputs at this index and after stay whole.
        count: Token count of one message.

    Returns:
        The new list; masked messages are marked ``additional_kwargs[MASKED_KEY]``.
    """
    calls: dict[str, dict[str, Any]] = {}
    out: list[BaseMessage] = []
    for i, msg in enumerate(messages):
        if isinstance(msg, AIMessage):
            calls.update({str(c["id"]): dict(c) for c in msg.tool_calls if c.get("id")})
        elif isinstance(msg, ToolMessage) and i < end:
            msg = mask_output(msg, calls.get(msg.tool_call_id), count)
        out.append(msg)
    return out


def mask_output(
    message: ToolMessage, call: dict[str, Any] | None, count: Callable[[BaseMessage], int]
) -> ToolMessage:
    """``message`` as its one-line :func:`placeholder` (a copy marked
    ``additional_kwargs[MASKED_KEY]``) when it is :func:`maskable` and not masked yet;
    else ``message`` itself.

    Args:
        message: The tool output.
        call: The tool call it answers, when known.
        count: Token count of one message.
    """
    if message.additional_kwargs.get(MASKED_KEY):
        return message
    size = count(message)
    if not maskable(message, size):
        return message
    return message.model_copy(
        update={
            "content": placeholder(message, call, size),
            "additional_kwargs": {**message.additional_kwargs, MASKED_KEY: True},
        }
    )
