"""The prompt view: the list the model sees, derived from the full history.

The state keeps the full history; :func:`build_prompt_view` drops internal
records, repairs the pairing, applies the window and the token budget, and
starts at a user message.
"""

from __future__ import annotations

import operator
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from itertools import islice

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from agentgraph.runtime.history.calls import group_messages, is_blank_answer, message_calls
from agentgraph.runtime.history.kinds import (
    INTERNAL_KINDS,
    SYNTHETIC_RESULT_KIND,
    agentgraph_kind,
    is_user_request,
)
from agentgraph.runtime.history.repair import normalize_with_report
from agentgraph.runtime.history.trim import TokenCounter, trim_to_budget, truncate_messages_safely


@dataclass(frozen=True)
class PromptView:
    """What the model sees, derived from the full history by :func:`build_prompt_view`.

    Attributes:
        messages: The messages to send.
        tokens: Their token count (sum of per-message counts).
        overflow: The system prompt plus the current turn exceed ``max_tokens``.
        dropped: Stored non-system messages that are not sent: cut by the window
            or the budget, internal records, and messages removed by repairs.
        repaired: Repairs of the tool-call pairing (synthetic results added,
            orphans dropped, results moved, duplicates dropped) in the part of
            the history the view was cut from: the recent window when the
            window shortcut applies, else the whole history.
        trimmed: Of ``dropped``, the messages left out because they did not fit
            ``max_tokens`` (older turns).
    """

    messages: list[BaseMessage]
    tokens: int
    overflow: bool
    dropped: int
    repaired: int
    trimmed: int = 0


# A window holding this much more than the budget almost always contains the
# cut, so the shortcut rarely falls back to processing the whole history.
WINDOW_MARGIN_RATIO = 1.25
# Below this many stored messages the whole pipeline is cheaper than looking
# for a window first.
WINDOW_MIN_MESSAGES = 200


def _window_start(
    messages: Sequence[BaseMessage],
    keep_recent: int | None,
    max_tokens: int | None,
    counter: TokenCounter,
) -> int:
    """Start of a recent window expected to contain the view's cut, or 0 for none.

    The window starts at a user request, after at least ``keep_recent`` messages
    or ``max_tokens`` tokens (plus a margin) counted backwards from the end.
    """
    count = 0
    tokens = 0
    reached = False
    for i in range(len(messages) - 1, 0, -1):
        msg = messages[i]
        if isinstance(msg, SystemMessage) or agentgraph_kind(msg) in INTERNAL_KINDS:
            continue
        if reached:
            if is_user_request(msg):
                return i
            continue
        count += 1
        if keep_recent is not None and count > keep_recent * WINDOW_MARGIN_RATIO:
            reached = True
        if max_tokens is not None:
            tokens += counter([msg])
            if tokens > max_tokens * WINDOW_MARGIN_RATIO:
                reached = True
    return 0


def _split_prefix(
    prefix: Sequence[BaseMessage], window: Sequence[BaseMessage]
) -> list[BaseMessage] | None:
    """The prefix's system messages if it can be left out of normalization, else None.

    Normalizing ``prefix + window`` equals normalizing each part separately when
    no message id repeats in the prefix or is shared with the window, and no
    tool call id links the two parts. Conservative: internal records count, and
    a message of an unusual class (e.g. a chunk) makes the answer None.
    """
    window_ids = {m.id for m in window if m.id}
    window_links = {m.tool_call_id for m in window if isinstance(m, ToolMessage)}
    window_links.update(cid for m in window for cid, _ in message_calls(m))
    window_links.discard("")

    # One explicit loop with exact type checks: this runs over every old
    # message on each model call, and isinstance on pydantic models and
    # getattr with a default are several times slower.
    prefix_ids: list[str] = []
    links: set[str] = set()
    systems: list[BaseMessage] = []
    for msg in prefix:
        cls = type(msg)
        if cls is ToolMessage:
            links.add(msg.tool_call_id)  # type: ignore[attr-defined]
        elif cls is AIMessage:
            for tc in msg.tool_calls:  # type: ignore[attr-defined]
                links.add(tc.get("id") or "")
            for itc in msg.invalid_tool_calls:  # type: ignore[attr-defined]
                links.add(itc.get("id") or "")
        elif cls is SystemMessage:
            systems.append(msg)
        elif cls is not HumanMessage:
            return None
        if msg.id:
            prefix_ids.append(msg.id)
    unique_ids = set(prefix_ids)
    if len(unique_ids) != len(prefix_ids) or not unique_ids.isdisjoint(window_ids):
        return None
    if not links.isdisjoint(window_links):
        return None
    return systems


