"""Overflow recovery unit (agentgraph.middleware.overflow): cut outputs, shrink max_tokens."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.exceptions import ContextOverflowError, ModelRateLimitError
from langchain_core.messages import AIMessage, ToolMessage

from agentgraph.context.compaction import Compactor
from agentgraph.context.windows import Budget
from agentgraph.middleware import OverflowRecoveryMiddleware, context_pipeline
from agentgraph.middleware.overflow import window_notice
from agentgraph.runtime.deps import AgentDeps
from tests.fakes.chat_model import ScriptedChatModel
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


def test_a_file_read_cut_after_an_overflow_is_a_page_with_the_next_offset() -> None:
    """The retry shortens a read_file result to its leading lines and read_file's note,
    as the tools node does, instead of cutting it head and tail; other results are cut."""
    unit, _events = _unit()
    numbered = "\n".join(f"{n}\tline {n} of the log " + "z" * 60 for n in range(1, 801))
    note = "[showing lines 1-800 of 5000; call read_file with offset=800 to continue]"
    messages = [
        *history(1, result_chars=20_000),
        AIMessage("", id="ar", tool_calls=[{"name": "read_file", "args": {}, "id": "cr"}]),
        ToolMessage(
            f"{numbered}\n{note}",
            tool_call_id="cr",
            name="read_file",
            id="tr",
        ),
    ]
    call = ModelCall(status_error(400, OVERFLOW), AIMessage("fits now"))
    unit.wrap_model_call(request(messages), call)
    retried = {
        m.id: str(m.content) for m in call.requests[1].messages if isinstance(m, ToolMessage)
    }
    page = retried["tr"]
    last = int(page.split("\n")[-2].split("\t", 1)[0])
    assert 1 < last < 800
    assert page.endswith(
        f"[showing lines 1-{last} of 5000; call read_file with offset={last} to continue]"
    )
    assert "truncated" not in page and "truncated" in retried["t0"]


def test_other_failures_pass_through() -> None:
    unit, events = _unit()
    limited = rate_limited()
    call = ModelCall(limited)
    with pytest.raises(Exception) as info:
        unit.wrap_model_call(request(history(1)), call)
    assert info.value is limited and not isinstance(info.value, ModelRateLimitError)
    assert len(call.requests) == 1 and events == []


# llama-server's overflow as QA saw it (exceed_context_size_error), for a 8,192 window.
LLAMA_CPP_OVERFLOW = {
    "error": {
        "code": 400,
        "message": "request (9437 tokens) exceeds the available context size (8192 tokens), "
        "try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 9437,
        "n_ctx": 8192,
    }
}
OLLAMA_OVERFLOW = {"error": "the input length exceeds the context length"}


def _learning_unit() -> tuple[OverflowRecoveryMiddleware, list[dict], list[int]]:
    counter, budget = counter_and_budget(small_settings(16_000))
    events: list[dict] = []
    followed: list[int] = []
    unit = OverflowRecoveryMiddleware(
        counter, budget, emit=events.append, on_window_adopted=followed.append
    )
    return unit, events, followed


def test_a_smaller_window_named_by_the_error_is_adopted_once() -> None:
    unit, events, followed = _learning_unit()
    usable_before = unit.budget.usable
    call = ModelCall(status_error(400, LLAMA_CPP_OVERFLOW), AIMessage("fits now"))
    response = unit.wrap_model_call(request(history(2)), call)
    assert response.result[0].content == "fits now"  # type: ignore[union-attr]
    assert (unit.budget.window, unit.budget.usable) == (8_192, 7_680)
    assert followed == [usable_before]
    assert events[0] == {"type": "notice", "text": window_notice(8_192)}
    assert events[0]["text"] == (
        "the endpoint's context window is 8,192 tokens (learned from its error); using it "
        "from now on — set AGENTGRAPH_CONTEXT_WINDOW=8192 to start with it"
    )
    assert events[1]["text"] == "context overflow: truncated 2 tool outputs"
    # The same window again (another call, a subagent) teaches nothing new.
    again = ModelCall(status_error(400, LLAMA_CPP_OVERFLOW), AIMessage("ok"))
    unit.wrap_model_call(request(history(2)), again)
    assert sum("learned from its error" in e["text"] for e in events) == 1
    assert followed == [usable_before]


@pytest.mark.parametrize("body", [OVERFLOW, OLLAMA_OVERFLOW], ids=["larger", "no-number"])
def test_a_larger_or_unnamed_window_changes_nothing(body: dict) -> None:
    unit, events, followed = _learning_unit()
    call = ModelCall(status_error(400, body), AIMessage("ok"))
    unit.wrap_model_call(request(history(2, result_chars=20_000)), call)
    assert unit.budget.window == 16_000 and followed == []
    assert [e["text"] for e in events] == ["context overflow: truncated 2 tool outputs"]


def test_after_learning_a_retry_over_the_real_window_goes_to_compaction() -> None:
    """Cut outputs that still exceed the learned window are not sent: compaction is next."""
    unit, events, _ = _learning_unit()
    small = {
        "error": {
            "code": 400,
            "message": "request (9000 tokens) exceeds the available context size (2048 tokens), "
            "try increasing it",
            "type": "exceed_context_size_error",
        }
    }
    call = ModelCall(status_error(400, small))
    with pytest.raises(ContextOverflowError):
        unit.wrap_model_call(request(history(12, result_chars=4000)), call)
    assert len(call.requests) == 1
    assert unit.budget.window == 2_048
    assert [e["text"] for e in events] == [window_notice(2_048)]


def test_pipeline_summarizer_budget_follows_the_learned_window(tmp_path: Path) -> None:
    settings = small_settings(16_000, AGENTGRAPH_HOME=str(tmp_path))
    counter, budget = counter_and_budget(settings)
    own_budget = counter_and_budget(small_settings(100_000, AGENTGRAPH_HOME=str(tmp_path)))[1]

    def deps_with(summarizer_budget: Budget | None) -> AgentDeps:
        compactor = Compactor(
            ScriptedChatModel([]), counter, budget, summarizer_budget=summarizer_budget
        )
        return AgentDeps(
            settings=settings,
            model=ScriptedChatModel([]),
            tools=[],
            counter=counter,
            budget=budget,
            compactor=compactor,
        )

    shared = deps_with(None)  # the summarizer is the main model
    own = deps_with(own_budget)  # AGENTGRAPH_SUMMARY_MODEL with its own window
    before = budget.usable
    assert budget.adopt_window(4_096)
    for deps in (shared, own):
        hook = context_pipeline(deps).overflow.on_window_adopted
        assert hook is not None
        hook(before)
    assert isinstance(shared.compactor, Compactor) and isinstance(own.compactor, Compactor)
    assert shared.compactor.summary_budget.usable == budget.usable == 3_840
    assert own.compactor.summary_budget.window == 100_000
