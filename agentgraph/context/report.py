"""What the user sees about the context: a JSON-ready report and its rendering.

``context_report`` sizes the prompt the next model call would send (system
prompt + tool schemas + messages), breaks it down by category and names the
largest messages; ``render_context`` and ``status_line`` turn it into text
(the CLI adds colours).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import BaseTool

from agentgraph.context.compaction import carried_scale
from agentgraph.context.tokens import TokenCounter, anchored_prompt_tokens
from agentgraph.context.windows import Budget
from agentgraph.runtime.history.kinds import INTERNAL_KINDS, agentgraph_kind

__all__ = ["CATEGORIES", "context_report", "render_context", "status_line"]

CATEGORIES = (
    "system_prompt",
    "instructions",
    "tool_schemas",
    "user",
    "assistant",
    "tool_results",
    "summaries",
    "files_reinjected",
)
LARGEST_MESSAGES_SHOWN = 5
PREVIEW_MAX_CHARS = 60
BAR_MIN_WIDTH = 10

# The progress ledger is counted with the summaries it follows.
_KIND_CATEGORY = {
    "summary": "summaries",
    "ledger": "summaries",
    "reinjected_file": "files_reinjected",
}
# A reported total's difference from the categories is shown from this size on (a
# token or two of reply priming is not news).
UNATTRIBUTED_MIN_TOKENS = 20
UNATTRIBUTED_MIN_FRACTION = 0.01
_SOURCE_TEXT = {
    "exact": "exact (local tokenizer)",
    "reported": "provider-reported (last response's usage + exact/estimated count since)",
    "estimate": "estimated (calibrated, about ±10%)",
}
_CATEGORY_TEXT = {
    "system_prompt": "system prompt",
    "instructions": "AGENTS.md",
    "tool_schemas": "tool schemas",
    "user": "user messages",
    "assistant": "assistant messages",
    "tool_results": "tool results",
    "summaries": "summaries",
    "files_reinjected": "re-injected files",
}


def _category(msg: BaseMessage) -> str:
    kind = agentgraph_kind(msg)
    if kind in _KIND_CATEGORY:
        return _KIND_CATEGORY[kind]
    if isinstance(msg, SystemMessage):
        return "system_prompt"
    if isinstance(msg, AIMessage):
        return "assistant"
    if isinstance(msg, ToolMessage) or msg.type == "function":
        return "tool_results"
    return "user"


def _role(msg: BaseMessage) -> str:
    return {"human": "user", "ai": "assistant"}.get(msg.type, msg.type)


def _preview(msg: BaseMessage) -> str:
    text = str(msg.text) if isinstance(msg.content, (str, list)) else str(msg.content)
    if not text and isinstance(msg, AIMessage) and msg.tool_calls:
        text = ", ".join(f"{call['name']}({call['args']})" for call in msg.tool_calls)
    text = " ".join(text.split())
    if len(text) > PREVIEW_MAX_CHARS:
        text = text[: PREVIEW_MAX_CHARS - 1] + "…"
    return text


def context_report(
    messages: Sequence[BaseMessage],
    *,
    system: Sequence[SystemMessage],
    tools: Sequence[BaseTool | dict[str, Any]],
    counter: TokenCounter,
    budget: Budget,
    instructions: str = "",
) -> dict[str, Any]:
    """Size and composition of the prompt the next model call would send.

    Messages of internal kinds (compact boundaries, snapshots, notices) are
    never sent and are left out. When an assistant message carries the
    provider's usage, the total is anchored on it (source ``"reported"``).

    Args:
        messages: The conversation history (as stored).
        system: System messages prepended to the prompt.
        tools: Tools whose schemas are sent.
        counter: Token counter for the model.
        budget: The model's budget.
        instructions: The project-instructions section inside the system prompt; its
            tokens are shown as their own category (and not again as system prompt).

    Returns:
        A JSON-ready dict: ``tokens``, ``budget`` (usable tokens), ``window``,
        ``source``, ``percent`` (of budget), ``level``, ``by_category``,
        ``unattributed`` (with a reported or scaled total, the tokens no category
        holds — negative when the prompt sent held fewer; else None), ``scale`` (the
        provider/estimate ratio a compaction recorded, when the total is our estimate
        scaled by it; else None), ``largest`` (index into ``messages``, role, tokens,
        preview) and ``notice``.
    """
    by_category = dict.fromkeys(CATEGORIES, 0)
    by_category["system_prompt"] = sum(map(counter.count_message, system))
    if instructions:
        by_category["instructions"] = counter.count_text(instructions)
        by_category["system_prompt"] -= by_category["instructions"]
    by_category["tool_schemas"] = counter.count_tools(tools)
    fixed = sum(by_category[k] for k in ("system_prompt", "instructions", "tool_schemas"))

    sent: list[BaseMessage] = []
    sized: list[tuple[int, int, BaseMessage]] = []
    for index, msg in enumerate(messages):
        if agentgraph_kind(msg) in INTERNAL_KINDS:
            continue
        tokens = counter.count_message(msg)
        by_category[_category(msg)] += tokens
        sent.append(msg)
        sized.append((tokens, index, msg))

    # Without a (trustworthy) usage anchor this is fixed + our own count.
    carried = carried_scale(sent) if counter.source == "estimate" else 1.0
    total, source = anchored_prompt_tokens(sent, counter, fixed_tokens=fixed, carried_scale=carried)
    # Unanchored after a compaction that recorded the provider's ratio: scaled by it.
    scaled = source == "estimate" and carried > 1.0

    largest = [
        {"index": index, "role": _role(msg), "tokens": tokens, "preview": _preview(msg)}
        for tokens, index, msg in heapq.nlargest(
            LARGEST_MESSAGES_SHOWN, sized, key=lambda item: (item[0], -item[1])
        )
    ]
    notices = [n for n in (counter.notice, budget.source_notice) if n]
    return {
        "tokens": total,
        "budget": budget.usable,
        "window": budget.window,
        "source": source,
        "percent": round(budget.percent(total), 1),
        "level": budget.level(total),
        "by_category": by_category,
        # With a reported total: what it holds beyond the categories (a chat template,
        # a tokenizer, reasoning), or less (outputs masked or trimmed from the prompt
        # sent); the categories and this add up to the total.
        "unattributed": (
            total - sum(by_category.values()) if source == "reported" or scaled else None
        ),
        "scale": carried if scaled else None,
        "largest": largest,
        "notice": "; ".join(notices) if notices else None,
    }


def format_tokens(count: int) -> str:
    """Compact token figure: ``950``, ``12.3k``, ``100k``, ``1.05M``."""
    if count < 1_000:
        return str(count)
    if count < 1_000_000:
        text = f"{count / 1_000:.1f}".removesuffix(".0")
        return f"{text}k"
    text = f"{count / 1_000_000:.2f}".rstrip("0").rstrip(".")
    return f"{text}M"


def status_line(report: Mapping[str, Any]) -> tuple[str, str]:
    """Short usage text for the REPL status line, with its level.

    Args:
        report: A :func:`context_report` result.

    Returns:
        ``("12.3k / 100k tokens (12%)", "ok")``; a ``~`` marks an estimate.
    """
    approx = "~" if report["source"] == "estimate" else ""
    text = (
        f"{approx}{format_tokens(report['tokens'])} / {format_tokens(report['budget'])} "
        f"tokens ({report['percent']:.0f}%)"
    )
    return text, str(report["level"])


def _usage_text(usage: Mapping[str, Any]) -> str:
    from agentgraph.providers.pricing import usage_line

    return usage_line(
        int(usage.get("input_tokens") or 0),
        int(usage.get("output_tokens") or 0),
        int(usage.get("cached_input_tokens") or 0),
        usage.get("cost_usd"),
    )


def render_context(report: Mapping[str, Any], width: int = 40) -> str:
    """Plain-text view of a context report (the CLI adds colours).

    Args:
        report: A :func:`context_report` result.
        width: Width of the usage bar in characters.

    Returns:
        Multi-line text: usage bar, source, breakdown, largest messages.
    """
    width = max(width, BAR_MIN_WIDTH)
    used, budget = int(report["tokens"]), int(report["budget"])
    filled = min(width, round(width * used / budget)) if budget > 0 else width
    bar = "█" * filled + "░" * (width - filled)
    lines = [
        f"Context  {format_tokens(used)} / {format_tokens(budget)} tokens "
        f"({report['percent']:.1f}% of budget; window {format_tokens(report['window'])})",
        f"[{bar}]  {report['level']}",
        f"Count: {_SOURCE_TEXT.get(report['source'], report['source'])}",
    ]
    if report.get("scale"):
        lines[-1] += (
            f", ×{report['scale']:.2f}: how much more the provider counted than we did "
            "at the last compaction"
        )
    if report.get("notice"):
        lines.append(f"Note: {report['notice']}")
    if report.get("usage"):
        cost = "" if report["usage"].get("cost_usd") is not None else " (no price for this model)"
        lines.append(f"Session usage: {_usage_text(report['usage'])}{cost}")
    lines.append("By category:")
    for name in CATEGORIES:
        value = int(report["by_category"].get(name, 0))
        lines.append(f"  {_CATEGORY_TEXT[name]:<20} {format_tokens(value):>7}")
    unattributed = int(report.get("unattributed") or 0)
    if abs(unattributed) >= max(UNATTRIBUTED_MIN_TOKENS, used * UNATTRIBUTED_MIN_FRACTION):
        figure = ("+" if unattributed > 0 else "-") + format_tokens(abs(unattributed))
        why = (
            "the provider's count beyond these (its chat template, tokenizer, reasoning)"
            if unattributed > 0
            else "the prompt sent held less than these (outputs masked or trimmed)"
        )
        lines.append(f"  {'not itemized':<20} {figure:>7}  {why}")
    if report["largest"]:
        lines.append("Largest messages:")
        for item in report["largest"]:
            lines.append(
                f"  #{item['index']:<5} {item['role']:<9} {format_tokens(item['tokens']):>7}  "
                f"{item['preview']}"
            )
    return "\n".join(lines)