def _sent(messages: Sequence[BaseMessage]) -> int:
    """Messages of a view body that count as sent (synthetic results do not)."""
    return sum(
        1
        for m in messages
        if not (m.additional_kwargs and agentgraph_kind(m) == SYNTHETIC_RESULT_KIND)
    )


def _build_view(
    messages: Sequence[BaseMessage],
    system: Sequence[SystemMessage],
    keep_recent: int | None,
    max_tokens: int | None,
    counter: TokenCounter,
    pending_call_ids: Collection[str],
) -> PromptView:
    """The prompt view pipeline on a whole list (no window shortcut)."""
    view, _whole = _build_view_whole(
        messages, system, keep_recent, max_tokens, counter, pending_call_ids
    )
    return view


def _build_view_whole(
    messages: Sequence[BaseMessage],
    system: Sequence[SystemMessage],
    keep_recent: int | None,
    max_tokens: int | None,
    counter: TokenCounter,
    pending_call_ids: Collection[str],
) -> tuple[PromptView, int | None]:
    """:func:`_build_view`, and the length of its head when the view is whole.

    Whole: nothing was cut by the window or the budget (the view is the head, then the
    whole repaired history); else the second item is None.
    """
    stored_system: list[BaseMessage] = []
    body: list[BaseMessage] = []
    seen_ids: set[str] = set()
    duplicates = 0
    for msg in messages:
        if msg.additional_kwargs and agentgraph_kind(msg) in INTERNAL_KINDS:
            continue
        # Deduplicate before splitting: system messages do not go through normalize.
        if msg.id:
            if msg.id in seen_ids:
                duplicates += 1
                continue
            seen_ids.add(msg.id)
        if is_blank_answer(msg):
            continue
        if isinstance(msg, SystemMessage):
            stored_system.append(msg)
        else:
            body.append(msg)
    head: list[BaseMessage] = list(system) if system else stored_system

    # One repair pass answers unanswered calls (synthetic results after the
    # results in place) and fixes every other pairing fault.
    normalized, report = normalize_with_report(body, pending_call_ids=pending_call_ids)
    repaired = duplicates + report.total

    view = head + normalized
    if keep_recent is not None:
        view = truncate_messages_safely(view, keep_recent)
    trimmed = 0
    if max_tokens is not None:
        result = trim_to_budget(view, max_tokens, counter)
        view, tokens, overflow = result.messages, result.tokens, result.overflow
        trimmed = result.dropped
    else:
        # A window of everything still enforces the start-with-a-user-message rule.
        view = truncate_messages_safely(view, len(view))
        tokens, overflow = sum(counter([m]) for m in view), False
    stored = sum(1 for m in messages if not isinstance(m, SystemMessage))
    sent = _sent(view[len(head) :])
    # Window and trim only ever remove messages: the same length is nothing cut.
    whole = not overflow and len(view) == len(head) + len(normalized)
    built = PromptView(view, tokens, overflow, stored - sent, repaired, trimmed)
    return built, len(head) if whole else None


def build_prompt_view(
    messages: Sequence[BaseMessage],
    *,
    system: Sequence[SystemMessage] = (),
    keep_recent: int | None = None,
    max_tokens: int | None = None,
    counter: TokenCounter,
    pending_call_ids: Collection[str] = (),
) -> PromptView:
    """Derive the list sent to the model from the full history in the state.

    Steps: drop internal records (:data:`INTERNAL_KINDS`); drop messages whose
    id repeats; drop empty assistant answers (no text, no tool calls), which
    strict providers reject; replace the stored system messages by ``system`` at the front
    (when ``system`` is empty, the stored ones are moved to the front instead);
    :func:`~agentgraph.history.repair.normalize_with_report`;
    :func:`truncate_messages_safely` if ``keep_recent``; :func:`trim_to_budget`
    if ``max_tokens``; start at a user message.

    Shortcut, same result: when a window or budget is given, the steps run on a
    recent window starting at a user request, if the older part shares no
    message id or tool call id with it and the cut falls inside it; otherwise
    on the whole history. Long histories thus cost a few set look-ups per old
    message instead of the full repair.

    Args:
        messages: The full history (the state's ``messages``).
        system: The live system prompt.
        keep_recent: Window in non-system messages (MAX_MESSAGE_HISTORY), or None.
        max_tokens: Token budget for the whole view, or None.
        counter: Token counter, called on one message or one group at a time
            (each message is counted at most twice; the production counter
            caches per message).
        pending_call_ids: Calls waiting on a LangGraph interrupt: left unanswered.

    Returns:
        A :class:`PromptView`. Without pending calls and with at least one
        HumanMessage, ``validate_history(view.messages) == []``.
    """
    return _prompt_view(messages, system, keep_recent, max_tokens, counter, pending_call_ids)[0]


