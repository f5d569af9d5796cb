"""Cut oversized text (tool outputs above all) to a token budget, keeping head and tail.

Codex-style: the start and the end of an output carry the most meaning (the command
and its first results, the final lines and the error), so the middle goes and a
marker line ``…N tokens truncated…`` takes its place. The cut is kind-aware: code
keeps more head (imports, signatures), listings are cut between whole lines.

Speed matters because a tool can print 50 MB: the input is counted once, cut points
are found from the chars-per-token ratio and refined by counting only the kept
pieces (a bounded number of times), and the assembled result is verified with one
more count, so the bound ``count(result.text) <= max_tokens`` always holds.

With an exact tokenizer (a :class:`TokenCodec`) the input is never tokenized whole:
whether it fits is counted only up to the bound, the head and the tail are cut at token
offsets of a stretch encoded at each end, and the marker's N is the middle's quick
estimate scaled by exact counts of a few slices of it (a short middle is counted).
``bench/bench_cuts.py`` measures both paths and the marker's error (docs/bench/cuts.md).
"""

from __future__ import annotations

import math
import re
import statistics
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from langchain_core.messages import BaseMessage, ToolMessage

from agentgraph.context.tokens import MAX_TOKENS_PER_CHAR

TokenCounter = Callable[[str], int]


class TokenCodec(Protocol):
    """An exact tokenizer: the token counter's own, with ``encode`` and ``decode``.

    ``decode`` is only ever given ids ``encode`` returned (bpe-openai's binding panics
    or crashes on ids outside its table).
    """

    def count(self, text: str) -> int:
        """The tokens of ``text``."""
        ...

    def count_till_limit(self, text: str, limit: int) -> int | None:
        """The tokens of ``text`` if at most ``limit``, else None (counting no further)."""
        ...

    def encode(self, text: str) -> Sequence[int]:
        """Token ids of ``text``."""
        ...

    def decode(self, tokens: Sequence[int]) -> str:
        """The text of ``tokens``; raises ``ValueError`` when they end inside a character."""
        ...


TruncationKind = Literal["auto", "code", "listing", "text"]

TRUNCATION_MARKER_TEMPLATE = "\n…{n} tokens truncated…{suffix}\n"
ARTIFACT_POINTER_TEMPLATE = " full output: {path} — page through it with read_file(offset, limit)"

TOOL_OUTPUT_BUDGET_FRACTION = 0.1
TOOL_OUTPUT_MIN_TOKENS = 1_000
TOOL_OUTPUT_MAX_TOKENS_CAP = 25_000

# Head share of the kept tokens per kind: code's head holds imports and signatures,
# a listing's head the first entries; plain text is symmetric (Codex).
HEAD_RATIO_TEXT = 0.5
HEAD_RATIO_CODE = 0.7
HEAD_RATIO_LISTING = 0.6

# A newline this close to a cut point (as a fraction of the kept piece) is preferred.
NEWLINE_SNAP_FRACTION = 0.1
# Kind detection looks at this many leading characters only (50 MB inputs).
DETECT_SAMPLE_CHARS = 20_000
DETECT_MIN_LINES = 5
CODE_LINE_FRACTION = 0.5
LISTING_MIN_LINES = 50
LISTING_MEDIAN_LINE_CHARS = 120

# Bounds on the refinement loops: each iteration counts a piece no larger than the
# budget, never the whole input.
FIT_MAX_ITERATIONS = 12
FIT_SLACK_FRACTION = 0.02
ASSEMBLE_MAX_ATTEMPTS = 4
# A caller's counter sees at most this many chars at once: exact tokenizers refuse or
# balloon on huge inputs (bpe-openai raises at 1M chars); chunk sums differ from the
# whole by about a token per chunk.
COUNT_CHUNK_CHARS = 500_000
GRAPHEME_ADJUST_MAX_CHARS = 32
# With a codec the removed middle is never tokenized: its quick estimate is scaled by
# how the exact count compares with the estimate on this many slices of it, of this
# many chars each, within MIDDLE_SCALE_MAX either way.
MIDDLE_SAMPLES = 4
MIDDLE_SAMPLE_CHARS = 250
MIDDLE_SCALE_MAX = 4.0
# Token offsets tried, one by one, for a piece that ends (or starts) inside a
# character: cl100k has runs of 4 undecodable offsets among rare 4-byte characters.
DECODE_MAX_BACKOFF_TOKENS = 16
# A cut at token offsets encodes this many times the chars the budget should take at
# the text's mean density, at each end (doubled until it holds the budget).
ENCODE_STRETCH_FACTOR = 1.25

