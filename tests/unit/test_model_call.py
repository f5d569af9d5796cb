"""The model call: tool bindings reused for the same model and tool objects."""

from __future__ import annotations

from typing import Any

from langchain_core.tools import BaseTool, tool

from agentgraph.runtime.nodes.model_call import BOUND_MODELS_MAX_ENTRIES, ToolBindings
from tests.fakes.chat_model import ScriptedChatModel


class CountingModel:
    """Records each ``bind_tools`` call; a binding is a fresh object naming its tools."""

    def __init__(self) -> None:
        self.binds: list[tuple[list[str], Any]] = []

    def bind_tools(self, tools: list[Any], **kwargs: Any) -> object:
        names = [t.name if isinstance(t, BaseTool) else t["name"] for t in tools]
        self.binds.append((names, kwargs.get("tool_choice")))
        return object()


def _tool(name: str) -> BaseTool:
    @tool(name)
    def probe(x: int) -> int:
        """Return x."""
        return x

    return probe


def test_the_same_model_and_tools_bind_once() -> None:
    model, bindings = CountingModel(), ToolBindings()
    a, b = _tool("a"), _tool("b")
    first = bindings.bind(model, [a, b], None)
    assert bindings.bind(model, [a, b], None) is first
    assert model.binds == [(["a", "b"], None)]


def test_another_list_choice_model_or_tool_object_binds_anew() -> None:
    model, other, bindings = CountingModel(), CountingModel(), ToolBindings()
    a, b = _tool("a"), _tool("b")
    both = bindings.bind(model, [a, b], None)
    assert bindings.bind(model, [a], None) is not both  # a skill's subset
    assert bindings.bind(model, [b, a], None) is not both  # another order
    assert bindings.bind(model, [a, b], "any") is not both
    assert bindings.bind(model, [a, _tool("b")], None) is not both  # same name, new object
    assert bindings.bind(other, [a, b], None) is not both
    assert bindings.bind(model, [a, b], None) is both  # still kept
    assert [names for names, _ in model.binds] == [
        ["a", "b"],
        ["a"],
        ["b", "a"],
        ["a", "b"],
        ["a", "b"],
    ]
    assert model.binds[3][1] == "any"


def test_dict_tools_and_dict_choices_are_bound_every_time() -> None:
    model, bindings = CountingModel(), ToolBindings()
    spec = {"name": "d", "description": "a provider tool", "parameters": {}}
    bindings.bind(model, [spec], None)
    bindings.bind(model, [spec], None)
    a = _tool("a")
    choice = {"type": "function", "function": {"name": "a"}}
    bindings.bind(model, [a], choice)
    bindings.bind(model, [a], choice)
    assert len(model.binds) == 4


def test_only_the_latest_bindings_are_kept() -> None:
    model, bindings = CountingModel(), ToolBindings()
    tools = [_tool(f"t{i}") for i in range(BOUND_MODELS_MAX_ENTRIES + 1)]
    first = bindings.bind(model, [tools[0]], None)
    for t in tools[1:]:
        bindings.bind(model, [t], None)
    assert bindings.bind(model, [tools[0]], None) is not first
    assert len(model.binds) == BOUND_MODELS_MAX_ENTRIES + 2


def test_a_reused_binding_still_sends_each_call_its_tools() -> None:
    """The binding is a runnable: every call through it reaches the model with the
    tools bound, as a fresh binding would."""
    model = ScriptedChatModel(["one", "two"])
    bindings = ToolBindings()
    a = _tool("a")
    for _ in range(2):
        bindings.bind(model, [a], None).invoke("hi")
    assert model.bound_tools == [["a"], ["a"]]