def _prompt_view(
    messages: Sequence[BaseMessage],
    system: Sequence[SystemMessage],
    keep_recent: int | None,
    max_tokens: int | None,
    counter: TokenCounter,
    pending_call_ids: Collection[str],
) -> tuple[PromptView, int | None]:
    """:func:`build_prompt_view`, and the length of the view's head when it is whole.

    Whole: built from the whole list with nothing cut (see :func:`_build_view_whole`).
    """
    if len(messages) >= WINDOW_MIN_MESSAGES and (keep_recent is not None or max_tokens is not None):
        k = _window_start(messages, keep_recent, max_tokens, counter)
        if k > 0:
            prefix, window = messages[:k], messages[k:]
            prefix_system = _split_prefix(prefix, window)
            if prefix_system is not None:
                live_prefix_system = [
                    m for m in prefix_system if agentgraph_kind(m) not in INTERNAL_KINDS
                ]
                view = _build_view(
                    [*live_prefix_system, *window],
                    system,
                    keep_recent,
                    max_tokens,
                    counter,
                    pending_call_ids,
                )
                first = messages[k]
                if view.overflow or not any(m is first for m in view.messages):
                    older = len(prefix) - len(prefix_system)
                    return replace(view, dropped=view.dropped + older), None
    return _build_view_whole(messages, system, keep_recent, max_tokens, counter, pending_call_ids)


_PLAIN_CLASSES = frozenset((HumanMessage, AIMessage, ToolMessage, SystemMessage))


def _links(msg: BaseMessage) -> list[str]:
    """Tool call ids ``msg`` calls or answers (empty ids included: they pair too)."""
    ids = [cid for cid, _ in message_calls(msg)]
    if type(msg) is ToolMessage:
        ids.append(msg.tool_call_id)
    return ids


@dataclass(frozen=True)
class _Extendable:
    """A view that holds its whole history, and what extending it needs.

    Attributes:
        inputs: The history the view was built from (the objects themselves).
        system: The live system prompt it was built with.
        keep_recent: Its window.
        max_tokens: Its budget.
        counter: Its token counter.
        pending: Its pending call ids.
        view: The view.
        seen_ids: Message ids of the history's non-internal messages (as deduplicated).
        links: Every tool call id the history or the view calls or answers.
        stored: Non-system messages of the history.
        sent: Messages of the view body that count as sent.
        body: Messages of the view after its head.
    """

    inputs: tuple[BaseMessage, ...]
    system: tuple[SystemMessage, ...]
    keep_recent: int | None
    max_tokens: int
    counter: TokenCounter
    pending: frozenset[str]
    view: PromptView
    seen_ids: frozenset[str]
    links: frozenset[str]
    stored: int
    sent: int
    body: int


def _whole_build(
    messages: Sequence[BaseMessage],
    system: tuple[SystemMessage, ...],
    keep_recent: int | None,
    max_tokens: int,
    counter: TokenCounter,
    pending: frozenset[str],
) -> tuple[PromptView, _Extendable | None]:
    """:func:`build_prompt_view` of ``messages``, extendable when it holds them all."""
    view, head = _prompt_view(messages, system, keep_recent, max_tokens, counter, pending)
    if head is None or head >= len(view.messages) or type(view.messages[head]) is not HumanMessage:
        return view, None
    seen: set[str] = set()
    links: set[str] = set()
    stored = 0
    for msg in messages:
        cls = type(msg)
        if cls not in _PLAIN_CLASSES:
            return view, None
        links.update(_links(msg))
        if cls is not SystemMessage:
            stored += 1
        if msg.id and not (msg.additional_kwargs and agentgraph_kind(msg) in INTERNAL_KINDS):
            seen.add(msg.id)  # system messages too: the dedupe runs before the split
    body = view.messages[head:]
    # A repaired copy (a call renamed or dropped) may differ between the whole build and
    # the window build_prompt_view cuts from a longer list (fresh ids can depend on the
    # position): only views of the stored messages themselves, and synthetic results, are
    # extended.
    stored_ids = {id(m) for m in messages}
    for msg in body:
        if id(msg) not in stored_ids and agentgraph_kind(msg) != SYNTHETIC_RESULT_KIND:
            return view, None
        links.update(_links(msg))
    extendable = _Extendable(
        inputs=tuple(messages),
        system=system,
        keep_recent=keep_recent,
        max_tokens=max_tokens,
        counter=counter,
        pending=pending,
        view=view,
        seen_ids=frozenset(seen),
        links=frozenset(links),
        stored=stored,
        sent=_sent(body),
        body=len(body),
    )
    return replace(view, messages=list(view.messages)), extendable