# Quick estimate weights, by UTF-8 length class: ASCII ~4 chars/token, 2-byte
# scripts (Cyrillic, Greek, accented Latin) ~2 chars/token, 3-byte (CJK, kana,
# hangul, most symbols) ~1 token/char, 4-byte (emoji) ~2 tokens/char.
ESTIMATE_TOKENS_PER_ASCII_CHAR = 0.25
ESTIMATE_TOKENS_PER_2BYTE_CHAR = 0.5
ESTIMATE_TOKENS_PER_3BYTE_CHAR = 1.0
ESTIMATE_TOKENS_PER_4BYTE_CHAR = 2.0

_ALL_BYTES = bytes(range(256))
_NOT_CONTINUATION = bytes(b for b in range(256) if not 0x80 <= b <= 0xBF)
_NOT_LEAD3 = bytes(b for b in range(256) if not 0xE0 <= b <= 0xEF)
_NOT_LEAD4 = bytes(b for b in range(256) if not 0xF0 <= b <= 0xF7)

_ZWJ = "\u200d"
_CODE_START_RE = re.compile(
    r"(?:(?:def|class|import|from|return|if|elif|else|for|while|try|except|finally|with|"
    r"function|const|let|var|export|public|private|protected|static|fn|pub|impl|use|"
    r"struct|enum|package|func)\b|#include\b|#define\b|@\w+|//|/\*|\*\s)"
)
_CODE_END_CHARS = ("{", "}", ";", "(", "[", "=>", "->")
# grep/ripgrep hits ("path:12:" or "path-12-") quote code but are a listing.
_GREP_HIT_RE = re.compile(r"[\w./\\-]+[:-]\d+[:-]")
_EXISTING_MARKER_RE = re.compile(r"\n…(\d+) tokens truncated…([^\n]*)\n")
_EXISTING_MARKER_PROBE = " tokens truncated…"


@dataclass(frozen=True)
class Truncated:
    """Outcome of a truncation.

    Attributes:
        text: The result; the input itself when nothing was cut.
        truncated: Whether anything was removed.
        original_tokens: Tokens in the input, by the counter used; with a codec,
            ``kept_tokens`` plus the estimated middle (it is never tokenized whole).
        kept_tokens: Tokens of the input kept (head + tail, marker excluded).
        removed_tokens: ``original_tokens - kept_tokens`` (never negative): what the
            marker reports.
    """

    text: str
    truncated: bool
    original_tokens: int
    kept_tokens: int
    removed_tokens: int


def _estimate(text: str) -> int:
    """CJK-aware quick token estimate; linear, C-speed passes only.

    The lead replaces this with ``agentgraph.context.tokens.estimate_tokens`` or an
    exact counter by passing ``count=``.
    """
    if not text:
        return 0
    n_chars = len(text)
    if text.isascii():
        return math.ceil(n_chars * ESTIMATE_TOKENS_PER_ASCII_CHAR)
    raw = text.encode("utf-8", "surrogatepass")
    continuation = len(raw.translate(_ALL_BYTES, _NOT_CONTINUATION))
    lead3 = len(raw.translate(_ALL_BYTES, _NOT_LEAD3))
    lead4 = len(raw.translate(_ALL_BYTES, _NOT_LEAD4))
    # A 2-byte char has one continuation byte, 3-byte two, 4-byte three.
    lead2 = continuation - 2 * lead3 - 3 * lead4
    ascii_chars = n_chars - lead2 - lead3 - lead4
    return math.ceil(
        ascii_chars * ESTIMATE_TOKENS_PER_ASCII_CHAR
        + lead2 * ESTIMATE_TOKENS_PER_2BYTE_CHAR
        + lead3 * ESTIMATE_TOKENS_PER_3BYTE_CHAR
        + lead4 * ESTIMATE_TOKENS_PER_4BYTE_CHAR
    )


