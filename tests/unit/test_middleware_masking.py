"""Observation masking unit: view-only placeholders, batches, replayed boundary."""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from agentgraph.config import Settings
from agentgraph.context.compaction import UNSEEN_COPY_KEY, marker
from agentgraph.context.masking_text import MASKED_TOKENS_KEY
from agentgraph.context.tokens import get_counter
from agentgraph.context.truncation import ARTIFACT_POINTER_TEMPLATE
from agentgraph.context.windows import Budget
from agentgraph.middleware.masking import ObservationMaskingMiddleware
from agentgraph.middleware.prompt_view import PromptViewMiddleware
from agentgraph.persistence import open_store
from agentgraph.session.agent import Agent
from tests.fakes.chat_model import OutCountingModel, ScriptedChatModel
from tests.fakes.scripts import ai_text
from tests.middleware_helpers import (
    ModelCall,
    counter_and_budget,
    history,
    noting_reads,
    request,
    small_settings,
)

WINDOW_TOKENS = 32_000


def _unit(events: list[dict[str, Any]] | None = None) -> ObservationMaskingMiddleware:
    counter, budget = counter_and_budget(small_settings(WINDOW_TOKENS))
    sink = events if events is not None else []
    return ObservationMaskingMiddleware(PromptViewMiddleware(counter, budget), emit=sink.append)


def _sent(unit: ObservationMaskingMiddleware, messages: list[BaseMessage]) -> list[BaseMessage]:
    call = ModelCall()
    unit.wrap_model_call(request(messages), call)
    return list(call.requests[-1].messages)


def _masked(messages: list[BaseMessage]) -> list[int]:
    return [i for i, m in enumerate(messages) if "tool output masked" in m.text]


def test_under_the_threshold_nothing_is_masked() -> None:
    events: list[dict[str, Any]] = []
    messages = history(4, result_chars=2_000)
    assert _sent(_unit(events), messages) == messages
    assert events == []


def test_an_output_the_reply_did_not_restate_is_never_masked() -> None:
    """A model that only calls tools kept nothing of what it read: hiding the output
    would make it read again or forget. Its outputs wait for a summary instead."""
    silent = [
        m.model_copy(update={"content": m.text.split("noted; ")[-1]})
        if isinstance(m, AIMessage)
        else m
        for m in history(25, result_chars=6_000)
    ]
    unit = _unit()
    for n in range(1, 26):
        plan = unit.plan(silent[: 2 * n + 1], 500)[0]
        assert plan.masked == 0
    # The same history with each output restated in the reply after it is masked.
    assert _masked(_sent(_unit(), history(25, result_chars=6_000)))
    # Notes of the first nine outputs (one masking batch's worth) make those nine alone
    # maskable.
    noted = list(silent)
    for i in range(3, 21, 2):  # a1 … a9: "K0000 noted; reading file 1", …
        noted[i] = history(25, result_chars=6_000)[i]
    plan, masked = _unit().plan(noted, 500)
    assert set(masked) == set(range(2, 20, 2))


def test_past_the_threshold_old_outputs_are_masked_in_the_view_only() -> None:
    events: list[dict[str, Any]] = []
    messages = history(25, result_chars=6_000)
    stored = [m.model_copy() for m in messages]
    unit = _unit(events)
    for n in range(1, 25):  # the requests before the last: the event is logged once
        _sent(unit, messages[: 2 * n + 1])
    sent = _sent(unit, messages)
    masked = _masked(sent)
    assert masked and all(sent[i].type == "tool" for i in masked)
    # The newest turns stay verbatim; the calls themselves stay.
    assert sent[-1].text == messages[-1].text
    assert sum(1 for m in sent if isinstance(m, AIMessage)) == 25
    first = sent[masked[0]].text
    assert 'read_file({"path": "f0.txt"})' in first
    assert "tokens" in first and 'read_history("c0")' in first
    # The stored history is untouched.
    assert messages == stored
    assert [e["type"] for e in events] == ["masking"]
    assert events[0]["tokens_after"] < events[0]["tokens_before"]


def test_the_boundary_moves_in_batches_and_the_masked_prefix_is_stable() -> None:
    unit = _unit()
    messages = history(60, result_chars=6_000)
    views = [_sent(unit, messages[: 2 * n + 1]) for n in range(1, 61)]
    moves = 0
    for prev, cur in pairwise(views):
        if cur[: len(prev)] != prev:
            moves += 1
            # Only what was verbatim before changes: the masked prefix stays.
            stable = _masked(prev)[-1] + 1 if _masked(prev) else 0
            assert cur[:stable] == prev[:stable]
    assert 1 <= moves <= 6


