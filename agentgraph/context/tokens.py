"""Token accounting: exact where an offline tokenizer exists, calibrated elsewhere.

OpenAI models are counted exactly with the o200k / cl100k tables that ship
inside the ``bpe-openai`` wheel (no download, ever). Other models (Claude,
Qwen, Llama, DeepSeek, ...) have no offline tokenizer here, so their counts are
labelled ``"estimate"`` and come from :func:`estimate_tokens`, calibrated
against o200k on code, English prose, Chinese, Japanese, JSON and shell logs
(see ``docs/bench/tokens.md`` for the error per kind).

Counting is incremental: :class:`TokenCounter` remembers each message's count,
so a turn that adds three messages to a 10,000-message history encodes only
those three.
"""

from __future__ import annotations

import json
import math
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping, Sequence
from functools import cache, partial
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, ChatMessage, ToolMessage
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

if TYPE_CHECKING:
    from agentgraph.context.truncation import TokenCodec

__all__ = [
    "MESSAGE_OVERHEAD_TOKENS",
    "REPLY_PRIMING_TOKENS",
    "TOKEN_CACHE_MAX_ENTRIES",
    "TokenCounter",
    "anchored_prompt_tokens",
    "encoding_for_model",
    "estimate_scale",
    "estimate_tokens",
    "fits_by_length",
    "get_counter",
    "reported_prompt_tokens",
]

CountSource = Literal["exact", "estimate"]

ENCODING_O200K = "o200k_base"
ENCODING_CL100K = "cl100k_base"

# OpenAI's chat format: <|start|>{role}<|message|>{content}<|end|> costs 3
# tokens besides the role and content; every reply is primed with 3 more.
MESSAGE_OVERHEAD_TOKENS = 3
REPLY_PRIMING_TOKENS = 3
NAME_OVERHEAD_TOKENS = 1
# A tool call is rendered as a small wrapper around its name and JSON arguments.
TOOL_CALL_OVERHEAD_TOKENS = 3
# A fixed price per image: OpenAI high detail for a 512x512 tile is 255 + 85,
# a full 1024x1024 image 765; Claude charges about (w*h)/750, ~1,400 at 1024^2.
# 765 keeps typical screenshots from being under-counted badly.
IMAGE_BLOCK_TOKENS = 765

# OpenAI's function-definition cost (cookbook "How to count tokens with tiktoken",
# checked there against the API's reported usage): per function, per parameter,
# per enum value, and once per request when any tool is sent. The cl100k models
# (gpt-4, gpt-3.5) spend 3 more per function.
FUNCTION_INIT_TOKENS = 7
FUNCTION_INIT_TOKENS_CL100K = 10
PROPERTIES_INIT_TOKENS = 3
PROPERTY_KEY_TOKENS = 3
ENUM_INIT_TOKENS = -3
ENUM_ITEM_TOKENS = 3
TOOLS_END_TOKENS = 12
TYPE_TEXT_MAX_DEPTH = 6
_TS_TYPES = {
    "string": "string",
    "integer": "number",
    "number": "number",
    "boolean": "boolean",
    "null": "null",
    "object": "object",
    "array": "any[]",
}

TOKEN_CACHE_MAX_ENTRIES = 50_000
# Counts of recent texts, keyed by the text itself: the same text is counted again and
# again within a call (a tool output checked against its cap, then truncated, then
# counted as a message's content) and across calls (a file read twice). Texts above
# TEXT_CACHE_MAX_TEXT_CHARS are not kept (a 50 MB output must not stay alive); the
# cache holds at most TEXT_CACHE_MAX_ENTRIES texts of TEXT_CACHE_MAX_CHARS in all.
TEXT_CACHE_MAX_ENTRIES = 4_096
TEXT_CACHE_MAX_CHARS = 4_000_000
TEXT_CACHE_MAX_TEXT_CHARS = 262_144
TOOL_CACHE_MAX_ENTRIES = 1_024
COUNTER_REGISTRY_MAX_MODELS = 64
# The most tokens one character can cost under any counter here: byte-level BPE
# gives every token at least one of a character's (at most four) UTF-8 bytes, and the
# estimate's heaviest character costs under two. A token is not "at least a
# character": rare 4-byte characters cost up to four tokens each.
MAX_TOKENS_PER_CHAR = 4

