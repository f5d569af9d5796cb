"""Overflow recovery unit (agentgraph.middleware.overflow): cut outputs, shrink max_tokens."""

from __future__ import annotations

import pytest
from langchain_core.exceptions import ContextOverflowError, ModelRateLimitError
from langchain_core.messages import AIMessage, ToolMessage

from agentgraph.middleware import OverflowRecoveryMiddleware
from tests.middleware_helpers import ModelCall, counter_and_budget, history, request, small_settings
from tests.unit.test_retry import OVERFLOW, rate_limited, status_error

OUTPUT_OVERFLOW = {
    "type": "error",
    "error": {
        "type": "invalid_request_error",
        "message": "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, "
        "decrease input length or `max_tokens` and try again",
    },
}


def _unit(max_output_tokens: int | None = None) -> tuple[OverflowRecoveryMiddleware, list[dict]]:
    counter, budget = counter_and_budget(small_settings())
    events: list[dict] = []
    unit = OverflowRecoveryMiddleware(
        counter, budget, max_output_tokens=max_output_tokens, emit=events.append
    )
    return unit, events


def test_output_only_overflow_shrinks_max_tokens() -> None:
    unit, events = _unit(max_output_tokens=21_333)
    call = ModelCall(status_error(400, OUTPUT_OVERFLOW), AIMessage("fits now"))
    response = unit.wrap_model_call(request(history(1)), call)
    assert response.result[0].content == "fits now"  # type: ignore[union-attr]
    # 200000 - 188240 - 1000 reserved: the "a + b > c" numbers decide.
    assert call.requests[1].model_settings["max_tokens"] == 10_760
    assert call.requests[1].messages == call.requests[0].messages
    assert events == [{"type": "notice", "text": "output reservation shrunk to 10760"}]


def test_context_overflow_cuts_tool_outputs_once_then_gives_up_typed() -> None:
    unit, events = _unit()
    first = status_error(400, OVERFLOW)
    call = ModelCall(first, status_error(400, OVERFLOW))
    with pytest.raises(ContextOverflowError):
        unit.wrap_model_call(request(history(4, result_chars=20_000)), call)
    assert len(call.requests) == 2
    cut = [m for m in call.requests[1].messages if isinstance(m, ToolMessage)]
    assert cut and all("truncated" in str(m.content) for m in cut)
    assert events[0]["text"] == "context overflow: truncated 4 tool outputs"


def test_other_failures_pass_through() -> None:
    unit, events = _unit()
    limited = rate_limited()
    call = ModelCall(limited)
    with pytest.raises(Exception) as info:
        unit.wrap_model_call(request(history(1)), call)
    assert info.value is limited and not isinstance(info.value, ModelRateLimitError)
    assert len(call.requests) == 1 and events == []
