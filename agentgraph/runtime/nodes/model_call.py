"""The graph's model call: the context pipeline around the chat model.

The planner and finalize nodes call the model through this one function. It builds
LangChain's ``ModelRequest`` from the node's state, runs the middleware chain of
:mod:`agentgraph.middleware` around the real call, and turns a provider failure the
pipeline could not recover from into one clear :class:`ProviderFailure` line.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.exceptions import ContextOverflowError, ModelError
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import merge_configs
from langchain_core.tools import BaseTool
from langgraph.runtime import Runtime, get_runtime

from agentgraph.context.windows import output_limit_for
from agentgraph.errors import ProviderFailure
from agentgraph.middleware import PipelineResult, compose, context_pipeline
from agentgraph.providers.model_errors import provider_error_of, to_model_error
from agentgraph.runtime.deps import AgentDeps
from agentgraph.runtime.history import extends
from agentgraph.runtime.tool_arguments import StreamedArguments, raw_calls, whole_calls

__all__ = ["BOUND_MODELS_MAX_ENTRIES", "ModelCallResult", "ToolBindings", "make_model_call"]

# Bindings of a model to a tool list kept for reuse (the main agent's tools, a skill's
# subset, subagents' and finalize's lists).
BOUND_MODELS_MAX_ENTRIES = 8


@dataclass
class ModelCallResult:
    """A finished model call.

    Attributes:
        ai: The model's reply.
        messages: State updates in order (a compaction's messages, then ``ai``).
        prompt_tokens: Tokens of the last prompt sent (system, messages, tool schemas).
    """

    ai: AIMessage
    messages: list[BaseMessage]
    prompt_tokens: int


ModelCall = Callable[..., ModelCallResult]


class ToolBindings:
    """``model.bind_tools(tools, tool_choice=...)``, reused for the same objects.

    Binding converts every tool's schema at each call (0.2 ms for the built-in tools
    with ``ChatOpenAI``, several calls a turn); the same model object with the same tool
    objects and choice binds the same, so the last few bindings are kept. An entry holds
    its model and tools, so their ids stay theirs while it lives. Tools given as dicts
    (mutable) or a choice given as a dict are bound anew each time, as are tools a unit
    copies at every call (the prompt-caching unit keeps its marked copy of Anthropic's
    last tool the same object while it can).
    """

    def __init__(self) -> None:
        self._entries: OrderedDict[tuple[Any, ...], tuple[Any, tuple[Any, ...], Any]] = (
            OrderedDict()
        )
        self._lock = threading.Lock()  # subagents call models in other threads

    def bind(self, model: Any, tools: Sequence[Any], tool_choice: Any) -> Any:
        """The model with ``tools`` bound (and ``tool_choice``, when one is given)."""
        if isinstance(tool_choice, dict) or not all(isinstance(t, BaseTool) for t in tools):
            return _bind_tools(model, tools, tool_choice)
        key = (id(model), tool_choice, *map(id, tools))
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] is model and extends(tools, entry[1]):
                self._entries.move_to_end(key)
                return entry[2]
        bound = _bind_tools(model, tools, tool_choice)
        with self._lock:
            self._entries[key] = (model, tuple(tools), bound)
            self._entries.move_to_end(key)
            while len(self._entries) > BOUND_MODELS_MAX_ENTRIES:
                self._entries.popitem(last=False)
        return bound


def _bind_tools(model: Any, tools: Sequence[Any], tool_choice: Any) -> Any:
    if tool_choice:
        return model.bind_tools(tools, tool_choice=tool_choice)
    return model.bind_tools(tools)


def _runtime() -> Runtime[Any] | None:
    try:
        return get_runtime()
    except RuntimeError:  # called outside a graph run
        return None


def _failure(exc: Exception, prompt_tokens: int) -> Exception:
    """The user-facing error for what the pipeline raised (``exc`` if not a provider's)."""
    typed = to_model_error(exc)
    if isinstance(typed, ContextOverflowError):
        return ProviderFailure(
            f"the prompt (~{prompt_tokens:,} tokens) does not fit the model's context window "
            "even after truncating tool outputs and compacting; the session is intact "
            "(set AGENTGRAPH_CONTEXT_WINDOW to the real window, or use a larger model)"
        )
    if isinstance(typed, ModelError) and provider_error_of(typed) is not None:
        return ProviderFailure(f"model call failed: {typed}")
    return exc  # not a provider failure: a programming error must surface


def make_model_call(deps: AgentDeps) -> ModelCall:
    """The model call of ``deps.model`` through the context pipeline."""
    pipeline = context_pipeline(deps)
    chain = compose(pipeline.middleware)
    bindings = ToolBindings()
    configured = deps.settings.max_output_tokens

    def call_model(
        state: Mapping[str, Any],
        messages: Sequence[BaseMessage],
        system: SystemMessage,
        tools: Sequence[BaseTool],
        config: RunnableConfig | None = None,
        *,
        tool_choice: str | None = None,
        runtime: Runtime[Any] | None = None,
    ) -> ModelCallResult:
        """Call the model on the prompt view of ``messages`` (the full history).

        ``runtime`` carries the run's completed context (its workspace is where a
        compaction re-reads files); the current run's by default.

        Raises:
            ProviderFailure: the endpoint failed (auth, unknown model, retries used up)
                or the prompt cannot be made to fit.
        """
        sent: list[int] = []
        # Per call: the budget shrinks when an endpoint names a smaller window.
        max_tokens = (
            configured if configured is not None else output_limit_for(deps.model, deps.budget)
        )

        def execute(request: ModelRequest) -> ModelResponse:
            prompt = [
                *([request.system_message] if request.system_message else []),
                *request.messages,
            ]
            sent.append(
                pipeline.view.prompt_tokens(request.system_message, request.messages, request.tools)
            )
            model: Any = deps.model
            if request.tools:
                model = bindings.bind(model, request.tools, request.tool_choice)
            if request.model_settings:
                model = model.bind(**request.model_settings)
            # The streamed chunks hold the calls' raw arguments, which the merged reply
            # no longer has: only calls whose arguments arrived whole may run.
            streamed = StreamedArguments()
            ai = model.invoke(prompt, merge_configs(config, {"callbacks": [streamed]}))
            if not isinstance(ai, AIMessage):  # pragma: no cover - defensive for odd models
                ai = AIMessage(content=str(getattr(ai, "content", ai)))
            if ai.tool_calls or ai.invalid_tool_calls:
                ai = whole_calls(ai, streamed.calls() or raw_calls(ai))
            return ModelResponse(result=[ai])

        request = ModelRequest(
            model=deps.model,
            messages=cast(Any, list(messages)),
            system_message=system,
            tools=list(tools),
            tool_choice=tool_choice,
            state=cast(Any, {**state, "messages": list(messages)}),
            runtime=runtime if runtime is not None else _runtime(),
            model_settings={"max_tokens": max_tokens} if max_tokens is not None else {},
        )
        try:
            result: PipelineResult = chain(request, execute)
        except Exception as exc:
            failure = _failure(exc, sent[-1] if sent else 0)
            if failure is exc:
                raise
            raise failure from exc
        return ModelCallResult(
            ai=result.reply, messages=result.messages, prompt_tokens=sent[-1] if sent else 0
        )

    return call_model