# A reported usage anchor is distrusted when it disagrees with our own count
# of the same prefix by more than this fraction: a stale anchor (an assistant
# message kept across compaction) would otherwise report the pre-compaction
# size and trigger compaction forever.
ANCHOR_MAX_DEVIATION_RATIO = 0.5
# With an estimated count, the messages after a trusted anchor are scaled by how much
# the provider's count of the anchored prefix exceeds ours (a local model's chat
# template and tokenizer: Qwen's splits every digit), at most this much.
ESTIMATE_SCALE_MAX = 2.0

# Model-name prefixes (after any "provider/" part) -> encoding. o200k first:
# "gpt-4o" and "gpt-4.1" must win over the cl100k "gpt-4" prefix.
_O200K_PREFIXES = (
    "gpt-4o",
    "gpt-4.1",
    "gpt-4.5",
    "gpt-5",
    "gpt-oss",
    "chatgpt-4o",
    "o1",
    "o3",
    "o4",
    "codex-",
)
_CL100K_PREFIXES = (
    "gpt-4",
    "gpt-3.5",
    "gpt-35",
    "text-embedding-3",
    "text-embedding-ada-002",
)

_ROLE_BY_TYPE = {
    "human": "user",
    "ai": "assistant",
    "system": "system",
    "tool": "tool",
    "function": "function",
    "developer": "developer",
}

# --- calibrated estimate -------------------------------------------------
#
# Every byte of the UTF-8 text is mapped to a class letter with one C-level
# ``bytes.translate``; counts of those letters (and of two-letter transitions,
# which count runs) are the features. No per-character Python loop.
#   a ASCII letter   d digit   p ASCII punctuation/control   _ whitespace
#   x lead byte of a 2-byte char (Latin accents, Greek, Cyrillic, ...)
#   h lead byte E4..E9 (CJK unified ideographs, U+4000..U+9FFF)
#   e lead byte E3 (kana, CJK punctuation)   o any other lead byte
#   c UTF-8 continuation byte (ignored)
_CLASS_TABLE = bytes(
    ord(
        "a"
        if chr(b).isascii() and chr(b).isalpha()
        else "d"
        if 0x30 <= b <= 0x39
        else "_"
        if b in b" \t\n\r\x0b\x0c"
        else "p"
        if b < 0x80
        else "c"
        if b < 0xC0
        else "x"
        if 0xC3 <= b <= 0xDF
        else "e"
        if b == 0xE3
        else "h"
        if 0xE4 <= b <= 0xE9
        else "o"
    )
    for b in range(256)
)
# Letters vs everything else, and whitespace vs everything else: counting
# "_a" / "_ " transitions in these projections counts word / blank runs.
_WORD_TABLE = bytes(ord("a" if chr(b).isascii() and chr(b).isalpha() else "_") for b in range(256))
_BLANK_TABLE = bytes(ord("_" if b in b" \t\n\r\x0b\x0c" else "a") for b in range(256))
# E3 80 xx is CJK punctuation (U+3000..U+303F); nearly every other E3 char
# in real text is kana (U+3040..U+30FF).
_CJK_PUNCT_LEAD = b"\xe3\x80"

# Tokens per feature, fitted by least squares on relative error against the
# exact o200k count (bench/bench_tokens.py --calibrate reproduces the fit).
# EST_PER_OTHER_LETTER (Cyrillic, Greek, accented Latin) has no training text
# in that fit; it was fitted alone on the Russian and Greek vim tutors.
EST_PER_WORD = 0.5251
EST_PER_ASCII_LETTER = 0.0471
EST_PER_DIGIT = 0.7455
EST_PER_PUNCT = 0.4559
EST_PER_BLANK_RUN = 0.1733
EST_PER_BLANK_CHAR = 0.0752
EST_PER_NEWLINE = 1.2008
EST_PER_HAN = 0.7244
EST_PER_KANA = 0.6639
EST_PER_OTHER_LETTER = 0.2733
EST_PER_OTHER_CHAR = 0.5725


def _estimate_features(text: str) -> dict[str, int]:
    """Character-class counts of ``text`` (the estimate's inputs)."""
    raw = text.encode("utf-8", "surrogatepass")
    classes = raw.translate(_CLASS_TABLE)
    words = raw.translate(_WORD_TABLE)
    blanks = raw.translate(_BLANK_TABLE)
    cjk_punct = 0 if text.isascii() else raw.count(_CJK_PUNCT_LEAD)
    kana = classes.count(b"e") - cjk_punct
    return {
        "words": words.count(b"_a") + words.startswith(b"a"),
        "letters": classes.count(b"a"),
        "digits": classes.count(b"d"),
        "punct": classes.count(b"p"),
        "blank_runs": blanks.count(b"_a") + blanks.endswith(b"_"),
        "blank_chars": classes.count(b"_"),
        "newlines": raw.count(b"\n"),
        "han": classes.count(b"h"),
        "kana": kana,
        "other_letters": classes.count(b"x"),
        "other": classes.count(b"o") + cjk_punct,
    }


