"""Compaction unit: one entry point for every compaction.

:meth:`CompactionMiddleware.compact` is the only way a history is compacted: by
``wrap_model_call`` when the prompt reaches the compaction threshold, or nears it with
a part about to outgrow one summarizer call (trigger ``"auto"``), or the provider still
reports an overflow after overflow recovery (``"guard"``), when the outputs masking hid
since the last summary add up to the distil threshold (``"distil"``), and by
``Agent.compact`` for ``/compact`` and ``sessions compact`` (``"manual"``). The
strategy (LLM handoff summary, files re-read, fallback) lives in
:mod:`agentgraph.context.compaction`.

Hook: ``wrap_model_call``. When it compacted, the result carries the compaction's
messages as a ``Command`` with the model's reply after them: ``create_agent`` applies
a model response before middleware commands, and the reply must land after the
compaction boundary.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from langchain.agents.middleware import (
    AgentMiddleware,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
)
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langgraph.types import Command

from agentgraph.config import DISTIL_THRESHOLD_DEFAULT
from agentgraph.context.compaction import (
    carried_scale,
    only_unseen_results_since_boundary,
    since_last_boundary,
)
from agentgraph.context.masking_text import MASKED_TOKENS_KEY
from agentgraph.context.spiral import (
    SPIRAL_MAX_STALLS,
    CompactionSpiralError,
    spiral_note,
    stalled_compactions,
)
from agentgraph.context.tokens import anchored_prompt_tokens
from agentgraph.middleware.events import Emit, emit
from agentgraph.middleware.prompt_view import PromptViewMiddleware, Tools
from agentgraph.providers.model_errors import to_model_error
from agentgraph.runtime.deps import CompactionOutcome, Compactor

__all__ = ["CompactionMiddleware"]

# A prompt from this share of the compaction point on compacts early when its part
# would outgrow one summarizer call by the next model call (:meth:`_part_full`); below
# it, a summary model whose calls hold much less than the point would compact often.
EARLY_COMPACTION_FLOOR_FRACTION = 0.9
# ... and only when the newest model call added at most this share of the prompt: an
# early compaction gives up up to a call's growth of room. Eight reads a reply at a
# 32k window (a fifth of the prompt a call) compacted a third time where two had done
# and sent 5% more prompt tokens; one read a call (3-12% of the prompt at 8k-32k)
# sent 2-6% fewer, with the faithful summarizer in as many or fewer summarizer calls.
EARLY_COMPACTION_MAX_STEP_FRACTION = 0.15


def _workspace(request: ModelRequest) -> str | None:
    """The workspace whose files are re-read after a compaction, when the run has one."""
    context = getattr(request.runtime, "context", None)
    for source in (context, request.state):
        if isinstance(source, Mapping):
            value = source.get("workspace_path")
        else:
            value = getattr(source, "workspace_path", None)
        if isinstance(value, str) and value:
            return value
    return None


class CompactionMiddleware(AgentMiddleware):
    """Compacts the history at the threshold, on overflow, and on request.

    Args:
        compactor: The compaction strategy (``agentgraph.context.compaction.Compactor``).
        view: The prompt-view unit: its budget and counter decide the threshold, and
            it rebuilds the view of a compacted history.
        emit: Told ``{"type": "compaction", **record}`` after each compaction.
        artifacts_of: The folder the run's tools save the whole copies of the outputs
            they cut in (agentgraph/context/artifacts.py), for a request; None (or no
            such callable): the summarizer reads the cuts as the history holds them.
    """

    def __init__(
        self,
        compactor: Compactor,
        view: PromptViewMiddleware,
        *,
        distil_threshold: float = DISTIL_THRESHOLD_DEFAULT,
        emit: Emit = emit,
        artifacts_of: Callable[[ModelRequest], str | None] | None = None,
    ) -> None:
        super().__init__()
        self.compactor = compactor
        self.view = view
        self.distil_threshold = distil_threshold
        self.emit = emit
        self.artifacts_of = artifacts_of

    def compact(
        self,
        messages: Sequence[BaseMessage],
        *,
        trigger: str,
        system: Sequence[BaseMessage],
        tools: Tools,
        focus: str | None = None,
        workspace: str | None = None,
        measured: tuple[int, int] | None = None,
        course_change: str | None = None,
        artifacts: str | None = None,
    ) -> CompactionOutcome | None:
        """Compact ``messages`` (a full history); None when there is nothing to compact.

        Args:
            messages: The full history (the state's ``messages``).
            trigger: ``"auto"``, ``"guard"`` (overflow) or ``"manual"``.
            system: The live system prompt.
            tools: The tools sent with the prompt.
            focus: What the summary should keep above all (``/compact FOCUS``).
            workspace: Folder whose recently used files are re-read into the view.
            measured: The prompt about to be sent, as ``(its tokens as the provider
                counts them, our count)``; taken from ``messages`` when not given.
            course_change: The spiral guard's note (see :meth:`_compacted`).
            artifacts: The session's folder of whole outputs the history holds cut.

        Returns:
            The state update and new history, or None (a manual compaction that
            would not make the prompt smaller is not applied either; the
            compactor's ``last_skipped`` says why).
        """
        outcome = self.compactor(
            messages,
            trigger=trigger,
            system=system,
            tools=tools,  # type: ignore[arg-type]
            focus=focus,
            workspace=workspace,
            measured=measured,
            course_change=course_change,
            artifacts=artifacts,
        )
        if outcome is not None:
            self.emit({"type": "compaction", **outcome.record})
        return outcome

    def needs_compaction(self, history: Sequence[BaseMessage], request: ModelRequest) -> bool:
        """Compact at the token threshold, or before messages would leave the window.

        ``request.messages`` is the prompt view of ``history``. Its size is the
        provider's reported usage of the last reply plus our count of what came after
        it (Claude Code's anchor; our own count before the first report, or when the
        report is not of this prompt): the provider's tokenizer is the one that decides
        what overflows. A view that had to be cut to fit the budget by our own count
        (:meth:`PromptViewMiddleware.cut_to_fit`) needs one too.
        """
        return self._due(history, request, self._measure(request))

    def _due(
        self, history: Sequence[BaseMessage], request: ModelRequest, measured: tuple[int, int]
    ) -> bool:
        """:meth:`needs_compaction` for a prompt already measured."""
        # A view cut to fit is under the threshold by construction: what it cut is the
        # history's excess, which only a compaction keeps (as a summary of the originals).
        return self._over(history, measured) or self.view.cut_to_fit(request.messages)

    def _may_wait(
        self, history: Sequence[BaseMessage], request: ModelRequest, measured: tuple[int, int]
    ) -> bool:
        """Whether a compaction at the threshold waits for the model to see what pushed
        the prompt past it: the newest call's results, when nothing the model has
        answered is new since the last compaction and the prompt fits the window whole.

        Compacting then would summarize only results the model has not seen and keep
        them cut (eight parallel reads at an 8k window: a compaction for the first
        reply, one more than a summary after each reply the model has read needs).
        Seen, they are summarized with the next compaction like any other output.
        """
        return (
            measured[0] <= self.view.budget.usable
            and not self.view.cut_to_fit(request.messages)
            and only_unseen_results_since_boundary(history)
        )

    def _part_full(
        self, history: Sequence[BaseMessage], request: ModelRequest, measured: tuple[int, int]
    ) -> bool:
        """Whether a prompt near the threshold compacts now, its part in one summarizer
        call, because a model call later the part would take two.

        At the threshold such a part is summarized in two calls (the second holding a
        read or two), or its newest reads wait in view for the next compaction when
        that costs less; either way the prompts before it held what one call could not.
        """
        if measured[0] < self.view.budget.compact_at * EARLY_COMPACTION_FLOOR_FRACTION:
            return False
        if only_unseen_results_since_boundary(history):
            return False
        newest = max((i for i, m in enumerate(history) if isinstance(m, AIMessage)), default=-1)
        if newest < 0:
            return False
        growth = self.view.counter.count_messages(list(history[newest:]))
        if growth > measured[1] * EARLY_COMPACTION_MAX_STEP_FRACTION:
            return False
        return self.compactor.part_outgrows_one_call(
            history,
            system=[request.system_message] if request.system_message is not None else [],
            tools=request.tools,  # type: ignore[arg-type]
            measured=measured,
            growth=growth,
        )

    def _distil_due(self, request: ModelRequest) -> bool:
        """Whether the outputs masking hid since the last summary add up to the distil
        threshold: their facts then reach a summary (from the stored originals) instead
        of leaving the prompt for good."""
        masked = request.state.get(MASKED_TOKENS_KEY) if request.state else None
        if not isinstance(masked, int) or masked <= 0:
            return False
        return masked >= self.view.budget.usable * self.distil_threshold

    def _over(self, history: Sequence[BaseMessage], measured: tuple[int, int]) -> bool:
        keep = self.view.keep_recent
        if keep is not None:  # a message-count window (unset by default)
            recent = since_last_boundary(history)
            if sum(not isinstance(m, SystemMessage) for m in recent) > keep:
                return True
        return measured[0] >= self.view.budget.compact_at

    def _measure(self, request: ModelRequest) -> tuple[int, int]:
        """``(its tokens as the provider counts them, our count)`` of the prompt of
        ``request``: anchored on the last reply's reported usage (see
        :func:`agentgraph.context.tokens.anchored_prompt_tokens`)."""
        counter = self.view.counter
        fixed = self.view.fixed_tokens(request.system_message, request.tools)
        body = [m for m in request.messages if not isinstance(m, SystemMessage)]
        if len(body) == len(request.messages):  # the view itself: counted as it was built
            tokens = self.view.prompt_tokens(
                request.system_message, request.messages, request.tools
            )
        else:
            system = [request.system_message] if request.system_message is not None else []
            tokens = counter.count_messages([*system, *body]) + counter.count_tools(request.tools)
        shown, _ = anchored_prompt_tokens(
            body,
            counter,
            fixed_tokens=fixed,
            unanchored=tokens,
            carried_scale=carried_scale(body) if counter.source == "estimate" else 1.0,
        )
        return shown, tokens

    def _compacted(
        self,
        request: ModelRequest,
        history: list[BaseMessage],
        trigger: str,
        measured: tuple[int, int],
    ) -> tuple[ModelRequest, CompactionOutcome] | None:
        # The spiral guard: a compaction after one that made no progress changes course;
        # after SPIRAL_MAX_STALLS in a row the run stops with one line, the session saved.
        stalled = stalled_compactions(history)
        stalls = stalled.stalls
        if stalls >= SPIRAL_MAX_STALLS:
            raise CompactionSpiralError(
                f"stopped: compaction is making no progress ({stalls} compactions in a row "
                "after work that only repeated calls already made, with the same output, or "
                "searched the history again); "
                "the session is saved — continue it with a focused /compact, a narrower "
                "request or a larger context window (AGENTGRAPH_CONTEXT_WINDOW)"
            )
        note = (
            spiral_note(stalled.repeated, stalled.calls, recalled=stalled.recalled)
            if stalls
            else None
        )
        # A view cut to fit the budget holds less than the prompt the last reported
        # usage describes: against our count of it, a provider counting as we do looked
        # like one counting 15-70% more, and an estimating counter's budget was divided
        # by that. The compaction measures the history itself instead.
        cut = self.view.cut_to_fit(request.messages)
        outcome = self.compact(
            history,
            trigger=trigger,
            system=[request.system_message] if request.system_message is not None else [],
            tools=request.tools,
            workspace=_workspace(request),
            artifacts=self.artifacts_of(request) if self.artifacts_of else None,
            measured=None if cut else measured,
            course_change=note,
        )
        if outcome is None:
            return None
        view = self.view.build(outcome.messages, request.system_message, request.tools)
        state: Any = {**request.state, "messages": outcome.messages}
        return request.override(messages=view.messages, state=state), outcome  # type: ignore[arg-type]

    def _before_call(
        self, request: ModelRequest
    ) -> tuple[ModelRequest, list[BaseMessage], list[BaseMessage]]:
        """``(request, history, state updates)``, compacted first at the threshold."""
        history: list[BaseMessage] = list(request.state.get("messages") or request.messages)
        measured = self._measure(request)
        trigger = "auto" if self._due(history, request, measured) else None
        if trigger is None and self._part_full(history, request, measured):
            trigger = "auto"
        if trigger is not None and self._may_wait(history, request, measured):
            trigger = None
        if trigger is None and self._distil_due(request):
            trigger = "distil"
        if trigger is not None:
            done = self._compacted(request, history, trigger, measured)
            if done is not None:
                request, outcome = done
                return request, list(outcome.messages), list(outcome.updates)
        return request, history, []

    def _after_overflow(
        self, request: ModelRequest, history: list[BaseMessage], exc: Exception
    ) -> tuple[ModelRequest, CompactionOutcome]:
        """The compacted request after ``exc``; raises when it is not an overflow or
        nothing can be compacted."""
        typed = to_model_error(exc)
        if not isinstance(typed, ContextOverflowError):
            raise exc
        done = self._compacted(request, history, "guard", self._measure(request))
        if done is None:
            raise typed from exc
        return done

    @staticmethod
    def _result(
        response: ModelResponse, updates: list[BaseMessage]
    ) -> ModelResponse | ExtendedModelResponse:
        if not updates:
            return response
        return ExtendedModelResponse(
            model_response=ModelResponse(
                result=[], structured_response=response.structured_response
            ),
            command=Command(update={"messages": [*updates, *response.result]}),
        )

    def wrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], ModelResponse],
    ) -> ModelResponse | AIMessage | ExtendedModelResponse:
        """Compact before the call at the threshold, and once more on an overflow."""
        request, history, updates = self._before_call(request)
        try:
            response = handler(request)
        except Exception as exc:
            request, outcome = self._after_overflow(request, history, exc)
            updates.extend(outcome.updates)
            response = handler(request)  # a second overflow is the caller's to report
        return self._result(response, updates)

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse | AIMessage | ExtendedModelResponse:
        """Async :meth:`wrap_model_call` (the summary call runs in a worker thread)."""
        request, history, updates = await asyncio.to_thread(self._before_call, request)
        try:
            response = await handler(request)
        except Exception as exc:
            request, outcome = await asyncio.to_thread(self._after_overflow, request, history, exc)
            updates.extend(outcome.updates)
            response = await handler(request)
        return self._result(response, updates)
