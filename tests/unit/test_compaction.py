"""Compaction: summary, files, fallback, harder compaction, guard and manual triggers."""

from __future__ import annotations

import math
import operator
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.graph.message import add_messages

from agentgraph.capabilities.tools.files import read_text_file
from agentgraph.capabilities.tools.workspace_scan import ScanChanges, with_scanned_changes
from agentgraph.config import Settings
from agentgraph.context import compaction
from agentgraph.context.carry_over import CARRY_OVER_HEADING, identifiers
from agentgraph.context.compaction import (
    KEEP_LESS_TOOL_OUTPUT_MAX_TOKENS,
    LEFT_OUT_BUDGET_FRACTION,
    LEFT_OUT_READING_MIN_TOKENS,
    NEXT_PIECE_HEADING,
    NEXT_PIECE_PROMPT,
    OUTPUT_LIMIT_PROMPT,
    SUMMARIZED_COPY_KEY,
    SUMMARY_CUT_SPLITS_MAX,
    SUMMARY_ENTRY_JOIN_TOKENS,
    SUMMARY_FRAMING_TOKENS,
    SUMMARY_HARD_TARGET_BUDGET_FRACTION,
    SUMMARY_OUTPUT_CUT_NOTE,
    SUMMARY_OUTPUT_LIMIT_ASK_SHARE,
    SUMMARY_PREFIX,
    SUMMARY_SHORTEN_ATTEMPTS,
    SUMMARY_SUPPLEMENT_ATTEMPTS,
    SUPPLEMENT_HEADING,
    TARGET_AFTER_BUDGET_FRACTION,
    UNSEEN_COPY_KEY,
    UNSEEN_KEPT_BUDGET_FRACTION,
    UNSEEN_OUTPUT_MIN_TOKENS,
    VALUES_PROMPT,
    BoundaryTracker,
    Compactor,
    _instructions,
    carried_scale,
    changed_files,
    marker,
    only_unseen_results_since_boundary,
    own_identifiers,
    reading_identifiers,
    render_transcript,
    says_of,
    since_last_boundary,
    unvalued_constants,
)
from agentgraph.context.ledger import LEDGER_KIND
from agentgraph.context.tokens import anchored_prompt_tokens, get_counter
from agentgraph.context.windows import budget_for
from agentgraph.persistence import open_store
from agentgraph.persistence.index import SessionInfo
from agentgraph.runtime.deps import CompactionOutcome
from agentgraph.runtime.history import (
    AGENTGRAPH_KEY,
    agentgraph_kind,
    build_prompt_view,
    validate_history,
)
from agentgraph.session.agent import Agent
from tests.fakes.chat_model import OutCountingModel, ScriptedChatModel
from tests.fakes.scripts import ai_text, ai_tools
from tests.middleware_helpers import noting_reads, varied_reads

WINDOW = "16000"
# Facts of a first summary longer than the summary's room at WINDOW, within the hard target.
SHARE_OVER_FACTS = 500
# Words of the large system prompt of the harder-pass test.
RULES = 900


def _history(turns: int, *, result_chars: int = 4000) -> list[BaseMessage]:
    msgs: list[BaseMessage] = [
        HumanMessage("Please audit the files; remember the code word TULIP.", id="u0")
    ]
    for i in range(turns):
        call_id = f"c{i}"
        msgs.append(
            AIMessage(
                content=f"reading file {i}",
                id=f"a{i}",
                tool_calls=[{"name": "read_file", "args": {"path": f"f{i}.txt"}, "id": call_id}],
            )
        )
        msgs.append(
            ToolMessage(
                content=f"content of f{i} " + "x" * result_chars,
                tool_call_id=call_id,
                name="read_file",
                id=f"t{i}",
            )
        )
    return msgs


def _edited_last(history: list[BaseMessage], path: str) -> list[BaseMessage]:
    """``history`` with its last call an edit of ``path``: files the session changed are
    the ones re-read after a compaction (files only read are in the ledger)."""
    return [*history[:-2], *_as_edit(history[-2], history[-1], path)]


def _as_edit(
    call: BaseMessage, result: BaseMessage, path: str, new: str = "fresh"
) -> list[BaseMessage]:
    """A read exchange of ``_history`` made an edit of ``path`` (to ``new``)."""
    assert isinstance(call, AIMessage) and isinstance(result, ToolMessage)
    args = {"path": path, "old_string": "fresh", "new_string": new}
    edit = {**call.tool_calls[0], "name": "edit_file", "args": args}
    done = result.model_copy(
        update={"name": "edit_file", "content": f"edited {path}: replaced 1 occurrence"}
    )
    return [call.model_copy(update={"tool_calls": [edit]}), done]


def _write_files(workspace: Path, n: int) -> None:
    """The files ``_history(n)`` reads, as they are on disk now."""
    for i in range(n):
        (workspace / f"f{i}.txt").write_text(f"fresh file {i}\n")


def _compactor(settings: Settings, summarizer: ScriptedChatModel, **kw: object) -> Compactor:
    return Compactor(
        summarizer,
        get_counter(settings.model),
        budget_for(settings),
        sleep=lambda _s: None,
        **kw,  # type: ignore[arg-type]
    )


def _naming(first: int, last: int) -> str:
    """Text that names files ``f{first}.txt`` to ``f{last}.txt`` (a summary that names
    every file read is not asked about the files it left out)."""
    return " Files read: " + ", ".join(f"f{i}.txt" for i in range(first, last + 1)) + "."


def _covering(first: int, last: int) -> str:
    """:func:`_naming` and the code of each file (``CODE-{i}``, :func:`_numbered_reads`):
    a summary of those reads that keeps something of every file."""
    codes = ", ".join(f"CODE-{i}" for i in range(first, last + 1))
    return f"{_naming(first, last)} Codes: {codes}."


def _apply(history: list[BaseMessage], updates: list[BaseMessage]) -> list[BaseMessage]:
    return list(add_messages(history, updates))  # type: ignore[arg-type]


def _compacted_view(
    settings: Settings, history: list[BaseMessage], reply: str
) -> tuple[CompactionOutcome, list[BaseMessage], list[BaseMessage]]:
    """An auto compaction of ``history`` whose summarizer answers ``reply``: the outcome,
    the stored history after it and the view since its boundary (checked valid)."""
    outcome = _compactor(settings, ScriptedChatModel([reply]))(
        history, trigger="auto", system=[], tools=[]
    )
    assert outcome is not None
    stored = _apply(history, outcome.updates)
    view = since_last_boundary(stored)
    counter = get_counter(settings.model)
    assert validate_history(build_prompt_view(view, counter=counter).messages) == []
    return outcome, stored, view


