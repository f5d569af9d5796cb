"""Unit tests for agentgraph.runtime.history: concrete edge cases of each function."""

from __future__ import annotations

import copy
from collections.abc import Collection, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from agentgraph.runtime.history import (
    INTERNAL_KINDS,
    agentgraph_kind,
    build_prompt_view,
    extends,
    group_messages,
    is_user_request,
    latest_user_request_index,
    validate_history,
)
from agentgraph.runtime.history import view as history_view
from agentgraph.runtime.history.kinds import SYNTHETIC_RESULT_KIND, message_time, stamped
from agentgraph.runtime.history.repair import make_synthetic_result, normalize_with_report
from agentgraph.runtime.history.trim import trim_to_budget, truncate_messages_safely
from agentgraph.runtime.tool_ids import provider_ids


def normalize(
    msgs: Sequence[BaseMessage], *, pending_call_ids: Collection[str] = ()
) -> list[BaseMessage]:
    """The repaired history alone (the repair's report is not needed here)."""
    return normalize_with_report(msgs, pending_call_ids=pending_call_ids)[0]


def count(messages: Sequence[BaseMessage]) -> int:
    return sum(len(str(m.content)) // 4 + 4 for m in messages)


def sys(text: str = "sys", **kw: object) -> SystemMessage:
    return SystemMessage(content=text, **kw)  # type: ignore[arg-type]


def human(text: str = "hi", kind: str | None = None, **kw: object) -> HumanMessage:
    extra = {"agentgraph": {"kind": kind}} if kind else {}
    return HumanMessage(content=text, additional_kwargs=extra, **kw)  # type: ignore[arg-type]


def ai(text: str = "", *ids: str, **kw: object) -> AIMessage:
    calls = [{"name": f"tool_{cid}", "args": {}, "id": cid, "type": "tool_call"} for cid in ids]
    return AIMessage(content=text, tool_calls=calls, **kw)  # type: ignore[arg-type]


def tool(cid: str, text: str = "ok", **kw: object) -> ToolMessage:
    return ToolMessage(content=text, tool_call_id=cid, **kw)  # type: ignore[arg-type]


def is_synthetic(msg: BaseMessage) -> bool:
    return agentgraph_kind(msg) == SYNTHETIC_RESULT_KIND


# --------------------------------------------------------------------------- markers


def test_agentgraph_kind_reads_marker_and_ignores_malformed() -> None:
    assert agentgraph_kind(human("x", kind="summary")) == "summary"
    assert agentgraph_kind(human("x")) is None
    assert agentgraph_kind(HumanMessage("x", additional_kwargs={"agentgraph": "summary"})) is None
    assert agentgraph_kind(HumanMessage("x", additional_kwargs={"agentgraph": {"kind": 3}})) is None
    assert {"compact_boundary", "snapshot", "notice"} == INTERNAL_KINDS


def test_latest_user_request_skips_summaries_and_falls_back() -> None:
    msgs = [human("ask"), ai("a"), human("s", kind="summary"), human("f", kind="reinjected_file")]
    assert latest_user_request_index(msgs) == 0
    assert not is_user_request(msgs[2])
    assert latest_user_request_index([human("s", kind="summary"), ai("a")]) == 0
    assert latest_user_request_index([ai("a"), tool("x")]) is None


def test_synthetic_result_shape() -> None:
    msg = make_synthetic_result("c1", "bash")
    assert msg.tool_call_id == "c1"
    assert msg.name == "bash"
    assert msg.status == "error"
    assert isinstance(msg.content, str) and msg.content.startswith("aborted:")
    assert "interrupted" in msg.content
    assert is_synthetic(msg)


# --------------------------------------------------------------------------- groups


def test_group_messages_groups_call_with_its_results_only() -> None:
    msgs = [
        sys(),
        human(),
        ai("", "a", "b"),
        tool("b"),
        tool("a"),
        tool("a"),  # duplicate: its own group
        ai("done"),
        tool("zz"),  # orphan: its own group
    ]
    groups = group_messages(msgs)
    assert [len(g) for g in groups] == [1, 1, 3, 1, 1, 1]
    assert [m for g in groups for m in g] == msgs


def test_group_messages_stops_at_foreign_message() -> None:
    msgs = [ai("", "a", "b"), tool("a"), human("interrupt"), tool("b")]
    assert [len(g) for g in group_messages(msgs)] == [2, 1, 1]


# --------------------------------------------------------------------------- validate


def test_validate_accepts_valid_history() -> None:
    msgs = [sys(), human(), ai("", "a", "b"), tool("b"), tool("a"), ai("done"), human("more")]
    assert validate_history(msgs) == []


@pytest.mark.parametrize(
    ("msgs", "needle"),
    [
        ([], "empty"),
        ([sys(), ai("x")], "no user message"),
        ([sys(), ai("x"), human()], "must start with a user message"),
        ([human(), ai("", "a")], "no result directly after"),
        ([human(), ai("", "a"), human("x"), tool("a")], "not directly after its call"),
        ([human(), tool("nope")], "matches no tool call"),
        ([human(), ai("", "a"), tool("a"), tool("a")], "duplicate tool result"),
        ([human(), ai("", "a"), tool("a"), ai("", "a"), tool("a")], "already used"),
        ([human(id="m1"), ai("x", id="m1")], "duplicate message id"),
        ([human(), ai("", ""), tool("")], "empty id"),
        ([human(), ai("", "a"), sys("mid"), tool("a")], "no result directly after"),
    ],
)
def test_validate_reports_each_violation(msgs: list[BaseMessage], needle: str) -> None:
    problems = validate_history(msgs)
    assert any(needle in p for p in problems), problems


def test_validate_counts_invalid_tool_calls_as_calls() -> None:
    bad = AIMessage(
        content="",
        invalid_tool_calls=[{"name": "t", "args": "{", "id": "inv", "error": "json"}],
    )
    assert validate_history([human(), bad])
    assert validate_history([human(), bad, tool("inv")]) == []


# --------------------------------------------------------------------------- unanswered calls


def test_normalize_answers_unanswered_call_after_existing_results() -> None:
    call = ai("let me look", "a", "b", "c")
    msgs = [human(), call, tool("a"), tool("c"), human("stop")]
    out = normalize(msgs)
    assert out[:4] == msgs[:4]
    assert is_synthetic(out[4]) and out[4].tool_call_id == "b"  # type: ignore[attr-defined]
    assert out[4].name == "tool_b"
    assert out[5] is msgs[4]
    assert validate_history(out) == []


def test_normalize_never_drops_the_assistant_message_or_its_text() -> None:
    """An unanswered call does not cost the AIMessage its text or its answered calls."""
    call = ai("I'll run two commands", "a", "b")
    out = normalize([human(), call, tool("a"), human("nevermind")])
    assert out[1] is call
    assert out[2].tool_call_id == "a"  # type: ignore[attr-defined]
    assert out[3].tool_call_id == "b"  # type: ignore[attr-defined]
    assert validate_history(out) == []


def test_normalize_leaves_pending_calls_alone_and_does_not_mutate() -> None:
    msgs = [human(), ai("", "p", "q")]
    snapshot = copy.deepcopy(msgs)
    out = normalize(msgs, pending_call_ids={"p"})
    assert [getattr(m, "tool_call_id", None) for m in out[2:]] == ["q"]
    assert msgs == snapshot
    assert len(msgs) == 2


# --------------------------------------------------------------------------- normalize


def test_normalize_valid_history_is_unchanged_same_objects() -> None:
    msgs = [sys(), human(), ai("", "a"), tool("a"), ai("done")]
    out = normalize(msgs)
    assert all(o is m for o, m in zip(out, msgs, strict=True))


def test_normalize_moves_out_of_place_results_in_call_order() -> None:
    msgs = [human(), ai("", "a", "b", "c"), tool("b"), human("x"), tool("c"), tool("a")]
    out, report = normalize_with_report(msgs)
    assert [getattr(m, "tool_call_id", m.type) for m in out] == [
        "human",
        "ai",
        "b",
        "a",
        "c",
        "human",
    ]
    assert report.moved == 2
    assert validate_history(out) == []


def test_normalize_moves_result_that_precedes_its_call() -> None:
    msgs = [human(), tool("a", "early"), ai("", "a")]
    out = normalize(msgs)
    assert [m.type for m in out] == ["human", "ai", "tool"]
    assert out[2].content == "early"


def test_normalize_drops_orphans_and_duplicate_results_keeping_first() -> None:
    msgs = [human(), ai("", "a"), tool("a", "first"), tool("a", "second"), tool("ghost")]
    out, report = normalize_with_report(msgs)
    assert [m.content for m in out] == ["hi", "", "first"]
    assert (report.orphans, report.duplicate_results) == (1, 1)


def test_normalize_renames_a_reused_call_id_and_keeps_its_output() -> None:
    first = ai("", "a")
    reuse = ai("text stays", "a", "b")
    msgs = [human(), first, tool("a", "r1"), reuse, tool("a", "r2"), tool("b")]
    snapshot = copy.deepcopy(msgs)
    out, report = normalize_with_report(msgs)
    assert [m.content for m in out] == ["hi", "", "r1", "text stays", "r2", "ok"]
    new_id = out[3].tool_calls[0]["id"]  # type: ignore[attr-defined]
    assert new_id not in ("a", "b") and out[4].tool_call_id == new_id  # type: ignore[attr-defined]
    assert provider_ids(out[3]) == {new_id: "a"}
    assert out[3].id == reuse.id
    assert report.renamed_calls == 1
    assert msgs == snapshot  # inputs untouched
    assert validate_history(out) == []
    assert normalize(out) == out


def test_normalize_keeps_every_call_of_a_constant_id() -> None:
    msgs = [human(), ai("", "a"), tool("a", "r1"), ai("", "a"), tool("a", "r2"), ai("end")]
    out = normalize(msgs)
    assert [m.content for m in out] == ["hi", "", "r1", "", "r2", "end"]
    assert validate_history(out) == []


def test_normalize_renames_raw_openai_tool_calls_with_the_calls() -> None:
    raw = [
        {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        {"id": "b", "type": "function", "function": {"name": "f", "arguments": "{}"}},
    ]
    first = ai("", "a")
    second = AIMessage(content="x", additional_kwargs={"tool_calls": raw})
    assert [tc["id"] for tc in second.tool_calls] == ["a", "b"]
    out = normalize([human(), first, tool("a"), second, tool("b")])
    kept = out[3]
    ids = [tc["id"] for tc in kept.tool_calls]  # type: ignore[attr-defined]
    assert ids[1] == "b" and ids[0] != "a"
    assert [tc["id"] for tc in kept.additional_kwargs["tool_calls"]] == ids
    assert len(second.additional_kwargs["tool_calls"]) == 2


def test_normalize_renames_empty_call_ids_and_drops_duplicate_message_ids() -> None:
    msgs = [human(id="h"), ai("keep", "", "a"), tool("", "r0"), tool("a"), human("dup", id="h")]
    out, report = normalize_with_report(msgs)
    assert [m.content for m in out] == ["hi", "keep", "r0", "ok"]
    assert report.duplicate_messages == 1
    assert report.renamed_calls == 1
    assert out[2].tool_call_id == out[1].tool_calls[0]["id"] != ""  # type: ignore[attr-defined]
    assert validate_history(out) == []


def test_normalize_matches_duplicate_ids_in_one_message_by_order() -> None:
    msgs = [human(), ai("", "a", "a", "a"), tool("a", "r1"), tool("a", "r2"), tool("a", "r3")]
    out = normalize(msgs)
    calls = [tc["id"] for tc in out[1].tool_calls]  # type: ignore[attr-defined]
    assert calls[0] == "a" and len(set(calls)) == 3
    assert [(m.tool_call_id, m.content) for m in out[2:]] == list(  # type: ignore[attr-defined]
        zip(calls, ["r1", "r2", "r3"], strict=True)
    )
    assert validate_history(out) == []


def test_normalize_adds_synthetic_but_respects_pending() -> None:
    msgs = [human(), ai("", "a"), human("q"), ai("", "p")]
    out = normalize(msgs, pending_call_ids=["p"])
    assert [getattr(m, "tool_call_id", m.type) for m in out] == ["human", "ai", "a", "human", "ai"]
    assert is_synthetic(out[2])


def test_normalize_is_idempotent_on_messy_input() -> None:
    msgs = [
        human(),
        tool("b"),
        ai("", "a", "b"),
        sys("mid"),
        tool("a"),
        tool("a"),
        ai("", "b", "c"),
        tool("orphan"),
    ]
    once = normalize(msgs)
    assert normalize(once) == once
    assert validate_history(once) == []


# --------------------------------------------------------------------------- truncate


def _turns(n: int) -> list[BaseMessage]:
    msgs: list[BaseMessage] = []
    for i in range(n):
        msgs += [human(f"q{i}"), ai("", f"c{i}"), tool(f"c{i}"), ai(f"a{i}")]
    return msgs


def test_truncate_never_keeps_a_call_without_its_result() -> None:
    """A cut never keeps an AIMessage with tool_calls while dropping its ToolMessage."""
    msgs = [sys(), *_turns(5)]  # 20 non-system messages
    for keep in range(0, 22):
        out = truncate_messages_safely(msgs, keep)
        assert validate_history(out) == [], (keep, validate_history(out))
        assert out[0] is msgs[0]
        assert out[-4:] == msgs[-4:]


def test_truncate_moves_cut_forward_to_next_user_message() -> None:
    msgs = [sys(), *_turns(3)]
    out = truncate_messages_safely(msgs, 6)  # 6 would start at an ai group
    assert [m.content for m in out] == ["sys", "q2", "", "ok", "a2"]


def test_truncate_keeps_current_turn_even_if_longer_than_window() -> None:
    msgs = [human("old"), ai("x"), human("now")]
    for i in range(30):
        msgs += [ai("", f"c{i}"), tool(f"c{i}")]
    out = truncate_messages_safely(msgs, 10)
    assert out[0].content == "now"
    assert len(out) == 61


def test_truncate_keeps_mid_system_messages_in_relative_position() -> None:
    msgs = [sys("a"), human("q0"), sys("b"), ai("x"), human("q1"), sys("c"), ai("y")]
    out = truncate_messages_safely(msgs, 2)
    assert [m.content for m in out] == ["a", "b", "q1", "c", "y"]


def test_truncate_drops_leading_assistant_of_imported_history() -> None:
    msgs = [ai("", "a"), tool("a"), ai("hello"), human("q")]
    out = truncate_messages_safely(msgs, 40)
    assert [m.content for m in out] == ["q"]


def test_truncate_without_any_user_message_leaves_the_list() -> None:
    msgs = [sys(), ai("a"), ai("b")]
    assert truncate_messages_safely(msgs, 40) == msgs
    with pytest.raises(ValueError):
        truncate_messages_safely(msgs, -1)


def test_truncate_current_turn_is_latest_real_request_not_summary() -> None:
    msgs = [human("old"), ai("x"), human("req"), ai("y"), human("f", kind="reinjected_file")]
    out = truncate_messages_safely(msgs, 1)
    assert [m.content for m in out] == ["req", "y", "f"]


# --------------------------------------------------------------------------- trim


def test_trim_to_budget_keeps_newest_whole_groups() -> None:
    msgs = [sys("s" * 40), *_turns(4)]
    full = count(msgs)
    result = trim_to_budget(msgs, full - 1, count)
    assert not result.overflow
    assert result.tokens <= full - 1
    assert result.tokens == count(result.messages)
    assert validate_history(result.messages) == []
    assert result.messages[0] is msgs[0]
    assert result.dropped == len(msgs) - len(result.messages)
    assert result.messages[1].content == "q1"


def test_trim_to_budget_overflow_keeps_turn_instead_of_only_system() -> None:
    huge = "x" * 40_000
    msgs = [sys(), human("old"), ai("a"), human("read it"), ai("", "c"), tool("c", huge)]
    result = trim_to_budget(msgs, 1_000, count)
    assert result.overflow
    assert [m.content for m in result.messages][:2] == ["sys", "read it"]
    assert len(result.messages) == 4
    assert validate_history(result.messages) == []


def test_trim_to_budget_whole_history_fits() -> None:
    msgs = [sys(), *_turns(2)]
    result = trim_to_budget(msgs, 10_000, count)
    assert result.messages == msgs
    assert (result.overflow, result.dropped) == (False, 0)


def test_trim_to_budget_counts_each_message_at_most_once() -> None:
    calls: list[int] = []

    def counting(msgs: Sequence[BaseMessage]) -> int:
        calls.append(len(msgs))
        return count(msgs)

    msgs = [sys(), *_turns(500)]
    result = trim_to_budget(msgs, 200, counting)
    assert max(calls) <= 2  # one message or one call group per call
    # Only the kept messages, the ones the start rule removed (at most 3) and the
    # first group that does not fit (at most 2) are counted, not all 2,001.
    assert sum(calls) <= len(result.messages) + 5
    assert validate_history(result.messages) == []


def test_trim_to_budget_start_rule_subtracts_tokens() -> None:
    msgs = [human("q0"), ai("", "a"), tool("a", "y" * 400), human("q1"), ai("z")]
    budget = count(msgs[2:])  # fits the tool result but not the call before it
    result = trim_to_budget(msgs, budget, count)
    assert [m.content for m in result.messages] == ["q1", "z"]
    assert result.tokens == count(result.messages)


# --------------------------------------------------------------------------- prompt view


def test_prompt_view_drops_internal_and_replaces_system() -> None:
    live = SystemMessage("live prompt")
    msgs = [
        sys("stored"),
        human("q"),
        SystemMessage("boundary", additional_kwargs={"agentgraph": {"kind": "compact_boundary"}}),
        human("snap", kind="snapshot"),
        human("summary", kind="summary"),
        ai("", "a"),
        human("notice", kind="notice"),
        human("q2"),
    ]
    view = build_prompt_view(msgs, system=[live], counter=count)
    assert [m.content for m in view.messages] == [
        "live prompt",
        "q",
        "summary",
        "",
        "aborted: no result was recorded for this call (interrupted)",
        "q2",
    ]
    assert view.repaired == 1
    assert view.tokens == count(view.messages)
    assert validate_history(view.messages) == []


def test_prompt_view_without_live_system_hoists_stored() -> None:
    msgs = [human("q"), sys("late"), ai("a")]
    view = build_prompt_view(msgs, counter=count)
    assert [m.content for m in view.messages] == ["late", "q", "a"]


def test_prompt_view_window_and_budget_and_pending() -> None:
    msgs = [*_turns(30), human("now"), ai("", "p")]
    view = build_prompt_view(
        msgs,
        system=[SystemMessage("s")],
        keep_recent=10,
        max_tokens=60,
        counter=count,
        pending_call_ids={"p"},
    )
    assert view.messages[-2].content == "now"
    assert view.messages[-1].tool_calls[0]["id"] == "p"  # type: ignore[attr-defined]
    assert view.tokens <= 60
    assert view.dropped == len(msgs) - (len(view.messages) - 1)
    problems = validate_history(view.messages)
    assert len(problems) == 1 and "'p'" in problems[0]


def test_prompt_view_reports_overflow() -> None:
    msgs = [human("q" * 10_000)]
    view = build_prompt_view(msgs, system=[SystemMessage("s")], max_tokens=100, counter=count)
    assert view.overflow
    assert view.messages[-1] is msgs[0]


def test_prompt_view_does_not_mutate_state() -> None:
    msgs = [human("q"), tool("x"), ai("", "a", "a"), human("q2")]
    snapshot = copy.deepcopy(msgs)
    build_prompt_view(msgs, keep_recent=10, max_tokens=1_000, counter=count)
    assert msgs == snapshot


def test_prompt_view_shortcut_on_long_history_matches_full_pipeline() -> None:
    calls: list[int] = []

    def counting(msgs: Sequence[BaseMessage]) -> int:
        calls.append(len(msgs))
        return count(msgs)

    msgs = [sys(), *_turns(2_000), human("now"), ai("", "tail")]
    fast = build_prompt_view(msgs, system=[sys("live")], max_tokens=500, counter=counting)
    assert len(calls) < 300  # only the recent window is counted, not 8,002 messages
    full = history_view._build_view(msgs, [sys("live")], None, 500, count, ())
    assert fast.messages == full.messages
    assert (fast.tokens, fast.dropped, fast.overflow) == (full.tokens, full.dropped, False)
    assert validate_history(fast.messages) == []
    assert fast.messages[-1].tool_call_id == "tail"  # type: ignore[attr-defined]


def test_prompt_view_shortcut_falls_back_when_old_part_is_linked() -> None:
    # The newest turn re-uses a call id from the oldest turn: only the whole
    # history shows that the re-used call needs a fresh id.
    msgs = [*_turns(200), human("now"), ai("again", "c0"), tool("c0", "late")]
    view = build_prompt_view(msgs, max_tokens=200, counter=count)
    assert [m.content for m in view.messages[-3:]] == ["now", "again", "late"]
    assert view.messages[-1].tool_call_id not in ("", "c0")  # type: ignore[attr-defined]
    assert validate_history(view.messages) == []
    full = history_view._build_view(msgs, [], None, 200, count, ())
    assert view.messages == full.messages


def test_a_stamp_keeps_the_marker_and_is_never_replaced() -> None:
    marked = HumanMessage("summary", additional_kwargs={"agentgraph": {"kind": "summary"}})
    first = stamped(marked, 1_700_000_000.5)
    assert message_time(first) == 1_700_000_000.5 and agentgraph_kind(first) == "summary"
    assert stamped(first, 5.0) is first
    assert message_time(marked) is None  # the original is not changed


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 1e20, -1e20, True, "3", None])
def test_a_hostile_stamp_is_no_time(value: object) -> None:
    msg = HumanMessage("x", additional_kwargs={"agentgraph": {"timestamp": value}})
    assert message_time(msg) is None


@settings(max_examples=200, deadline=None, database=None)
@given(
    size=st.integers(min_value=0, max_value=8),
    at=st.integers(min_value=0, max_value=9),
    length=st.integers(min_value=0, max_value=9),
    swap=st.one_of(st.none(), st.integers(min_value=0, max_value=8)),
)
def test_extends_means_the_same_objects_from_the_offset_on(
    size: int, at: int, length: int, swap: int | None
) -> None:
    items = [HumanMessage(f"m{i}") for i in range(size)]
    prefix = items[at : at + length]
    if swap is not None and swap < len(prefix):
        prefix[swap] = HumanMessage(prefix[swap].text)  # equal, but another object
    swapped = swap is not None and swap < len(prefix)
    assert extends(items, prefix, at) is (at <= size and not swapped)
    assert extends(items, [*prefix, HumanMessage("more")], at) is False
