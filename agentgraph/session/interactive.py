"""What an interactive front end (the REPL) asks of the session beyond running turns.

A resumed session's last messages, the skills to complete, the answers to approval
questions, and the figures of the status lines (context used, a turn's usage, the
tokens streamed so far). The front end renders what these return; the lower layers
they reach stay behind this module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage

from agentgraph.capabilities.recall.search import message_role
from agentgraph.capabilities.skills import catalog_for
from agentgraph.capabilities.tools.todos import format_todos
from agentgraph.context.report import format_tokens, status_line
from agentgraph.protocol.events import Todos
from agentgraph.security.approvals import bound_answer, is_approved

if TYPE_CHECKING:
    from agentgraph.session.agent import Agent, TurnResult

__all__ = [
    "ApprovalAnswers",
    "MessagePreview",
    "answer_approvals",
    "context_status",
    "recent_messages",
    "skill_names",
    "streamed_tokens_text",
    "todo_list_text",
    "turn_usage_text",
]

# Labels of a resumed session's preview, by message role (other roles show as they are).
PREVIEW_ROLE_LABELS = {"user": "you", "assistant": "agent"}


@dataclass(frozen=True)
class MessagePreview:
    """One line of a resumed session's preview.

    Attributes:
        label: Who wrote it (``you``, ``agent``, ``tool run_bash``, ``summary``…).
        text: Its text on one line, cut at the preview's length.
    """

    label: str
    text: str


def recent_messages(
    agent: Agent, thread_id: str, count: int, max_chars: int
) -> tuple[int, list[MessagePreview]]:
    """The session's message count and its last ``count`` messages, one line each.

    A summary, a re-read file or a resume note is stored as a user message but is not
    what the user typed: it is labelled by its kind.

    Args:
        agent: The agent holding the session.
        thread_id: The session.
        count: How many of the last messages.
        max_chars: Longest text of a line (longer ones end with ``…``).
    """
    messages = agent.messages(thread_id)
    rows: list[MessagePreview] = []
    for msg in messages[-count:]:
        text = " ".join(msg.text.split())
        if len(text) > max_chars:
            text = text[: max_chars - 1] + "…"
        role = message_role(msg)
        if isinstance(msg, AIMessage) and msg.tool_calls:
            text = text or "calls " + ", ".join(c["name"] for c in msg.tool_calls)
        rows.append(MessagePreview(PREVIEW_ROLE_LABELS.get(role, role), text))
    return len(messages), rows


def skill_names(home: Path, workspace: Path) -> list[str]:
    """The skills visible from ``workspace``, found afresh (one added since the last
    turn is listed at once)."""
    return list(catalog_for(home, workspace).skills)


@dataclass(frozen=True)
class ApprovalAnswers:
    """The user's answers to a turn's approval questions.

    Attributes:
        answers: Interrupt id -> the answer, bound to the call it is for (resumes the
            graph with it).
        approved_diffs: Tool call id -> the diff its question showed, for the edits the
            user approved (the same diff need not be shown again when the edit reports
            it).
    """

    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    approved_diffs: dict[str, str] = field(default_factory=dict)


def answer_approvals(
    pending: Sequence[Mapping[str, Any]], ask: Callable[[Mapping[str, Any]], Any]
) -> ApprovalAnswers:
    """Ask each pending approval question, in order, and bind each answer to its call.

    An answer that names its call is refused by the tools node when it reaches another
    call's question (what was allowed changed meanwhile).

    Args:
        pending: The ``approval`` questions the turn stopped at.
        ask: Asks one question; returns the user's answer (``"y"``, ``"a"``, a bool…).
    """
    answers = {str(q["id"]): bound_answer(q, ask(q)) for q in pending}
    approved_diffs = {
        str(q.get("tool_call_id")): str(q["diff"])
        for q in pending
        if q.get("diff") and is_approved(answers[str(q["id"])])
    }
    return ApprovalAnswers(answers, approved_diffs)


def context_status(agent: Agent, thread_id: str) -> tuple[str, str]:
    """``("12.3k / 100k tokens (12%)", "ok")``: the session's context used, and its
    level (``ok``, ``notice``, ``warn``, ``compact``)."""
    return status_line(agent.context_report(thread_id))


def turn_usage_text(result: TurnResult | None) -> str:
    """``1.2k in · 45 out · 1k cached · $0.0031``: what the turn used (cached tokens and
    cost only when the result carries them); ``""`` without a result."""
    if result is None:
        return ""
    parts = [
        f"{format_tokens(result.input_tokens)} in",
        f"{format_tokens(result.output_tokens)} out",
    ]
    cached = int(getattr(result, "cached_input_tokens", 0) or 0)
    if cached:
        parts.append(f"{format_tokens(cached)} cached")
    cost = getattr(result, "cost_usd", None)
    if cost is not None:
        parts.append(f"${float(cost):.4f}")
    return " · ".join(parts)


def streamed_tokens_text(tokens: int) -> str:
    """``1.2k tokens``: what a turn's replies have streamed so far; ``""`` for none."""
    return f"{format_tokens(tokens)} tokens" if tokens else ""


def todo_list_text(event: Todos) -> str:
    """The task list of a ``todos`` event, as the model sees it (a count summary line,
    then one ``[ ]``/``[~]``/``[x]`` line per task)."""
    return format_todos(event.todos)