def test_the_boundary_is_replayed_from_the_history_alone() -> None:
    messages = history(40, result_chars=6_000)
    # Two units (a restart) see the same history: the same view, byte for byte.
    assert _sent(_unit(), messages) == _sent(_unit(), messages)


def test_a_saved_artifact_is_named_in_the_placeholder() -> None:
    messages = history(25, result_chars=6_000)
    pointer = ARTIFACT_POINTER_TEMPLATE.format(path="/home/u/.agentgraph/artifacts/c0.txt")
    first = messages[2]
    assert isinstance(first, ToolMessage)
    messages[2] = first.model_copy(update={"content": first.text + "\n[cut]" + pointer})
    sent = _sent(_unit(), messages)
    assert "saved in /home/u/.agentgraph/artifacts/c0.txt (read it with read_file)" in (
        sent[2].text
    )


def test_near_the_compaction_threshold_masking_keeps_only_the_newest_turn() -> None:
    # Each turn's reasoning stays in the prompt, so the masked floor rises turn by
    # turn; batches alone would let the prompt reach the compaction threshold (an LLM
    # summary) while most outputs could still be masked for free.
    unit = _unit()
    words = " ".join(f"step{n} value{n * 7 % 101}" for n in range(400))
    reasoning = " ".join(f"because{n}" for n in range(120))
    messages: list[BaseMessage] = history(1)[:1]
    for i in range(100):
        messages += [
            AIMessage(
                content=f"{reasoning} {i}; noted step{i}",
                id=f"a{i}",
                tool_calls=[{"name": "read_file", "args": {"path": f"f{i}.txt"}, "id": f"c{i}"}],
            ),
            ToolMessage(content=words, tool_call_id=f"c{i}", name="read_file", id=f"t{i}"),
        ]
    fixed = unit.view.fixed_tokens(request(messages).system_message, [])
    reached = 0
    for n in range(1, 101):
        plan = unit.plan(messages[: 2 * n + 1], fixed)[0]
        if plan.tokens_after >= unit.budget.compact_at:
            # A summary comes only when masking cannot help any more: every output
            # but the newest turn's (not answered yet) is masked already.
            assert plan.boundary == 2 * n - 1, (n, plan)
            reached += 1
    assert reached, "the floor of masked turns reaches the compaction threshold at last"


def test_a_growing_history_is_masked_as_a_fresh_unit_masks_it() -> None:
    # One unit measures only what each call added; the masking must not change for it.
    unit = _unit()
    messages = history(40, result_chars=6_000)
    calls = [messages[:n] for n in range(1, len(messages) + 1)]  # a result after its call too
    calls.insert(40, messages[5:31])  # not a continuation (as after a compaction)
    for prefix in calls:
        got, got_plan = unit.mask(prefix, 500)
        want, want_plan = _unit().mask(prefix, 500)
        assert (got, got_plan) == (want, want_plan)
    assert _masked(got)


def _estimating_unit(window: int | None = None) -> ObservationMaskingMiddleware:
    """A unit whose counter estimates (no offline tokenizer): the replay's thresholds
    follow the ratio the replies report. ``window``: the endpoint named a smaller one."""
    counter = get_counter("qwen2.5-coder-1.5b")
    budget = counter_and_budget(small_settings(12_000))[1]
    if window is not None:
        assert budget.adopt_window(window)
    assert counter.source == "estimate"
    events: list[dict[str, Any]] = []
    return ObservationMaskingMiddleware(PromptViewMiddleware(counter, budget), emit=events.append)