def _chunked(count: TokenCounter) -> TokenCounter:
    """``count`` applied to ``COUNT_CHUNK_CHARS`` slices and summed for long texts."""

    def counted(text: str) -> int:
        if len(text) <= COUNT_CHUNK_CHARS:
            return count(text)
        return sum(
            count(text[start : start + COUNT_CHUNK_CHARS])
            for start in range(0, len(text), COUNT_CHUNK_CHARS)
        )

    return counted


def default_tool_output_max_tokens(usable_budget_tokens: int) -> int:
    """Per-output cap: a tenth of the usable budget, within [1,000, 25,000] tokens.

    Args:
        usable_budget_tokens: Input tokens the model may be sent.

    Returns:
        The maximum tokens one tool output may occupy in the history.
    """
    share = int(usable_budget_tokens * TOOL_OUTPUT_BUDGET_FRACTION)
    return max(TOOL_OUTPUT_MIN_TOKENS, min(TOOL_OUTPUT_MAX_TOKENS_CAP, share))


def detect_kind(text: str) -> Literal["code", "listing", "text"]:
    """Guess whether ``text`` is code, a line listing, or prose, from a leading sample.

    Args:
        text: Any text; only the first ``DETECT_SAMPLE_CHARS`` are inspected.

    Returns:
        ``"code"``, ``"listing"`` or ``"text"``.
    """
    sample = text[:DETECT_SAMPLE_CHARS]
    lines = sample.split("\n")
    if len(text) > DETECT_SAMPLE_CHARS and len(lines) > 1:
        lines = lines[:-1]  # the last sampled line is probably partial
    nonempty = [line for line in lines if line.strip()]
    if len(nonempty) < DETECT_MIN_LINES:
        return "text"
    code_like = sum(1 for line in nonempty if _looks_like_code(line))
    if code_like >= CODE_LINE_FRACTION * len(nonempty):
        return "code"
    total_lines = text.count("\n") + 1
    median_chars = statistics.median(len(line) for line in nonempty)
    if total_lines > LISTING_MIN_LINES and median_chars < LISTING_MEDIAN_LINE_CHARS:
        return "listing"
    return "text"


def _looks_like_code(line: str) -> bool:
    if _GREP_HIT_RE.match(line):
        return False
    if line[:1] in (" ", "\t"):
        return True
    stripped = line.strip()
    return stripped.endswith(_CODE_END_CHARS) or _CODE_START_RE.match(stripped) is not None


def _marker(removed_tokens: int, suffix: str) -> str:
    return TRUNCATION_MARKER_TEMPLATE.format(n=removed_tokens, suffix=suffix)


def _fit_length(
    piece: Callable[[int], str],
    n_chars: int,
    budget: int,
    count: TokenCounter,
    chars_per_token: float,
) -> tuple[int, int]:
    """Largest-ish length ``k`` with ``count(piece(k)) <= budget``; returns (k, tokens).

    Proportional steps from the chars-per-token ratio, bisection when they stall;
    never more than ``FIT_MAX_ITERATIONS`` counts, each on at most ~budget tokens.
    """
    if budget <= 0 or n_chars == 0:
        return 0, 0
    lo, lo_tokens = 0, 0
    hi = n_chars + 1  # smallest length known to exceed the budget
    guess = min(n_chars, max(1, int(budget * chars_per_token)))
    target = budget * (1 - FIT_SLACK_FRACTION)
    for _ in range(FIT_MAX_ITERATIONS):
        tokens = count(piece(guess))
        if tokens <= budget:
            lo, lo_tokens = guess, tokens
            if guess == n_chars or tokens >= target:
                break
        else:
            hi = guess
        if hi - lo <= 1:
            break
        # Aim a little under the budget so the next guess tends to land inside it.
        proposal = int(guess * target / max(tokens, 1))
        if lo < proposal < hi:
            guess = proposal
        elif hi > n_chars:
            guess = n_chars if proposal >= hi else (lo + n_chars + 1) // 2
        else:
            guess = (lo + hi) // 2
        if guess <= lo:
            guess = lo + 1
        if guess >= hi:
            break
    return lo, lo_tokens


# (head_budget, tail_budget) -> (chars of head, chars of tail) each within its budget.
_Bounds = Callable[[int, int], tuple[int, int]]


