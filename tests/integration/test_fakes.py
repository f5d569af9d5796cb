"""The test doubles behave like the real things they stand in for.

FakeOpenAIServer is exercised through the real client (langchain-openai's ChatOpenAI over
the real openai SDK), so anything these tests accept, the production code path accepts.
"""

from __future__ import annotations

import copy
import json
import pickle
import threading
from pathlib import Path
from typing import Annotated, Any, TypedDict

import openai
import pytest
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from pydantic import SecretStr

from tests.fakes import (
    ALL_RULES,
    DEFAULT_API_KEY,
    FakeOpenAIServer,
    ScriptedChatModel,
    ScriptExhaustedError,
    ai_text,
    ai_tools,
    cli_env,
    echo_tool_results,
    estimate_tokens,
    reply_error,
    reply_rate_limited,
    reply_reset,
    reply_text,
    reply_tools,
    server_process,
    token_estimate,
    tool_call,
    validate_request,
)

FIXTURE = Path(__file__).parents[1] / "fixtures" / "provider_errors.json"
KINDS = {"overflow", "output_overflow", "rate_limit", "transient", "auth", "not_found"}
KINDS_EXTRA = {"invalid_request"}
THREADS = 8


@tool
def read_file(path: str) -> str:
    """Read a file and return its content."""
    return f"content of {path}: FACT-42"


@tool
def grep(pattern: str) -> str:
    """Search files for a pattern."""
    return f"no match for {pattern}"


def client(server: FakeOpenAIServer, **kw: Any) -> ChatOpenAI:
    kw.setdefault("max_retries", 0)
    kw.setdefault("api_key", "k")
    kw.setdefault("model", "m")
    return ChatOpenAI(base_url=server.url, **kw)


def aggregate(chunks: list[Any]) -> AIMessageChunk:
    total: AIMessageChunk = chunks[0]
    for c in chunks[1:]:
        total = total + c
    return total


def chunk_count(chunks: list[Any], attr: str) -> int:
    return sum(1 for c in chunks if getattr(c, attr))


