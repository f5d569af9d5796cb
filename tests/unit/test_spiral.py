"""The spiral guard: stalled compactions counted from the history alone."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from agentgraph.context.compaction import marker
from agentgraph.context.spiral import spiral_note, stalled_compactions

_ids = iter(range(10**9))


def _boundary(trigger: str = "auto") -> SystemMessage:
    n = next(_ids)
    return SystemMessage(
        "[compaction boundary]",
        id=f"b{n}",
        additional_kwargs=marker("compact_boundary", trigger=trigger),
    )


def _call(
    name: str, args: dict[str, Any], output: str, *, moved: bool = False
) -> list[BaseMessage]:
    n = next(_ids)
    call_id = f"c{n}"
    ai_id = f"a{n}~0123abcd" if moved else f"a{n}"
    return [
        AIMessage("", id=ai_id, tool_calls=[{"name": name, "args": args, "id": call_id}]),
        ToolMessage(output, tool_call_id=call_id, name=name, id=f"t{n}"),
    ]


def _read(path: str, **kw: Any) -> list[BaseMessage]:
    return _call("read_file", {"path": path}, f"contents of {path}", **kw)


def test_compactions_followed_only_by_rereads_are_stalls_in_a_row() -> None:
    history: list[BaseMessage] = [HumanMessage("read a, b, c", id="u")]
    history += [*_read("a"), *_read("b"), *_read("c")]
    counts = []
    for _ in range(3):
        history += [_boundary(), *_read("a"), *_read("b")]
        counts.append(stalled_compactions(history)[0])
    assert counts == [1, 2, 3]
    assert stalled_compactions(history)[1:] == (2, 0, 2)


def test_new_work_ends_the_stall() -> None:
    history: list[BaseMessage] = [HumanMessage("go", id="u"), *_read("a")]
    history += [_boundary(), *_read("a"), _boundary(), *_read("a"), *_read("new")]
    assert stalled_compactions(history)[0] == 0


def test_a_poll_whose_output_changes_is_not_a_repeat() -> None:
    history: list[BaseMessage] = [HumanMessage("wait for CI", id="u")]
    for n in range(5):
        history += [
            *_call("run_bash", {"command": "gh run list"}, f"run {n}: pending"),
            _boundary(),
        ]
    history += _call("run_bash", {"command": "gh run list"}, "run 5: passed")
    assert stalled_compactions(history)[0] == 0


def test_a_user_request_or_an_answer_in_words_is_progress() -> None:
    base: list[BaseMessage] = [HumanMessage("check", id="u"), *_read("a")]
    asked = [*base, _boundary(), HumanMessage("again", id="u2"), *_read("a")]
    answered = [*base, _boundary(), *_read("a"), AIMessage("a is fine", id="done")]
    assert stalled_compactions(asked)[0] == 0
    assert stalled_compactions(answered)[0] == 0


def test_a_manual_compaction_does_not_end_a_stretch() -> None:
    history: list[BaseMessage] = [HumanMessage("go", id="u"), *_read("a")]
    history += [_boundary("manual"), *_read("b"), _boundary(), *_read("b")]
    assert stalled_compactions(history)[0] == 1
    history = [HumanMessage("go", id="u"), *_read("a"), _boundary("manual"), *_read("a")]
    assert stalled_compactions(history)[0] == 0


def test_copies_a_compaction_moved_count_as_made_before_it() -> None:
    history: list[BaseMessage] = [HumanMessage("go", id="u")]
    # The compaction removed these and re-added them after its boundary as copies, with
    # the pending request.
    history += [_boundary(), HumanMessage("go", id="u~0123abcd")]
    history += [*_read("a", moved=True), *_read("b", moved=True)]
    history += [*_read("a"), *_read("b")]
    assert stalled_compactions(history)[0] == 1


def test_searching_the_history_again_is_no_new_work_whatever_its_output() -> None:
    """A search's output grows with the transcript (it finds the earlier searches too),
    so a model searching again for what each compaction summarized away made calls
    that looked new every time. A search or a reference read for the first time is."""
    history: list[BaseMessage] = [HumanMessage("collect the codes", id="u"), *_read("a")]
    history += _call("search_history", {"query": "a"}, "1 hit for a")
    history += _call("read_history", {"ref": "msg:1"}, "message 1")
    counts = []
    for n in range(3):
        history += [
            _boundary(),
            *_call("search_history", {"query": "a"}, f"{n + 2} hits for a"),
            *_call("read_history", {"ref": "msg:1"}, "message 1"),
        ]
        counts.append(stalled_compactions(history)[0])
    assert counts == [1, 2, 3]
    assert stalled_compactions(history)[1:] == (0, 2, 2)
    assert "and 2 searched or read the session's history again" in spiral_note(0, 2, recalled=2)
    for fresh in (
        _read("b"),
        _call("search_history", {"query": "b"}, "1 hit for b"),
        _call("read_history", {"ref": "msg:9"}, "message 9"),
    ):
        assert stalled_compactions([*history, _boundary(), *fresh])[0] == 0


def test_no_call_at_all_between_compactions_is_a_stall() -> None:
    history: list[BaseMessage] = [HumanMessage("go", id="u"), *_read("a"), _boundary(), _boundary()]
    assert stalled_compactions(history)[0] == 2  # the one between, and the next one
    assert "no tool call was made" in spiral_note(0, 0)
    assert "2 of 3 tool calls" in spiral_note(2, 3)
    assert "history" not in spiral_note(2, 3)


@settings(max_examples=200, deadline=None, database=None)
@given(
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("read"), st.sampled_from("abc")),
            st.tuples(st.just("boundary"), st.sampled_from(["auto", "guard", "distil", "manual"])),
            st.tuples(st.just("ask"), st.just("")),
        ),
        max_size=30,
    )
)
def test_stalls_never_outnumber_the_boundaries_and_new_work_resets_them(
    steps: list[tuple[str, str]],
) -> None:
    history: list[BaseMessage] = [HumanMessage("go", id="u0")]
    for kind, arg in steps:
        if kind == "read":
            history += _read(arg)
        elif kind == "boundary":
            history.append(_boundary(arg))
        else:
            history.append(HumanMessage("more", id=f"u{next(_ids)}"))
    automatic = sum(1 for kind, arg in steps if kind == "boundary" and arg != "manual")
    assert 0 <= stalled_compactions(history)[0] <= automatic
    fresh = [*history, *_read(f"never-read-{next(_ids)}")]
    assert stalled_compactions(fresh)[0] == 0
