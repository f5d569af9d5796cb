"""Repairs of the tool-call pairing: unanswered calls, orphans, duplicates.

Every function is pure: inputs are never mutated (changed messages are
``model_copy`` copies) and untouched messages are passed through as the same
objects.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from agentgraph.runtime.history.calls import is_empty_content, message_calls, without_calls
from agentgraph.runtime.history.kinds import (
    AGENTGRAPH_KEY,
    SYNTHETIC_ID_PREFIX,
    SYNTHETIC_REASON_INTERRUPTED,
    SYNTHETIC_RESULT_KIND,
    SYNTHETIC_RESULT_TEMPLATE,
)
from agentgraph.runtime.tool_ids import unique_call_ids


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
    """Repair the pairing of tool calls and results, reporting what was repaired.

    * adds a synthetic result (:func:`make_synthetic_result`) for each
      unanswered call, right after the results already in place, except calls
      in ``pending_call_ids``;
    * drops results whose id matches no call (orphans);
    * moves results that are out of place to directly after their call
      (results already in place first, then the others in call order);
    * drops duplicate results (the first is kept);
    * gives a call whose id is empty, repeats in its message or was used by an
      earlier call a fresh id, and the results that follow it the same id
      (matched in call order, see :func:`agentgraph.runtime.tool_ids.unique_call_ids`);
      the provider's id is kept in the message's metadata;
    * drops messages whose message id was already used (the first is kept).

    Removing a call removes its output. The start-with-a-user-message rule is
    not handled here (see :func:`agentgraph.runtime.history.trim.truncate_messages_safely`).
    Repairing twice changes nothing more than repairing once.

    Args:
        messages: A history.
        pending_call_ids: Calls waiting on a LangGraph interrupt: no synthetic
            result is added for them.

    Returns:
        The repaired history (untouched messages are the same objects, changed
        assistant messages are copies) and a :class:`RepairReport`.
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
        calls = message_calls(msg)
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
                if not keep and is_empty_content(msg.content):
                    dropped_ai += 1
                    continue
                msg = without_calls(msg, keep)
                calls = message_calls(msg)
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