def tool_turn(*ids: str) -> dict[str, Any]:
    calls = [
        {"id": i, "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
        for i in ids
    ]
    return {"role": "assistant", "content": None, "tool_calls": calls}


def tool_result(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "ok"}


TOOLS = [
    {
        "type": "function",
        "function": {"name": "read_file", "parameters": {"type": "object", "properties": {}}},
    }
]


def body(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"model": "m", "messages": list(messages), "tools": TOOLS}
    out.update(extra)
    return out


USER = {"role": "user", "content": "hi"}
SYSTEM = {"role": "system", "content": "be brief"}


# --- FakeOpenAIServer through the real client -------------------------------------------


def test_invoke_parses_tool_calls_and_reports_usage() -> None:
    script = [reply_tools(("read_file", {"path": "a.py"}), ("grep", {"pattern": "x"}))]
    with FakeOpenAIServer(script) as server:
        msg = client(server).bind_tools([read_file, grep]).invoke("look")
        sent = server.requests[0]
    assert [(c["name"], c["args"]) for c in msg.tool_calls] == [
        ("read_file", {"path": "a.py"}),
        ("grep", {"pattern": "x"}),
    ]
    assert len({c["id"] for c in msg.tool_calls}) == 2
    assert msg.usage_metadata is not None
    assert msg.usage_metadata["input_tokens"] == token_estimate(sent)
    assert [t["function"]["name"] for t in sent["tools"]] == ["read_file", "grep"]
    assert server.violations == []


def test_stream_yields_tokens_tool_call_deltas_and_usage() -> None:
    script = [
        reply_text("one two three four"),
        reply_tools(("read_file", {"path": "a/very/long/path/name.py"}), content="checking"),
    ]
    with FakeOpenAIServer(script) as server:
        model = client(server, stream_usage=True).bind_tools([read_file])
        text_chunks = list(model.stream("hi"))
        tool_chunks = list(model.stream("hi"))
        sent = server.requests
    text = aggregate(text_chunks)
    assert text.content == "one two three four"
    assert chunk_count(text_chunks, "content") >= 4  # really token by token
    calls = aggregate(tool_chunks)
    assert calls.content == "checking"
    assert calls.tool_calls[0]["args"] == {"path": "a/very/long/path/name.py"}
    assert chunk_count(tool_chunks, "tool_call_chunks") > 2  # arguments in pieces
    assert calls.usage_metadata is not None
    assert calls.usage_metadata["input_tokens"] == token_estimate(sent[1])
    assert sent[0]["stream"] is True
    assert sent[0]["stream_options"] == {"include_usage": True}


def test_full_tool_round_trip_is_accepted_by_strict_mode() -> None:
    script: list[Any] = [reply_tools(("read_file", {"path": "a.py"})), "the answer"]
    with FakeOpenAIServer(script) as server:
        model = client(server).bind_tools([read_file])
        history: list[BaseMessage] = [SystemMessage("sys"), HumanMessage("read a.py")]
        ai = model.invoke(history)
        history += [ai, ToolMessage("data", tool_call_id=ai.tool_calls[0]["id"])]
        final = model.invoke(history)
        assert server.statuses == [200, 200]
    assert final.content == "the answer"
    assert server.violations == []


def test_strict_rejects_orphan_tool_message_with_openai_body() -> None:
    with FakeOpenAIServer(["never sent"]) as server:
        model = client(server).bind_tools([read_file])
        with pytest.raises(openai.BadRequestError) as info:
            model.invoke([HumanMessage("hi"), ToolMessage("x", tool_call_id="call_zz")])
        assert server.remaining == 1  # a rejected request consumes no reply
    err = info.value.body
    assert isinstance(err, dict)
    assert err["message"].startswith("Invalid parameter: messages with role 'tool' must be")
    assert err["param"] == "messages.[1].role"
    assert err["type"] == "invalid_request_error"
    assert len(server.violations) == 1
    assert server.violations[0].startswith("tool_message_orphan")


def test_strict_rejects_unanswered_tool_call_listing_ids() -> None:
    dangling = AIMessage("", tool_calls=[tool_call("read_file", {}, "call_a")])
    with FakeOpenAIServer(["x"]) as server:
        model = client(server).bind_tools([read_file])
        with pytest.raises(openai.BadRequestError) as info:
            model.invoke([HumanMessage("hi"), dangling, HumanMessage("go on")])
    assert isinstance(info.value.body, dict)
    assert info.value.body["message"].endswith("did not have response messages: call_a")
    assert any(v.startswith("tool_call_unanswered") for v in server.violations)


def test_non_strict_server_accepts_what_strict_rejects() -> None:
    with FakeOpenAIServer(["fine"], strict=False) as server:
        out = client(server).invoke([HumanMessage("hi"), ToolMessage("x", tool_call_id="c")])
    assert out.content == "fine"
    assert server.violations == []


def test_overflow_is_openai_context_length_exceeded() -> None:
    window = 50
    with FakeOpenAIServer(["unused"], window=window) as server:
        with pytest.raises(openai.BadRequestError) as info:
            client(server).invoke("x" * 400)
        tokens = server.token_estimate(server.requests[0])
    assert tokens > window
    assert info.value.code == "context_length_exceeded"
    assert isinstance(info.value.body, dict)
    assert info.value.body["message"] == (
        f"This model's maximum context length is {window} tokens. However, your messages "
        f"resulted in {tokens} tokens. Please reduce the length of the messages."
    )
    assert info.value.body["param"] == "messages"
    assert server.overflow_count == 1


def test_window_boundary_uses_token_estimate_exactly() -> None:
    request = {"model": "m", "messages": [{"role": "user", "content": "y" * 203}]}
    tokens = token_estimate(request)
    assert tokens == 51 + 4  # ceil(203 / 4) + 4 for the message
    with FakeOpenAIServer(["ok", "ok"], window=tokens) as at_limit:
        assert client(at_limit).invoke("y" * 203).content == "ok"
    with (
        FakeOpenAIServer(["ok"], window=tokens - 1) as below,
        pytest.raises(openai.BadRequestError),
    ):
        client(below).invoke("y" * 203)
    assert below.overflow_count == 1


def test_count_max_tokens_uses_the_you_requested_text() -> None:
    with FakeOpenAIServer(["ok"], window=100, count_max_tokens=True) as server:
        with pytest.raises(openai.BadRequestError) as info:
            client(server, max_tokens=99).invoke("hello")
        tokens = token_estimate(server.requests[0])
    assert isinstance(info.value.body, dict)
    assert (
        f"you requested {tokens + 99} tokens ({tokens} in the messages, 99 in"
        in (info.value.body["message"])
    )


def test_cut_at_output_limit_stops_a_text_answer_at_max_tokens_as_a_real_server_does() -> None:
    with FakeOpenAIServer(["a" * 400, "b" * 40], cut_at_output_limit=True) as server:
        cut = client(server, max_tokens=25).invoke("hello")
        whole = client(server, max_tokens=25).invoke("hello")
    assert cut.content == "a" * 100
    assert cut.response_metadata["finish_reason"] == "length"
    assert whole.content == "b" * 40
    assert whole.response_metadata["finish_reason"] == "stop"
    assert server.cut_requests == [server.requests[0]]


def test_cut_at_output_limit_stops_at_the_room_the_window_leaves() -> None:
    with FakeOpenAIServer(["c" * 4000], window=300, cut_at_output_limit=True) as server:
        out = client(server).invoke("hello")
        room = 300 - token_estimate(server.requests[0])
    assert out.content == "c" * (room * 4)
    assert out.response_metadata["finish_reason"] == "length"


def test_an_output_cap_cuts_a_text_answer_the_request_set_no_limit_for() -> None:
    with FakeOpenAIServer(["e" * 400], output_cap=30) as server:
        out = client(server).invoke("hello")
    assert out.content == "e" * 120
    assert out.response_metadata["finish_reason"] == "length"


def test_cut_at_output_limit_leaves_tool_calls_and_servers_without_it_whole() -> None:
    call = {"tool_calls": [{"name": "read_file", "arguments": {"path": "x" * 400}}]}
    with FakeOpenAIServer([call], cut_at_output_limit=True) as cutting:
        called = client(cutting, max_tokens=10).bind_tools(TOOLS).invoke("hello")
    with FakeOpenAIServer(["d" * 400]) as plain:
        kept = client(plain, max_tokens=10).invoke("hello")
    assert called.tool_calls[0]["args"] == {"path": "x" * 400}
    assert kept.content == "d" * 400


def test_token_estimate_counts_contents_arguments_tools_and_messages() -> None:
    request = body(
        {"role": "user", "content": [{"type": "text", "text": "abcd"}]},
        {
            "role": "assistant",
            "content": "efgh",
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "n", "arguments": "1234"}}
            ],
        },
    )
    tools_chars = len(json.dumps(TOOLS, separators=(",", ":"), sort_keys=True))
    expected = -(-(4 + 4 + 4 + tools_chars) // 4) + 2 * 4
    assert token_estimate(request) == expected


def test_rate_limit_then_success_with_client_retries() -> None:
    with FakeOpenAIServer([reply_rate_limited(), "after retry"]) as server:
        out = client(server, max_retries=1).invoke("hi")
        assert server.statuses == [429, 200]
    assert out.content == "after retry"


def test_rate_limit_without_retries_raises_with_real_body_and_headers() -> None:
    server = FakeOpenAIServer([reply_rate_limited()])
    with server, pytest.raises(openai.RateLimitError) as info:
        client(server).invoke("hi")
    assert info.value.code == "rate_limit_exceeded"
    assert "tokens per min (TPM)" in info.value.message
    assert info.value.response.headers["retry-after"] == "1"


def test_server_errors_are_raised_by_status() -> None:
    overloaded = reply_error(503, {"error": {"message": "overloaded", "type": "server_error"}})
    with FakeOpenAIServer([overloaded, reply_error(500, "plain text failure")]) as server:
        with pytest.raises(openai.InternalServerError) as first:
            client(server).invoke("hi")
        with pytest.raises(openai.InternalServerError) as second:
            client(server).invoke("hi")
    assert first.value.status_code == 503
    assert second.value.status_code == 500


@pytest.mark.parametrize("hard", [False, True])
def test_mid_stream_reset_raises_after_partial_tokens(hard: bool) -> None:
    with FakeOpenAIServer([reply_reset(after_chunks=3, hard=hard)]) as server:
        received: list[str] = []
        with pytest.raises(openai.APIConnectionError):
            for chunk in client(server).stream("hi"):
                received.append(str(chunk.content))
    assert "".join(received).startswith("This ")
    assert server.statuses == [0]


def test_reset_of_non_streaming_request_is_a_connection_error() -> None:
    with FakeOpenAIServer([reply_reset(), "second try"]) as server:
        with pytest.raises(openai.APIConnectionError):
            client(server).invoke("hi")
        assert client(server, max_retries=1).invoke("hi").content == "second try"


def test_auth_required_and_key_masked_in_error() -> None:
    secret = "sk-wrong-key-5678"
    with FakeOpenAIServer(["ok"], require_key="sk-right") as server:
        with pytest.raises(openai.AuthenticationError) as info:
            client(server, api_key=secret).invoke("hi")
        assert client(server, api_key="sk-right").invoke("hi").content == "ok"
    assert info.value.code == "invalid_api_key"
    assert secret not in info.value.message
    assert "sk-**********5678" in info.value.message
    assert [h["authorization"] for h in server.request_headers] == [
        f"Bearer {secret}",
        "Bearer sk-right",
    ]


def test_unknown_model_is_404_model_not_found() -> None:
    with FakeOpenAIServer(["ok"], known_models={"m"}) as server:
        with pytest.raises(openai.NotFoundError) as info:
            client(server, model="gpt-9").invoke("hi")
        listed = openai.OpenAI(base_url=server.url, api_key="k").models.list()
    assert info.value.code == "model_not_found"
    assert "The model `gpt-9` does not exist" in info.value.message
    assert [m.id for m in listed.data] == ["m"]


def test_callable_reply_sees_the_request() -> None:
    def echo(request: dict[str, Any]) -> str:
        return "you said " + request["messages"][-1]["content"]

    with FakeOpenAIServer([echo]) as server:
        assert client(server).invoke("ping").content == "you said ping"


def test_on_exhausted_modes() -> None:
    with FakeOpenAIServer(["only"], on_exhausted="raise") as server:
        assert client(server).invoke("a").content == "only"
        with pytest.raises(openai.InternalServerError):
            client(server).invoke("b")
    assert server.violations == ["script_exhausted: script exhausted after 1 replies"]
    with FakeOpenAIServer([], on_exhausted="answer") as server:
        assert client(server).invoke("a").content == "done"
    with FakeOpenAIServer(["again"]) as server:
        assert [client(server).invoke("a").content for _ in range(2)] == ["again", "again"]


def test_concurrent_requests_each_consume_one_reply() -> None:
    replies = [f"r{i}" for i in range(THREADS)]
    results: list[str] = []
    lock = threading.Lock()
    with FakeOpenAIServer(replies, on_exhausted="raise") as server:
        model = client(server)

        def call() -> None:
            content = str(model.invoke("hi").content)
            with lock:
                results.append(content)

        threads = [threading.Thread(target=call) for _ in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert sorted(results) == sorted(replies)
    assert server.violations == []


def test_unknown_reply_keys_and_rules_are_rejected_early() -> None:
    with pytest.raises(ValueError, match="unknown server reply keys"):
        FakeOpenAIServer([{"contnet": "typo"}])
    with pytest.raises(ValueError, match="unknown strict rules"):
        FakeOpenAIServer(disabled_rules={"no_such_rule"})


def test_disabled_rule_lets_that_violation_through() -> None:
    orphan = [HumanMessage("hi"), ToolMessage("x", tool_call_id="c")]
    rules = {"tool_message_orphan", "tool_history_needs_tools"}
    with FakeOpenAIServer(["ok"], disabled_rules=rules) as server:
        assert client(server).invoke(orphan).content == "ok"
    assert server.violations == []


def test_server_in_subprocess_serves_script_and_reports(tmp_path: Path) -> None:
    script = [reply_text("from child"), reply_tools(("read_file", {"path": "x"}))]
    with server_process(script, tmp_path, window=4096, require_key="sk-child") as child:
        model = client_for_url(child.url, api_key="sk-child")
        assert model.invoke("hi").content == "from child"
    assert child.report["violations"] == []
    assert child.report["statuses"] == [200]
    assert child.report["requests"][0]["messages"] == [{"role": "user", "content": "hi"}]
    assert child.report["remaining"] == 1


def client_for_url(url: str, api_key: str) -> ChatOpenAI:
    return ChatOpenAI(base_url=url, api_key=SecretStr(api_key), model="m", max_retries=0)


# --- strict validation, pure ------------------------------------------------------------

VALID_CASES = {
    "plain": body(SYSTEM, USER),
    "round_trip": body(USER, tool_turn("a", "b"), tool_result("b"), tool_result("a"), USER),
    "developer_first": body({"role": "developer", "content": "x"}, USER),
    "final_assistant_prefill_may_be_empty": body(USER, {"role": "assistant", "content": ""}),
    "image_part": body(
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:x"}}]}
    ),
}

INVALID_CASES = {
    "orphan_tool": (body(USER, tool_result("a")), "tool_message_orphan", "messages.[1].role"),
    "unanswered": (body(USER, tool_turn("a", "b"), tool_result("a")), "tool_call_unanswered", None),
    "message_between": (
        body(USER, tool_turn("a"), USER, tool_result("a")),
        "tool_call_unanswered",
        "messages.[2].role",
    ),
    "extra_result": (
        body(USER, tool_turn("a"), tool_result("a"), tool_result("zz")),
        "tool_message_orphan",
        "messages.[3].role",
    ),
    "duplicate_result": (
        body(USER, tool_turn("a"), tool_result("a"), tool_result("a")),
        "tool_message_orphan",
        "messages.[3].role",
    ),
    "duplicate_call_ids": (
        body(USER, tool_turn("a"), tool_result("a"), tool_turn("a"), tool_result("a")),
        "tool_call_id_unique",
        None,
    ),
    "bad_role": (body({"role": "human", "content": "x"}), "valid_role", "messages.[0].role"),
    "assistant_first": (
        body(SYSTEM, {"role": "assistant", "content": "x"}, USER),
        "first_message_user",
        "messages.[1].role",
    ),
    "empty_user": (body({"role": "user", "content": "  "}), "non_empty_content", None),
    "assistant_null_without_calls": (
        body(USER, {"role": "assistant", "content": None}, USER),
        "content_type",
        "messages.[1].content",
    ),
    "bad_part_type": (
        body({"role": "user", "content": [{"type": "video", "video": "x"}]}),
        "content_type",
        "messages.[0].content.[0].type",
    ),
    "bad_arguments_json": (
        body(
            USER,
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{"}}
                ],
            },
            tool_result("a"),
        ),
        "tool_call_shape",
        None,
    ),
    "bad_tool_name": (
        {
            "model": "m",
            "messages": [USER],
            "tools": [{"type": "function", "function": {"name": "read file"}}],
        },
        "tools_schema",
        "tools[0].function.name",
    ),
    "tool_params_not_object": (
        {
            "model": "m",
            "messages": [USER],
            "tools": [
                {"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}
            ],
        },
        "tools_schema",
        "tools[0].function.parameters",
    ),
    "duplicate_tool_names": ({**body(USER), "tools": TOOLS + TOOLS}, "tools_schema", None),
    "empty_tools": ({**body(USER), "tools": []}, "tools_schema", "tools"),
    "tool_choice_without_tools": (
        {"model": "m", "messages": [USER], "tool_choice": "auto"},
        "tool_choice",
        "tool_choice",
    ),
    "tool_history_without_tools": (
        {"model": "m", "messages": [USER, tool_turn("a"), tool_result("a")]},
        "tool_history_needs_tools",
        "tools",
    ),
    "empty_messages": ({"model": "m", "messages": []}, "request_shape", "messages"),
}


@pytest.mark.parametrize("name", sorted(VALID_CASES))
def test_validate_accepts(name: str) -> None:
    assert validate_request(VALID_CASES[name]) == []


@pytest.mark.parametrize("name", sorted(INVALID_CASES))
def test_validate_rejects(name: str) -> None:
    request, rule, param = INVALID_CASES[name]
    before = copy.deepcopy(request)
    found = validate_request(request)
    assert request == before  # pure
    assert rule in {v.rule for v in found}
    assert rule in ALL_RULES or rule == "request_shape"
    if param is not None:
        assert param in {v.param for v in found if v.rule == rule}


# --- ScriptedChatModel ------------------------------------------------------------------


def test_scripted_model_fills_unique_ids_across_instances() -> None:
    script = [ai_tools(("read_file", {"path": "a"}), ("grep", {"pattern": "b"}))]
    first, second = ScriptedChatModel(script), ScriptedChatModel(script)
    a, b = first.invoke("x"), second.invoke("x")
    ids = [m.id for m in (a, b)]
    call_ids = [c["id"] for m in (a, b) for c in m.tool_calls]
    assert all(i and i.startswith("ai-") for i in ids) and ids[0] != ids[1]
    assert all(c and c.startswith("call_") for c in call_ids)
    assert len(set(call_ids)) == 4
    assert script[0].tool_calls[0]["id"] is None  # the script itself is untouched


def test_scripted_model_records_calls_tools_and_tool_choice() -> None:
    model = ScriptedChatModel(["one", "two"])
    bound = model.bind_tools([read_file, grep], tool_choice="read_file")
    bound.invoke([HumanMessage("q1")])
    model.invoke("q2")
    assert [[m.text for m in call] for call in model.calls] == [["q1"], ["q2"]]
    assert model.bound_tools == [["read_file", "grep"], []]
    assert model.tool_choices == ["read_file", None]


def test_scripted_model_raises_scripted_exception_then_continues() -> None:
    model = ScriptedChatModel([RuntimeError("boom"), "recovered"])
    with pytest.raises(RuntimeError, match="boom"):
        model.invoke("a")
    assert model.invoke("b").content == "recovered"
    assert model.call_count == 2


def test_scripted_model_callable_echoes_tool_results() -> None:
    model = ScriptedChatModel([echo_tool_results()])
    history = [
        HumanMessage("go"),
        AIMessage("", tool_calls=[tool_call("read_file", {}, "c1")]),
        ToolMessage("FACT-42", tool_call_id="c1"),
    ]
    assert model.invoke(history).content == "tool said: FACT-42"


def test_scripted_model_exhaustion_modes() -> None:
    repeat = ScriptedChatModel(["last"])
    assert [repeat.invoke("x").content for _ in range(3)] == ["last"] * 3
    assert ScriptedChatModel([], on_exhausted="answer").invoke("x").content == "done"
    strict = ScriptedChatModel(["a"], on_exhausted="raise")
    strict.invoke("x")
    with pytest.raises(ScriptExhaustedError):
        strict.invoke("x")


def test_scripted_model_usage_estimate_and_override() -> None:
    own = AIMessage("x", usage_metadata={"input_tokens": 7, "output_tokens": 3, "total_tokens": 10})
    model = ScriptedChatModel(["abcdefgh", own])
    messages = [HumanMessage("a" * 40)]
    first = model.invoke(messages)
    assert first.usage_metadata == {"input_tokens": 10, "output_tokens": 2, "total_tokens": 12}
    assert estimate_tokens(messages) == 10
    assert model.invoke(messages).usage_metadata == own.usage_metadata


def test_scripted_model_streams_text_and_tool_call_chunks() -> None:
    model = ScriptedChatModel(
        ["alpha beta gamma", ai_tools(("read_file", {"path": "some/long/path.py"}))]
    )
    text_chunks = list(model.stream("x"))
    assert len([c for c in text_chunks if c.content]) >= 3
    assert aggregate(text_chunks).content == "alpha beta gamma"
    tool_chunks = list(model.bind_tools([read_file]).stream("x"))
    merged = aggregate(tool_chunks)
    assert merged.tool_calls[0]["args"] == {"path": "some/long/path.py"}
    assert str(merged.tool_calls[0]["id"]).startswith("call_")
    assert chunk_count(tool_chunks, "tool_call_chunks") > 1
    assert merged.usage_metadata is not None and merged.usage_metadata["output_tokens"] > 0
    assert model.call_count == 2  # streaming records once per call


def test_scripted_model_overflow_raises_openai_error_without_consuming() -> None:
    model = ScriptedChatModel(["fits"], max_input_tokens=10)
    with pytest.raises(openai.BadRequestError) as info:
        model.invoke("z" * 100)
    assert info.value.code == "context_length_exceeded"
    assert model.overflow_count == 1 and model.remaining == 1
    assert model.invoke("short").content == "fits"


def test_scripted_model_is_thread_safe() -> None:
    model = ScriptedChatModel([f"r{i}" for i in range(THREADS)], on_exhausted="raise")
    out: list[str] = []
    lock = threading.Lock()

    def call(i: int) -> None:
        text = str(model.invoke(f"q{i}").content)
        with lock:
            out.append(text)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(out) == sorted(f"r{i}" for i in range(THREADS))
    assert model.call_count == THREADS


def test_scripted_model_survives_deepcopy_and_pickle() -> None:
    model = ScriptedChatModel(["a", "b"])
    model.invoke("first")
    config = {"configurable": {"model": model}}
    assert copy.deepcopy(config)["configurable"]["model"] is model
    clone = pickle.loads(pickle.dumps(model))
    assert clone.invoke("second").content == "b"
    assert clone.call_count == 2
    assert model.call_count == 1


class _State(TypedDict):
    messages: Annotated[list[BaseMessage], add_messages]


def _agent_graph(model: Any) -> Any:
    bound = model.bind_tools([read_file])

    def agent(state: _State) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["messages"])]}

    def route(state: _State) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    graph = StateGraph(_State)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode([read_file]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, ["tools", END])
    graph.add_edge("tools", "agent")
    return graph.compile()


