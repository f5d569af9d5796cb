"""Compaction unit (agentgraph.middleware.compaction): one entry point, three triggers."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.graph.message import add_messages

from agentgraph.context.compaction import Compactor, carried_scale, marker, since_last_boundary
from agentgraph.context.windows import budget_for
from agentgraph.middleware import CompactionMiddleware, PromptViewMiddleware, compose
from agentgraph.runtime.history import agentgraph_kind, validate_history
from tests.fakes.chat_model import ScriptedChatModel
from tests.middleware_helpers import (
    SYSTEM,
    ModelCall,
    counter_and_budget,
    history,
    parallel_reads,
    request,
    small_settings,
    varied_reads,
)
from tests.unit.test_retry import OVERFLOW, status_error


def _units(
    summary: str = "we audited; code word TULIP",
) -> tuple[PromptViewMiddleware, CompactionMiddleware, list[dict]]:
    counter, budget = counter_and_budget(small_settings())
    summarizer = ScriptedChatModel([summary], on_exhausted="repeat_last")
    compactor = Compactor(summarizer, counter, budget, sleep=lambda _s: None)
    view = PromptViewMiddleware(counter, budget, keep_recent=200, validate=True)
    events: list[dict] = []
    return view, CompactionMiddleware(compactor, view, emit=events.append), events


def _apply(state: list[BaseMessage], updates: list[BaseMessage]) -> list[BaseMessage]:
    return list(add_messages(state, updates))  # type: ignore[arg-type]


def test_at_the_threshold_it_compacts_before_the_call_and_the_reply_lands_after() -> None:
    view, compaction, events = _units()
    full = history(26)  # ~14.2k tokens of a 16k window: over the 90% threshold
    call = ModelCall(AIMessage("answer", id="reply"))
    result = compose([view, compaction])(request(full), call)
    assert [e["trigger"] for e in events] == ["auto"]
    sent = call.requests[0].messages
    assert agentgraph_kind(sent[0]) == "summary" and "TULIP" in str(sent[0].content)
    assert validate_history([SYSTEM, *sent]) == []
    # As create_agent applies it: the model response, then the unit's command.
    state = _apply(_apply(full, result.response.result), result.messages)
    after = since_last_boundary(state)
    assert after[-1].id == "reply" and agentgraph_kind(after[0]) == "summary"
    assert len(state) > len(after)  # the transcript keeps the summarized messages


def test_an_overflow_the_view_did_not_foresee_compacts_once_with_trigger_guard() -> None:
    view, compaction, events = _units()
    full = history(4)  # under the threshold by our count; the provider disagrees
    call = ModelCall(status_error(400, OVERFLOW), AIMessage("after recovery"))
    result = compose([view, compaction])(request(full), call)
    assert [e["trigger"] for e in events] == ["guard"]
    assert len(call.requests) == 2
    assert agentgraph_kind(call.requests[1].messages[0]) == "summary"
    assert result.reply.content == "after recovery"


def test_no_compaction_below_the_threshold_and_no_command() -> None:
    view, compaction, events = _units()
    full = [HumanMessage("hi", id="u0")]
    call = ModelCall(AIMessage("hello", id="r"))
    result = compose([view, compaction])(request(full), call)
    assert events == [] and [m.id for m in result.messages] == ["r"]


def test_manual_compaction_is_the_same_entry_point() -> None:
    _view, compaction, events = _units()
    full = history(6)
    outcome = compaction.compact(full, trigger="manual", system=[SYSTEM], tools=[], focus="TULIP")
    assert outcome is not None and outcome.record["trigger"] == "manual"
    assert events == [{"type": "compaction", **outcome.record}]
    assert validate_history(since_last_boundary(_apply(full, outcome.updates))) == []


def test_the_status_line_names_a_distillation_a_cut_summary_and_a_stall() -> None:
    from agentgraph.frontends.cli.render import compaction_line

    plain = {"trigger": "auto", "tokens_before": 10_000, "tokens_after": 5_000}
    assert compaction_line(plain) == "Compacted: 10,000 → 5,000 tokens (−50.0%)"
    line = compaction_line(
        {**plain, "trigger": "distil", "summary_cut": True, "course_change": True}
    )
    assert "what masking hid, distilled" in line
    assert "the summary was cut to fit" in line
    assert "no progress since the last compaction" in line


def test_a_view_that_left_an_older_turn_out_compacts_even_under_the_threshold() -> None:
    """One more turn took the history past the budget: the view leaves the first turn
    out and is then under the threshold by construction. The first turn must reach a
    summary, not leave the prompt unsummarized."""
    counter, budget = counter_and_budget(small_settings(AGENTGRAPH_COMPACT_THRESHOLD="0.99"))
    summarizer = ScriptedChatModel(["the audit of turn one; code word TULIP"])
    view = PromptViewMiddleware(counter, budget, validate=True)
    events: list[dict] = []
    compaction = CompactionMiddleware(
        Compactor(summarizer, counter, budget, sleep=lambda _s: None), view, emit=events.append
    )
    first = [*history(22), AIMessage("turn one done", id="done1")]
    second = [
        HumanMessage("now the second audit", id="u2"),
        *[m.model_copy(update={"id": f"{m.id}-2"}) for m in history(8)[1:]],
    ]
    full = [*first, *second]
    alone = view.build(full, SYSTEM, [])
    # The first turn left out: the rest is under the threshold.
    assert len(alone.messages) < len(full) - len(first) + 1 and alone.tokens < budget.compact_at
    call = ModelCall(AIMessage("answer", id="reply"))
    compose([view, compaction])(request(full), call)
    assert [e["trigger"] for e in events] == ["auto"]
    sent = call.requests[0].messages
    assert agentgraph_kind(sent[0]) == "summary" and "TULIP" in str(sent[0].content)


def test_a_view_cut_to_fit_does_not_make_the_provider_seem_to_count_more() -> None:
    """The view cut older reads to fit our count of the budget; the last reply's usage,
    from a provider that counts exactly as we do, still covers them whole.
    Compared with our count of the cut view, that usage looked like a provider counting
    more: an estimating counter's budget was divided by it and the summary recorded it,
    so every prompt after the compaction was measured that much larger."""
    settings = small_settings(AGENTGRAPH_MODEL="qwen2.5-coder-1.5b")
    counter, budget = counter_and_budget(settings)
    assert counter.source == "estimate"
    summarizer = ScriptedChatModel(["the audit so far; code word TULIP"])
    view = PromptViewMiddleware(counter, budget, validate=True)
    compaction = CompactionMiddleware(
        Compactor(summarizer, counter, budget, sleep=lambda _s: None), view, emit=lambda _e: None
    )
    earlier = HumanMessage(
        "Summary of the audit: " + " ".join(f"K{i:04d}=v{i}" for i in range(900)),
        id="s0",
        additional_kwargs=marker("summary"),
    )
    full: list[BaseMessage] = [earlier, *varied_reads(24, 60)]
    last = max(i for i, m in enumerate(full) if isinstance(m, AIMessage))
    fixed = view.fixed_tokens(SYSTEM, [])
    reported = fixed + counter.count_messages(full[:last])
    full[last] = full[last].model_copy(
        update={
            "usage_metadata": {
                "input_tokens": reported,
                "output_tokens": counter.count_message(full[last]),
                "total_tokens": reported + counter.count_message(full[last]),
            }
        }
    )
    built = view.build(full, SYSTEM, [])
    assert view.cut_to_fit(built.messages)
    call = ModelCall(AIMessage("answer", id="reply"))
    compose([view, compaction])(request(full), call)
    head = call.requests[0].messages[0]
    assert agentgraph_kind(head) == "summary"
    assert carried_scale([head]) < 1.01


def test_results_past_the_threshold_that_fit_the_window_are_seen_whole_before_a_compaction() -> (
    None
):
    """The first reply's parallel reads take the prompt past the threshold but not past
    the window: a compaction then could only summarize results the model has not seen,
    and keep them cut. They go out whole; the next reply's results, with these answered,
    compact."""
    view, compaction, events = _units()
    budget = view.budget
    full: list[BaseMessage] = [
        HumanMessage("Read f0 to f7 and report each value.", id="u0"),
        *parallel_reads(0, 8, 145),
    ]
    tokens = view.build(full, SYSTEM, []).tokens
    assert budget.compact_at <= tokens <= budget.usable
    call = ModelCall(AIMessage("", id="a8-reply"))
    compose([view, compaction])(request(full), call)
    assert events == []
    sent = call.requests[0].messages
    assert [m.content for m in sent] == [m.content for m in full]

    full = [*full, *parallel_reads(8, 1, 5)]  # the model answered: one more small read
    assert view.build(full, SYSTEM, []).tokens <= budget.usable
    call = ModelCall(AIMessage("reported", id="reply"))
    compose([view, compaction])(request(full), call)
    assert [e["trigger"] for e in events] == ["auto"]


def test_unseen_results_that_do_not_fit_the_window_compact_at_once() -> None:
    view, compaction, events = _units()
    full: list[BaseMessage] = [
        HumanMessage("Read f0 to f7 and report each value.", id="u0"),
        *parallel_reads(0, 8, 170),
    ]
    assert view.build(full, SYSTEM, []).overflow  # whole, past the window
    call = ModelCall(AIMessage("reported", id="reply"))
    compose([view, compaction])(request(full), call)
    assert [e["trigger"] for e in events] == ["auto"]


# A summary naming every file the growing task reads (none is asked about again).
NOTED = "values noted: " + ", ".join(f"f{i}.txt" for i in range(80))


def _growing_task(reads: int) -> list[BaseMessage]:
    return [HumanMessage("Read every file and note its values.", id="u0"), *varied_reads(reads, 40)]


def _calls_at(view: PromptViewMiddleware, history: list[BaseMessage]) -> int:
    """Summarizer calls of an automatic compaction of ``history`` (which has reached the
    compaction point)."""
    assert view.build(history, SYSTEM, []).tokens >= view.budget.compact_at
    summarizer = ScriptedChatModel([NOTED], on_exhausted="repeat_last")
    compactor = Compactor(summarizer, view.counter, view.budget, sleep=lambda _s: None)
    assert compactor(history, trigger="auto", system=[SYSTEM], tools=[])
    return len(summarizer.calls)


def _first_compaction(compactor: Compactor, view: PromptViewMiddleware) -> int:
    """The prompt tokens at which a task reading one file a call first compacts."""
    events: list[dict] = []
    compaction = CompactionMiddleware(compactor, view, emit=events.append)
    for n in range(1, 80):
        full = _growing_task(n)
        tokens = view.build(full, SYSTEM, []).tokens
        compose([view, compaction])(request(full), ModelCall(AIMessage("reading on", id="r")))
        if events:
            return int(tokens)
    raise AssertionError("no compaction")


def test_a_part_about_to_outgrow_one_summarizer_call_compacts_before_the_threshold() -> None:
    """A task reading one file a call: its part would take two summarizer calls at the
    compaction point (the second for a read or two), so it compacts a call or two
    before it, the part in one call (at a 32k window the first compaction of 100 files
    took two calls where deepagents' took one, and its prompts held what one call could
    not)."""
    view, _compaction, _events = _units()
    budget = view.budget
    # Where the threshold is reached, the part takes two calls.
    at_threshold = next(
        n
        for n in range(1, 80)
        if view.build(_growing_task(n), SYSTEM, []).tokens >= budget.compact_at
    )
    assert _calls_at(view, _growing_task(at_threshold)) == 2
    # The task as it grows, a model call a read: it compacts first below the threshold,
    # in one summarizer call.
    summarizer = ScriptedChatModel([NOTED], on_exhausted="repeat_last")
    compactor = Compactor(summarizer, view.counter, budget, sleep=lambda _s: None)
    tokens = _first_compaction(compactor, view)
    assert budget.compact_at * 0.9 <= tokens < budget.compact_at
    assert len(summarizer.calls) == 1


def test_a_summary_model_whose_calls_hold_far_less_than_the_point_compacts_at_it() -> None:
    """A summary model with a window of half the main model's: every part outgrows one
    of its calls long before the compaction point, which stays where it is rather than
    compact each time a part fills a call."""
    view, _compaction, _events = _units()
    summarizer = ScriptedChatModel([NOTED], on_exhausted="repeat_last")
    compactor = Compactor(
        summarizer,
        view.counter,
        view.budget,
        summarizer_budget=budget_for(small_settings(8_000)),
        sleep=lambda _s: None,
    )
    assert _first_compaction(compactor, view) >= view.budget.compact_at
    assert len(summarizer.calls) > 1


def _batches(replies: int) -> list[BaseMessage]:
    """A task reading eight files a reply, ``replies`` replies in."""
    full: list[BaseMessage] = [HumanMessage("Read every file and note its values.", id="u0")]
    for n in range(replies):
        full += parallel_reads(8 * n, 8, 24)
    return full


def test_a_reply_of_reads_a_fifth_of_the_prompt_is_seen_before_its_part_compacts() -> None:
    """Eight reads a reply near the compaction point, the part one summarizer call now
    and two with the next reply's: compacting now would give up a fifth of the room
    (at a 32k window a third compaction where two did, and 5% more prompt tokens), so
    the reply's results go out and the compaction waits for the point."""
    replies = 5
    view, compaction, events = _units(NOTED)
    budget = view.budget
    tokens = view.build(_batches(replies), SYSTEM, []).tokens
    assert budget.compact_at * 0.9 <= tokens < budget.compact_at
    # At the threshold, a reply later, the part takes two summarizer calls.
    assert _calls_at(view, _batches(replies + 1)) == 2
    call = ModelCall(AIMessage("reading on", id="r"))
    compose([view, compaction])(request(_batches(replies)), call)
    assert events == []
