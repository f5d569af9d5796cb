"""Context engine v2 through the real graph and the strict loopback server.

Nothing the model saw is summarized while the budget has room; ``MAX_MESSAGE_HISTORY``
keeps its meaning when a user sets it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentgraph.config import Settings
from agentgraph.context.windows import budget_for
from agentgraph.middleware.masking import MASK_LOW_WATER_DEFAULT, MASK_THRESHOLD_DEFAULT
from agentgraph.persistence import open_store
from agentgraph.session.agent import Agent
from agentgraph.session.service import SessionService
from tests.fakes.openai_server import FakeOpenAIServer
from tests.scenarios.long_task import (
    PLANTED_FACTS,
    LongTaskDriver,
    is_summary_request,
    make_workspace,
)

LARGE_WINDOW_TOKENS = 128_000
SMALL_FILES = 60
SMALL_FILE_LINES = 12


def _settings(
    make_settings: Callable[..., Settings], server: FakeOpenAIServer, files: int, **env: str
) -> Settings:
    assert server.window is not None
    return make_settings(
        OPENAI_BASE_URL=server.url,
        OPENAI_API_KEY="sk-test",
        AGENTGRAPH_CONTEXT_WINDOW=str(server.window),
        AGENTGRAPH_PROVIDER_MAX_RETRIES="0",
        MAX_LOOPS=str(files + 5),
        **env,
    )


def _run(
    make_settings: Callable[..., Settings],
    workspace: Path,
    *,
    window: int,
    files: int,
    lines: int,
    notes: bool = False,
    **env: str,
) -> tuple[LongTaskDriver, list[dict[str, Any]], FakeOpenAIServer]:
    paths = make_workspace(workspace, files=files, lines_per_file=lines)
    driver = LongTaskDriver(paths, notes=notes)
    events: list[dict[str, Any]] = []
    with FakeOpenAIServer([driver], window=window, on_exhausted="repeat_last") as server:
        settings = _settings(make_settings, server, files, **env)
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            # Each event notes how many requests the server had then: a masking or
            # compaction event comes just before the request it changes.
            agent.run_turn(
                "v2",
                "read every log and report the facts",
                workspace,
                lambda e: events.append({**e, "at_request": len(server.requests)}),
            )
    assert server.violations == []
    return driver, events, server


def test_many_small_reads_at_a_large_window_make_no_summary(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    driver, events, server = _run(
        make_settings,
        workspace,
        window=LARGE_WINDOW_TOKENS,
        files=SMALL_FILES,
        lines=SMALL_FILE_LINES,
    )
    assert driver.step == SMALL_FILES + 2
    assert driver.summary_calls == 0
    assert [e for e in events if e["type"] == "compaction"] == []
    assert set(PLANTED_FACTS.values()) <= driver.answer_facts
    assert server.overflow_count == 0


def test_a_set_message_history_still_compacts_by_count(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    driver, events, _server = _run(
        make_settings,
        workspace,
        window=LARGE_WINDOW_TOKENS,
        files=12,
        lines=SMALL_FILE_LINES,
        MAX_MESSAGE_HISTORY="10",
    )
    assert driver.step == 12 + 2
    assert driver.summary_calls >= 1
    assert [e for e in events if e["type"] == "compaction"]


@pytest.mark.parametrize("value", ["9", "101", "many"])
def test_message_history_out_of_range_is_refused(
    make_settings: Callable[..., Settings], value: str
) -> None:
    with pytest.raises(ValueError, match=r"(?i)max_message_history"):
        make_settings(MAX_MESSAGE_HISTORY=value)


def test_message_history_is_unset_by_default(make_settings: Callable[..., Settings]) -> None:
    settings = make_settings()
    assert settings.max_message_history is None
    assert settings.compaction_keep_messages is None
    assert make_settings(MAX_MESSAGE_HISTORY="40").compaction_keep_messages == 20


def _main_requests(server: FakeOpenAIServer) -> list[dict[str, Any]]:
    return [r for r in server.requests if not is_summary_request(r)]


def _breaks(requests: list[dict[str, Any]]) -> list[int]:
    """Indices of requests whose messages do not extend the previous request's."""
    out = []
    for n in range(1, len(requests)):
        prev, cur = requests[n - 1]["messages"], requests[n]["messages"]
        if cur[: len(prev)] != prev:
            out.append(n)
    return out


def _each_break_follows_its_event(breaks: list[int], events: list[dict[str, Any]]) -> bool:
    """Whether every prefix break has an event of its own just before its request.

    An event's ``at_request`` is read when the main thread takes it off the stream;
    the model's thread sends the request the event changed right after emitting it, so
    that request may have arrived by then (``at_request == break + 1``), never the next
    one: that needs a step the main thread schedules after taking the event.
    """
    ats = sorted(e["at_request"] for e in events)
    for b in breaks:
        match = next((a for a in ats if a in (b, b + 1)), None)
        if match is None:
            return False
        ats.remove(match)
    return True