def test_a_file_read_by_the_workspace_path_without_its_slash_is_reinjected(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    _write_files(workspace, 12)
    slashless = str(workspace.resolve()).lstrip("/")
    history = _edited_last(_history(12), f"{slashless}/f11.txt")
    outcome = _compactor(settings, ScriptedChatModel(["Progress: read files."]))(
        history, trigger="manual", system=[], tools=[], workspace=str(workspace)
    )
    assert outcome is not None
    view = since_last_boundary(_apply(history, outcome.updates))
    reinjected = [str(m.content) for m in view if agentgraph_kind(m) == "reinjected_file"]
    assert any("fresh file 11" in text for text in reinjected), reinjected


def _manually_compacted(
    settings: Settings,
    workspace: Path,
    history: list[BaseMessage],
    summary: str = "Progress: changed files.",
) -> list[BaseMessage]:
    """``history`` after a manual compaction in ``workspace`` (the summarizer answering
    ``summary``), as the state stores it."""
    outcome = _compactor(settings, ScriptedChatModel([summary]))(
        history, trigger="manual", system=[], tools=[], workspace=str(workspace)
    )
    assert outcome is not None
    return _apply(history, outcome.updates)


def _manual_view(
    settings: Settings,
    workspace: Path,
    history: list[BaseMessage],
    summary: str = "Progress: changed files.",
) -> list[BaseMessage]:
    """The view after a manual compaction of ``history`` in ``workspace`` (the summarizer
    answering ``summary``)."""
    return since_last_boundary(_manually_compacted(settings, workspace, history, summary))


def _files_shown(view: list[BaseMessage]) -> dict[str, str]:
    """The files ``view`` shows re-read from disk: path -> text."""
    return {
        m.additional_kwargs[AGENTGRAPH_KEY]["path"]: m.text
        for m in view
        if agentgraph_kind(m) == "reinjected_file"
    }


def _reinjected(settings: Settings, workspace: Path, history: list[BaseMessage]) -> dict[str, str]:
    """The files a manual compaction of ``history`` re-reads from disk: path -> text."""
    return _files_shown(_manual_view(settings, workspace, history))


def test_the_files_re_read_after_a_compaction_are_the_last_edits_of_the_three_changed_last(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """Each of the three files changed last shows the lines around its last edit (one
    may wait for its next edit). Older changes are done: five files changed once each,
    re-read whole, stayed in view through every cycle of the editing benchmark (1.84M
    prompt tokens at 16k against deepagents' 1.72M), and a file changed twice long ago
    is no more being worked on (re-read whole, finished files took the room on a task
    changing each file twice)."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    _write_files(workspace, 12)
    history = _history(12)
    # f2 changed twice (f2 then f2 again as f3's exchange), f5 … f8 once each, f9 once
    # and last; f10 and f11 only read after it.
    for i, path in [(2, "f2.txt"), (3, "f2.txt"), *[(k, f"f{k}.txt") for k in range(5, 10)]]:
        at = 1 + 2 * i
        history[at : at + 2] = _as_edit(history[at], history[at + 1], path)
    reinjected = _reinjected(settings, workspace, history)
    assert set(reinjected) == {"f9.txt", "f8.txt", "f7.txt"}
    for name in ("f9.txt", "f8.txt", "f7.txt"):
        assert reinjected[name].startswith(f"[Lines around the last edit of {name}")
        assert (
            f"lines 1-1 of 1; read_file shows the rest]\n1\tfresh file {name[1]}"
            in (reinjected[name])
        )


def test_lines_appended_through_a_here_document_are_shown_where_they_were_appended(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """``cat >> notes.md <<'EOF'`` put its line at the file's end: the lines shown again
    after a compaction are those, not an earlier line with the same text."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    _write_files(workspace, 12)
    lines = ["- done", *(f"note {n}" for n in range(20)), "- done"]
    (workspace / "notes.md").write_text("\n".join(lines) + "\n")
    history = _history(12)
    command = "cat >> notes.md <<'EOF'\n- done\nEOF"
    call = {"name": "run_bash", "args": {"command": command}, "id": "c11"}
    history[-2:] = [
        AIMessage(content="", id="a11", tool_calls=[call]),
        ToolMessage("[exit code 0]", tool_call_id="c11", name="run_bash", id="t11"),
    ]
    reinjected = _reinjected(settings, workspace, history)
    assert reinjected["notes.md"].startswith(
        "[Lines around the last edit of notes.md, re-read from disk after compaction — "
        "lines 19-22 of 22"
    )


def test_files_a_scan_saw_a_command_change_are_shown_again_by_their_changed_lines(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """A command's change the workspace scan recorded (``perl -pi``) is shown again: the
    lines it changed, three either side, when the record spans them, else whole; a file
    it deleted is not; a step that changed more files than are shown again (a build)
    shows none of them."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    _write_files(workspace, 12)
    body = [f"line {n}" for n in range(1, 31)]
    (workspace / "mod.py").write_text("\n".join(body) + "\n")
    (workspace / "gen.txt").write_text("generated\n")
    for n in range(4):
        (workspace / f"out{n}.txt").write_text("built\n")
    history = _history(12)
    steps = [
        (
            "perl -pi -e 's/line 15/LINE 15/' mod.py",
            ScanChanges(modified=("mod.py",), spans=(("mod.py", 15, 16),)),
        ),
        ("python3 gen.py", ScanChanges(created=("gen.txt",), deleted=("f3.txt",))),
        ("make", ScanChanges(created=tuple(f"out{n}.txt" for n in range(4)))),
    ]
    for (command, changes), i in zip(steps, (8, 9, 10), strict=True):
        at = 1 + 2 * i
        call = {"name": "run_bash", "args": {"command": command}, "id": f"c{i}"}
        result = ToolMessage("[exit code 0]", tool_call_id=f"c{i}", name="run_bash", id=f"t{i}")
        history[at : at + 2] = [
            AIMessage(content="", id=f"a{i}", tool_calls=[call]),
            with_scanned_changes(result, changes),
        ]
    os.mkfifo(workspace / "pipe")  # a command left a FIFO where a file was: not waited on
    history[-2:] = [
        AIMessage(
            content="",
            id="a11",
            tool_calls=[{"name": "run_bash", "args": {"command": "mkfifo pipe"}, "id": "c11"}],
        ),
        with_scanned_changes(
            ToolMessage("[exit code 0]", tool_call_id="c11", name="run_bash", id="t11"),
            ScanChanges(created=("pipe",)),
        ),
    ]
    reinjected = _reinjected(settings, workspace, history)
    assert set(reinjected) == {"mod.py", "gen.txt"}
    header, *lines = reinjected["mod.py"].split("\n")
    assert header.endswith("— lines 12-19 of 30; read_file shows the rest]")
    assert lines == [f"{n}\t{body[n - 1]}" for n in range(12, 20)]
    assert reinjected["gen.txt"].startswith("[File re-read from disk after compaction: gen.txt")


def test_a_file_a_command_changed_past_its_share_is_a_page_of_its_leading_lines(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """A file a command changed whole (its text not in any call) is re-read whole,
    numbered as read_file numbers lines; one over its share of the room is the page of
    its leading lines that fits, with where to read on, as a read over the output cap is.
    Cut head and tail, it was headed "lines 1-400 of 400" with its middle missing (a
    model rewriting it whole from that writes the cut into the file), and ``cat -n``'s
    padding cost two tokens a line more."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    _write_files(workspace, 12)
    body = [f"VALUE_{n} = {n * 7}  # the setting of part {n}" for n in range(1, 401)]
    (workspace / "big.py").write_text("\n".join(body) + "\n")
    (workspace / "small.py").write_text("A = 1\nB = 2\n")
    history = _history(12)
    for at, path in ((21, "small.py"), (23, "big.py")):
        call = {"name": "run_bash", "args": {"command": "python3 gen.py"}, "id": f"g{at}"}
        result = ToolMessage("[exit code 0]", tool_call_id=f"g{at}", name="run_bash")
        history[at : at + 2] = [
            AIMessage(content="", id=f"g{at}", tool_calls=[call]),
            with_scanned_changes(result, ScanChanges(created=(path,))),
        ]
    reinjected = _reinjected(settings, workspace, history)
    assert reinjected["small.py"].split("\n")[1:] == ["1\tA = 1", "2\tB = 2"]
    header, *lines = reinjected["big.py"].split("\n")
    shown = re.fullmatch(
        r"\[File re-read from disk after compaction: big\.py — lines 1-(\d+) of 400\]", header
    )
    assert shown is not None, header
    last = int(shown.group(1))
    assert 0 < last < 400
    assert lines[:-1] == [f"{n}\t{body[n - 1]}" for n in range(1, last + 1)]
    assert (
        lines[-1]
        == f"[showing lines 1-{last} of 400; call read_file with offset={last} to continue]"
    )
    assert "truncated" not in reinjected["big.py"]


@pytest.mark.parametrize("tool", ["write_file", "here-document"])
def test_a_file_the_model_wrote_whole_is_shown_again_whole_or_not_at_all(
    make_settings: Callable[..., Settings], workspace: Path, tool: str
) -> None:
    """The model's call held the whole text of a file it wrote: within its share it is
    shown again whole; past it, not at all (the ledger names it written). The page of
    its leading lines shown before was no use to a model that rewrites the file whole,
    which read it again all the same (24 of 100 files at 16k), and every request after
    the compaction carried it."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    _write_files(workspace, 12)
    texts = {
        "small.py": "A = 1\nB = 2\n",
        "big.py": "".join(f"VALUE_{n} = {n * 7}  # part {n}\n" for n in range(1, 401)),
    }
    history = _history(12)
    for at, path in ((21, "small.py"), (23, "big.py")):
        (workspace / path).write_text(texts[path])
        if tool == "write_file":
            call = {"name": "write_file", "args": {"path": path, "content": texts[path]}}
        else:
            command = f"cat > {path} <<'EOF'\n{texts[path]}EOF"
            call = {"name": "run_bash", "args": {"command": command}}
        call["id"] = f"w{at}"
        history[at : at + 2] = [
            AIMessage(content="", id=f"w{at}", tool_calls=[call]),  # type: ignore[list-item]
            ToolMessage("[exit code 0]", tool_call_id=f"w{at}", name=str(call["name"])),
        ]
    view = _manual_view(settings, workspace, history)
    reinjected = _files_shown(view)
    assert reinjected["small.py"].split("\n")[1:] == ["1\tA = 1", "2\tB = 2"]
    assert "big.py" not in reinjected
    (ledger,) = [m.text for m in view if agentgraph_kind(m) == LEDGER_KIND]
    assert re.search(r"^- big\.py: .+ \(\+400 −0 lines\)$", ledger, re.M), ledger


def _write_mid(workspace: Path, history: list[BaseMessage], at: int) -> str:
    """``history``'s exchange at ``at`` made a write_file call of ``mid.py`` (60 lines,
    past a file's share at WINDOW), as it now is on disk; its text."""
    text = "".join(f"VALUE_{n} = {n * 7}  # part {n}\n" for n in range(1, 61))
    (workspace / "mid.py").write_text(text)
    call = {"name": "write_file", "args": {"path": "mid.py", "content": text}, "id": f"w{at}"}
    history[at : at + 2] = [
        AIMessage(content="", id=f"w{at}", tool_calls=[call]),  # type: ignore[list-item]
        ToolMessage("wrote mid.py", tool_call_id=f"w{at}", name="write_file"),
    ]
    return text


@pytest.mark.parametrize("named", [True, False])
def test_the_files_the_summary_names_as_work_left_are_shown_whole_first(
    make_settings: Callable[..., Settings], workspace: Path, named: bool
) -> None:
    """Whether a file written once is done or waits for its next change only the task
    says: a file the summary names under "Remaining work" is shown whole, before the
    files changed last and past a file's share, and so is a file only read; named
    elsewhere in the summary, or not named, it is not (a model that rewrites it whole
    read it again after every compaction: 12 of 60 files at 16k)."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    _write_files(workspace, 12)
    (workspace / "f3.txt").write_text("".join(f"LIMIT_{n} = {n}\n" for n in range(1, 31)))
    history = _history(12)
    text = _write_mid(workspace, history, 21)
    later = "- finish mid.py, then check f3.txt\n" if named else "- read the rest\n"
    summary = (
        "## Task and progress\nWrote mid.py; read f3.txt.\n\n"
        f"## Remaining work\n{later}\n## Critical data and references\nmid.py, f3.txt, f5.txt"
    )
    shown = _files_shown(_manual_view(settings, workspace, history, summary))
    if not named:  # mid.py is past its share (else it would be shown whole anyway)
        assert "mid.py" not in shown and "f3.txt" not in shown
        return
    assert list(shown)[:2] == ["mid.py", "f3.txt"]
    assert shown["mid.py"].split("\n")[1:] == [
        f"{n}\t{line}" for n, line in enumerate(text.splitlines(), 1)
    ]
    assert shown["f3.txt"].split("\n")[-1] == "30\tLIMIT_30 = 30"
    assert "f5.txt" not in shown


def test_a_file_changed_before_the_last_compaction_is_shown_when_named_as_work_left(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """The file waiting for its next change may have been written before the last
    compaction: named as work left, it is shown whole all the same."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    _write_files(workspace, 24)
    history = _history(12)
    text = _write_mid(workspace, history, 3)
    stored = _manually_compacted(settings, workspace, history, "Progress: wrote mid.py.")
    assert "mid.py" not in _files_shown(since_last_boundary(stored))
    later = [m for m in _history(24)[25:] if isinstance(m, (AIMessage, ToolMessage))]
    summary = "Wrote mid.py.\n\nRemaining work:\n- finish mid.py"
    shown = _files_shown(_manual_view(settings, workspace, [*stored, *later], summary))
    assert shown["mid.py"].split("\n")[1:] == [
        f"{n}\t{line}" for n, line in enumerate(text.splitlines(), 1)
    ]


@pytest.mark.parametrize("older", ["edited since", "only deleted", "written whole"])
def test_the_lines_around_an_edit_are_its_new_text_and_three_lines_either_side(
    make_settings: Callable[..., Settings], workspace: Path, older: str
) -> None:
    """With their line numbers. A file whose last edit's text it no longer
    holds (changed since) or whose last edit only deleted shows nothing (the ledger names
    it); a file written whole is re-read whole."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    _write_files(workspace, 12)
    body = [f"line {n}" for n in range(1, 31)]
    body[14:16] = ["STATUS part_015: started", "second new line"]
    (workspace / "mod.py").write_text("\n".join(body) + "\n")
    (workspace / "gone.py").write_text("nothing of the edit\n")
    history = _history(12)
    edits = [
        (5, "gone.py", "" if older == "only deleted" else "was here"),
        (6, "mod.py", "STATUS part_015: started\nsecond new line\n"),
    ]
    for i, path, new in edits:
        at = 1 + 2 * i
        history[at : at + 2] = _as_edit(history[at], history[at + 1], path, new)
    if older == "written whole":
        write = {**history[11].tool_calls[0], "name": "write_file"}  # type: ignore[attr-defined]
        write["args"] = {"path": "gone.py", "content": "nothing of the edit\n"}
        history[11] = history[11].model_copy(update={"tool_calls": [write]})
    history[-2:] = _as_edit(history[-2], history[-1], "f11.txt")
    reinjected = _reinjected(settings, workspace, history)
    whole = {"gone.py"} if older == "written whole" else set()
    assert set(reinjected) == {"f11.txt", "mod.py"} | whole
    if older == "written whole":
        assert reinjected["gone.py"].startswith("[File re-read from disk after compaction: gone.py")
    header, *lines = reinjected["mod.py"].split("\n")
    assert header.endswith("— lines 12-19 of 30; read_file shows the rest]")
    assert lines == [f"{n}\t{body[n - 1]}" for n in range(12, 20)]


@pytest.mark.parametrize(("reported", "shown"), [(20, (17, 23)), (9, (2, 8)), (None, (2, 8))])
def test_the_lines_around_an_edit_are_where_its_report_put_them(
    make_settings: Callable[..., Settings],
    workspace: Path,
    reported: int | None,
    shown: tuple[int, int],
) -> None:
    """New text that is earlier in the file too (a common line) is shown where the
    edit's report says it went; a report that names a line without it, or none, falls
    back to the first place it is."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    _write_files(workspace, 12)
    body = [f"line {n}" for n in range(1, 31)]
    body[4] = body[19] = "    return None"
    (workspace / "mod.py").write_text("\n".join(body) + "\n")
    history = _history(12)
    call, result = _as_edit(history[13], history[14], "mod.py", "    return None")
    report = f"edited mod.py: replaced 1 occurrence (first at line {reported})"
    history[13:15] = [call, result.model_copy(update={"content": report if reported else "ok"})]
    history[-2:] = _as_edit(history[-2], history[-1], "f11.txt")
    header = _reinjected(settings, workspace, history)["mod.py"].split("\n")[0]
    assert header.endswith(f"— lines {shown[0]}-{shown[1]} of 30; read_file shows the rest]")


def test_a_summary_within_its_room_leaves_its_list_of_files_read_to_the_ledger(
    make_settings: Callable[..., Settings],
) -> None:
    """A summary line that only lists the files the ledger beside it shows one by one
    becomes its label and a count, even when the summary fits its room: it is sent with
    every later prompt (at 16k, 300 small files took 24 compactions with the lists and
    22 without)."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    reply = "Handoff summary. Code word TULIP.\nFiles read: " + ", ".join(
        f"f{i}.txt" for i in range(11)
    )
    outcome, _stored, view = _compacted_view(settings, _history(12), reply)
    assert outcome.tokens_after <= budget_for(settings).usable * TARGET_AFTER_BUDGET_FRACTION
    summary = next(m.text for m in view if agentgraph_kind(m) == "summary")
    assert "Code word TULIP." in summary
    assert "Files read: 11 files (listed in the progress ledger)" in summary
    assert "f0.txt, f1.txt" not in summary


def test_summary_compaction_is_valid_lossless_and_smaller(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    _write_files(workspace, 12)
    summarizer = ScriptedChatModel(["Progress: code word TULIP." + _naming(0, 11)])
    history = _edited_last(_history(12), "f11.txt")
    outcome = _compactor(settings, summarizer)(
        history, trigger="manual", system=[], tools=[], workspace=str(workspace)
    )
    assert outcome is not None
    state = _apply(history, outcome.updates)
    # Lossless: every original message is still in the state (kept ones moved as copies).
    texts = [str(m.content) for m in state]
    assert all(str(m.content) in texts for m in history)
    view = since_last_boundary(state)
    assert agentgraph_kind(view[0]) == "summary" and str(view[0].content).startswith(SUMMARY_PREFIX)
    assert "TULIP" in str(view[0].content)
    reinjected = [m for m in view if agentgraph_kind(m) == "reinjected_file"]
    assert 1 <= len(reinjected) <= 5 and "fresh file 11" in str(reinjected[0].content)
    assert outcome.record["files"][0] == "f11.txt"
    # The current request is always kept raw.
    assert any(
        isinstance(m, HumanMessage) and "TULIP" in str(m.content) and agentgraph_kind(m) is None
        for m in view
    )
    counter = get_counter(settings.model)
    pv = build_prompt_view(view, counter=counter)
    assert validate_history(pv.messages) == []
    assert outcome.tokens_after < outcome.tokens_before
    assert outcome.tokens_after <= budget_for(settings).usable * 0.5
    # The summarizer saw the transcript, not raw tool calls (no tools needed).
    assert summarizer.bound_tools == [[]] or summarizer.bound_tools == []
    assert "read_file" in str(summarizer.calls[0][-1].content)


@pytest.mark.parametrize("failure", [RuntimeError("summarizer down"), ""])
def test_summary_failure_falls_back_and_says_why(
    make_settings: Callable[..., Settings], failure: object
) -> None:
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    summarizer = ScriptedChatModel([failure], on_exhausted="repeat_last")
    history = _history(12)
    outcome = _compactor(settings, summarizer)(history, trigger="auto", system=[], tools=[])
    assert outcome is not None
    assert outcome.record["fallback"] is True
    reason = outcome.record["reason"]
    assert ("summarizer down" in reason) if isinstance(failure, Exception) else ("empty" in reason)
    view = since_last_boundary(_apply(history, outcome.updates))
    note = str(view[0].content)
    assert "Compaction failed" in note and reason.split(":")[0] in note
    counter = get_counter(settings.model)
    kept_tokens = counter.count_messages(view[1:])
    assert kept_tokens <= budget_for(settings).usable * 0.30 + counter.count_messages(view[1:2])
    assert validate_history(build_prompt_view(view, counter=counter).messages) == []


def test_newest_turn_alone_over_budget_is_compacted_harder_without_looping(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    summarizer = ScriptedChatModel(["summary of the big turn"], on_exhausted="repeat_last")
    # One user request followed by tool traffic far larger than the whole budget.
    history = _history(6, result_chars=40_000)
    outcome = _compactor(settings, summarizer)(history, trigger="guard", system=[], tools=[])
    assert outcome is not None
    assert outcome.tokens_after <= budget_for(settings).usable * 0.5
    assert summarizer.call_count <= 4  # bounded: never loops
    view = since_last_boundary(_apply(history, outcome.updates))
    assert (
        validate_history(build_prompt_view(view, counter=get_counter(settings.model)).messages)
        == []
    )


def test_a_file_spelled_two_ways_and_seen_by_a_scan_is_one_changed_file() -> None:
    """``./a.py``, ``/ws/b.py`` and a scan's ``a.py``/``b.py`` are one file each (a file
    took two of the three places shown again); a step that changed more files than are
    shown again leaves no span of an earlier change to place lines that changed since."""

    def step(cid: str, name: str, changes: ScanChanges | None = None, **args: str) -> list[Any]:
        result = ToolMessage("[exit code 0]", tool_call_id=cid, name=name)
        call = AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": cid}])
        return [call, result if changes is None else with_scanned_changes(result, changes)]

    msgs: list[BaseMessage] = [
        *step(
            "1",
            "run_bash",
            ScanChanges(modified=("a.py",), spans=(("a.py", 5, 5),)),
            command="sed -i 's/x/yyy/' ./a.py",
        ),
        *step("2", "edit_file", path="/ws/b.py", old_string="a", new_string="b"),
        *step(
            "3",
            "run_bash",
            ScanChanges(modified=("b.py",), spans=(("b.py", 2, 2),)),
            command="perl -pi -e 's/b/c/' b.py",
        ),
        *step(
            "4", "run_bash", ScanChanges(modified=("b.py", "x1", "x2", "x3")), command="make fmt"
        ),
    ]
    files = changed_files(msgs, "/ws")
    assert [(f.path, f.last_index, f.last_edit, f.span) for f in files] == [
        ("b.py", 4, None, None),
        ("a.py", 0, "yyy", None),
    ]


def test_changed_files_are_the_files_written_or_edited_the_one_touched_last_first() -> None:
    """A read of a changed file touches it; a file only read is not changed; the last
    change's new text is kept when it was an edit, None when it was a write."""

    def call(name: str, cid: str, **args: str) -> AIMessage:
        return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": cid}])

    msgs: list[BaseMessage] = [
        call("edit_file", "1", path="a.py", old_string="x", new_string="y = 1"),
        call("write_file", "2", path="b.py", content="all of b"),
        call("edit_file", "3", path="c.py", old_string="x", new_string="\n"),
        call("read_file", "4", path="only_read.py"),
        call("read_file", "5", path="a.py"),
        call("edit_file", "6", path="b.py", old_string="all", new_string="most"),
        call("write_file", "7", path="d.py", content="d"),
    ]
    assert [(f.path, f.last_index, f.last_edit) for f in changed_files(msgs)] == [
        ("d.py", 6, None),
        ("b.py", 5, "most"),
        ("a.py", 4, "y = 1"),
        ("c.py", 2, "\n"),
    ]


def test_a_file_sed_edited_in_place_is_a_changed_file() -> None:
    """``sed -i 's/a/b/'`` edited its files: re-read around the literal text it wrote, as
    an edit_file call's files are; with a replacement that is no literal text, whole, as
    files written whole are. A command that changes nothing is no change."""

    def bash(cid: str, command: str) -> AIMessage:
        return AIMessage(
            content="", tool_calls=[{"name": "run_bash", "args": {"command": command}, "id": cid}]
        )

    msgs: list[BaseMessage] = [
        AIMessage(
            content="",
            tool_calls=[
                {
                    "name": "edit_file",
                    "args": {"path": "a.py", "old_string": "x", "new_string": "y"},
                    "id": "1",
                }
            ],
        ),
        bash("2", "sed -i 's/y/z = 2/' a.py b.py"),
        bash("3", "sed -n '1,5p' c.py"),
        bash("4", "sed -i 's/q/&&/g' d.py"),  # not a literal replacement
        bash("5", "sed -i 's/a/b/' e.py"),  # failed: no change
        bash("6", "sed -i 's/a/b/' f.py"),  # refused: no change
    ]
    results = {"2": 0, "3": 0, "4": 0, "5": 2}
    msgs += [
        ToolMessage(f"[exit code {code}]", tool_call_id=cid, name="run_bash")
        for cid, code in results.items()
    ]
    msgs.append(ToolMessage("refused", tool_call_id="6", name="run_bash", status="error"))
    assert [(f.path, f.last_index, f.last_edit) for f in changed_files(msgs)] == [
        ("d.py", 3, None),
        ("a.py", 1, "z = 2"),
        ("b.py", 1, "z = 2"),
    ]


def test_a_file_written_through_a_here_document_is_a_changed_file() -> None:
    """``cat > F <<'EOF'`` wrote F whole: re-read whole, as write_file's files are;
    ``cat >> F`` appended its lines: re-read around them (whole when the shell expanded
    them); ``rm F`` left nothing to re-read."""

    def bash(cid: str, command: str) -> AIMessage:
        return AIMessage(
            content="", tool_calls=[{"name": "run_bash", "args": {"command": command}, "id": cid}]
        )

    msgs: list[BaseMessage] = [
        bash("1", "cat > a.py <<'EOF'\nx = 1\nEOF"),
        bash("2", "cat >> notes.md <<'EOF'\n- done\nEOF"),
        bash("3", "cat >> log.md <<EOF\nat $HOME\nEOF"),
        bash("4", "cat > b.py <<'EOF'\nx\nEOF\npython b.py"),  # not certain
        bash("5", "cat > gone/c.py <<'EOF'\nx\nEOF"),  # failed: no change
        bash("6", "cat > d.py <<'EOF'\nx\nEOF"),
        bash("7", "rm -f d.py"),  # gone: nothing to show again
    ]
    msgs += [
        ToolMessage(f"[exit code {1 if cid == '5' else 0}]", tool_call_id=cid, name="run_bash")
        for cid in "1234567"
    ]
    files = changed_files(msgs)
    assert [(f.path, f.last_index, f.last_edit, f.appended) for f in files] == [
        ("log.md", 2, None, True),
        ("notes.md", 1, "- done\n", True),
        ("a.py", 0, None, False),
    ]


def test_guard_recovers_from_a_provider_overflow_by_compacting(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    # The window we are told is larger than the real one, so only the provider's 400
    # reveals the overflow: the guard must truncate, then compact, then succeed.
    # Masking off: it would shrink the prompt under the real window before the guard.
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW="64000", AGENTGRAPH_MASK_THRESHOLD="1.0")
    model = ScriptedChatModel(
        [ai_tools(("now", {})), ai_text("after recovery")], max_input_tokens=9_000
    )
    summarizer = ScriptedChatModel(["compact summary"], on_exhausted="repeat_last")
    with open_store(settings) as store:
        agent = Agent(settings, store, model=model, summarizer=summarizer, sleep=lambda _s: None)
        agent.graph.update_state(
            agent.config("g"),
            {"messages": _history(10, result_chars=6000), "workspace_path": str(workspace)},
            as_node="finalize",
        )
        events: list[dict] = []
        result = agent.run_turn("g", "continue please", workspace, on_event=events.append)
    assert result.answer == "after recovery"
    assert model.overflow_count >= 1
    assert any(e["type"] == "compaction" and e["trigger"] == "guard" for e in events)
    for prompt in model.calls:
        assert validate_history(prompt) == []


def test_manual_compact_then_next_turn_sees_summary(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    model = ScriptedChatModel([ai_text("ok")], on_exhausted="repeat_last")
    summarizer = ScriptedChatModel(
        ["we were auditing; code word TULIP"], on_exhausted="repeat_last"
    )
    with open_store(settings) as store:
        agent = Agent(settings, store, model=model, summarizer=summarizer, sleep=lambda _s: None)
        agent.graph.update_state(
            agent.config("m"),
            {"messages": _history(8), "workspace_path": str(workspace)},
            as_node="finalize",
        )
        store.index.upsert(SessionInfo(thread_id="m"))
        record = agent.compact("m", focus="the code word")
        assert record is not None and record["trigger"] == "manual"
        assert "the code word" in str(summarizer.calls[0][0].content)
        agent.run_turn("m", "what was the code word?", workspace)
        report = agent.context_report("m")
        info = store.index.get("m")
    prompt = model.calls[-1]
    assert any(agentgraph_kind(m) == "summary" and "TULIP" in str(m.content) for m in prompt)
    assert validate_history(prompt) == []
    assert report["compactions"][0]["trigger"] == "manual"
    assert info is not None and info.compactions == 1


def test_a_compaction_measures_in_the_providers_tokens_as_the_status_line_does(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """No offline tokenizer, and the provider counts 1.6x our estimate (a local chat
    template): /compact's "before" is what the status line showed, its "after" is what
    the status line shows next (the ratio is carried past the compaction, which drops
    the old replies' usage), not our unscaled estimate."""
    settings = make_settings(
        AGENTGRAPH_CONTEXT_WINDOW=WINDOW, AGENTGRAPH_MODEL="qwen2.5-coder-1.5b"
    )
    summarizer = ScriptedChatModel(["we were auditing files"], on_exhausted="repeat_last")
    with open_store(settings) as store:
        agent = Agent(
            settings,
            store,
            model=ScriptedChatModel([]),
            summarizer=summarizer,
            sleep=lambda _s: None,
        )
        assert agent.deps.counter.source == "estimate"
        config = agent.config("s")
        reply = AIMessage("noted", id="a-end")
        agent.graph.update_state(
            config,
            {"messages": [*_history(6), reply], "workspace_path": str(workspace)},
            as_node="finalize",
        )
        store.index.upsert(SessionInfo(thread_id="s"))
        ours = agent.context_report("s")["tokens"]
        reported = int(ours * 1.6)
        usage = {"input_tokens": reported - 5, "output_tokens": 5, "total_tokens": reported}
        anchored = reply.model_copy(update={"usage_metadata": usage})
        agent.graph.update_state(config, {"messages": [anchored]}, as_node="finalize")
        shown = agent.context_report("s")
        assert shown["source"] == "reported" and shown["tokens"] == reported
        record = agent.compact("s")
        assert record is not None and record.get("applied") is not False
        assert record["tokens_before"] == reported
        after = agent.context_report("s")
    assert after["tokens"] == record["tokens_after"]
    assert after["tokens"] >= 1.5 * sum(after["by_category"].values())


def test_an_auto_compaction_after_masking_works_in_the_providers_tokens(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """The reported usage describes the masked prompt: compaction measures that prompt,
    not the unmasked history, so it finds the provider's ratio (1.3 here), records it on
    the summary and reports the size the provider counts."""
    settings = make_settings(
        AGENTGRAPH_CONTEXT_WINDOW=WINDOW,
        AGENTGRAPH_MODEL="qwen2.5-coder-1.5b",
        MAX_LOOPS=250,
        AGENTGRAPH_DISTIL_THRESHOLD="10",  # the threshold's compaction alone
    )
    calls = 200  # masking holds the prompt below the threshold for a long while
    counter = get_counter(settings.model)
    script = noting_reads(workspace, calls)
    model = OutCountingModel([*script, ai_text("done")], counter, 1.3)
    summarizer = ScriptedChatModel(["we read files"], on_exhausted="repeat_last")
    with open_store(settings) as store:
        agent = Agent(settings, store, model=model, summarizer=summarizer, sleep=lambda _s: None)
        events = list(agent.stream_turn("p", "read all files", workspace))
        history = agent.messages("p")
        compact_at = agent.deps.budget.compact_at
    assert any(e["type"] == "masking" for e in events)
    compactions = [e for e in events if e["type"] == "compaction"]
    assert compactions
    for record in compactions:
        # Not the unmasked history's size (five times the window here).
        assert compact_at <= record["tokens_before"] < 1.2 * compact_at
    scales = [
        m.additional_kwargs["agentgraph"].get("provider_scale")
        for m in history
        if agentgraph_kind(m) == "summary"
    ]
    assert scales and all(s is not None and abs(s - 1.3) < 0.03 for s in scales)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1.6, 1.6), (2.0, 2.0), (0.5, 1.0), (50, 1.0), ("1.6", 1.0), (None, 1.0), (float("nan"), 1.0)],
)
def test_a_carried_scale_out_of_range_counts_as_none(value: object, expected: float) -> None:
    head = HumanMessage("summary", additional_kwargs=marker("summary", provider_scale=value))
    files = HumanMessage("file", additional_kwargs=marker("reinjected_file"))
    view = [head, files, HumanMessage("q")]
    assert carried_scale(view) == expected
    estimate, exact = get_counter("qwen2.5-coder-1.5b"), get_counter("gpt-4o")
    own = anchored_prompt_tokens(view, estimate, fixed_tokens=100)[0]
    scaled = anchored_prompt_tokens(view, estimate, fixed_tokens=100, carried_scale=expected)
    assert scaled == (math.ceil(own * expected), "estimate")
    plain = anchored_prompt_tokens(view, exact, fixed_tokens=100)
    assert anchored_prompt_tokens(view, exact, fixed_tokens=100, carried_scale=1.6) == plain


def test_a_compaction_that_cannot_free_enough_keeps_less_and_every_original(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    # A long summary and a large system prompt leave little room under half the
    # budget: the compaction keeps less (fewer and masked kept outputs, then the
    # summary, explicitly cut) instead of ending over its hard target.
    long_summary = " ".join(f"fact{n} is {n * 13 % 97}" for n in range(1400))
    summarizer = ScriptedChatModel([long_summary], on_exhausted="repeat_last")
    words = " ".join(f"word{n} value{n * 7 % 101}" for n in range(250))
    history: list[BaseMessage] = [HumanMessage("go", id="u0")]
    for i in range(8):
        history.append(
            AIMessage(
                content="", id=f"a{i}", tool_calls=[{"name": "grep", "args": {}, "id": f"c{i}"}]
            )
        )
        history.append(ToolMessage(content=f"{i}: {words}", tool_call_id=f"c{i}", id=f"t{i}"))
    system = [SystemMessage(" ".join(f"rule{n} is {n * 11 % 89}" for n in range(RULES)))]
    compactor = _compactor(settings, summarizer)
    outcome = compactor(history, trigger="manual", system=system, tools=[])
    assert outcome is not None
    hard_target = compactor.budget.usable * SUMMARY_HARD_TARGET_BUDGET_FRACTION
    assert compactor.budget.usable // 2 < outcome.tokens_after <= hard_target
    # Asked for a shorter summary (the same long one came back), then kept less: the
    # summary that still had no room is cut explicitly, never blind.
    assert len(summarizer.calls) == 1 + SUMMARY_SHORTEN_ATTEMPTS
    assert outcome.record["summary_cut"] is True
    assert "agentgraph cut this summary" in outcome.record["summary"]
    state = _apply(history, outcome.updates)
    view = since_last_boundary(state)
    stored = [str(m.content) for m in state]
    for original in history:
        assert str(original.content) in stored  # every byte still in the transcript
    assert (
        validate_history(build_prompt_view(view, counter=get_counter(settings.model)).messages)
        == []
    )


def test_provider_reported_usage_can_trigger_compaction(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    from langchain.agents.middleware import ModelRequest
    from langchain_core.messages import SystemMessage

    from agentgraph.middleware import context_pipeline

    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    with open_store(settings) as store:
        agent = Agent(settings, store, model=ScriptedChatModel([]), sleep=lambda _s: None)
        deps = agent.deps
        system = SystemMessage("you are a test")
        pipeline = context_pipeline(deps)
        compaction = pipeline.compaction
        assert compaction is not None

        def request(messages: list[BaseMessage]) -> ModelRequest:
            view = pipeline.view.build(messages, system, [])
            return ModelRequest(
                model=deps.model, messages=view.messages, system_message=system, tools=[]
            )

        words = " ".join(f"word{n} value{n * 7 % 101}" for n in range(250))
        history: list[BaseMessage] = [HumanMessage("go", id="u0")]
        while deps.counter.count_messages(history) < deps.budget.compact_at * 0.82:
            i = len(history)
            history.append(
                AIMessage(
                    content="", id=f"a{i}", tool_calls=[{"name": "grep", "args": {}, "id": f"c{i}"}]
                )
            )
            history.append(ToolMessage(content=words, tool_call_id=f"c{i}", id=f"t{i}"))
        # Our own count: not yet.
        assert not compaction.needs_compaction(history, request(history))
        # The provider counted ~25% more (another tokenizer): its figure decides.
        reported = int(deps.counter.count_messages(history) * 1.25) + 200
        assert reported >= deps.budget.compact_at
        last = AIMessage(
            content="ok",
            id="ar",
            usage_metadata={
                "input_tokens": reported,
                "output_tokens": 1,
                "total_tokens": reported + 1,
            },
        )
        later = [*history, last, HumanMessage("next", id="hn")]
        assert compaction.needs_compaction(later, request(later))


def _more_turns(history: list[BaseMessage], start: int, turns: int) -> list[BaseMessage]:
    more = _history(start + turns)[1 + 2 * start :]
    return [*history, *[m.model_copy(update={"id": f"{m.id}-b"}) for m in more]]


def _second_compaction(
    settings: Settings, summarizer: ScriptedChatModel
) -> tuple[CompactionOutcome, list[BaseMessage]]:
    """Two auto compactions, of 12 reads and of 12 more after the first's summary: the
    second's outcome and the view after it."""
    compactor = _compactor(settings, summarizer)
    first = compactor(_history(12), trigger="auto", system=[], tools=[])
    assert first is not None
    state = _more_turns(_apply(_history(12), first.updates), 12, 12)
    outcome = compactor(state, trigger="auto", system=[], tools=[])
    assert outcome is not None
    return outcome, since_last_boundary(_apply(state, outcome.updates))


def test_an_earlier_summary_is_carried_verbatim_not_summarized_again(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    summarizer = ScriptedChatModel(
        ["first: code word TULIP." + _naming(0, 11), "second: files 12-23 read." + _naming(0, 23)]
    )
    compactor = _compactor(settings, summarizer)
    state = _apply(
        _history(12), compactor(_history(12), trigger="auto", system=[], tools=[]).updates
    )  # type: ignore[union-attr]
    first = since_last_boundary(state)[0]
    state = _more_turns(state, 12, 12)
    outcome = compactor(state, trigger="auto", system=[], tools=[])
    assert outcome is not None
    view = since_last_boundary(_apply(state, outcome.updates))
    # The first summary, byte for byte, then the new one; the summarizer was not asked
    # to rewrite the first (a second lossy pass over it).
    assert view[0].content == first.content and view[0].id != first.id
    assert agentgraph_kind(view[1]) == "summary" and "second" in view[1].text
    assert "first: code word" not in str(summarizer.calls[1])
    assert outcome.record["carried_summaries"] == 1


def test_summaries_that_outgrow_their_share_are_summarized_together(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    # Within the summary's share (never asked again) but over its stacking share.
    long_first = (
        "first: code word TULIP."
        + _naming(0, 11)
        + " ".join(f" fact{n}={n * 7}" for n in range(SHARE_OVER_FACTS))
    )
    summarizer = ScriptedChatModel([long_first, "merged: TULIP and files 12-23." + _naming(0, 23)])
    outcome, view = _second_compaction(settings, summarizer)
    assert [agentgraph_kind(m) for m in view].count("summary") == 1
    assert "merged" in view[0].text
    assert "first: code word" in str(summarizer.calls[1])
    assert outcome.record["carried_summaries"] == 0


@pytest.mark.parametrize("keeps_all", [False, True])
def test_what_a_rewrite_of_the_summaries_drops_is_carried_over_word_for_word(
    make_settings: Callable[..., Settings], keeps_all: bool
) -> None:
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    facts = "; ".join(f"fact_{n}={n * 7}" for n in range(SHARE_OVER_FACTS))
    first = f"first: code word TULIP.{_naming(0, 11)}\nFacts: {facts}"
    merged = "merged: TULIP and files 12-23." + _naming(0, 23)
    if keeps_all:
        merged += f"\nFacts: {facts}"
    outcome, view = _second_compaction(settings, ScriptedChatModel([first, merged, "stray"]))
    assert outcome.record["carried_summaries"] == 0
    text = view[0].text
    if keeps_all:
        # A rewrite that dropped nothing is the summary as written, byte for byte.
        assert CARRY_OVER_HEADING not in text and text.endswith(merged)
        return
    # Every fact the rewrite dropped, each as it was written, after it, in their order:
    # longer than the summary's share, they fit the room it has under the hard target,
    # which the first summary took too. The files it named are the ledger's and the
    # file check's, not carried again.
    carried = text.split(CARRY_OVER_HEADING, 1)[1].split()
    assert carried == ["Facts:", *(f"fact_{n}={n * 7}" for n in range(SHARE_OVER_FACTS))]
    assert not outcome.record["summary_cut"]


# A rewrite with facts of its own beside the first summary's: together with what the
# compaction keeps, more than the room under the hard target.
REWRITE_OWN_FACTS = 800


def test_carried_details_give_room_back_before_the_summary_is_asked_for_again(
    make_settings: Callable[..., Settings],
) -> None:
    """The carried details fill the summary's room under the hard target; what the
    compaction keeps beside it then passes the target. The oldest details give that
    room back; asked for a shorter summary instead, the summarizer rewrote it all (a
    lossy one halved it: 152/300 codes at 8k where 299 stay now)."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    facts = "; ".join(f"fact_{n}={n * 7}" for n in range(SHARE_OVER_FACTS + 300))
    first = f"first: code word TULIP.{_naming(0, 11)}\nFacts: {facts}"
    own = "; ".join(f"more_{n}={n * 3}" for n in range(REWRITE_OWN_FACTS))
    merged = f"merged: TULIP and files 12-23.{_naming(0, 23)}\nMore: {own}"
    summarizer = ScriptedChatModel([first, merged, "shortened"])
    outcome, view = _second_compaction(settings, summarizer)
    assert not outcome.record["summary_cut"]
    assert len(summarizer.calls) == 2  # no third call to shorten it
    text = view[0].text
    assert merged in text and "shortened" not in text
    carried = text.split(CARRY_OVER_HEADING, 1)[1].split()
    expected = [f"fact_{n}={n * 7}" for n in range(SHARE_OVER_FACTS + 300)]
    # The newest that fit, in their order; the oldest gave their room back.
    assert "fact_0=0" not in carried and carried == expected[-len(carried) :]
    assert len(carried) > SHARE_OVER_FACTS // 2


def test_a_provider_that_counts_as_we_do_gets_each_part_in_one_summarizer_call(
    make_settings: Callable[..., Settings],
) -> None:
    """A summarizer call is sized with a 2% count margin when the summarizer is the main
    model, its tokenizer is known and the provider's reports agree with our count, plus
    what the provider counts over ours, up to the estimate's 10%. The smallest history
    that the 10% margin summarizes in two calls is summarized in one when the provider
    agrees or counts 2.5% more (a margin of 10% from 2.1% over took a second call for
    parts that fit), and in two on a provider that counts 10% more, whose prompts the 2%
    would overflow."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    counter = get_counter(settings.model)
    assert counter.source == "exact"

    def calls(turns: int, provider_ratio: float) -> int:
        summarizer = ScriptedChatModel(["Audited." + _naming(0, turns)])
        history = [HumanMessage("Audit the files.", id="u0"), *varied_reads(turns, 12)]
        ours = counter.count_messages(history)
        measured = (int(ours * provider_ratio), ours)
        outcome = _compactor(settings, summarizer)(
            history, trigger="auto", system=[], tools=[], measured=measured
        )
        assert outcome is not None
        return len(summarizer.calls)

    turns = next(n for n in range(20, 400, 2) if calls(n, 1.10) > 1)
    assert calls(turns, 1.0) == 1
    assert calls(turns, 1.025) == 1
    assert calls(turns, 1.10) == 2


def _cut(text: str, output_tokens: int) -> AIMessage:
    """A reply the provider stopped at its output limit after ``output_tokens``."""
    return AIMessage(
        content=text,
        response_metadata={"finish_reason": "length"},
        usage_metadata={"input_tokens": 1, "output_tokens": output_tokens, "total_tokens": 1},
    )


def test_a_summary_cut_at_its_output_limit_is_asked_for_again_with_the_limit_stated(
    make_settings: Callable[..., Settings],
) -> None:
    """A summarizer reply the provider stopped at an output cap nothing stated has lost
    its end: it is not used, and the summarizer is asked again, told a share of where it
    stopped; its whole reply is the summary."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    whole = "Audited. f11.txt holds the code ORBIT-1111." + _naming(0, 11)

    def summarize(messages: list[BaseMessage]) -> AIMessage:
        if "at most" in messages[-1].text:
            return AIMessage(whole)
        return _cut("Audited. Files read: f0.txt, f1.txt, f2", 400)

    summarizer = ScriptedChatModel([summarize])
    history = [HumanMessage("Audit the files.", id="u0"), *varied_reads(12, 12)]
    outcome = _compactor(settings, summarizer)(history, trigger="auto", system=[], tools=[])
    assert outcome is not None
    assert len(summarizer.calls) == 2
    assert "at most" not in summarizer.calls[0][-1].text
    limit = int(400 * SUMMARY_OUTPUT_LIMIT_ASK_SHARE)
    assert summarizer.calls[1][-1].text.endswith(OUTPUT_LIMIT_PROMPT.format(limit=limit))
    assert "ORBIT-1111" in outcome.record["summary"]
    assert SUMMARY_OUTPUT_CUT_NOTE.strip() not in outcome.record["summary"]
    assert not outcome.record["summary_cut"]


def test_a_summary_cut_again_says_so_and_is_recorded_as_cut(
    make_settings: Callable[..., Settings],
) -> None:
    """A summarizer that always runs to its limit (a local model in a repetition loop):
    its replies are kept (all the summary there is) with a note that they stopped there
    and where the rest is, the compaction is recorded as cut, and the calls it costs are
    bounded: two for the part, told the limit once more, and one for each half of at
    most two halvings."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    summarizer = ScriptedChatModel([_cut("Audited." + _naming(0, 11), 300)])
    history = [HumanMessage("Audit the files.", id="u0"), *varied_reads(12, 12)]
    outcome = _compactor(settings, summarizer)(history, trigger="auto", system=[], tools=[])
    assert outcome is not None
    assert len(summarizer.calls) == 2 + 2 * SUMMARY_CUT_SPLITS_MAX
    assert SUMMARY_OUTPUT_CUT_NOTE.strip() in outcome.record["summary"]
    assert outcome.record["summary_cut"]


# More files than half a part of 11 reads: the whole part's reply is cut, a half's is not.
PART_FILES_CUT = 8


def test_a_part_whose_summary_is_cut_again_is_summarized_in_halves(
    make_settings: Callable[..., Settings],
) -> None:
    """A summary that needs more room than its call leaves is cut even when the
    summarizer is told the limit: the part is summarized in halves, each call's reply
    with more room, and the summary holds both, with no note of a cut."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)

    def summarize(messages: list[BaseMessage]) -> AIMessage:
        seen = [i for i in range(12) if f"f{i}.txt" in messages[-1].text]
        if len(seen) > PART_FILES_CUT:
            return _cut("Audited. f0.txt holds", 300)
        return AIMessage("Audited. " + " ".join(f"f{i}.txt holds CODE-{i:04d}." for i in seen))

    summarizer = ScriptedChatModel([summarize])
    history = [HumanMessage("Audit the files.", id="u0"), *varied_reads(12, 12)]
    outcome = _compactor(settings, summarizer)(history, trigger="auto", system=[], tools=[])
    assert outcome is not None
    summary = outcome.record["summary"]
    part = [i for i in range(12) if f"f{i}.txt" in summarizer.calls[0][-1].text]
    assert len(part) > PART_FILES_CUT and all(f"CODE-{i:04d}" in summary for i in part)
    assert NEXT_PIECE_HEADING in summary
    assert SUMMARY_OUTPUT_CUT_NOTE.strip() not in summary
    assert not outcome.record["summary_cut"]
    assert len(summarizer.calls) == 4  # cut, cut when told, then two halves


def test_a_summarizer_set_to_a_small_max_tokens_is_told_its_limit_at_once(
    make_settings: Callable[..., Settings],
) -> None:
    """A summarizer that sends ``max_tokens`` below the room a compaction plans for the
    summary (``AGENTGRAPH_MAX_OUTPUT_TOKENS``) is told a share of that limit in its first
    request, instead of writing a summary the provider would cut; one whose limit leaves
    the room is told nothing."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    history = [HumanMessage("Audit the files.", id="u0"), *varied_reads(12, 12)]
    reply = "Audited." + _naming(0, 11)
    capped = ScriptedChatModel([reply])
    outcome = _compactor(settings, capped.bind(max_tokens=256))(  # type: ignore[arg-type]
        history, trigger="auto", system=[], tools=[]
    )
    assert outcome is not None and len(capped.calls) == 1
    limit = int(256 * SUMMARY_OUTPUT_LIMIT_ASK_SHARE)
    assert capped.calls[0][-1].text.endswith(OUTPUT_LIMIT_PROMPT.format(limit=limit))
    roomy = ScriptedChatModel([reply])
    assert _compactor(settings, roomy.bind(max_tokens=int(WINDOW) // 2))(  # type: ignore[arg-type]
        history, trigger="auto", system=[], tools=[]
    )
    assert "at most" not in roomy.calls[0][-1].text


def test_a_shorter_summary_cut_at_its_output_limit_is_not_taken(
    make_settings: Callable[..., Settings],
) -> None:
    """Asked for a shorter summary, a reply the provider stopped at its limit is shorter
    only because its end is missing: the whole summary is kept."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    summary = "Audited. " + "f1.txt holds the code ORBIT-1234. " * 60
    summarizer = ScriptedChatModel([_cut("Audited. f1.txt holds", 10)])
    assert _compactor(settings, summarizer)._shorten(summary, 100, None) == summary
    assert len(summarizer.calls) == 1


def test_unvalued_constants_are_the_constants_a_summary_names_without_their_value() -> None:
    reading = (
        "1\timport os\n"
        "2\tLIMIT_A = 291\n"
        '3\tNAME: str = "build-7"  # the release\n'
        "4\tlower_case = 5\n"
        "5\tUNNAMED = 3\n"
        "6\tRATIO = 0.75\n"
    )
    summary = "mod.py sets LIMIT_A, NAME and lower_case; RATIO is 0.75."
    assert unvalued_constants(summary, [reading]) == [[("LIMIT_A", "291"), ("NAME", '"build-7"')]]
    assert unvalued_constants("LIMIT_A is 291, NAME build-7", [reading]) == [[]]
    assert unvalued_constants("LIMIT_AB", [reading]) == [[]]  # a whole word only


def test_a_file_is_said_of_when_named_with_an_identifier_only_its_readings_hold() -> None:
    readings = {
        "logs/part_001.txt": "CODE part_001: ORBIT-8919\nSTATUS part_001: done\nlog line 00000",
        "logs/part_002.txt": "CODE part_002: LAUNCH-7838\nSTATUS part_002: done\nlog line 00000",
        "notes.txt": "nothing of note here",
    }
    own = own_identifiers(readings)
    # Shared words (CODE, STATUS) and the path's own words are no one file's.
    assert own == {
        "logs/part_001.txt": {"ORBIT-8919"},
        "logs/part_002.txt": {"LAUNCH-7838"},
        "notes.txt": set(),
    }
    summary = "Read part_001.txt (ORBIT-8919), part_002.txt and notes.txt."
    words = identifiers(summary)
    said = {p for p in readings if says_of(words, summary, p, own.get(p, ()))}
    assert said == {"logs/part_001.txt", "notes.txt"}
    # A word holding the identifier is not it.
    assert not says_of(
        identifiers("part_001.txt ORBIT-89190"),
        "part_001.txt ORBIT-89190",
        "logs/part_001.txt",
        own["logs/part_001.txt"],
    )


def test_a_file_printed_with_others_is_said_of_on_a_line_naming_it_with_what_they_held() -> None:
    """``cat part_001.txt part_002.txt``: one reading of both, so neither has an
    identifier of its own; a summary says of one only on a line naming it with an
    identifier of that reading (a list of the files read names both and says nothing).
    A file also read alone has its own identifiers from that reading."""
    both = "CODE part_001: ORBIT-8919\nCODE part_002: LAUNCH-7838\n"
    alone = "CODE part_003: VECTOR-6757\n"
    readings = [
        (("logs/part_001.txt", "logs/part_002.txt"), both),
        (("logs/part_003.txt", "logs/part_004.txt"), alone + "CODE part_004: APOGEE-5676\n"),
        (("logs/part_003.txt",), alone),
        (("c.txt",), "CODE c: XRAY-1234"),
    ]
    own, shared = reading_identifiers(readings)
    assert own["logs/part_001.txt"] == own["logs/part_002.txt"] == set()
    assert (
        shared["logs/part_001.txt"]
        == shared["logs/part_002.txt"]
        == {
            "ORBIT-8919",
            "LAUNCH-7838",
        }
    )
    # VECTOR-6757 is held by readings of part_003 only; APOGEE-5676 by one it shares.
    assert own["logs/part_003.txt"] == {"VECTOR-6757"}
    assert shared["logs/part_004.txt"] == {"APOGEE-5676"}
    assert own["c.txt"] == {"XRAY-1234"} and "c.txt" not in shared
    summary = "Files read: part_001.txt, part_002.txt, part_004.txt\nCODE part_001: ORBIT-8919"
    words = identifiers(summary)
    said = {p for p in own if says_of(words, summary, p, own[p], shared.get(p, ()))}
    assert said == {"logs/part_001.txt"}


@hypothesis_settings(max_examples=60, deadline=None, database=None)
@given(
    texts=st.lists(
        st.text(alphabet="abcXYZ_-019 \n", min_size=0, max_size=60), min_size=1, max_size=6
    )
)
def test_a_summary_that_holds_every_reading_says_of_every_file(texts: list[str]) -> None:
    readings = {f"src/m{i}.py": text for i, text in enumerate(texts)}
    own = own_identifiers(readings)
    whole = "\n".join(f"{path}: {text}" for path, text in readings.items())
    words = identifiers(whole)
    assert all(says_of(words, whole, p, own[p]) for p in readings)
    names_only = " ".join(readings)
    bare = identifiers(names_only)
    assert all(says_of(bare, names_only, p, own[p]) == (not own[p]) for p in readings)


def _with_constants(history: list[BaseMessage], values: dict[int, str]) -> list[BaseMessage]:
    """``history`` whose read of ``f{i}.txt`` also defines ``values[i]`` on a line."""
    out: list[BaseMessage] = []
    for m in history:
        i = int(m.tool_call_id[1:]) if isinstance(m, ToolMessage) else -1
        if i in values:
            m = m.model_copy(update={"content": f"{m.text}\n99\t{values[i]}"})
        out.append(m)
    return out


def test_constants_a_summary_names_without_their_values_are_asked_about_once(
    make_settings: Callable[..., Settings],
) -> None:
    """A summary that names the constants two readings define but not their values is
    followed by one question about them, with only those readings; the values it
    answers are appended. A summary that gives the values is asked nothing more."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    history = [
        HumanMessage("Audit the files.", id="u0"),
        *_with_constants(varied_reads(12, 12), {0: "LIMIT_A = 291", 1: "LIMIT_B = 294"}),
    ]
    asked_values = VALUES_PROMPT.split("{", 1)[0]

    def summarize(messages: list[BaseMessage]) -> str:
        if messages[-1].text.startswith(asked_values):
            return "LIMIT_A = 291 (f0.txt); LIMIT_B = 294 (f1.txt)"
        return "Audited; f0.txt and f1.txt define LIMIT_A and LIMIT_B." + _naming(0, 11)

    summarizer = ScriptedChatModel([summarize])
    outcome = _compactor(settings, summarizer)(history, trigger="auto", system=[], tools=[])
    assert outcome is not None
    assert "291" in outcome.record["summary"] and "294" in outcome.record["summary"]
    questions = [c[-1].text for c in summarizer.calls if c[-1].text.startswith(asked_values)]
    assert len(questions) == 1
    assert "LIMIT_A (f0.txt), LIMIT_B (f1.txt)" in questions[0]
    assert "line 3 of f0" in questions[0] and "line 3 of f2" not in questions[0]

    valued = ScriptedChatModel(["Audited: LIMIT_A = 291, LIMIT_B = 294." + _naming(0, 11)])
    assert _compactor(settings, valued)(history, trigger="auto", system=[], tools=[])
    assert len(valued.calls) == 1


_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(min_value=1, max_value=4)),
        st.tuples(st.just("boundary"), st.booleans()),  # marked: another kind's marker
        st.tuples(st.just("drop"), st.integers(min_value=1, max_value=5)),
        st.tuples(st.just("replace"), st.integers(min_value=0, max_value=30)),
        st.tuples(st.just("other"), st.integers(min_value=0, max_value=30)),
    ),
    max_size=40,
)


@hypothesis_settings(max_examples=200, deadline=None, database=None)
@given(steps=_STEPS)
def test_the_boundary_tracker_finds_the_view_since_last_boundary_finds(
    steps: list[tuple[str, Any]],
) -> None:
    """Histories that grow, gain boundaries (or messages marked otherwise), lose their
    tail, have a message replaced, or belong to another session (no shared objects):
    the tracker's view is always the same objects as a full scan's."""
    tracker = BoundaryTracker()
    history: list[BaseMessage] = []
    other: list[BaseMessage] = [HumanMessage("another session", id="o0")]
    for made, (op, arg) in enumerate(steps):
        if op == "append":
            history += [AIMessage(f"m{made}.{k}", id=f"m{made}.{k}") for k in range(arg)]
        elif op == "boundary":
            kind = "compact_boundary" if arg else "summary"
            history.append(SystemMessage(f"b{made}", additional_kwargs=marker(kind)))
        elif op == "drop":
            history = history[:-arg]
        elif op == "replace" and history:
            at = arg % len(history)
            history[at] = SystemMessage(f"r{made}", additional_kwargs=marker("compact_boundary"))
        view = other if op == "other" else history
        got = tracker.since_last_boundary(view)
        want = since_last_boundary(view)
        assert len(got) == len(want) and all(map(operator.is_, got, want))


def test_a_summary_over_its_share_that_fits_the_hard_target_is_kept_whole(
    make_settings: Callable[..., Settings],
) -> None:
    """A long summary (a long task's facts) that fits under the hard target is kept
    whole, taking the room of kept outputs; nobody asks the summarizer to drop facts."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    facts = (
        "Facts."
        + _naming(0, 11)
        + " ".join(f" fact{n}=CODE-{n * 37 % 9973:04d}" for n in range(900))
    )
    summarizer = ScriptedChatModel([facts], on_exhausted="repeat_last")
    compactor = _compactor(settings, summarizer)
    history = _history(12)
    outcome = compactor(history, trigger="auto", system=[], tools=[])
    assert outcome is not None
    assert len(summarizer.calls) == 1
    assert outcome.record["summary_cut"] is False
    view = since_last_boundary(_apply(history, outcome.updates))
    assert facts in str(view[0].content)
    usable = compactor.budget.usable
    assert usable // 2 < outcome.tokens_after <= usable * SUMMARY_HARD_TARGET_BUDGET_FRACTION


def test_files_re_read_after_a_compaction_refuse_hard_links_outside(tmp_path: Path) -> None:
    """The re-read at a compaction opens files as read_file does: a hard link to a file
    outside the workspace is not read through into the prompt."""
    from agentgraph.context.compaction import _read_fresh

    workspace = tmp_path / "ws"
    workspace.mkdir()
    outside = tmp_path / "secret.txt"
    outside.write_text("SECRET-VALUE\n")
    os.link(outside, workspace / "leak.txt")
    (workspace / "plain.txt").write_text("ordinary\n")
    counter = get_counter("gpt-4o-mini")
    assert _read_fresh(workspace, "leak.txt", 1000, counter) is None
    plain = _read_fresh(workspace, "plain.txt", 1000, counter)
    assert plain is not None and "ordinary" in plain


def _files_named(text: str) -> list[int]:
    return sorted({int(n) for n in re.findall(r"\bf(\d+)\.txt", text)})


def _every_other_file(messages: list[BaseMessage]) -> str:
    """A stateless lossy summarizer: it names every other file its request shows."""
    kept = _files_named(messages[-1].text)[::2]
    return "Handoff summary. " + " ".join(f"f{i}.txt held content of f{i}." for i in kept)


def test_files_a_summary_leaves_out_are_asked_about_with_their_readings_only(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    summarizer = ScriptedChatModel([_every_other_file])
    outcome = _compactor(settings, summarizer)(_history(12), trigger="auto", system=[], tools=[])
    assert outcome is not None
    summary = next(m for m in outcome.updates if agentgraph_kind(m) == "summary").text
    calls = summarizer.calls
    assert 1 < len(calls) <= 1 + SUMMARY_SUPPLEMENT_ATTEMPTS
    summarized = _files_named(calls[0][-1].text)
    named = summarized[::2]
    for call in calls[1:]:
        # Only the readings of the files not named so far, each under its path.
        asked = [i for i in summarized if i not in named]
        assert _files_named(call[-1].text) == asked
        assert all(f"[read_file f{i}.txt]" in call[-1].text for i in asked)
        named += asked[::2]
    assert SUPPLEMENT_HEADING in summary
    assert _files_named(summary) == sorted(named) == summarized


def test_a_supplement_that_names_none_of_the_files_is_not_kept_or_asked_again(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)

    def terse(messages: list[BaseMessage]) -> str:
        return "Handoff summary. Task: audit the files; code word TULIP."

    summarizer = ScriptedChatModel([terse])
    outcome = _compactor(settings, summarizer)(_history(12), trigger="auto", system=[], tools=[])
    assert outcome is not None
    summary = next(m for m in outcome.updates if agentgraph_kind(m) == "summary").text
    assert len(summarizer.calls) == 2
    assert SUPPLEMENT_HEADING not in summary


def test_files_a_summary_names_but_keeps_nothing_of_are_asked_about_too(
    make_settings: Callable[..., Settings],
) -> None:
    """A summary that lists every file read but keeps the facts of every other one: the
    ledger keeps that the others were read, nothing keeps what they held. A file named
    with none of the identifiers only its readings hold is asked about as a file not
    named is (with the file check alone, a summary naming the files of one half and the
    codes of the other lost half the codes of a task that marked files done)."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)

    def every_other_fact(messages: list[BaseMessage]) -> str:
        text = messages[-1].text
        facts = sorted(set(re.findall(r"FACT-\d+", text)), key=lambda f: int(f[5:]))[::2]
        named = _files_named(text)
        return "Handoff summary. " + " ".join(facts) + _naming(named[0], named[-1])

    summarizer = ScriptedChatModel([every_other_fact])
    history = _fact_history(12, lines=20, noted=False)
    outcome = _compactor(settings, summarizer)(history, trigger="auto", system=[], tools=[])
    assert outcome is not None and not outcome.record["fallback"]
    summary = next(m for m in outcome.updates if agentgraph_kind(m) == "summary").text
    assert set(re.findall(r"FACT-\d+", summary)) == {f"FACT-{i}" for i in range(12)}
    # The first supplement is asked about the files whose facts the summary dropped,
    # with their readings only.
    first = summarizer.calls[1][-1].text
    assert _files_named(first) == list(range(1, 12, 2))
    assert all(f"FACT-{i}" not in first for i in range(0, 12, 2))


def _renamed(history: list[BaseMessage], name: str) -> list[BaseMessage]:
    """``history`` with each ``f{i}.txt`` read and named as ``name.format(i)``."""

    def rename(text: str) -> str:
        return re.sub(r"\bf(\d+)\.txt", lambda m: name.format(int(m.group(1))), text)

    out: list[BaseMessage] = []
    for m in history:
        if isinstance(m, AIMessage) and m.tool_calls:
            calls = [{**c, "args": {"path": rename(c["args"]["path"])}} for c in m.tool_calls]
            m = m.model_copy(update={"tool_calls": calls})
        elif isinstance(m, ToolMessage):
            m = m.model_copy(update={"content": rename(m.text)})
        out.append(m)
    return out


def test_a_file_a_summary_names_without_its_extension_beside_its_fact_is_not_asked_about(
    make_settings: Callable[..., Settings],
) -> None:
    """A summary that keeps the facts of every other file in lines naming each file
    without its extension (``mod_02: FACT-2``, as a code line names its file) and names
    the rest by file name without their facts: only the rest are asked about (by file
    name alone every file of the part was asked about again, and a summarizer that halves
    what it is asked about left two codes of 100 unsaid at 32k)."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)

    def facts_by_stem(messages: list[BaseMessage]) -> str:
        found = sorted({int(n) for n in re.findall(r"FACT-(\d+)", messages[-1].text)})
        kept = " ".join(f"mod_{i:02}: FACT-{i}." for i in found[::2])
        return f"Handoff summary. {kept} Also read: " + ", ".join(
            f"mod_{i:02}.py" for i in found[1::2]
        )

    summarizer = ScriptedChatModel([facts_by_stem])
    history = _renamed(_fact_history(12, lines=20, noted=False), "mod_{:02}.py")
    outcome = _compactor(settings, summarizer)(history, trigger="auto", system=[], tools=[])
    assert outcome is not None and not outcome.record["fallback"]
    first = summarizer.calls[1][-1].text
    asked = sorted({int(n) for n in re.findall(r"\bmod_(\d+)\.py", first)})
    assert asked == list(range(1, 12, 2))
    summary = next(m for m in outcome.updates if agentgraph_kind(m) == "summary").text
    assert set(re.findall(r"FACT-\d+", summary)) == {f"FACT-{i}" for i in range(12)}


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("CODE part_017: ORBIT-4402", True),
        ("see logs/part_017 for it", True),
        ("part_0170 and xpart_017 and part_017x", False),
        ("a is a letter", False),  # a.py: too short a name to count without its extension
    ],
)
def test_a_file_is_named_by_its_name_without_the_extension_as_a_word(
    text: str, named: bool
) -> None:
    path = "a.py" if text.startswith("a ") else "logs/part_017.txt"
    assert says_of(identifiers(text), text, path, ()) is named


def _fact_history(turns: int, *, lines: int, noted: bool) -> list[BaseMessage]:
    """Reads of ``f{i}.txt`` whose one fact ``FACT-{i}`` is on the middle line; with
    ``noted`` each next call's message restates the fact of the read before it (the
    last read is restated by a final note)."""
    msgs: list[BaseMessage] = [HumanMessage("Note the fact of every file.", id="u0")]
    for i in range(turns):
        body = [f"row {k} of f{i}.txt holds nothing of note" for k in range(lines)]
        body[lines // 2] = f"FACT-{i}"
        note = f"noted FACT-{i - 1}" if noted and i else ""
        call = {"name": "read_file", "args": {"path": f"f{i}.txt"}, "id": f"c{i}"}
        msgs.append(AIMessage(content=note, id=f"a{i}", tool_calls=[call]))
        msgs.append(
            ToolMessage("\n".join(body), tool_call_id=f"c{i}", name="read_file", id=f"t{i}")
        )
    msgs.append(AIMessage(content=f"noted FACT-{turns - 1}" if noted else "", id="end"))
    return msgs


def _faithful(messages: list[BaseMessage]) -> str:
    """A stateless summarizer that keeps every fact and file its request shows."""
    text = messages[-1].text
    facts = sorted(set(re.findall(r"FACT-\d+", text)), key=lambda f: int(f[5:]))
    named = _files_named(text)
    files = _naming(named[0], named[-1]) if named else ""
    return "Handoff summary. " + " ".join(facts) + files


def test_results_the_model_did_not_restate_reach_the_summarizer_whole_in_more_calls(
    make_settings: Callable[..., Settings],
) -> None:
    """A part larger than one summarizer call: no result loses its middle; the rest goes
    to a second call, asked only for what to add, and its answer is appended."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    summarizer = ScriptedChatModel([_faithful])
    history = _fact_history(24, lines=60, noted=False)
    outcome = _compactor(settings, summarizer)(history, trigger="manual", system=[], tools=[])
    assert outcome is not None
    asked = [call[-1].text for call in summarizer.calls]
    assert len(asked) >= 2
    assert "truncated" not in "".join(asked)
    assert all(a.startswith(NEXT_PIECE_PROMPT) for a in asked[1:])
    assert not asked[0].startswith(NEXT_PIECE_PROMPT)
    # A later piece starts with the request its messages work on.
    request = "[user, earlier: the request the messages below work on]\nNote the fact"
    assert all(f"<conversation>\n{request}" in a for a in asked[1:])
    summary = next(m for m in outcome.updates if agentgraph_kind(m) == "summary").text
    assert NEXT_PIECE_HEADING in summary
    assert set(re.findall(r"FACT-\d+", summary)) == {f"FACT-{i}" for i in range(24)}


def test_results_the_model_restated_are_cut_to_keep_the_part_in_one_call(
    make_settings: Callable[..., Settings],
) -> None:
    """The same part, each read restated in the model's next message: the restated
    results are cut (their facts are in the notes, sent whole), and one call holds it."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    summarizer = ScriptedChatModel([_faithful])
    history = _fact_history(24, lines=60, noted=True)
    outcome = _compactor(settings, summarizer)(history, trigger="manual", system=[], tools=[])
    assert outcome is not None
    assert len(summarizer.calls) == 1
    assert "truncated" in summarizer.calls[0][-1].text
    summary = next(m for m in outcome.updates if agentgraph_kind(m) == "summary").text
    assert set(re.findall(r"FACT-\d+", summary)) == {f"FACT-{i}" for i in range(24)}


def test_a_restated_playbook_reaches_the_summarizer_whole_as_masking_keeps_it(
    make_settings: Callable[..., Settings],
) -> None:
    """The same restated part after a skill's playbook the model quotes: masking never
    hides a playbook, so the summarizer, which cuts only what masking would hide, gets
    it whole while the restated readings are cut."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    summarizer = ScriptedChatModel([_faithful])
    steps = "\n".join(f"step {k}: check STEP_{k} before the next" for k in range(80))
    call = {"name": "load_skill", "args": {"name": "audit"}, "id": "s0"}
    history = [
        HumanMessage("Note the fact of every file.", id="u0"),
        AIMessage(content="", id="as", tool_calls=[call]),
        ToolMessage(steps, tool_call_id="s0", name="load_skill", id="ts"),
        *_fact_history(24, lines=60, noted=True)[1:],
    ]
    history[3] = history[3].model_copy(update={"content": "following STEP_0 to STEP_79"})
    outcome = _compactor(settings, summarizer)(history, trigger="manual", system=[], tools=[])
    assert outcome is not None
    asked = "".join(call[-1].text for call in summarizer.calls)
    assert "truncated" in asked
    assert steps in asked


def test_a_summarizer_on_the_main_models_window_reads_past_its_usable_budget(
    make_settings: Callable[..., Settings],
) -> None:
    """At 128k the usable budget is the window less a 50,000-token reserve for the main
    reply; a summary needs far less, so the summarizer takes a part larger than 80% of
    the usable budget in one call, every result whole. A summary model with its own
    budget is held to it."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW="128000")
    history = _fact_history(70, lines=100, noted=False)
    counter = get_counter(settings.model)
    part = sum(counter.count_text(m.text) for m in history)
    assert part > budget_for(settings).usable * 0.8
    shared = ScriptedChatModel([_faithful])
    _compactor(settings, shared)(history, trigger="manual", system=[], tools=[])
    assert len(shared.calls) == 1
    assert "truncated" not in shared.calls[0][-1].text
    own = ScriptedChatModel([_faithful])
    own_budget = budget_for(make_settings(AGENTGRAPH_CONTEXT_WINDOW="40000"))
    _compactor(settings, own, summarizer_budget=own_budget)(
        history, trigger="manual", system=[], tools=[]
    )
    assert len(own.calls) >= 2
    assert all(counter.count_messages(call) <= own_budget.usable for call in own.calls)


def test_a_later_piece_never_carries_its_request_past_the_calls_room(
    make_settings: Callable[..., Settings],
) -> None:
    """Results each nearly as large as one summarizer call: a later piece holds one of
    them whole, and the request it works on only when both fit the call."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    summarizer = ScriptedChatModel([_faithful])
    compactor = _compactor(settings, summarizer)
    counter = get_counter(settings.model)
    history = _fact_history(3, lines=960, noted=False)
    rules = " ".join(f"rule{k}" for k in range(700))
    history[0] = HumanMessage(f"Note the fact of every file. {rules}", id="u0")
    outcome = compactor(history, trigger="manual", system=[], tools=[])
    assert outcome is not None and not outcome.record["fallback"]
    calls = [call[-1].text for call in summarizer.calls]
    assert len(calls) >= 4  # the request, then one result per call
    biggest = max(counter.count_text(call) for call in calls)
    result = counter.count_text(history[2].text)
    assert result < biggest < result + counter.count_text(rules) // 2
    summary = next(m for m in outcome.updates if agentgraph_kind(m) == "summary").text
    assert set(re.findall(r"FACT-\d+", summary)) == {"FACT-0", "FACT-1", "FACT-2"}


def test_a_result_larger_than_a_call_is_summarized_with_the_call_that_made_it(
    make_settings: Callable[..., Settings],
) -> None:
    """Results each several times one summarizer call: each is cut to the room its
    call's piece has left, so every summarizer call holds a result beside the call that
    made it, never a call alone (one more paid request that shows the summarizer a tool
    call with no result)."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    summarizer = ScriptedChatModel([_faithful])
    history = _fact_history(3, lines=3000, noted=False)
    outcome = _compactor(settings, summarizer)(history, trigger="manual", system=[], tools=[])
    assert outcome is not None and not outcome.record["fallback"]
    calls = [call[-1].text for call in summarizer.calls if "<conversation>" in call[-1].text]
    assert len(calls) == 3
    for i, call in enumerate(calls):
        assert f'"path": "f{i}.txt"' in call and f"row 0 of f{i}.txt" in call


def test_unseen_results_are_kept_cut_while_their_originals_stay_whole_before_the_boundary(
    make_settings: Callable[..., Settings],
) -> None:
    """A call whose three results (each several thousand tokens, and one short) arrive
    past the compaction point: the view after the boundary shows the call and all its
    results, the short one whole and the long ones cut, within the hard target; the
    transcript before the boundary keeps every result whole."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    calls = [
        {"name": "read_file", "args": {"path": f"big{i}.txt"}, "id": f"r{i}"} for i in range(3)
    ]
    calls.append({"name": "grep", "args": {"pattern": "KEY"}, "id": "g0"})
    results = [
        ToolMessage(f"big{i} " + "word " * 6000, tool_call_id=f"r{i}", name="read_file", id=f"t{i}")
        for i in range(3)
    ]
    results.append(ToolMessage("big1.txt:9: KEY = 42", tool_call_id="g0", name="grep", id="tg"))
    history: list[BaseMessage] = [
        *_history(3),
        AIMessage(content="", id="par", tool_calls=calls),
        *results,
    ]
    outcome, stored, view = _compacted_view(settings, history, "Read the big files.")
    shown = [m for m in view if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in shown] == ["r0", "r1", "r2", "g0"]
    assert shown[-1].text == "big1.txt:9: KEY = 42"
    assert all(len(m.text) < len(results[0].text) for m in shown[:3])
    assert outcome.tokens_after <= budget_for(settings).usable * UNSEEN_KEPT_BUDGET_FRACTION
    before = stored[: stored.index(next(m for m in stored if m not in history))]
    assert all(r in before for r in results)


def _with_an_edit(history: list[BaseMessage]) -> list[BaseMessage]:
    """``history`` with an edit of ``notes.md`` after its first message: a session
    that changes files."""
    args = {"path": "notes.md", "old_string": "draft", "new_string": "final"}
    edit = AIMessage("", id="ed", tool_calls=[{"name": "edit_file", "args": args, "id": "e0"}])
    done = ToolMessage("edited notes.md: replaced 1 occurrence", tool_call_id="e0", id="te")
    return [history[0], edit, done, *history[1:]]


@pytest.mark.parametrize("edits", [True, False], ids=["changes-files", "only-reads"])
def test_a_result_the_model_has_not_seen_that_fits_stays_whole_where_files_change(
    make_settings: Callable[..., Settings], edits: bool
) -> None:
    """A compaction right after a read the model asked for, in a session that changes
    files: the read, summarized, also stays after the boundary whole, marked unseen, so
    the model sees what it asked for (summarized only, a file read to be edited was read
    again: its exact lines are in no summary). A session that only reads takes it from
    the summary."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    turns = 12  # small reads, then one larger than what a compaction keeps of them
    history = _numbered_reads(turns - 1, lines=60, total=60)
    history += _numbered_reads(1, start=turns - 1, lines=300, total=300)
    if edits:
        history = _with_an_edit(history)
    summarizer = ScriptedChatModel(
        ["Handoff summary." + _covering(0, turns - 1)], on_exhausted="repeat_last"
    )
    outcome = _compactor(settings, summarizer)(history, trigger="auto", system=[], tools=[])
    assert outcome is not None and not outcome.record["fallback"]
    summarized = "".join(call[-1].text for call in summarizer.calls)
    assert f"\tCODE-{turns - 1}\n" in summarized  # summarized too
    view = since_last_boundary(_apply(history, outcome.updates))
    newest = history[-1]
    assert isinstance(newest, ToolMessage)
    shown = [
        m for m in view if isinstance(m, ToolMessage) and m.tool_call_id == newest.tool_call_id
    ]
    assert [m.text for m in shown] == ([newest.text] if edits else [])
    assert all(m.additional_kwargs.get(UNSEEN_COPY_KEY) for m in shown)
    assert validate_history(view) == []


def test_results_kept_unseen_by_earlier_compactions_are_not_kept_again(
    make_settings: Callable[..., Settings],
) -> None:
    """Each compaction of a session that changes files keeps the read the model has yet
    to see; a later one does not keep it again. Its file is in no later summary (the
    reading went to the summary of its own compaction, whose file list the ledger
    took), and checked as a reading that summary left out, each was kept again by every
    later compaction: one more read in view a compaction, on 300 files at a 16k window
    23 compactions for 21."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)

    def listing(messages: list[BaseMessage]) -> str:
        text = messages[-1].text
        files = ", ".join(sorted(set(re.findall(r"f\d+\.txt", text))))
        codes = " ".join(sorted(set(re.findall(r"CODE-\d+", text))))
        return f"Handoff summary.\nFiles read: {files}\nCodes: {codes}"

    compact = _compactor(settings, ScriptedChatModel([listing], on_exhausted="repeat_last"))

    def batch(start: int) -> list[BaseMessage]:
        # Small reads, then one larger than what a compaction keeps of them.
        newest = _numbered_reads(1, start=start + 11, lines=300, total=300)
        return [*_numbered_reads(11, start=start, lines=60, total=60), *newest]

    history = _with_an_edit(batch(0))
    for k in range(1, 4):
        outcome = compact(history, trigger="auto", system=[], tools=[])
        assert outcome is not None and not outcome.record["fallback"]
        history = _apply(history, outcome.updates)
        view = since_last_boundary(history)
        shown = [m.tool_call_id for m in view if isinstance(m, ToolMessage)]
        assert shown == [history[-1].tool_call_id]  # the newest read alone
        history = [*history, *batch(100 * k)]


def test_unseen_results_kept_in_view_are_not_summarized_again(
    make_settings: Callable[..., Settings],
) -> None:
    """Results a compaction summarized whole and kept in view (cut) because the model
    had not seen them are not in the next compaction's summarizer input: the summary
    carried beside them holds them already (summarized again, every batch of parallel
    reads at an 8k window went to two compactions' summarizers, each part then larger
    than one call)."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    calls = [
        {"name": "read_file", "args": {"path": f"big{i}.txt"}, "id": f"r{i}"} for i in range(3)
    ]
    results = [
        ToolMessage(f"big{i} " + "word " * 6000, tool_call_id=f"r{i}", name="read_file", id=f"t{i}")
        for i in range(3)
    ]
    history: list[BaseMessage] = [
        *_history(3),
        AIMessage(content="", id="par", tool_calls=calls),
        *results,
    ]
    summarizer = ScriptedChatModel(
        ["Read f0.txt to f2.txt and big0.txt to big2.txt."], on_exhausted="repeat_last"
    )
    compact = _compactor(settings, summarizer)
    first = compact(history, trigger="auto", system=[], tools=[])
    assert first is not None and not first.record["fallback"]
    first_input = "".join(call[-1].text for call in summarizer.calls)
    assert all(f"big{i} word" in first_input for i in range(3))
    stored = _apply(history, first.updates)
    view = since_last_boundary(stored)
    assert [m.tool_call_id for m in view if isinstance(m, ToolMessage)] == ["r0", "r1", "r2"]
    asked = len(summarizer.calls)
    more = _numbered_reads(12, start=100)
    second = compact([*stored, *more], trigger="auto", system=[], tools=[])
    assert second is not None
    later = "".join(call[-1].text for call in summarizer.calls[asked:])
    assert "CODE-100" in later
    assert not any(f"big{i} word" in later for i in range(3)), later[:500]


def test_unseen_results_are_kept_when_the_prompt_and_summary_fill_the_hard_target(
    make_settings: Callable[..., Settings],
) -> None:
    """An 8k window whose system prompt and a long summary leave less than the hard
    target's room: five parallel reads that arrived past the compaction point stay in
    view, cut to share the room under the compaction point, so the model reads its
    values instead of a summarizer's guess at them, and the next call is not compacted
    again before it sees them."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW="8192")
    budget = budget_for(settings)
    counter = get_counter(settings.model)
    system = [SystemMessage(" ".join(f"rule{k}" for k in range(1600)), id="sys")]
    names = ["config", "network", "parser", "report", "storage"]
    calls = [
        {"name": "read_file", "args": {"path": f"{n}.py"}, "id": f"r{i}"}
        for i, n in enumerate(names)
    ]
    results = [
        ToolMessage(
            f"TIMEOUT_SECONDS = {17 + 11 * i}\n" + f"# line of {n}.py\n" * 180,
            tool_call_id=f"r{i}",
            name="read_file",
            id=f"t{i}",
        )
        for i, n in enumerate(names)
    ]
    history: list[BaseMessage] = [
        *_history(3, result_chars=3000),
        AIMessage(content="", id="par", tool_calls=calls),
        *results,
    ]
    summary = "Handoff summary. Read f0.txt to f2.txt. " + "Detail noted. " * 330
    outcome = _compactor(settings, ScriptedChatModel([summary]))(
        history, trigger="auto", system=system, tools=[]
    )
    assert outcome is not None and not outcome.record["fallback"]
    fixed = counter.count_messages(system)
    view = since_last_boundary(_apply(history, outcome.updates))
    without = [m for m in view if not isinstance(m, ToolMessage) and m.id != "par"]
    hard_room = int(budget.usable * SUMMARY_HARD_TARGET_BUDGET_FRACTION) - fixed
    # The room the hard target leaves cannot give each of the five results its least.
    assert hard_room - counter.count_messages(without) < 5 * UNSEEN_OUTPUT_MIN_TOKENS
    shown = [m for m in view if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in shown] == [f"r{i}" for i in range(5)]
    for i, message in enumerate(shown):
        assert f"TIMEOUT_SECONDS = {17 + 11 * i}" in message.text
    assert outcome.tokens_after < budget.compact_at


def test_a_kept_read_the_model_has_not_seen_is_kept_less_as_a_page_to_read_on(
    make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    """A compaction over its target keeps less of the newest read: as its leading lines
    with where to read on, never cut in its middle. Cut head and tail, a log's middle
    line (its code) was in no prompt and in no later summary: at an 8k window the model
    wrote its report without 4 of 100 codes."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW="16000")
    log = tmp_path / "part_084.txt"
    lines = [f"log line {n:05}: subsystem {n % 7} reported values {n * 31}" for n in range(35)]
    lines.insert(18, "CODE part_084: APOGEE-9196")
    log.write_text("\n".join(lines) + "\n")
    read = read_text_file(log, "logs/part_084.txt")
    counter = get_counter(settings.model)
    assert counter.count_text(read) > KEEP_LESS_TOOL_OUTPUT_MAX_TOKENS
    call = {"name": "read_file", "args": {"path": "logs/part_084.txt"}, "id": "r84"}
    history: list[BaseMessage] = [
        *_history(3, result_chars=3000),
        AIMessage(content="", id="a84", tool_calls=[call]),
        ToolMessage(read, tool_call_id="r84", name="read_file", id="t84"),
    ]
    # A system prompt that leaves the kept messages' room this read, and a summary long
    # enough to take that room back.
    system = [SystemMessage(" ".join(f"rule{k}" for k in range(300)), id="sys")]
    summary = "Read f0.txt to f2.txt. " + " ".join(f"CODE f{n}: X-{n}" for n in range(1200))
    outcome = _compactor(settings, ScriptedChatModel([summary]))(
        history, trigger="auto", system=system, tools=[]
    )
    assert outcome is not None
    view = since_last_boundary(_apply(history, outcome.updates))
    kept = next(m for m in view if isinstance(m, ToolMessage) and m.tool_call_id == "r84")
    assert kept.text != read  # kept less: the prompt was over its target
    assert "truncated" not in kept.text
    shown = [line.split("\t", 1)[0] for line in kept.text.splitlines() if "\t" in line]
    assert shown == [str(n) for n in range(1, len(shown) + 1)]
    assert re.search(rf"offset={len(shown)}\b", kept.text)


def _numbered_reads(
    turns: int, *, start: int = 0, lines: int = 120, total: int = 240
) -> list[BaseMessage]:
    """Reads of ``f{i}.txt`` as read_file words them: ``lines`` numbered lines of a file
    of ``total``, the code ``CODE-{i}`` on the first (after the task when ``start`` is
    0)."""
    msgs: list[BaseMessage] = []
    if start == 0:
        msgs.append(HumanMessage("Note the code of every file.", id="u0"))
    for i in range(start, start + turns):
        body = [f"CODE-{i}"] + [f"row {n} of f{i}.txt: nominal" for n in range(2, lines + 1)]
        text = "\n".join(f"{n}\t{t}" for n, t in enumerate(body, 1))
        text += f"\n[showing lines 1-{lines} of {total}; "
        text += f"call read_file with offset={lines} to continue]"
        call = {"name": "read_file", "args": {"path": f"f{i}.txt"}, "id": f"c{i}"}
        msgs.append(AIMessage(content="", id=f"a{i}", tool_calls=[call]))
        msgs.append(ToolMessage(text, tool_call_id=f"c{i}", name="read_file", id=f"t{i}"))
    return msgs


@pytest.mark.parametrize("names_files", [False, True])
def test_readings_a_summary_leaves_out_stay_in_view_in_the_room_the_compaction_leaves(
    make_settings: Callable[..., Settings], names_files: bool
) -> None:
    """A summarizer that writes only the task, even asked about the files again: the
    newest readings it left out stay after the boundary as excerpts of their leading
    lines (the code on each first line) with a note naming the span read and where all
    of it is, never an offset to read on from; the prompt stays under the target and
    the transcript keeps every reading whole. A summary that names every file keeps
    none of them."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    turns = 14
    history = _numbered_reads(turns)
    reply = "Handoff summary. Task: note the code of every file." + (
        _naming(0, turns - 1) if names_files else ""
    )
    outcome, stored, view = _compacted_view(settings, history, reply)
    counter = get_counter(settings.model)
    excerpts = [m for m in view if isinstance(m, ToolMessage) and "an excerpt of" in m.text]
    usable = budget_for(settings).usable
    assert outcome.tokens_after <= usable * TARGET_AFTER_BUDGET_FRACTION
    if names_files:
        assert excerpts == []
        return
    ids = [m.tool_call_id for m in excerpts]
    kept_ids = [m.tool_call_id for m in view if isinstance(m, ToolMessage)]
    # The newest left out, oldest first, right before what the compaction kept anyway
    # (or ending with the newest reading when it kept none).
    whole = [m.tool_call_id for m in view if isinstance(m, ToolMessage) and m not in excerpts]
    end = int(whole[0][1:]) if whole else turns
    assert len(ids) >= 2 and ids == [f"c{i}" for i in range(end - len(ids), end)]
    assert kept_ids[: len(ids)] == ids
    # Copies: the readings stay whole before the boundary.
    before = stored[: stored.index(next(m for m in stored if m not in history))]
    assert all(history[2 + 2 * int(i[1:])] in before for i in ids)
    shown = sum(counter.count_text(m.text) for m in excerpts)
    assert shown <= usable * LEFT_OUT_BUDGET_FRACTION
    for m in excerpts:
        i = int(m.tool_call_id[1:])
        assert m.text.startswith(f"1\tCODE-{i}\n")
        assert counter.count_text(m.text) >= LEFT_OUT_READING_MIN_TOKENS * 0.9
        assert m.text.endswith(
            f'of 240, an excerpt of this read of lines 1-120; read_history("c{i}") shows all of it]'
        )
        assert "offset" not in m.text


def test_readings_kept_for_a_summary_that_left_them_out_are_not_summarized_again(
    make_settings: Callable[..., Settings],
) -> None:
    """The next compaction summarizes only what is new: the excerpts an earlier summary
    left out are not in its summarizer's input (summarized, they only added their file
    names to the part; asked about, the same readings again), and the readings it
    leaves out in turn take their place, the newest first."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    turns = 14
    summarizer = ScriptedChatModel(
        ["Handoff summary. Task: note the code of every file."], on_exhausted="repeat_last"
    )
    compact = _compactor(settings, summarizer)
    history = _numbered_reads(turns)
    first = compact(history, trigger="auto", system=[], tools=[])
    assert first is not None
    stored = _apply(history, first.updates)
    kept_first = {
        m.tool_call_id
        for m in since_last_boundary(stored)
        if isinstance(m, ToolMessage) and "an excerpt of" in m.text
    }
    assert kept_first
    asked = len(summarizer.calls)
    history = [*stored, *_numbered_reads(turns, start=turns)]
    second = compact(history, trigger="auto", system=[], tools=[])
    assert second is not None
    later = [call[-1].text for call in summarizer.calls[asked:]]
    assert later and not any(f"f{i[1:]}.txt" in text for i in kept_first for text in later)
    view = since_last_boundary(_apply(history, second.updates))
    excerpts = [
        int(m.tool_call_id[1:])
        for m in view
        if isinstance(m, ToolMessage) and "an excerpt of" in m.text
    ]
    assert excerpts and min(excerpts) >= turns


def _calls_to_summarize(settings: Settings, history: list[BaseMessage], files: int) -> int:
    """Summarizer calls of an auto compaction of ``history``, whose summary keeps the
    code of each of its ``files`` files (none is asked about again)."""
    summarizer = ScriptedChatModel(
        ["Handoff summary." + _covering(0, files - 1)], on_exhausted="repeat_last"
    )
    assert _compactor(settings, summarizer)(history, trigger="auto", system=[], tools=[])
    return len(summarizer.calls)


def test_a_part_one_small_read_over_a_summarizer_call_leaves_that_read_whole_for_the_next_summary(
    make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A part that a summarizer call holds but for its newest answered read, a small one
    after large ones: kept whole until the next compaction it costs the prompts less
    than the second call it saves, so it stays after the boundary whole (not masked) and
    the next compaction summarizes it (on 300 small files at a 16k window three of 24
    compactions asked a second call for a few hundred tokens)."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    turns = 5

    def part(lines: int) -> list[BaseMessage]:
        small = _numbered_reads(1, start=turns - 2, lines=20, total=20)
        newest = _numbered_reads(1, start=turns - 1, lines=lines, total=lines)
        return [*_numbered_reads(turns - 2, lines=lines, total=lines), *small, *newest]

    # The smallest part of large reads and a small one before the newest that takes two
    # calls when nothing may wait.
    with monkeypatch.context() as patched:
        patched.setattr(compaction, "SUMMARY_SPILL_KEPT_BUDGET_FRACTION", 0.0)
        lines = next(
            n for n in range(200, 800, 2) if _calls_to_summarize(settings, part(n), turns) > 1
        )
    history = part(lines)
    summarizer = ScriptedChatModel(
        ["Handoff summary." + _covering(0, turns - 1)], on_exhausted="repeat_last"
    )
    compact = _compactor(settings, summarizer)
    first = compact(history, trigger="auto", system=[], tools=[])
    assert first is not None and not first.record["fallback"]
    assert len(summarizer.calls) == 1
    summarized = summarizer.calls[0][-1].text
    left = [i for i in range(turns) if f"\tCODE-{i}\n" not in summarized]
    assert left == [turns - 2]  # the small one; the newest, unseen, is summarized now
    stored = _apply(history, first.updates)
    view = since_last_boundary(stored)
    original = history[2 + 2 * left[0]]
    assert isinstance(original, ToolMessage)
    shown = [
        m for m in view if isinstance(m, ToolMessage) and m.tool_call_id == original.tool_call_id
    ]
    assert [m.text for m in shown] == [original.text]
    asked = len(summarizer.calls)
    second = compact(
        [*stored, *_numbered_reads(turns, start=100, lines=lines, total=lines)],
        trigger="auto",
        system=[],
        tools=[],
    )
    assert second is not None
    later = "".join(call[-1].text for call in summarizer.calls[asked:])
    assert f"\tCODE-{left[0]}\n" in later


def test_a_read_that_would_cost_the_prompts_more_than_a_summarizer_call_is_summarized_now(
    make_settings: Callable[..., Settings],
) -> None:
    """Reads of one size, one more than a summarizer call holds: left whole for the next
    compaction, the answered read would go out with each of the next cycle's model calls
    (about as many as this part holds, here twelve), more tokens than a second call. At
    a 32k window three reads left so sent 1.558M prompt tokens for 100 files where two
    calls a compaction send 1.479M (deepagents 1.533M)."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    turns = 12
    history = _numbered_reads(turns, lines=100, total=100)
    summarizer = ScriptedChatModel(
        ["Handoff summary." + _covering(0, turns - 1)], on_exhausted="repeat_last"
    )
    outcome = _compactor(settings, summarizer)(history, trigger="auto", system=[], tools=[])
    assert outcome is not None
    assert len(summarizer.calls) == 2
    summarized = "".join(call[-1].text for call in summarizer.calls)
    assert all(f"\tCODE-{i}\n" in summarized for i in range(turns))


def test_a_part_over_a_summarizer_call_with_unseen_results_leaves_the_read_before_them(
    make_settings: Callable[..., Settings],
) -> None:
    """The newest call's results, unseen and too long to keep whole, are summarized now
    (a cut copy stays in view); the answered read before them, by which the part is
    more than one summarizer call, waits in view whole for the next summary. Those
    unseen results had stopped the search for groups to leave (a second summarizer call
    on most compactions of a task reading one file a call at an 8k window)."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    turns = 8  # answered reads of 100 lines; then one of 400 the model has yet to see
    history = _numbered_reads(turns, lines=100, total=100)
    history += _numbered_reads(1, start=turns, lines=400, total=400)
    summarizer = ScriptedChatModel(
        ["Handoff summary." + _covering(0, turns)], on_exhausted="repeat_last"
    )
    outcome = _compactor(settings, summarizer)(history, trigger="auto", system=[], tools=[])
    assert outcome is not None and not outcome.record["fallback"]
    assert len(summarizer.calls) == 1
    summarized = summarizer.calls[0][-1].text
    assert f"\tCODE-{turns}\n" in summarized  # the unseen read
    assert f"\tCODE-{turns - 1}\n" not in summarized
    view = since_last_boundary(_apply(history, outcome.updates))
    waiting = history[2 * turns]  # the read before the unseen one
    assert isinstance(waiting, ToolMessage) and waiting.tool_call_id == f"c{turns - 1}"
    shown = [m for m in view if isinstance(m, ToolMessage) and m.tool_call_id == f"c{turns - 1}"]
    assert [m.text for m in shown] == [waiting.text]


def test_a_stack_past_its_share_is_carried_once_more_rather_than_take_a_second_call(
    make_settings: Callable[..., Settings],
) -> None:
    """An earlier summary longer than the stack's share, rewritten with a new part that
    one summarizer call holds alone, would take two calls: it is carried verbatim once
    more (up to SUMMARY_STACK_DEFER_SHARE of the summary's room) and the part takes one
    (at an 8k window, batches of eight parallel reads took 17 summarizer calls for 13
    compactions, the stack rewritten beside each batch)."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    history = _numbered_reads(4, lines=100, total=100)
    long_summary = "Handoff summary." + _covering(0, 3) + " "
    long_summary += " ".join(f"FACT-{k}" for k in range(800))
    first = _compactor(settings, ScriptedChatModel([long_summary]))(
        history, trigger="auto", system=[], tools=[]
    )
    assert first is not None and first.record["summary"] == long_summary
    stored = _apply(history, first.updates)
    turns = 11  # reads one call holds, but not beside the earlier summary
    more = _numbered_reads(turns, start=100, lines=100, total=100)
    reply = "Second summary." + _covering(0, 3) + _covering(100, 100 + turns - 1)
    summarizer = ScriptedChatModel([reply], on_exhausted="repeat_last")
    second = _compactor(settings, summarizer)([*stored, *more], trigger="auto", system=[], tools=[])
    assert second is not None and not second.record["summary_cut"]
    assert len(summarizer.calls) == 1
    assert "FACT-799" not in summarizer.calls[0][-1].text
    assert second.record["carried_summaries"] == 1
    view = since_last_boundary(_apply([*stored, *more], second.updates))
    assert any(long_summary in m.text for m in view if isinstance(m, HumanMessage))


def test_a_part_is_one_summarizer_call_while_it_fits_beside_the_calls_own_words(
    make_settings: Callable[..., Settings],
) -> None:
    """What a summarizer call holds besides the part is its instructions and wrapper, as
    counted: a part that fills the call up to them is summarized in one call (a flat
    reserve of SUMMARY_FRAMING_TOKENS, twice their size, sent parts a few hundred tokens
    over it to a second call), and one a little larger in two, each within the call."""
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    counter = get_counter(settings.model)
    reply_tokens, margin = 1_000, 0.02

    def summarize(extra: int) -> list[int]:
        summarizer = ScriptedChatModel(["Audited."], on_exhausted="repeat_last")
        compactor = _compactor(settings, summarizer)
        room = compactor._piece_budget(reply_tokens, 1.0, margin)
        framing = counter.count_messages(
            [
                SystemMessage(content=_instructions(None)),
                HumanMessage(content=f"{NEXT_PIECE_PROMPT}\n\n<conversation>\n\n</conversation>"),
            ]
        )
        assert framing < SUMMARY_FRAMING_TOKENS / 2
        older: list[BaseMessage] = [HumanMessage("Audit the files.", id="u0")]
        target = room - framing + extra
        i = 0
        while True:
            entries = render_transcript(older, counter.count_text)
            used = sum(counter.count_text(e) + SUMMARY_ENTRY_JOIN_TOKENS for e in entries)
            if used >= target - 40:
                break
            size = min(800, target - used - 30)
            call = {"name": "read_file", "args": {"path": f"f{i}.txt"}, "id": f"c{i}"}
            older.append(AIMessage(content="", id=f"a{i}", tool_calls=[call]))
            body = " ".join(f"w{n}" for n in range(size))
            while counter.count_text(f"[tool result read_file]\n{body}") > size:
                body = body[: int(len(body) * 0.95)]
            older.append(ToolMessage(body, tool_call_id=f"c{i}", name="read_file", id=f"t{i}"))
            i += 1
        compactor._summarize(older, None, reply_tokens=reply_tokens, scale=1.0, margin=margin)
        sizes = [counter.count_messages(call) for call in summarizer.calls]
        assert all(size <= room for size in sizes)
        return sizes

    assert len(summarize(-60)) == 1
    assert len(summarize(SUMMARY_FRAMING_TOKENS)) == 2


def _reads(first: int, reads: int, *, copy: bool = False) -> list[BaseMessage]:
    """A reply of ``reads`` read calls and their results; ``copy`` marks them as copies
    a summarizer had whole."""
    kwargs = {SUMMARIZED_COPY_KEY: True} if copy else {}
    ids = range(first, first + reads)
    calls = [{"name": "read_file", "args": {"path": f"f{i}"}, "id": f"c{i}"} for i in ids]
    return [
        AIMessage("", id=f"a{first}", tool_calls=calls, additional_kwargs=kwargs),
        *[
            ToolMessage(f"v{i}", tool_call_id=f"c{i}", id=f"t{i}", additional_kwargs=kwargs)
            for i in ids
        ],
    ]


_TASK = HumanMessage("read them", id="u0")
_BOUNDARY = SystemMessage(
    "[compaction boundary: auto]", additional_kwargs=marker("compact_boundary")
)
_SUMMARY = HumanMessage("the summary", additional_kwargs=marker("summary"))


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        ([_TASK, *_reads(0, 3)], True),
        ([_TASK, *_reads(0, 3), *_reads(3, 2)], False),  # the first reply's results answered
        ([_TASK, *_reads(0, 3)[:1]], False),  # no result yet
        ([_TASK, AIMessage("done", id="d")], False),
        (
            [_TASK, *_reads(0, 3), _BOUNDARY, _SUMMARY, *_reads(0, 3, copy=True), *_reads(3, 2)],
            True,
        ),
        ([*_reads(0, 3), _BOUNDARY, _SUMMARY, *_reads(0, 3), *_reads(3, 2)], False),  # kept whole
        ([_TASK, *_reads(0, 3), _BOUNDARY, _SUMMARY, *_reads(3, 2)], True),
    ],
)
def test_only_the_newest_calls_unanswered_results_are_new_since_the_boundary(
    messages: list[BaseMessage], expected: bool
) -> None:
    assert only_unseen_results_since_boundary(messages) is expected
