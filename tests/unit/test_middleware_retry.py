"""Retry unit (agentgraph.middleware.retry): what is retried, what fails at once, by type."""

from __future__ import annotations

import httpx
import pytest
from langchain_core.exceptions import (
    ContextOverflowError,
    ModelAPIError,
    ModelAuthenticationError,
    ModelNotFoundError,
    ModelPermissionDeniedError,
    ModelRateLimitError,
)
from langchain_core.messages import AIMessage, HumanMessage

from agentgraph.middleware import EndpointUnreachableError, RetryMiddleware
from agentgraph.providers.retry import RetryPolicy
from tests.middleware_helpers import ModelCall, request
from tests.unit.test_retry import OVERFLOW, rate_limited, status_error

POLICY = RetryPolicy(max_retries=4, base_delay_s=1.0, max_delay_s=30.0, jitter=0.0)


def _unit() -> tuple[RetryMiddleware, list[float], list[dict]]:
    waits: list[float] = []
    events: list[dict] = []
    return RetryMiddleware(POLICY, sleep=waits.append, emit=events.append), waits, events


def test_429_waits_its_retry_after_and_5xx_and_dropped_connections_back_off() -> None:
    unit, waits, events = _unit()
    call = ModelCall(
        rate_limited("7"),
        status_error(503, {}),
        httpx.RemoteProtocolError("peer closed connection without sending complete body"),
        AIMessage("fine"),
    )
    response = unit.wrap_model_call(request([HumanMessage("hi")]), call)
    assert response.result[0].content == "fine"  # type: ignore[union-attr]
    assert len(call.requests) == 4
    assert waits == [7.0, 2.0, 4.0]
    assert [e["type"] for e in events] == ["retry"] * 3


@pytest.mark.parametrize(
    ("error", "typed"),
    [
        (
            status_error(401, {"error": {"message": "Incorrect API key provided"}}),
            ModelAuthenticationError,
        ),
        (status_error(403, {"error": {"message": "not allowed"}}), ModelPermissionDeniedError),
        (
            status_error(404, {"error": {"message": "The model `x` does not exist"}}),
            ModelNotFoundError,
        ),
        (status_error(400, OVERFLOW), ContextOverflowError),
        (httpx.ConnectError("[Errno 111] Connection refused"), EndpointUnreachableError),
    ],
)
def test_what_cannot_pass_later_fails_at_once_as_its_langchain_type(
    error: Exception, typed: type[Exception]
) -> None:
    unit, waits, _ = _unit()
    call = ModelCall(error)
    with pytest.raises(typed) as info:
        unit.wrap_model_call(request([HumanMessage("hi")]), call)
    assert len(call.requests) == 1 and waits == []
    assert info.value.__cause__ is error


def test_retries_used_up_raise_the_typed_error() -> None:
    unit, waits, _ = _unit()
    call = ModelCall(*[status_error(500, {}) for _ in range(5)])
    with pytest.raises(ModelAPIError):
        unit.wrap_model_call(request([HumanMessage("hi")]), call)
    assert len(call.requests) == 5 and len(waits) == 4
    with pytest.raises(ModelRateLimitError):
        unit.wrap_model_call(request([HumanMessage("hi")]), ModelCall(rate_limited("999")))


def test_a_bug_is_not_a_provider_failure() -> None:
    unit, _, _ = _unit()
    bug = KeyError("oops")
    with pytest.raises(KeyError) as info:
        unit.wrap_model_call(request([HumanMessage("hi")]), ModelCall(bug))
    assert info.value is bug
