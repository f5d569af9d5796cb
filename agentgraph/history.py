"""History that no provider can reject.

The rule every list of messages sent to a model must satisfy:

* an assistant message with tool calls is followed immediately by exactly one
  tool result for each of its call ids, and by nothing else until all are
  answered;
* no tool result appears anywhere else;
* the history starts with the system message(s), then a user message;
* the latest user request is never dropped.

The state keeps the full history; :func:`build_prompt_view` derives the list the
model sees. Every function here is pure: inputs are never mutated (changed
messages are ``model_copy`` copies) and untouched messages are passed through as
the same objects.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from agentgraph.config import MAX_MESSAGE_HISTORY_DEFAULT
from agentgraph.tool_ids import unique_call_ids

__all__ = [
    "AGENTGRAPH_KEY",
    "INTERNAL_KINDS",
    "MAX_MESSAGE_HISTORY_DEFAULT",
    "NON_REQUEST_KINDS",
    "SYNTHETIC_RESULT_KIND",
    "PromptView",
    "RepairReport",
    "TokenCounter",
    "TrimResult",
    "agentgraph_kind",
    "build_prompt_view",
    "clean_message_history",
    "group_messages",
    "is_user_request",
    "latest_user_request_index",
    "make_synthetic_result",
    "normalize",
    "normalize_with_report",
    "trim_to_budget",
    "truncate_messages_safely",
    "validate_history",
]

AGENTGRAPH_KEY = "agentgraph"
"""Key in ``additional_kwargs`` holding agentgraph's marker dict (``{"kind": ...}``)."""

INTERNAL_KINDS = frozenset({"compact_boundary", "snapshot", "notice"})
"""Marker kinds that are records for agentgraph only and never reach the model."""

NON_REQUEST_KINDS = INTERNAL_KINDS | frozenset({"summary", "reinjected_file", "resume"})
"""Kinds of HumanMessage that carry context, not a request typed by the user."""

SYNTHETIC_RESULT_KIND = "synthetic_result"
SYNTHETIC_RESULT_TEMPLATE = "aborted: no result was recorded for this call ({reason})"
SYNTHETIC_REASON_INTERRUPTED = "interrupted"
# Deterministic ids: rebuilding the view twice yields equal messages, and a
# synthetic result persisted into the state is replaced, not duplicated, by
# LangGraph's add_messages reducer.
SYNTHETIC_ID_PREFIX = "agentgraph-synthetic-"

TokenCounter = Callable[[Sequence[BaseMessage]], int]
"""Counts the tokens of a list of messages (called here with one message at a time)."""


# --------------------------------------------------------------------------- markers


def agentgraph_kind(msg: BaseMessage) -> str | None:
    """Return the agentgraph marker kind of a message.

    Args:
        msg: Any message.

    Returns:
        ``msg.additional_kwargs["agentgraph"]["kind"]`` when it is a string,
        else ``None`` (an ordinary message).
    """
    meta = msg.additional_kwargs.get(AGENTGRAPH_KEY)
    if meta is None:  # the common case; isinstance against an ABC is slow
        return None
    if isinstance(meta, Mapping):
        kind = meta.get("kind")
        if isinstance(kind, str):
            return kind
    return None


def is_user_request(msg: BaseMessage) -> bool:
    """Whether ``msg`` is a request from the user (not a summary or re-injected file).

    Args:
        msg: Any message.

    Returns:
        True for a HumanMessage whose kind is not in :data:`NON_REQUEST_KINDS`.
    """
    return isinstance(msg, HumanMessage) and agentgraph_kind(msg) not in NON_REQUEST_KINDS


def latest_user_request_index(messages: Sequence[BaseMessage]) -> int | None:
    """Index of the latest user request, the message that must never be dropped.

    Args:
        messages: A history.

    Returns:
        The index of the last :func:`is_user_request` message; failing that, of
        the last HumanMessage of any kind (e.g. a compaction summary); ``None``
        when there is no HumanMessage at all.
    """
    last_human: int | None = None
    for i in range(len(messages) - 1, -1, -1):
        msg = messages[i]
        if isinstance(msg, HumanMessage):
            if is_user_request(msg):
                return i
            if last_human is None:
                last_human = i
    return last_human


