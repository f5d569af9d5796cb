"""Observation masking unit: old tool outputs become one-line pointers in the view.

Tier 1 of context management, before any LLM summary: when the prompt passes the
masking threshold (``AGENTGRAPH_MASK_THRESHOLD`` of the usable budget, below the
compaction threshold), tool outputs older than the most recent turns are replaced,
in the prompt view only, by a placeholder naming the call, its size and where the
full output still is (the saved artifact, or the transcript that ``read_file`` and
``search_history`` reach). The call itself stays, so the model knows what it did.
The stored history is never changed.

Masking advances in batches: the boundary (every tool output before it is masked)
moves only when the prompt crosses the threshold again and the move frees at least
``MASK_MIN_BATCH_FRACTION`` of the budget, so between two events every request
extends the previous one byte for byte and a provider's prefix cache serves it.

The boundary is not stored anywhere: it is replayed from the view (the history since
the last compaction) and the budget at every call, request point by request point
(each assistant message marks a past request), so it is the same after a restart.
Each point is decided from the messages before it, so a call whose view extends the last
one resumes the replay where that call stood and decides only its new points.

Hook: ``wrap_model_call`` (the request's ``messages`` become the prompt view of the
history, with masked copies in place of old tool outputs). Masking owns the view
build: it masks first and then builds the view of the masked history, so the view's
budget trim never cuts what masking already made small and a call builds one view.
Emits ``{"type": "masking", ...}`` when the boundary moves.
"""

from __future__ import annotations

import math
import threading
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain.agents.middleware import (
    AgentMiddleware,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
)
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langgraph.types import Command

from agentgraph.context.compaction import UNSEEN_COPY_KEY, BoundaryTracker, carried_scale
from agentgraph.context.masking_text import (
    MASK_MIN_OUTPUT_TOKENS,
    MASKED_KEY,
    MASKED_TOKENS_KEY,
    maskable,
    note_words,
    placeholder,
    restates,
)
from agentgraph.context.tokens import TokenCounter, estimate_scale, reported_prompt_tokens
from agentgraph.middleware.events import Emit, emit
from agentgraph.middleware.prompt_view import PromptViewMiddleware
from agentgraph.runtime.history import extends

# Where a reply stored after a masking event keeps that event (its ``response_metadata``).
MASKING_MARKER_KEY = "agentgraph_masking"

__all__ = [
    "MASK_HARD_MARGIN_FRACTION",
    "MASK_HARD_MIN_BATCH_FRACTION",
    "MASK_KEEP_RECENT_FRACTION",
    "MASK_KEEP_RECENT_TURNS",
    "MASK_LOW_WATER_DEFAULT",
    "MASK_MIN_BATCH_FRACTION",
    "MASK_MIN_OUTPUT_TOKENS",
    "MASK_SCALE_STEP",
    "MASK_THRESHOLD_DEFAULT",
    "MaskingPlan",
    "ObservationMaskingMiddleware",
    "placeholder",
]

# Share of the usable budget at which old tool outputs start to be masked; below the
# compaction threshold (0.80) so masking comes first and a summary only when it is
# not enough.
MASK_THRESHOLD_DEFAULT = 0.60
# Newest turns (an assistant message and its tool results) kept verbatim at an
# event: at most this many, and only as many as fit this share of the budget.
MASK_KEEP_RECENT_TURNS = 6
MASK_KEEP_RECENT_FRACTION = 0.15
# The boundary moves only when the move frees at least this share of the budget:
# fewer, larger batches keep the prefix stable for longer.
MASK_MIN_BATCH_FRACTION = 0.20
# Hysteresis: an event masks at least down to this share of the usable budget (more
# than the newest turns when they alone would leave the prompt above it), so the next
# event waits until the prompt climbs from here back to the masking threshold. Lower
# means rarer, larger events; each event re-sends everything after the old boundary.
MASK_LOW_WATER_DEFAULT = 0.40
# Near the compaction threshold the batch rule gives way: rather than let the next
# batch push the prompt into an LLM summary (paid, lossy, and a full cache miss),
# every output but the newest turn's is masked once the prompt reaches
# ``compact_at - MASK_HARD_MARGIN_FRACTION * usable``, provided that frees at least
# ``MASK_HARD_MIN_BATCH_FRACTION`` of the budget. Masked outputs stay one
# read_history call away; a summary is the last resort.
MASK_HARD_MARGIN_FRACTION = 0.05
MASK_HARD_MIN_BATCH_FRACTION = 0.05
# With an estimating counter the replay's thresholds follow the provider/estimate ratio
# only when it moves by more than this: steadier thresholds, and less work per request.
MASK_SCALE_STEP = 0.01
# Tool results whose placeholder (and masked copy) are remembered (they are in the
# stored history anyway): a view measured anew (a restart, another session's call in
# between) looks every one up again, and a result's placeholder never changes.
MASK_MEMO_MAX_ENTRIES = 1_024


