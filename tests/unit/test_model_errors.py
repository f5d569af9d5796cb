"""Provider failures become langchain-core's exception types (agentgraph.providers.model_errors)."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from langchain_core.exceptions import (
    ContextOverflowError,
    ModelAPIError,
    ModelAuthenticationError,
    ModelConnectionError,
    ModelError,
    ModelInvalidRequestError,
    ModelNotFoundError,
    ModelPermissionDeniedError,
    ModelRateLimitError,
    ModelTimeoutError,
)

from agentgraph.config import Settings
from agentgraph.errors import ProviderFailure
from agentgraph.persistence import open_store
from agentgraph.providers.model_errors import (
    EndpointUnreachableError,
    OutputOverflowError,
    provider_error_of,
    to_model_error,
)
from agentgraph.providers.provider_errors import shrink_max_tokens
from agentgraph.session.agent import Agent
from tests.unit.test_provider_errors import _body_text, _sdk_error

FIXTURES = Path(__file__).parents[1] / "fixtures" / "provider_errors.json"

TYPE_OF_KIND: dict[str, type[ModelError]] = {
    "overflow": ContextOverflowError,
    "output_overflow": OutputOverflowError,
    "rate_limit": ModelRateLimitError,
    "transient": ModelAPIError,
    "auth": ModelAuthenticationError,
    "not_found": ModelNotFoundError,
    "bad_request": ModelInvalidRequestError,
    "invalid_request": ModelInvalidRequestError,
}


def test_every_real_provider_text_translates_to_its_langchain_type() -> None:
    entries = json.loads(FIXTURES.read_text())
    assert len(entries) >= 28
    for entry in entries:
        status, body, kind = entry["status"], entry["body"], entry["kind"]
        original = _sdk_error(status, body)
        typed = to_model_error(original)
        expected = TYPE_OF_KIND[kind]
        if kind == "auth" and status == 403:
            expected = ModelPermissionDeniedError
        assert isinstance(typed, expected), (entry["provider"], type(typed), _body_text(body))
        assert typed.__cause__ is original
        assert to_model_error(typed) is typed  # idempotent


def test_output_overflow_keeps_the_numbers_for_the_max_tokens_shrink() -> None:
    body = {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "input length and `max_tokens` exceed context limit: 188240 + 21333 > "
            "200000, decrease input length or `max_tokens` and try again",
        },
    }
    typed = to_model_error(_sdk_error(400, body))
    assert isinstance(typed, OutputOverflowError) and isinstance(typed, ContextOverflowError)
    detail = provider_error_of(typed)
    assert detail is not None
    assert (detail.prompt_tokens, detail.requested_output_tokens, detail.limit_tokens) == (
        188_240,
        21_333,
        200_000,
    )
    assert shrink_max_tokens(detail, 21_333) == 10_760


def test_transport_failures_and_retryability() -> None:
    refused = to_model_error(httpx.ConnectError("[Errno 111] Connection refused"))
    assert isinstance(refused, EndpointUnreachableError) and not refused.is_retryable
    timeout = to_model_error(httpx.ReadTimeout("timed out"))
    assert isinstance(timeout, ModelTimeoutError) and timeout.is_retryable
    dropped = to_model_error(httpx.RemoteProtocolError("peer closed connection"))
    assert isinstance(dropped, ModelConnectionError) and dropped.is_retryable
    assert not isinstance(dropped, EndpointUnreachableError)
    big = _sdk_error(
        429,
        {"error": {"message": "Request too large (TPM): Limit 30000, Requested 36278."}},
    )
    too_big = to_model_error(big)
    assert isinstance(too_big, ModelRateLimitError) and not too_big.is_retryable
    bug = ValueError("a bug")
    assert to_model_error(bug) is bug


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # closed again: connecting is refused


def test_connection_refused_fails_at_once_without_retries(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    settings = make_settings(
        OPENAI_BASE_URL=f"http://127.0.0.1:{_closed_port()}/v1",
        OPENAI_API_KEY="sk-test",
        AGENTGRAPH_PROVIDER_MAX_RETRIES="4",
    )
    waits: list[float] = []
    events: list[dict[str, Any]] = []
    with open_store(settings) as store:
        agent = Agent(settings, store, sleep=waits.append)
        with pytest.raises(ProviderFailure) as info:
            agent.run_turn("refused", "hello", workspace, events.append)
    retries = [e for e in events if e["type"] == "retry"]
    attempts = 1 + len(retries)
    assert attempts == 1 and waits == []
    assert "cannot reach the model endpoint" in str(info.value)
    assert "is the server running?" in str(info.value)
    assert "127.0.0.1" in str(info.value)