def fits_by_length(text: str, max_tokens: int) -> bool:
    """Whether ``text`` surely fits ``max_tokens`` by its length alone, uncounted.

    Args:
        text: Any text.
        max_tokens: The bound to check.

    Returns:
        True when no counter here can give ``text`` more than ``max_tokens``
        tokens; False means it has to be counted.
    """
    return len(text) * MAX_TOKENS_PER_CHAR <= max_tokens


def estimate_tokens(text: str) -> int:
    """Estimate the o200k token count of ``text`` without a tokenizer.

    A linear model over character classes (ASCII words, letters, digits,
    punctuation, whitespace runs, newlines, Han, kana, other scripts), fitted
    against exact o200k counts. Measured error is within ±10% on code, English
    prose, Chinese, Japanese, JSON and shell logs (docs/bench/tokens.md).

    Args:
        text: Any text.

    Returns:
        The estimated token count; 0 only for the empty string.
    """
    if not text:
        return 0
    f = _estimate_features(text)
    total = (
        EST_PER_WORD * f["words"]
        + EST_PER_ASCII_LETTER * f["letters"]
        + EST_PER_DIGIT * f["digits"]
        + EST_PER_PUNCT * f["punct"]
        + EST_PER_BLANK_RUN * f["blank_runs"]
        + EST_PER_BLANK_CHAR * f["blank_chars"]
        + EST_PER_NEWLINE * f["newlines"]
        + EST_PER_HAN * f["han"]
        + EST_PER_KANA * f["kana"]
        + EST_PER_OTHER_LETTER * f["other_letters"]
        + EST_PER_OTHER_CHAR * f["other"]
    )
    return max(1, round(total))


# --- exact tokenizers ----------------------------------------------------


def encoding_for_model(model: str) -> str | None:
    """Name of the OpenAI encoding a model uses, or None if it is not OpenAI's.

    Args:
        model: A model name, optionally with a ``provider/`` or ``openai:`` prefix or
            a ``[1m]``-style suffix.

    Returns:
        ``"o200k_base"``, ``"cl100k_base"`` or ``None``.
    """
    name = model.strip().lower().rsplit("/", 1)[-1].split("[", 1)[0]
    provider, sep, rest = name.partition(":")
    if sep and provider in ("openai", "azure_openai"):
        name = rest  # "openai:gpt-4o" is gpt-4o; "qwen2.5-coder:7b" keeps its tag
    if name.startswith(_O200K_PREFIXES):
        return ENCODING_O200K
    if name.startswith(_CL100K_PREFIXES):
        return ENCODING_CL100K
    return None


@cache
def _load_exact_tokenizer(encoding_name: str) -> Any:
    """The Rust tokenizer of bpe-openai for one encoding (tables are in the wheel).

    Raises:
        ImportError: bpe-openai (or its compiled backend) is not installed.
        Exception: whatever the backend raises for an unknown encoding.
    """
    # The binding's count() returns the length without building a token list
    # and has none of the wrapper's 1M-character / 200k-token limits.
    from agentgraph.private_api import bpe_tokenizer

    return bpe_tokenizer(encoding_name)


def _safe_exact(count: Callable[[str], int], text: str) -> int:
    try:
        return count(text)
    except UnicodeEncodeError:
        # Lone surrogates cannot reach the tokenizer; providers replace them too.
        return count(text.encode("utf-8", "replace").decode("utf-8"))


# --- the counter ---------------------------------------------------------


class _MessageRef(weakref.ref["BaseMessage"]):
    """A weak reference that remembers the id it is filed under (one allocation)."""

    __slots__ = ("oid",)
    oid: int


_ObjEntry = tuple[_MessageRef, object, object, object, int]


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _fingerprint(value: object) -> tuple[int, int]:
    """Length and hash: collision-safe enough to key a cache, and cheap."""
    text = value if isinstance(value, str) else _json(value)
    # str caches its hash, so a message seen before hashes in O(1).
    return len(text), hash(text)