@dataclass(frozen=True)
class _Measured:
    """A history's running sums of tokens and of what masking saves (per message
    index), placeholders, calls by id, the prompt tokens its replies report (by index)
    and its assistant messages' indices (the request points)."""

    messages: tuple[BaseMessage, ...]
    counter: TokenCounter
    texts: dict[int, str]
    calls: dict[str, Any]
    reported: dict[int, int]
    cum_size: list[int]
    cum_save: list[int]
    turns: list[int]
    # Outputs after the last assistant message that masking could save on, as (index,
    # saving, placeholder): they count once the reply to them restates them.
    pending: tuple[tuple[int, int, str], ...] = ()


@dataclass(frozen=True)
class _Replayed:
    """Where the replay of a measured history stood after its past request points.

    Each point's decision depends only on the messages before it, so a longer history
    that starts with the same messages resumes here instead of replaying from the start
    (the figures in ``key`` unchanged).
    """

    measured: _Measured
    key: tuple[Any, ...]
    points: int  # past request points replayed (assistant messages after index 0)
    boundary: int
    scale: float
    answered: int


@dataclass(frozen=True)
class MaskingPlan:
    """The replayed masking of one view.

    Attributes:
        boundary: Tool outputs at view indices below this are masked.
        previous: The boundary of the previous request (differs at an event).
        tokens_before: Prompt tokens with the previous request's boundary.
        tokens_after: Prompt tokens with :attr:`boundary`.
        masked: Tool outputs masked in this view.
        scale: How much more the provider counts than our estimate, as of this request
            (1.0 for an exact counter); the thresholds were divided by it.
        masked_tokens: What the outputs masked in this view saved, in our tokens: the
            volume masked since the last summary, which none distilled yet.
    """

    boundary: int
    previous: int
    tokens_before: int
    tokens_after: int
    masked: int
    scale: float = 1.0
    masked_tokens: int = 0

    @property
    def event(self) -> bool:
        """Whether the boundary moved at this request."""
        return self.boundary != self.previous


