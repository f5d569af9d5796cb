"""Prompt view unit (agentgraph.middleware.prompt_view): valid, in budget, view-only."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from agentgraph.middleware import PromptViewMiddleware
from agentgraph.runtime.history import validate_history
from tests.middleware_helpers import (
    SYSTEM,
    ModelCall,
    counter_and_budget,
    history,
    request,
    small_settings,
)


def _unit(keep_recent: int | None = None) -> PromptViewMiddleware:
    counter, budget = counter_and_budget(small_settings())
    return PromptViewMiddleware(counter, budget, keep_recent=keep_recent, validate=True)


def test_the_model_sees_a_valid_view_within_budget_and_state_is_untouched() -> None:
    unit = _unit(keep_recent=12)
    full = history(30)
    # A dangling call (the process died before its result) and an empty answer:
    # both are rejected by strict providers.
    full += [
        AIMessage("", id="dangling", tool_calls=[{"name": "grep", "args": {}, "id": "lost"}]),
        HumanMessage("next question", id="u1"),
        AIMessage("", id="empty"),
        HumanMessage("and now?", id="u2"),
    ]
    call = ModelCall()
    unit.wrap_model_call(request(full), call)
    sent = call.requests[0]
    prompt = [SYSTEM, *sent.messages]
    assert validate_history(prompt) == []
    assert len(sent.messages) <= 12
    assert unit.counter.count_messages(prompt) <= unit.budget.usable
    assert sent.messages[-1].content == "and now?"
    assert sent.state["messages"] == full  # the state keeps the whole history


def test_the_view_starts_after_the_last_compaction_boundary() -> None:
    unit = _unit()
    boundary = SystemMessage(
        "[compaction boundary: auto]",
        id="b1",
        additional_kwargs={"agentgraph": {"kind": "compact_boundary"}},
    )
    summary = HumanMessage("summary of earlier work", id="s1")
    full = [*history(3), boundary, summary, HumanMessage("go on", id="u9")]
    view = unit.build(full, SYSTEM, [])
    assert [m.id for m in view.messages] == ["s1", "u9"]
    assert view.tokens == unit.counter.count_messages([SYSTEM, *view.messages])


def test_a_newest_turn_over_budget_has_its_tool_outputs_cut_in_the_view_only() -> None:
    unit = _unit()
    full = history(3, result_chars=60_000)
    view = unit.build(full, SYSTEM, [])
    assert view.overflow
    results = [m for m in view.messages if isinstance(m, ToolMessage)]
    assert results and all("truncated" in str(m.content) for m in results)
    assert view.tokens <= unit.budget.usable
    assert all(len(str(m.content)) > 60_000 for m in full if isinstance(m, ToolMessage))


def test_the_prompt_is_counted_once_per_view_and_again_when_it_changed() -> None:
    """The view's tokens serve later asks about the very list it built; any other list,
    system prompt or tool set is counted."""
    unit = _unit()
    full = history(6)
    view = unit.build(full, SYSTEM, [])
    counted = unit.counter.count_messages([SYSTEM, *view.messages])
    assert unit.prompt_tokens(SYSTEM, view.messages, []) == view.tokens == counted
    longer = [*view.messages, HumanMessage("one more question " * 40, id="u-more")]
    assert unit.prompt_tokens(SYSTEM, longer, []) == unit.counter.count_messages([SYSTEM, *longer])
    other = SystemMessage("another system prompt " * 30)
    assert unit.prompt_tokens(other, view.messages, []) == unit.counter.count_messages(
        [other, *view.messages]
    )
    # The same list object, changed in place after the build, is counted again.
    view.messages[-1] = HumanMessage("replaced " * 50, id="u-replaced")
    assert unit.prompt_tokens(SYSTEM, view.messages, []) == unit.counter.count_messages(
        [SYSTEM, *view.messages]
    )


def _turn(k: int) -> list[BaseMessage]:
    """A user request, a read_file call and its result, with ids of their own."""
    return [
        HumanMessage(f"question {k}", id=f"q{k}"),
        AIMessage(
            f"reading {k}",
            id=f"r{k}",
            tool_calls=[{"name": "read_file", "args": {"path": f"g{k}.txt"}, "id": f"g{k}"}],
        ),
        ToolMessage(
            f"content {k} " + "y" * (50 * k), tool_call_id=f"g{k}", name="read_file", id=f"o{k}"
        ),
    ]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["grow", "mask", "drop", "system"]), st.integers(0, 40)),
        min_size=1,
        max_size=12,
    )
)
def test_the_views_tokens_are_the_counters_whatever_changed_since_the_last_view(
    steps: list[tuple[str, int]],
) -> None:
    """The body's sums are reused only for a body that extends the last one: grown,
    masked in the middle, cut at the front or under another system prompt, the figure
    is the counter's for the view as sent."""
    unit = _unit()
    full: list[BaseMessage] = [m for k in range(3) for m in _turn(k)]
    system = SYSTEM
    for index, (step, n) in enumerate(steps):
        if step == "grow":
            full = [*full, *_turn(10 + index)]
        elif step == "mask":
            i = n % len(full)
            full = [*full[:i], full[i].model_copy(update={"content": "[masked]"}), *full[i + 1 :]]
        elif step == "drop":
            turns = len(full) // 3
            full = full[3 * (n % turns) :] if turns > 1 else full
        else:
            system = SystemMessage(f"system prompt {n}")
        view = unit.build(full, system, [])
        assert view.tokens == unit.counter.count_messages([system, *view.messages])