def test_scripted_model_in_langgraph_streams_message_tokens() -> None:
    model = ScriptedChatModel([ai_tools(("read_file", {"path": "a.py"})), echo_tool_results()])
    graph = _agent_graph(model)
    tokens = [
        chunk.content
        for chunk, meta in graph.stream(
            {"messages": [HumanMessage("read a.py")]}, stream_mode="messages"
        )
        if isinstance(chunk, AIMessageChunk) and meta["langgraph_node"] == "agent"
    ]
    assert "".join(str(t) for t in tokens) == "tool said: content of a.py: FACT-42"
    assert len([t for t in tokens if t]) > 3
    assert model.bound_tools == [["read_file"], ["read_file"]]


def test_chatopenai_agent_loop_against_strict_server_has_no_violations() -> None:
    script = [reply_tools(("read_file", {"path": "a.py"})), reply_text("it says FACT-42")]
    with FakeOpenAIServer(script, on_exhausted="raise") as server:
        graph = _agent_graph(client(server, stream_usage=True))
        result = graph.invoke({"messages": [HumanMessage("read a.py")]})
    assert result["messages"][-1].content == "it says FACT-42"
    assert server.statuses == [200, 200]
    assert server.violations == []
    assert server.requests[1]["messages"][-1]["content"] == "content of a.py: FACT-42"


