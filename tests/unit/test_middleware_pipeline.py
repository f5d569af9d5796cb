"""The pipeline as a whole (agentgraph.middleware.pipeline): order, composition, picture."""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import pytest
from langchain.agents.middleware import (
    AgentMiddleware,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
)
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.types import Command

from agentgraph import middleware as middleware_package
from agentgraph.config import Settings
from agentgraph.middleware import (
    PIPELINE_UNITS,
    CompactionMiddleware,
    ContextPipeline,
    EmptyReplyMiddleware,
    ObservationMaskingMiddleware,
    OutputRoomMiddleware,
    OverflowRecoveryMiddleware,
    PromptCachingMiddleware,
    PromptViewMiddleware,
    RetryMiddleware,
    ServedWindowMiddleware,
    TextToolCallsMiddleware,
    compose,
    context_pipeline,
)
from agentgraph.middleware import pipeline as pipeline_module
from agentgraph.persistence import open_store
from agentgraph.session.agent import Agent
from tests.fakes.chat_model import ScriptedChatModel
from tests.middleware_helpers import ModelCall, history, request

DOCS = Path(__file__).resolve().parents[2] / "docs"


def built_pipelines(make_settings: Callable[..., Settings]) -> list[ContextPipeline]:
    """Real pipelines of an ``Agent`` with every unit there is, with and without masking.

    The local endpoint (nothing listens there) stated no window, so the served-window
    unit is in; no setting turns masking off, so the second is the first with its
    masking field cleared, which puts the prompt-view unit in front.
    """
    with open_store(make_settings()) as store:
        agent = Agent(make_settings(), store, model=ScriptedChatModel([]))
        with_masking = context_pipeline(agent.deps)
    return [with_masking, replace(with_masking, masking=None)]


def unit_module(unit: type[AgentMiddleware]) -> str:
    """``middleware/x.py`` for a unit class of ``agentgraph.middleware.x``."""
    return unit.__module__.removeprefix("agentgraph.").replace(".", "/") + ".py"


def assert_one_line_of(listed: list[Any], built: list[list[Any]]) -> None:
    """``listed`` is every unit of the ``built`` chains, in their order.

    Each chain runs a subsequence of the list (the prompt-view unit only without
    masking), and together they run every unit listed.
    """
    for chain in built:
        assert [unit for unit in listed if unit in chain] == chain, listed
    assert {unit for chain in built for unit in chain} == set(listed), listed


def load_generator() -> Any:
    """``docs/gen_pipeline_svg.py`` as a module."""
    spec = importlib.util.spec_from_file_location("gen_pipeline_svg", DOCS / "gen_pipeline_svg.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_picture_draws_every_unit_of_a_built_pipeline_in_order(
    make_settings: Callable[..., Settings],
) -> None:
    pipelines = built_pipelines(make_settings)
    # What a reader sees: the committed picture names each unit's module.
    svg = (DOCS / "pipeline.svg").read_text(encoding="utf-8")
    assert_one_line_of(
        re.findall(r"middleware/\w+\.py", svg),
        [[unit_module(type(u)) for u in pipeline.middleware] for pipeline in pipelines],
    )
    # What the script draws from.
    drawn = [unit.cls for group in load_generator().groups() for unit in group]
    assert_one_line_of(drawn, [[type(u) for u in pipeline.middleware] for pipeline in pipelines])


def test_pipeline_units_hold_every_field_of_the_pipeline(
    make_settings: Callable[..., Settings],
) -> None:
    attributes = [unit.attribute for unit in PIPELINE_UNITS]
    assert sorted(attributes) == sorted(f.name for f in fields(ContextPipeline))
    for i, unit in enumerate(PIPELINE_UNITS):
        # A unit built by another one is listed after its builder, which stands first.
        assert unit.built_by is None or unit.built_by in attributes[:i]
    pipeline = built_pipelines(make_settings)[0]
    for unit in PIPELINE_UNITS:
        assert isinstance(getattr(pipeline, unit.attribute), unit.cls)


def test_the_module_docstrings_list_the_units_in_order() -> None:
    assert pipeline_module.__doc__ is not None and middleware_package.__doc__ is not None
    chain = " ".join(pipeline_module.__doc__.split("::", 1)[1].split("\n\n")[1].split())
    steps = [re.sub(r"\s*\(.*?\)", "", step).strip() for step in chain.split("→")]
    assert steps == [u.title for u in PIPELINE_UNITS if u.built_by is None] + ["the model"]
    for unit in PIPELINE_UNITS:
        if unit.built_by is not None:
            assert f"(builds the {unit.title})" in chain
    # The package's table: one row per unit, its title then its module.
    table = re.findall(
        r"^(\w[\w ]*\w)\s+``(middleware/\w+\.py)``", middleware_package.__doc__, re.M
    )
    assert table == [(unit.title, unit_module(unit.cls)) for unit in PIPELINE_UNITS]


