"""The model-call pipeline: the units in order, and a composer for our own graph.

Order, outermost first (each unit wraps the ones after it)::

    observation masking (builds the prompt view) → compaction → output room
    → overflow recovery → served window → empty reply → retry → text tool calls
    → prompt caching → the model

Without masking the prompt-view unit stands first on its own. :data:`PIPELINE_UNITS` is
that order as data: :attr:`ContextPipeline.middleware` walks it, and
``docs/gen_pipeline_svg.py`` draws it.

:func:`compose` chains ``wrap_model_call`` hooks as ``create_agent`` does (first in
the list is outermost); the planner node calls the chain around its model call.
:func:`context_middleware` builds the same units for any LangChain agent.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from langchain.agents.middleware import (
    AgentMiddleware,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
)
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config

from agentgraph.config import Settings
from agentgraph.context.compaction import Compactor
from agentgraph.context.tokens import get_counter
from agentgraph.context.windows import budget_for
from agentgraph.middleware.compaction import CompactionMiddleware
from agentgraph.middleware.empty_reply import EmptyReplyMiddleware
from agentgraph.middleware.events import Emit, emit
from agentgraph.middleware.masking import ObservationMaskingMiddleware
from agentgraph.middleware.output_room import OutputRoomMiddleware
from agentgraph.middleware.overflow import OverflowRecoveryMiddleware
from agentgraph.middleware.prompt_caching import PromptCachingMiddleware
from agentgraph.middleware.prompt_view import PromptViewMiddleware
from agentgraph.middleware.retry import RetryMiddleware
from agentgraph.middleware.served_window import ServedWindowMiddleware
from agentgraph.middleware.text_tool_calls import TextToolCallsMiddleware
from agentgraph.providers.model import text_tool_calls_on
from agentgraph.providers.retry import RetryPolicy
from agentgraph.runtime.deps import AgentDeps

__all__ = [
    "PIPELINE_UNITS",
    "ContextPipeline",
    "PipelineResult",
    "PipelineUnit",
    "compose",
    "context_middleware",
    "context_pipeline",
]

Handler = Callable[[ModelRequest], ModelResponse]
# A composed layer: runs a request, appending the command messages it produced.
Layer = Callable[[ModelRequest, list[BaseMessage]], ModelResponse]


@dataclass
class PipelineResult:
    """What one composed call produced.

    Attributes:
        response: The model response as the outermost unit returned it.
        messages: State updates for ``messages`` in order: the units' (a compaction's
            boundary, summary and kept messages) and the model's reply.
    """

    response: ModelResponse
    messages: list[BaseMessage] = field(default_factory=list)

    @property
    def reply(self) -> AIMessage:
        """The model's reply (the last AI message of :attr:`messages`)."""
        for message in reversed(self.messages):
            if isinstance(message, AIMessage):
                return message
        raise ValueError("the model call produced no AI message")


def _settle(
    result: ModelResponse | AIMessage | ExtendedModelResponse, commands: list[BaseMessage]
) -> ModelResponse:
    """Normalize a unit's result; a command's messages are appended to ``commands``."""
    if isinstance(result, AIMessage):
        return ModelResponse(result=[result])
    if isinstance(result, ExtendedModelResponse):
        update = result.command.update if result.command is not None else None
        if isinstance(update, dict):
            commands.extend(update.get("messages") or [])
        return result.model_response
    return result


def compose(
    middleware: Sequence[AgentMiddleware],
) -> Callable[[ModelRequest, Handler], PipelineResult]:
    """Chain the units' ``wrap_model_call`` hooks, first in the list outermost.

    Like ``create_agent``: a unit's command messages are applied after the model
    response's, and an inner unit's commands before an outer one's; a retried inner
    call forgets the commands of its failed attempt.

    Args:
        middleware: Units in order.

    Returns:
        ``call(request, model_call)`` running the chain around ``model_call``.
    """

    def layer(unit: AgentMiddleware, inner: Layer) -> Layer:
        def run(request: ModelRequest, commands: list[BaseMessage]) -> ModelResponse:
            mine: list[BaseMessage] = []

            def handler(req: ModelRequest) -> ModelResponse:
                mine.clear()  # an attempt that failed leaves nothing behind
                return inner(req, mine)

            result = _settle(unit.wrap_model_call(request, handler), mine)
            commands.extend(mine)
            return result

        return run

    def call(request: ModelRequest, model_call: Handler) -> PipelineResult:
        def innermost(req: ModelRequest, _commands: list[BaseMessage]) -> ModelResponse:
            return model_call(req)

        chain: Layer = innermost
        for unit in reversed(middleware):
            chain = layer(unit, chain)
        commands: list[BaseMessage] = []
        response = chain(request, commands)
        return PipelineResult(response=response, messages=[*response.result, *commands])

    return call


