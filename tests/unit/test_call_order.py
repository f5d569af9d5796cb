"""Which calls of one step wait for which (agentgraph/runtime/nodes/call_order.py)."""

from __future__ import annotations

import posixpath
import threading
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import ToolCall

from agentgraph.runtime.nodes.call_order import CallOrder, Touches, waits


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
    # A subagent starts from what the earlier calls leave; nothing waits for it.
    assert _waits(
        _call(0, "edit_file", path="a.py"),
        _call(1, "call_subagent", task="t"),
        _call(2, "edit_file", path="b.py"),
        _call(3, "run_bash", command="make"),
    ) == {"c1": ("c0",), "c3": ("c0", "c2")}
    assert _waits(
        _call(0, "read_file", path="a.py"),
        _call(1, "run_bash", command="make"),
        _call(2, "grep", pattern="x"),
        _call(3, "mcp__fs__write", path="c.py"),
        _call(4, "todo_write", todos=[]),
    ) == {"c1": ("c0",), "c2": ("c1",), "c3": ("c0", "c1", "c2")}
    # A call with no usable path fails on its own and waits for nothing.
    assert _waits(_call(0, "run_bash", command="x"), _call(1, "edit_file", path=" ")) == {}


def test_applying_a_background_subagent_s_changes_is_ordered_with_every_file_call() -> None:
    assert _waits(
        _call(0, "subagent_task", task_id="t", action="apply"),
        _call(1, "read_file", path="a.txt"),
        _call(2, "subagent_task", task_id="u", action="result"),
        _call(3, "run_bash", command="cat a.txt"),
    ) == {"c1": ("c0",), "c3": ("c0", "c1")}


def test_calls_sharing_an_id_wait_for_nothing() -> None:
    # One would wait for itself: the model node gives each call its own id, so only a
    # state edited from outside could hold such calls.
    edit = ToolCall(name="edit_file", args={"path": "a.py"}, id="x")
    assert waits([edit, edit], _changing, posixpath.normpath) == {}


# How each tool of the property test touches the file its call names, from the tools'
# own descriptions rather than from call_order: (reads, writes, reads once as it starts),
# "all" for every file.
_KINDS = {
    "read_file": ("file", "", ""),
    "write_file": ("file", "file", ""),
    "edit_file": ("file", "file", ""),
    "grep": ("all", "", ""),
    "run_bash": ("all", "all", ""),
    "mcp__x__y": ("all", "all", ""),
    "mcp__docs__lookup": ("all", "", ""),
    "todo_write": ("", "", ""),
    "call_subagent": ("", "", "all"),
}


def _shares(a: tuple[str, str], b: tuple[str, str]) -> bool:
    kind_a, path_a = a
    kind_b, path_b = b
    return bool(kind_a and kind_b) and ("all" in (kind_a, kind_b) or path_a == path_b)


def _expected_wait(earlier: tuple[str, str], later: tuple[str, str]) -> bool:
    (name_e, path_e), (name_l, path_l) = earlier, later
    reads_e, writes_e, _ = _KINDS[name_e]
    reads_l, writes_l, starts_l = _KINDS[name_l]
    return any(
        _shares((w, pw), (x, px))
        for (w, pw), (x, px) in (
            ((writes_e, path_e), (reads_l, path_l)),
            ((writes_e, path_e), (writes_l, path_l)),
            ((writes_l, path_l), (reads_e, path_e)),
            ((writes_e, path_e), (starts_l, path_l)),
        )
    )


@given(
    st.lists(
        st.tuples(st.sampled_from(sorted(_KINDS)), st.sampled_from(["a.py", "./a.py", "b.py"])),
        max_size=8,
    )
)
def test_a_call_waits_for_exactly_the_earlier_calls_that_change_what_it_touches(
    spec: list[tuple[str, str]],
) -> None:
    calls = [_call(i, name, path=path, command="c") for i, (name, path) in enumerate(spec)]
    found = _waits(*calls)
    named = [(name, posixpath.normpath(path)) for name, path in spec]
    for j in range(len(calls)):
        expected = tuple(f"c{i}" for i in range(j) if _expected_wait(named[i], named[j]))
        assert found.get(f"c{j}", ()) == expected


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
