"""The pipeline as a whole (agentgraph.middleware.pipeline): order, composition, picture."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import replace
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

from agentgraph.config import Settings
from agentgraph.middleware import (
    CompactionMiddleware,
    EmptyReplyMiddleware,
    ObservationMaskingMiddleware,
    OverflowRecoveryMiddleware,
    PromptCachingMiddleware,
    PromptViewMiddleware,
    RetryMiddleware,
    ServedWindowMiddleware,
    TextToolCallsMiddleware,
    compose,
    context_pipeline,
)
from agentgraph.persistence import open_store
from agentgraph.session.agent import Agent
from tests.fakes.chat_model import ScriptedChatModel
from tests.middleware_helpers import ModelCall, history, request

DOCS = Path(__file__).resolve().parents[2] / "docs"


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
    spec = importlib.util.spec_from_file_location("gen_pipeline_svg", DOCS / "gen_pipeline_svg.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (DOCS / "pipeline.svg").read_text(encoding="utf-8") == module.render()