@dataclass(frozen=True)
class PipelineUnit:
    """One unit of the model-call pipeline: where :class:`ContextPipeline` holds it.

    Attributes:
        attribute: The :class:`ContextPipeline` field holding the unit (``None``: absent).
        cls: The unit's class.
        title: Its name in prose ("observation masking").
        role: What it does, in one line.
        built_by: The field of a unit that does this one's work itself when present;
            this unit then stays out of the chain.
    """

    attribute: str
    cls: type[AgentMiddleware]
    title: str
    role: str
    built_by: str | None = None


# Outermost first. Masking builds the view of the masked history itself, so with masking
# the view unit would only build a view to throw away. Masking comes before compaction:
# a summary only when masking cannot bring the prompt under its threshold.
PIPELINE_UNITS: tuple[PipelineUnit, ...] = (
    PipelineUnit(
        "masking",
        ObservationMaskingMiddleware,
        "observation masking",
        "old tool outputs → one-line pointers, then the prompt view of that history",
    ),
    PipelineUnit(
        "view",
        PromptViewMiddleware,
        "prompt view",
        "from the last boundary, calls paired with results, within the budget",
        built_by="masking",
    ),
    PipelineUnit(
        "compaction",
        CompactionMiddleware,
        "compaction",
        "a summary at the threshold · on overflow · on /compact",
    ),
    PipelineUnit(
        "output_room",
        OutputRoomMiddleware,
        "output room",
        "max_tokens no larger than the room the prompt leaves in the window",
    ),
    PipelineUnit(
        "overflow",
        OverflowRecoveryMiddleware,
        "overflow recovery",
        "context overflow: cut tool outputs · output overflow: shrink max_tokens",
    ),
    PipelineUnit(
        "served_window",
        ServedWindowMiddleware,
        "served window",
        "after the first reply, the window a local server allocated (none stated)",
    ),
    PipelineUnit(
        "empty_reply",
        EmptyReplyMiddleware,
        "empty reply",
        "a reply with no text and no tool call asked for again, once",
    ),
    PipelineUnit(
        "retry", RetryMiddleware, "retry", "429 after Retry-After · 5xx · dropped connections"
    ),
    PipelineUnit(
        "text_calls",
        TextToolCallsMiddleware,
        "text tool calls",
        "calls a local model wrote as text → tool calls; off, a notice",
    ),
    PipelineUnit(
        "caching",
        PromptCachingMiddleware,
        "prompt caching",
        "Anthropic models: cache_control breakpoints; others untouched",
    ),
)


@dataclass(frozen=True)
class ContextPipeline:
    """The units of agentgraph's model call, built from its dependencies.

    Attributes:
        view: Builds the prompt view: the first unit when there is no ``masking``;
            otherwise ``masking`` calls it and it is not in the chain.
        compaction: Summaries at the threshold, on overflow, on ``/compact``.
        overflow: Recovery from context and output overflows.
        retry: Retries of rate limits, 5xx and dropped connections.
        empty_reply: An empty reply asked for again, once (``None``: off).
        text_calls: Tool calls written as text made real, or (off) told apart from
            an answer (``None``: absent).
        masking: Old tool outputs masked; the first unit when present.
        caching: Anthropic prompt-caching breakpoints.
        output_room: ``max_tokens`` sized to the room the prompt leaves (``None``: off).
        served_window: After the first reply, the window a local server allocated
            (``None``: nothing to ask).
    """

    view: PromptViewMiddleware
    compaction: CompactionMiddleware | None
    overflow: OverflowRecoveryMiddleware
    retry: RetryMiddleware
    empty_reply: EmptyReplyMiddleware | None = None
    text_calls: TextToolCallsMiddleware | None = None
    masking: ObservationMaskingMiddleware | None = None
    caching: PromptCachingMiddleware | None = None
    served_window: ServedWindowMiddleware | None = None
    output_room: OutputRoomMiddleware | None = None

    @property
    def middleware(self) -> list[AgentMiddleware]:
        """The units in pipeline order (outermost first): :data:`PIPELINE_UNITS` present."""
        units: list[AgentMiddleware] = []
        for unit in PIPELINE_UNITS:
            member = getattr(self, unit.attribute)
            if member is None:
                continue
            if unit.built_by is not None and getattr(self, unit.built_by) is not None:
                continue
            units.append(member)
        return units


