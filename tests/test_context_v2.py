"""Context engine v2 through the real graph and the strict loopback server.

Nothing the model saw is summarized while the budget has room; ``MAX_MESSAGE_HISTORY``
keeps its meaning when a user sets it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentgraph.agent import Agent
from agentgraph.config import Settings
from agentgraph.persistence import open_store
from tests.fakes.openai_server import FakeOpenAIServer
from tests.scenarios.long_task import PLANTED_FACTS, LongTaskDriver, make_workspace

LARGE_WINDOW_TOKENS = 128_000
SMALL_FILES = 60
SMALL_FILE_LINES = 12


def _run(
    make_settings: Callable[..., Settings],
    workspace: Path,
    *,
    window: int,
    files: int,
    lines: int,
    **env: str,
) -> tuple[LongTaskDriver, list[dict[str, Any]], FakeOpenAIServer]:
    paths = make_workspace(workspace, files=files, lines_per_file=lines)
    driver = LongTaskDriver(paths)
    events: list[dict[str, Any]] = []
    with FakeOpenAIServer([driver], window=window, on_exhausted="repeat_last") as server:
        settings = make_settings(
            OPENAI_BASE_URL=server.url,
            OPENAI_API_KEY="sk-test",
            AGENTGRAPH_CONTEXT_WINDOW=str(window),
            AGENTGRAPH_PROVIDER_MAX_RETRIES="0",
            MAX_LOOPS=str(files + 5),
            **env,
        )
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            agent.run_turn("v2", "read every log and report the facts", workspace, events.append)
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