def extends(items: Sequence[object], prefix: Sequence[object], at: int = 0) -> bool:
    """Whether ``items`` holds the very objects of ``prefix`` from index ``at`` on
    (False when it is too short).

    Compared by identity: messages are never changed in place, so an object seen before
    counts and reads the same, and what was worked out for ``prefix`` holds for that
    part of ``items``.
    """
    return len(items) - at >= len(prefix) and all(
        map(operator.is_, prefix, islice(items, at, None))
    )


def _same_messages(a: Sequence[BaseMessage], b: Sequence[BaseMessage]) -> bool:
    """Equal lists of messages (the live system prompt is rebuilt for every call)."""
    return len(a) == len(b) and all(x is y or x == y for x, y in zip(a, b, strict=True))


# Replies whose reported usage may differ from the last call's (masking restates the
# newest one's at an event) before the view is rebuilt whole instead.
USAGE_SWAPS_MAX = 4


def _swappable(old: BaseMessage, new: BaseMessage) -> bool | None:
    """Whether ``new`` can take ``old``'s place in a view without a rebuild.

    True for a tool result with new content (a masked copy: same id, call, name and
    kind), False for a reply with new usage only (no count changes), None otherwise.
    Neither changes what the repair, the window or the dedupe see.
    """
    cls = type(old)
    if cls is not type(new):
        return None
    if cls is ToolMessage:
        same = (
            old.id == new.id
            and old.tool_call_id == new.tool_call_id  # type: ignore[attr-defined]
            and old.name == new.name
            and agentgraph_kind(old) == agentgraph_kind(new)
        )
        return True if same else None
    if cls is AIMessage and old.model_copy(update={"usage_metadata": new.usage_metadata}) == new:  # type: ignore[attr-defined]
        return False
    return None


def _with_swaps(
    last: _Extendable, prefix: Sequence[BaseMessage], counter: TokenCounter
) -> _Extendable | None:
    """``last`` for ``prefix``, whose messages differ from its history only by swaps.

    A swap (:func:`_swappable`) replaces a message by a copy the view treats alike: the
    view is the same with each copy in its original's place, recounted when contents
    changed. None for any other difference, or when an original is not in the view as
    itself (a repair copied it).
    """
    swaps: dict[int, BaseMessage] = {}
    replies = 0
    recount = False
    for old, new in zip(last.inputs, prefix, strict=True):
        if old is new:
            continue
        kind = _swappable(old, new)
        if kind is None:
            return None
        if not kind:
            replies += 1
            if replies > USAGE_SWAPS_MAX:
                return None
        recount = recount or kind
        swaps[id(old)] = new
    # An object stored twice is in the view once, maybe for the other position.
    if sum(1 for m in last.inputs if id(m) in swaps) != len(swaps):
        return None
    messages = list(last.view.messages)
    found = 0
    for i, msg in enumerate(messages):
        swapped = swaps.get(id(msg))
        if swapped is not None:
            messages[i] = swapped
            found += 1
    if found != len(swaps):
        return None
    view = replace(last.view, messages=messages)
    if recount:
        tokens = sum(counter(group) for group in group_messages(messages))
        if tokens > last.max_tokens:
            return None
        view = replace(view, tokens=tokens)
    return replace(last, inputs=tuple(prefix), view=view)