class ObservationMaskingMiddleware(AgentMiddleware):
    """Sends the prompt view, old tool outputs masked once the prompt passes a threshold.

    Takes the place of the prompt-view unit in the chain: every call gets a view,
    masked or not, so no view unit runs in front of this one.

    Args:
        view: Builds the view: its counter and budget size the prompt, and its
            :meth:`~PromptViewMiddleware.build` turns the (masked) history into the
            view sent (masking before the view's budget trim, so the trim never cuts
            what masking already made small).
        threshold: Share of the usable budget that starts masking.
        low_water: Share of the usable budget an event masks down to, when it can
            (at most ``threshold``).
        emit: Told ``{"type": "masking", ...}`` when the boundary moves.
    """

    def __init__(
        self,
        view: PromptViewMiddleware,
        *,
        threshold: float = MASK_THRESHOLD_DEFAULT,
        low_water: float = MASK_LOW_WATER_DEFAULT,
        emit: Emit = emit,
    ) -> None:
        super().__init__()
        self.view = view
        # id(result) -> (result, its content, its call, saving, placeholder, masked
        # copy or None); the objects are held, so an id is never reused meanwhile.
        self._memo: OrderedDict[int, tuple[Any, Any, Any, int, str, BaseMessage | None]] = (
            OrderedDict()
        )
        self._memo_lock = threading.Lock()  # subagents call models in other threads
        # The last history measured and its per-message figures: the next call's history
        # is it plus the reply and its results, so only those are measured. Replaced
        # whole, never mutated.
        self._measured: _Measured | None = None
        self._replayed: _Replayed | None = None  # likewise replaced whole
        self._boundaries = BoundaryTracker()
        # The last masked view outside an event: its measured view, boundary and list.
        self._masked_view: tuple[_Measured, int, tuple[BaseMessage, ...]] | None = None
        self.counter = view.counter
        self.budget = view.budget
        self.threshold = threshold
        self.low_water = min(low_water, threshold)
        self.emit = emit

    @property
    def mask_at(self) -> int:
        """Prompt tokens at which masking starts."""
        return int(self.budget.usable * self.threshold)

    @property
    def low_at(self) -> int:
        """Prompt tokens an event masks down to when it can."""
        return int(self.budget.usable * self.low_water)

    @property
    def hard_at(self) -> int:
        """Prompt tokens from which every output but the newest turn's is masked."""
        margin = int(self.budget.usable * MASK_HARD_MARGIN_FRACTION)
        return max(self.budget.compact_at - margin, self.mask_at)

    # -- replay ---------------------------------------------------------------------

    def _measure(self, messages: Sequence[BaseMessage]) -> tuple[_Measured, _Measured | None]:
        """Running sums of the messages' tokens and of what masking each saves; the
        placeholders; the prompt tokens each reply reports; the request points.

        Each figure depends only on the messages up to it, so the figures of the last
        history measured are kept when ``messages`` starts with it (the same objects).

        Returns:
            The measured history, and the one it extends (None when measured anew).
        """
        last = self._measured
        counter = self.counter
        start = 0
        if last is not None and last.counter is counter and extends(messages, last.messages):
            start = len(last.messages)
        pending: list[tuple[int, int, str]] = []
        if start:
            assert last is not None
            texts, calls, reported = dict(last.texts), dict(last.calls), dict(last.reported)
            cum_size, cum_save, turns = list(last.cum_size), list(last.cum_save), list(last.turns)
            pending = list(last.pending)
        else:
            texts, calls, reported = {}, {}, {}
            cum_size, cum_save, turns = [0], [0], []
        for i in range(start, len(messages)):
            msg = messages[i]
            size = self.counter.count_message(msg)
            save = 0
            if isinstance(msg, AIMessage):
                if pending:
                    self._note(messages, msg, pending, texts, cum_save)
                    pending = []
                turns.append(i)
                for call in msg.tool_calls:
                    if call.get("id"):
                        calls[str(call["id"])] = call
                if msg.usage_metadata:
                    reported[i] = reported_prompt_tokens(msg.usage_metadata)
            elif isinstance(msg, ToolMessage) and maskable(msg, size):
                saving, text = self._saving(msg, calls.get(msg.tool_call_id), size)
                if saving > 0:
                    pending.append((i, saving, text))
            cum_size.append(cum_size[-1] + size)
            cum_save.append(cum_save[-1] + save)
        measured = _Measured(
            tuple(messages),
            counter,
            texts,
            calls,
            reported,
            cum_size,
            cum_save,
            turns,
            tuple(pending),
        )
        self._measured = measured
        return measured, (last if start else None)

    @staticmethod
    def _note(
        messages: Sequence[BaseMessage],
        reply: AIMessage,
        pending: Sequence[tuple[int, int, str]],
        texts: dict[int, str],
        cum_save: list[int],
    ) -> None:
        """Make the outputs ``reply`` restates maskable (``texts`` and ``cum_save`` updated).

        Masking hides only what the model has restated in its own words (a note, a
        finding, an identifier it quotes): a model that only calls tools has kept
        nothing of an output, and hiding it would make it read the output again or
        forget it. Its outputs are distilled by a summary at the compaction threshold
        instead. The saving of an output counts from its own index on, as if known
        when it arrived: no decision of an earlier request point reads those sums
        (their boundaries lie before the turn the outputs belong to), so a replay
        decides as the live calls did.
        """
        words = note_words(reply.text)
        if not words:
            return
        for index, saving, text in pending:
            if restates(words, messages[index].text):
                texts[index] = text
                for k in range(index + 1, len(cum_save)):
                    cum_save[k] += saving

    def _saving(self, msg: ToolMessage, call: Any, size: int) -> tuple[int, str]:
        """What masking ``msg`` saves and its placeholder (remembered per result)."""
        with self._memo_lock:
            entry = self._memo.get(id(msg))
        if entry is not None and entry[0] is msg and entry[1] is msg.content and entry[2] is call:
            return entry[3], entry[4]
        text = placeholder(msg, dict(call) if call is not None else None, size)
        masked = msg.model_copy(update={"content": text})
        save = max(size - self.counter.count_message(masked), 0)
        with self._memo_lock:
            self._memo[id(msg)] = (msg, msg.content, call, save, text, None)
            while len(self._memo) > MASK_MEMO_MAX_ENTRIES:
                self._memo.popitem(last=False)
        return save, text

    def _masked_copy(self, msg: BaseMessage, text: str) -> BaseMessage:
        """``msg`` with ``text`` as its content, marked masked (the same copy each call)."""
        with self._memo_lock:
            entry = self._memo.get(id(msg))
        known = (
            entry is not None and entry[0] is msg and entry[1] is msg.content and entry[4] == text
        )
        if entry is not None and known and entry[5] is not None:
            return entry[5]
        copy = msg.model_copy(
            update={
                "content": text,
                "additional_kwargs": {**msg.additional_kwargs, MASKED_KEY: True},
            }
        )
        if entry is not None and known:
            with self._memo_lock:
                if id(msg) in self._memo:
                    self._memo[id(msg)] = (*entry[:5], copy)
        return copy

    @staticmethod
    def _kept_start(
        turns: Sequence[int], point: int, cum_size: Sequence[int], keep_tokens: int
    ) -> int:
        """Start of the newest turns kept verbatim in the prompt ending at ``point``."""
        k = bisect_left(turns, point)  # turns[:k] started before the request
        if k == 0:
            return 0
        start = turns[k - 1]  # the newest turn always stays
        for j in range(k - 2, max(k - 1 - MASK_KEEP_RECENT_TURNS, -1), -1):
            if cum_size[point] - cum_size[turns[j]] > keep_tokens:
                break
            start = turns[j]
        return start

    def _thresholds(self, scale: float) -> tuple[int, int, int, int, int]:
        """Keep, batch, hard batch, low-water and hard thresholds in our tokens."""
        usable = self.budget.usable / scale
        return (
            int(usable * MASK_KEEP_RECENT_FRACTION),
            int(usable * MASK_MIN_BATCH_FRACTION),
            int(usable * MASK_HARD_MIN_BATCH_FRACTION),
            int(self.low_at / scale),
            int(self.hard_at / scale),
        )

    def plan(
        self, messages: Sequence[BaseMessage], fixed: int
    ) -> tuple[MaskingPlan, dict[int, str]]:
        """Replay the masking boundary over ``messages`` (a view) request by request.

        The replay resumes where the last one stood when ``messages`` extends the last
        view measured and nothing it depends on changed (``fixed``, the budget, the
        scale the view starts with); so a call replays only its new request points.

        Args:
            messages: The prompt view (history since the last compaction).
            fixed: Tokens of the system prompt and tool schemas.

        Returns:
            The plan and the placeholder text per masked view index.
        """
        plan, masked, _measured, _extended = self._replay(messages, fixed)
        return plan, masked

    def _replay(
        self, messages: Sequence[BaseMessage], fixed: int
    ) -> tuple[MaskingPlan, dict[int, str], _Measured, _Measured | None]:
        """:meth:`plan`, with the measured view and the one it extends."""
        measured, extended = self._measure(messages)
        cum_size, cum_save, turns = measured.cum_size, measured.cum_save, measured.turns
        reported = measured.reported
        # Thresholds are in the provider's tokens. With an estimating counter each request
        # point uses the provider/estimate ratio of the last reply before it (its reported
        # input over our count of the prompt it answered, as masked then), or the ratio a
        # compaction recorded; so the boundary replays the same after a restart.
        estimate = self.counter.source == "estimate"
        mask_base = self.mask_at
        scale = carried_scale(messages) if estimate else 1.0
        key = (fixed, mask_base, self.low_at, self.hard_at, self.budget.usable, scale)
        first = 1 if turns and turns[0] == 0 else 0  # a reply at index 0 answered no request
        done, boundary, answered = first, 0, 0  # answered: the last request point
        known = self._replayed
        if known is not None and known.measured is extended and known.key == key:
            done, boundary, scale = known.points, known.boundary, known.scale
            answered = known.answered
        mask_at = int(mask_base / scale)
        thresholds: tuple[int, int, int, int, int] | None = None
        previous = boundary
        for index in range(done, len(turns) + 1):
            point = turns[index] if index < len(turns) else len(messages)
            if index == len(turns):  # the past points are decided: resume from here
                self._replayed = _Replayed(measured, key, index, boundary, scale, answered)
            rep = reported.get(answered, 0) if estimate else 0
            if rep:
                # That request is decided: what was reported against its prompt as sent.
                # Trusted as the compaction unit trusts an anchor (within half of ours
                # either way); a provider counting no more than we do means no scaling.
                sent = fixed + cum_size[answered] - cum_save[min(boundary, answered)]
                ratio = estimate_scale(rep, sent) if sent > 0 else None
                if ratio is not None and abs(ratio - scale) > MASK_SCALE_STEP:
                    scale, mask_at, thresholds = ratio, int(mask_base / ratio), None
            answered = point
            previous = boundary
            tokens = fixed + cum_size[point] - cum_save[min(boundary, point)]
            if tokens < mask_at:
                continue
            if thresholds is None:
                thresholds = self._thresholds(scale)
            keep_tokens, min_batch, hard_batch, low_at, hard_at = thresholds
            start = self._kept_start(turns, point, cum_size, keep_tokens)
            k = bisect_left(turns, point)
            if k > 0:
                # The first turn whose masking (with everything before it) brings the
                # prompt to the low-water mark; the newest turn at the latest.
                need = fixed + cum_size[point] - low_at
                low = turns[min(bisect_left(turns, bisect_left(cum_save, need)), k - 1)]
                start = max(start, low)
            if start > boundary and cum_save[start] - cum_save[boundary] >= min_batch:
                boundary = start
            tokens = fixed + cum_size[point] - cum_save[boundary]
            if tokens >= hard_at and k > 0:
                newest = turns[k - 1]  # the outputs the model has not answered yet stay
                if newest > boundary and cum_save[newest] - cum_save[boundary] >= hard_batch:
                    boundary = newest
        total = fixed + cum_size[-1]
        masked = {i: t for i, t in measured.texts.items() if i < boundary}
        result = MaskingPlan(
            boundary=boundary,
            previous=previous,
            tokens_before=total - cum_save[previous],
            tokens_after=total - cum_save[boundary],
            masked=len(masked),
            scale=scale,
            masked_tokens=cum_save[boundary],
        )
        return result, masked, measured, extended

    # -- the view ---------------------------------------------------------------------

    def mask(
        self, messages: Sequence[BaseMessage], fixed: int
    ) -> tuple[list[BaseMessage], MaskingPlan]:
        """``messages`` with old tool outputs masked, and the plan that masked them."""
        plan, masked, measured, extended = self._replay(messages, fixed)
        if not masked:
            return list(messages), plan
        last = self._masked_view
        if plan.event:
            out: list[BaseMessage] = self._masked_list(messages, masked)
            freed = plan.tokens_before - plan.tokens_after
            return self._restate_usage(out, math.ceil(freed * plan.scale)), plan
        if last is not None and last[0] is extended and last[1] == plan.boundary:
            # The same boundary over a longer view: the new messages come after it.
            out = [*last[2], *messages[len(last[2]) :]]
        else:
            out = self._masked_list(messages, masked)
        self._masked_view = (measured, plan.boundary, tuple(out))
        return out, plan

    def _masked_list(
        self, messages: Sequence[BaseMessage], masked: dict[int, str]
    ) -> list[BaseMessage]:
        out: list[BaseMessage] = []
        for i, msg in enumerate(messages):
            text = masked.get(i)
            out.append(self._masked_copy(msg, text) if text is not None else msg)
        return out

    @staticmethod
    def _restate_usage(messages: list[BaseMessage], freed: int) -> list[BaseMessage]:
        """The last reported usage, minus what this event freed.

        The compaction unit anchors its count on the provider's usage of the last
        reply; that usage describes the prompt before this masking event, so it would
        overstate the masked prompt and compact for nothing.
        """
        for i in range(len(messages) - 1, -1, -1):
            msg = messages[i]
            if isinstance(msg, AIMessage) and msg.usage_metadata:
                reported = msg.usage_metadata
                prompt = max(int(reported.get("input_tokens") or 0) - freed, 0)
                output = int(reported.get("output_tokens") or 0)
                usage = {"input_tokens": prompt, "output_tokens": output}
                usage["total_tokens"] = prompt + output
                messages[i] = msg.model_copy(update={"usage_metadata": usage})
                break
        return messages

    def _answered_unseen_masked(self, messages: list[BaseMessage]) -> list[BaseMessage]:
        """``messages`` with the results a compaction kept because the model had not
        seen them (``UNSEEN_COPY_KEY``: its summary holds them) as their placeholders
        once the model has answered them.

        The model sees each once, whole, as a call it made must show its result; after
        that the summary keeps what they held, and kept whole to the next compaction
        each would take its size from every call of the cycle (a read a compaction:
        25 compactions of 300 files at a 16k window instead of 21). Not counted as
        masked volume: the summary already distilled them.
        """
        answered = max((i for i, m in enumerate(messages) if isinstance(m, AIMessage)), default=0)
        out = messages
        calls: dict[str, Any] = {}
        for i, msg in enumerate(messages[:answered]):
            if isinstance(msg, AIMessage):
                calls.update({str(c["id"]): c for c in msg.tool_calls if c.get("id")})
                continue
            kwargs = msg.additional_kwargs
            if not (
                isinstance(msg, ToolMessage)
                and kwargs.get(UNSEEN_COPY_KEY)
                and not kwargs.get(MASKED_KEY)
            ):
                continue
            size = self.counter.count_message(msg)
            if not maskable(msg, size):
                continue
            _saving, text = self._saving(msg, calls.get(msg.tool_call_id), size)
            if out is messages:
                out = list(messages)
            out[i] = self._masked_copy(msg, text)
        return out

    def _apply(self, request: ModelRequest) -> tuple[ModelRequest, dict[str, int] | None]:
        history = list(request.state.get("messages") or request.messages)
        recent = self._answered_unseen_masked(self._boundaries.since_last_boundary(history))
        fixed = self.view.fixed_tokens(request.system_message, request.tools)
        masked, plan = self.mask(recent, fixed)
        marker = None
        if plan.event:
            marker = {
                "masked_outputs": plan.masked,
                "tokens_before": plan.tokens_before,
                "tokens_after": plan.tokens_after,
            }
            self.emit({"type": "masking", **marker})
        view = self.view.build(masked, request.system_message, request.tools, since_boundary=True)
        if not plan.masked_tokens:  # nothing hidden: the state is passed on as it is
            return request.override(messages=view.messages), marker  # type: ignore[arg-type]
        # The compaction unit distils what masking hid once it adds up (provider tokens).
        state: Any = {
            **request.state,
            MASKED_TOKENS_KEY: math.ceil(plan.masked_tokens * plan.scale),
        }
        return request.override(messages=view.messages, state=state), marker  # type: ignore[arg-type]

    def wrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], ModelResponse],
    ) -> ModelResponse | AIMessage | ExtendedModelResponse:
        """Send the view of the history, old tool outputs masked (the state keeps them)."""
        masked, marker = self._apply(request)
        return with_masking_marker(handler(masked), marker)

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse | AIMessage | ExtendedModelResponse:
        """Async :meth:`wrap_model_call`."""
        masked, marker = self._apply(request)
        return with_masking_marker(await handler(masked), marker)


