"""Tests for agentgraph.context.truncation."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from agentgraph.context.tokens import TokenCounter
from agentgraph.context.truncation import (
    COUNT_CHUNK_CHARS,
    MIDDLE_SAMPLES,
    TOOL_OUTPUT_MAX_TOKENS_CAP,
    TOOL_OUTPUT_MIN_TOKENS,
    TruncationKind,
    _estimate,
    default_tool_output_max_tokens,
    detect_kind,
    shrink_tool_messages,
    truncate_text,
    truncate_tool_output,
)

MARKER_RE = re.compile(r"\n…(\d+) tokens truncated…([^\n]*)\n")


def char_count(text: str) -> int:
    """A counter where every character is a token (worst case for CJK estimates)."""
    return len(text)


def word_count(text: str) -> int:
    """A non-additive counter: runs of word chars and single other chars."""
    return len(re.findall(r"\w+|[^\w\s]|\s+", text))


def superadditive_count(text: str) -> int:
    """A counter where a whole costs more than its parts (the join check must work)."""
    return len(text) + len(text) ** 2 // 2_000


O200K = TokenCounter("gpt-4o")


def split_result(original: str, result: str) -> tuple[str, str, re.Match[str]]:
    match = MARKER_RE.search(result)
    assert match is not None, result
    return result[: match.start()], result[match.end() :], match


# --- the quick estimate -------------------------------------------------------------


def test_estimate_ascii_is_a_quarter_per_char() -> None:
    assert _estimate("") == 0
    assert _estimate("abcd") == 1
    assert _estimate("abcde") == 2
    assert _estimate("x" * 4000) == 1000


def test_estimate_counts_cjk_about_one_token_per_char() -> None:
    assert _estimate("中文字符测试") == 6
    assert _estimate("日本語のテキスト") == 8
    # Mixed text adds up per class: 8 ASCII chars (2) + 2 CJK (2).
    assert _estimate("abcdefgh中文") == 4


def test_estimate_other_scripts_and_emoji() -> None:
    assert _estimate("привет") == 3  # 6 two-byte chars at 0.5
    assert _estimate("😀😀") == 4  # 4-byte chars at 2


# --- budget defaults ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("usable", "expected"),
    [(0, TOOL_OUTPUT_MIN_TOKENS), (50_000, 5_000), (128_000, 12_800), (10**7, 25_000)],
)
def test_default_tool_output_max_tokens(usable: int, expected: int) -> None:
    assert default_tool_output_max_tokens(usable) == expected
    assert TOOL_OUTPUT_MIN_TOKENS <= expected <= TOOL_OUTPUT_MAX_TOKENS_CAP


# --- basic behaviour ----------------------------------------------------------------


def test_text_that_fits_is_returned_unchanged() -> None:
    text = "short output\n"
    result = truncate_text(text, 100)
    assert result.text is text
    assert not result.truncated
    assert result.removed_tokens == 0
    assert result.kept_tokens == result.original_tokens == _estimate(text)


def test_truncation_keeps_head_and_tail_with_exact_marker() -> None:
    text = "".join(f"line {i:05d} of the output, with some words\n" for i in range(2000))
    result = truncate_text(text, 200, kind="text")
    assert result.truncated
    assert _estimate(result.text) <= 200
    head, tail, match = split_result(text, result.text)
    assert text.startswith(head) and head
    assert text.endswith(tail) and tail
    assert int(match.group(1)) == result.removed_tokens
    assert result.removed_tokens == result.original_tokens - result.kept_tokens
    assert "line 00000" in head
    assert "line 01999" in tail
    # Cut on line boundaries: head ends at a line end, tail starts at a line start.
    assert text[len(head)] == "\n"
    assert text[len(text) - len(tail) - 1] == "\n"


def test_text_kind_is_balanced_and_code_keeps_more_head() -> None:
    prose = "word " * 20_000
    result = truncate_text(prose, 1_000, kind="text")
    head, tail, _ = split_result(prose, result.text)
    assert 0.8 < len(head) / len(tail) < 1.25

    code = "".join(f"    value_{i} = compute({i})\n" for i in range(5_000))
    result = truncate_text(code, 1_000, kind="code")
    head, tail, _ = split_result(code, result.text)
    assert 2.0 < len(head) / len(tail) < 2.7  # 70/30


def test_head_ratio_overrides_kind() -> None:
    text = "word " * 20_000
    result = truncate_text(text, 1_000, kind="code", head_ratio=0.2)
    head, tail, _ = split_result(text, result.text)
    assert len(head) < len(tail) / 3


def test_listing_keeps_whole_lines_60_40() -> None:
    lines = [f"./src/pkg/module_{i}/file_{i}.py" for i in range(3_000)]
    text = "\n".join(lines) + "\n"
    assert detect_kind(text) == "listing"
    result = truncate_text(text, 500)
    head, tail, _ = split_result(text, result.text)
    head_lines = head.split("\n")
    tail_lines = tail.rstrip("\n").split("\n")
    assert all(line in lines for line in head_lines)
    assert all(line in lines for line in tail_lines)
    assert head_lines[0] == lines[0]
    assert tail_lines[-1] == lines[-1]
    assert 1.2 < len(head_lines) / len(tail_lines) < 1.8


def test_detect_kind() -> None:
    code = (
        "import os\n\n\nclass A:\n    def f(self):\n        return 1\n\n"
        "def g(x):\n    if x:\n        return x\n    return None\n"
    )
    assert detect_kind(code) == "code"
    assert detect_kind("function f() {\n  return 1;\n}\nconst x = 2;\nlet y = 3;\n") == "code"
    ls = "\n".join(f"-rw-r--r-- 1 user staff {i * 13} Jan  1 12:00 file{i}.txt" for i in range(80))
    assert detect_kind(ls) == "listing"
    grep = "\n".join(f"src/a{i}.py:{i}:    return helper({i})" for i in range(80))
    assert detect_kind(grep) == "listing"
    prose = ("This is a long paragraph of prose that goes on and on. " * 40 + "\n\n") * 5
    assert detect_kind(prose) == "text"
    assert detect_kind("a few\nshort\nlines\n") == "text"


def test_cjk_truncation_respects_bounds_and_characters() -> None:
    text = "中文字符测试，这是一段很长的中文输出。" * 5_000
    result = truncate_text(text, 300)
    assert _estimate(result.text) <= 300
    head, tail, _ = split_result(text, result.text)
    assert text.startswith(head) and text.endswith(tail)
    assert len(head) > 100 and len(tail) > 100


def test_combining_sequences_are_not_split() -> None:
    # "e" + combining acute, repeated without newlines: every cut point is adjacent
    # to a combining mark, so the cut must move to keep pairs whole.
    text = "e\u0301" * 20_000
    result = truncate_text(text, 400, count=char_count)
    head, tail, _ = split_result(text, result.text)
    assert head.endswith("\u0301")
    assert tail.startswith("e")
    assert len(result.text) <= 400


def test_surrogate_pairs_stay_whole() -> None:
    pair = "\ud83d\ude00"  # an emoji as a surrogate pair (as from surrogatepass decoding)
    text = pair * 10_000
    result = truncate_text(text, 300, count=char_count)
    head, tail, _ = split_result(text, result.text)
    assert len(head) % 2 == 0 and len(tail) % 2 == 0


def test_marker_suffix_and_tool_output_pointer() -> None:
    text = "x" * 100_000
    result = truncate_tool_output(text, 1_000, artifact_path="/home/u/.agentgraph/a/out.txt")
    _, _, match = split_result(text, result.text)
    assert match.group(2) == (
        " full output: /home/u/.agentgraph/a/out.txt"
        " — page through it with read_file(offset, limit)"
    )
    assert _estimate(result.text) <= 1_000


def test_suffix_is_dropped_when_it_does_not_fit() -> None:
    text = "y" * 10_000
    result = truncate_text(text, 12, marker_suffix=" " + "pointer " * 50)
    assert _estimate(result.text) <= 12
    _, _, match = split_result(text, result.text)
    assert match.group(2) == ""


def test_tiny_budget_returns_head_without_marker() -> None:
    text = "z" * 1_000
    result = truncate_text(text, 3)
    assert result.truncated
    assert _estimate(result.text) <= 3
    assert text.startswith(result.text)
    assert "truncated" not in result.text
    assert truncate_text(text, 0).text == ""


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError):
        truncate_text("abc", -1)
    with pytest.raises(ValueError):
        truncate_text("abc", 10, head_ratio=1.5)


def test_retruncation_keeps_pointer_and_total() -> None:
    text = "".join(f"row {i}\n" for i in range(20_000))
    first = truncate_tool_output(text, 2_000, artifact_path="/tmp/full.txt")
    second = truncate_text(first.text, 300)
    assert _estimate(second.text) <= 300
    _, _, match = split_result(first.text, second.text)
    assert "/tmp/full.txt" in match.group(2)
    # The marker reports what was removed from the original output overall.
    assert int(match.group(1)) == first.removed_tokens + second.removed_tokens


def test_input_is_not_modified_and_output_differs() -> None:
    text = "abc " * 10_000
    copy = str(text)
    result = truncate_text(text, 100)
    assert text == copy
    assert result.text != text


def test_fifty_megabytes_with_non_additive_counter() -> None:
    block = "".join(
        f"{i:06d} some output text here, more words and symbols: {{}}[]\n" for i in range(1000)
    )
    text = block * (50_000_000 // len(block) + 1)
    assert len(text) >= 50_000_000
    calls: list[int] = []

    def counting(s: str) -> int:
        calls.append(len(s))
        return _estimate(s)

    result = truncate_text(text, 25_000, count=counting)
    assert _estimate(result.text) <= 25_000
    assert result.kept_tokens > 20_000
    # The input is counted once (in chunks); after that only small pieces are counted.
    assert max(calls) <= COUNT_CHUNK_CHARS
    whole = -(-len(text) // COUNT_CHUNK_CHARS)
    assert sum(calls[:whole]) == len(text)
    pieces = calls[whole:]
    assert 0 < len(pieces) < 60
    assert sum(pieces) < len(text) // 50

    result = truncate_text(text, 25_000, count=word_count)
    assert word_count(result.text) <= 25_000


def test_bound_holds_when_pieces_cost_more_together() -> None:
    text = "q" * 50_000
    for budget in (60, 200, 900):
        result = truncate_text(text, budget, count=superadditive_count)
        assert superadditive_count(result.text) <= budget
        assert MARKER_RE.search(result.text)
        # The parts alone would have fitted a larger cut: it was shrunk to fit together.
        assert result.kept_tokens < budget


def test_cut_fills_the_budget_when_density_varies() -> None:
    # The whole-text chars-per-token ratio misjudges both ends; refinement must fix it.
    text = "a" * 400_000 + "中" * 100_000
    result = truncate_text(text, 2_000, kind="text")
    head, tail, _ = split_result(text, result.text)
    assert _estimate(result.text) <= 2_000
    assert _estimate(head) >= 0.9 * 1_000 - 10
    assert _estimate(tail) >= 0.9 * 1_000 - 10
    text = "中" * 100_000 + "a" * 400_000
    result = truncate_text(text, 2_000, kind="text")
    assert result.kept_tokens >= 0.9 * 2_000 - 20


def test_counter_never_sees_more_than_a_chunk() -> None:
    # Exact tokenizers refuse huge inputs (bpe-openai raises at 1M chars).
    def picky(text: str) -> int:
        if len(text) > COUNT_CHUNK_CHARS:
            raise ValueError("Input too long to encode safely")
        return word_count(text)

    text = "some words, and (symbols)\n" * 200_000
    result = truncate_text(text, 5_000, count=picky)
    assert word_count(result.text) <= 5_000
    assert result.original_tokens == pytest.approx(word_count(text), abs=20)


def test_fifty_megabytes_cjk() -> None:
    text = "这是一个很长的中文工具输出。" * (50_000_000 // 14)
    result = truncate_text(text, 10_000)
    assert _estimate(result.text) <= 10_000
    assert result.removed_tokens > 40_000_000


# --- properties ---------------------------------------------------------------------

texts = st.text(
    alphabet=st.sampled_from([*"abc xyz\n\t{}();", "中", "文", "é", "\u0301", "😀", "й"]),
    max_size=3_000,
)
counters = st.sampled_from([None, char_count, word_count, superadditive_count, "o200k codec"])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=texts,
    max_tokens=st.integers(min_value=0, max_value=800),
    counter_choice=counters,
    kind=st.sampled_from(["auto", "code", "listing", "text"]),
    head_ratio=st.one_of(st.none(), st.floats(min_value=0.0, max_value=1.0)),
)
def test_bounds_prefix_suffix_marker_properties(
    text: str,
    max_tokens: int,
    counter_choice: Callable[[str], int] | str | None,
    kind: TruncationKind,
    head_ratio: float | None,
) -> None:
    codec = O200K.codec if counter_choice == "o200k codec" else None
    counter = O200K.count_text if codec is not None else counter_choice
    assert not isinstance(counter, str)
    count = counter or _estimate
    result = truncate_text(
        text, max_tokens, count=counter, kind=kind, head_ratio=head_ratio, codec=codec
    )
    assert count(result.text) <= max_tokens
    assert result.truncated == (count(text) > max_tokens)
    if codec is None or not result.truncated:
        assert result.original_tokens == count(text)
    else:
        # Cut at token offsets, the middle is estimated, never tokenized.
        assert result.original_tokens == result.kept_tokens + result.removed_tokens
    if not result.truncated:
        assert result.text == text
        return
    match = MARKER_RE.search(result.text)
    if match is None:
        # Only when not even the bare marker fits: a plain prefix.
        assert count(f"\n…{result.original_tokens} tokens truncated…\n") > max_tokens
        assert text.startswith(result.text)
    else:
        head, tail = result.text[: match.start()], result.text[match.end() :]
        assert text.startswith(head)
        assert text.endswith(tail)
        assert len(head) + len(tail) < len(text)
    # Truncating again at the same budget changes nothing.
    again = truncate_text(result.text, max_tokens, count=counter, codec=codec)
    assert again.text == result.text
    assert not again.truncated


@settings(max_examples=100, deadline=None)
@given(text=texts, max_tokens=st.integers(min_value=20, max_value=400))
def test_marker_present_iff_truncated_with_room(text: str, max_tokens: int) -> None:
    result = truncate_text(text, max_tokens)
    assert (MARKER_RE.search(result.text) is not None) == result.truncated


# --- cuts at token offsets -----------------------------------------------------------


def _counting(count: Callable[[str], int], seen: list[int]) -> Callable[[str], int]:
    def counted(text: str) -> int:
        seen.append(len(text))
        return count(text)

    return counted


def test_a_cut_at_token_offsets_counts_only_small_pieces_and_fills_the_budget() -> None:
    text = "".join(f"line {i}: résultat 結果 {i * 7919 % 1000}\n" for i in range(3_000))
    assert O200K.codec is not None
    seen: list[int] = []
    result = truncate_tool_output(
        text,
        1_000,
        count=_counting(O200K.count_text, seen),
        artifact_path="/tmp/out.txt",
        codec=O200K.codec,
    )
    assert O200K.count_text(result.text) <= 1_000
    # The marker's figure is the middle's estimate, scaled by the kept pieces' count.
    assert result.original_tokens == pytest.approx(O200K.count_text(text), rel=0.05)
    # The marker, the head, the tail, the assembled result and the middle's samples:
    # never the whole input, and no fitting loop.
    assert len(seen) <= 4 * 2 + MIDDLE_SAMPLES, seen
    assert sum(seen) < len(text) // 4
    fitted = truncate_tool_output(text, 1_000, count=O200K.count_text, artifact_path="/tmp/out.txt")
    assert result.kept_tokens >= fitted.kept_tokens - 5


def test_the_marker_of_a_cut_at_token_offsets_counts_a_middle_unlike_its_ends() -> None:
    # Prose at both ends, JSON (twice the tokens per character) in between: the ends
    # alone would put the middle at a third of its tokens.
    prose = "The build failed because the configuration file was missing an entry. " * 250
    data = json.dumps([{"id": i, "sha": f"{i * 2654435761 % 2**32:08x}"} for i in range(8_000)])
    text = prose + data + prose
    result = truncate_text(text, 1_000, count=O200K.count_text, codec=O200K.codec)
    middle = O200K.count_text(text) - result.kept_tokens
    assert result.removed_tokens == pytest.approx(middle, rel=0.1)
    assert int(MARKER_RE.search(result.text).group(1)) == result.removed_tokens  # type: ignore[union-attr]


def test_a_cut_at_token_offsets_keeps_both_ends_where_offsets_split_runs_of_rare_characters() -> (
    None
):
    # cl100k has runs of four token offsets in a row that fall inside a character here.
    cl100k = TokenCounter("gpt-4")
    rare = "🖧𤑵⎦🞪🧴🌑𡲠ꅤ햷ꍹ𝟎֭⑭懆🡖𨠔𝞜𩀉킛ꇠ𢙼𓏎𝑿ꂏ𒉲⏳📎⬞𓃏𥵑懚💴\U0001b7e1" * 200
    for max_tokens in range(40, 400, 7):
        result = truncate_text(
            rare, max_tokens, count=cl100k.count_text, codec=cl100k.codec, kind="text"
        )
        head, tail, _ = split_result(rare, result.text)
        assert head and tail, max_tokens
        assert cl100k.count_text(result.text) <= max_tokens


def test_a_cut_at_token_offsets_never_splits_a_character() -> None:
    # Every emoji is several tokens: most token offsets fall inside one.
    text = "🎉🎊🧩" * 3_000
    result = truncate_text(text, 500, count=O200K.count_text, codec=O200K.codec)
    head, tail, _ = split_result(text, result.text)
    assert text.startswith(head) and text.endswith(tail)
    assert head and tail
    assert O200K.count_text(result.text) <= 500


@pytest.mark.parametrize(
    "text",
    ["ok \ud800 lone surrogate " * 2_000],
    ids=["lone-surrogate"],
)
def test_texts_the_codec_cannot_take_are_cut_by_fitting(text: str) -> None:
    result = truncate_text(text, 300, count=O200K.count_text, codec=O200K.codec)
    assert result.truncated
    assert O200K.count_text(result.text) <= 300
    head, tail, _ = split_result(text, result.text)
    assert text.startswith(head) and text.endswith(tail)


# --- shrink_tool_messages -----------------------------------------------------------


def test_shrink_tool_messages_copies_only_oversized_tool_messages() -> None:
    big = "output line\n" * 5_000
    small = ToolMessage(content="ok", tool_call_id="a")
    large = ToolMessage(content=big, tool_call_id="b", name="bash")
    human = HumanMessage(content=big)
    ai = AIMessage(content="", tool_calls=[{"name": "bash", "args": {}, "id": "b"}])
    messages = [human, ai, small, large]
    out, changed = shrink_tool_messages(messages, 500)
    assert changed == 1
    assert out[0] is human and out[1] is ai and out[2] is small
    assert out[3] is not large
    assert isinstance(out[3], ToolMessage)
    assert out[3].tool_call_id == "b" and out[3].name == "bash"
    assert isinstance(out[3].content, str)
    assert _estimate(out[3].content) <= 500
    assert MARKER_RE.search(out[3].content)
    assert large.content == big  # input untouched


def test_shrink_tool_messages_list_content_blocks() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    blocks = [
        {"type": "text", "text": "a" * 40_000},
        image,
        {"type": "text", "text": "b" * 4_000},
        "c" * 400,
    ]
    message = ToolMessage(content=blocks, tool_call_id="t")  # type: ignore[arg-type]
    out, changed = shrink_tool_messages([message], 2_000)
    assert changed == 1
    content = out[0].content
    assert isinstance(content, list)
    assert content[1] == image
    texts_out = [
        b["text"] if isinstance(b, dict) else b
        for b in content
        if not (isinstance(b, dict) and b.get("type") == "image_url")
    ]
    assert len(texts_out) == 3
    assert sum(_estimate(t) for t in texts_out) <= 2_000
    assert MARKER_RE.search(texts_out[0])
    assert blocks[0]["text"] == "a" * 40_000  # type: ignore[index]


def test_shrink_tool_messages_nothing_to_do() -> None:
    messages = [ToolMessage(content="fine", tool_call_id="x")]
    out, changed = shrink_tool_messages(messages, 100)
    assert changed == 0
    assert out[0] is messages[0]
    out2, changed2 = shrink_tool_messages(out, 100, count=char_count)
    assert changed2 == 0 and out2[0] is messages[0]
