"""Property tests for agentgraph.runtime.history on random, broken histories.

Profiles: ``HYPOTHESIS_PROFILE=ci`` (>= 10,000 examples over the file, derandomized so
CI is reproducible; the default when ``CI`` is set, and ``.ci/run`` sets it) or
``HYPOTHESIS_PROFILE=dev`` (quick; the default otherwise, so the unit suite stays fast).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Collection, Sequence
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from agentgraph.context.tokens import get_counter
from agentgraph.runtime.history import (
    INTERNAL_KINDS,
    agentgraph_kind,
    build_prompt_view,
    group_messages,
    latest_user_request_index,
    validate_history,
)
from agentgraph.runtime.history import view as history_view
from agentgraph.runtime.history.kinds import SYNTHETIC_RESULT_KIND
from agentgraph.runtime.history.repair import normalize_with_report
from agentgraph.runtime.history.trim import trim_to_budget, truncate_messages_safely
from agentgraph.runtime.tool_ids import admit_reply, provider_ids


def normalize(
    msgs: Sequence[BaseMessage], *, pending_call_ids: Collection[str] = ()
) -> list[BaseMessage]:
    """The repaired history alone (the repair's report is not needed here)."""
    return normalize_with_report(msgs, pending_call_ids=pending_call_ids)[0]


# --------------------------------------------------------------------------- profiles

CI_EXAMPLES_PER_PROPERTY = 1_200  # x 11 properties = 13,200 examples per run
DEV_EXAMPLES_PER_PROPERTY = 60
_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example]

# Registered under namespaced names so that loading them never clobbers a
# project-wide "ci"/"dev" profile; each property is decorated with the selected
# settings object instead of changing hypothesis' global default.
settings.register_profile(
    "history-ci",
    max_examples=CI_EXAMPLES_PER_PROPERTY,
    deadline=None,
    derandomize=True,
    suppress_health_check=_HEALTH,
)
settings.register_profile(
    "history-dev",
    max_examples=DEV_EXAMPLES_PER_PROPERTY,
    deadline=None,
    suppress_health_check=_HEALTH,
)
PROFILE_NAME = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
PROFILE = settings.get_profile("history-dev" if PROFILE_NAME == "dev" else "history-ci")


