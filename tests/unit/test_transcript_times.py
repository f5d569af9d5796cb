"""Message times in JSONL transcripts: exported as stamped, imported as the file says."""

from __future__ import annotations

import json

from langchain_core.messages import AIMessage, HumanMessage

from agentgraph.persistence.index import SessionInfo
from agentgraph.runtime.history.kinds import message_time, stamped
from agentgraph.session.transcript import export_entries, export_jsonl, export_markdown, parse_jsonl

INFO = SessionInfo(thread_id="t1", created_at=1_700_000_000.0)


def _entry(timestamp: str, **extra: object) -> str:
    user = {"role": "user", "content": "hello"}
    return json.dumps(
        {"type": "user", "uuid": "u1", "timestamp": timestamp, "message": user, **extra}
    )


def test_each_message_is_exported_at_its_own_time_and_undated_ones_follow_the_last() -> None:
    messages = [
        HumanMessage("old, undated", id="u0"),
        stamped(HumanMessage("hi", id="u1"), 0.0),  # the epoch is a time
        AIMessage("undated reply", id="a1"),
        stamped(AIMessage("later", id="a2"), 1_700_000_123.0),
    ]
    stamps = [e["timestamp"] for e in export_entries(messages, INFO)]
    assert stamps == [
        "2023-11-14T22:13:20Z",  # the session's start
        "1970-01-01T00:00:00Z",
        "1970-01-01T00:00:00Z",
        "2023-11-14T22:15:23Z",
    ]


def test_an_import_dates_a_message_by_its_entry_not_by_a_copied_marker() -> None:
    parsed = parse_jsonl([_entry("2024-06-01T12:00:00Z", agentgraph={"timestamp": 1e9})])
    (message,) = parsed.messages
    assert message_time(message) == parsed.created_at == 1_717_243_200.0


def test_an_entry_time_no_date_can_show_is_no_time() -> None:
    # An offset moves the first instant of year 1 before it.
    parsed = parse_jsonl([_entry("0001-01-01T00:00:00+14:00")])
    assert message_time(parsed.messages[0]) is None
    info = SessionInfo(thread_id="t1", created_at=parsed.created_at)
    assert export_jsonl(parsed.messages, info)  # exports, no crash


def test_the_markdown_export_dates_user_messages_and_replies() -> None:
    messages = [
        stamped(HumanMessage("hi", id="u1"), 1_700_000_001.0),
        AIMessage("undated", id="a1"),
        stamped(AIMessage("hello", id="a2"), 1_700_000_062.0),
    ]
    headers = [line for line in export_markdown(messages, INFO).splitlines() if line[:3] == "## "]
    assert headers == [
        "## User · 2023-11-14 22:13:21 UTC",
        "## Assistant",
        "## Assistant · 2023-11-14 22:14:22 UTC",
    ]
