"""The /context report: totals, categories, anchor, rendering."""

from __future__ import annotations

import math
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from agentgraph.context.report import (
    context_report,
    format_tokens,
    render_context,
    status_line,
)
from agentgraph.context.tokens import REPLY_PRIMING_TOKENS, TokenCounter
from agentgraph.context.windows import Budget

BUDGET = Budget(
    window=128_000,
    reserve=50_000,
    usable=78_000,
    notice_at=58_500,
    warn_at=66_300,
    compact_at=62_400,
)
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a shell command",
            "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
        },
    }
]


def _marked(msg: BaseMessage, kind: str) -> BaseMessage:
    msg.additional_kwargs["agentgraph"] = {"kind": kind}
    return msg


def _conversation() -> list[BaseMessage]:
    return [
        _marked(SystemMessage("compacted here"), "compact_boundary"),
        _marked(HumanMessage("Summary: we refactored the parser. " * 20), "summary"),
        _marked(
            HumanMessage("<file path='a.py'>\n" + "x = 1\n" * 200 + "</file>"), "reinjected_file"
        ),
        HumanMessage("please run the tests"),
        AIMessage("", tool_calls=[{"name": "bash", "args": {"cmd": "pytest"}, "id": "c1"}]),
        ToolMessage("collected 10 items\n" + "tests/test_a.py ....\n" * 50, tool_call_id="c1"),
        AIMessage("All tests pass."),
        _marked(SystemMessage("undo point"), "snapshot"),
    ]


def test_totals_and_categories() -> None:
    counter = TokenCounter("gpt-4o")
    system = [SystemMessage("You are agentgraph, a coding agent.")]
    msgs = _conversation()
    report = context_report(msgs, system=system, tools=TOOLS, counter=counter, budget=BUDGET)

    sent = msgs[1:7]
    cats = report["by_category"]
    assert cats["system_prompt"] == counter.count_message(system[0])
    assert cats["tool_schemas"] == counter.count_tools(TOOLS) > 0
    assert cats["summaries"] == counter.count_message(msgs[1])
    assert cats["files_reinjected"] == counter.count_message(msgs[2])
    assert cats["user"] == counter.count_message(msgs[3])
    assert cats["assistant"] == counter.count_message(msgs[4]) + counter.count_message(msgs[6])
    assert cats["tool_results"] == counter.count_message(msgs[5])
    expected = (
        cats["system_prompt"]
        + cats["tool_schemas"]
        + sum(map(counter.count_message, sent))
        + REPLY_PRIMING_TOKENS
    )
    assert report["tokens"] == expected  # internal kinds are not counted
    assert report["source"] == "exact"
    assert report["budget"] == 78_000 and report["window"] == 128_000
    assert report["percent"] == round(100 * expected / 78_000, 1)
    assert report["level"] == "ok"
    assert report["notice"] is None


def test_largest_messages_point_into_history() -> None:
    counter = TokenCounter("gpt-4o")
    msgs = _conversation()
    report = context_report(msgs, system=[], tools=[], counter=counter, budget=BUDGET)
    largest = report["largest"]
    assert len(largest) == 5
    sizes = [item["tokens"] for item in largest]
    assert sizes == sorted(sizes, reverse=True)
    assert largest[0]["index"] == 2  # the re-injected file, index in the stored list
    assert largest[0]["role"] == "user"
    assert {item["index"] for item in largest}.isdisjoint({0, 7})
    assert all(len(item["preview"]) <= 60 for item in largest)
    tool_call = next(item for item in largest if item["index"] == 4)
    assert "bash" in tool_call["preview"]


def test_reported_usage_anchors_the_total() -> None:
    counter = TokenCounter("gpt-4o")
    usage = {"input_tokens": 900, "output_tokens": 40, "total_tokens": 940}
    tail = HumanMessage("and now?")
    msgs = [
        HumanMessage("hello " * 800),
        AIMessage("done", usage_metadata=usage),  # type: ignore[arg-type]
        tail,
    ]
    report = context_report(msgs, system=[], tools=[], counter=counter, budget=BUDGET)
    assert report["source"] == "reported"
    assert report["tokens"] == 940 + counter.count_message(tail)
    # The breakdown adds up to the reported total: the rest is the provider's own.
    assert sum(report["by_category"].values()) + report["unattributed"] == report["tokens"]
    assert report["unattributed"] == 940 - counter.count_messages(msgs[:2]) + REPLY_PRIMING_TOKENS
    assert "not itemized" in render_context(report)


