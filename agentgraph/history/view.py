"""The prompt view: the list the model sees, derived from the full history.

The state keeps the full history; :func:`build_prompt_view` drops internal
records, repairs the pairing, applies the window and the token budget, and
starts at a user message.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from agentgraph.history.calls import is_blank_answer, message_calls
from agentgraph.history.kinds import (
    INTERNAL_KINDS,
    SYNTHETIC_RESULT_KIND,
    agentgraph_kind,
    is_user_request,
)
from agentgraph.history.repair import normalize_with_report
from agentgraph.history.trim import TokenCounter, trim_to_budget, truncate_messages_safely


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
    """

    messages: list[BaseMessage]
    tokens: int
    overflow: bool
    dropped: int
    repaired: int


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


def _build_view(
    messages: Sequence[BaseMessage],
    system: Sequence[SystemMessage],
    keep_recent: int | None,
    max_tokens: int | None,
    counter: TokenCounter,
    pending_call_ids: Collection[str],
) -> PromptView:
    """The prompt view pipeline on a whole list (no window shortcut)."""
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
    if max_tokens is not None:
        result = trim_to_budget(view, max_tokens, counter)
        view, tokens, overflow = result.messages, result.tokens, result.overflow
    else:
        # A window of everything still enforces the start-with-a-user-message rule.
        view = truncate_messages_safely(view, len(view))
        tokens, overflow = sum(counter([m]) for m in view), False
    stored = sum(1 for m in messages if not isinstance(m, SystemMessage))
    sent = sum(
        1
        for m in view[len(head) :]
        if not (m.additional_kwargs and agentgraph_kind(m) == SYNTHETIC_RESULT_KIND)
    )
    return PromptView(view, tokens, overflow, stored - sent, repaired)


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
                    return replace(view, dropped=view.dropped + older)
    return _build_view(messages, system, keep_recent, max_tokens, counter, pending_call_ids)