class TokenCounter:
    """Counts the tokens of the prompt a model will see, incrementally.

    Messages are counted in OpenAI's chat format (role, content, name, tool
    calls with their names, ids and JSON arguments, tool-call ids, plus
    per-message overhead and reply priming). Counts are cached two ways:

    * by object identity, verified through a weak reference and the identity
      of ``content``/``tool_calls``/``name`` — an O(1) check for a message
      seen before;
    * by ``(type, id, name, length + hash of content and tool calls)`` — so a
      fresh copy of a known message (e.g. reloaded from a checkpoint) costs a
      hash, and an edited message (same id, new content) is recounted.

    Messages are treated as values: replace a message to edit it (as
    ``add_messages`` does) rather than mutating nested lists in place.

    Attributes:
        model: The model name the counter was built for.
        encoding_name: ``"o200k_base"``/``"cl100k_base"`` when counting is
            exact, else ``None``.
        source: ``"exact"`` or ``"estimate"``.
        notice: One line explaining why counts are estimates, else ``None``.
    """

    def __init__(self, model: str) -> None:
        """Build a counter; never touches the network.

        Args:
            model: Model name, e.g. ``"gpt-4o"`` or ``"claude-sonnet-4-5"``.
        """
        self.model = model
        self.encoding_name: str | None = None
        self.source: CountSource = "estimate"
        self.notice: str | None = None
        self._count: Callable[[str], int] = estimate_tokens
        self._tokenizer: Any = None
        wanted = encoding_for_model(model)
        if wanted is None:
            self.notice = (
                f"no offline tokenizer for {model!r}: token counts are estimates "
                "(calibrated, about ±10%)"
            )
        else:
            try:
                tokenizer = _load_exact_tokenizer(wanted)
            except Exception as err:  # any failure must degrade, not crash the agent
                self.notice = (
                    f"{wanted} tokenizer unavailable ({type(err).__name__}): "
                    "token counts are estimates"
                )
            else:
                self.encoding_name = wanted
                self.source = "exact"
                self._tokenizer = tokenizer
                self._count = partial(_safe_exact, tokenizer.count)
        self._by_object: dict[int, _ObjEntry] = {}
        self._forget_cb = self._forget
        self._by_key: OrderedDict[Hashable, int] = OrderedDict()
        self._tools: OrderedDict[Hashable, int] = OrderedDict()
        self._tool_json: dict[int, tuple[BaseTool, str]] = {}
        # (the tools of the last count_tools call, their tokens); replaced whole, so a
        # reader in another thread sees one consistent pair.
        self._tools_memo: tuple[tuple[BaseTool | Mapping[str, Any], ...], int] | None = None
        self._roles: dict[str, int] = {}
        # text -> count, least recently used first; _text_chars is the sum of the keys'
        # lengths. Locked: subagents count in other threads.
        self._texts: OrderedDict[str, int] = OrderedDict()
        self._text_chars = 0
        self._texts_lock = threading.Lock()
        self.texts_counted = 0  # texts sent to the tokenizer/estimate (for tests, benches)

    def __repr__(self) -> str:
        return f"TokenCounter(model={self.model!r}, source={self.source!r})"

    def count_text(self, text: str) -> int:
        """Tokens of a bare string (no message overhead).

        Args:
            text: Any text.

        Returns:
            The exact count, or the estimate when ``source == "estimate"``.
        """
        if not text:
            return 0
        size = len(text)
        if size > TEXT_CACHE_MAX_TEXT_CHARS:
            self.texts_counted += 1
            return self._count(text)
        texts = self._texts
        with self._texts_lock:
            known = texts.get(text)
            if known is not None:
                texts.move_to_end(text)
                return known
        self.texts_counted += 1
        count = self._count(text)
        self._remember(text, count)
        return count

    def _remember(self, text: str, count: int) -> None:
        if len(text) > TEXT_CACHE_MAX_TEXT_CHARS:
            return
        texts = self._texts
        with self._texts_lock:
            if text not in texts:
                texts[text] = count
                self._text_chars += len(text)
                while (
                    len(texts) > TEXT_CACHE_MAX_ENTRIES or self._text_chars > TEXT_CACHE_MAX_CHARS
                ):
                    old, _ = texts.popitem(last=False)
                    self._text_chars -= len(old)

    def fits(self, text: str, max_tokens: int) -> bool:
        """Whether ``text`` has at most ``max_tokens`` tokens, counting no further.

        A text far over the bound (a 60 KB tool output against a 1,000-token cap) is
        known to be over after ``max_tokens`` tokens, not counted whole.

        Args:
            text: Any text.
            max_tokens: The bound to check.

        Returns:
            ``count_text(text) <= max_tokens``.
        """
        if max_tokens < 0:  # the bounded count takes no negative bound
            return False
        if fits_by_length(text, max_tokens):
            return True
        with self._texts_lock:
            known = self._texts.get(text)
            if known is not None:
                self._texts.move_to_end(text)
        if known is not None:
            return known <= max_tokens
        if self._tokenizer is None:
            return self.count_text(text) <= max_tokens
        self.texts_counted += 1
        try:
            counted: int | None = self._tokenizer.count_till_limit(text, max_tokens)
        except UnicodeEncodeError:
            return self.count_text(text) <= max_tokens
        if counted is None:
            return False
        # A text that fits is usually counted again soon (as a message's content).
        self._remember(text, counted)
        return True

    @property
    def codec(self) -> TokenCodec | None:
        """The exact tokenizer's ``encode``/``decode`` (None for estimates), for cuts
        at token offsets (:func:`agentgraph.context.truncation.truncate_text`)."""
        codec: TokenCodec | None = self._tokenizer
        return codec

    def _role_tokens(self, role: str) -> int:
        known = self._roles.get(role)
        if known is None:
            known = self._roles[role] = self.count_text(role)
        return known

    def _content_tokens(self, content: object, skip_ids: set[str]) -> int:
        if isinstance(content, str):
            return self.count_text(content)
        if not isinstance(content, list):
            return self.count_text(_json(content))
        total = 0
        for block in content:
            if isinstance(block, str):
                total += self.count_text(block)
            elif not isinstance(block, Mapping):
                total += self.count_text(_json(block))
            elif block.get("type") == "text" and isinstance(block.get("text"), str):
                total += self.count_text(block["text"])
            elif block.get("type") in ("image", "image_url"):
                total += IMAGE_BLOCK_TOKENS
            elif block.get("type") == "tool_use":
                if isinstance(block.get("id"), str):
                    skip_ids.add(block["id"])
                total += TOOL_CALL_OVERHEAD_TOKENS + self.count_text(str(block.get("name", "")))
                total += self.count_text(_json(block.get("input", {})))
            else:
                total += self.count_text(_json(block))
        return total

    def _compute(self, msg: BaseMessage) -> int:
        role = msg.role if isinstance(msg, ChatMessage) else _ROLE_BY_TYPE.get(msg.type, msg.type)
        total = MESSAGE_OVERHEAD_TOKENS + self._role_tokens(role)
        # Anthropic-style content repeats tool calls as tool_use blocks.
        in_content: set[str] = set()
        total += self._content_tokens(msg.content, in_content)
        if msg.name:
            total += NAME_OVERHEAD_TOKENS + self.count_text(msg.name)
        if isinstance(msg, AIMessage):
            for call in msg.tool_calls:
                if call.get("id") in in_content:
                    continue
                total += TOOL_CALL_OVERHEAD_TOKENS + self.count_text(call["name"])
                total += self.count_text(_json(call["args"])) + self.count_text(call["id"] or "")
            for bad in msg.invalid_tool_calls:
                total += TOOL_CALL_OVERHEAD_TOKENS + self.count_text(bad.get("name") or "")
                total += self.count_text(bad.get("args") or "")
                total += self.count_text(bad.get("id") or "")
        elif isinstance(msg, ToolMessage):
            total += self.count_text(msg.tool_call_id)
        return total

    def _key(self, msg: BaseMessage) -> Hashable:
        calls: object = None
        if isinstance(msg, AIMessage) and (msg.tool_calls or msg.invalid_tool_calls):
            # repr is a C-level walk, several times cheaper than json.dumps, and
            # just as discriminating for a fingerprint.
            text = repr((msg.tool_calls, msg.invalid_tool_calls))
            calls = (len(text), hash(text))
        extra = msg.tool_call_id if isinstance(msg, ToolMessage) else None
        role = msg.role if isinstance(msg, ChatMessage) else None
        return (msg.type, role, msg.id, msg.name, extra, _fingerprint(msg.content), calls)

    def _forget(self, ref: _MessageRef) -> None:
        entry = self._by_object.get(ref.oid)
        if entry is not None and entry[0] is ref:
            del self._by_object[ref.oid]

    def count_message(self, msg: BaseMessage) -> int:
        """Tokens one message adds to the prompt, overhead included (cached).

        Args:
            msg: Any LangChain message.

        Returns:
            Its token count in the chat format.
        """
        oid = id(msg)
        entry = self._by_object.get(oid)
        # getattr with a default is slow on pydantic models lacking the field.
        tool_calls = msg.tool_calls if isinstance(msg, AIMessage) else None
        if (
            entry is not None
            and entry[0]() is msg
            and entry[1] is msg.content
            and entry[2] is tool_calls
            and entry[3] is msg.name
        ):
            return entry[4]
        key = self._key(msg)
        count = self._by_key.get(key)
        if count is None:
            count = self._compute(msg)
            self._by_key[key] = count
            if len(self._by_key) > TOKEN_CACHE_MAX_ENTRIES:
                self._by_key.popitem(last=False)
        else:
            self._by_key.move_to_end(key)
        ref = _MessageRef(msg, self._forget_cb)
        ref.oid = oid
        self._by_object[oid] = (ref, msg.content, tool_calls, msg.name, count)
        if len(self._by_object) > TOKEN_CACHE_MAX_ENTRIES:
            del self._by_object[next(iter(self._by_object))]
        return count

    def count_messages(self, msgs: Sequence[BaseMessage]) -> int:
        """Tokens of a whole prompt's messages, including reply priming.

        Args:
            msgs: The messages in prompt order (system messages included if
                they are part of the prompt).

        Returns:
            Sum of :meth:`count_message` plus ``REPLY_PRIMING_TOKENS``.
        """
        count = self.count_message
        return sum(map(count, msgs)) + REPLY_PRIMING_TOKENS

    __call__ = count_messages

    def _tool_schema_json(self, tool: BaseTool | Mapping[str, Any]) -> str:
        if isinstance(tool, BaseTool):
            known = self._tool_json.get(id(tool))
            if known is not None and known[0] is tool:
                return known[1]
            text = _json(convert_to_openai_tool(tool))
            if len(self._tool_json) >= TOOL_CACHE_MAX_ENTRIES:
                self._tool_json.clear()
            self._tool_json[id(tool)] = (tool, text)
            return text
        return _json(convert_to_openai_tool(dict(tool)))

    def count_tools(self, tools: Sequence[BaseTool | dict[str, Any]]) -> int:
        """Tokens the tool schemas add to a request: by OpenAI's published formula for
        an OpenAI tokenizer, else their JSON text.

        OpenAI does not send the JSON schema to the model: it renders each function
        as a short TypeScript-like declaration in the system message. Its cookbook
        ("How to count tokens with tiktoken") gives the cost: per function a fixed
        overhead plus ``name:description``, per parameter ``name:type:description``
        (a trailing period dropped), enum values, and a fixed end once per request.
        Counting the JSON text instead over-counts by about half again
        (docs/bench/tokens.md). The chat templates of open models (Qwen, Llama,
        Mistral, Hermes) put each schema's JSON in the prompt whole, so an estimating
        counter counts that: by OpenAI's formula agentgraph's tool schemas came to half
        of what a local Qwen2.5 server counted, and the provider/estimate ratio taken
        from the first request (1.9 instead of 1.17) then scaled every file read after
        it, compacting a prompt that fit.

        Args:
            tools: LangChain tools or tool schemas in any format
                ``convert_to_openai_tool`` accepts.

        Returns:
            The request's tool tokens (0 without tools).
        """
        if not tools:
            return 0
        # Every model call counts the same tools several times (the fixed part of the
        # prompt, the view, the compaction check): the last list is remembered by the
        # identity of its tools, as their schemas are (a tool is treated as a value).
        memo = self._tools_memo
        if (
            memo is not None
            and len(memo[0]) == len(tools)
            and all(a is b for a, b in zip(memo[0], tools, strict=True))
        ):
            return memo[1]
        total = TOOLS_END_TOKENS
        for tool in tools:
            text = self._tool_schema_json(tool)
            key = (len(text), hash(text))
            count = self._tools.get(key)
            if count is None:
                count = self._tools[key] = (
                    self.count_text(text)
                    if self.source == "estimate"
                    else self._function_tokens(json.loads(text))
                )
                if len(self._tools) > TOOL_CACHE_MAX_ENTRIES:
                    self._tools.popitem(last=False)
            total += count
        if all(isinstance(tool, BaseTool) for tool in tools):
            # Schemas given as dicts may be edited in place: only tools are remembered.
            self._tools_memo = (tuple(tools), total)
        return total

    def _function_tokens(self, schema: Mapping[str, Any]) -> int:
        function = schema.get("function", schema)
        init = (
            FUNCTION_INIT_TOKENS_CL100K
            if self.encoding_name == ENCODING_CL100K
            else FUNCTION_INIT_TOKENS
        )
        name = str(function.get("name", ""))
        total = init + self.count_text(f"{name}:{_no_period(function.get('description'))}")
        params = function.get("parameters") or {}
        properties = params.get("properties") if isinstance(params, Mapping) else None
        if not isinstance(properties, Mapping) or not properties:
            return total
        total += PROPERTIES_INIT_TOKENS
        for key, prop in properties.items():
            prop = prop if isinstance(prop, Mapping) else {}
            total += PROPERTY_KEY_TOKENS
            enum = prop.get("enum")
            if isinstance(enum, list):
                total += ENUM_INIT_TOKENS
                for item in enum:
                    total += ENUM_ITEM_TOKENS + self.count_text(str(item))
            kind = prop.get("type")
            # The cookbook covers scalar parameters; arrays, objects and unions are
            # rendered as OpenAI renders them (their structure costs tokens too).
            scalar = isinstance(kind, str) and kind not in ("array", "object")
            type_text = kind if scalar else _type_text(prop)
            line = f"{key}:{type_text}:{_no_period(prop.get('description'))}"
            total += self.count_text(line)
        return max(total, 0)