def _fitted_bounds(text: str, count: TokenCounter, chars_per_token: float) -> _Bounds:
    n_chars = len(text)

    def bounds(head_budget: int, tail_budget: int) -> tuple[int, int]:
        head_end, _ = _fit_length(lambda k: text[:k], n_chars, head_budget, count, chars_per_token)
        tail_len, _ = _fit_length(
            lambda k: text[n_chars - k :], n_chars, tail_budget, count, chars_per_token
        )
        return head_end, tail_len

    return bounds


def _decoded(
    ids: Sequence[int], start: int, stop: int, *, at_end: bool, codec: TokenCodec
) -> str | None:
    """``decode(ids[start:stop])``, moving ``start`` (``at_end``) or ``stop`` off a
    split character; None when no offset nearby decodes."""
    for _ in range(DECODE_MAX_BACKOFF_TOKENS):
        if start >= stop:
            return ""
        try:
            return codec.decode(ids[start:stop])
        except ValueError:
            if at_end:
                start += 1
            else:
                stop -= 1
    return None


def _token_bounds(
    text: str, codec: TokenCodec, chars_per_token: float, fallback: _Bounds
) -> _Bounds:
    """Head and tail cut at token offsets of an encoded stretch at each end.

    Only a stretch a little longer than the budget is encoded, at each end: its
    first (last) tokens are those of the whole text but near its far end, which is
    not kept.
    """
    n_chars = len(text)

    def stretch(budget: int, at_end: bool) -> str | None:
        if budget <= 0:
            return ""
        span = min(n_chars, int(budget * chars_per_token * ENCODE_STRETCH_FACTOR) + 64)
        while True:
            piece = text[n_chars - span :] if at_end else text[:span]
            ids = codec.encode(piece)
            if len(ids) > budget or span >= n_chars:
                n_ids = len(ids)
                start, stop = (max(n_ids - budget, 0), n_ids) if at_end else (0, min(budget, n_ids))
                return _decoded(ids, start, stop, at_end=at_end, codec=codec)
            span = min(n_chars, span * 2)

    def bounds(head_budget: int, tail_budget: int) -> tuple[int, int]:
        try:
            head = stretch(head_budget, at_end=False)
            tail = stretch(tail_budget, at_end=True)
        except ValueError:
            # Lone surrogates cannot be encoded (UnicodeEncodeError); the counter copes.
            return fallback(head_budget, tail_budget)
        # Byte-level BPE decodes a run of ids to a slice of the text; anything else
        # (a tokenizer that normalizes, no offset that decodes) is cut by fitting.
        if head is None or tail is None or not (text.startswith(head) and text.endswith(tail)):
            return fallback(head_budget, tail_budget)
        return len(head), len(tail)

    return bounds


def _is_extender(ch: str) -> bool:
    """A char that belongs to the previous one (combining mark, selector, modifier)."""
    code = ord(ch)
    if 0xFE00 <= code <= 0xFE0F or 0x1F3FB <= code <= 0x1F3FF or 0xDC00 <= code <= 0xDFFF:
        return True
    return unicodedata.combining(ch) != 0 or unicodedata.category(ch) in ("Mn", "Me", "Mc")


def _safe_head_end(text: str, end: int) -> int:
    """Move a head cut left so it does not split a grapheme-like sequence."""
    start = end
    while 0 < end < len(text) and start - end < GRAPHEME_ADJUST_MAX_CHARS:
        if _is_extender(text[end]) or text[end - 1] == _ZWJ:
            end -= 1
        else:
            break
    return end


def _safe_tail_start(text: str, start: int) -> int:
    """Move a tail cut right so it does not start inside a grapheme-like sequence."""
    origin = start
    while 0 < start < len(text) and start - origin < GRAPHEME_ADJUST_MAX_CHARS:
        if _is_extender(text[start]) or text[start - 1] == _ZWJ:
            start += 1
        else:
            break
    return start


def _snap_head(text: str, end: int, whole_lines: bool) -> int:
    """Head cut at a line end when possible; the marker's leading newline replaces it."""
    if end <= 0 or end >= len(text) or text[end] == "\n":
        return end
    if whole_lines:
        newline = text.rfind("\n", 0, end)
        return max(newline, 0)
    window = max(1, int(end * NEWLINE_SNAP_FRACTION))
    newline = text.rfind("\n", max(0, end - window), end)
    if newline >= 0:
        return newline
    return _safe_head_end(text, end)


