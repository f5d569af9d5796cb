"""Token counting: encodings, the incremental cache, the usage anchor, offline use."""

from __future__ import annotations

import json
import math
import pickle
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import tool

from agentgraph.context import tokens
from agentgraph.context.tokens import (
    MESSAGE_OVERHEAD_TOKENS,
    REPLY_PRIMING_TOKENS,
    TokenCounter,
    anchored_prompt_tokens,
    encoding_for_model,
    estimate_tokens,
    fits_by_length,
    get_counter,
)

TEXTS = [
    "hello world",
    "def f(x: int) -> int:\n    return x + 1  # increment\n",
    "上下文管理是编码代理最重要的能力之一。",
    "コンテキストウィンドウを超えると、リクエストはエラーになります。",
    '{"id": "84cdcfa166a117eb", "size": 89960, "ok": true, "tags": ["a", "b"]}',
    "<|endoftext|> is ordinary text in a user message",
]


_REAL_LOADER = tokens._load_exact_tokenizer


@pytest.fixture
def fresh_loader() -> Iterator[None]:
    """Forget loaded tokenizers so the test loads one itself."""
    _REAL_LOADER.cache_clear()
    yield
    _REAL_LOADER.cache_clear()


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini", "o200k_base"),
        ("gpt-4.1-nano", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("o1", "o200k_base"),
        ("chatgpt-4o-latest", "o200k_base"),
        ("openai/gpt-4o", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("text-embedding-3-small", "cl100k_base"),
        ("claude-sonnet-4-5", None),
        ("qwen2.5-coder-32b-instruct", None),
        ("deepseek-chat", None),
        ("llama3.1:8b", None),
    ],
)
def test_encoding_for_model(model: str, encoding: str | None) -> None:
    assert encoding_for_model(model) == encoding


def test_o200k_and_cl100k_are_exact_and_differ() -> None:
    o200k, cl100k = TokenCounter("gpt-4o"), TokenCounter("gpt-4")
    assert (o200k.source, o200k.encoding_name, o200k.notice) == ("exact", "o200k_base", None)
    assert (cl100k.source, cl100k.encoding_name) == ("exact", "cl100k_base")
    assert o200k.count_text("hello world") == 2
    assert cl100k.count_text("hello world") == 2
    # Chinese is where the two vocabularies differ most.
    assert o200k.count_text(TEXTS[2]) < cl100k.count_text(TEXTS[2])


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_matches_tiktoken(encoding: str) -> None:
    """tiktoken cannot download its files here; build it from bpe-openai's tables."""
    tiktoken = pytest.importorskip("tiktoken")
    registry = pytest.importorskip("bpe_openai.registry")
    data = registry.ENCODING_CONSTRUCTORS[encoding]()
    reference = tiktoken.Encoding(
        name=encoding,
        pat_str=data["pat_str"],
        mergeable_ranks=data["mergeable_ranks"],
        special_tokens=data["special_tokens"],
    )
    counter = TokenCounter("gpt-4o" if encoding == "o200k_base" else "gpt-4")
    for text in [*TEXTS, "\n".join(TEXTS) * 50]:
        assert counter.count_text(text) == len(reference.encode_ordinary(text)), text[:30]


def test_unknown_model_is_labelled_estimate() -> None:
    counter = TokenCounter("qwen3-coder-plus")
    assert counter.source == "estimate"
    assert counter.encoding_name is None
    assert counter.notice is not None and "estimate" in counter.notice
    assert counter.count_text(TEXTS[1]) == estimate_tokens(TEXTS[1])


def test_missing_tokenizer_falls_back_to_estimate(
    monkeypatch: pytest.MonkeyPatch, fresh_loader: None
) -> None:
    def broken(name: str) -> Any:
        raise ImportError("no bpe_openai")

    monkeypatch.setattr(tokens, "_load_exact_tokenizer", broken)
    counter = TokenCounter("gpt-4o")
    assert counter.source == "estimate"
    assert counter.notice is not None and "unavailable" in counter.notice
    assert counter.count_text("hello world") == estimate_tokens("hello world")