def test_a_provider_that_counts_more_than_we_do_is_itemized() -> None:
    # A local model's chat template and tokenizer: the provider counts 1.8x our estimate.
    counter = TokenCounter("some-local-model")
    question = HumanMessage("what does app.py do? " * 40)
    ours = counter.count_message(question) + counter.count_tools(TOOLS)
    usage = {"input_tokens": ours * 18 // 10, "output_tokens": 5, "total_tokens": 0}
    usage["total_tokens"] = usage["input_tokens"] + 5
    msgs = [question, AIMessage("hello", usage_metadata=usage)]  # type: ignore[arg-type]
    report = context_report(msgs, system=[], tools=TOOLS, counter=counter, budget=BUDGET)
    assert report["source"] == "reported"
    assert sum(report["by_category"].values()) + report["unattributed"] == report["tokens"]
    assert report["unattributed"] > 0.7 * ours
    line = next(line for line in render_context(report).splitlines() if "not itemized" in line)
    assert line.split()[2].startswith("+") and "chat template" in line, line
    exact = context_report(
        msgs[:1], system=[], tools=TOOLS, counter=TokenCounter("gpt-4o"), budget=BUDGET
    )
    assert exact["unattributed"] is None
    assert "not itemized" not in render_context(exact)


def test_after_a_compaction_the_scaled_estimate_adds_up_and_says_why() -> None:
    # The compaction recorded that the provider counts 1.7x our estimate; no reply since.
    counter = TokenCounter("some-local-model")
    summary = HumanMessage(
        "summary of the work so far " * 30,
        additional_kwargs={"agentgraph": {"kind": "summary", "provider_scale": 1.7}},
    )
    msgs = [summary, HumanMessage("go on")]
    report = context_report(msgs, system=[], tools=TOOLS, counter=counter, budget=BUDGET)
    own = counter.count_messages(msgs) + counter.count_tools(TOOLS)
    assert (report["tokens"], report["source"], report["scale"]) == (
        math.ceil(own * 1.7),
        "estimate",
        1.7,
    )
    assert sum(report["by_category"].values()) + report["unattributed"] == report["tokens"]
    text = render_context(report)
    assert "×1.70" in text and "not itemized" in text


def test_estimate_model_has_notice_and_level() -> None:
    counter = TokenCounter("some-local-model")
    budget = Budget(
        window=1_000,
        reserve=200,
        usable=800,
        notice_at=600,
        warn_at=680,
        compact_at=640,
        source_notice="unknown context window",
    )
    msgs = [HumanMessage("word " * 700)]
    report = context_report(msgs, system=[], tools=[], counter=counter, budget=budget)
    assert report["source"] == "estimate"
    assert report["level"] == "compact"
    assert "estimate" in report["notice"] and "unknown context window" in report["notice"]


def test_render_and_status_line() -> None:
    counter = TokenCounter("gpt-4o")
    small = Budget(
        window=4_000, reserve=1_000, usable=3_000, notice_at=2_250, warn_at=2_550, compact_at=2_400
    )
    report = context_report(
        _conversation(), system=[SystemMessage("sys")], tools=TOOLS, counter=counter, budget=small
    )
    text = render_context(report, width=20)
    assert "█" in text and "░" in text
    assert "exact" in text
    for label in ("system prompt", "tool schemas", "tool results", "summaries", "re-injected"):
        assert label in text
    assert "Largest messages" in text
    bar_line = next(line for line in text.splitlines() if line.startswith("["))
    assert len(bar_line.split("]")[0]) == 21

    fake = dict(report, tokens=12_345, budget=100_000, percent=12.3, level="ok")
    assert status_line(fake) == ("12.3k / 100k tokens (12%)", "ok")
    assert status_line(dict(fake, source="estimate"))[0].startswith("~12.3k")


def test_bar_saturates_when_over_budget() -> None:
    report = {
        "tokens": 200,
        "budget": 100,
        "window": 150,
        "source": "estimate",
        "percent": 200.0,
        "level": "compact",
        "by_category": {},
        "largest": [],
        "notice": None,
    }
    text = render_context(report, width=10)
    assert "[██████████]" in text
    assert "estimated" in text


def test_format_tokens() -> None:
    assert [format_tokens(n) for n in (0, 950, 1_000, 12_345, 100_000, 1_047_576)] == [
        "0",
        "950",
        "1k",
        "12.3k",
        "100k",
        "1.05M",
    ]