def _snap_tail(text: str, start: int, whole_lines: bool) -> int:
    """Tail cut at a line start when possible."""
    n_chars = len(text)
    if start <= 0 or start >= n_chars or text[start - 1] == "\n":
        return start
    if whole_lines:
        newline = text.find("\n", start)
        return n_chars if newline < 0 else newline + 1
    window = max(1, int((n_chars - start) * NEWLINE_SNAP_FRACTION))
    newline = text.find("\n", start, min(n_chars, start + window))
    if newline >= 0:
        return newline + 1
    return _safe_tail_start(text, start)


def _existing_marker(text: str) -> tuple[int, str] | None:
    """A marker left by an earlier truncation: (tokens it reported, its suffix)."""
    probe = text.find(_EXISTING_MARKER_PROBE)
    if probe < 0:
        return None
    line_start = text.rfind("\n", 0, probe)
    if line_start < 0:
        return None
    match = _EXISTING_MARKER_RE.match(text, line_start)
    if match is None:
        return None
    return int(match.group(1)), match.group(2)


@dataclass(frozen=True)
class _Tally:
    """How a cut learns the tokens it removed.

    Attributes:
        most: No text here has more tokens; the marker is sized for it.
        removed: (head, tail, their tokens) -> tokens of the middle between them.
        original: The input's counted tokens; None when it was not counted whole.
    """

    most: int
    removed: Callable[[str, str, int], int]
    original: int | None = None

    def outcome(self, text: str, kept: int, removed: int) -> Truncated:
        original = self.original if self.original is not None else kept + removed
        return Truncated(text, True, original, kept, removed)


def _counted_tally(original_tokens: int) -> _Tally:
    return _Tally(
        original_tokens, lambda head, tail, kept: max(original_tokens - kept, 0), original_tokens
    )


def _estimated_tally(text: str, whole: int, count: Callable[[str], int]) -> _Tally:
    """The middle's tokens: counted when it is short, else its quick estimate (which
    tells scripts apart) scaled by how the exact count compares with the estimate on a
    few slices spread over it (which tell code, prose and JSON apart). ``whole`` is the
    text's quick estimate."""

    def removed(head: str, tail: str, kept: int) -> int:
        start, stop = len(head), len(text) - len(tail)
        if stop - start <= MIDDLE_SAMPLES * MIDDLE_SAMPLE_CHARS:
            return count(text[start:stop])  # no more than the samples would count
        step = (stop - start) // (MIDDLE_SAMPLES + 1)
        slices = [
            text[at : at + MIDDLE_SAMPLE_CHARS]
            for at in range(start + step, stop - MIDDLE_SAMPLE_CHARS, max(step, 1))
        ][:MIDDLE_SAMPLES]
        exact, sampled = sum(map(count, slices)), sum(map(_estimate, slices))
        estimated = _estimate(head) + _estimate(tail)
        scale = exact / sampled if exact and sampled else 1.0
        scale = min(max(scale, 1 / MIDDLE_SCALE_MAX), MIDDLE_SCALE_MAX)
        return round(max(whole - estimated, 0) * scale)

    return _Tally(len(text) * MAX_TOKENS_PER_CHAR, removed)