def make_synthetic_result(
    call_id: str, name: str, reason: str = SYNTHETIC_REASON_INTERRUPTED
) -> ToolMessage:
    """Build the error result that answers a tool call which never got one.

    Args:
        call_id: The unanswered call's id.
        name: The called tool's name.
        reason: Why no result exists, shown to the model.

    Returns:
        A ``status="error"`` ToolMessage marked with kind ``"synthetic_result"``.
    """
    if reason == SYNTHETIC_REASON_INTERRUPTED:
        # Copying a prototype skips pydantic validation (~5x faster): a long
        # history can need hundreds of synthetic results per model call.
        return _SYNTHETIC_PROTOTYPE.model_copy(
            update={
                "tool_call_id": call_id,
                "name": name or None,
                "id": SYNTHETIC_ID_PREFIX + call_id,
                "additional_kwargs": {AGENTGRAPH_KEY: {"kind": SYNTHETIC_RESULT_KIND}},
            }
        )
    return ToolMessage(
        content=SYNTHETIC_RESULT_TEMPLATE.format(reason=reason),
        tool_call_id=call_id,
        name=name or None,
        status="error",
        id=SYNTHETIC_ID_PREFIX + call_id,
        additional_kwargs={AGENTGRAPH_KEY: {"kind": SYNTHETIC_RESULT_KIND}},
    )


_SYNTHETIC_PROTOTYPE = ToolMessage(
    content=SYNTHETIC_RESULT_TEMPLATE.format(reason=SYNTHETIC_REASON_INTERRUPTED),
    tool_call_id="prototype",
    status="error",
)


# --------------------------------------------------------------------------- calls


_NO_CALLS: list[tuple[str, str]] = []


def _calls(msg: BaseMessage) -> list[tuple[str, str]]:
    """``(id, name)`` of every call of an assistant message, in order.

    Invalid tool calls count: langchain-openai sends them as tool calls, so the
    provider requires a result for them too. A missing id becomes ``""``.
    The returned list must not be mutated (it may be shared).
    """
    cls = type(msg)
    # Exact class checks first: this runs several times per message per model
    # call, and isinstance on pydantic message classes is comparatively slow.
    if cls is not AIMessage and (
        cls is ToolMessage
        or cls is HumanMessage
        or cls is SystemMessage
        or not isinstance(msg, AIMessage)
    ):
        return _NO_CALLS
    tool_calls = msg.tool_calls  # type: ignore[attr-defined]
    invalid = msg.invalid_tool_calls  # type: ignore[attr-defined]
    if not tool_calls and not invalid:
        return _NO_CALLS
    out = [(tc.get("id") or "", tc.get("name") or "") for tc in tool_calls]
    if invalid:
        out.extend((tc.get("id") or "", tc.get("name") or "") for tc in invalid)
    return out


def _is_empty_content(content: Any) -> bool:
    if isinstance(content, str):
        return not content.strip()
    return not content


def _is_blank_answer(msg: BaseMessage) -> bool:
    """An assistant message with no tool calls and no text (a model's empty answer).

    Strict providers reject such a turn anywhere but at the very end, so a single
    empty answer stored in the history would make every later request fail.
    """
    cls = type(msg)
    if cls is not AIMessage and (
        cls is HumanMessage or cls is ToolMessage or not isinstance(msg, AIMessage)
    ):
        return False
    if _calls(msg) or msg.additional_kwargs.get("tool_calls"):
        return False
    if msg.additional_kwargs.get("function_call"):
        return False
    content = msg.content
    if isinstance(content, str):
        return not content.strip()
    for part in content:
        if isinstance(part, str):
            if part.strip():
                return False
        elif not (
            isinstance(part, Mapping)
            and part.get("type") == "text"
            and not str(part.get("text", "")).strip()
        ):
            return False
    return True


def _without_calls(msg: AIMessage, keep: set[str]) -> AIMessage:
    """Copy of ``msg`` keeping only the calls whose id is in ``keep``.

    The raw ``additional_kwargs["tool_calls"]`` are filtered too: langchain-openai
    falls back to them when ``tool_calls`` is empty, and deserialization rebuilds
    ``tool_calls`` from them.
    """
    update: dict[str, Any] = {
        "tool_calls": [tc for tc in msg.tool_calls if tc.get("id") in keep],
        "invalid_tool_calls": [tc for tc in msg.invalid_tool_calls if tc.get("id") in keep],
    }
    raw = msg.additional_kwargs.get("tool_calls")
    if raw is not None:
        kwargs = dict(msg.additional_kwargs)
        kept_raw = [tc for tc in raw if isinstance(tc, Mapping) and tc.get("id") in keep]
        if kept_raw:
            kwargs["tool_calls"] = kept_raw
        else:
            del kwargs["tool_calls"]
        update["additional_kwargs"] = kwargs
    return msg.model_copy(update=update)