def test_the_architecture_table_lists_the_units_in_order() -> None:
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    section = text.split("\n## The model-call pipeline\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    listed = [
        module for row in rows for module in re.findall(r"`agentgraph/(middleware/\w+\.py)`", row)
    ]
    assert [m for m in listed if m != "middleware/pipeline.py"] == [
        unit_module(unit.cls) for unit in PIPELINE_UNITS
    ]


def test_the_units_run_in_the_documented_order(make_settings: Callable[..., Settings]) -> None:
    with open_store(make_settings()) as store:
        agent = Agent(make_settings(), store, model=ScriptedChatModel([]))
        units = context_pipeline(agent.deps).middleware
    # Masking builds the view itself: no prompt-view unit in front of it. The local
    # endpoint (nothing listens there) stated no window: the served-window unit asks
    # again after the first reply.
    assert [type(u) for u in units] == [
        ObservationMaskingMiddleware,
        CompactionMiddleware,
        OutputRoomMiddleware,
        OverflowRecoveryMiddleware,
        ServedWindowMiddleware,
        EmptyReplyMiddleware,
        RetryMiddleware,
        TextToolCallsMiddleware,
        PromptCachingMiddleware,
    ]
    explicit = make_settings(AGENTGRAPH_CONTEXT_WINDOW="16000")
    with open_store(explicit) as store:
        agent = Agent(explicit, store, model=ScriptedChatModel([]))
        assert not any(
            isinstance(u, ServedWindowMiddleware) for u in context_pipeline(agent.deps).middleware
        )


def test_without_masking_the_prompt_view_unit_comes_first(
    make_settings: Callable[..., Settings],
) -> None:
    with open_store(make_settings()) as store:
        agent = Agent(make_settings(), store, model=ScriptedChatModel([]))
        pipeline = replace(context_pipeline(agent.deps), masking=None)
    units = pipeline.middleware
    assert units[0] is pipeline.view and isinstance(units[0], PromptViewMiddleware)
    assert not any(isinstance(u, ObservationMaskingMiddleware) for u in units)
    # Alone, the view unit still sends the view: it starts after the last boundary.
    boundary = SystemMessage(
        "[compaction boundary: auto]",
        id="b1",
        additional_kwargs={"agentgraph": {"kind": "compact_boundary"}},
    )
    messages = [
        *history(2),
        boundary,
        HumanMessage("summary", id="s1"),
        HumanMessage("go on", id="u9"),
    ]
    call = ModelCall()
    compose(units)(request(messages), call)
    assert [m.id for m in call.requests[-1].messages] == ["s1", "u9"]


def test_one_view_build_per_model_call(
    make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_store(make_settings()) as store:
        agent = Agent(make_settings(), store, model=ScriptedChatModel([]))
        pipeline = context_pipeline(agent.deps)
    builds: list[int] = []
    build = pipeline.view.build

    def counting_build(*args: Any, **kwargs: Any) -> Any:
        builds.append(1)
        return build(*args, **kwargs)

    monkeypatch.setattr(pipeline.view, "build", counting_build)
    call = ModelCall(AIMessage("ok", id="r"))
    compose(pipeline.middleware)(request(history(3, result_chars=100)), call)
    assert len(call.requests) == 1 and len(builds) == 1


class Tagging(AgentMiddleware):
    """Adds a message through a command; calls the inner layers twice when asked."""

    def __init__(self, tag: str, *, call_twice: bool = False) -> None:
        super().__init__()
        self.tag = tag
        self.call_twice = call_twice

    @property
    def name(self) -> str:
        return self.tag

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> Any:
        if self.call_twice:
            handler(request)  # an attempt whose result (and inner commands) is dropped
        response = handler(request)
        note = HumanMessage(self.tag, id=self.tag)
        return ExtendedModelResponse(
            model_response=response, command=Command(update={"messages": [note]})
        )


def test_compose_orders_commands_like_create_agent_and_forgets_failed_attempts() -> None:
    call = ModelCall(AIMessage("dropped", id="r1"), AIMessage("ok", id="r"))
    result = compose([Tagging("outer"), Tagging("middle", call_twice=True), Tagging("inner")])(
        request([HumanMessage("hi", id="u")]), call
    )
    # The reply first, then inner commands before outer ones; the dropped attempt's
    # inner command is forgotten, so nothing appears twice.
    assert len(call.requests) == 2
    assert [m.id for m in result.messages] == ["r", "inner", "middle", "outer"]


def test_the_committed_pipeline_picture_is_what_the_script_draws() -> None:
    assert (DOCS / "pipeline.svg").read_text(encoding="utf-8") == load_generator().render()