def test_offline_with_network_blocked(monkeypatch: pytest.MonkeyPatch, fresh_loader: None) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise OSError("network disabled in this test")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket.socket, "connect_ex", no_network)
    counter = TokenCounter("gpt-4.1-mini")
    assert counter.source == "exact"
    assert counter.count_text("hello world") == 2
    assert counter.count_messages([HumanMessage("hello world")]) > 2


PARAGRAPHS = [
    "The counter caches each message, so a turn that adds three messages to a long "
    "history only encodes those three. Estimates are labelled honestly as estimates.\n",
    "def count(messages: list[str], limit: int = 100) -> int:\n"
    "    total = 0\n    for message in messages:\n        total += len(message)\n"
    "        if total > limit:  # stop early\n            raise ValueError(total)\n"
    "    return total\n",
    "上下文管理是编码代理最重要的能力之一。当对话历史超过模型的上下文窗口时，请求会被服务端拒绝。"
    "我们需要在每一轮调用之前精确地计算提示词的长度。\n",
    "コンテキストウィンドウを超えると、リクエストはエラーになります。"
    "このエージェントは会話の履歴を自動的に要約して保存します。\n",
    '{"results": [{"id": "84cdcfa166a117eb", "path": "src/value/writer.py", "size": 89960, '
    '"modified": "2024-03-24T07:15:00Z", "ok": true, "tags": ["length", "kind"]}], "total": 1}\n',
]


@pytest.mark.parametrize("text", PARAGRAPHS)
def test_estimate_is_close_to_exact(text: str) -> None:
    exact = TokenCounter("gpt-4o").count_text(text * 10)
    assert abs(estimate_tokens(text * 10) - exact) <= 0.15 * exact


def test_estimate_edge_cases() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("a") == 1
    assert estimate_tokens("\ud800 lone surrogate") > 0


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=400), cap=st.integers(min_value=0, max_value=1_600))
def test_a_text_that_fits_by_length_fits_every_counter(text: str, cap: int) -> None:
    if fits_by_length(text, cap):
        for model in ("gpt-4o", "gpt-4", "claude-sonnet-4-5"):
            assert get_counter(model).count_text(text) <= cap


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=400), cap=st.integers(min_value=-50, max_value=300))
def test_fits_says_what_the_count_says(text: str, cap: int) -> None:
    """Below zero too: a room that the fixed parts overdrew is a bound no text fits (the
    exact tokenizer's bounded count took a negative bound for an unsigned one and raised
    OverflowError)."""
    for model in ("gpt-4o", "gpt-4", "claude-sonnet-4-5"):
        # A fresh counter: nothing cached, so the bounded count itself answers.
        assert TokenCounter(model).fits(text, cap) == (TokenCounter(model).count_text(text) <= cap)


def test_codec_is_the_exact_tokenizer_only() -> None:
    exact = TokenCounter("gpt-4o")
    assert exact.codec is not None
    ids = exact.codec.encode("héllo 日本")
    assert len(ids) == exact.count_text("héllo 日本")
    assert exact.codec.decode(ids) == "héllo 日本"
    assert TokenCounter("claude-sonnet-4-5").codec is None


def test_rare_characters_cost_more_tokens_than_characters() -> None:
    wide = "\U0001d518\U0001d52b\U0001d526" * 100  # mathematical fraktur letters
    assert get_counter("gpt-4o").count_text(wide) > len(wide)
    assert not fits_by_length(wide, len(wide))


def test_lone_surrogate_is_counted_not_raised() -> None:
    assert TokenCounter("gpt-4o").count_text("ok \ud800 ok") > 0


def test_message_format_overhead() -> None:
    counter = TokenCounter("gpt-4o")
    msg = HumanMessage("hello world")
    expected = MESSAGE_OVERHEAD_TOKENS + counter.count_text("user") + 2
    assert counter.count_message(msg) == expected
    assert counter.count_messages([msg]) == expected + REPLY_PRIMING_TOKENS
    assert counter([msg, msg]) == 2 * expected + REPLY_PRIMING_TOKENS
    named = HumanMessage("hello world", name="alice")
    assert counter.count_message(named) > expected