def _describe(i: int, msg: BaseMessage) -> str:
    ident = f", id={msg.id!r}" if msg.id else ""
    return f"message {i} ({msg.type}{ident})"


# --------------------------------------------------------------------------- groups


def group_messages(messages: Sequence[BaseMessage]) -> list[list[BaseMessage]]:
    """Split a history into the units a cut must keep whole.

    A group is an assistant message with tool calls plus the results of those
    calls that directly follow it (each call id once); any other message is a
    group of its own. Concatenating the groups gives back ``messages``.

    Args:
        messages: A history.

    Returns:
        The groups, in order.
    """
    groups: list[list[BaseMessage]] = []
    n = len(messages)
    i = 0
    while i < n:
        msg = messages[i]
        group = [msg]
        i += 1
        open_ids = {cid for cid, _ in _calls(msg)}
        while open_ids and i < n:
            nxt = messages[i]
            if not isinstance(nxt, ToolMessage) or nxt.tool_call_id not in open_ids:
                break
            open_ids.discard(nxt.tool_call_id)
            group.append(nxt)
            i += 1
        groups.append(group)
    return groups


# --------------------------------------------------------------------------- validation


def validate_history(messages: Sequence[BaseMessage]) -> list[str]:
    """List the ways ``messages`` breaks the rule (see the module docstring).

    Also reported: empty tool call ids, duplicate message ids, a tool call id
    used twice in the history, duplicate results, results with no call, and
    results whose call is elsewhere.

    Args:
        messages: The list about to be sent to a model.

    Returns:
        Human-readable violations; an empty list means the history is valid.
    """
    problems: list[str] = []
    n = len(messages)
    if n == 0:
        return ["history is empty: it must contain a user message"]

    first_non_system = next(
        (i for i, m in enumerate(messages) if not isinstance(m, SystemMessage)), None
    )
    if first_non_system is None or not any(isinstance(m, HumanMessage) for m in messages):
        problems.append("history has no user message")
    elif not isinstance(messages[first_non_system], HumanMessage):
        problems.append(
            f"{_describe(first_non_system, messages[first_non_system])}: after the system "
            "message(s) the history must start with a user message"
        )

    seen_msg_ids: dict[str, int] = {}
    call_owner: dict[str, int] = {}
    for i, msg in enumerate(messages):
        if msg.id:
            if msg.id in seen_msg_ids:
                problems.append(
                    f"{_describe(i, msg)}: duplicate message id (first at message "
                    f"{seen_msg_ids[msg.id]})"
                )
            else:
                seen_msg_ids[msg.id] = i
        for cid, name in _calls(msg):
            if not cid:
                problems.append(f"{_describe(i, msg)}: tool call {name!r} has an empty id")
            elif cid in call_owner:
                problems.append(
                    f"{_describe(i, msg)}: tool call id {cid!r} already used by message "
                    f"{call_owner[cid]}"
                )
            else:
                call_owner[cid] = i

    answered: set[str] = set()
    i = 0
    while i < n:
        msg = messages[i]
        calls = _calls(msg)
        if calls:
            open_ids = {cid for cid, _ in calls if cid}
            j = i + 1
            while open_ids and j < n:
                nxt = messages[j]
                if not isinstance(nxt, ToolMessage) or nxt.tool_call_id not in open_ids:
                    break
                open_ids.discard(nxt.tool_call_id)
                answered.add(nxt.tool_call_id)
                j += 1
            if open_ids:
                where = f"before {_describe(j, messages[j])}" if j < n else "at the end"
                missing = [cid for cid, _ in calls if cid in open_ids]
                problems.append(
                    f"{_describe(i, msg)}: tool call(s) {missing} have no result directly "
                    f"after it ({where})"
                )
            i = j
            continue
        if isinstance(msg, ToolMessage):
            cid = msg.tool_call_id
            if not cid:
                problems.append(f"{_describe(i, msg)}: tool result with an empty tool_call_id")
            elif cid not in call_owner:
                problems.append(f"{_describe(i, msg)}: tool result {cid!r} matches no tool call")
            elif cid in answered:
                problems.append(f"{_describe(i, msg)}: duplicate tool result for {cid!r}")
            else:
                problems.append(
                    f"{_describe(i, msg)}: tool result {cid!r} is not directly after its call "
                    f"(message {call_owner[cid]})"
                )
                answered.add(cid)
        i += 1
    return problems


