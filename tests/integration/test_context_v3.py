"""Context engine v3 through the real graph: progress and facts survive every tier.

The model is stateless (tests/scenarios/stateless.py): every reply is a function of the
request alone, so whatever the context management hides, it forgets, and whatever it
can no longer see that it knows it read, it reads again. Requests go to the strict
loopback server, which rejects any history a provider would reject.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentgraph.config import Settings
from agentgraph.context.carry_over import CARRY_OVER_HEADING
from agentgraph.context.spiral import CompactionSpiralError
from agentgraph.context.windows import SMALL_WINDOW_REPLY_CAP_FRACTION
from agentgraph.persistence import open_store
from agentgraph.session.agent import Agent, TurnResult
from tests.cli_helpers import cli_env, run_cli, server_env
from tests.fakes.openai_server import FakeOpenAIServer
from tests.scenarios.stateless import (
    QUESTION,
    Persona,
    PersonaKind,
    Recorder,
    ScriptedModel,
    ShellStyle,
    Summarizer,
    SummarizerKind,
    codes_in,
    cut_summaries,
    is_summary,
    make_workspace,
    marked_done,
    persona_for,
    planted_codes,
    rel_path,
    task_text,
)

WINDOW_TOKENS = 16_000
# Codes of the newest 20 KB readings a one-line summary leaves in view at 16k: an excerpt
# of leading lines each in the room a compaction leaves (LangChain's summarization, which
# keeps recent messages whole, shows 3 at its call cap).
LEFT_OUT_CODES_MIN = 4
# An output cap far below what the verbose summarizer writes for a 16k part (about 135
# tokens a file), above what the faithful one does (about 15).
SUMMARY_OUTPUT_CAP_TOKENS = 600


def _run(
    make_settings: Callable[..., Settings],
    workspace: Path,
    *,
    files: int,
    persona: PersonaKind,
    summarizer: SummarizerKind,
    size: str = "small",
    fact_at: str = "start",
    question: bool = False,
    env: dict[str, str] | None = None,
    count_max_tokens: bool = False,
    window: int = WINDOW_TOKENS,
    batch: int = 1,
    output_cap: int | None = None,
    edits: bool = False,
    lag: bool = False,
    shell: ShellStyle | None = None,
) -> tuple[Recorder, list[dict[str, Any]], FakeOpenAIServer, set[str]]:
    paths = make_workspace(workspace, files=files, size=size, fact_at=fact_at, edits=edits)  # type: ignore[arg-type]
    recorder = Recorder()
    persona_model = persona_for(persona, "agentgraph", batch, shell)
    model = ScriptedModel(persona_model, Summarizer(summarizer), recorder)
    events: list[dict[str, Any]] = []
    with FakeOpenAIServer(
        [model],
        window=window,
        on_exhausted="repeat_last",
        count_max_tokens=count_max_tokens,
        cut_at_output_limit=True,
        output_cap=output_cap,
    ) as server:
        settings = make_settings(
            OPENAI_BASE_URL=server.url,
            OPENAI_API_KEY="sk-test",
            AGENTGRAPH_CONTEXT_WINDOW=str(window),
            AGENTGRAPH_PROVIDER_MAX_RETRIES="0",
            MAX_LOOPS=str((4 if lag else 3) * files + 20),
            **(env or {}),
        )
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            agent.run_turn("v3", task_text(1, files, edits, lag), workspace, events.append)
            if question:
                agent.run_turn("v3", QUESTION, workspace, events.append)
    assert server.violations == []
    assert server.overflow_count == 0
    return recorder, events, server, planted_codes(paths)


def _originals(root: Path, files: int) -> tuple[list[str], dict[str, str]]:
    """The editing workspace's paths and each file's text as :func:`make_workspace`
    writes it (under ``root``, beside the workspace a run changes)."""
    paths = make_workspace(root, files=files, edits=True)
    return paths, {p: (root / p).read_text(encoding="utf-8") for p in paths}


def _cut_replies(server: FakeOpenAIServer) -> int:
    """Summarizer replies the server stopped at their output limit."""
    return sum(1 for request in server.cut_requests if is_summary(dict(request)))


def _main(server: FakeOpenAIServer) -> list[dict[str, Any]]:
    return [r for r in server.requests if isinstance(r, dict) and not is_summary(r)]


def _sent(server: FakeOpenAIServer, prefix: str) -> list[str]:
    """The contents of the messages the main model was sent that start with ``prefix``."""
    return [
        str(m["content"])
        for body in _main(server)
        for m in body["messages"]
        if str(m.get("content") or "").startswith(prefix)
    ]


def test_a_stateless_model_reading_far_more_than_the_window_reads_each_file_once(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """60 files of 3 KB through a 16k window (about four windows of reads): a model that
    re-reads whatever it knows it read but cannot see never has to."""
    recorder, events, _server, planted = _run(
        make_settings, workspace, files=60, persona="re_reader", summarizer="faithful"
    )
    assert recorder.reread_files() == 0
    assert any(e["type"] == "compaction" for e in events)
    assert recorder.reports and codes_in(recorder.reports[-1]) == planted
    assert recorder.answers, "the task ended with an answer"


@pytest.mark.parametrize("persona", ["silent", "re_reader"])
def test_a_file_waiting_for_its_second_edit_is_not_read_again_after_a_compaction(
    make_settings: Callable[..., Settings], workspace: Path, persona: PersonaKind
) -> None:
    """Each of 40 files marked started, then done once the next is started: at every
    compaction one file waits for its second edit. The lines around its last change are
    re-read into the view, so the model edits it on without reading it again (files
    changed twice and left were re-read whole instead, and 8 of 100 files read twice)."""
    files = 40
    recorder, events, _server, planted = _run(
        make_settings,
        workspace,
        files=files,
        persona=persona,
        summarizer="faithful",
        edits=True,
        lag=True,
    )
    assert sum(e["type"] == "compaction" for e in events) >= 2
    assert recorder.reread_files() == 0
    assert recorder.reedited_files() == 0 and len(recorder.edits) == 2 * files
    assert marked_done(workspace, [rel_path(i) for i in range(1, files + 1)]) == files
    assert recorder.reports and codes_in(recorder.reports[-1]) == planted


@pytest.mark.parametrize(("persona", "tier"), [("silent", "compaction"), ("note_taker", "masking")])
def test_facts_in_outputs_that_left_the_prompt_are_answerable_after_the_task(
    make_settings: Callable[..., Settings], workspace: Path, persona: PersonaKind, tier: str
) -> None:
    """Files bigger than a page, then a question: every code read is still in view,
    although the outputs that held them left the prompt. A model that only calls tools
    gets them distilled into a summary (masking never hides what it did not restate);
    one that notes what it reads has its outputs masked."""
    recorder, events, _server, planted = _run(
        make_settings,
        workspace,
        files=16,
        persona=persona,
        summarizer="faithful",
        size="big",
        question=True,
    )
    assert any(e["type"] == tier for e in events)
    assert codes_in(recorder.answers[-1]) == planted


def test_facts_in_the_middle_of_pages_bigger_than_two_thousand_tokens_reach_the_summary(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """At a 64k window a read page holds a whole 20 KB file (about 4,400 tokens) and
    the part a compaction summarizes fits one summarizer call. Every tool result still
    reaches the summarizer whole: the code on each file's middle line is in the summary,
    so a model that only calls tools answers every code after the task (a fixed cap of
    2,000 tokens per result cut the middle out of every page: 6/30)."""
    recorder, events, _server, planted = _run(
        make_settings,
        workspace,
        files=16,
        persona="silent",
        summarizer="faithful",
        size="big",
        fact_at="middle",
        question=True,
        window=64_000,
    )
    assert any(e["type"] == "compaction" for e in events)
    assert codes_in(recorder.answers[-1]) == planted
    assert recorder.reread_files() == 0


def test_a_code_on_the_middle_line_of_a_20_kb_file_is_found_in_one_read_at_16k(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """A read page holds at least 3,000 tokens where the window leaves room for it: a
    model reading 20 KB files (about 4,400 tokens) for a code on their middle line reads
    each once. Pages of a tenth of the budget (1,480 tokens at 16k) took a second read
    of every file, each one more call resending the whole prompt."""
    recorder, _events, server, planted = _run(
        make_settings,
        workspace,
        files=6,
        persona="silent",
        summarizer="faithful",
        size="big",
        fact_at="middle",
    )
    assert sorted(recorder.reads) == sorted((name, 0) for name, _ in recorder.reads)
    assert len(recorder.reads) == 6
    assert codes_in(recorder.reports[-1]) == planted
    assert len(_main(server)) == 8  # six reads, the report, the answer


def test_facts_in_the_middle_of_small_outputs_survive_a_part_larger_than_one_summary_call(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """A summary model of its own with an 8k window (gpt-4) behind a 16k main model: the
    part a compaction summarizes is more than one summarizer call holds. Cutting every
    result evenly to make it fit took a few lines out of the middle of each, the code on
    the middle line of 16 of 40 files with it (when a part at 97% of a 16k budget was
    a little over one call); the rest goes to a second call instead, and every code
    reaches the report."""
    recorder, events, server, planted = _run(
        make_settings,
        workspace,
        files=40,
        persona="silent",
        summarizer="faithful",
        fact_at="middle",
        env={"AGENTGRAPH_SUMMARY_MODEL": "gpt-4"},
        # Six reads a reply: a spill of the newest reads is larger than a compaction
        # leaves for the next summary (SUMMARY_SPILL_KEPT_BUDGET_FRACTION).
        batch=6,
    )
    compactions = [e for e in events if e["type"] == "compaction"]
    assert compactions
    summary_calls = [r for r in server.requests if isinstance(r, dict) and is_summary(r)]
    assert len(summary_calls) > len(compactions), "a part went to a second call"
    assert codes_in(recorder.reports[-1]) == planted
    assert recorder.reread_files() == 0


def test_a_read_that_takes_the_prompt_past_the_budget_compacts_instead_of_cutting(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """With the threshold near the budget, one page of a big file takes the prompt from
    under the threshold to over the budget. The view then cuts every tool output to fit,
    which puts it under the threshold again: that must still compact (summarizing the
    originals), or the facts the cut removed are gone for the rest of the session."""
    recorder, events, _server, planted = _run(
        make_settings,
        workspace,
        files=12,
        persona="silent",
        summarizer="faithful",
        size="big",
        question=True,
        env={"AGENTGRAPH_COMPACT_THRESHOLD": "0.99"},
    )
    assert any(e["type"] == "compaction" for e in events)
    assert codes_in(recorder.answers[-1]) == planted


def test_a_local_model_asks_for_no_more_reply_than_its_prompt_leaves(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """A model whose output limit nothing states gets a reply cap (a fifth of the
    window); a request whose prompt leaves less asks for what is left, the summarizer's
    too. A strict server that counts prompt + ``max_tokens`` against the window rejects
    none, and prompts grow past the 64% of the window where a fixed 20% reserve had them
    compacted (80% of the 80% left)."""
    recorder, _events, server, planted = _run(
        make_settings,
        workspace,
        files=60,
        persona="silent",
        summarizer="faithful",
        env={"AGENTGRAPH_MODEL": "qwen2.5-coder-1.5b"},
        count_max_tokens=True,
    )
    requests = [r for r in server.requests if isinstance(r, dict)]
    asked = [r.get("max_completion_tokens") or r.get("max_tokens") for r in requests]
    assert all(isinstance(a, int) for a in asked)
    cap = int(WINDOW_TOKENS * SMALL_WINDOW_REPLY_CAP_FRACTION)
    assert max(asked) == cap and min(asked) < cap
    sizes = [FakeOpenAIServer.token_estimate(r) for r in requests]
    assert max(sizes) > 0.7 * WINDOW_TOKENS
    assert all(size + a <= WINDOW_TOKENS for size, a in zip(sizes, asked, strict=True))
    assert codes_in(recorder.reports[-1]) == planted


def test_a_lossy_summarizer_still_leaves_most_facts_answerable(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """30 files bigger than a page, a model that only calls tools, and a summarizer that
    leaves out every other file it is shown: the files a summary does not name are asked
    about again with only their readings, and earlier summaries are carried verbatim, so
    at least two thirds of the codes are still answerable after the task."""
    recorder, events, _server, planted = _run(
        make_settings,
        workspace,
        files=30,
        persona="silent",
        summarizer="lossy",
        size="big",
        question=True,
    )
    assert any(e["type"] == "compaction" for e in events)
    assert len(codes_in(recorder.answers[-1]) & planted) >= 20
    assert recorder.reread_files() == 0


def test_a_summarizer_that_keeps_only_the_task_leaves_the_newest_readings_in_view(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """A summarizer that writes one line (the task) and names no file it was shown,
    even when asked about them again: the readings it left out keep what room the
    compaction leaves (the newest first, an excerpt of leading lines each), so after the
    task the model still sees the codes of the last files it read (one code when a
    compaction kept only the newest call)."""
    recorder, events, _server, planted = _run(
        make_settings,
        workspace,
        files=16,
        persona="silent",
        summarizer="terse",
        size="big",
        question=True,
    )
    assert any(e["type"] == "compaction" for e in events)
    assert len(codes_in(recorder.answers[-1]) & planted) >= LEFT_OUT_CODES_MIN
    assert recorder.reread_files() == 0


def test_a_lossy_summarizer_at_a_64k_window_makes_no_file_read_twice(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """At 64k a compaction summarizes about 15 of the 30 big files, and a summarizer
    that leaves out half of every list leaves out more than two follow-up questions
    recover: the files still unnamed are asked about until none is left, so a model
    that re-reads whatever it read but cannot see reads nothing twice."""
    recorder, events, _server, planted = _run(
        make_settings,
        workspace,
        files=30,
        persona="re_reader",
        summarizer="lossy",
        size="big",
        question=True,
        window=64_000,
    )
    assert any(e["type"] == "compaction" for e in events)
    assert recorder.reread_files() == 0
    assert len(codes_in(recorder.answers[-1]) & planted) >= 20


def test_a_lossy_summarizer_at_8k_leaves_an_editing_task_no_file_to_read_twice(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """At 8k a summarizer that keeps every other file's name and every other code names
    the files of the coded half only in their code lines (``CODE part_017: …``): each
    file a summary keeps something of counts as named, so the follow-up questions go to
    the files it kept nothing of. Asked about every file of the part again, the files
    left unsaid were re-read after each compaction until the spiral guard stopped the
    re-reading model."""
    files = 100
    recorder, events, _server, planted = _run(
        make_settings,
        workspace,
        files=files,
        persona="re_reader",
        summarizer="lossy",
        window=8192,
        edits=True,
    )
    assert sum(e["type"] == "compaction" for e in events) >= 5
    assert recorder.reread_files() == 0
    assert marked_done(workspace, [rel_path(i) for i in range(1, files + 1)]) == files
    assert recorder.reports and codes_in(recorder.reports[-1]) == planted


@pytest.mark.parametrize("shell", [None, "heredoc"])
def test_files_changed_exactly_alike_are_one_ledger_line_after_a_compaction(
    make_settings: Callable[..., Settings], workspace: Path, shell: ShellStyle | None
) -> None:
    """40 files marked done one by one, with edit_file or rewritten whole through a
    here-document: every ledger a compaction sends names them in runs, one line each,
    with the lines each changed, where it had one line a file (~770 tokens in every
    prompt of a 60-file task, within the ledger's share)."""
    files = 40
    _recorder, events, server, _planted = _run(
        make_settings,
        workspace,
        files=files,
        persona="silent",
        summarizer="faithful",
        edits=True,
        shell=shell,
    )
    assert sum(e["type"] == "compaction" for e in events) >= 2
    assert marked_done(workspace, [rel_path(i) for i in range(1, files + 1)]) == files
    how = "edited (+1 −1 lines each)" if shell is None else "written by a command (+"
    ledgers = _sent(server, "[Progress ledger")
    assert ledgers
    for ledger in ledgers:
        changed = ledger.split("Files created or changed:\n", 1)[1].split("\n")
        # The report the task ends with is a file of its own when a compaction follows it.
        changed = [line for line in changed if line.startswith("- ") and "report.md" not in line]
        assert len(changed) == 1 and how in changed[0], changed
        assert changed[0].startswith("- logs/ part_001.txt … part_0"), changed
        assert "lines each)" in changed[0]


@pytest.mark.parametrize(
    ("edits", "style"),
    [(False, "cat"), (True, "cat"), (False, "nl"), (False, "grep"), (False, "cd"), (True, "cd")],
)
def test_files_read_through_the_shell_are_not_read_twice_with_a_lossy_summarizer(
    make_settings: Callable[..., Settings], workspace: Path, edits: bool, style: ShellStyle
) -> None:
    """A model that reads with ``cat`` in run_bash, as models trained on a shell do, or
    in numbered pages (``nl -ba F | sed -n '1,200p'``, as Codex's models do), and a
    summarizer that drops half of every list: the files the summary leaves unsaid are
    asked about as files read with read_file are. Counted as commands, they were never
    asked about, and the re-reading model read 49 of 100 files twice. So is a file a
    command that is no plain read printed (``grep -v '^#' F``): the ledger lists such a
    command as a command, but what it printed is a reading of the one file it names
    (before, 27 of 60 files read twice)."""
    files = 60
    recorder, events, _server, planted = _run(
        make_settings,
        workspace,
        files=files,
        persona="re_reader",
        summarizer="lossy",
        fact_at="middle",
        edits=edits,
        shell=style,
    )
    assert sum(e["type"] == "compaction" for e in events) >= 2
    assert len(recorder.reads) >= files, "every file was read through the shell"
    assert recorder.reread_files() == 0
    assert recorder.reports and codes_in(recorder.reports[-1]) == planted
    if edits:
        assert marked_done(workspace, [rel_path(i) for i in range(1, files + 1)]) == files


def test_a_file_rewritten_whole_after_a_compaction_keeps_every_line(
    make_settings: Callable[..., Settings], workspace: Path, tmp_path: Path
) -> None:
    """A model that changes a file by writing it whole through a here-document, from the
    newest whole text of it in view, and marks each file started, then done once the
    next is started: after a compaction the file waiting for its second change is
    re-read from disk. Cut head and tail but headed "lines 1-37 of 37", its leading
    lines passed for the whole file, and the model wrote them back as the file: 22 of
    100 files lost lines at 16k. The file's text was the model's own call, so it is
    shown again whole or not at all (the ledger names it written): the page of its
    leading lines shown after that was read past all the same, and carried by every
    request after the compaction."""
    files = 40
    paths, originals = _originals(tmp_path / "originals", files)
    _recorder, events, server, _planted = _run(
        make_settings,
        workspace,
        files=files,
        persona="silent",
        summarizer="faithful",
        edits=True,
        lag=True,
        shell="heredoc",
    )
    assert sum(e["type"] == "compaction" for e in events) >= 3
    assert marked_done(workspace, paths) == files
    assert marked_done(workspace, paths, originals) == files
    shown = {
        text.split("\n", 1)[0] for text in _sent(server, "[File re-read from disk after compaction")
    }
    # Over a file's share here (37 lines): shown whole where the summary names it as
    # work left, else not at all; never a page of one.
    assert shown
    assert all(re.search(r"lines 1-(\d+) of \1\]$", header) for header in shown), shown


@pytest.mark.parametrize(
    ("persona", "summarizer"),
    [("silent", "faithful"), ("re_reader", "faithful"), ("re_reader", "lossy")],
)
def test_files_read_several_in_one_command_are_each_kept(
    make_settings: Callable[..., Settings],
    workspace: Path,
    persona: PersonaKind,
    summarizer: SummarizerKind,
) -> None:
    """A model that prints four files in one ``cat A B C D``, as models skimming a folder
    do: the 2.9k-token output was cut to a tenth of a 16k window, so the middle files'
    codes reached neither the model nor a summary (the silent model kept half the codes,
    the re-reader read half the files twice), and the command was a reading of no file
    to the summary's check of what it left out. Now it is a page, as a read_file page
    is, and each file it printed whole is a file read."""
    files = 40
    recorder, events, _server, planted = _run(
        make_settings,
        workspace,
        files=files,
        persona=persona,
        summarizer=summarizer,
        fact_at="middle",
        batch=4,
        shell="multi",
    )
    assert recorder.reread_files() == 0
    assert recorder.reports and codes_in(recorder.reports[-1]) == planted
    assert len(recorder.reads) >= files
    assert sum(e["type"] == "compaction" for e in events) >= 2


@pytest.mark.parametrize("window", [WINDOW_TOKENS, 8192], ids=["16k", "8k"])
@pytest.mark.parametrize("summarizer", ["faithful", "lossy"])
def test_eight_files_printed_by_one_command_are_each_shown(
    make_settings: Callable[..., Settings],
    workspace: Path,
    summarizer: SummarizerKind,
    window: int,
) -> None:
    """A model that prints eight small files in one ``cat`` (5.8k tokens): at 16k the
    output was cut to one read page, its middle files hidden before the model saw them,
    and a model that re-reads what it cannot see read them again (39 of 100 files).
    Eight read_file calls of one reply each get a page; so does each file the command
    shows, within the share a compaction keeps for results not yet seen. At 8k the
    output is over that share; cut head and tail, the files in the middle were gone
    whole (nothing in ``cat``'s output tells where a file ends) and the re-reading model
    read them again (4 of 100). Cut file by file, each file shows its leading lines and
    a page note naming where to read on, as eight read_file calls of one reply would."""
    files = 40
    recorder, _events, server, planted = _run(
        make_settings,
        workspace,
        files=files,
        persona="re_reader",
        summarizer=summarizer,
        batch=8,
        shell="multi",
        window=window,
    )
    assert recorder.reread_files() == 0
    assert recorder.reports and codes_in(recorder.reports[-1]) == planted
    assert len(recorder.reads) == files
    notes = [
        m["content"]
        for body in _main(server)
        for m in body["messages"]
        if "logs/part_005.txt: [showing lines 1-" in str(m.get("content") or "")
    ]
    assert bool(notes) == (window < WINDOW_TOKENS), "cut file by file where over the share"


def _assert_every_file_marked_once(
    make_settings: Callable[..., Settings],
    workspace: Path,
    summarizer: SummarizerKind,
    lag: bool,
    window: int,
    shell: ShellStyle,
    rereads_per_compaction: int = 0,
) -> None:
    """The re-reading model marks 60 files through the shell in ``shell``'s style: every
    file marked with nothing else of it changed, none changed twice, at most
    ``rereads_per_compaction`` files read twice a compaction, every code in its report,
    and at least two compactions on the way."""
    files = 60
    paths, originals = _originals(workspace.parent / "originals", files)
    recorder, events, _server, planted = _run(
        make_settings,
        workspace,
        files=files,
        persona="re_reader",
        summarizer=summarizer,
        edits=True,
        lag=lag,
        window=window,
        shell=shell,
    )
    assert marked_done(workspace, paths, originals) == files
    compactions = sum(e["type"] == "compaction" for e in events)
    assert recorder.reread_files() <= rereads_per_compaction * compactions
    assert recorder.reedited_files() == 0
    assert recorder.reports and codes_in(recorder.reports[-1]) == planted
    assert compactions >= 2


@pytest.mark.parametrize(
    ("summarizer", "lag", "window"),
    [("faithful", False, WINDOW_TOKENS), ("lossy", False, WINDOW_TOKENS), ("faithful", True, 8192)],
)
def test_files_edited_through_the_shell_are_not_edited_or_read_twice(
    make_settings: Callable[..., Settings],
    workspace: Path,
    summarizer: SummarizerKind,
    lag: bool,
    window: int,
) -> None:
    """A model that marks each file done with ``sed -i 's/…open/…done/' F``, as models
    trained on a shell edit: each such command was a command in the ledger (one line
    each, the oldest dropped past its share) and no file changed, and a summary's list of
    the files marked done was folded into a count as if the ledger listed them. The model
    read the files it could no longer see done again until the spiral guard stopped it
    (55 of 100 marked at 16k with the faithful summarizer). Now ``sed -i`` that exited 0
    changed its files, in the ledger as an edit does. With a lag (each file marked
    started, then done once the next is started) at 8k the file waiting for its second
    change was not among the files re-read after a compaction (a command's change was
    none), and the model read it again; now it is, around the text the command wrote."""
    _assert_every_file_marked_once(make_settings, workspace, summarizer, lag, window, "sed")


@pytest.mark.parametrize(("summarizer", "lag"), [("faithful", True), ("lossy", False)])
def test_files_changed_by_a_command_no_parser_follows_are_not_changed_or_read_twice(
    make_settings: Callable[..., Settings],
    workspace: Path,
    summarizer: SummarizerKind,
    lag: bool,
) -> None:
    """A model that marks each file done with ``perl -pi -e 's/…open/…done/' F``: no
    reading of the command line tells which file such a command changes (nor a script's,
    a ``mv``'s, a formatter's), so each was a command in the ledger and no file changed,
    and the model read the files it could no longer see marked again. Now the workspace,
    scanned around each step that runs a command, tells: the file is edited by a command
    in the ledger and shown again after a compaction."""
    _assert_every_file_marked_once(make_settings, workspace, summarizer, lag, WINDOW_TOKENS, "perl")


@pytest.mark.parametrize(
    ("summarizer", "lag", "window"),
    [("faithful", True, WINDOW_TOKENS), ("faithful", True, 8192), ("lossy", False, WINDOW_TOKENS)],
)
def test_files_written_through_a_here_document_are_not_written_or_read_twice(
    make_settings: Callable[..., Settings],
    workspace: Path,
    summarizer: SummarizerKind,
    lag: bool,
    window: int,
) -> None:
    """A model that marks each file by writing it whole with ``cat > F <<'EOF'``, as
    models that rewrite a file to change it do: each such command was a command in the
    ledger, named by its first line, and no file changed, so a compaction neither listed
    the file as changed nor showed it again. The model read again the file waiting for
    its second change (with a lag), or lost which files it had marked and ran to its
    loop cap (the lossy summarizer). Now such a command that exited 0 wrote its file, in
    the ledger as a write_file call does, and the file is shown again. With a lag, the
    file waiting for its second change is over the room a file has at 16k: shown only
    when the summary names it as work left, whole, so the model, which rewrites it whole,
    does not read it again (it did once a compaction before: 12 of 60 files); shown cut
    head and tail under a whole-file heading, it had written the head alone. At 8k the
    room holds one such file: the one the summary names first, the next step (the one
    changed last was shown, and the model read the other: 10 of 60 files)."""
    _assert_every_file_marked_once(make_settings, workspace, summarizer, lag, window, "heredoc")


def test_what_a_cut_took_from_an_output_reaches_the_summary(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """Eight files printed by one ``cat`` at an 8k window: more than the share a
    compaction keeps for results not yet seen, so the history keeps the cut (each
    file's leading lines) and the whole output goes to the session's artifacts. The
    summarizer was given the cut, so what it took was in no summary: a model printing
    eight small files with one ``cat`` at 16k, when such an output was cut to one page,
    answered with 64 of 100 codes (deepagents, which cuts nothing there, with all). The
    summarizer reads the saved copy: the last line of the first file, which the model
    never saw, is in a summary request. (The last commands' outputs reach no summary
    before the answer: no compaction comes after them.)"""
    files, batch = 40, 8
    recorder, events, server, planted = _run(
        make_settings,
        workspace,
        files=files,
        persona="silent",
        summarizer="faithful",
        fact_at="middle",
        batch=batch,
        shell="multi",
        question=True,
        window=8192,
    )
    last_line = (workspace / "logs" / "part_001.txt").read_text().splitlines()[-1]
    seen = [str(m.get("content")) for body in _main(server) for m in body["messages"]]
    assert any("logs/part_001.txt: [showing lines 1-" in text for text in seen)
    assert not any(last_line in text for text in seen), "the cut took it from the model"
    summaries = [json.dumps(r["messages"]) for r in server.requests if is_summary(r)]
    assert any(last_line in text for text in summaries)
    summarized = {c for c in planted if int(c.split("part_")[1][:3]) <= files - 2 * batch}
    assert recorder.answers and summarized <= codes_in(recorder.answers[-1])
    assert sum(e["type"] == "compaction" for e in events) >= 2
    assert recorder.reread_files() == 0


def test_a_verbose_summarizer_never_reaches_the_prompt_cut(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """A summarizer that writes far more than its share: its summaries take the room of
    kept outputs until one would need more than the hard target, and that one is asked
    for again, shorter. No summary in any prompt carries a truncation marker, and no
    progress is lost."""
    recorder, events, server, planted = _run(
        make_settings, workspace, files=120, persona="silent", summarizer="verbose"
    )
    compactions = [e for e in events if e["type"] == "compaction"]
    assert compactions and not any(e["summary_cut"] for e in compactions)
    assert cut_summaries(_main(server)) == 0
    shortened = [r for r in server.requests if is_summary(r) and "at most" in str(r["messages"])]
    assert shortened, "the summarizer was asked again, with a limit"
    assert recorder.reread_files() == 0
    assert codes_in(recorder.reports[-1]) == planted


@pytest.mark.parametrize("stated", [True, False], ids=["configured", "provider-cap"])
def test_a_summary_longer_than_the_output_limit_is_asked_for_within_it(
    make_settings: Callable[..., Settings], workspace: Path, stated: bool
) -> None:
    """A server stops a reply at its output limit, and a summarizer writing far more
    than that would lose its summary's end (the newest files read, the data kept last).
    A limit agentgraph knows (``AGENTGRAPH_MAX_OUTPUT_TOKENS``) is told to the
    summarizer, so no reply is cut; one it cannot know (a provider's own cap) cuts a
    reply (``finish_reason`` ``length``), which is never used as if whole but asked for
    again, told where it stopped. Either way every code reaches the report."""
    recorder, events, server, planted = _run(
        make_settings,
        workspace,
        files=60,
        persona="silent",
        summarizer="verbose",
        env={"AGENTGRAPH_MAX_OUTPUT_TOKENS": str(SUMMARY_OUTPUT_CAP_TOKENS)} if stated else None,
        output_cap=None if stated else SUMMARY_OUTPUT_CAP_TOKENS,
    )
    compactions = [e for e in events if e["type"] == "compaction"]
    assert compactions and not any(e["summary_cut"] for e in compactions)
    assert (_cut_replies(server) > 0) is not stated
    assert codes_in(recorder.reports[-1]) == planted
    assert recorder.reread_files() == 0


def test_a_provoked_spiral_stops_with_the_named_error(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """A summarizer that keeps nothing and a model that re-reads what it cannot see:
    every compaction is followed only by re-reads. The run stops with one line naming
    the cause instead of burning its call cap (the strict server saw no invalid
    request up to there)."""
    with pytest.raises(CompactionSpiralError, match="compaction is making no progress"):
        _run(make_settings, workspace, files=60, persona="re_reader", summarizer="terse")


def test_a_spiral_of_history_searches_stops_with_the_named_error(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """The same summarizer, 30 files of 20 KB at an 8k window, and a model that
    searches its history for what it cannot see before it reads it again: each search
    brings a code back, the next compaction summarizes it away, and the model searches
    again. A search's output changes as the transcript grows, so such calls looked new
    and the run went round until its loop cap; the same search again brings back what
    was done, it does none, and the run stops with the named error."""
    with pytest.raises(CompactionSpiralError, match="compaction is making no progress"):
        _run(
            make_settings,
            workspace,
            files=30,
            size="big",
            persona="searcher",
            summarizer="terse",
            window=8_192,
        )


def test_a_provoked_spiral_ends_the_cli_run_with_one_line_and_exit_1(
    home: Path, workspace: Path
) -> None:
    """The same spiral through ``agentgraph run``: one line naming the cause on stderr,
    exit 1, the session kept (``--json`` carries the same line as its error)."""
    files = 60
    make_workspace(workspace, files=files, size="small")
    model = ScriptedModel(Persona("re_reader"), Summarizer("terse"), Recorder())
    with FakeOpenAIServer([model], window=WINDOW_TOKENS, on_exhausted="repeat_last") as server:
        env = server_env(
            home,
            server.url,
            "sk-test",
            AGENTGRAPH_CONTEXT_WINDOW=str(WINDOW_TOKENS),
            AGENTGRAPH_PROVIDER_MAX_RETRIES="0",
            MAX_LOOPS=str(3 * files + 20),
        )
        result = run_cli(
            ["run", "--json", "--thread", "spiral", task_text(1, files)], cwd=workspace, env=env
        )
    assert result.returncode == 1, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("agentgraph: ")]
    assert len(lines) == 1 and "compaction is making no progress" in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    payload = json.loads(result.stdout)
    assert payload["exit_code"] == 1 and "compaction is making no progress" in payload["error"]
    listed = run_cli(["sessions", "list"], cwd=workspace, env=cli_env(home))
    assert "spiral" in listed.stdout


# Modules of the parallel-read test: name → the constant planted on its third line.
def _one_turn(
    make_settings: Callable[..., Settings],
    workspace: Path,
    reply: Callable[[dict[str, Any]], dict[str, Any]],
    request: str,
    *,
    window: int,
    max_loops: int,
    **env: str,
) -> tuple[TurnResult, list[dict[str, Any]], FakeOpenAIServer]:
    """One turn of the real graph against the strict loopback server answering with
    ``reply``; the server saw no invalid request and no overflow."""
    events: list[dict[str, Any]] = []
    with FakeOpenAIServer([reply], window=window) as server:
        settings = make_settings(
            OPENAI_BASE_URL=server.url,
            OPENAI_API_KEY="sk-test",
            AGENTGRAPH_CONTEXT_WINDOW=str(window),
            AGENTGRAPH_PROVIDER_MAX_RETRIES="0",
            MAX_LOOPS=str(max_loops),
            **env,
        )
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            result = agent.run_turn("one", request, workspace, events.append)
    assert server.violations == [] and server.overflow_count == 0
    return result, events, server


LOCAL_WINDOW_TOKENS = 8_192
PARALLEL_MODULES = {
    "config": 17,
    "storage": 28,
    "network": 39,
    "parser": 50,
    "report": 61,
    "cache": 72,
    "auth": 83,
    "queue": 94,
}
PARALLEL_HELPERS = 140  # functions per module: about 2,500 tokens a file


def _parallel_reader(body: dict[str, Any]) -> dict[str, Any]:
    """A stateless model that reads eight modules and greps each for its constant in one
    reply, answers once it sees every constant, and reads them all again otherwise; as
    summarizer, it names the files but not the values (as a 1.5B model did)."""
    if is_summary(body):
        names = ", ".join(f"{m}.py" for m in PARALLEL_MODULES)
        return {"content": f"Read {names} and grepped them; the values are in the grep output."}
    text = json.dumps(body["messages"])
    seen = {m: f"TIMEOUT_SECONDS = {v}" in text for m, v in PARALLEL_MODULES.items()}
    greps = [f"{m}.py:3: TIMEOUT_SECONDS = {v}" for m, v in PARALLEL_MODULES.items()]
    if all(g in text for g in greps):
        return {"content": "; ".join(f"{m}.py: {v}" for m, v in PARALLEL_MODULES.items())}
    calls = [{"name": "read_file", "arguments": {"path": f"{m}.py"}} for m in seen]
    calls += [
        {"name": "grep", "arguments": {"pattern": "TIMEOUT_SECONDS", "path": f"{m}.py"}}
        for m in seen
    ]
    return {"tool_calls": calls}


def test_results_the_model_has_not_seen_survive_the_compaction_they_trigger(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """One reply reads eight modules and greps each for its constant; together the results
    pass the compaction point, so a compaction comes before the model has seen any of
    them. They stay in its prompt (the large ones cut to share the room), so it answers
    from the greps; summarized away unseen, with a summary that dropped the values, they
    had it read all eight again, compaction after compaction, until the spiral guard."""
    for name, value in PARALLEL_MODULES.items():
        helpers = "\n".join(
            f"def {name}_helper_{k}(value):\n    return value + {k}\n"
            for k in range(PARALLEL_HELPERS)
        )
        (workspace / f"{name}.py").write_text(
            f"TITLE = {name!r}\n\nTIMEOUT_SECONDS = {value}\n\n{helpers}"
        )
    result, events, server = _one_turn(
        make_settings,
        workspace,
        _parallel_reader,
        "What is TIMEOUT_SECONDS in each module?",
        window=WINDOW_TOKENS,
        max_loops=20,
    )
    assert [e["type"] for e in events].count("compaction") == 1
    assert result.answer == "; ".join(f"{m}.py: {v}" for m, v in PARALLEL_MODULES.items())
    reads = [
        call["function"]["arguments"]
        for r in _main(server)
        for m in r["messages"]
        for call in m.get("tool_calls") or []
        if call["function"]["name"] == "read_file"
    ]
    assert len(reads) == len(PARALLEL_MODULES)


CONFIG_VALUES = {"alpha": 17, "beta": 39, "gamma": 50, "delta": 61}
CONFIG_CAT = "cat " + " ".join(f"config/{name}.py" for name in CONFIG_VALUES)
CONFIG_VALUE_RE = re.compile(r"# (\w+) service configuration\\nTIMEOUT_SECONDS = (\d+)")


def _config_reader(body: dict[str, Any]) -> dict[str, Any]:
    """A stateless model that prints four config files with one ``cat`` and answers
    with the value of each it sees once it sees the command's result (as a local 1.5B
    model did); as summarizer, it names the files but not the values."""
    if is_summary(body):
        return {"content": f"Ran {CONFIG_CAT}; the values are in its output."}
    if not any(m.get("role") == "tool" for m in body["messages"]):
        return {"tool_calls": [{"name": "run_bash", "arguments": {"command": CONFIG_CAT}}]}
    seen = dict(CONFIG_VALUE_RE.findall(json.dumps(body["messages"])))
    return {"content": "; ".join(f"{n}: {seen.get(n, '?')}" for n in CONFIG_VALUES)}


def test_files_one_command_printed_stay_shown_each_when_the_compaction_cuts_them_again(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """Four config files of about 2k tokens printed by one ``cat`` at an 8k window, by a
    model with no offline tokenizer: cut file by file, the output still passes the
    compaction point beside the system prompt and the tools, so a compaction comes
    before the model has seen it and keeps it cut to share the room. Cut head and tail
    there, it showed the first file's value alone, and a local 1.5B model answered that
    value for all four; cut file by file again, each file's value is in view."""
    rules = "".join(
        f"- Rule {n}: keep the service options of section {n} in order.\n" for n in range(90)
    )
    (workspace / "AGENTS.md").write_text(f"# Project instructions\n{rules}")
    (workspace / "config").mkdir()
    for name, value in CONFIG_VALUES.items():
        options = "".join(
            f"OPTION_{i:03d} = '{name}-value-{i * 7 % 101}'  # tuning knob {i} for {name}\n"
            for i in range(120)
        )
        text = f"# {name} service configuration\nTIMEOUT_SECONDS = {value}\n{options}"
        (workspace / "config" / f"{name}.py").write_text(text)
    result, events, server = _one_turn(
        make_settings,
        workspace,
        _config_reader,
        f"Run {CONFIG_CAT}, then tell me TIMEOUT_SECONDS of each file.",
        window=LOCAL_WINDOW_TOKENS,
        max_loops=5,
        AGENTGRAPH_MODEL="qwen2.5-coder-1.5b",
    )
    assert [e["type"] for e in events].count("compaction") == 1
    assert result.answer == "; ".join(f"{n}: {v}" for n, v in CONFIG_VALUES.items())
    answered = _main(server)[-1]["messages"]
    assert "config/delta.py: [showing lines 1-" in json.dumps(answered)


def test_parallel_results_past_the_compaction_point_that_fit_the_window_are_read_whole(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """One reply reads eight logs at an 8k window: their results pass the compaction
    point but fit the window. A compaction before the model has seen them could only
    summarize them unseen and keep them cut; the model reads them whole instead, and the
    compaction comes once there is work it has answered."""
    recorder, events, server, codes = _run(
        make_settings,
        workspace,
        files=8,
        persona="silent",
        summarizer="faithful",
        window=8192,
        batch=8,
        fact_at="middle",
        env={"AGENTGRAPH_COMPACT_THRESHOLD": "0.85"},
    )
    first_reads = _main(server)[1]["messages"]
    assert [m["role"] for m in first_reads][1:] == ["user", "assistant", *["tool"] * 8]
    logs = sorted((workspace / "logs").iterdir())
    for path, result in zip(logs, first_reads[-8:], strict=True):
        assert result["content"].endswith(path.read_text(encoding="utf-8").splitlines()[-1])
    assert [e["trigger"] for e in events if e["type"] == "compaction"] == ["auto"]
    assert codes_in(recorder.reports[-1]) == codes


def test_a_lossy_summarizer_loses_nothing_when_earlier_summaries_are_summarized_again(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """100 files read eight per reply by a model that only calls tools, with a summarizer
    that drops every other file it is shown: each compaction's summary is completed by
    asking about the files it left out, and once the stacked summaries outgrow their
    room they are summarized again, which drops every other file again. The files those
    summaries named are asked about too, with their readings from the transcript, in as
    many calls as the readings take (58/100 when only the newest part's files were);
    what the rewrite dropped from files it still names is carried over from the earlier
    summaries word for word (80/100 without). What is still lost is what a summary of
    the newest part drops from files it names: no earlier text holds it."""
    recorder, events, _server, planted = _run(
        make_settings,
        workspace,
        files=100,
        persona="silent",
        summarizer="lossy",
        fact_at="middle",
        question=True,
        batch=8,
    )
    assert sum(e["type"] == "compaction" for e in events) >= 5
    recalled = len(codes_in(recorder.answers[-1]) & planted)
    assert recalled >= 90, recalled
    assert recorder.reread_files() == 0


RETRY_LIMIT_LINE = "RETRY_LIMIT = 37"


def _one_file_reader(body: dict[str, Any]) -> dict[str, Any]:
    """A stateless model that reads service.py once and answers with the value it sees;
    as summarizer, it names the file but not the value (as a 1.5B model did)."""
    if is_summary(body):
        return {"content": "Read service.py; RETRY_LIMIT is defined in it."}
    text = json.dumps(body["messages"])
    if RETRY_LIMIT_LINE in text:
        return {"content": "37"}
    if any(m.get("role") == "tool" for m in body["messages"]):
        return {"content": "not found"}
    return {"tool_calls": [{"name": "read_file", "arguments": {"path": "service.py"}}]}


def test_a_local_model_reads_a_file_that_fits_without_a_compaction(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """A model with no offline tokenizer, whose server renders the tool schemas as their
    JSON (as a local Qwen or Llama template does), reads a file that fits its 8k window.
    Counted by OpenAI's formula, the schemas came to half of what the server counted; the
    ratio of the first request then scaled the read, so the prompt looked past the
    compaction point, and a compaction summarized the read before the model saw it (a
    1.5B summarizer kept the line number and lost the value)."""
    rules = "\n".join(
        f"def rule_{n}(order):\n    factor = {n % 97} / 100\n    return order * (1 + factor)\n"
        for n in range(60)
    )
    (workspace / "service.py").write_text(f"{rules}\n{RETRY_LIMIT_LINE}\n\n{rules}")
    result, events, server = _one_turn(
        make_settings,
        workspace,
        _one_file_reader,
        "What is RETRY_LIMIT?",
        window=LOCAL_WINDOW_TOKENS,
        max_loops=5,
        AGENTGRAPH_MODEL="qwen2.5-coder-1.5b",
    )
    sizes = [FakeOpenAIServer.token_estimate(r) for r in _main(server)]
    assert max(sizes) < 0.7 * LOCAL_WINDOW_TOKENS  # the read fits, as the server counts it
    assert [e["type"] for e in events].count("compaction") == 0
    assert result.answer == "37"
    assert len(_main(server)) == 2


FIRST_PAGE_RE = re.compile(
    r"service\.py: \[showing lines 1-(\d+) of (\d+); call read_file with offset=(\d+) to continue\]"
)
PAGE_NOTE_RE = re.compile(r"call read_file with offset=(\d+) to continue\]")


def _cat_reader(body: dict[str, Any]) -> dict[str, Any]:
    """A stateless model that prints service.py with the command the request names and,
    until it sees RETRY_LIMIT, reads on from the offset the note of its last result
    names; as summarizer, it names the file but no value."""
    if is_summary(body):
        return {"content": "Printed service.py; RETRY_LIMIT not seen yet."}
    if RETRY_LIMIT_LINE in json.dumps(body["messages"]):
        return {"content": "37"}
    results = [m for m in body["messages"] if m.get("role") == "tool"]
    if not results:
        asked = re.search(r"Run `([^`]+)`", json.dumps(body["messages"]))
        command = asked.group(1) if asked else "cat service.py"
        return {"tool_calls": [{"name": "run_bash", "arguments": {"command": command}}]}
    offsets = PAGE_NOTE_RE.findall(str(results[-1].get("content") or ""))
    if not offsets:
        return {"content": "not found"}
    call = {"name": "read_file", "arguments": {"path": "service.py", "offset": int(offsets[-1])}}
    return {"tool_calls": [call]}


@pytest.mark.parametrize(
    ("command", "numbered"),
    [
        ("cat service.py", False),
        ("sed -n '1,1100p' service.py", False),
        ("nl -ba service.py | sed -n '1,1100p'", True),
        ("cat -n service.py", True),
    ],
)
def test_a_file_printed_by_cat_over_its_page_says_where_to_read_on(
    make_settings: Callable[..., Settings], workspace: Path, command: str, numbered: bool
) -> None:
    """``cat service.py`` of a 1,201-line module at a 16k window: its output is over a
    read page. Cut head and tail as any command's, the cut named a count of tokens and
    a copy of the output, not the file's lines: nothing told a model which lines it had
    not seen nor where read_file would find them, and this one answered from what it
    saw. Cut as a read_file page, the output is the file's leading lines and the page
    note naming where to read on, and the model reads on to the value. The same for a
    range of its lines (``sed -n 'A,Bp'``, as Codex's models read) and for numbered
    lines (``nl -ba F | sed -n 'A,Bp'``, ``cat -n F``), kept as printed."""
    body = "".join(f"def rule_{n}(order):\n    return order * {n % 97 + 1}\n\n" for n in range(400))
    lines = body.splitlines(keepends=True)
    (workspace / "service.py").write_text(
        "".join(lines[:900]) + RETRY_LIMIT_LINE + "\n" + "".join(lines[900:])
    )
    result, _events, server = _one_turn(
        make_settings,
        workspace,
        _cat_reader,
        f"Run `{command}`: what is RETRY_LIMIT in service.py?",
        window=WINDOW_TOKENS,
        max_loops=12,
    )
    assert result.answer == "37"
    first = next(
        str(m["content"]) for b in _main(server) for m in b["messages"] if m.get("role") == "tool"
    )
    page = FIRST_PAGE_RE.search(first)
    assert page is not None, first[-400:]
    last, total, offset = map(int, page.groups())
    assert total == 1201 and offset == last < 900
    shown = [f"{n:6d}\t{line}" if numbered else line for n, line in enumerate(lines, 1)]
    assert first == "".join(shown[:last]) + page.group(0) + "\n[exit code 0]"


SMALL_WINDOW_TOKENS = 8_192


def test_at_8k_the_facts_of_200_files_fit_a_summary_that_leaves_the_file_list_to_the_ledger(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """200 small files through an 8,192-token window, a model that only calls tools and
    a summarizer that lists every file read beside every code. The summary's room under
    the hard target, beside the system prompt and nineteen tool schemas, held the codes
    of about 150 files with that list: it was cut compaction after compaction and the
    report lost the codes of its middle. The core tools a small window gets and a file
    list left to the ledger (which shows every file read) leave room for all 200."""
    recorder, events, _server, planted = _run(
        make_settings,
        workspace,
        files=200,
        persona="silent",
        summarizer="faithful",
        window=SMALL_WINDOW_TOKENS,
    )
    compactions = [e for e in events if e["type"] == "compaction"]
    assert compactions
    assert not any(c["summary_cut"] for c in compactions)
    assert any("files (listed in the progress ledger)" in c["summary"] for c in compactions)
    assert codes_in(recorder.reports[-1]) == planted
    assert recorder.reread_files() == 0


# Summarizer calls a compaction may take on average with the lossy summarizer: the
# handoff summary, its split when cut, and follow-ups about the files of the new part.
LOSSY_CALLS_PER_COMPACTION_MAX = 4


def test_a_lossy_rewrite_of_earlier_summaries_is_carried_over_not_asked_about_again(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """100 small files through an 8,192-token window and a summarizer that drops half of
    every list: the stack of summaries outgrows its room and is summarized again, and
    the rewrite drops half of what the earlier summaries said. Asked about again, the
    dropped files took every follow-up a compaction may make, each answer halved again
    (135 summarizer calls for 15 compactions; 165 of 300 codes kept with 300 files).
    Carried over word for word first, the follow-ups ask only about the files no
    summary described."""
    recorder, events, _server, planted = _run(
        make_settings,
        workspace,
        files=100,
        persona="silent",
        summarizer="lossy",
        window=SMALL_WINDOW_TOKENS,
    )
    compactions = [e for e in events if e["type"] == "compaction"]
    assert recorder.summary_calls <= LOSSY_CALLS_PER_COMPACTION_MAX * len(compactions)
    assert any(CARRY_OVER_HEADING in c["summary"] for c in compactions)
    assert recorder.reports and codes_in(recorder.reports[-1]) == planted
    assert recorder.reread_files() == 0


# Just under 8k: 300 codes fill the summary's room under the hard target, so details a
# rewrite carried over must give room back at every compaction.
CARRY_CAPACITY_WINDOW_TOKENS = 7_900
# Files the re-reading model may read twice there: a detail that gave its room back is
# out of its sight until read again.
CARRY_CAPACITY_REREADS_MAX = 5


def test_the_details_carried_longest_give_room_back_first(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """300 small files just under an 8k window, a summarizer that drops half of every
    list and a model that reads again what it read but cannot see. Each rewrite of the
    summaries carries what it dropped ahead of what the earlier rewrites had carried, so
    the newest detail was the first to give room back: the model read it again, the
    next rewrite dropped it again, and the spiral guard stopped the run (0/300 codes,
    11 files read twice; at 8,000 tokens too, where the re-reader now keeps 300/300)."""
    recorder, events, _server, planted = _run(
        make_settings,
        workspace,
        files=300,
        persona="re_reader",
        summarizer="lossy",
        window=CARRY_CAPACITY_WINDOW_TOKENS,
    )
    assert any(CARRY_OVER_HEADING in e["summary"] for e in events if e["type"] == "compaction")
    assert recorder.reports and codes_in(recorder.reports[-1]) == planted
    assert recorder.reread_files() <= CARRY_CAPACITY_REREADS_MAX


# Under the window where the re-reading model finishes: 300 codes no longer fit the
# prompt beside the work, and those left out must be found again.
SEARCH_CAPACITY_WINDOW_TOKENS = 7_600


def test_a_model_that_searches_its_history_finds_what_no_summary_can_hold(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """300 small files at a window too small to show every code at once beside the
    work, and the summarizer that drops half of every list. A model that reads again
    what it cannot see reads a file, loses another and is stopped by the spiral guard
    here; one that asks search_history first, as the system prompt tells it to, finds
    each code in the transcript and reads no file twice."""
    recorder, _events, _server, planted = _run(
        make_settings,
        workspace,
        files=300,
        persona="searcher",
        summarizer="lossy",
        window=SEARCH_CAPACITY_WINDOW_TOKENS,
    )
    assert recorder.searches > 0
    assert recorder.reports and codes_in(recorder.reports[-1]) == planted
    assert recorder.reread_files() == 0


def test_each_compaction_of_a_task_reading_one_file_a_call_takes_one_summarizer_call(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """80 files of 3 KB read one a call at a 32k window: a part that would take a second
    summarizer call for a read or two at the compaction point is compacted a call or two
    before it, in one (the first compaction took two calls, where deepagents' one
    summary of the same reads took one)."""
    _recorder, events, server, _planted = _run(
        make_settings,
        workspace,
        files=80,
        persona="silent",
        summarizer="faithful",
        window=32_768,
    )
    compactions = [e for e in events if e["type"] == "compaction"]
    summaries = [r for r in server.requests if isinstance(r, dict) and is_summary(r)]
    assert compactions
    assert len(summaries) == len(compactions)