def _cut(
    text: str,
    tally: _Tally,
    max_tokens: int,
    count: TokenCounter,
    bounds: _Bounds,
    head_ratio: float,
    whole_lines: bool,
    suffix: str,
    earlier_removed: int,
) -> Truncated | None:
    n_chars = len(text)
    # The marker is sized for the largest N it can show; the real one is no longer.
    budget = max_tokens - count(_marker(tally.most + earlier_removed, suffix))
    for _ in range(ASSEMBLE_MAX_ATTEMPTS):
        if budget <= 0:
            break
        head_budget = int(budget * head_ratio)
        tail_budget = budget - head_budget
        head_end, tail_len = bounds(head_budget, tail_budget)
        tail_start = max(n_chars - tail_len, head_end)
        head_end_s = _snap_head(text, head_end, whole_lines)
        tail_start_s = _snap_tail(text, tail_start, whole_lines)
        if whole_lines and head_end_s == 0 and tail_start_s == n_chars:
            # Lines longer than the budget: a listing cut inside a line beats nothing.
            head_end_s = _snap_head(text, head_end, False)
            tail_start_s = _snap_tail(text, tail_start, False)
        head, tail = text[:head_end_s], text[tail_start_s:]
        kept = count(head) + count(tail)
        removed = tally.removed(head, tail, kept)
        result = head + _marker(removed + earlier_removed, suffix) + tail
        total = count(result)
        if total <= max_tokens:
            return tally.outcome(result, kept, removed)
        # Token counts are not additive at the joins: shrink by the overshoot and more.
        budget -= (total - max_tokens) + max(1, budget // 20)
    everything = tally.removed("", "", 0)
    marker_only = _marker(everything + earlier_removed, suffix)
    if count(marker_only) <= max_tokens:
        return tally.outcome(marker_only, 0, everything)
    return None


def truncate_text(
    text: str,
    max_tokens: int,
    *,
    count: TokenCounter | None = None,
    head_ratio: float | None = None,
    kind: TruncationKind = "auto",
    marker_suffix: str = "",
    codec: TokenCodec | None = None,
) -> Truncated:
    """Cut ``text`` to at most ``max_tokens`` tokens, keeping its head and its tail.

    The removed middle is replaced by ``\\n…N tokens truncated…{marker_suffix}\\n``.
    If ``text`` already carries such a marker (a re-truncation), its suffix is kept
    and N includes what the earlier cut removed.

    Args:
        text: The text to cut; never modified.
        max_tokens: Bound on ``count(result.text)``; must be >= 0.
        count: Token counter; defaults to a quick CJK-aware estimate. Texts longer
            than ``COUNT_CHUNK_CHARS`` are counted as the sum of their chunks.
        head_ratio: Share of the kept tokens given to the head; overrides ``kind``.
        kind: ``"code"`` keeps 70/30, ``"listing"`` 60/40 on whole lines, ``"text"``
            50/50; ``"auto"`` detects the kind from a leading sample.
        marker_suffix: Appended to the marker line, e.g. a pointer to the full output.
        codec: The exact tokenizer ``count`` counts with, if any: the text is then
            never tokenized whole (see the module's docstring), the marker's N is an
            estimate and ``original_tokens`` is ``kept_tokens`` plus it.

    Returns:
        The outcome; ``text`` unchanged when it already fits. When even the bare
        marker does not fit, the largest fitting head is returned without a marker.

    Raises:
        ValueError: ``max_tokens`` is negative or ``head_ratio`` is outside [0, 1].
    """
    if max_tokens < 0:
        raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
    if head_ratio is not None and not 0.0 <= head_ratio <= 1.0:
        raise ValueError(f"head_ratio must be within [0, 1], got {head_ratio}")
    counter = _chunked(count) if count is not None else _estimate
    codec = codec if count is not None else None
    if codec is not None:
        try:
            within = codec.count_till_limit(text, max_tokens)
        except ValueError:
            codec = None  # lone surrogates cannot be encoded; the counter copes
        else:
            if within is not None:
                return Truncated(text, False, within, within, 0)
    original = counter(text) if codec is None else None
    if original is not None and original <= max_tokens:
        return Truncated(text, False, original, original, 0)
    resolved = detect_kind(text) if kind == "auto" else kind
    if head_ratio is None:
        head_ratio = {"code": HEAD_RATIO_CODE, "listing": HEAD_RATIO_LISTING}.get(
            resolved, HEAD_RATIO_TEXT
        )
    earlier = _existing_marker(text)
    earlier_removed = 0
    if earlier is not None:
        earlier_removed = earlier[0]
        if not marker_suffix:
            marker_suffix = earlier[1]
    if original is None:
        assert codec is not None
        # Never tokenized whole: cut at token offsets, the middle estimated.
        whole = _estimate(text)
        chars_per_token = len(text) / max(whole, 1)
        # The slices are counted by the tokenizer itself: kept out of the text cache.
        tally = _estimated_tally(text, whole, codec.count)
        fitted = _fitted_bounds(text, counter, chars_per_token)
        bounds = _token_bounds(text, codec, chars_per_token, fitted)
    else:
        chars_per_token = len(text) / max(original, 1)
        tally = _counted_tally(original)
        bounds = _fitted_bounds(text, counter, chars_per_token)
    suffixes = [marker_suffix, ""] if marker_suffix else [""]
    for suffix in suffixes:
        result = _cut(
            text,
            tally,
            max_tokens,
            counter,
            bounds,
            head_ratio,
            resolved == "listing",
            suffix,
            earlier_removed,
        )
        if result is not None:
            return result
    head_end, _ = _fit_length(lambda k: text[:k], len(text), max_tokens, counter, chars_per_token)
    head_end = _safe_head_end(text, head_end)
    head = text[:head_end]
    kept = counter(head) if head_end else 0
    return tally.outcome(head, kept, tally.removed(head, "", kept))


def truncate_tool_output(
    content: str,
    max_tokens: int,
    *,
    count: TokenCounter | None = None,
    artifact_path: str | None = None,
    codec: TokenCodec | None = None,
) -> Truncated:
    """Cut a tool's output for the history, pointing at the saved full output if any.

    Args:
        content: The tool's full output.
        max_tokens: Bound on the result's tokens.
        count: Token counter; defaults to a quick estimate.
        artifact_path: Where the full output was saved; named in the marker line.
        codec: The exact tokenizer ``count`` counts with, if any (see
            :func:`truncate_text`).

    Returns:
        The outcome of :func:`truncate_text` with kind detection.
    """
    suffix = ARTIFACT_POINTER_TEMPLATE.format(path=artifact_path) if artifact_path else ""
    return truncate_text(content, max_tokens, count=count, marker_suffix=suffix, codec=codec)


def _block_text(block: Any) -> str | None:
    if isinstance(block, str):
        return block
    if isinstance(block, dict) and block.get("type") == "text":
        text = block.get("text")
        return text if isinstance(text, str) else None
    return None


def _shrink_content(
    content: Any, max_tokens: int, count: TokenCounter, codec: TokenCodec | None
) -> Any | None:
    """Truncated copy of a ToolMessage content, or None when it already fits."""
    if isinstance(content, str):
        result = truncate_text(content, max_tokens, count=count, codec=codec)
        return result.text if result.truncated else None
    if not isinstance(content, list):
        return None
    sizes = [
        (index, text, count(text))
        for index, block in enumerate(content)
        if (text := _block_text(block)) is not None
    ]
    total = sum(tokens for _, _, tokens in sizes)
    if total <= max_tokens:
        return None
    new_content = list(content)
    changed = False
    for index, text, tokens in sizes:
        # Each text block keeps a share of the cap proportional to its size.
        share = max_tokens * tokens // total
        if tokens <= share:
            continue
        result = truncate_text(text, share, count=count, codec=codec)
        if not result.truncated:
            continue
        block = content[index]
        new_content[index] = (
            result.text if isinstance(block, str) else {**block, "text": result.text}
        )
        changed = True
    return new_content if changed else None


def shrink_tool_messages(
    messages: Sequence[BaseMessage],
    max_tokens_each: int,
    count: TokenCounter | None = None,
    codec: TokenCodec | None = None,
    page: Callable[[ToolMessage, int], str | None] | None = None,
) -> tuple[list[BaseMessage], int]:
    """Cut every ToolMessage whose content exceeds ``max_tokens_each``.

    Args:
        messages: The messages; never modified.
        max_tokens_each: Cap per tool message (text blocks of a list content share it
            in proportion to their sizes; other blocks are kept).
        count: Token counter; defaults to a quick estimate.
        codec: The exact tokenizer ``count`` counts with, if any (see
            :func:`truncate_text`).
        page: Shortens a message over the cap its own way (a file read to a page of
            its leading lines), or returns None to have it cut head and tail.

    Returns:
        The new list (changed messages are ``model_copy`` copies, the others the
        same objects) and how many messages were changed.
    """
    counter = count or _estimate
    out: list[BaseMessage] = []
    changed = 0
    for message in messages:
        if isinstance(message, ToolMessage):
            new_content = _shrink_content(message.content, max_tokens_each, counter, codec)
            if new_content is not None and page is not None:
                new_content = page(message, max_tokens_each) or new_content
            if new_content is not None:
                out.append(message.model_copy(update={"content": new_content}))
                changed += 1
                continue
        out.append(message)
    return out, changed
