"""Tool calls that a model wrote as text, turned into real tool calls.

Small local models (Qwen2.5-Coder through llama.cpp, some Ollama builds) often answer a
request that declared tools with the call written as text: bare JSON, a fenced ```json
block, or Hermes-style ``<tool_call>…</tool_call>`` tags (or Qwen's ``<tools>``), one
call or several (one a line) in a block, with
``name``/``arguments``, ``name``/``parameters`` or OpenAI's ``function`` shape, or as
function elements: ``<function name="read_file" arguments='{"path": "a.py"}' />``,
``<function name="read_file">{…}</function>`` or Llama's
``<function=read_file>{…}</function>``. The endpoint then returns no ``tool_calls``
and nothing runs. :func:`extract_text_tool_calls` finds such calls when they name
declared tools; everything else stays text.

The rule is conservative on purpose: a reply is rewritten only when every JSON candidate
found in the chosen syntax is a well-formed call of a declared tool, or data (no call's
keys: a result the model made up beside its calls, which stays text). Prose that merely
contains JSON (an example config, an API response the model quotes) calls no declared
tool and is left alone; a call of an undeclared tool is reported in ``rejected`` so the
caller can tell the model, and the text is kept as it was. Nothing is completed: a call
whose JSON (or whose arguments string) is cut or broken stays text. A call written
again in the same reply (same tool, same arguments) runs once.
"""

from __future__ import annotations

import contextvars
import html
import json
import re
import uuid
from collections.abc import Collection, Sequence
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
_TAG_OPEN = re.compile(rf"<({'|'.join(CALL_TAGS)})>", re.IGNORECASE)
# A tag's closing right after what it holds, and anywhere later.
_TAG_CLOSE_AT = {tag: re.compile(rf"\s*</{tag}>", re.IGNORECASE) for tag in CALL_TAGS}
_TAG_CLOSE = {tag: re.compile(rf"</{tag}>", re.IGNORECASE) for tag in CALL_TAGS}
_FENCE_OPEN = re.compile(FENCE_OPEN_PATTERN)
_FENCE_CLOSE_AT = re.compile(r"\s*```")
_SPACE = re.compile(r"\s*")
_DECODER = json.JSONDecoder()
# A failed decode costs the text before it (the error's line number is counted there):
# a reply with more failed starts than this is no call, and is not decoded further.
MAX_FAILED_DECODES = 64
# Failed decodes left in the reply being scanned (each scan sets its own).
_DECODES_LEFT: contextvars.ContextVar[int] = contextvars.ContextVar("decodes_left", default=0)
# Where a function element starts (streamed text is held from there).
FUNCTION_ELEMENT_START_PATTERN = r"<function[\s=]"
# A call written as a function element: ``<function name="x" arguments='{…}' />``,
# ``<function name="x">{…}</function>`` or ``<function=x>{…}</function>``. An
# attribute's value ends at the first closing quote followed by "/>", so JSON holding
# the other quote is read whole; HTML-escaped quotes in it are unescaped.
_NAME = r"[A-Za-z_][\w.-]{0,127}"
_FUNCTION_START = re.compile(
    rf"""<function(?:\s+name\s*=\s*(?:"({_NAME})"|'({_NAME})')|=({_NAME})>)""", re.IGNORECASE
)
_FUNCTION_START_ANY = re.compile(FUNCTION_ELEMENT_START_PATTERN, re.IGNORECASE)
# Only ``arguments``: a tool definition quoted in prose has ``parameters`` (its schema).
_ARGS_ATTR = re.compile(r"""\s+arguments\s*=\s*(["'])""", re.IGNORECASE)
_ELEMENT_OPEN_END = re.compile(r"\s*>")
_ELEMENT_SELF_CLOSE = {quote: re.compile(rf"{quote}\s*/>") for quote in "\"'"}
_FUNCTION_CLOSE_AT = re.compile(r"\s*</function>", re.IGNORECASE)