def _no_period(text: object) -> str:
    value = text if isinstance(text, str) else ""
    return value[:-1] if value.endswith(".") else value


def _type_text(schema: Mapping[str, Any], depth: int = 0) -> str:
    """A TypeScript-like rendering of a JSON schema, as OpenAI shows it to the model.

    Used for parameters the cookbook formula does not cover (unions, arrays,
    nested objects): their structure costs tokens too.
    """
    if depth > TYPE_TEXT_MAX_DEPTH:
        return "any"
    if "enum" in schema and isinstance(schema["enum"], list):
        return " | ".join(_json(v) for v in schema["enum"])
    for union in ("anyOf", "oneOf"):
        options = schema.get(union)
        if isinstance(options, list):
            return " | ".join(
                _type_text(o, depth + 1) if isinstance(o, Mapping) else "any" for o in options
            )
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(_TS_TYPES.get(str(k), str(k)) for k in kind)
    if kind == "array":
        items = schema.get("items")
        inner = _type_text(items, depth + 1) if isinstance(items, Mapping) else "any"
        return f"{inner}[]"
    if kind == "object" or "properties" in schema:
        props = schema.get("properties")
        if not isinstance(props, Mapping) or not props:
            return "object"
        required = set(schema.get("required") or ())
        fields = []
        for key, value in props.items():
            sub = value if isinstance(value, Mapping) else {}
            note = sub.get("description")
            comment = f"// {note}\n" if isinstance(note, str) and note else ""
            optional = "" if key in required else "?"
            fields.append(f"{comment}{key}{optional}: {_type_text(sub, depth + 1)},")
        return "{\n" + "\n".join(fields) + "\n}"
    return _TS_TYPES.get(str(kind), "any")


