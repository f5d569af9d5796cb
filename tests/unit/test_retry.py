"""Tests for agentgraph.providers.retry."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

import httpx2
import openai
import pytest

from agentgraph.providers.provider_errors import ProviderError, ProviderErrorKind
from agentgraph.providers.retry import (
    RETRY_AFTER_MAX_S,
    RetryPolicy,
    acall_with_retries,
    call_with_retries,
)

REQUEST = httpx2.Request("POST", "http://testserver/v1/chat/completions")


def status_error(status: int, body: Any, headers: dict[str, str] | None = None) -> Exception:
    """An openai SDK status error, built as the SDK builds it."""
    response = httpx2.Response(status, request=REQUEST, json=body, headers=headers or {})
    data = body.get("error", body) if isinstance(body, dict) else body
    cls: Any = {
        400: openai.BadRequestError,
        401: openai.AuthenticationError,
        404: openai.NotFoundError,
        429: openai.RateLimitError,
    }.get(status, openai.InternalServerError)
    exc: Exception = cls(f"Error code: {status}", response=response, body=data)
    return exc


def rate_limited(retry_after: str | None = None) -> Exception:
    headers = {"retry-after": retry_after} if retry_after is not None else None
    body = {"error": {"message": "Rate limit reached for requests", "code": "rate_limit_exceeded"}}
    return status_error(429, body, headers)


OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
OVERFLOW = {"error": {"message": "prompt is too long: 250000 tokens > 200000 maximum"}}


class Flaky:
    """Raises the given exceptions in turn, then returns ``"ok"``."""

    def __init__(self, *failures: Exception) -> None:
        self.failures = list(failures)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return "ok"


def recorder() -> tuple[list[float], Callable[[float], None]]:
    delays: list[float] = []
    return delays, delays.append


NO_JITTER = RetryPolicy(max_retries=4, base_delay_s=1.0, max_delay_s=30.0, jitter=0.0)


def test_exponential_backoff_then_success() -> None:
    fn = Flaky(status_error(529, OVERLOADED), status_error(503, {}), rate_limited())
    delays, sleep = recorder()
    seen: list[tuple[int, str, float]] = []
    result = call_with_retries(
        fn, NO_JITTER, sleep=sleep, on_retry=lambda a, e, d: seen.append((a, e.kind, d))
    )
    assert result == "ok"
    assert fn.calls == 4
    assert delays == [1.0, 2.0, 4.0]
    assert seen == [(1, "transient", 1.0), (2, "transient", 2.0), (3, "rate_limit", 4.0)]


def test_retry_after_is_honoured() -> None:
    fn = Flaky(rate_limited("7"), rate_limited("45"))
    delays, sleep = recorder()
    assert call_with_retries(fn, NO_JITTER, sleep=sleep) == "ok"
    # Retry-After wins over backoff, even above max_delay_s (an earlier retry just fails).
    assert delays == [7.0, 45.0]


def test_retry_after_beyond_limit_gives_up() -> None:
    fn = Flaky(rate_limited(str(int(RETRY_AFTER_MAX_S) + 1)))
    delays, sleep = recorder()
    with pytest.raises(openai.RateLimitError):
        call_with_retries(fn, NO_JITTER, sleep=sleep)
    assert fn.calls == 1 and delays == []


def test_non_retryable_kinds_raise_immediately() -> None:
    not_found = {"error": {"message": "The model `x` does not exist", "code": "model_not_found"}}
    bad = {"error": {"message": "Invalid parameter: messages"}}
    key = {"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}}
    for exc in (
        status_error(400, OVERFLOW),
        status_error(401, key),
        status_error(404, not_found),
        status_error(400, bad),
        ValueError("a bug, not a provider failure"),
    ):
        fn = Flaky(exc)
        delays, sleep = recorder()
        with pytest.raises(type(exc)) as info:
            call_with_retries(fn, NO_JITTER, sleep=sleep)
        assert info.value is exc  # re-raised unchanged
        assert fn.calls == 1 and delays == []


def test_request_above_tpm_limit_is_not_retried() -> None:
    body = {
        "error": {
            "message": "Request too large for gpt-4o in organization org-abc on tokens per min "
            "(TPM): Limit 30000, Requested 36278. The input or output tokens must be reduced in "
            "order to run successfully.",
            "type": "tokens",
            "code": "rate_limit_exceeded",
        }
    }
    fn = Flaky(status_error(429, body))
    delays, sleep = recorder()
    with pytest.raises(openai.RateLimitError):
        call_with_retries(fn, NO_JITTER, sleep=sleep)
    assert fn.calls == 1 and delays == []


def test_retries_exhausted_reraises_last_error() -> None:
    errors = [status_error(503, {}) for _ in range(4)]
    fn = Flaky(*errors)
    delays, sleep = recorder()
    policy = RetryPolicy(max_retries=3, base_delay_s=0.5, max_delay_s=30.0, jitter=0.0)
    with pytest.raises(openai.InternalServerError) as info:
        call_with_retries(fn, policy, sleep=sleep)
    assert info.value is errors[3]
    assert fn.calls == 4
    assert delays == [0.5, 1.0, 2.0]


def test_zero_retries() -> None:
    fn = Flaky(status_error(503, {}))
    with pytest.raises(openai.InternalServerError):
        call_with_retries(fn, RetryPolicy(max_retries=0), sleep=lambda _: None)
    assert fn.calls == 1


def test_connection_errors_are_retried() -> None:
    fn = Flaky(openai.APIConnectionError(request=REQUEST), openai.APITimeoutError(request=REQUEST))
    delays, sleep = recorder()
    assert call_with_retries(fn, NO_JITTER, sleep=sleep) == "ok"
    assert delays == [1.0, 2.0]


def test_delay_cap_and_jitter_bounds() -> None:
    err = ProviderError(kind="transient", status=503, message="x")
    policy = RetryPolicy(max_retries=10, base_delay_s=1.0, max_delay_s=30.0, jitter=0.2)
    rng = random.Random(1234)
    for attempt in range(1, 11):
        base = min(30.0, 2.0 ** (attempt - 1))
        for _ in range(50):
            delay = policy.delay_for(attempt, err, rng=rng)
            assert base * 0.8 - 1e-9 <= delay <= min(30.0, base * 1.2) + 1e-9
    assert NO_JITTER.delay_for(100, err) == 30.0
    spread = {policy.delay_for(3, err, rng=rng) for _ in range(20)}
    assert len(spread) > 1  # jitter actually varies


def test_should_retry_rules() -> None:
    policy = RetryPolicy(max_retries=2)
    transient = ProviderError(kind="transient", status=None, message="x")
    assert policy.should_retry(1, transient) and policy.should_retry(2, transient)
    assert not policy.should_retry(3, transient)
    kinds: tuple[ProviderErrorKind, ...] = (
        "overflow",
        "output_overflow",
        "auth",
        "not_found",
        "unreachable",
        "bad_request",
        "other",
    )
    for kind in kinds:
        err = ProviderError(kind=kind, status=400, message="x")
        assert not policy.should_retry(1, err)
    slow = ProviderError(kind="rate_limit", status=429, message="x", retry_after_s=600.0)
    assert not policy.should_retry(1, slow)
    ok = ProviderError(kind="rate_limit", status=429, message="x", retry_after_s=RETRY_AFTER_MAX_S)
    assert policy.should_retry(1, ok)
    assert policy.delay_for(1, ok) == RETRY_AFTER_MAX_S


def test_async_variant() -> None:
    failures = [status_error(529, OVERLOADED), rate_limited("3")]
    calls = 0
    delays: list[float] = []

    async def fn() -> str:
        nonlocal calls
        calls += 1
        if failures:
            raise failures.pop(0)
        return "ok"

    async def fake_sleep(delay: float) -> None:
        delays.append(delay)

    result = asyncio.run(acall_with_retries(fn, NO_JITTER, sleep=fake_sleep))
    assert result == "ok" and calls == 3
    assert delays == [1.0, 3.0]

    async def overflow() -> str:
        raise status_error(400, OVERFLOW)

    with pytest.raises(openai.BadRequestError):
        asyncio.run(acall_with_retries(overflow, NO_JITTER, sleep=fake_sleep))
    assert delays == [1.0, 3.0]