# --------------------------------------------------------------------------- repair


def clean_message_history(
    messages: Sequence[BaseMessage], pending_call_ids: Collection[str] = ()
) -> list[BaseMessage]:
    """Answer every tool call that has no result anywhere in the history.

    A call left unanswered (user interrupt, killed process, cancellation) gets a
    synthetic error result (:func:`make_synthetic_result`) placed right after
    the existing results of its assistant message. The assistant message, its
    text and its answered calls are always kept. Results that exist but are out
    of place are left for :func:`normalize`.

    Args:
        messages: A history.
        pending_call_ids: Calls waiting on a LangGraph interrupt; left alone.

    Returns:
        A new list: the input messages, same objects, plus synthetic results.
    """
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    pending = set(pending_call_ids)
    out: list[BaseMessage] = []
    n = len(messages)
    i = 0
    while i < n:
        msg = messages[i]
        out.append(msg)
        i += 1
        calls = _calls(msg)
        if not calls:
            continue
        own = {cid for cid, _ in calls}
        while i < n:
            nxt = messages[i]
            if not isinstance(nxt, ToolMessage) or nxt.tool_call_id not in own:
                break
            out.append(nxt)
            i += 1
        for cid, name in calls:
            if cid and cid not in answered and cid not in pending:
                out.append(make_synthetic_result(cid, name))
                answered.add(cid)
    return out


@dataclass(frozen=True)
class RepairReport:
    """What :func:`normalize_with_report` changed.

    Attributes:
        synthetic: Synthetic results added for unanswered calls.
        orphans: Results dropped because no call has their id.
        moved: Results moved to directly after their call.
        duplicate_results: Second and later results of one call, dropped.
        duplicate_calls: Calls dropped because their id was already used (or empty).
        duplicate_messages: Messages dropped because their message id was already used.
        dropped_assistant: Assistant messages dropped because nothing was left in them.
        renamed_calls: Calls given a fresh id (empty, repeated or reused provider id).
    """

    synthetic: int = 0
    orphans: int = 0
    moved: int = 0
    duplicate_results: int = 0
    duplicate_calls: int = 0
    duplicate_messages: int = 0
    dropped_assistant: int = 0
    renamed_calls: int = 0

    @property
    def total(self) -> int:
        """Number of repairs of every kind."""
        return (
            self.synthetic
            + self.orphans
            + self.moved
            + self.duplicate_results
            + self.duplicate_calls
            + self.duplicate_messages
            + self.dropped_assistant
            + self.renamed_calls
        )


