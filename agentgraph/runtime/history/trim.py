"""Cutting a history: the pair-safe count window and the token-budget trim.

Only whole :func:`~agentgraph.history.calls.group_messages` groups are kept, so
a tool call never loses its results (or the reverse); system messages and the
current turn are always kept.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from agentgraph.config import MAX_MESSAGE_HISTORY_DEFAULT
from agentgraph.runtime.history.calls import group_messages
from agentgraph.runtime.history.kinds import latest_user_request_index

TokenCounter = Callable[[Sequence[BaseMessage]], int]
"""Counts the tokens of a list of messages (called here with one message at a time)."""


def _is_system_group(group: Sequence[BaseMessage]) -> bool:
    return isinstance(group[0], SystemMessage)


def _turn_group(groups: Sequence[Sequence[BaseMessage]]) -> int | None:
    """Group holding the latest user request, else the last non-system group."""
    heads = [g[0] for g in groups]
    idx = latest_user_request_index(heads)
    if idx is not None:
        return idx
    for g in range(len(groups) - 1, -1, -1):
        if not _is_system_group(groups[g]):
            return g
    return None


def _advance_to_user(groups: Sequence[Sequence[BaseMessage]], start: int, turn: int) -> int:
    """First group in ``[start, turn]`` that is a user message, else ``start``."""
    for g in range(start, turn + 1):
        if isinstance(groups[g][0], HumanMessage):
            return g
    return start


def _assemble(groups: Sequence[Sequence[BaseMessage]], start: int) -> list[BaseMessage]:
    """System messages before ``start`` (in order), then every group from ``start``."""
    out: list[BaseMessage] = [m for g in groups[:start] if _is_system_group(g) for m in g]
    for g in groups[start:]:
        out.extend(g)
    return out


def _non_system_count(groups: Sequence[Sequence[BaseMessage]]) -> int:
    return sum(len(g) for g in groups if not _is_system_group(g))


def truncate_messages_safely(
    messages: Sequence[BaseMessage], keep_recent: int = MAX_MESSAGE_HISTORY_DEFAULT
) -> list[BaseMessage]:
    """Keep the most recent ``keep_recent`` non-system messages, cutting between groups.

    A tool call is never kept without its results (or the reverse), because only
    whole :func:`group_messages` groups are kept: a provider refuses either half alone. All
    system messages are kept, at their position relative to the kept messages.
    The current turn (the latest user request and everything after it) is
    always kept, even when longer than the window. The kept part starts with a
    user message: a cut landing on an assistant or tool group moves forward to
    the next user message. With no HumanMessage at all, the start is not
    enforced.

    Args:
        messages: A history, normally already repaired
            (:func:`~agentgraph.history.repair.normalize_with_report`).
        keep_recent: Window size in non-system messages (MAX_MESSAGE_HISTORY,
            10-100 in settings; any value >= 0 is accepted here).

    Returns:
        A new list, a subsequence of ``messages`` in the same order.

    Raises:
        ValueError: If ``keep_recent`` is negative.
    """
    if keep_recent < 0:
        raise ValueError(f"keep_recent must be >= 0, got {keep_recent}")
    groups = group_messages(messages)
    turn = _turn_group(groups)
    if turn is None:
        return list(messages)
    count = _non_system_count(groups[turn:])
    start = turn
    for g in range(turn - 1, -1, -1):
        group = groups[g]
        if _is_system_group(group):
            continue
        if count + len(group) > keep_recent:
            break
        count += len(group)
        start = g
    return _assemble(groups, _advance_to_user(groups, start, turn))


@dataclass(frozen=True)
class TrimResult:
    """Outcome of :func:`trim_to_budget`.

    Attributes:
        messages: The kept messages.
        tokens: Their token count (sum of per-group counts).
        overflow: True when the system messages plus the current turn alone
            exceed the budget; they are kept anyway and the caller must shrink
            them (e.g. truncate tool outputs).
        dropped: Number of non-system messages removed.
    """

    messages: list[BaseMessage]
    tokens: int
    overflow: bool
    dropped: int


def trim_to_budget(
    messages: Sequence[BaseMessage], max_tokens: int, counter: TokenCounter
) -> TrimResult:
    """Keep the newest whole groups that fit in ``max_tokens``.

    System messages and the current turn are always kept (unlike
    ``trim_messages(start_on="human")``, which can return only the system
    message); if they alone exceed the budget, ``overflow`` is set. Older groups
    are added newest first while they fit; the kept part then starts at a user
    message, as in :func:`truncate_messages_safely`.

    ``counter`` is called once per group examined (a message, or an assistant
    message with its results), never on groups older than the first one that
    does not fit. Token counts are summed per group.

    Args:
        messages: A history, normally already repaired
            (:func:`~agentgraph.history.repair.normalize_with_report`).
        max_tokens: The budget in tokens.
        counter: Token counter for a list of messages.

    Returns:
        A :class:`TrimResult`.

    Raises:
        ValueError: If ``max_tokens`` is negative.
    """
    if max_tokens < 0:
        raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
    groups = group_messages(messages)

    def group_tokens(group: Sequence[BaseMessage]) -> int:
        return counter(group)

    tokens_of: dict[int, int] = {}
    system_tokens = 0
    for g, group in enumerate(groups):
        if _is_system_group(group):
            tokens_of[g] = group_tokens(group)
            system_tokens += tokens_of[g]
    turn = _turn_group(groups)
    if turn is None:
        return TrimResult(list(messages), system_tokens, system_tokens > max_tokens, 0)

    total = system_tokens
    for g in range(turn, len(groups)):
        if g not in tokens_of:
            tokens_of[g] = group_tokens(groups[g])
            total += tokens_of[g]
    overflow = total > max_tokens
    start = turn
    if not overflow:
        for g in range(turn - 1, -1, -1):
            if _is_system_group(groups[g]):
                continue
            tokens_of[g] = group_tokens(groups[g])
            if total + tokens_of[g] > max_tokens:
                break
            total += tokens_of[g]
            start = g
    user_start = _advance_to_user(groups, start, turn)
    for g in range(start, user_start):
        if not _is_system_group(groups[g]):
            total -= tokens_of[g]
    kept = _assemble(groups, user_start)
    dropped = _non_system_count(groups[:user_start])
    return TrimResult(kept, total, overflow, dropped)