_COUNTERS: OrderedDict[str, TokenCounter] = OrderedDict()


def get_counter(model: str) -> TokenCounter:
    """The process-wide counter for ``model`` (one cache per model).

    Args:
        model: Model name.

    Returns:
        A shared :class:`TokenCounter`.
    """
    counter = _COUNTERS.get(model)
    if counter is None:
        counter = _COUNTERS[model] = TokenCounter(model)
        if len(_COUNTERS) > COUNTER_REGISTRY_MAX_MODELS:
            _COUNTERS.popitem(last=False)
    return counter


def reported_prompt_tokens(usage: Mapping[str, Any]) -> int:
    """The prompt tokens one response reports; input already includes cached tokens.

    LangChain's ``input_tokens`` is the sum of all input types, with
    ``input_token_details`` a breakdown — adding cache read/creation again
    would double count. A provider adapter that reports only uncached input
    is caught by taking at least the cached parts.

    Args:
        usage: A message's ``usage_metadata``.

    Returns:
        The prompt's tokens as the provider counted them (0 when not reported).
    """
    details = usage.get("input_token_details") or {}
    cached = int(details.get("cache_read") or 0) + int(details.get("cache_creation") or 0)
    return max(int(usage.get("input_tokens") or 0), cached)


def _reported_total(usage: Mapping[str, Any]) -> int:
    """input + output of one response (see :func:`reported_prompt_tokens`)."""
    return reported_prompt_tokens(usage) + int(usage.get("output_tokens") or 0)


