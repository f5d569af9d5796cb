"""The title entry of a JSONL transcript (Claude Code's ``{"type": "summary"}``)."""

from __future__ import annotations

import json

from agentgraph.persistence.index import TITLE_MAX_CHARS
from agentgraph.session.transcript import parse_jsonl

USER = {"type": "user", "uuid": "u1", "message": {"role": "user", "content": "hi"}}


def _lines(*entries: object) -> list[str]:
    return [json.dumps(e) for e in entries]


def test_a_title_entry_names_the_session_and_is_not_a_message() -> None:
    parsed = parse_jsonl(
        _lines(
            {"type": "summary", "summary": "Fix  the\nparser", "leafUuid": "u1"},  # Claude Code
            USER,
        )
    )
    assert parsed.title == "Fix the parser" and parsed.title_source == "user"
    assert [m.id for m in parsed.messages] == ["u1"] and parsed.problems == []


def test_hostile_title_entries_are_bounded_or_ignored() -> None:
    long = parse_jsonl(
        _lines({"type": "summary", "summary": "x" * 10_000, "agentgraph": "junk"}, USER)
    )
    assert long.title is not None and len(long.title) <= TITLE_MAX_CHARS
    odd_source = {"type": "summary", "summary": "t", "agentgraph": {"title_source": "evil"}}
    assert parse_jsonl(_lines(odd_source, USER)).title_source == "user"
    kept = {"type": "summary", "summary": "t", "agentgraph": {"title_source": "model"}}
    assert parse_jsonl(_lines(kept, USER)).title_source == "model"
    for bad in ({"type": "summary", "summary": 42}, {"type": "summary", "summary": "   "}):
        parsed = parse_jsonl(_lines(bad, USER))
        assert parsed.title is None and parsed.title_source is None