def with_masking_marker(
    result: ModelResponse | AIMessage | ExtendedModelResponse, marker: dict[str, int] | None
) -> ModelResponse | AIMessage | ExtendedModelResponse:
    """``result`` with ``marker`` in the reply's ``response_metadata`` (under
    :data:`MASKING_MARKER_KEY`), so the stored reply says the prompt it answered was masked.

    The marker lives where the provider never reads it (``response_metadata`` is not sent
    back), and with the reply, so a session's chart shows its masking events after a
    restart or in another front end. A result without an AI reply is returned as it is.
    """
    if marker is None:
        return result

    def mark(messages: list[Any]) -> list[Any]:
        for i in range(len(messages) - 1, -1, -1):
            msg = messages[i]
            if isinstance(msg, AIMessage):
                meta = {**msg.response_metadata, MASKING_MARKER_KEY: marker}
                return [
                    *messages[:i],
                    msg.model_copy(update={"response_metadata": meta}),
                    *messages[i + 1 :],
                ]
        return messages

    if isinstance(result, AIMessage):
        return mark([result])[0]  # type: ignore[no-any-return]
    if isinstance(result, ModelResponse):
        return ModelResponse(
            result=mark(result.result), structured_response=result.structured_response
        )
    update = result.command.update if result.command is not None else None
    if isinstance(update, dict) and update.get("messages"):
        command: Command[Any] = Command(
            update={**update, "messages": mark(list(update["messages"]))}
        )
        return ExtendedModelResponse(model_response=result.model_response, command=command)
    inner = with_masking_marker(result.model_response, marker)
    assert isinstance(inner, ModelResponse)
    return ExtendedModelResponse(model_response=inner, command=result.command)