def _window_adopted(deps: AgentDeps) -> Callable[[int], None]:
    """What to do once ``deps.budget`` shrank to a window an overflow error named.

    Every unit, the tool node and a compactor whose summarizer is the main model hold
    the budget object itself, so they already size for the real window (a summary
    model with a window of its own keeps its budget). ``deps.on_window_learned`` is
    told the new window (the agent keeps it for later processes).
    """

    def follow(_usable_before: int) -> None:
        if deps.on_window_learned is not None:
            deps.on_window_learned(deps.budget.window)

    return follow


def _artifacts_of(deps: AgentDeps) -> Callable[[ModelRequest], str | None]:
    """The folder the tools node saves whole copies of cut outputs in, for a request: the
    run's completed context's, as the tools node takes it (on the LangGraph server it
    follows the thread id whatever a client sent)."""

    def artifacts(request: ModelRequest) -> str | None:
        try:
            config: RunnableConfig | None = get_config()
        except RuntimeError:  # called outside a run
            config = None
        try:
            ctx = deps.run_context(getattr(request.runtime, "context", None), config)
        except RuntimeError:  # no workspace: no tools ran, none cut
            return None
        return ctx.artifacts_dir

    return artifacts


def context_pipeline(deps: AgentDeps, *, emit: Emit = emit) -> ContextPipeline:
    """The pipeline for agentgraph's graph (``deps`` supplies settings and strategies)."""
    settings = deps.settings
    view = PromptViewMiddleware(
        deps.counter, deps.budget, keep_recent=settings.max_message_history, validate=settings.debug
    )
    return ContextPipeline(
        view=view,
        compaction=(
            CompactionMiddleware(
                deps.compactor,
                view,
                distil_threshold=settings.distil_threshold,
                emit=emit,
                artifacts_of=_artifacts_of(deps),
            )
            if deps.compactor is not None
            else None
        ),
        output_room=OutputRoomMiddleware(
            deps.budget,
            lambda r: view.prompt_tokens(r.system_message, r.messages, r.tools),
        ),
        overflow=OverflowRecoveryMiddleware(
            deps.counter,
            deps.budget,
            max_output_tokens=settings.max_output_tokens,
            emit=emit,
            on_window_adopted=_window_adopted(deps),
        ),
        retry=RetryMiddleware(
            RetryPolicy(max_retries=settings.provider_max_retries), sleep=deps.sleep, emit=emit
        ),
        empty_reply=EmptyReplyMiddleware(emit=emit),
        # Off, the unit still says when an answer looks like a call it did not run.
        text_calls=TextToolCallsMiddleware(emit=emit, run_calls=text_tool_calls_on(settings)),
        masking=ObservationMaskingMiddleware(view, threshold=settings.mask_threshold, emit=emit),
        caching=PromptCachingMiddleware(),
        served_window=(
            ServedWindowMiddleware(deps.ask_loaded_window, emit=emit)
            if deps.ask_loaded_window is not None
            else None
        ),
    )


def _model_name(model: BaseChatModel, default: str) -> str:
    for field_name in ("model_name", "model", "model_id"):
        value = getattr(model, field_name, None)
        if isinstance(value, str) and value:
            return value
    return default


def context_middleware(
    model: str | BaseChatModel,
    *,
    summarizer: BaseChatModel | None = None,
    settings: Settings | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> list[AgentMiddleware]:
    """agentgraph's context management for any LangChain agent.

    Usage: ``create_agent(llm, tools, middleware=context_middleware(llm, summarizer=llm))``.

    Args:
        model: The chat model (or its name): its name picks the tokenizer, its
            profile (or the name) the context window.
        summarizer: Chat model that writes compaction summaries; without one there is
            no compaction (the view, overflow recovery and retry still apply).
        settings: Limits and thresholds (``AGENTGRAPH_CONTEXT_WINDOW`` …); read from
            the environment when omitted.
        sleep: Waits between retries.

    Returns:
        The units in pipeline order.
    """
    settings = settings if settings is not None else Settings()  # type: ignore[call-arg]
    profile = model.profile if isinstance(model, BaseChatModel) else None
    name = model if isinstance(model, str) else _model_name(model, settings.model)
    counter = get_counter(name)
    budget = budget_for(settings, name, profile=profile)
    compactor = (
        Compactor(
            summarizer,
            counter,
            budget,
            sleep=sleep,
            retry=RetryPolicy(max_retries=settings.provider_max_retries),
            keep_recent_messages=settings.compaction_keep_messages,
        )
        if summarizer is not None
        else None
    )
    deps = AgentDeps(
        settings=settings,
        model=summarizer,  # type: ignore[arg-type]
        tools=[],
        counter=counter,
        budget=budget,
        compactor=compactor,
        sleep=sleep,
    )
    return context_pipeline(deps).middleware
