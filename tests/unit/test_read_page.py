"""A file read over the output cap becomes the page that fits (tools/files.py fit_read_page)."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import ToolCall

from agentgraph.capabilities.tools.files import (
    excerpt_of_read,
    fit_read_page,
    read_span,
    read_text_file,
)
from agentgraph.context.compaction import (
    READ_PAGE_MIN_TOKENS,
    TARGET_AFTER_BUDGET_FRACTION,
    UNSEEN_KEPT_BUDGET_FRACTION,
    read_page_max_tokens,
    shown_files_max_tokens,
)
from agentgraph.context.tokens import get_counter
from agentgraph.context.truncation import default_tool_output_max_tokens, truncate_tool_output
from agentgraph.context.windows import Budget
from agentgraph.runtime.nodes.tools import files_shown

COUNTER = get_counter("gpt-4o-mini")
# A model without an offline tokenizer: its counts are estimates.
ESTIMATE = get_counter("qwen2.5-coder-1.5b")

line_text = st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=300)


def _page(lines: list[str], first: int, total: int) -> str:
    """A page of ``lines`` as read_file words it."""
    last = first + len(lines) - 1
    note = f"call read_file with offset={last} to continue" if last < total else "end of file"
    return "\n".join(lines) + f"\n[showing lines {first}-{last} of {total}; {note}]"


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lines=st.lists(line_text, min_size=1, max_size=120),
    offset=st.integers(0, 60),
    limit=st.integers(1, 150),
    cap=st.integers(1, 1500),
    final_newline=st.booleans(),
    exact=st.booleans(),
)
def test_the_page_is_the_longest_run_of_lines_that_fits_with_the_next_offset(
    tmp_path: Path,
    lines: list[str],
    offset: int,
    limit: int,
    cap: int,
    final_newline: bool,
    exact: bool,
) -> None:
    counter = COUNTER if exact else ESTIMATE
    path = tmp_path / "f.txt"
    content = "\n".join(lines) + ("\n" if final_newline else "")
    path.write_text(content, encoding="utf-8")
    total = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
    offset = min(offset, max(total - 1, 0))
    rendered = read_text_file(path, "f.txt", offset, limit)
    shown = [line for line in rendered.split("\n") if re.match(r"\d+\t", line)]
    page = fit_read_page(rendered, cap, counter)
    if not shown:
        assert page is None
        return
    if page is None:  # only when not even the first line fits with its note
        assert counter.count_text(_page(shown[:1], offset + 1, total)) > cap
        return
    assert counter.count_text(page) <= cap
    kept = page.split("\n")[:-1]
    assert kept == shown[: len(kept)]
    assert page == _page(kept, offset + 1, total)
    if len(kept) < len(shown):  # one more line would not fit
        assert counter.count_text(_page(shown[: len(kept) + 1], offset + 1, total)) > cap


def test_outputs_that_are_not_a_numbered_read_are_left_to_the_cut() -> None:
    assert fit_read_page("plain text\nmore", 1000, COUNTER) is None
    assert fit_read_page("[f.txt is empty]", 1000, COUNTER) is None
    assert fit_read_page("1\ta\n3\tc\n2\tb", 1000, COUNTER) is None  # not increasing
    assert fit_read_page("1\ta\n5\tb\n3\tc", 1000, COUNTER) is None
    assert fit_read_page("1\ta\nfree text\n3\tc", 1000, COUNTER) is None
    assert fit_read_page("1\ta\n2\tb", 1000, COUNTER) == (
        "1\ta\n2\tb\n[showing lines 1-2 of 2; end of file]"
    )


def test_a_first_line_over_the_cap_is_no_page() -> None:
    rendered = "1\t" + "word " * 400 + "\n2\tb"
    assert fit_read_page(rendered, 50, COUNTER) is None


def test_lines_a_redaction_joined_keep_their_numbers_and_the_page_covers_them() -> None:
    """Redaction may join lines 3-5 into one and drop the note: the page follows the
    numbers it shows, covers up to the line before the next one shown (or the read's
    end), and states the file's total (the read's, before redaction)."""
    rendered = "1\ta\n2\tb\n3\t[REDACTED]\n6\tf"
    assert fit_read_page(rendered, 1000, COUNTER, span=(8, 40)) == (
        "1\ta\n2\tb\n3\t[REDACTED]\n6\tf\n"
        "[showing lines 1-8 of 40; call read_file with offset=8 to continue]"
    )
    # A page that ends on the joined line covers what it joined: the next read starts
    # after it, never inside a redacted key.
    three = "1\ta\n2\tb\n3\t[REDACTED]\n[showing lines 1-5 of 40; call read_file with offset=5 to"
    cap = COUNTER.count_text(three + " continue]")
    page = fit_read_page(rendered + "\n7\t" + "g " * 400, cap, COUNTER, span=(8, 40))
    assert page == three + " continue]"
    note = "[showing lines 1-1 of 40; call read_file with offset=1 to continue]"
    assert read_span(f"1\ta\n{note}") == (1, 40)
    assert read_span("7\tg\n8\th") == (8, 8)
    assert read_span("[f.txt is empty]") is None


def test_a_read_already_cut_head_and_tail_never_claims_the_lines_it_cut(tmp_path: Path) -> None:
    """The line after a page can be a cut's marker: the page then stops before it,
    or is no page at all, never one whose note covers the cut middle."""
    path = tmp_path / "app.log"
    path.write_text(
        "".join(f"12:00:{i % 60:02d} INFO request {i} by worker-{i % 8}\n" for i in range(5000))
    )
    stored = truncate_tool_output(
        read_text_file(path, "app.log"), 1000, count=COUNTER.count_text, codec=COUNTER.codec
    ).text
    assert "tokens truncated" in stored
    for cap in range(150, 1000, 7):
        page = fit_read_page(stored, cap, COUNTER)
        if page is None:
            continue
        *shown, note = page.split("\n")
        last = int(shown[-1].split("\t", 1)[0])
        assert (
            note
            == f"[showing lines 1-{last} of 5000; call read_file with offset={last} to continue]"
        )


def _budget(window: int, compact: float = 0.9) -> Budget:
    usable = window - window // 16
    return Budget(
        window=window,
        reserve=window - usable,
        usable=usable,
        notice_at=int(usable * 0.75),
        warn_at=int(usable * 0.85),
        compact_at=int(usable * compact),
    )


def test_a_read_page_is_bounded_by_the_room_a_compaction_leaves_and_never_below_the_cap() -> None:
    """3,000 tokens where the window has room for them (16k); at a 6k window the room
    between what a compaction leaves and the compaction point; at a large window the cap
    of any other output when that is more."""
    for window in (4_096, 6_000, 8_192, 16_000, 32_000, 128_000):
        budget = _budget(window)
        cap = default_tool_output_max_tokens(budget.usable)
        room = budget.compact_at - int(budget.usable * TARGET_AFTER_BUDGET_FRACTION)
        page = read_page_max_tokens(budget, cap)
        assert page == max(cap, min(READ_PAGE_MIN_TOKENS, room))
        assert page >= cap
    assert read_page_max_tokens(_budget(16_000), 1_480) == READ_PAGE_MIN_TOKENS
    small = _budget(6_000)
    assert read_page_max_tokens(small, 1_000) == small.compact_at - small.usable // 2 < 3_000
    assert read_page_max_tokens(_budget(128_000), 12_000) == 12_000
    # A compaction point under what a compaction leaves: the page is the output cap.
    assert read_page_max_tokens(_budget(16_000, compact=0.4), 1_480) == 1_480
    # The room is the provider's: an estimating counter whose tokens the provider counts
    # 1.5 times over gets two thirds of it in its own tokens.
    room = small.compact_at - small.usable // 2
    assert read_page_max_tokens(small, 1_000, scale=1.5) == int(room / 1.5)
    assert read_page_max_tokens(small, 1_000, scale=0.5) == room  # never more than the room


def test_a_command_showing_several_files_gets_a_page_each_within_the_unseen_share() -> None:
    """``cat`` of eight small files at 16k: eight pages would be more than a compaction
    keeps of results the model has not seen, so that share bounds it; two files get two
    pages; one file (or none counted) a page; a share under one page leaves one page."""
    budget = _budget(16_000)
    share = int(budget.usable * UNSEEN_KEPT_BUDGET_FRACTION)
    page = read_page_max_tokens(budget, default_tool_output_max_tokens(budget.usable))
    assert shown_files_max_tokens(budget, page, 8) == share < 8 * page
    assert shown_files_max_tokens(budget, page, 2) == 2 * page < share
    assert shown_files_max_tokens(budget, page, 1) == page
    assert shown_files_max_tokens(budget, page, 0) == page
    assert shown_files_max_tokens(budget, page, 8, scale=2.0) == share // 2
    assert shown_files_max_tokens(budget, share + 1, 8) == share + 1


class _Read:
    """A ``read_file`` result as a ToolMessage carries it (name, content, call id)."""

    name = "read_file"
    tool_call_id = "call_7"

    def __init__(self, content: str) -> None:
        self.content = content


@settings(max_examples=40, deadline=None)
@given(
    lines=st.lists(line_text, min_size=2, max_size=80),
    read_to=st.integers(2, 80),
    extra=st.integers(0, 40),
    cap=st.integers(30, 800),
)
def test_an_excerpt_fits_names_the_span_read_and_offers_no_offset(
    lines: list[str], read_to: int, extra: int, cap: int
) -> None:
    """An earlier read kept as an excerpt: its leading lines within the cap, a note that
    names the lines the read covered and where all of it is, and no offset to read on
    from (the read went past the excerpt)."""
    shown = lines[: min(read_to, len(lines))]
    total = len(shown) + extra
    rendered = _page([f"{n}\t{t}" for n, t in enumerate(shown, 1)], 1, total)
    excerpt = excerpt_of_read(_Read(rendered), cap, COUNTER)
    if excerpt is None:
        return  # not even the first line fits
    assert COUNTER.count_text(excerpt) <= cap
    body, note = excerpt.rsplit("\n", 1)
    assert rendered.startswith(body + "\n")
    last = int(body.rsplit("\n", 1)[-1].split("\t", 1)[0])
    assert note == (
        f"[lines 1-{last} of {total}, an excerpt of this read of lines 1-{len(shown)}; "
        'read_history("call_7") shows all of it]'
    )
    assert "offset" not in note


def test_an_excerpt_is_only_made_of_a_numbered_read() -> None:
    other = _Read("1\tline")
    other.name = "grep"
    assert excerpt_of_read(other, 100, COUNTER) is None
    assert excerpt_of_read(_Read("plain text\nmore"), 100, COUNTER) is None


def test_a_page_each_is_for_the_files_cat_prints_whole() -> None:
    """``cat``/``nl -ba`` of several files prints each whole: a page each. Any other
    command that shows files (matches of a grep over several) one page, as before; a
    command that shows no file, or another tool, none."""

    def bash(command: str) -> ToolCall:
        return {"name": "run_bash", "args": {"command": command}, "id": "c1", "type": "tool_call"}

    assert files_shown(bash("cat a.py b.py c.py")) == 3
    assert files_shown(bash("nl -ba a.py b.py")) == 2
    assert files_shown(bash("cat a.py")) == 1
    assert files_shown(bash("grep -n def a.py b.py c.py")) == 1
    assert files_shown(bash("pytest tests/test_a.py")) == 0
    assert files_shown({"name": "read_file", "args": {"path": "a.py"}, "id": "c2"}) == 0
