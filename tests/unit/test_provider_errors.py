"""Tests for agentgraph.providers.provider_errors, on real provider error texts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import httpx2
import openai
import pytest
from langchain_core.exceptions import ContextOverflowError
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from agentgraph.providers.provider_errors import (
    MESSAGE_MAX_CHARS,
    MIN_OUTPUT_TOKENS,
    ProviderError,
    classify_error_text,
    classify_provider_error,
    redact_secrets,
    shrink_max_tokens,
    stated_context_window,
)

FIXTURE_FILE = Path(__file__).parents[1] / "fixtures" / "provider_errors.json"
ENDPOINT = "http://testserver/v1"

# Real texts as the providers return them (collected from public bug reports and
# provider docs). Each: (provider, status, body, kind, (prompt, limit, requested)).
REAL_ERRORS: list[tuple[str, int | None, Any, str, tuple[int | None, int | None, int | None]]] = [
    (
        "openai",
        400,
        {
            "error": {
                "message": "This model's maximum context length is 128000 tokens. However, your "
                "messages resulted in 204308 tokens. Please reduce the length of the messages.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
        "overflow",
        (204308, 128000, None),
    ),
    (
        "openai",
        400,
        {
            "error": {
                "message": "This model's maximum context length is 8192 tokens. However, you "
                "requested 8554 tokens (7554 in the messages, 1000 in the completion). Please "
                "reduce the length of the messages or completion.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
        "output_overflow",
        (7554, 8192, 1000),
    ),
    (
        "openai-legacy",
        400,
        "This model's maximum context length is 4097 tokens, however you requested 6539 tokens "
        "(6283 in your prompt; 256 for the completion). Please reduce your prompt; or completion "
        "length.",
        "overflow",
        (6283, 4097, 256),
    ),
    (
        "openai-responses",
        400,
        {
            "error": {
                "message": "Your input exceeds the context window of this model. Please adjust "
                "your input and try again.",
                "type": "invalid_request_error",
                "param": "input",
                "code": "context_length_exceeded",
            }
        },
        "overflow",
        (None, None, None),
    ),
    (
        "anthropic",
        400,
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "prompt is too long: 219898 tokens > 200000 maximum",
            },
            "request_id": "req_011CVjxiYzEFcAQC4Fk87zw2",
        },
        "overflow",
        (219898, 200000, None),
    ),
    (
        "anthropic",
        400,
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "input length and `max_tokens` exceed context limit: 188240 + 21333 > "
                "200000, decrease input length or `max_tokens` and try again",
            },
        },
        "output_overflow",
        (188240, 200000, 21333),
    ),
    (
        "vllm",
        400,
        {
            "object": "error",
            "message": "This model's maximum context length is 16384 tokens. However, you "
            "requested 122946 tokens (112946 in the messages, 10000 in the completion). Please "
            "reduce the length of the messages or completion.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
        "overflow",
        (112946, 16384, 10000),
    ),
    (
        "vllm",
        400,
        {
            "object": "error",
            "message": "'max_tokens' or 'max_completion_tokens' is too large: 30000. This "
            "model's maximum context length is 32768 tokens and your request has 5000 input "
            "tokens (30000 > 32768 - 5000).",
            "type": "BadRequestError",
            "code": 400,
        },
        "output_overflow",
        (5000, 32768, 30000),
    ),
    (
        "vllm",
        None,
        "ValueError: The prompt (total length 25938) is too long to fit into the model (context "
        "length 4096). Make sure that `max_model_len` is no smaller than the number of text "
        "tokens plus multimodal tokens.",
        "overflow",
        (25938, 4096, None),
    ),
    (
        "llama.cpp",
        400,
        {
            "error": {
                "code": 400,
                "message": "request (4476 tokens) exceeds the available context size (4096 tokens)",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 4476,
                "n_ctx": 4096,
            }
        },
        "overflow",
        (4476, 4096, None),
    ),
    (
        "llama.cpp",
        400,
        {
            "error": {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 9000,
                "n_ctx": 8192,
            }
        },
        "overflow",
        (9000, 8192, None),
    ),
    (
        "ollama",
        400,
        {"error": "the input length exceeds the context length"},
        "overflow",
        (None,) * 3,
    ),
    ("ollama", 500, {"error": "input exceeds context length"}, "overflow", (None,) * 3),
    (
        "deepseek",
        400,
        {
            "error": {
                "message": "This model's maximum context length is 65536 tokens. However, you "
                "requested 70221 tokens (62029 in the messages, 8192 in the completion). Please "
                "reduce the length of the messages or completion.",
                "type": "invalid_request_error",
                "param": None,
                "code": "invalid_request_error",
            }
        },
        "output_overflow",
        (62029, 65536, 8192),
    ),
    (
        "gemini",
        400,
        [
            {
                "error": {
                    "code": 400,
                    "message": "The input token count (1054016) exceeds the maximum number of "
                    "tokens allowed (1048576).",
                    "errors": [{"domain": "global", "reason": "badRequest"}],
                    "status": "INVALID_ARGUMENT",
                }
            }
        ],
        "overflow",
        (1054016, 1048576, None),
    ),
    (
        "mistral",
        400,
        {
            "object": "error",
            "message": "Prompt contains 33185 tokens and 0 draft tokens, too large for model "
            "with 32768 maximum context length",
            "type": "invalid_request_message_order",
            "param": None,
            "code": "3051",
        },
        "overflow",
        (33185, 32768, None),
    ),
    (
        "groq",
        400,
        {
            "error": {
                "message": "Please reduce the length of the messages or completion.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
        "overflow",
        (None, None, None),
    ),
    (
        "cerebras",
        400,
        "Please reduce the length of the messages or completion. Current length is 42328 while "
        "limit is 40000",
        "overflow",
        (42328, 40000, None),
    ),
    (
        "openrouter",
        400,
        {
            "error": {
                "message": "This endpoint's maximum context length is 200000 tokens. However, you "
                "requested about 250000 tokens (240000 of text input, 10000 in the output). "
                'Please reduce the length of either one, or use the "middle-out" transform to '
                "compress your prompt automatically.",
                "code": 400,
            }
        },
        "overflow",
        (240000, 200000, 10000),
    ),
    (
        "tgi",
        422,
        {
            "error": "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 8192. "
            "Given: 7000 `inputs` tokens and 2000 `max_new_tokens`",
            "error_type": "validation",
        },
        "output_overflow",
        (7000, 8192, 2000),
    ),
    # --- not overflows -------------------------------------------------------------
    (
        "openai",
        429,
        {
            "error": {
                "message": "Rate limit reached for gpt-4o in organization org-abc on tokens per "
                "min (TPM): Limit 30000, Used 29500, Requested 1200. Please try again in 1.4s. "
                "Visit https://platform.openai.com/account/rate-limits to learn more.",
                "type": "tokens",
                "param": None,
                "code": "rate_limit_exceeded",
            }
        },
        "rate_limit",
        (None, None, None),
    ),
    (
        "openai",
        429,
        {
            "error": {
                "message": "Request too large for gpt-4o in organization org-abc on tokens per "
                "min (TPM): Limit 30000, Requested 36278. The input or output tokens must be "
                "reduced in order to run successfully. Visit "
                "https://platform.openai.com/account/rate-limits to learn more.",
                "type": "tokens",
                "param": None,
                "code": "rate_limit_exceeded",
            }
        },
        "rate_limit",
        (36278, 30000, None),
    ),
    (
        "groq",
        413,
        {
            "error": {
                "message": "Request too large for model `llama3-70b-8192` in organization "
                "`org_01` on tokens per minute (TPM): Limit 6000, Requested 10141, please reduce "
                "your message size and try again.",
                "type": "tokens",
                "code": "rate_limit_exceeded",
            }
        },
        "rate_limit",
        (10141, 6000, None),
    ),
    (
        "anthropic",
        429,
        {
            "type": "error",
            "error": {
                "type": "rate_limit_error",
                "message": "This request would exceed the rate limit for your organization of "
                "40,000 input tokens per minute. For details, refer to: "
                "https://docs.claude.com/en/api/rate-limits.",
            },
        },
        "rate_limit",
        (None, None, None),
    ),
    (
        "gemini",
        429,
        {
            "error": {
                "code": 429,
                "message": "You exceeded your current quota for generate_content_free_tier_"
                "input_token_count. Please retry in 33.5s.",
                "status": "RESOURCE_EXHAUSTED",
                "details": [{"retryDelay": "33s"}],
            }
        },
        "rate_limit",
        (None, None, None),
    ),
    (
        "openai",
        429,
        {
            "error": {
                "message": "You exceeded your current quota, please check your plan and billing "
                "details.",
                "type": "insufficient_quota",
                "param": None,
                "code": "insufficient_quota",
            }
        },
        "auth",
        (None, None, None),
    ),
    (
        "anthropic",
        529,
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        "transient",
        (None, None, None),
    ),
    (
        "openai",
        500,
        {
            "error": {
                "message": "The server had an error while processing your request. Sorry about "
                "that!",
                "type": "server_error",
            }
        },
        "transient",
        (None, None, None),
    ),
    ("proxy", 502, "<html><body><h1>502 Bad Gateway</h1></body></html>", "transient", (None,) * 3),
    (
        "openai",
        401,
        {
            "error": {
                "message": "Incorrect API key provided: sk-proj-********************abcd. You can "
                "find your API key at https://platform.openai.com/account/api-keys.",
                "type": "invalid_request_error",
                "param": None,
                "code": "invalid_api_key",
            }
        },
        "auth",
        (None, None, None),
    ),
    (
        "anthropic",
        403,
        {
            "type": "error",
            "error": {
                "type": "permission_error",
                "message": "Your API key does not have permission to use the specified resource.",
            },
        },
        "auth",
        (None, None, None),
    ),
    (
        "openai",
        404,
        {
            "error": {
                "message": "The model `gpt-5-turbo` does not exist or you do not have access to "
                "it.",
                "type": "invalid_request_error",
                "param": None,
                "code": "model_not_found",
            }
        },
        "not_found",
        (None, None, None),
    ),
    (
        "ollama",
        404,
        {"error": 'model "llama3" not found, try pulling it first'},
        "not_found",
        (None,) * 3,
    ),
    (
        "openai",
        400,
        {
            "error": {
                "message": "max_tokens is too large: 8192. This model supports at most 4096 "
                "completion tokens, whereas you provided 8192.",
                "type": "invalid_request_error",
                "param": "max_tokens",
                "code": None,
            }
        },
        "bad_request",
        (None, None, None),
    ),
    (
        "openai",
        400,
        {
            "error": {
                "message": "Invalid parameter: messages with role 'tool' must be a response to a "
                "preceeding message with 'tool_calls'.",
                "type": "invalid_request_error",
                "param": "messages.[2].role",
                "code": None,
            }
        },
        "bad_request",
        (None, None, None),
    ),
]


def _body_text(body: Any) -> str:
    return body if isinstance(body, str) else json.dumps(body)


def _sdk_error(status: int, body: Any, headers: dict[str, str] | None = None) -> Exception:
    """The exception the real openai SDK raises for this response (no network)."""

    def handler(request: httpx2.Request) -> httpx2.Response:
        if isinstance(body, str):
            return httpx2.Response(status, text=body, headers=headers or {})
        return httpx2.Response(status, json=body, headers=headers or {})

    client = openai.OpenAI(
        api_key="sk-test-0123456789abcdef",
        base_url=ENDPOINT,
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
        max_retries=0,
    )
    try:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    except Exception as exc:
        return exc
    raise AssertionError("the mock endpoint did not fail")


@pytest.mark.parametrize(
    ("provider", "status", "body", "kind", "numbers"),
    REAL_ERRORS,
    ids=[f"{e[0]}-{e[1]}-{e[3]}-{i}" for i, e in enumerate(REAL_ERRORS)],
)
def test_real_texts_classify(
    provider: str,
    status: int | None,
    body: Any,
    kind: str,
    numbers: tuple[int | None, int | None, int | None],
) -> None:
    err = classify_error_text(status, _body_text(body))
    assert err.kind == kind, (provider, err)
    assert (err.prompt_tokens, err.limit_tokens, err.requested_output_tokens) == numbers
    assert err.status == status
    assert len(err.message) <= MESSAGE_MAX_CHARS and "\n" not in err.message
    if status is not None:
        via_sdk = classify_provider_error(_sdk_error(status, body))
        assert via_sdk.kind == kind, (provider, via_sdk)
        assert via_sdk.status == status
        assert (
            via_sdk.prompt_tokens,
            via_sdk.limit_tokens,
            via_sdk.requested_output_tokens,
        ) == numbers
    # Without the status (a wrapped or stream error), the text alone decides.
    if kind in ("overflow", "output_overflow", "rate_limit"):
        assert classify_error_text(None, _body_text(body)).kind == kind


# The fixture file names what the brief calls "bad_request" "invalid_request".
FIXTURE_KIND_ALIASES = {"invalid_request": "bad_request"}


def test_fixture_file_entries_classify() -> None:
    entries = json.loads(FIXTURE_FILE.read_text(encoding="utf-8"))
    assert entries, "fixture file is empty"
    for entry in entries:
        status, body = entry["status"], entry["body"]
        kind = FIXTURE_KIND_ALIASES.get(entry["kind"], entry["kind"])
        err = classify_error_text(status, _body_text(body))
        assert err.kind == kind, (entry["provider"], body, err)
        if isinstance(status, int):
            via_sdk = classify_provider_error(_sdk_error(status, body))
            assert via_sdk == err, (entry["provider"], via_sdk, err)
        if err.is_overflow:
            # Input tokens include function schemas when the provider counts them apart.
            if "prompt_tokens" in entry:
                expected = entry["prompt_tokens"] + entry.get("functions_tokens", 0)
                assert err.prompt_tokens == expected, (entry, err)
            if "window" in entry:
                assert err.limit_tokens == entry["window"], (entry, err)
            if "max_tokens" in entry:
                assert err.requested_output_tokens == entry["max_tokens"], (entry, err)
        if err.kind == "rate_limit" and "retry_after_s" in entry:
            assert err.retry_after_s == entry["retry_after_s"], (entry, err)


def test_tpm_rate_limit_is_never_an_overflow() -> None:
    """A text with "token" and "context" words is not an overflow when it is a rate limit."""
    texts = [
        "Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000, Used 30000, "
        "Requested 500. Please try again in 1s.",
        "Error: too many tokens per minute for this context; TPM exceeded",
        "This request would exceed the rate limit for your organization of 40,000 input tokens "
        "per minute.",
    ]
    for text in texts:
        for status in (None, 429):
            err = classify_error_text(status, text)
            assert err.kind == "rate_limit", (status, text)
            assert not err.is_overflow
    # Generic mentions of "context" or "token" alone are not overflows either.
    for text in ("invalid token in request body", "context manager exited", "bad tokenizer"):
        assert classify_error_text(400, text).kind == "bad_request"
        assert classify_error_text(None, text).kind == "other"


def test_request_larger_than_tpm_limit_is_not_retryable() -> None:
    small = classify_error_text(
        429, "Rate limit reached ... (TPM): Limit 30000, Used 29000, Requested 2000"
    )
    assert small.kind == "rate_limit" and small.retryable
    big = classify_error_text(429, "Request too large ... (TPM): Limit 30000, Requested 36278.")
    assert big.kind == "rate_limit" and not big.retryable
    assert (big.prompt_tokens, big.limit_tokens) == (36278, 30000)


def test_retry_after_headers() -> None:
    body = {"error": {"message": "Rate limit reached for requests", "type": "requests"}}
    err = classify_provider_error(_sdk_error(429, body, {"retry-after": "7"}))
    assert err.retry_after_s == 7.0
    err = classify_provider_error(_sdk_error(429, body, {"retry-after-ms": "1500"}))
    assert err.retry_after_s == 1.5
    err = classify_provider_error(
        _sdk_error(
            429, body, {"x-ratelimit-reset-requests": "6m0s", "x-ratelimit-reset-tokens": "20ms"}
        )
    )
    assert err.retry_after_s == 360.0
    tokens_body = {"error": {"message": "Rate limit reached on tokens per min", "type": "tokens"}}
    err = classify_provider_error(
        _sdk_error(
            429,
            tokens_body,
            {"x-ratelimit-reset-requests": "6m0s", "x-ratelimit-reset-tokens": "1.5s"},
        )
    )
    assert err.retry_after_s == 1.5
    err = classify_provider_error(_sdk_error(429, body))
    assert err.retry_after_s is None
    # Overloaded with Retry-After: honoured for transient kinds too.
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    err = classify_provider_error(_sdk_error(529, overloaded, {"retry-after": "3"}))
    assert (err.kind, err.retry_after_s) == ("transient", 3.0)
    # Not meaningful for non-retryable kinds.
    overflow = {"error": {"message": "prompt is too long: 3 tokens > 2 maximum"}}
    assert (
        classify_provider_error(_sdk_error(400, overflow, {"retry-after": "3"})).retry_after_s
        is None
    )


def test_retry_after_from_text() -> None:
    assert classify_error_text(429, "Please try again in 6m0s.").retry_after_s == 360.0
    assert classify_error_text(429, "Please try again in 20ms.").retry_after_s == pytest.approx(
        0.02
    )
    assert classify_error_text(429, "Please retry after 86400 seconds.").retry_after_s == 86400.0
    assert classify_error_text(429, '{"retryDelay": "33s"}').retry_after_s == 33.0


def test_http_date_retry_after() -> None:
    err = classify_error_text(
        503, "Service Unavailable", headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}
    )
    assert err.kind == "transient"
    assert err.retry_after_s == 0.0  # a date in the past: retry now


def test_direct_construction_with_httpx_response() -> None:
    """SDK exceptions built by hand, as in the openai docs (plain httpx objects)."""
    request = httpx.Request("POST", "http://x/v1/chat/completions")
    body = {
        "message": "This model's maximum context length is 128000 tokens. However, your messages "
        "resulted in 130000 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "code": "context_length_exceeded",
    }
    response = httpx.Response(400, request=request, json={"error": body})
    exc = openai.BadRequestError("Error code: 400", response=response, body=body)  # type: ignore[arg-type]
    err = classify_provider_error(exc)
    assert (err.kind, err.status, err.prompt_tokens, err.limit_tokens) == (
        "overflow",
        400,
        130000,
        128000,
    )
    assert err.message.startswith("context window exceeded (HTTP 400): This model's maximum")
    rate = httpx.Response(429, request=request, headers={"retry-after": "4"}, json={})
    exc2 = openai.RateLimitError("Error code: 429", response=rate, body=None)  # type: ignore[arg-type]
    assert (classify_provider_error(exc2).kind, classify_provider_error(exc2).retry_after_s) == (
        "rate_limit",
        4.0,
    )


def test_httpx_status_errors_from_raise_for_status() -> None:
    request = httpx.Request("POST", "http://localhost:11434/api/chat")
    overflow = httpx.Response(500, request=request, json={"error": "input exceeds context length"})
    with pytest.raises(httpx.HTTPStatusError) as info:
        overflow.raise_for_status()
    err = classify_provider_error(info.value)
    assert (err.kind, err.status) == ("overflow", 500)
    assert err.message == "context window exceeded (HTTP 500): input exceeds context length"
    limited = httpx.Response(
        429, request=request, text="Too Many Requests", headers={"Retry-After": "12"}
    )
    with pytest.raises(httpx.HTTPStatusError) as info:
        limited.raise_for_status()
    err = classify_provider_error(info.value)
    assert (err.kind, err.retry_after_s, err.message) == (
        "rate_limit",
        12.0,
        "rate limited (HTTP 429): Too Many Requests",
    )


def test_connection_refused_names_the_endpoint() -> None:
    def refuse(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("[Errno 111] Connection refused", request=request)

    client = openai.OpenAI(
        api_key="sk-test",
        base_url="http://user:pw@localhost:9/v1",
        http_client=httpx2.Client(transport=httpx2.MockTransport(refuse)),
        max_retries=0,
    )
    with pytest.raises(openai.APIConnectionError) as info:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    err = classify_provider_error(info.value)
    # Nothing listens there: retrying only makes the user wait.
    assert err.kind == "unreachable" and not err.retryable
    assert err.status is None
    assert (
        "cannot reach the model endpoint at http://localhost:9/v1/chat/completions" in err.message
    )
    assert "Connection refused" in err.message
    assert "pw" not in err.message


def test_timeouts_and_dropped_connections_are_transient() -> None:
    def slow(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ReadTimeout("timed out", request=request)

    client = openai.OpenAI(
        api_key="sk-test",
        base_url=ENDPOINT,
        http_client=httpx2.Client(transport=httpx2.MockTransport(slow)),
        max_retries=0,
    )
    with pytest.raises(openai.APITimeoutError) as info:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    err = classify_provider_error(info.value)
    assert err.kind == "transient" and "timed out" in err.message

    dropped = httpx.RemoteProtocolError(
        "peer closed connection without sending complete message body (incomplete chunked read)"
    )
    err = classify_provider_error(dropped)
    assert err.kind == "transient" and "dropped" in err.message
    assert classify_provider_error(httpx.ReadError("reset")).kind == "transient"
    assert classify_provider_error(httpx.ConnectError("refused")).kind == "unreachable"
    assert classify_provider_error(httpx.ConnectTimeout("slow")).kind == "transient"
    assert classify_provider_error(ConnectionResetError(104, "reset by peer")).kind == "transient"
    assert classify_provider_error(TimeoutError()).kind == "transient"


def test_wrapped_exceptions_are_unwrapped() -> None:
    inner = _sdk_error(
        400,
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "prompt is too long: 300000 tokens > 200000 maximum",
            },
        },
    )
    try:
        try:
            raise inner
        except Exception as exc:
            raise RuntimeError("graph node failed") from exc
    except RuntimeError as outer:
        err = classify_provider_error(outer)
    assert (err.kind, err.status, err.prompt_tokens) == ("overflow", 400, 300000)


def test_generic_exceptions() -> None:
    assert classify_provider_error(ValueError("boom")).kind == "other"
    assert classify_provider_error(KeyError("x")).kind == "other"
    err = classify_provider_error(
        RuntimeError(
            "Error code: 400 - {'error': {'message': \"This model's maximum context "
            'length is 8192 tokens. However, your messages resulted in 9000 tokens."}}'
        )
    )
    assert (err.kind, err.prompt_tokens, err.limit_tokens) == ("overflow", 9000, 8192)
    assert err.message.startswith("context window exceeded: This model's maximum context")
    assert classify_provider_error(Exception("Overloaded")).kind == "transient"
    assert classify_provider_error(Exception("429 Too Many Requests")).kind == "rate_limit"


def test_langchain_wrapped_sdk_errors() -> None:
    def make_model(status: int, body: Any) -> ChatOpenAI:
        def handler(request: httpx2.Request) -> httpx2.Response:
            return httpx2.Response(status, json=body)

        client = openai.OpenAI(
            api_key="sk-test",
            base_url=ENDPOINT,
            http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
            max_retries=0,
        )
        return ChatOpenAI(
            model="m", client=client.chat.completions, api_key=SecretStr("sk-test"), max_retries=0
        )

    # langchain-openai detects this one from the message and raises ContextOverflowError.
    anthropic_compat = {"error": {"message": "prompt is too long: 210000 tokens > 200000 maximum"}}
    with pytest.raises(ContextOverflowError) as info:
        make_model(400, anthropic_compat).invoke("hi")
    err = classify_provider_error(info.value)
    assert (err.kind, err.prompt_tokens, err.limit_tokens) == ("overflow", 210000, 200000)
    # With openai>=3 the code is no longer in str(exc), so langchain-openai misses
    # context_length_exceeded and raises a plain BadRequestError: the body still tells.
    groq = {
        "error": {
            "message": "Please reduce the length of the messages or completion.",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
    }
    with pytest.raises(openai.BadRequestError) as info_groq:
        make_model(400, groq).invoke("hi")
    assert classify_provider_error(info_groq.value).kind == "overflow"
    rate = {"error": {"message": "Rate limit reached for requests", "code": "rate_limit_exceeded"}}
    with pytest.raises(openai.RateLimitError) as info2:
        make_model(429, rate).invoke("hi")
    assert classify_provider_error(info2.value).kind == "rate_limit"


def test_langchain_context_overflow_without_status() -> None:
    class StreamOverflow(ContextOverflowError):
        pass

    err = classify_provider_error(StreamOverflow("the request was too big for the model"))
    assert err.kind == "overflow"


def test_secrets_never_in_message() -> None:
    key = "sk-proj-AbCdEf0123456789AbCdEf0123456789"
    texts = [
        f"Incorrect API key provided: {key}. You can find your API key at ...",
        "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig rejected",
        "GET https://generativelanguage.googleapis.com/v1/models"
        "?key=AIzaSyA-1234567890abcdefghijklmnopqrstu failed",
        "api_key='gsk_abcdefghijklmnopqrstuvwxyz012345' is invalid",
        "x-api-key: sk-ant-api03-abcdefghijklmnop-qrstuv is invalid",
    ]
    for text in texts:
        err = classify_error_text(401, text)
        assert err.kind == "auth"
        for secret in (
            key,
            "eyJhbGciOiJIUzI1NiJ9",
            "AIzaSyA-1234567890",
            "gsk_abcdef",
            "sk-ant-api03",
        ):
            assert secret not in err.message, err.message
        assert "[redacted]" in err.message
    assert redact_secrets("no secrets here") == "no secrets here"


def test_message_is_one_short_line() -> None:
    text = "line one\nline two\t" + "x" * 1_000
    err = classify_error_text(500, text)
    assert len(err.message) == MESSAGE_MAX_CHARS
    assert err.message.endswith("…")
    assert "\n" not in err.message and "\t" not in err.message


def _output_overflow(prompt: int, limit: int, requested: int) -> ProviderError:
    return ProviderError(
        kind="output_overflow",
        status=400,
        message="x",
        prompt_tokens=prompt,
        limit_tokens=limit,
        requested_output_tokens=requested,
    )


def test_shrink_max_tokens_rule() -> None:
    # What the prompt leaves of the limit, less OUTPUT_RESERVE_TOKENS (1,000).
    assert shrink_max_tokens(_output_overflow(188_240, 200_000, 21_333), 21_333) == 10_760
    # At least MIN_OUTPUT_TOKENS when the prompt leaves room for that much.
    assert shrink_max_tokens(_output_overflow(196_500, 200_000, 8_000), 8_000) == MIN_OUTPUT_TOKENS
    # The prompt alone leaves less than MIN_OUTPUT_TOKENS: nothing helps.
    assert shrink_max_tokens(_output_overflow(197_001, 200_000, 8_000), 8_000) is None
    # Not smaller than what was sent: no help.
    assert shrink_max_tokens(_output_overflow(100_000, 200_000, 150_000), 50_000) is None
    # The current value is unknown: fall back to the requested one from the error.
    assert shrink_max_tokens(_output_overflow(100_000, 200_000, 150_000), None) == 99_000
    # Other kinds and unknown numbers.
    overflow = ProviderError(
        kind="overflow", status=400, message="x", prompt_tokens=5, limit_tokens=4
    )
    assert shrink_max_tokens(overflow, 1_000) is None
    unknown = ProviderError(kind="output_overflow", status=400, message="x")
    assert shrink_max_tokens(unknown, 1_000) is None


def test_shrink_max_tokens_from_real_anthropic_text() -> None:
    err = classify_error_text(
        400,
        "input length and `max_tokens` exceed context limit: 190000 + 20000 > 200000, decrease "
        "input length or `max_tokens` and try again",
    )
    assert err.kind == "output_overflow"
    assert shrink_max_tokens(err, 20_000) == 9_000
    # Prompt alone over the limit: a plain overflow, max_tokens cannot help.
    err = classify_error_text(
        400, "input length and `max_tokens` exceed context limit: 201000 + 20000 > 200000"
    )
    assert err.kind == "overflow"
    assert shrink_max_tokens(err, 20_000) is None


# The endpoint's window in overflow texts the brief and QA quote (the fixture file has
# the rest): llama.cpp as QA saw it, vLLM, Anthropic.
STATED_WINDOWS: list[tuple[int, Any, int]] = [
    (
        400,
        {
            "error": {
                "code": 400,
                "message": "request (9437 tokens) exceeds the available context size (4096 "
                "tokens), try increasing it",
                "type": "exceed_context_size_error",
            }
        },
        4_096,
    ),
    (
        400,
        {
            "object": "error",
            "message": "This model's maximum context length is 2048 tokens. However, you "
            "requested 3181 tokens (2925 in the messages, 256 in the completion). Please "
            "reduce the length of the messages or completion.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
        2_048,
    ),
    (
        400,
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "prompt is too long: 210000 tokens > 200000 maximum",
            },
        },
        200_000,
    ),
]


@pytest.mark.parametrize(("status", "body", "window"), STATED_WINDOWS)
def test_stated_context_window_from_quoted_texts(status: int, body: Any, window: int) -> None:
    assert stated_context_window(classify_error_text(status, _body_text(body))) == window
    assert stated_context_window(classify_provider_error(_sdk_error(status, body))) == window


def test_stated_context_window_from_every_fixture() -> None:
    """Each provider's number is read; overflows naming none, and non-overflows, give None."""
    entries = json.loads(FIXTURE_FILE.read_text(encoding="utf-8"))
    seen: dict[str, int | None] = {}
    for entry in entries:
        err = classify_error_text(entry["status"], _body_text(entry["body"]))
        stated = stated_context_window(err)
        if err.is_overflow:
            assert stated == entry.get("window"), (entry, err)
            seen[f"{entry['provider']}:{stated}"] = stated
        else:
            # A tokens-per-minute "Limit 30000" is a quota, never a window.
            assert stated is None, (entry, err)
    assert {"openai:128000", "openai:8192", "anthropic:200000", "vllm:16384", "vllm:4096"} <= set(
        seen
    )
    assert {"llama.cpp:4096", "llama.cpp:8192", "deepseek:65536", "gemini:1048576"} <= set(seen)
    # Texts without a number: OpenAI's newer one, Ollama's.
    assert {"openai:None", "ollama:None"} <= set(seen)
