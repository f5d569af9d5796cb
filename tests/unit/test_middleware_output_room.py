"""Output-room unit (agentgraph.middleware.output_room): max_tokens within the window."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage

from agentgraph.context.windows import PROMPT_COUNT_MARGIN_FRACTION, Budget, output_room
from agentgraph.middleware import OutputRoomMiddleware, OverflowRecoveryMiddleware, compose
from tests.middleware_helpers import ModelCall, counter_and_budget, history, request, small_settings
from tests.unit.test_retry import status_error


def _unit() -> tuple[OutputRoomMiddleware, Budget, Any]:
    counter, budget = counter_and_budget(small_settings(16_000))

    def tokens(r: Any) -> int:
        return int(counter.count_messages([r.system_message, *r.messages]))

    return OutputRoomMiddleware(budget, tokens), budget, tokens


def test_a_max_tokens_the_prompt_leaves_room_for_is_sent_as_it_is() -> None:
    unit, _budget, _tokens = _unit()
    call = ModelCall()
    asked = request(history(1), model_settings={"max_tokens": 3_000})
    unit.wrap_model_call(asked, call)
    assert call.requests[-1] is asked


def test_a_large_prompt_lowers_max_tokens_to_what_it_leaves() -> None:
    unit, budget, tokens = _unit()
    call = ModelCall()
    asked = request(history(24), model_settings={"max_tokens": 3_200, "temperature": 0})
    prompt = tokens(asked)
    assert prompt + 3_200 > budget.window  # a strict server would reject it as asked
    unit.wrap_model_call(asked, call)
    sent = call.requests[-1].model_settings
    margin = int(prompt * PROMPT_COUNT_MARGIN_FRACTION)
    assert sent == {"max_tokens": budget.window - prompt - margin, "temperature": 0}
    assert prompt + margin + sent["max_tokens"] == budget.window


def test_the_reserve_is_the_floor_and_a_request_without_max_tokens_is_untouched() -> None:
    unit, budget, _tokens = _unit()
    assert output_room(budget, budget.window) == budget.reserve
    call = ModelCall()
    huge = request(history(40), model_settings={"max_tokens": 3_200})
    unit.wrap_model_call(huge, call)
    assert call.requests[-1].model_settings == {"max_tokens": budget.reserve}
    bare = request(history(40))
    unit.wrap_model_call(bare, call)
    assert call.requests[-1] is bare


def test_an_output_overflow_still_shrinks_below_the_room_and_is_not_undone() -> None:
    """The overflow unit runs inside: a provider that counts more than the margin gets
    the smaller figure its error names, and the room is not put back on the retry."""
    counter, budget = counter_and_budget(small_settings(32_000))
    unit = OutputRoomMiddleware(
        budget, lambda r: counter.count_messages([r.system_message, *r.messages])
    )
    overflow = OverflowRecoveryMiddleware(counter, budget, emit=lambda _e: None)
    error = status_error(
        400,
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "input length and `max_tokens` exceed context limit: "
                "26500 + 5600 > 32000, decrease input length or `max_tokens` and try again",
            },
        },
    )
    call = ModelCall(error, AIMessage("ok"))
    compose([unit, overflow])(request(history(44), model_settings={"max_tokens": 8_000}), call)
    first, second = (r.model_settings["max_tokens"] for r in call.requests)
    assert first < 8_000 and second == 32_000 - 26_500 - 1_000 < first
