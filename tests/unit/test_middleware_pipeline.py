"""The pipeline as a whole (agentgraph.middleware.pipeline): order, composition, picture."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain.agents.middleware import (
    AgentMiddleware,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
)
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.types import Command

from agentgraph.agent import Agent
from agentgraph.config import Settings
from agentgraph.middleware import (
    CompactionMiddleware,
    ObservationMaskingMiddleware,
    OverflowRecoveryMiddleware,
    PromptCachingMiddleware,
    PromptViewMiddleware,
    RetryMiddleware,
    TextToolCallsMiddleware,
    compose,
    context_pipeline,
)
from agentgraph.persistence import open_store
from tests.fakes.chat_model import ScriptedChatModel
from tests.middleware_helpers import ModelCall, request

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_units_run_in_the_documented_order(make_settings: Callable[..., Settings]) -> None:
    with open_store(make_settings()) as store:
        agent = Agent(make_settings(), store, model=ScriptedChatModel([]))
        units = context_pipeline(agent.deps).middleware
    assert [type(u) for u in units] == [
        PromptViewMiddleware,
        ObservationMaskingMiddleware,
        CompactionMiddleware,
        OverflowRecoveryMiddleware,
        RetryMiddleware,
        TextToolCallsMiddleware,
        PromptCachingMiddleware,
    ]


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
