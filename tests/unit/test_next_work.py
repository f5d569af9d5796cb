"""What a handoff summary says is left to do, and the files it names there."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentgraph.context.carry_over import CARRY_OVER_HEADING
from agentgraph.context.compaction import NEXT_PIECE_HEADING, SUPPLEMENT_HEADING
from agentgraph.context.next_work import named_paths, remaining_work


@pytest.mark.parametrize(
    ("summary", "section"),
    [
        # agentgraph's handoff prompt's numbered headings
        (
            "1. Task and progress: wrote a.py\n3. Remaining work:\n- edit b.py\n\n"
            "4. Critical data and references: c.py",
            "3. Remaining work:\n- edit b.py\n",
        ),
        # markdown headings, LangChain's "Next steps"
        (
            "## Summary\nread a.py\n## NEXT STEPS\n\n- fix b.py\n## Artifacts\nc.py",
            "## NEXT STEPS\n\n- fix b.py",
        ),
        # bold headings, Claude Code's "Pending tasks" and "Current work"
        (
            "**Pending Tasks**\n- b.py\n**Current Work**\n- d.py\n**Optional**\n- c.py",
            "**Pending Tasks**\n- b.py\n**Current Work**\n- d.py",
        ),
        # bracketed, as Qwen2.5-Coder 1.5B wrote the handoff prompt's headings
        (
            "[task and progress]\nwrote plan.py\n\n[remaining work]\nchange STEP to 2 in "
            "plan.py\n\n[critical data and references]\nbig1.py",
            "[remaining work]\nchange STEP to 2 in plan.py\n",
        ),
        # a labelled line
        ("Files read: a.py\nRemaining work: finish b.py", "Remaining work: finish b.py"),
        # what agentgraph adds after a summary is no work left
        (
            "Remaining work: finish b.py\n\nAlso read (from the readings the summary above "
            "left out):\nc.py held X",
            "Remaining work: finish b.py\n",
        ),
        # no such section; the words elsewhere are not a heading
        ("Progress: the remaining work is b.py", ""),
        ("", ""),
    ],
)
def test_the_remaining_work_runs_from_its_heading_to_the_next_section(
    summary: str, section: str
) -> None:
    assert remaining_work(summary) == section


def test_files_are_named_whole_or_by_their_own_file_names_in_the_order_named() -> None:
    paths = ["src/app.py", "a/util.py", "b/util.py", "webapp.py", "app.py", "notes.md"]
    text = "finish ./src/app.py and a/util.py; then util.pyc and notes.md-draft"
    # app.py inside src/app.py names no top-level app.py, nor webapp.py; b/util.py is
    # not a/util.py; util.pyc and notes.md-draft are other files.
    assert named_paths(text, paths) == ["src/app.py", "a/util.py"]
    # A file name alone names every file of that name.
    assert named_paths("fix app.py, then webapp.py.", paths) == [
        "src/app.py",
        "app.py",
        "webapp.py",
    ]
    assert named_paths("", paths) == []


@pytest.mark.parametrize("heading", [CARRY_OVER_HEADING, NEXT_PIECE_HEADING, SUPPLEMENT_HEADING])
def test_what_agentgraph_adds_after_a_summary_ends_its_remaining_work(heading: str) -> None:
    """The details carried from earlier summaries, a later piece and what the summary's
    follow-ups add name files done long ago: shown whole as work left, they took the
    room of the files being worked on."""
    summary = f"Remaining work: finish b.py\n\n{heading}\nc.py: CODE X"
    assert named_paths(remaining_work(summary), ["b.py", "c.py"]) == ["b.py"]


def test_the_file_named_first_comes_first() -> None:
    """A list of work left starts with the next step: the file it names first is the
    first shown when the room holds one."""
    text = "Remaining work: mark done part_005.txt, then part_006.txt"
    assert named_paths(text, ["logs/part_006.txt", "logs/part_005.txt"]) == [
        "logs/part_005.txt",
        "logs/part_006.txt",
    ]


_PATHS = ["a.py", "src/a.py", "src/b.py", "notes.md", "x-y.txt"]
_PIECES = st.sampled_from(
    [
        "Remaining work:",
        "## Next steps",
        "[remaining work]",
        "3. Remaining work",
        "**Pending tasks**",
        "4. Critical data",
        "Also read (files):",
        "- fix",
        "then",
        " ",
        "./",
        ".",
        ",",
        "*",
        "[",
        "\n",
        *_PATHS,
    ]
)


@given(pieces=st.lists(_PIECES, max_size=40))
def test_the_work_left_is_lines_of_the_summary_naming_known_paths_once(
    pieces: list[str],
) -> None:
    """Whatever a summarizer writes: the section is lines of the summary, in order,
    and the files named are known paths, each once, each standing in it."""
    summary = "".join(pieces)
    section = remaining_work(summary)
    lines = summary.splitlines()
    found = section.splitlines()
    it = iter(lines)
    assert all(any(line == other for other in it) for line in found)
    named = named_paths(section, _PATHS)
    assert len(named) == len(set(named)) and set(named) <= set(_PATHS)
    assert all(path in section or path.rsplit("/", 1)[-1] in section for path in named)