def _extend(
    last: _Extendable,
    messages: Sequence[BaseMessage],
    system: tuple[SystemMessage, ...],
    keep_recent: int | None,
    max_tokens: int,
    counter: TokenCounter,
    pending: frozenset[str],
) -> _Extendable | None:
    """``last`` extended by the messages after its history, or None when it cannot be.

    Equal to the whole build when: the old history is a prefix of ``messages`` (same
    objects) and the arguments are the same; the new messages are plain, not system
    messages, and share no tool call id with the old history or view (no result moves
    across, no call is renamed for an id used before); their repair renames nothing
    (fresh ids depend on the position in the whole list); and the whole still fits the
    window and the budget, so nothing is cut and the start stays at the old view's
    first user message. The deduplication runs against the old ids. The window
    shortcut of :func:`build_prompt_view` needs no check: without renamed calls (an
    extendable view has none, and new messages may not add any) its window view is a
    suffix of the whole one, and it only keeps that when its cut falls inside the
    window, while nothing of a whole view is cut.
    """
    n = len(last.inputs)
    if (
        len(messages) < n
        or keep_recent != last.keep_recent
        or max_tokens != last.max_tokens
        or counter is not last.counter
        or pending != last.pending
        or not _same_messages(system, last.system)
    ):
        return None
    if not extends(messages, last.inputs):
        patched = _with_swaps(last, messages[:n], counter)
        if patched is None:
            return None
        last = patched
    tail = messages[n:]
    seen = last.seen_ids
    tail_ids: set[str] = set()
    tail_links: set[str] = set()
    body: list[BaseMessage] = []
    duplicates = 0
    for msg in tail:
        cls = type(msg)
        if cls is SystemMessage or cls not in _PLAIN_CLASSES:
            return None
        tail_links.update(_links(msg))
        if msg.additional_kwargs and agentgraph_kind(msg) in INTERNAL_KINDS:
            continue
        if msg.id:
            if msg.id in seen or msg.id in tail_ids:
                duplicates += 1
                continue
            tail_ids.add(msg.id)
        if not is_blank_answer(msg):
            body.append(msg)
    if not last.links.isdisjoint(tail_links):
        return None
    added, report = normalize_with_report(body, pending_call_ids=pending)
    if report.renamed_calls:
        return None
    size = last.body + len(added)
    if keep_recent is not None and size > keep_recent:
        return None
    tokens = last.view.tokens + sum(counter(group) for group in group_messages(added))
    if tokens > max_tokens:
        return None
    # ``added`` links no id beyond ``tail_links``: the repair only drops calls and adds
    # synthetic results for the new calls (renames were refused above).
    stored = last.stored + len(tail)
    sent = last.sent + _sent(added)
    # An equal live system prompt is a new object each call: the view shows this one.
    view = PromptView(
        [*system, *last.view.messages[len(system) :], *added],
        tokens,
        False,
        stored - sent,
        last.view.repaired + duplicates + report.total,
    )
    return replace(
        last,
        inputs=(*last.inputs, *tail),
        system=system,
        view=view,
        seen_ids=seen | tail_ids if tail_ids else seen,
        links=last.links | tail_links if tail_links else last.links,
        stored=stored,
        sent=sent,
        body=size,
    )


class IncrementalPromptView:
    """:func:`build_prompt_view` for a history that grows between calls.

    Every model call of a turn sees the previous call's history plus the reply and its
    tool results. When the previous view held all of its history (nothing cut by the
    window or the budget) and the new messages share no message id or tool call id with
    the old ones, the repair of the whole is the old repair followed by the repair of
    the new messages, and nothing is cut while the total fits: the new view is the old
    one plus the new messages' view, so a call costs its new messages instead of the
    whole history since the last compaction. Anything else (a cut, a compaction, an
    edit, an id shared with the old part, other arguments) is built whole. The result
    always equals :func:`build_prompt_view`'s; a property test checks it.

    Messages are values: a message edited in place rather than replaced is not seen
    (the token counter caches on the same assumption).
    """

    def __init__(self) -> None:
        # Replaced whole, never mutated: another thread reads a consistent one.
        self._last: _Extendable | None = None
        self.extended = 0  # views built by extension (for tests and benches)

    def build(
        self,
        messages: Sequence[BaseMessage],
        *,
        system: Sequence[SystemMessage] = (),
        keep_recent: int | None = None,
        max_tokens: int,
        counter: TokenCounter,
        pending_call_ids: Collection[str] = (),
    ) -> PromptView:
        """The view :func:`build_prompt_view` gives for the same arguments."""
        live = tuple(system)
        pending = frozenset(pending_call_ids)
        last = self._last
        if last is not None:
            extended = _extend(last, messages, live, keep_recent, max_tokens, counter, pending)
            if extended is not None:
                self._last = extended
                self.extended += 1
                return replace(extended.view, messages=list(extended.view.messages))
        view, self._last = _whole_build(messages, live, keep_recent, max_tokens, counter, pending)
        return view
