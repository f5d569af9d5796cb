"""Strict reading of a tool call's raw arguments (the graph-level cases are in
tests/integration/test_whole_tool_calls.py)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage

from agentgraph.runtime.tool_arguments import RawCall, parse_arguments, whole_calls

JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.text(max_size=20)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
OBJECTS = st.dictionaries(st.text(max_size=8), JSON_VALUES, min_size=1, max_size=4)


@given(OBJECTS, st.data())
def test_no_cut_of_an_arguments_object_is_accepted(args: dict[str, Any], data: Any) -> None:
    text = json.dumps(args)
    assert parse_arguments(text) == args
    cut = data.draw(st.integers(min_value=1, max_value=len(text) - 1))
    assert parse_arguments(text[:cut]) is None


def test_only_an_object_is_arguments() -> None:
    assert parse_arguments("") == {} and parse_arguments("  ") == {}  # no parameters
    assert parse_arguments("[1, 2]") is None and parse_arguments('"x"') is None
    assert parse_arguments("[" * 100_000) is None  # too deep: refused, not raised
    assert parse_arguments('{"content": "a\nb"}') == {"content": "a\nb"}  # raw newline


def test_whole_calls_keeps_the_order_and_one_entry_per_call() -> None:
    ai = AIMessage(
        content="",
        tool_calls=[
            {"name": "run_bash", "args": {"command": "ls"}, "id": "a"},
            {"name": "run_bash", "args": {"command": "echo cut"}, "id": "b"},
        ],
    )
    raw = [
        RawCall("run_bash", '{"command": "ls"}', "a"),
        RawCall("run_bash", '{"command": "echo cut', "b"),
    ]
    fixed = whole_calls(ai, raw)
    assert [c["id"] for c in fixed.tool_calls] == ["a"]
    assert [(c["id"], c["args"]) for c in fixed.invalid_tool_calls] == [
        ("b", '{"command": "echo cut')
    ]
    assert whole_calls(ai, raw[:1]) is ai  # not this reply's calls: nothing to go by
    assert whole_calls(ai, None) is ai
    whole = [raw[0], RawCall("run_bash", '{"command": "echo cut"}', "b")]
    assert whole_calls(ai, whole) is ai  # every call whole: the reply as it was