# Every scan below moves forward through the reply and never searches the same stretch
# twice; a JSON value is decoded only where one can start (calls are objects or lists of
# them), so a hostile reply (thousands of unclosed tags or brackets) costs no more than a
# few decoding attempts per tag.
_VALUE_START = re.compile(r"""\{\s*["}]|\[\s*[{\]]""")


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
            return None  # half-written (or not JSON): never completed into a call
    if args is None:  # an explicit null: no arguments
        args = {}
    if not isinstance(args, dict):
        return None
    if args.get("type") == "object" and isinstance(args.get("properties"), dict):
        return None  # a JSON schema: the tool's definition repeated, not a call of it
    allowed = {"name", "arguments", "parameters", "args", "type", "id"}
    if set(obj) - allowed:
        return None  # an object with other keys is data, not a call
    return name, args


# Keys only a call (or a list of calls) has: a value with none of them is data.
CALL_KEYS = frozenset({"arguments", "parameters", "args", "function", "tool_calls"})


def _is_data(value: Any) -> bool:
    """Whether a JSON value that is no call is data rather than a broken call.

    Small models write what they expect a call to return beside the call itself
    (Qwen2.5-Coder 1.5B: three fenced ``read_file`` calls, then
    ``{"name": "retry_limit", "value": "3"}``); such a block stays text and the calls
    run. A value holding a call's keys (a cut ``arguments`` string, an argument list)
    is a call that did not parse: the reply stays text, as it would alone.
    """
    items = value if isinstance(value, list) else [value]
    return not any(isinstance(item, dict) and CALL_KEYS & item.keys() for item in items)


def _whole_block(text: str, spans: Sequence[tuple[int, int, Any]], index: int) -> bool:
    """Whether ``spans[index]`` is a fence or a pair of tags holding one value.

    The values of one block chain (each span starts where the one before it ended): a
    line of data among calls in one block makes the block data, and the reply text.
    """
    start, end, _ = spans[index]
    chained = (index > 0 and spans[index - 1][1] == start) or (
        index + 1 < len(spans) and spans[index + 1][0] == end
    )
    return not chained and text.startswith(("```", "<"), start)


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


def _without(text: str, spans: Sequence[tuple[int, int, Any]]) -> str:
    """``text`` without the (ordered, disjoint) ``spans``."""
    kept, pos = [], 0
    for start, end, _ in spans:
        kept.append(text[pos:start])
        pos = end
    kept.append(text[pos:])
    return "".join(kept)


def _value_at(text: str, pos: int) -> tuple[Any, int] | None:
    """The JSON value starting at ``pos`` (after whitespace) and where it ends."""
    start = _SPACE.match(text, pos).end()  # type: ignore[union-attr]  # \s* always matches
    if _VALUE_START.match(text, start) is None:
        return None  # no call starts here (and a failed decode would cost the whole text)
    left = _DECODES_LEFT.get()
    if left <= 0:
        return None
    try:
        value, end = _DECODER.raw_decode(text, start)
    except (ValueError, RecursionError):
        _DECODES_LEFT.set(left - 1)
        return None
    return (value, end) if _depth_ok(value) else None


def _closed_values(
    text: str, start: int, pos: int, closing: re.Pattern[str]
) -> tuple[list[tuple[int, int, Any]], int] | None:
    """The JSON values from ``pos`` to a ``closing`` right after the last, or None.

    Small models write several calls in one block, one JSON object a line. The spans
    cover the block from ``start`` (its opening) to the closing's end, one per value.

    Returns:
        The spans and where the closing ends.
    """
    spans: list[tuple[int, int, Any]] = []
    while (parsed := _value_at(text, pos)) is not None:
        value, pos = parsed
        closed = closing.match(text, pos)
        if closed is not None:
            spans.append((start, closed.end(), value))
            return spans, closed.end()
        spans.append((start, pos, value))
        start = pos
    return None


def _bare_values(text: str) -> list[tuple[int, int, Any]] | None:
    """The JSON values of a reply that is nothing but JSON (and whitespace), else None.

    A sentence with an inline object is prose.
    """
    found: list[tuple[int, int, Any]] = []
    pos = _SPACE.match(text).end()  # type: ignore[union-attr]
    while pos < len(text):
        parsed = _value_at(text, pos)
        if parsed is None:
            return None
        found.append((pos, parsed[1], parsed[0]))
        pos = _SPACE.match(text, parsed[1]).end()  # type: ignore[union-attr]
    return found or None


