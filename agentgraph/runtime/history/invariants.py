"""The rule every list of messages sent to a model must satisfy, as a check.

* an assistant message with tool calls is followed immediately by exactly one
  tool result for each of its call ids, and by nothing else until all are
  answered;
* no tool result appears anywhere else;
* the history starts with the system message(s), then a user message;
* the latest user request is never dropped.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage

from agentgraph.runtime.history.calls import message_calls


def _describe(i: int, msg: BaseMessage) -> str:
    ident = f", id={msg.id!r}" if msg.id else ""
    return f"message {i} ({msg.type}{ident})"


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
        for cid, name in message_calls(msg):
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
        calls = message_calls(msg)
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