def _session(
    turns: list[tuple[int, float | None]], unnoted: frozenset[int] = frozenset()
) -> list[BaseMessage]:
    """A history of read_file turns: result size (chars) and the provider/estimate ratio
    its reply reported over the prompt before it (None: no usage). The reply after each
    result notes its code, except after the turns in ``unnoted``."""
    count = get_counter("qwen2.5-coder-1.5b").count_message
    messages: list[BaseMessage] = [HumanMessage("read the files", id="u0")]
    for i, (chars, ratio) in enumerate(turns):
        usage = None
        if ratio is not None:
            prompt = int(ratio * (300 + sum(count(m) for m in messages)))
            usage = {"input_tokens": prompt, "output_tokens": 9, "total_tokens": prompt + 9}
        messages.append(
            AIMessage(
                content=f"reading {i}"
                + (f"; noted D{i - 1:04d}" if i and i - 1 not in unnoted else ""),
                id=f"a{i}",
                tool_calls=[{"name": "read_file", "args": {"path": f"f{i}"}, "id": f"c{i}"}],
                usage_metadata=usage,
            )
        )
        messages.append(
            ToolMessage(
                content=f"{i} D{i:04d} " + "data " * (chars // 5),
                tool_call_id=f"c{i}",
                name="read_file",
                id=f"t{i}",
            )
        )
    return messages


def _shown(msg: BaseMessage) -> tuple[str, str, Any]:
    return msg.type, msg.text, msg.usage_metadata if isinstance(msg, AIMessage) else None


@settings(max_examples=60, deadline=None, database=None)
@given(
    turns=st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=6_000),
            st.one_of(st.none(), st.floats(min_value=0.7, max_value=2.2)),
        ),
        min_size=1,
        max_size=40,
    ),
    calls=st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=81),  # view end
            st.sampled_from([0, 0, 0, 2]),  # view start (after a compaction)
            st.sampled_from([300, 300, 300, 900]),  # fixed tokens (a new tool schema)
        ),
        min_size=1,
        max_size=25,
    ),
    shrink_at=st.one_of(st.none(), st.integers(min_value=0, max_value=24)),
    summary_scale=st.one_of(st.none(), st.floats(min_value=1.0, max_value=2.0)),
    unnoted=st.frozensets(st.integers(min_value=0, max_value=40)),
)
def test_a_resumed_replay_plans_as_a_fresh_one(
    turns: list[tuple[int, float | None]],
    calls: list[tuple[int, int, int]],
    shrink_at: int | None,
    summary_scale: float | None,
    unnoted: frozenset[int],
) -> None:
    """One unit resumes the replay where its last call stood when the view extends the
    last one; for any sequence of views (growing, cut, started anew, led by a summary
    that carries a ratio, with the system prompt's size, the reported ratio or the
    endpoint's window changing, some outputs never restated by the reply after them)
    its plans equal a fresh unit's."""
    messages = _session(turns, unnoted)
    if summary_scale is not None:  # the view after a compaction: the summary leads it
        summary = HumanMessage(
            "summary", id="s0", additional_kwargs=marker("summary", provider_scale=summary_scale)
        )
        messages = [summary, *messages[1:]]
    unit = _estimating_unit()
    window = None
    for n, (end, start, fixed) in enumerate(sorted(calls, key=lambda c: c[0])):
        if n == shrink_at:
            window = 6_000
            assert unit.budget.adopt_window(window)
        view = messages[start : max(end, start + 1)]
        got, got_plan = unit.mask(view, fixed)
        want, want_plan = _estimating_unit(window).mask(view, fixed)
        assert got_plan == want_plan
        assert [_shown(m) for m in got] == [_shown(m) for m in want]


def test_a_view_grown_by_several_requests_is_masked_as_a_fresh_unit_masks_it() -> None:
    """Between two calls the boundary moved at a request in between (no event at the
    last one): the masked view is rebuilt, not the last one extended."""
    messages = _session([(3_000, None)] * 30)
    unit = _estimating_unit()
    for end in (21, 23, 41):
        got, plan = unit.mask(messages[:end], 300)
        want, want_plan = _estimating_unit().mask(messages[:end], 300)
        assert plan == want_plan and [_shown(m) for m in got] == [_shown(m) for m in want]
    assert not plan.event and plan.boundary > 17


def test_a_window_the_endpoint_names_replays_the_past_requests_anew() -> None:
    """The replay resumes only under the budget it ran with: after the endpoint names a
    smaller window, the past requests are replayed with the new thresholds."""
    messages = _session([(3_000, None)] * 30)
    unit = _estimating_unit()
    for end in (21, 41):
        unit.plan(messages[:end], 300)
    assert unit.budget.adopt_window(6_000)
    assert unit.plan(messages[:43], 300) == _estimating_unit(6_000).plan(messages[:43], 300)


def _read_files(
    make_settings: Callable[..., Settings], workspace: Path, ratio: float | Callable[[int], float]
) -> tuple[OutCountingModel, list[dict[str, Any]], Budget]:
    """One turn of 30 file reads by a model whose provider counts ``ratio`` x our estimate."""
    settings = make_settings(
        AGENTGRAPH_CONTEXT_WINDOW="16000", AGENTGRAPH_MODEL="qwen2.5-coder-1.5b"
    )
    calls = 30
    script = noting_reads(workspace, calls)
    model = OutCountingModel([*script, ai_text("done")], get_counter(settings.model), ratio)
    summarizer = ScriptedChatModel(["we read files"], on_exhausted="repeat_last")
    with open_store(settings) as store:
        agent = Agent(settings, store, model=model, summarizer=summarizer, sleep=lambda _s: None)
        events = list(agent.stream_turn("m", "read all files", workspace))
        return model, events, agent.deps.budget