def _fenced_blocks(text: str) -> list[tuple[int, int, Any]] | None:
    """JSON values in Markdown code fences, with their spans; None when one is not JSON.

    A fence holds JSON values (one a line, or one) and closes right after the last: a
    value holding ``````` itself (an edit of a Markdown file) does not end the block
    early. A fence of text after JSON fences ends the scan: Qwen2.5-Coder 1.5B fenced
    its ``grep`` call, then the line it expected grep to print, which had kept the call
    from running (a fence of text before them still leaves the reply alone).
    """
    found: list[tuple[int, int, Any]] = []
    pos = 0
    while (opening := _FENCE_OPEN.search(text, pos)) is not None:
        body = _SPACE.match(text, opening.end()).end()  # type: ignore[union-attr]
        if found and _VALUE_START.match(text, body) is None:
            # Text after the JSON blocks (the output a small model expects its call to
            # print, fenced): the rest of the reply is prose.
            return found
        block = _closed_values(text, opening.start(), opening.end(), _FENCE_CLOSE_AT)
        if block is None:
            return None  # a fenced block that is not JSON: leave the reply alone
        spans, pos = block
        found.extend(spans)
    return found


def _arguments(raw: str) -> Any:
    """An attribute's arguments: JSON, else HTML-unescaped JSON; ``[]`` when neither.

    A list is no arguments object: the reply it is in stays text.
    """
    raw = raw.strip()
    args = _loads(raw) if raw else {}
    if args is None and "&" in raw:
        args = _loads(html.unescape(raw))
    return args if args is not None else []


def _function_elements(text: str) -> list[tuple[int, int, Any]]:
    """Calls written as function elements, with their spans (each a call object)."""
    found: list[tuple[int, int, Any]] = []
    unclosed: dict[str, int] = {}  # quote -> where its "/>" was last looked for in vain
    pos = 0
    while (start := _FUNCTION_START.search(text, pos)) is not None:
        pos = start.end()
        name = start.group(1) or start.group(2) or start.group(3)
        if start.group(3) is None:  # a name attribute: arguments attribute or a body
            attr = _ARGS_ATTR.match(text, pos)
            if attr is not None:
                quote = attr.group(1)
                if attr.end() >= unclosed.get(quote, len(text) + 1):
                    continue
                closing = _ELEMENT_SELF_CLOSE[quote].search(text, attr.end())
                if closing is None:
                    unclosed[quote] = attr.end()
                    continue
                args = _arguments(text[attr.end() : closing.start()])
                found.append((start.start(), closing.end(), {"name": name, "arguments": args}))
                pos = closing.end()
                continue
            opened = _ELEMENT_OPEN_END.match(text, pos)
            if opened is None:
                continue
            pos = opened.end()
        empty = _FUNCTION_CLOSE_AT.match(text, pos)
        if empty is not None:
            found.append((start.start(), empty.end(), {"name": name, "arguments": {}}))
            pos = empty.end()
            continue
        parsed = _value_at(text, pos)
        closing = _FUNCTION_CLOSE_AT.match(text, parsed[1]) if parsed is not None else None
        if parsed is None or closing is None:
            continue
        found.append((start.start(), closing.end(), {"name": name, "arguments": parsed[0]}))
        pos = closing.end()
    return found


def _only_elements(text: str) -> list[tuple[int, int, Any]] | None:
    """The function elements of ``text`` when nothing else but whitespace is there."""
    elements = _function_elements(text)
    return elements if elements and not _without(text, elements).strip() else None


def _closing_elements(text: str) -> list[tuple[int, int, Any]] | None:
    """Function elements that end the reply, after its prose; None otherwise.

    From the first element on, the reply must be nothing but elements: an element quoted
    in prose (in backticks, in a code block, followed by more prose) is an example, not a
    call, and a broken element among them leaves the whole reply alone. A call tag opened
    right before them and never closed (a reply cut short) belongs to them.
    """
    elements = _function_elements(text)
    if not elements:
        return None
    first = elements[0][0]
    if _FUNCTION_START_ANY.search(text, 0, first) is not None:
        return None  # a broken element before them: the reply is left alone
    if _without(text, elements)[first:].strip():  # the prose before them is kept as is
        return None
    head = text[:first].rstrip()
    tail = head[-(max(map(len, CALL_TAGS)) + 2) :].lower()
    for tag in CALL_TAGS:
        if tail.endswith(f"<{tag}>"):
            _start, end, call = elements[0]
            elements[0] = (len(head) - len(tag) - 2, end, call)
            break
    return elements