def test_ai_text_builder() -> None:
    assert ScriptedChatModel([ai_text("hello")]).invoke("x").content == "hello"


# --- provider error fixture -------------------------------------------------------------


def _message_of(entry: dict[str, Any]) -> str:
    return json.dumps(entry["body"])


def test_provider_errors_fixture_is_well_formed() -> None:
    entries = json.loads(FIXTURE.read_text(encoding="utf-8"))
    assert len(entries) >= 20
    for entry in entries:
        assert {"provider", "status", "body", "kind", "source"} <= set(entry)
        assert entry["kind"] in KINDS | KINDS_EXTRA
        text = _message_of(entry)
        for key in ("window", "prompt_tokens", "max_tokens", "requested_tokens"):
            if key in entry:
                assert str(entry[key]) in text.replace(",", ""), (entry["provider"], key)
    kinds = {e["kind"] for e in entries}
    assert kinds >= KINDS
    providers = {e["provider"] for e in entries if e["kind"] == "overflow"}
    expected = {"openai", "anthropic", "vllm", "llama.cpp", "ollama", "deepseek", "gemini"}
    assert expected <= providers
    for entry in entries:
        if entry["kind"] == "output_overflow" and "window" in entry:
            prompt = entry["prompt_tokens"] + entry.get("functions_tokens", 0)
            assert prompt <= entry["window"]
            assert prompt + entry["max_tokens"] > entry["window"]
        if entry["kind"] == "overflow" and "window" in entry and "prompt_tokens" in entry:
            assert entry["prompt_tokens"] > entry["window"]


