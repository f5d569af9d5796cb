"""Tool calls that a model wrote as text, turned into real tool calls.

Small local models (Qwen2.5-Coder through llama.cpp, some Ollama builds) often answer a
request that declared tools with the call written as text: bare JSON, a fenced ```json
block, or Hermes-style ``<tool_call>…</tool_call>`` tags (or Qwen's ``<tools>``), with
``name``/``arguments``, ``name``/``parameters`` or OpenAI's ``function`` shape. The
endpoint then returns no ``tool_calls`` and nothing runs. :func:`extract_text_tool_calls`
finds such calls when they name declared tools; everything else stays text.

The rule is conservative on purpose: a reply is rewritten only when every JSON candidate
found in the chosen syntax is a well-formed call of a declared tool. Prose that merely
contains JSON (an example config, an API response the model quotes) names no declared
tool and is left alone; a call of an undeclared tool is reported in ``rejected`` so the
caller can tell the model, and the text is kept as it was.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from typing import Any

# A reply longer than this is prose or code, not a call written as text; scanning it
# for JSON would cost time on every long answer.
MAX_SCAN_CHARS = 200_000
# Arguments nested deeper than this are hostile or broken, never a real call.
MAX_JSON_DEPTH = 64

# Tags a call may be written in (case-insensitive). ``tools``: Qwen2.5's chat template
# lists the tools inside <tools>…</tools>, and its small models write their calls in
# the same tags.
CALL_TAGS = ("tool_call", "function_call", "tool_calls", "tools")
# The opening of a fence a call may be written in: JSON, tool_call or no language.
FENCE_OPEN_PATTERN = r"```[ \t]*(?:json|JSON|tool_call)?[ \t]*\n"
_TAGGED = re.compile(rf"<({'|'.join(CALL_TAGS)})>\s*(.*?)\s*</\1>", re.DOTALL | re.IGNORECASE)
_FENCE_OPEN = re.compile(FENCE_OPEN_PATTERN)
_FENCE = "```"


@dataclass
class TextToolCalls:
    """What :func:`extract_text_tool_calls` found.

    Attributes:
        calls: LangChain tool calls (``name``, ``args``, ``id``, ``type``), in order.
        text: The reply without the call syntax (prose around the calls), stripped.
        rejected: Names of undeclared tools the text tried to call (then ``calls`` is
            empty and ``text`` is the original reply).
    """

    calls: list[dict[str, Any]] = field(default_factory=list)
    text: str = ""
    rejected: list[str] = field(default_factory=list)


def _depth_ok(value: Any, depth: int = 0) -> bool:
    if depth > MAX_JSON_DEPTH:
        return False
    if isinstance(value, dict):
        return all(_depth_ok(v, depth + 1) for v in value.values())
    if isinstance(value, list):
        return all(_depth_ok(v, depth + 1) for v in value)
    return True


def _loads(text: str) -> Any:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if _depth_ok(value) else None


def _as_call(obj: Any) -> tuple[str, dict[str, Any]] | None:
    """``(name, args)`` of one call object in any of the shapes models write."""
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("function"), dict):  # OpenAI: {"type": "function", "function": {...}}
        obj = obj["function"]
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return None
    args: Any = obj.get("arguments", obj.get("parameters", obj.get("args", {})))
    if isinstance(args, str):  # OpenAI sends arguments as a JSON string
        args = _loads(args) if args.strip() else {}
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return None
    allowed = {"name", "arguments", "parameters", "args", "type", "id"}
    if set(obj) - allowed:
        return None  # an object with other keys is data, not a call
    return name, args


def _calls_in(value: Any) -> list[tuple[str, dict[str, Any]]] | None:
    """Every call in a parsed JSON value, or None when it is not (only) calls."""
    if isinstance(value, dict) and isinstance(value.get("tool_calls"), list):
        value = value["tool_calls"]
    items = value if isinstance(value, list) else [value]
    if not items:
        return None
    calls = [_as_call(item) for item in items]
    if any(c is None for c in calls):
        return None
    return [c for c in calls if c is not None]


def _json_objects(text: str) -> Iterator[tuple[int, int, Any]]:
    """Top-level JSON values in ``text`` with their spans (bare JSON replies)."""
    decoder = json.JSONDecoder()
    i = 0
    while i < len(text):
        start = min((p for p in (text.find("{", i), text.find("[", i)) if p >= 0), default=-1)
        if start < 0:
            return
        try:
            value, end = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):
            i = start + 1
            continue
        if _depth_ok(value):
            yield start, end, value
        i = end


def _fenced_blocks(text: str) -> list[tuple[int, int, Any]] | None:
    """JSON values in Markdown code fences, with their spans; None when one is not JSON.

    A fence closes at the first ````` after which the body parses as JSON: a value
    holding ````` itself (an edit of a Markdown file) does not end the block early.
    """
    found: list[tuple[int, int, Any]] = []
    pos = 0
    while (opening := _FENCE_OPEN.search(text, pos)) is not None:
        close = text.find(_FENCE, opening.end())
        value = None
        while close >= 0:
            value = _loads(text[opening.end() : close])
            if value is not None:
                break
            close = text.find(_FENCE, close + 1)
        if value is None:
            return None  # a fenced block that is not JSON: leave the reply alone
        pos = close + len(_FENCE)
        found.append((opening.start(), pos, value))
    return found


def _spans(text: str) -> list[tuple[int, int, Any]] | None:
    """Candidate call spans in the first syntax that appears: tags, fences, bare JSON."""
    found = []
    for match in _TAGGED.finditer(text):
        value = _loads(match.group(2))
        if value is None:
            return None  # a tagged block that is not JSON: leave the reply alone
        found.append((match.start(), match.end(), value))
    if found:
        return found
    fenced = _fenced_blocks(text)
    if fenced:
        return fenced
    bare = list(_json_objects(text))
    if not bare:
        return None
    # Bare JSON counts only when the reply is nothing but JSON (and whitespace): a
    # sentence with an inline object is prose.
    rest = text
    for start, end, _ in reversed(bare):
        rest = rest[:start] + rest[end:]
    return bare if not rest.strip() else None


def extract_text_tool_calls(text: str, declared: Collection[str]) -> TextToolCalls:
    """Find tool calls of ``declared`` tools written as text in a model reply.

    Args:
        text: The reply's text content.
        declared: Names of the tools the request declared.

    Returns:
        The calls (empty when the reply is ordinary text), the text that remains, and
        the names of undeclared tools the reply tried to call.
    """
    result = TextToolCalls(text=text)
    if not text or len(text) > MAX_SCAN_CHARS or not declared:
        return result
    spans = _spans(text)
    if not spans:
        return result
    parsed: list[tuple[str, dict[str, Any]]] = []
    for _start, _end, value in spans:
        calls = _calls_in(value)
        if calls is None:
            return result
        parsed.extend(calls)
    rejected = [name for name, _ in parsed if name not in declared]
    if rejected:
        result.rejected = sorted(set(rejected))
        return result
    remaining = text
    for start, end, _ in reversed(spans):
        remaining = remaining[:start] + remaining[end:]
    result.text = remaining.strip()
    result.calls = [
        {
            "name": name,
            "args": args,
            "id": f"call_text_{uuid.uuid4().hex[:16]}",
            "type": "tool_call",
        }
        for name, args in parsed
    ]
    return result