def estimate_scale(reported: int, ours: int) -> float | None:
    """How much more a provider counted a prompt than our count ``ours`` of it.

    Args:
        reported: The provider's count of the prompt.
        ours: Our count of the same prompt.

    Returns:
        None when the two differ by more than ``ANCHOR_MAX_DEVIATION_RATIO`` (the report
        is not of that prompt: a stale anchor); else ``reported / ours`` within
        ``[1, ESTIMATE_SCALE_MAX]`` (a provider counting less scales nothing).
    """
    if abs(reported - ours) > ANCHOR_MAX_DEVIATION_RATIO * max(ours, reported):
        return None
    return min(max(reported / ours, 1.0), ESTIMATE_SCALE_MAX) if ours > 0 else 1.0


def _anchor(
    messages: Sequence[BaseMessage],
    counter: TokenCounter,
    fixed_tokens: int | None,
    unanchored: int | None,
) -> tuple[int, int, float] | None:
    """``(reported, tokens after the anchor, their scale)`` of the last trusted anchor."""
    for index in range(len(messages) - 1, -1, -1):
        msg = messages[index]
        if isinstance(msg, AIMessage) and msg.usage_metadata:
            reported = _reported_total(msg.usage_metadata)
            if reported <= 0:
                return None
            after = sum(map(counter.count_message, messages[index + 1 :]))
            scale = 1.0
            if fixed_tokens is not None:
                if unanchored is not None:
                    ours = unanchored - after
                else:
                    ours = fixed_tokens + counter.count_messages(messages[: index + 1])
                trusted = estimate_scale(reported, ours)
                if trusted is None:
                    return None
                if counter.source == "estimate":
                    scale = trusted
            return reported, after, scale
    return None