def test_tool_calls_and_ids_are_counted() -> None:
    counter = TokenCounter("gpt-4o")
    args = {"path": "src/agentgraph/context/tokens.py", "limit": 400}
    plain = AIMessage("")
    call = AIMessage("", tool_calls=[{"name": "read_file", "args": args, "id": "call_abc123"}])
    extra = counter.count_message(call) - counter.count_message(plain)
    assert extra >= counter.count_text(json.dumps(args)) + counter.count_text("read_file")
    result = ToolMessage("file body", tool_call_id="call_abc123")
    bare = counter.count_message(HumanMessage("file body"))
    assert counter.count_message(result) > bare - counter.count_text("user")


def test_anthropic_tool_use_blocks_are_not_double_counted() -> None:
    counter = TokenCounter("gpt-4o")
    call = {"name": "read_file", "args": {"path": "a.py"}, "id": "toolu_1"}
    block = {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.py"}}
    both = AIMessage([block], tool_calls=[call])
    only_block = AIMessage([block])
    assert counter.count_message(both) == counter.count_message(only_block)


def test_image_blocks_cost_a_fixed_price() -> None:
    counter = TokenCounter("gpt-4o")
    huge = "data:image/png;base64," + "A" * 100_000
    msg = HumanMessage([{"type": "image_url", "image_url": {"url": huge}}])
    text_only = HumanMessage([])
    delta = counter.count_message(msg) - counter.count_message(text_only)
    assert delta == tokens.IMAGE_BLOCK_TOKENS


def _history(n: int) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for i in range(n):
        out.append(HumanMessage(f"question {i} about tokens", id=f"h{i}"))
        out.append(
            AIMessage(
                "",
                id=f"a{i}",
                tool_calls=[{"name": "bash", "args": {"cmd": f"ls {i}"}, "id": f"c{i}"}],
            )
        )
        out.append(ToolMessage(f"output {i}\n" * 5, tool_call_id=f"c{i}", id=f"t{i}"))
    return out


def test_new_message_is_counted_once() -> None:
    counter = TokenCounter("gpt-4o")
    history = _history(20)
    first = counter.count_messages(history)
    encoded = counter.texts_counted
    assert counter.count_messages(history) == first
    assert counter.texts_counted == encoded  # nothing re-encoded

    new = HumanMessage("one more question", id="new")
    second = counter.count_messages([*history, new])
    assert counter.texts_counted == encoded + 1  # only the new content
    assert second == first + counter.count_message(new)
    counter.count_messages([*history, new])
    assert counter.texts_counted == encoded + 1


def test_edit_same_id_recounts() -> None:
    counter = TokenCounter("gpt-4o")
    original = HumanMessage("short", id="m1")
    before = counter.count_message(original)
    edited = HumanMessage("a much longer replacement text for the same message", id="m1")
    assert counter.count_message(edited) > before
    # In-place replacement of content on the same object is noticed too.
    original.content = "a much longer replacement text for the same message"
    assert counter.count_message(original) == counter.count_message(edited)


def test_reloaded_copies_hit_the_cache() -> None:
    counter = TokenCounter("gpt-4o")
    history = _history(10)
    total = counter.count_messages(history)
    encoded = counter.texts_counted
    copies = pickle.loads(pickle.dumps(history))
    assert counter.count_messages(copies) == total
    assert counter.texts_counted == encoded


def test_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens, "TOKEN_CACHE_MAX_ENTRIES", 8)
    counter = TokenCounter("gpt-4o")
    history = _history(10)
    total = counter.count_messages(history)
    assert len(counter._by_key) <= 8
    assert len(counter._by_object) <= 8
    assert counter.count_messages(history) == total  # evicted entries recount correctly


def test_dead_messages_leave_the_identity_cache() -> None:
    counter = TokenCounter("gpt-4o")
    counter.count_message(HumanMessage("temporary"))
    assert counter._by_object == {}


def test_text_counts_are_remembered_by_value() -> None:
    counter = TokenCounter("gpt-4o")
    text = "def f(x):\n    return x + 1\n" * 20
    first = counter.count_text(text)
    encoded = counter.texts_counted
    # An equal text in another object (a fresh copy of a tool output) is not re-encoded.
    assert counter.count_text("".join(list(text))) == first
    assert counter.texts_counted == encoded
    counter.count_text(text + "!")  # a different text is encoded
    assert counter.texts_counted == encoded + 1