def _tagged_blocks(text: str) -> list[tuple[int, int, Any]] | None:
    """What call tags hold (JSON, or function elements), with the tags' spans.

    None when a closed tag holds anything else: the reply is left alone.
    """
    found: list[tuple[int, int, Any]] = []
    unclosed: set[str] = set()  # tags with no closing after the last one looked for
    pos = 0
    while (opening := _TAG_OPEN.search(text, pos)) is not None:
        pos = opening.end()
        tag = opening.group(1).lower()
        block = _closed_values(text, opening.start(), pos, _TAG_CLOSE_AT[tag])
        if block is not None:
            spans, pos = block
            found.extend(spans)
            continue
        if tag in unclosed:
            continue
        closing = _TAG_CLOSE[tag].search(text, pos)
        if closing is None:
            unclosed.add(tag)  # an unclosed tag is no call syntax
            continue
        # Function elements inside the tags (Qwen writes its calls so too).
        elements = _only_elements(text[pos : closing.start()])
        if elements is None:
            return None  # a tagged block that is neither: leave the reply alone
        found.append((opening.start(), closing.end(), [call for _s, _e, call in elements]))
        pos = closing.end()
    return found


def _spans(text: str) -> list[tuple[int, int, Any]] | None:
    """Candidate call spans in the first syntax that appears: tags, function elements,
    fences, bare JSON."""
    tagged = _tagged_blocks(text)
    if tagged is None or tagged:
        return tagged
    elements = _closing_elements(text)
    if elements:
        return elements
    fenced = _fenced_blocks(text)
    if fenced:
        return fenced
    return _bare_values(text)


_NAMED_CALL = re.compile(r"""["']name["']\s*:\s*["']([A-Za-z_][\w.-]{0,127})["']""")


def call_lookalike(text: str, declared: Collection[str]) -> str | None:
    """What in ``text`` looks like a tool call written as text, whether or not it is one
    :func:`extract_text_tool_calls` would run: a call tag, a function element, or JSON
    naming a declared tool.

    Args:
        text: A reply's text.
        declared: Names of the tools the request declared.

    Returns:
        A short description (``<tools>``, ``<function>``, ``read_file``), or None.
    """
    if not text or len(text) > MAX_SCAN_CHARS or not declared:
        return None
    tag = _TAG_OPEN.search(text)
    if tag is not None:
        return f"<{tag.group(1).lower()}>"
    if _FUNCTION_START_ANY.search(text) is not None:
        return "<function>"
    for named in _NAMED_CALL.finditer(text):
        if named.group(1) in declared:
            return named.group(1)
    return None


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
    token = _DECODES_LEFT.set(MAX_FAILED_DECODES)
    try:
        spans = _spans(text)
    finally:
        _DECODES_LEFT.reset(token)
    if not spans:
        return result
    parsed: list[tuple[str, dict[str, Any]]] = []
    call_spans: list[tuple[int, int, Any]] = []
    for index, span in enumerate(spans):
        calls = _calls_in(span[2])
        if calls is None:
            if _is_data(span[2]) and _whole_block(text, spans, index):
                continue  # a block of data beside the calls (a made-up result): text
            return result  # a call that does not parse: the reply stays text
        parsed.extend(calls)
        call_spans.append(span)
    if not parsed:
        return result
    rejected = [name for name, _ in parsed if name not in declared]
    if rejected:
        result.rejected = sorted(set(rejected))
        return result
    result.text = _without(text, call_spans).strip()
    result.calls = [
        {
            "name": name,
            "args": args,
            "id": f"call_text_{uuid.uuid4().hex[:16]}",
            "type": "tool_call",
        }
        for name, args in _distinct(parsed)
    ]
    return result


def _distinct(calls: Sequence[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    """``calls`` without repeats of an earlier call (same tool, same arguments).

    A small model that explains its calls writes each one again where it explains it
    (Qwen2.5-Coder 1.5B: five reads, then the same five under a heading each); run
    twice, every result came twice and the ten filled the window the five fit in.
    """
    seen: set[str] = set()
    out: list[tuple[str, dict[str, Any]]] = []
    for name, args in calls:
        key = json.dumps([name, args], sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            out.append((name, args))
    return out