def anchored_prompt_tokens(
    messages: Sequence[BaseMessage],
    counter: TokenCounter,
    *,
    fixed_tokens: int | None = None,
    unanchored: int | None = None,
    carried_scale: float = 1.0,
) -> tuple[int, Literal["reported", "exact", "estimate"]]:
    """Prompt size anchored on the provider's last reported usage.

    The last AIMessage with ``usage_metadata`` reports input (system prompt,
    tools and every message before it, cached parts included) plus its own
    output; messages after it are counted with ``counter`` (Claude Code's
    method). Without usage, everything is counted. When the counter estimates (no
    offline tokenizer for the model) and the provider counted the anchored prefix
    higher than we do, the messages after it are scaled up by that ratio: the estimate
    would undercount them the same way, and compaction would come too late. Without an
    anchor (just after a compaction, which drops the old replies' usage) an estimate is
    scaled by ``carried_scale``, the ratio the compaction saw.

    Args:
        messages: The conversation as sent (system prompt and tool schemas
            are inside the reported input, so they need not be here).
        counter: Counter for the messages after the anchor.
        fixed_tokens: Tokens of system prompt + tool schemas, when known.
            Enables a sanity check: an anchor that disagrees with our own
            count of the same prefix by more than ``ANCHOR_MAX_DEVIATION_RATIO``
            (e.g. a pre-compaction response kept in the history) is ignored.
        unanchored: ``(fixed_tokens or 0) + counter.count_messages(messages)``, when
            the caller already has it (the messages are not counted again).
        carried_scale: Provider/estimate ratio for an unanchored estimate (see
            :func:`agentgraph.context.compaction.carried_scale`); at most
            ``ESTIMATE_SCALE_MAX``, ignored for exact counts.

    Returns:
        ``(tokens, source)``; source is ``"reported"`` when anchored, else
        ``counter.source``. Unanchored totals include ``fixed_tokens``.
    """
    anchor = _anchor(messages, counter, fixed_tokens, unanchored)
    if anchor is not None:
        reported, after, scale = anchor
        return reported + (math.ceil(after * scale) if scale != 1.0 else after), "reported"
    total = unanchored
    if total is None:
        total = (fixed_tokens or 0) + counter.count_messages(messages)
    if counter.source == "estimate" and carried_scale > 1.0:
        total = math.ceil(total * min(carried_scale, ESTIMATE_SCALE_MAX))
    return total, counter.source