def test_text_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens, "TEXT_CACHE_MAX_ENTRIES", 4)
    monkeypatch.setattr(tokens, "TEXT_CACHE_MAX_CHARS", 100)
    monkeypatch.setattr(tokens, "TEXT_CACHE_MAX_TEXT_CHARS", 50)
    counter = TokenCounter("gpt-4o")
    texts = [f"text number {i}" for i in range(10)]
    counts = [counter.count_text(t) for t in texts]
    assert len(counter._texts) <= 4
    assert counter._text_chars == sum(map(len, counter._texts)) <= 100
    # The least recently used text went first; evicted texts recount the same.
    assert texts[0] not in counter._texts and texts[-1] in counter._texts
    encoded = counter.texts_counted
    assert [counter.count_text(t) for t in texts] == counts
    assert counter.texts_counted > encoded
    # A text above the per-text limit is counted every time and never kept.
    big = "word " * 20
    counter.count_text(big)
    encoded = counter.texts_counted
    counter.count_text(big)
    assert counter.texts_counted == encoded + 1
    assert big not in counter._texts


def test_tool_count_is_remembered_per_list_of_tools() -> None:
    @tool
    def alpha(path: str) -> str:
        """Read a file."""
        return path

    @tool
    def beta(command: str) -> str:
        """Run a command."""
        return command

    counter = TokenCounter("gpt-4o")
    both = counter.count_tools([alpha, beta])
    encoded = counter.texts_counted
    # Another list of the same tools hits the memo; a different list replaces it.
    assert counter.count_tools([alpha, beta]) == both
    assert counter.texts_counted == encoded
    only = counter.count_tools([alpha])
    assert only < both
    assert counter._tools_memo == ((alpha,), only)
    assert counter.count_tools([beta, alpha]) == both  # same tools, other order
    # Schemas given as dicts (editable in place) are never remembered.
    schema = {"name": "gamma", "description": "Do it", "parameters": {"type": "object"}}
    counter.count_tools([alpha, schema])
    assert counter._tools_memo is not None and counter._tools_memo[0] == (beta, alpha)
    schema["description"] = "Do it now, with a much longer description than before"
    assert counter.count_tools([alpha, schema]) > counter.count_tools([alpha])


# OpenAI cookbook "How to count tokens with tiktoken": this request, sent to the API,
# is reported as 101 prompt tokens by gpt-4o / gpt-4o-mini and 105 by gpt-4 / gpt-3.5.
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_current_weather",
        "description": "Get the current weather in a given location",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {
                    "type": "string",
                    "description": "The city and state, e.g. San Francisco, CA",
                },
                "unit": {
                    "type": "string",
                    "description": "The unit of temperature to return",
                    "enum": ["celsius", "fahrenheit"],
                },
            },
            "required": ["location"],
        },
    },
}
WEATHER_MESSAGES = [
    SystemMessage("You are a helpful assistant that can answer to questions about the weather."),
    HumanMessage("What's the weather like in San Francisco?"),
]


@pytest.mark.parametrize(
    ("model", "reported"),
    [("gpt-4o", 101), ("gpt-4o-mini", 101), ("gpt-4", 105), ("gpt-3.5-turbo", 105)],
)
def test_request_with_a_tool_matches_the_tokens_openai_reports(model: str, reported: int) -> None:
    counter = TokenCounter(model)
    total = counter.count_messages(WEATHER_MESSAGES) + counter.count_tools([WEATHER_TOOL])
    assert total == reported


def test_tool_schemas_cost_less_than_their_json_text() -> None:
    # The schema JSON is not what the model sees: counting it over-counts by ~half.
    counter = TokenCounter("gpt-4o")
    as_json = counter.count_text(json.dumps(WEATHER_TOOL, ensure_ascii=False))
    assert counter.count_tools([WEATHER_TOOL]) < as_json


