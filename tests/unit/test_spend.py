"""Budgets as written (``--budget``, ``/goal … --budget``) and a goal's accounting."""

from __future__ import annotations

import pytest

from agentgraph.runtime.goal import (
    BLOCKED_MARKER,
    DONE_MARKER,
    STATUS_ACTIVE,
    STATUS_BLOCKED,
    STATUS_BUDGET,
    STATUS_DONE,
    account,
    new_goal,
)
from agentgraph.runtime.spend import SpendLimit, parse_budget, usd_text


@pytest.mark.parametrize(
    ("written", "limit"),
    [
        ("20000", SpendLimit(tokens=20_000)),
        (" 0 ", SpendLimit()),
        ("$0.50", SpendLimit(usd=0.5)),
        ("$ .5", SpendLimit(usd=0.5)),
        ("0.50$", SpendLimit(usd=0.5)),
        ("USD0.5", SpendLimit(usd=0.5)),
        ("2 usd", SpendLimit(usd=2.0)),
    ],
)
def test_both_forms_parse(written: str, limit: SpendLimit) -> None:
    assert parse_budget(written) == limit


@pytest.mark.parametrize("written", ["", "1.5", "-3", "$-1", "1e3$", "$1$", "ten", "€1"])
def test_anything_else_is_refused(written: str) -> None:
    with pytest.raises(ValueError, match="not a budget"):
        parse_budget(written)


def test_limits_and_how_they_read() -> None:
    both = SpendLimit(tokens=1_000, usd=0.5)
    assert not both.reached(999, 0.49)
    assert both.reached(1_000, 0.0) and both.reached(0, 0.5)
    assert both.describe(1_200, 0.0123) == "1,200 of 1,000 tokens, $0.0123 of $0.50"
    assert not SpendLimit() and SpendLimit().text() == "none"
    assert [usd_text(v) for v in (0.5, 0.0468, 12.0, 1234.5)] == [
        "$0.50",
        "$0.0468",
        "$12.00",
        "$1,234.50",
    ]


def test_a_goal_ends_at_its_marker_or_its_budget() -> None:
    goal = new_goal("ship it", SpendLimit(tokens=100))
    working = account(goal, 40, 0.0, None)
    assert (working["status"], working["spent_tokens"]) == (STATUS_ACTIVE, 40)
    # A marker line ends the work, even on the call that also spent the budget.
    assert account(working, 70, 0.0, f"shipped\n{DONE_MARKER}")["status"] == STATUS_DONE
    assert account(working, 1, 0.0, f"need a key\n**{BLOCKED_MARKER}**")["status"] == (
        STATUS_BLOCKED
    )
    assert account(working, 60, 0.0, "still going")["status"] == STATUS_BUDGET
    # Naming the marker inside a sentence is not saying it.
    assert account(working, 1, 0.0, f"I will write {DONE_MARKER} later")["status"] == (
        STATUS_ACTIVE
    )