def normalize_with_report(
    messages: Sequence[BaseMessage], *, pending_call_ids: Collection[str] = ()
) -> tuple[list[BaseMessage], RepairReport]:
    """:func:`normalize`, also reporting what was repaired.

    Args:
        messages: A history.
        pending_call_ids: Calls waiting on a LangGraph interrupt: no synthetic
            result is added for them.

    Returns:
        The normalized history and a :class:`RepairReport`.
    """
    pending = frozenset(pending_call_ids)
    # 0. Histories stored before ids were rewritten at the door (or imported) may
    # repeat a call id: give each call its own id, with its results.
    messages, renamed = unique_call_ids(messages)

    # 1. One message per message id (the first). 2. Each call id belongs to its
    # first call; later uses and empty ids are dropped. Fused in one pass, with
    # each message's calls computed once.
    seen_msg_ids: set[str] = set()
    seen_calls: set[str] = set()
    fixed: list[BaseMessage] = []
    fixed_calls: list[list[tuple[str, str]]] = []
    tool_positions: list[int] = []
    dup_messages = 0
    dup_calls = 0
    dropped_ai = 0
    for msg in messages:
        msg_id = msg.id
        if msg_id:
            if msg_id in seen_msg_ids:
                dup_messages += 1
                continue
            seen_msg_ids.add(msg_id)
        calls = _calls(msg)
        if calls:
            keep: set[str] = set()
            for cid, _ in calls:
                if not cid or cid in seen_calls:
                    dup_calls += 1
                else:
                    seen_calls.add(cid)
                    keep.add(cid)
            if len(keep) < len(calls):
                assert isinstance(msg, AIMessage)
                if not keep and _is_empty_content(msg.content):
                    dropped_ai += 1
                    continue
                msg = _without_calls(msg, keep)
                calls = _calls(msg)
        elif isinstance(msg, ToolMessage):
            tool_positions.append(len(fixed))
        fixed.append(msg)
        fixed_calls.append(calls)

    # 3. The first result of each call wins; results of no call are orphans.
    result_at: dict[str, int] = {}
    orphans = 0
    dup_results = 0
    for idx in tool_positions:
        cid = fixed[idx].tool_call_id  # type: ignore[attr-defined]
        if cid not in seen_calls:
            orphans += 1
        elif cid in result_at:
            dup_results += 1
        else:
            result_at[cid] = idx

    # 4. Rebuild: each call's result right after its assistant message. Results
    # already in place keep their order; the others follow in call order.
    is_tool = [False] * len(fixed)
    for idx in tool_positions:
        is_tool[idx] = True
    out: list[BaseMessage] = []
    moved = 0
    synthetic = 0
    n = len(fixed)
    for idx, msg in enumerate(fixed):
        if is_tool[idx]:
            continue
        out.append(msg)
        calls = fixed_calls[idx]
        if not calls:
            continue
        own = {cid for cid, _ in calls}
        done: set[str] = set()
        j = idx + 1
        while j < n and is_tool[j]:
            cid = fixed[j].tool_call_id  # type: ignore[attr-defined]
            if cid in own and result_at.get(cid) == j:
                out.append(fixed[j])
                done.add(cid)
            j += 1
        for cid, name in calls:
            if cid in done:
                continue
            if cid in result_at:
                out.append(fixed[result_at[cid]])
                moved += 1
            elif cid not in pending:
                out.append(make_synthetic_result(cid, name))
                synthetic += 1

    report = RepairReport(
        synthetic=synthetic,
        orphans=orphans,
        moved=moved,
        duplicate_results=dup_results,
        duplicate_calls=dup_calls,
        duplicate_messages=dup_messages,
        dropped_assistant=dropped_ai,
        renamed_calls=renamed,
    )
    return out, report


def normalize(
    messages: Sequence[BaseMessage], *, pending_call_ids: Collection[str] = ()
) -> list[BaseMessage]:
    """Repair the pairing of tool calls and results.

    * adds a synthetic result for each unanswered call (as
      :func:`clean_message_history`), except calls in ``pending_call_ids``;
    * drops results whose id matches no call (orphans);
    * moves results that are out of place to directly after their call
      (results already in place first, then the others in call order);
    * drops duplicate results (the first is kept);
    * gives a call whose id is empty, repeats in its message or was used by an
      earlier call a fresh id, and the results that follow it the same id
      (matched in call order, see :func:`agentgraph.tool_ids.unique_call_ids`);
      the provider's id is kept in the message's metadata;
    * drops messages whose message id was already used (the first is kept).

    Removing a call removes its output. The start-with-a-user-message rule is
    not handled here (see :func:`truncate_messages_safely`).

    Args:
        messages: A history.
        pending_call_ids: Calls waiting on a LangGraph interrupt: no synthetic
            result is added for them.

    Returns:
        A new list; untouched messages are the same objects, changed assistant
        messages are copies. ``normalize(normalize(x)) == normalize(x)``.
    """
    return normalize_with_report(messages, pending_call_ids=pending_call_ids)[0]


# --------------------------------------------------------------------------- cutting


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

    Fixes the 004 design: a tool call is never kept without its results (or the
    reverse) because only whole :func:`group_messages` groups are kept. All
    system messages are kept, at their position relative to the kept messages.
    The current turn (the latest user request and everything after it) is
    always kept, even when longer than the window. The kept part starts with a
    user message: a cut landing on an assistant or tool group moves forward to
    the next user message. With no HumanMessage at all, the start is not
    enforced.

    Args:
        messages: A history, normally already :func:`normalize` d.
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
        messages: A history, normally already :func:`normalize` d.
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


# --------------------------------------------------------------------------- prompt view


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
    window_links.update(cid for m in window for cid, _ in _calls(m))
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
        if _is_blank_answer(msg):
            continue
        if isinstance(msg, SystemMessage):
            stored_system.append(msg)
        else:
            body.append(msg)
    head: list[BaseMessage] = list(system) if system else stored_system

    # normalize answers unanswered calls exactly as clean_message_history does
    # (synthetic results after the results in place), so one pass does both.
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
    :func:`normalize` (which includes :func:`clean_message_history`);
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