def test_an_estimating_counter_counts_tool_schemas_as_their_json_text() -> None:
    # Open models' chat templates (Qwen, Llama, Mistral) put each schema's JSON in the
    # prompt: a local server counts that, not OpenAI's short declarations.
    counter = TokenCounter("qwen2.5-coder-1.5b")
    assert counter.source == "estimate"
    as_json = counter.count_text(json.dumps(WEATHER_TOOL, ensure_ascii=False))
    assert 0.9 * as_json <= counter.count_tools([WEATHER_TOOL]) <= 1.2 * as_json
    assert counter.count_tools([WEATHER_TOOL]) > TokenCounter("gpt-4o").count_tools([WEATHER_TOOL])


def test_count_tools_counts_nested_parameters_and_caches() -> None:
    @tool
    def read_file(path: str, limit: int = 100) -> str:
        """Read a file from the workspace."""
        return path

    bare = {
        "type": "function",
        "function": {"name": "bash", "description": "Run a command", "parameters": {}},
    }
    nested = {
        "type": "function",
        "function": {
            "name": "plan",
            "description": "Write the plan.",
            "parameters": {
                "type": "object",
                "properties": {
                    "steps": {
                        "type": "array",
                        "description": "The steps.",
                        "items": {
                            "type": "object",
                            "properties": {"text": {"type": "string", "description": "A step"}},
                        },
                    }
                },
            },
        },
    }
    counter = TokenCounter("gpt-4o")
    one = counter.count_tools([bare])
    assert one == 12 + 7 + counter.count_text("bash:Run a command")
    with_nested = counter.count_tools([bare, nested])
    # The nested item's field and its description are part of the rendered type.
    flat = counter.count_text("steps:array:The steps")
    assert with_nested - one > 7 + counter.count_text("plan:Write the plan") + 3 + 3 + flat
    total = counter.count_tools([read_file, bare, nested])
    encoded = counter.texts_counted
    assert counter.count_tools([read_file, bare, nested]) == total
    assert counter.texts_counted == encoded
    assert counter.count_tools([]) == 0


def test_get_counter_is_shared_per_model() -> None:
    assert get_counter("gpt-4o") is get_counter("gpt-4o")
    assert get_counter("gpt-4o") is not get_counter("gpt-4")


def _usage(inp: int, out: int, **details: int) -> dict[str, Any]:
    usage: dict[str, Any] = {"input_tokens": inp, "output_tokens": out, "total_tokens": inp + out}
    if details:
        usage["input_token_details"] = details
    return usage


def test_anchor_adds_messages_after_last_usage() -> None:
    counter = TokenCounter("gpt-4o")
    after = [ToolMessage("result text", tool_call_id="c1"), HumanMessage("next question")]
    msgs: list[BaseMessage] = [
        HumanMessage("q1"),
        AIMessage("old", usage_metadata=_usage(50, 5)),  # type: ignore[arg-type]
        HumanMessage("q2"),
        AIMessage("new", usage_metadata=_usage(1_000, 20, cache_read=600)),  # type: ignore[arg-type]
        *after,
    ]
    total, source = anchored_prompt_tokens(msgs, counter)
    assert source == "reported"
    assert total == 1_020 + sum(counter.count_message(m) for m in after)


def test_anchor_takes_cached_parts_when_input_omits_them() -> None:
    counter = TokenCounter("gpt-4o")
    usage = _usage(10, 5, cache_read=700, cache_creation=300)
    msgs = [AIMessage("x", usage_metadata=usage)]  # type: ignore[arg-type]
    assert anchored_prompt_tokens(msgs, counter) == (1_005, "reported")


def test_no_usage_counts_everything() -> None:
    exact, estimate = TokenCounter("gpt-4o"), TokenCounter("claude-sonnet-4-5")
    msgs = [HumanMessage("hello"), AIMessage("hi there")]
    assert anchored_prompt_tokens(msgs, exact) == (exact.count_messages(msgs), "exact")
    assert anchored_prompt_tokens(msgs, estimate, fixed_tokens=100) == (
        100 + estimate.count_messages(msgs),
        "estimate",
    )