def count(messages: Sequence[BaseMessage]) -> int:
    """Cheap counter: len(content)//4 + 4 per message."""
    return sum(len(str(m.content)) // 4 + 4 for m in messages)


# --------------------------------------------------------------------------- generator

SMALL = [
    "",
    "ok",
    "fix the failing test in tests/test_api.py",
    "读取文件 src/main.py 并修复错误",
    "def f(x):\n    return x + 1\n",
    "エラー: ファイルが見つかりません",
    "   ",
]
BIG = [
    "x" * 3_000,
    "日本語のテキストと中文内容" * 400,
    "line of build output\n" * 2_500,
    "a" * 200_000,
    "漢" * 68_000,  # ~200 KB of UTF-8
]
CONTENTS = st.one_of(
    st.sampled_from(SMALL),
    st.sampled_from(SMALL),
    st.sampled_from(BIG),
    st.text(max_size=10),
)
EVENTS = ["human", "ai", "calls", "calls", "calls", "system", "internal", "summary"]
PERTURBATIONS = [
    "drop_result",
    "move_result",
    "dup_result",
    "orphan",
    "reuse_id",
    "dup_msg",
    "empty_id",
    "mid_system",
    "tail_interrupt",
    "invalid_call",
]


class _Builder:
    def __init__(self) -> None:
        self.n = 0
        self.call_n = 0

    def tag(self) -> dict[str, Any]:
        self.n += 1
        return {"t": self.n}

    def new_call_id(self) -> str:
        self.call_n += 1
        return f"call_{self.call_n}"

    def human(self, content: str, kind: str | None = None) -> HumanMessage:
        kw = self.tag()
        if kind:
            kw["agentgraph"] = {"kind": kind}
        return HumanMessage(content=content, additional_kwargs=kw, id=f"m{self.n}")

    def system(self, content: str, kind: str | None = None) -> SystemMessage:
        kw = self.tag()
        if kind:
            kw["agentgraph"] = {"kind": kind}
        return SystemMessage(content=content, additional_kwargs=kw, id=f"m{self.n}")

    def ai(self, content: str, ids: Sequence[str] = (), invalid: Sequence[str] = ()) -> AIMessage:
        calls = [{"name": "bash", "args": {"cmd": i}, "id": i, "type": "tool_call"} for i in ids]
        bad = [{"name": "edit", "args": "{", "id": i, "error": "bad json"} for i in invalid]
        return AIMessage(
            content=content,
            tool_calls=calls,
            invalid_tool_calls=bad,
            additional_kwargs=self.tag(),
            id=f"m{self.n}",
        )

    def tool(self, cid: str, content: str) -> ToolMessage:
        return ToolMessage(
            content=content, tool_call_id=cid, additional_kwargs=self.tag(), id=f"m{self.n}"
        )


@st.composite
def histories(
    draw: st.DrawFn, *, start_with_human: bool = True, max_events: int = 18
) -> list[BaseMessage]:
    """A coding-agent history, then broken in random ways."""
    b = _Builder()
    msgs: list[BaseMessage] = [b.system(draw(CONTENTS)) for _ in range(draw(st.integers(0, 2)))]
    if start_with_human:
        msgs.append(b.human(draw(CONTENTS)))
    call_ids: list[str] = []
    for event in draw(st.lists(st.sampled_from(EVENTS), max_size=max_events)):
        if event == "human":
            msgs.append(b.human(draw(CONTENTS)))
        elif event == "ai":
            msgs.append(b.ai(draw(CONTENTS)))
        elif event == "calls":
            ids = [b.new_call_id() for _ in range(draw(st.integers(1, 3)))]
            call_ids += ids
            msgs.append(b.ai(draw(st.sampled_from(["", "let me check"])), ids))
            for k in draw(st.permutations(range(len(ids)))):
                msgs.append(b.tool(ids[k], draw(CONTENTS)))
        elif event == "system":
            msgs.append(b.system(draw(CONTENTS)))
        elif event == "summary":
            kind = draw(st.sampled_from(["summary", "reinjected_file"]))
            msgs.append(b.human(draw(CONTENTS), kind))
        else:
            kind = draw(st.sampled_from(sorted(INTERNAL_KINDS)))
            make = draw(st.sampled_from([b.human, b.system]))
            msgs.append(make("record", kind))

    def pos(lo: int = 0) -> int:
        return lo + draw(st.integers(0, 10**6)) % (len(msgs) + 1 - lo)

    for op in draw(st.lists(st.sampled_from(PERTURBATIONS), max_size=5)):
        tools = [i for i, m in enumerate(msgs) if isinstance(m, ToolMessage)]
        if op in ("drop_result", "move_result", "dup_result") and tools:
            i = tools[draw(st.integers(0, len(tools) - 1))]
            victim = msgs.pop(i) if op != "dup_result" else msgs[i]
            if op == "move_result":
                msgs.insert(pos(), victim)
            elif op == "dup_result":
                msgs.insert(pos(), victim.model_copy(update={"id": None, **_retag(b, victim)}))
        elif op == "orphan":
            msgs.insert(pos(), b.tool("ghost_" + b.new_call_id(), "orphan"))
        elif op == "reuse_id" and call_ids:
            cid = call_ids[draw(st.integers(0, len(call_ids) - 1))]
            extra = [b.new_call_id()] if draw(st.booleans()) else []
            at = pos()
            msgs.insert(at, b.ai(draw(st.sampled_from(["", "again"])), [cid, *extra]))
            msgs.insert(at + 1, b.tool(cid, "reused result"))
        elif op == "dup_msg" and msgs:
            i = draw(st.integers(0, len(msgs) - 1))
            msgs.insert(pos(i + 1), msgs[i].model_copy(update=_retag(b, msgs[i])))
        elif op == "empty_id":
            at = pos()
            msgs.insert(at, b.ai("blank id", [""]))
            if draw(st.booleans()):
                msgs.insert(at + 1, b.tool("", "result of blank"))
        elif op == "mid_system":
            msgs.insert(pos(), b.system("mid-history system note"))
        elif op == "tail_interrupt":
            msgs.append(b.ai("", [b.new_call_id() for _ in range(draw(st.integers(1, 3)))]))
        elif op == "invalid_call":
            cid = b.new_call_id()
            at = pos()
            msgs.insert(at, b.ai("", [], [cid]))
            if draw(st.booleans()):
                msgs.insert(at + 1, b.tool(cid, "parse error reported"))
    return msgs


def _retag(b: _Builder, msg: BaseMessage) -> dict[str, Any]:
    return {"additional_kwargs": {**msg.additional_kwargs, **b.tag()}}


BUDGETS = st.one_of(
    st.sampled_from([0, 20, 100, 1_000, 10_000, 60_000, 10**7]),
    st.integers(0, 120_000),
)


# --------------------------------------------------------------------------- helpers


def tag(msg: BaseMessage) -> int | None:
    value = msg.additional_kwargs.get("t")
    return value if isinstance(value, int) else None


def is_synthetic(msg: BaseMessage) -> bool:
    return agentgraph_kind(msg) == SYNTHETIC_RESULT_KIND


def call_ids_of(msg: BaseMessage) -> list[str]:
    if not isinstance(msg, AIMessage):
        return []
    return [tc["id"] or "" for tc in msg.tool_calls] + [
        tc["id"] or "" for tc in msg.invalid_tool_calls
    ]


def with_human_first(msgs: list[BaseMessage]) -> list[BaseMessage]:
    if msgs and isinstance(msgs[0], HumanMessage) and agentgraph_kind(msgs[0]) is None:
        return msgs
    return [HumanMessage("start", id="lead-human", additional_kwargs={"t": 0}), *msgs]


def dedupe_ids(msgs: Sequence[BaseMessage]) -> list[BaseMessage]:
    seen: set[str] = set()
    out = []
    for m in msgs:
        if m.id:
            if m.id in seen:
                continue
            seen.add(m.id)
        out.append(m)
    return out


def assert_nothing_invented(out: Sequence[BaseMessage], inp: Sequence[BaseMessage]) -> None:
    """Each output message is an input message (maybe with fewer calls) or synthetic."""
    by_tag = {tag(m): m for m in inp if tag(m) is not None}
    by_tag.update({tag(m): m for m in inp if tag(m) is None})
    for m in out:
        if is_synthetic(m):
            assert isinstance(m, ToolMessage) and m.status == "error"
            continue
        original = by_tag.get(tag(m)) if tag(m) is not None else None
        assert original is not None, m
        assert m.content == original.content and type(m) is type(original)
        # A call given a fresh id (repeated or empty provider id) names the old one.
        renamed = provider_ids(m)
        assert {renamed.get(c, c) for c in call_ids_of(m)} <= set(call_ids_of(original))


def assert_order_kept(out: Sequence[BaseMessage], inp: Sequence[BaseMessage]) -> None:
    """Non-tool messages of ``out`` keep their relative order from ``inp``."""
    position = {tag(m): i for i, m in enumerate(inp)}
    idx = [position[tag(m)] for m in out if not isinstance(m, ToolMessage)]
    assert idx == sorted(idx)


def assert_suffix_with_systems(out: Sequence[BaseMessage], inp: Sequence[BaseMessage]) -> None:
    """``out`` = every system message before the cut + a whole suffix of ``inp``."""
    position = {id(m): i for i, m in enumerate(inp)}
    idx = [position[id(m)] for m in out]
    assert idx == sorted(idx) and len(set(idx)) == len(idx)
    first_kept = next((i for i in idx if not isinstance(inp[i], SystemMessage)), len(inp))
    assert idx == [
        i for i in range(len(inp)) if i >= first_kept or isinstance(inp[i], SystemMessage)
    ]


def assert_starts_with_user(out: Sequence[BaseMessage]) -> None:
    first = next((m for m in out if not isinstance(m, SystemMessage)), None)
    assert first is None or isinstance(first, HumanMessage)


# --------------------------------------------------------------------------- properties


@PROFILE
@given(histories(start_with_human=False))
def test_group_messages_is_a_partition_into_call_groups(msgs: list[BaseMessage]) -> None:
    groups = group_messages(msgs)
    assert [m for g in groups for m in g] == msgs
    for g in groups:
        assert g
        if len(g) > 1:
            ids = call_ids_of(g[0])
            results = [m.tool_call_id for m in g[1:] if isinstance(m, ToolMessage)]
            assert len(results) == len(g) - 1
            assert len(set(results)) == len(results) and set(results) <= set(ids)
    for g, nxt in itertools.pairwise(groups):
        # maximal: a directly following result of a still open call joins the group
        open_ids = set(call_ids_of(g[0])) - {getattr(m, "tool_call_id", None) for m in g[1:]}
        assert not (isinstance(nxt[0], ToolMessage) and nxt[0].tool_call_id in open_ids)


@PROFILE
@given(histories())
def test_validate_is_empty_exactly_when_normalize_changes_nothing(
    msgs: list[BaseMessage],
) -> None:
    msgs = with_human_first(msgs)
    out = normalize(msgs)
    assert (validate_history(msgs) == []) == (out == msgs)
    assert validate_history(out) == []


@PROFILE
@given(histories())
def test_normalize_is_valid_idempotent_and_invents_nothing(msgs: list[BaseMessage]) -> None:
    msgs = with_human_first(msgs)
    frozen = [m.model_copy(deep=True) for m in msgs]
    out = normalize(msgs)
    assert validate_history(out) == []
    assert normalize(out) == out
    assert msgs == frozen  # inputs not mutated
    assert_nothing_invented(out, msgs)
    assert_order_kept(out, msgs)
    kept = {id(m) for m in out}
    for m in dedupe_ids(msgs):
        if isinstance(m, HumanMessage | SystemMessage):
            assert id(m) in kept


@PROFILE
@given(histories(start_with_human=False), st.integers(0, 60))
def test_truncate_keeps_whole_groups_and_the_current_turn(
    msgs: list[BaseMessage], keep: int
) -> None:
    inp = normalize(msgs)
    out = truncate_messages_safely(inp, keep)
    assert_suffix_with_systems(out, inp)
    assert [m for m in out if isinstance(m, SystemMessage)] == [
        m for m in inp if isinstance(m, SystemMessage)
    ]
    latest = latest_user_request_index(inp)
    if latest is None:  # no user message: only the window applies
        kept = [m for m in out if not isinstance(m, SystemMessage)]
        groups = [g for g in group_messages(inp) if not isinstance(g[0], SystemMessage)]
        assert len(kept) <= max(keep, len(groups[-1]) if groups else 0)
        return
    assert validate_history(out) == []
    assert_starts_with_user(out)
    assert out[len(out) - (len(inp) - latest) :] == inp[latest:]
    kept_non_system = [m for m in out if not isinstance(m, SystemMessage)]
    turn = [m for m in inp[latest:] if not isinstance(m, SystemMessage)]
    assert len(kept_non_system) <= keep or kept_non_system == turn
    total = sum(1 for m in inp if not isinstance(m, SystemMessage))
    if total <= keep and validate_history(inp) == []:
        assert out == inp


@PROFILE
@given(histories(start_with_human=False), BUDGETS)
def test_trim_to_budget_holds_budget_or_reports_overflow(
    msgs: list[BaseMessage], budget: int
) -> None:
    inp = normalize(msgs)
    calls: list[int] = []

    def counter(batch: Sequence[BaseMessage]) -> int:
        calls.append(len(batch))
        return count(batch)

    result = trim_to_budget(inp, budget, counter)
    out = result.messages
    assert sum(calls) <= len(inp)  # each message counted at most once
    assert result.tokens == count(out)
    assert result.dropped == len(inp) - len(out)
    assert_suffix_with_systems(out, inp)
    assert [m for m in out if isinstance(m, SystemMessage)] == [
        m for m in inp if isinstance(m, SystemMessage)
    ]
    latest = latest_user_request_index(inp)
    if latest is not None:
        assert validate_history(out) == []
        assert_starts_with_user(out)
        assert out[len(out) - (len(inp) - latest) :] == inp[latest:]
        turn_and_system = [m for i, m in enumerate(inp) if i >= latest or m.type == "system"]
        if result.overflow:
            assert out == turn_and_system
            assert count(turn_and_system) > budget
        if count(inp) <= budget and validate_history(inp) == []:
            assert out == inp
    assert result.tokens <= budget or result.overflow


@PROFILE
@given(histories(start_with_human=False), st.one_of(st.none(), st.integers(0, 60)), BUDGETS)
def test_prompt_view_is_always_sendable(
    msgs: list[BaseMessage], keep: int | None, budget: int
) -> None:
    live = [SystemMessage("you are agentgraph")]
    view = build_prompt_view(msgs, system=live, keep_recent=keep, max_tokens=budget, counter=count)
    out = view.messages
    assert out[0] is live[0]
    assert all(agentgraph_kind(m) not in INTERNAL_KINDS for m in out)
    assert not any(isinstance(m, SystemMessage) for m in out[1:])
    assert view.tokens == count(out)
    assert view.tokens <= budget or view.overflow
    assert_nothing_invented(out[1:], msgs)
    assert_order_kept(out[1:], msgs)
    sendable = dedupe_ids(
        [
            m
            for m in msgs
            if not isinstance(m, SystemMessage) and agentgraph_kind(m) not in INTERNAL_KINDS
        ]
    )
    latest = latest_user_request_index(sendable)
    if latest is None:
        return
    assert validate_history(out) == []
    assert any(m is sendable[latest] for m in out)  # the latest user request survives
    if view.overflow:
        turn_start = next(i for i, m in enumerate(out) if m is sendable[latest])
        assert turn_start == 1  # only the system prompt and the current turn remain


@PROFILE
@given(histories(), st.data())
def test_prompt_view_leaves_pending_calls_unanswered(msgs: list[BaseMessage], data: Any) -> None:
    answered = {m.tool_call_id for m in msgs if isinstance(m, ToolMessage)}
    unanswered = [cid for m in msgs for cid in call_ids_of(m) if cid and cid not in answered]
    pending = set(data.draw(st.lists(st.sampled_from(unanswered)))) if unanswered else set()
    view = build_prompt_view(msgs, counter=count, pending_call_ids=pending)
    results = {m.tool_call_id for m in view.messages if isinstance(m, ToolMessage)}
    assert not results & pending
    for problem in validate_history(view.messages):
        assert any(repr(cid) in problem for cid in pending), problem


@PROFILE
@given(
    histories(start_with_human=False, max_events=40),
    st.one_of(st.none(), st.integers(0, 8)),
    st.one_of(st.integers(0, 2_000), BUDGETS),
)
def test_prompt_view_window_shortcut_gives_the_full_result(
    msgs: list[BaseMessage], keep: int | None, budget: int | None
) -> None:
    live = [SystemMessage("live")]
    saved = history_view.WINDOW_MIN_MESSAGES
    history_view.WINDOW_MIN_MESSAGES = 0  # let short generated histories take the shortcut
    try:
        fast = build_prompt_view(
            msgs, system=live, keep_recent=keep, max_tokens=budget, counter=count
        )
    finally:
        history_view.WINDOW_MIN_MESSAGES = saved
    full = history_view._build_view(msgs, live, keep, budget, count, ())
    assert fast.messages == full.messages
    assert (fast.tokens, fast.overflow, fast.dropped) == (full.tokens, full.overflow, full.dropped)


# How a call may see copies of stored messages (see the test below).
EDITS = ["as is", "usage", "content", "masked", "masked", "recall", "internal", "reid"]


@PROFILE
@given(
    histories(start_with_human=False, max_events=30),
    st.lists(st.integers(0, 5), max_size=14),
    st.one_of(st.none(), st.integers(0, 60)),
    st.one_of(st.sampled_from([10**7]), BUDGETS),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.lists(st.sampled_from(EDITS), max_size=15),
)
def test_an_extended_prompt_view_equals_the_whole_build(
    msgs: list[BaseMessage],
    steps: list[int],
    keep: int | None,
    budget: int,
    live_system: bool,
    pend: bool,
    short_window: bool,
    edits: list[str],
) -> None:
    # The history grows a few messages at a time, as between the model calls of a turn;
    # a zero step repeats a call. Each view must be exactly the one built from scratch.
    # A call may see copies: the newest reply with its usage restated, the older tool
    # results masked (as masking does at an event), or, never in the graph, the reply
    # with new content or a result answering another call.
    live = [SystemMessage("live")] if live_system else []
    last_calls = [m for m in msgs if isinstance(m, AIMessage) and m.tool_calls][-1:]
    pending = [c["id"] or "" for m in last_calls for c in m.tool_calls] if pend else []
    ends = [*itertools.accumulate(steps), len(msgs)]
    views = history_view.IncrementalPromptView()
    saved = history_view.WINDOW_MIN_MESSAGES
    if short_window:
        history_view.WINDOW_MIN_MESSAGES = 0  # short lists may take the window shortcut
    try:
        for end in (min(e, len(msgs)) for e in ends):
            # A fresh system prompt object each call, as the model node builds it.
            system = [m.model_copy() for m in live]
            kwargs: dict[str, Any] = {
                "system": system,
                "keep_recent": keep,
                "max_tokens": budget,
                "counter": count,
                "pending_call_ids": pending,
            }
            sent = _edited(msgs[:end], edits.pop() if edits else "as is")
            got = views.build(sent, **kwargs)
            want = build_prompt_view(sent, **kwargs)
            assert got == want
            assert all(a is b for a, b in zip(got.messages, system, strict=False))
    finally:
        history_view.WINDOW_MIN_MESSAGES = saved


def _edited(msgs: list[BaseMessage], edit: str) -> list[BaseMessage]:
    """``msgs`` with copies made by ``edit`` (see the test above)."""
    if edit in ("masked", "recall", "internal", "reid"):
        results = [i for i, m in enumerate(msgs) if type(m) is ToolMessage]
        out = list(msgs)
        for i in results[: len(results) // 2 + 1]:
            result = out[i]
            if edit == "masked":
                kwargs = {**result.additional_kwargs, "masked": True}
                update: dict[str, Any] = {"content": "[masked]", "additional_kwargs": kwargs}
            elif edit == "internal":
                update = {"additional_kwargs": {"agentgraph": {"kind": "notice"}}}
            elif edit == "reid":
                update = {"id": msgs[0].id}
            else:
                update = {"tool_call_id": result.tool_call_id + "x"}  # type: ignore[attr-defined]
            out[i] = result.model_copy(update=update)
        return out
    at = next((i for i in range(len(msgs) - 1, -1, -1) if type(msgs[i]) is AIMessage), None)
    if edit == "as is" or at is None:
        return msgs
    reply = msgs[at]
    if edit == "usage":
        usage = {"input_tokens": len(msgs), "output_tokens": 1, "total_tokens": len(msgs) + 1}
        copy = reply.model_copy(update={"usage_metadata": usage})
    else:
        copy = reply.model_copy(update={"content": f"{reply.content} (edited)"})
    return [*msgs[:at], copy, *msgs[at + 1 :]]


def test_a_growing_clean_history_is_extended_not_rebuilt() -> None:
    b = _Builder()
    msgs: list[BaseMessage] = [b.human("fix the tests")]
    views = history_view.IncrementalPromptView()
    live = [SystemMessage("live")]
    for step in range(20):
        cid = b.new_call_id()
        msgs += [b.ai("", [cid]), b.tool(cid, f"output {step}")]
        got = views.build(msgs, system=live, max_tokens=10**6, counter=count)
        assert got == build_prompt_view(msgs, system=live, max_tokens=10**6, counter=count)
    assert views.extended == 19
    # A history that is not the last one plus new messages is built whole.
    views.build(msgs[1:], system=live, max_tokens=10**6, counter=count)
    assert views.extended == 19


def _grown_views(
    before: list[BaseMessage], after: list[BaseMessage], **kwargs: Any
) -> tuple[Any, Any]:
    """The view of ``before + after`` extended from ``before``'s, and built whole."""
    views = history_view.IncrementalPromptView()
    views.build(before, **kwargs)
    return views.build([*before, *after], **kwargs), build_prompt_view([*before, *after], **kwargs)


def test_a_view_grown_past_the_window_is_cut_as_a_whole_build_cuts_it() -> None:
    b = _Builder()
    first = [b.human("one"), b.ai("a"), b.human("two"), b.ai("", ["c1"]), b.tool("c1", "x")]
    more = [b.ai("", ["c2"]), b.tool("c2", "y"), b.ai("", ["c3"]), b.tool("c3", "z"), b.ai("b")]
    got, want = _grown_views(first, more, keep_recent=8, max_tokens=10**6, counter=count)
    assert got == want
    assert got.messages[0].content == "two"  # the first turn left the window


def test_a_new_call_renamed_by_position_is_renamed_as_in_a_whole_build() -> None:
    b = _Builder()
    first = [b.human("go"), b.ai("", ["c1"]), b.tool("c1", "x")]
    # An id-less reply with an empty call id: its fresh id is seeded by its position.
    blank = AIMessage("", tool_calls=[{"name": "bash", "args": {}, "id": "", "type": "tool_call"}])
    got, want = _grown_views(first, [blank], max_tokens=10**6, counter=count)
    assert got == want


def test_a_result_for_a_renamed_call_is_paired_as_in_a_whole_build() -> None:
    b = _Builder()
    first = [b.human("go"), b.ai("", [""])]  # an empty id: the view gives it a fresh one
    fresh = history_view.build_prompt_view(first, max_tokens=10**6, counter=count)
    renamed = call_ids_of(fresh.messages[1])[0]
    got, want = _grown_views(first, [b.tool(renamed, "x")], max_tokens=10**6, counter=count)
    assert got == want
    assert [m.content for m in got.messages if isinstance(m, ToolMessage)] == ["x"]


def test_a_reply_the_repair_copied_is_shown_with_its_new_usage() -> None:
    b = _Builder()
    history = [b.human("go"), b.ai("", [""]), b.tool("", "x")]  # the repair renames the call
    views = history_view.IncrementalPromptView()
    views.build(history, max_tokens=10**6, counter=count)
    usage = {"input_tokens": 7, "output_tokens": 1, "total_tokens": 8}
    restated = [history[0], history[1].model_copy(update={"usage_metadata": usage}), history[2]]
    got = views.build(restated, max_tokens=10**6, counter=count)
    assert got == build_prompt_view(restated, max_tokens=10**6, counter=count)
    assert got.messages[1].usage_metadata == usage  # type: ignore[attr-defined]


def test_a_copy_of_a_message_stored_twice_is_not_swapped_into_the_kept_one() -> None:
    # The view keeps the first of the two; the copy replaces only the second.
    b = _Builder()
    result = b.tool("c1", "long output " * 50)
    history = [b.human("go"), b.ai("", ["c1"]), result, result]
    views = history_view.IncrementalPromptView()
    views.build(history, max_tokens=10**6, counter=count)
    masked = [*history[:3], result.model_copy(update={"content": "[masked]"})]
    got = views.build(masked, max_tokens=10**6, counter=count)
    assert got == build_prompt_view(masked, max_tokens=10**6, counter=count)


def test_a_call_renamed_by_its_position_is_not_extended_past_the_window_shortcut() -> None:
    # An id-less reply with an empty call id is renamed by its position, which differs
    # between the whole list and the window build_prompt_view may cut from it.
    counter = get_counter("gpt-4o")
    old: list[BaseMessage] = [
        *[ToolMessage("x", tool_call_id=f"zz{i}", id=f"o{i}") for i in range(8)],
        HumanMessage("go", id="h"),
        AIMessage("", tool_calls=[{"name": "bash", "args": {}, "id": "", "type": "tool_call"}]),
    ]
    tail = [ToolMessage("orphan output " * 5, tool_call_id=f"q{i}", id=f"p{i}") for i in range(200)]
    grown = old + tail
    budget = history_view._build_view(grown, (), None, 10**9, counter, ()).tokens  # just fits
    views = history_view.IncrementalPromptView()
    views.build(old, max_tokens=budget, counter=counter)
    got = views.build(grown, max_tokens=budget, counter=counter)
    assert got == build_prompt_view(grown, max_tokens=budget, counter=counter)


def test_a_message_reusing_an_internal_records_id_is_kept_as_in_a_whole_build() -> None:
    b = _Builder()
    record = b.human("record", "notice")
    first = [b.human("go"), record, b.ai("done")]
    again = HumanMessage("next", id=record.id)  # internal records are not deduplicated
    got, want = _grown_views(first, [again], max_tokens=10**6, counter=count)
    assert got == want
    assert got.messages[-1] is again


# --------------------------------------------------------------------------- provider ids

# How a provider fills tool-call ids: each mode is one that real providers or
# local servers have been seen to send.
PROVIDER_ID_MODES = ["fine", "dup_in_message", "reused_across_turns", "empty", "constant"]


def _provider_id(mode: str, turn: int, k: int) -> str:
    if mode == "dup_in_message":
        return f"call_t{turn}"
    if mode == "reused_across_turns":
        return f"call_{k}"
    if mode == "empty":
        return ""
    if mode == "constant":
        return "call_0"
    return f"call_t{turn}_{k}"


@st.composite
def provider_sessions(draw: st.DrawFn) -> tuple[list[BaseMessage], list[str]]:
    """A session stored as the old tools node stored it, with a provider's ids.

    The tools node answers each call with the id the provider gave it, in call
    order. Returns the history and the contents of every stored result (each
    unique, so a hidden result is visible as a missing content).
    """
    b = _Builder()
    mode = draw(st.sampled_from(PROVIDER_ID_MODES))
    msgs: list[BaseMessage] = [b.human("read the five files")]
    results: list[str] = []
    for turn in range(draw(st.integers(1, 8))):
        if draw(st.integers(0, 4)) == 0:
            msgs.append(b.human(f"and then {turn}"))
        n = draw(st.integers(1, 4))
        ids = [_provider_id(mode, turn, k) for k in range(n)]
        msgs.append(b.ai(draw(st.sampled_from(["", "reading"])), ids))
        interrupted = draw(st.integers(0, 6)) == 0
        answered = draw(st.integers(0, n - 1)) if interrupted else n
        for k in range(answered):
            content = f"content of file {turn}.{k}"
            results.append(content)
            msgs.append(b.tool(ids[k], content))
        if interrupted:
            break
    if draw(st.booleans()):
        msgs.append(b.ai("all five files read"))
    return msgs, results


@PROFILE
@given(provider_sessions())
def test_prompt_view_of_bad_provider_ids_is_valid_and_hides_no_result(
    session: tuple[list[BaseMessage], list[str]],
) -> None:
    msgs, results = session
    view = build_prompt_view(msgs, counter=count)
    assert validate_history(view.messages) == []
    shown = [m.content for m in view.messages if isinstance(m, ToolMessage) and not is_synthetic(m)]
    assert shown == results  # 0 hidden results, each once, in order
    calls_in = sum(len(call_ids_of(m)) for m in msgs)
    assert sum(len(call_ids_of(m)) for m in view.messages) == calls_in  # no call dropped
    out = normalize(msgs)
    assert normalize(out) == out
    assert_nothing_invented(out, msgs)


@PROFILE
@given(provider_sessions())
def test_ids_admitted_at_the_door_need_no_repair(
    session: tuple[list[BaseMessage], list[str]],
) -> None:
    msgs, results = session
    stored: list[BaseMessage] = []
    current: dict[str, list[str]] = {}
    for msg in msgs:
        if isinstance(msg, AIMessage):
            admitted = admit_reply(msg, stored)
            current = {}
            for old, new in zip(call_ids_of(msg), call_ids_of(admitted), strict=True):
                current.setdefault(old, []).append(new)
            stored.append(admitted)
        elif isinstance(msg, ToolMessage):
            # The tools node answers each call of the stored (admitted) message.
            stored.append(msg.model_copy(update={"tool_call_id": current[msg.tool_call_id].pop(0)}))
        else:
            stored.append(msg)
    ids = [cid for m in stored for cid in call_ids_of(m)]
    assert all(ids) and len(set(ids)) == len(ids)
    for original, admitted in zip(msgs, stored, strict=True):
        renamed = provider_ids(admitted)
        assert [renamed.get(c, c) for c in call_ids_of(admitted)] == call_ids_of(original)
    out = normalize(stored)
    assert validate_history(out) == []
    assert [m for m in out if not is_synthetic(m)] == stored  # nothing to rename or drop
    assert [m.content for m in out if isinstance(m, ToolMessage) and not is_synthetic(m)] == results
