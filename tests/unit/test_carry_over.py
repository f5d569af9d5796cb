"""What a rewrite of earlier summaries dropped is found and carried over as written."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agentgraph.context.carry_over import (
    CARRY_OVER_HEADING,
    dropped_details,
    identifiers,
    with_dropped_details,
    without_oldest_details,
)


def _words(text: str) -> int:
    return len(text.split())


def test_items_whose_identifiers_the_rewrite_lost_are_found_once_in_order() -> None:
    earlier = [
        "Handoff summary.\nCodes: CODE part_001: ORBIT-8919; CODE part_002: LAUNCH-7838",
        "Codes: CODE part_003: VECTOR-6757; CODE part_002: LAUNCH-7838\nAll tests pass.",
    ]
    rewrite = "Handoff summary.\nCodes: CODE part_002: LAUNCH-7838"
    assert dropped_details(earlier, rewrite) == [
        "Codes: CODE part_001: ORBIT-8919",
        "Codes: CODE part_003: VECTOR-6757",
    ]


def test_prose_without_identifiers_and_files_the_ledger_keeps_are_not_details() -> None:
    earlier = ["The parser was read and looks fine.\nFiles read: src/app/config.py, util.py"]
    assert dropped_details(earlier, "", known_paths=["src/app/config.py", "util.py"]) == []
    # A fact about a kept file is still a detail: its identifier is not the file's name.
    earlier = ["src/app/config.py sets TIMEOUT_SECONDS = 17"]
    assert dropped_details(earlier, "config.py read", known_paths=["src/app/config.py"]) == [
        "src/app/config.py sets TIMEOUT_SECONDS = 17"
    ]


def test_numbers_alone_are_steps_not_identifiers() -> None:
    earlier = ["Task: read files 1-40, from 2026-11-29; port 8080 and ORBIT-8919"]
    assert identifiers(earlier[0]) == {"ORBIT-8919"}
    assert dropped_details(earlier, "Task: read files 41-80 (ORBIT-8919 noted)") == []


def test_agentgraphs_own_prefixes_are_not_details_of_the_summary() -> None:
    prefix = "Summary of the work since (search_history(query) finds it):\n\n"
    earlier = [prefix + "Ran make_release v2.1 (exit 0)."]
    found = dropped_details(earlier, "Ran make_release v2.1 (exit 0).", boilerplate=[prefix])
    assert found == []
    assert dropped_details(earlier, "Released.", boilerplate=[prefix]) == [
        "Ran make_release v2.1 (exit 0)."
    ]


def test_the_carried_details_fit_the_room_newest_first_in_their_order() -> None:
    details = ["CODE a_1: X-1", "CODE b_2: Y-2", "CODE c_3: Z-3"]
    summary = "short summary"
    full = with_dropped_details(summary, details, max_tokens=1000, count=_words)
    assert full == f"{summary}\n\n{CARRY_OVER_HEADING}\n" + "\n".join(details)
    heading = _words(CARRY_OVER_HEADING)
    # Room for two: the two newest stay, in their order.
    two = with_dropped_details(
        summary, details, max_tokens=_words(summary) + heading + 2 + 6 + 2, count=_words
    )
    assert two.endswith("\nCODE b_2: Y-2\nCODE c_3: Z-3")
    # No room, or nothing dropped: the summary as it was.
    assert with_dropped_details(summary, details, max_tokens=3, count=_words) == summary
    assert with_dropped_details(summary, [], max_tokens=1000, count=_words) == summary


_WORD = st.one_of(
    st.sampled_from(
        ["ORBIT-8919", "parse_config", "HTTP", "fooBar", "v2.10", "src/a_1.py", "1-40"]
    ),
    st.sampled_from(["the", "file", "was", "read", "fine", "1", "22"]),
)
_LINE = st.lists(_WORD, min_size=1, max_size=6).map(" ".join)
_TEXT = st.lists(
    st.lists(_LINE, min_size=1, max_size=3).map("; ".join), min_size=1, max_size=4
).map("\n".join)


@given(
    earlier=st.lists(_TEXT, min_size=1, max_size=3),
    rewrite=st.lists(_LINE, max_size=3).map("\n".join),
    known=st.lists(st.sampled_from(["src/a_1.py", "parse_config"]), max_size=2),
)
def test_with_room_every_distinctive_word_of_the_earlier_summaries_survives(
    earlier: list[str], rewrite: str, known: list[str]
) -> None:
    details = dropped_details(earlier, rewrite, known_paths=known)
    out = with_dropped_details(rewrite, details, max_tokens=10_000, count=_words)
    assert out.startswith(rewrite)
    names = set(known)
    for text in earlier:
        for word in identifiers(text) - names:
            assert word in out
    # Nothing the rewrite already holds is carried again.
    for item in details:
        assert any(w not in rewrite for w in identifiers(item) - names)


def test_carried_details_give_room_back_oldest_first_and_keep_what_follows() -> None:
    details = ["CODE a_1: X-1", "CODE a_2: X-2", "CODE a_3: X-3"]
    carried = with_dropped_details("rewrite", details, max_tokens=100, count=_words)
    tail = "\n\nAlso read (from the readings the summary above left out):\nCODE b_9: Y-9"
    summary = carried + tail
    # Each item is 3 words and a line break here: 4 tokens frees the oldest one.
    trimmed = without_oldest_details(summary, 4, count=_words)
    assert trimmed == f"rewrite\n\n{CARRY_OVER_HEADING}\nCODE a_2: X-2\nCODE a_3: X-3{tail}"
    # Past every detail the section goes, heading included; what follows stays.
    assert without_oldest_details(summary, 100, count=_words) == "rewrite" + tail
    assert without_oldest_details("rewrite" + tail, 4, count=_words) == "rewrite" + tail
    assert without_oldest_details(summary, 0, count=_words) == summary


def test_details_carried_at_an_earlier_rewrite_are_older_than_its_summary() -> None:
    # The first rewrite dropped part_001's code and carried it; the second rewrite, of
    # that summary, drops part_004's, the newest fact. A summary's carried section holds
    # what came before it: ordered as written, the newest detail came first and was the
    # first to give its room back, compaction after compaction.
    first = with_dropped_details(
        "Codes: CODE part_002: Y-2; CODE part_004: Y-4",
        ["Codes: CODE part_001: Y-1"],
        max_tokens=100,
        count=_words,
    )
    rewrite = "Codes: CODE part_002: Y-2"
    details = dropped_details([first], rewrite, boilerplate=[CARRY_OVER_HEADING])
    assert details == ["Codes: CODE part_001: Y-1", "CODE part_004: Y-4"]
    second = with_dropped_details(rewrite, details, max_tokens=100, count=_words)
    # Room for one detail less: the oldest gives it back, the newest stays.
    assert without_oldest_details(second, 1, count=_words).endswith(
        f"{CARRY_OVER_HEADING}\nCODE part_004: Y-4"
    )


def test_a_heading_the_rewrite_copied_is_not_taken_for_the_carried_details() -> None:
    # A summarizer may copy the heading from the summaries it rewrites: the details
    # agentgraph carries are the section it appended, the last one.
    copied = f"Codes: CODE part_005: Y-5\n\n{CARRY_OVER_HEADING}\nCODE part_003: Y-3"
    carried = ["CODE part_001: Y-1", "CODE part_002: Y-2"]
    summary = with_dropped_details(copied, carried, max_tokens=100, count=_words)
    found = dropped_details([summary], "nothing kept", boilerplate=[CARRY_OVER_HEADING])
    assert found[:2] == carried
    assert without_oldest_details(summary, 1, count=_words) == summary.replace(
        "CODE part_001: Y-1\n", ""
    )


@given(
    items=st.lists(_LINE, min_size=1, max_size=8),
    excess=st.integers(1, 60),
)
def test_trimming_carried_details_frees_at_least_what_was_asked_or_all_of_them(
    items: list[str], excess: int
) -> None:
    summary = with_dropped_details("rewrite", items, max_tokens=10_000, count=_words)
    trimmed = without_oldest_details(summary, excess, count=_words)
    assert trimmed.startswith("rewrite")
    kept = (
        trimmed.split(f"{CARRY_OVER_HEADING}\n", 1)[1].split("\n")
        if CARRY_OVER_HEADING in trimmed
        else []
    )
    # The newest stay, in order: what is left is a tail of the carried items.
    assert kept == items[len(items) - len(kept) :]
    freed = sum(_words(i) + 1 for i in items[: len(items) - len(kept)])
    assert freed >= excess or not kept
