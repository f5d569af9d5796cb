"""Which calls of one step wait for which (agentgraph/runtime/nodes/call_order.py)."""

from __future__ import annotations

import posixpath
import threading
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import ToolCall

from agentgraph.runtime.nodes.call_order import CallOrder, Touches, touches, waits


def _call(i: int, name: str, **args: Any) -> ToolCall:
    return ToolCall(name=name, args=args, id=f"c{i}")


def _changing(name: str) -> bool:
    return name != "mcp__docs__lookup"  # declared read-only by its server


def _waits(*calls: ToolCall) -> dict[str, tuple[str, ...]]:
    return waits(calls, _changing, posixpath.normpath)


def test_calls_on_one_file_wait_in_order_and_reads_of_it_wait_for_its_changes() -> None:
    assert _waits(
        _call(0, "read_file", path="a.py"),
        _call(1, "edit_file", path="./a.py", old_string="x", new_string="y"),
        _call(2, "edit_file", path="a.py", old_string="y", new_string="z"),
        _call(3, "read_file", path="a.py"),
        _call(4, "read_file", path="b.py"),
        _call(5, "write_file", path="b.py", content=""),
    ) == {"c1": ("c0",), "c2": ("c0", "c1"), "c3": ("c1", "c2"), "c5": ("c4",)}


def test_reads_and_subagents_run_together_and_commands_wait_for_what_came_before() -> None:
    assert (
        _waits(
            _call(0, "read_file", path="a.py"),
            _call(1, "grep", pattern="x"),
            _call(2, "call_subagent", task="t"),
            _call(3, "call_subagent", task="u"),
            _call(4, "todo_write", todos=[]),
            _call(5, "mcp__docs__lookup", q="x"),
        )
        == {}
    )
    assert _waits(
        _call(0, "read_file", path="a.py"),
        _call(1, "run_bash", command="make"),
        _call(2, "grep", pattern="x"),
        _call(3, "mcp__fs__write", path="c.py"),
        _call(4, "todo_write", todos=[]),
    ) == {"c1": ("c0",), "c2": ("c1",), "c3": ("c0", "c1", "c2")}
    # A call with no usable path fails on its own and waits for nothing.
    assert _waits(_call(0, "run_bash", command="x"), _call(1, "edit_file", path=" ")) == {}


_NAMES = st.sampled_from(
    ["read_file", "write_file", "edit_file", "grep", "run_bash", "todo_write", "mcp__x__y"]
)


@given(st.lists(st.tuples(_NAMES, st.sampled_from(["a.py", "b.py"])), max_size=8))
def test_a_call_waits_for_exactly_the_earlier_calls_it_conflicts_with(
    spec: list[tuple[str, str]],
) -> None:
    calls = [_call(i, name, path=path, command="c") for i, (name, path) in enumerate(spec)]
    found = _waits(*calls)
    touched = [touches(c, _changing, posixpath.normpath) for c in calls]
    for j, later in enumerate(touched):
        expected = tuple(f"c{i}" for i in range(j) if touched[i].conflicts(later))
        assert found.get(f"c{j}", ()) == expected
        for earlier in touched[:j]:  # conflict is mutual; reads alone never conflict
            assert earlier.conflicts(later) == later.conflicts(earlier)
            if not earlier.writes and not later.writes:
                assert not earlier.conflicts(later)


def test_a_waiting_call_starts_once_the_calls_it_waits_for_have_ended() -> None:
    order = CallOrder({"c1": ("c0",)})
    started = threading.Event()

    def later() -> None:
        order.before("c1")
        started.set()

    thread = threading.Thread(target=later)
    thread.start()
    assert not started.wait(0.2)
    order.after("c0")
    thread.join(5)
    assert started.is_set()
    assert Touches().conflicts(Touches()) is False