# The masking tests below measure masking alone, for a model that notes what it reads
# (masking hides only what the model restated): distilling what it hid into a summary
# (tested in test_context_v3.py) is turned off.
NO_DISTIL = {"AGENTGRAPH_DISTIL_THRESHOLD": "10"}
MASK_WINDOW_TOKENS = 32_000
MASK_FILES = 40
MASK_FILE_LINES = 40


def test_masking_past_its_threshold_does_not_summarize_and_keeps_the_prefix(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    driver, events, server = _run(
        make_settings,
        workspace,
        window=MASK_WINDOW_TOKENS,
        files=MASK_FILES,
        lines=MASK_FILE_LINES,
        notes=True,
        **NO_DISTIL,
    )
    requests = _main_requests(server)
    maskings = [e for e in events if e["type"] == "masking"]
    assert driver.step == MASK_FILES + 2
    assert driver.summary_calls == 0
    assert [e for e in events if e["type"] == "compaction"] == []
    assert maskings, "the task passes the masking threshold"
    assert all(e["tokens_after"] < e["tokens_before"] for e in maskings)
    # Every request extends the previous one byte for byte, except at masking events:
    # each break is the first request after a logged event.
    breaks = _breaks(requests)
    assert breaks, "masking changed the prompt at least once"
    assert _each_break_follows_its_event(breaks, maskings), (breaks, maskings)
    assert all(r["tools"] == requests[0]["tools"] for r in requests)
    assert all(r["messages"][0] == requests[0]["messages"][0] for r in requests)
    # The masked outputs point at the transcript and are not in the prompt any more.
    last = json.dumps(requests[-1]["messages"])
    assert "tool output masked: read_file" in last
    assert "read_history(" in last
    assert max(server.token_estimate(r) for r in requests) <= MASK_WINDOW_TOKENS
    assert server.overflow_count == 0


BATCH_WINDOW_TOKENS = 16_000
BATCH_FILES = 16
BATCH_FILE_LINES = 36
# Project instructions that, with the system prompt and the tool schemas, make a large
# fixed part of every prompt at 16k, so masking only the outputs older than the newest
# turns kept verbatim would leave the prompt above the low-water mark. (Fewer lines since
# present_plan and subagent_task joined the tool schemas: the fixed part stays as large.)
BATCH_INSTRUCTION_LINES = 130


def test_masking_events_bring_the_prompt_down_to_the_low_water_mark(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    lines = (
        f"- rule {n}: keep log lines as they are written."
        for n in range(1, BATCH_INSTRUCTION_LINES + 1)
    )
    (workspace / "AGENTS.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    driver, events, server = _run(
        make_settings,
        workspace,
        window=BATCH_WINDOW_TOKENS,
        files=BATCH_FILES,
        lines=BATCH_FILE_LINES,
        notes=True,
        **NO_DISTIL,
    )
    budget = budget_for(make_settings(AGENTGRAPH_CONTEXT_WINDOW=str(BATCH_WINDOW_TOKENS)))
    low_at = int(budget.usable * MASK_LOW_WATER_DEFAULT)
    mask_at = int(budget.usable * MASK_THRESHOLD_DEFAULT)
    maskings = [e for e in events if e["type"] == "masking"]
    assert driver.step == BATCH_FILES + 2
    assert driver.summary_calls == 0
    assert len(maskings) >= 2, "the task passes the masking threshold more than once"
    # Hysteresis: each event masks down to the low-water mark, well below the masking
    # threshold (into the newest turns if need be), so the prompt climbs a whole band
    # before the next event.
    assert all(e["tokens_after"] <= low_at < mask_at for e in maskings)
    breaks = _breaks(_main_requests(server))
    assert _each_break_follows_its_event(breaks, maskings), (breaks, maskings)


def test_masking_events_are_stored_with_the_replies_for_the_context_chart(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    # A session run by the terminal's Agent, charted afterwards by another process's
    # service (the web UI): the masking events come from the stored replies.
    _driver, events, _server = _run(
        make_settings,
        workspace,
        window=MASK_WINDOW_TOKENS,
        files=MASK_FILES,
        lines=MASK_FILE_LINES,
        notes=True,
        **NO_DISTIL,
    )
    settings = make_settings()  # the same home; the chart needs no model
    with open_store(settings) as store:
        chart = SessionService(Agent(settings, store), store, workspace).context("v2")
    live = [e for e in events if e["type"] == "masking"]
    assert live, "the task passes the masking threshold"
    stored = chart["maskings"]
    assert [(m["masked_outputs"], m["tokens_before"], m["tokens_after"]) for m in stored] == [
        (e["masked_outputs"], e["tokens_before"], e["tokens_after"]) for e in live
    ]
    calls = [m["call"] for m in stored]
    assert calls == sorted(set(calls)) and calls[0] > 0 and calls[-1] < len(chart["calls"])