def _prefix_breaks(model: OutCountingModel) -> int:
    """Calls whose prompt does not extend the previous call's, but for the result a
    compaction kept for the model to see, masked once answered: the previous prompt
    ended with it, so nothing it cached is sent again."""
    breaks = 0
    for before, after in pairwise(model.calls):
        a = [(m.type, m.text) for m in before]
        b = [(m.type, m.text) for m in after]
        if b[: len(a)] == a:
            continue
        k = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), len(b))
        unseen = k < len(b) and before[k].additional_kwargs.get(UNSEEN_COPY_KEY)
        if not (unseen and a[k + 1 :] == b[k + 1 : len(a)]):
            breaks += 1
    return breaks


def test_masking_measures_in_the_providers_tokens_with_an_estimating_counter(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """No offline tokenizer, and the provider counts 1.6x our estimate (a local chat
    template): masking starts when the provider's count passes its threshold, before the
    prompt reaches the compaction threshold, not when our estimate passes it (which came
    only after compaction, so masking never ran and every step toward the threshold
    ended in a paid summary)."""
    model, events, budget = _read_files(make_settings, workspace, 1.6)
    kinds = [e["type"] for e in events if e["type"] in ("masking", "compaction")]
    assert kinds and kinds[0] == "masking"
    reported: list[int] = model.reported  # type: ignore[attr-defined]
    assert max(reported) < budget.compact_at  # masking alone kept it under
    first = next(i for i in range(1, len(reported)) if reported[i] < reported[i - 1])
    assert reported[first - 1] >= budget.usable * 0.5  # and not far too early
    # Between two masking events each prompt extends the previous one (the provider's
    # prefix cache serves it): the boundary replays the same at every call.
    assert _prefix_breaks(model) == kinds.count("masking")


@pytest.mark.parametrize(
    "ratio",
    [
        pytest.param(lambda i: 1.0 if i < 12 else 1.8, id="rises-mid-task"),
        pytest.param(lambda i: 1.8 if i < 12 else 1.2, id="falls-mid-task"),
        pytest.param(lambda i: (1.1, 1.7, 0.9)[i % 3], id="jitters"),
    ],
)
def test_a_drifting_ratio_keeps_the_prefix_between_masking_events(
    make_settings: Callable[..., Settings], workspace: Path, ratio: Callable[[int], float]
) -> None:
    """Each request point of the replay uses the ratio reported before it, never a later
    one: a later ratio would replay an earlier boundary differently from what was sent."""
    model, events, _budget = _read_files(make_settings, workspace, ratio)
    masking = sum(1 for e in events if e["type"] == "masking")
    assert masking and _prefix_breaks(model) == masking


def test_a_ratio_that_falls_back_to_one_stops_scaling(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """The provider counted 1.8x for the first replies, then as we do: masking waits for
    the threshold itself again (a ratio that could only rise masked at 55% of it)."""
    _model, events, budget = _read_files(make_settings, workspace, lambda i: 1.8 if i < 3 else 1.0)
    first = next(e for e in events if e["type"] == "masking")
    assert first["tokens_before"] >= 0.95 * budget.usable * 0.6


def test_a_result_kept_unseen_by_a_compaction_is_shown_whole_once_then_masked() -> None:
    """A result a compaction summarized before the model saw it is kept in view for the
    model to see (marked unseen): whole in the request that answers it, its placeholder
    once answered (the summary holds it; kept whole, it took its size from every call of
    the cycle). An unmarked result of the same size is not masked, and nothing of it
    counts as masked volume for a distilling compaction."""
    call = AIMessage(
        "", id="a1", tool_calls=[{"name": "read_file", "args": {"path": "big.py"}, "id": "r1"}]
    )
    body = "\n".join(f"{n}\tline {n} of big.py" for n in range(1, 400))
    kept = ToolMessage(
        body,
        tool_call_id="r1",
        name="read_file",
        id="t1",
        additional_kwargs={UNSEEN_COPY_KEY: True},
    )
    view = [HumanMessage("Edit big.py.", id="u0"), call, kept]
    assert _sent(_unit(), view)[-1].text == body
    edit = AIMessage(
        "", id="a2", tool_calls=[{"name": "edit_file", "args": {"path": "big.py"}, "id": "e1"}]
    )
    answered = [*view, edit, ToolMessage("edited big.py", tool_call_id="e1", id="t2")]
    sent = _sent(_unit(), answered)
    assert _masked(sent) == [2]
    assert 'read_file({"path": "big.py"})' in sent[2].text and 'read_history("r1")' in sent[2].text
    plain = [*answered[:2], kept.model_copy(update={"additional_kwargs": {}}), *answered[3:]]
    assert _masked(_sent(_unit(), plain)) == []
    call_ = ModelCall()
    _unit().wrap_model_call(request(answered), call_)
    assert not call_.requests[-1].state.get(MASKED_TOKENS_KEY)