def test_stale_anchor_is_ignored() -> None:
    """A pre-compaction response kept in history must not report the old size."""
    counter = TokenCounter("gpt-4o")
    msgs = [
        HumanMessage("summary of earlier work"),
        AIMessage("kept", usage_metadata=_usage(150_000, 500)),  # type: ignore[arg-type]
        HumanMessage("next"),
    ]
    total, source = anchored_prompt_tokens(msgs, counter, fixed_tokens=200)
    assert source == "exact"
    assert total == 200 + counter.count_messages(msgs)
    plausible = [
        HumanMessage("hello " * 100),
        AIMessage("ok", usage_metadata=_usage(330, 2)),  # type: ignore[arg-type]
    ]
    assert anchored_prompt_tokens(plausible, counter, fixed_tokens=200)[1] == "reported"


def test_an_estimate_after_the_anchor_follows_the_providers_higher_count() -> None:
    """No offline tokenizer: the provider counted the anchored prefix 1.5x higher than the
    estimate (a local chat template, a tokenizer that splits digits), so what came after is
    taken 1.5x too; an exact counter, or a provider counting lower, changes nothing."""
    estimate = TokenCounter("qwen2.5-coder-1.5b")
    prefix: list[BaseMessage] = [HumanMessage("x = 1 + 2 * 3 " * 50)]
    ours = 100 + estimate.count_messages([*prefix, AIMessage("ok")])
    reported = int(ours * 1.5)
    after = [ToolMessage("y = 4 + 5 * 6 " * 80, tool_call_id="c1")]
    usage = _usage(reported - 2, 2)
    msgs = [*prefix, AIMessage("ok", usage_metadata=usage), *after]  # type: ignore[arg-type]
    raw = sum(estimate.count_message(m) for m in after)
    total, source = anchored_prompt_tokens(msgs, estimate, fixed_tokens=100)
    assert source == "reported"
    assert total == reported + math.ceil(raw * reported / ours)
    lower = _usage(int(ours * 0.8) - 2, 2)
    msgs_lower = [*prefix, AIMessage("ok", usage_metadata=lower), *after]  # type: ignore[arg-type]
    assert (
        anchored_prompt_tokens(msgs_lower, estimate, fixed_tokens=100)[0] == int(ours * 0.8) + raw
    )
    exact = TokenCounter("gpt-4o")
    ours_exact = 100 + exact.count_messages([*prefix, AIMessage("ok")])
    usage_exact = _usage(int(ours_exact * 1.5) - 2, 2)
    msgs_exact = [*prefix, AIMessage("ok", usage_metadata=usage_exact), *after]  # type: ignore[arg-type]
    assert anchored_prompt_tokens(msgs_exact, exact, fixed_tokens=100)[0] == int(
        ours_exact * 1.5
    ) + sum(exact.count_message(m) for m in after)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    shapes=st.lists(
        st.tuples(
            st.sampled_from(["user", "ai", "ai_usage", "tool"]),
            st.integers(min_value=0, max_value=400),  # words
            st.floats(min_value=0.3, max_value=3.0),  # reported / our count
        ),
        max_size=12,
    ),
    fixed=st.integers(min_value=0, max_value=5_000),
    model=st.sampled_from(["gpt-4o", "qwen2.5-coder-1.5b"]),
)
def test_an_anchor_given_the_callers_count_equals_one_counted_here(
    shapes: list[tuple[str, int, float]], fixed: int, model: str
) -> None:
    """Passing the count the caller already has (``unanchored``) changes nothing."""
    counter = TokenCounter(model)
    msgs: list[BaseMessage] = []
    for n, (kind, words, ratio) in enumerate(shapes):
        text = "word " * words
        if kind == "user":
            msgs.append(HumanMessage(text, id=f"u{n}"))
        elif kind == "tool":
            msgs.append(ToolMessage(text, tool_call_id=f"c{n}", id=f"t{n}"))
        else:
            ai = AIMessage(text, id=f"a{n}")
            if kind == "ai_usage":
                ours = fixed + counter.count_messages([*msgs, ai])
                reported = max(int(ours * ratio), 1)
                ai = AIMessage(text, id=f"a{n}", usage_metadata=_usage(reported, 0))  # type: ignore[arg-type]
            msgs.append(ai)
    unanchored = fixed + counter.count_messages(msgs)
    assert anchored_prompt_tokens(
        msgs, counter, fixed_tokens=fixed, unanchored=unanchored
    ) == anchored_prompt_tokens(msgs, counter, fixed_tokens=fixed)