def test_fixture_openai_bodies_match_the_fake_server() -> None:
    entries = json.loads(FIXTURE.read_text(encoding="utf-8"))
    auth = next(e for e in entries if e["kind"] == "auth")
    server = FakeOpenAIServer(["ok"], require_key="sk-right")
    with server, pytest.raises(openai.AuthenticationError) as info:
        client(server, api_key=auth["sent_key"]).invoke("hi")
    assert info.value.body == auth["body"]["error"]
    orphan = next(e for e in entries if e["kind"] == "invalid_request")
    found = validate_request(body(USER, SYSTEM, USER, tool_result("x")))
    assert found[0].error_body() == orphan["body"]


def test_cli_env_drops_real_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-secret")
    monkeypatch.setenv("AGENTGRAPH_DEBUG", "1")
    env = cli_env("http://127.0.0.1:9/v1", window=4096, home=tmp_path)
    assert env["OPENAI_API_KEY"] == DEFAULT_API_KEY
    assert env["OPENAI_BASE_URL"] == "http://127.0.0.1:9/v1"
    assert env["AGENTGRAPH_CONTEXT_WINDOW"] == "4096"
    assert env["AGENTGRAPH_HOME"] == str(tmp_path)
    assert "AGENTGRAPH_DEBUG" not in env
    assert "sk-real-secret" not in env.values()
