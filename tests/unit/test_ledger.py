"""The progress ledger: derived from tool calls, compacted without loss, never lost."""

from __future__ import annotations

import json
import posixpath
import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.graph.message import add_messages

from agentgraph.capabilities.recall.search import history_docs
from agentgraph.capabilities.tools.workspace_scan import (
    CHANGED_PATHS_MAX,
    FILES_CHANGED_KEY,
    ScanChanges,
    with_scanned_changes,
)
from agentgraph.config import Settings
from agentgraph.context.artifacts import cut_marker
from agentgraph.context.compaction import Compactor, since_last_boundary
from agentgraph.context.ledger import (
    LEDGER_KIND,
    LEDGER_SCAN_LISTED_MAX,
    LedgerMemo,
    collect_ledger,
    listed_paths,
    read_calls,
    render_ledger,
    without_listed_files,
)
from agentgraph.context.shown_files import ShownCut, ShownLines, shown_marker
from agentgraph.context.tokens import get_counter
from agentgraph.context.windows import budget_for
from agentgraph.runtime.history import agentgraph_kind
from agentgraph.runtime.history.kinds import with_marker
from tests.fakes.chat_model import ScriptedChatModel


def _call(n: int, name: str, args: dict[str, Any], result: str, **kw: Any) -> list[BaseMessage]:
    call_id = f"c{n}"
    return [
        AIMessage("", id=f"a{n}", tool_calls=[{"name": name, "args": args, "id": call_id}]),
        ToolMessage(result, tool_call_id=call_id, name=name, id=f"t{n}", **kw),
    ]


def _read(n: int, path: str, first: int, last: int, total: int) -> list[BaseMessage]:
    body = "\n".join(f"{i}\tline {i}" for i in range(first, last + 1))
    if last < total:
        body += f"\n[showing lines {first}-{last} of {total}; call read_file with offset={last}"
        body += " to continue]"
    return _call(n, "read_file", {"path": path, "offset": first - 1}, body)


def test_reads_are_grouped_by_folder_with_numbered_runs_and_partial_ranges() -> None:
    history: list[BaseMessage] = [HumanMessage("go", id="u")]
    for i in range(1, 6):
        history += _read(i, f"logs/part_{i:03d}.txt", 1, 10, 10)
    history += _read(10, "src/app.py", 1, 87, 240)
    history += _read(11, "src/app.py", 175, 240, 240)
    history += _read(12, "./README.md", 1, 3, 3)
    text = render_ledger(collect_ledger(history))
    assert "- logs/ part_001.txt … part_005.txt (5 files)" in text
    assert "- src/ app.py (lines 1-87, 175-240 of 240)" in text
    assert "- ./ README.md" in text and "README.md (lines" not in text


def test_an_error_result_is_not_counted_as_a_read_or_change() -> None:
    history: list[BaseMessage] = [HumanMessage("go", id="u")]
    history += _call(1, "read_file", {"path": "gone.txt"}, "no such file", status="error")
    history += _call(
        2, "edit_file", {"path": "a.py", "old_string": "x"}, "not found", status="error"
    )
    assert collect_ledger(history).paths() == set()


def test_changes_commands_subagents_and_todos_are_recorded() -> None:
    history: list[BaseMessage] = [HumanMessage("go", id="u")]
    history += _call(
        1,
        "write_file",
        {"path": "report.md", "content": "a\nb\n"},
        "created report.md: 4 bytes, 2 lines",
    )
    history += _call(
        2,
        "edit_file",
        {"path": "calc.py", "old_string": "return a - b", "new_string": "x = 1\nreturn a + b"},
        "edited calc.py: replaced 1 occurrence (first at line 2)",
    )
    history += _call(3, "run_bash", {"command": "pytest -q"}, "1 failed\n[exit code 1]")
    history += _call(4, "run_bash", {"command": "pytest -q"}, "2 passed\n[exit code 0]")
    history += _call(5, "run_bash", {"command": "pytest -q"}, "2 passed\n[exit code 0]")
    history += _call(
        6, "run_bash", {"command": "sleep 99"}, "[timed out after 5s; process group killed]"
    )
    payload = json.dumps({"ok": False, "result": "x", "context_id": "s", "loops": 2})
    history += _call(7, "call_subagent", {"task": "summarize the docs"}, payload)
    todos = [{"content": "fix add", "status": "done"}, {"content": "test", "status": "pending"}]
    history += _call(8, "todo_write", {"todos": todos}, "ok")
    history += _call(9, "grep", {"pattern": "x"}, "no matches")
    text = render_ledger(collect_ledger(history))
    assert "- report.md: created (+2 −0 lines)" in text
    assert "- calc.py: edited (+2 −1 lines)" in text
    assert "- $ pytest -q → exit 1, then exit 0 ×2" in text
    assert "- $ sleep 99 → timed out" in text
    assert '- "summarize the docs" → failed' in text
    assert "Todo list: [x] fix add · [ ] test" in text
    assert "Other tool calls: grep ×1" in text


def test_a_subagent_outcome_is_read_from_the_result_artifact() -> None:
    history: list[BaseMessage] = [HumanMessage("go", id="u")]
    # Today's result: a status line and the text (which may itself be JSON with "ok").
    text = '[subagent-1 failed · 2 steps]\n{"ok": true}'
    failed = {"ok": False, "context_id": "subagent-1", "loops": 2}
    history += _call(1, "call_subagent", {"task": "first"}, text, artifact=failed, status="error")
    done = {"ok": True, "context_id": "subagent-2", "loops": 2}
    history += _call(
        2, "call_subagent", {"task": "second"}, "[subagent-2 done · 2 steps]\nhi", artifact=done
    )
    ledger = render_ledger(collect_ledger(history))
    assert '- "first" → failed' in ledger
    assert '- "second" → done' in ledger


def test_files_a_subagent_s_applied_changes_changed_are_files_changed() -> None:
    """The caller's ledger lists the files its subagent's changes changed once applied
    (after a compaction the caller no longer sees the result that said so); held or
    conflicting changes, or a record that is not one, change nothing."""
    history: list[BaseMessage] = [HumanMessage("go", id="u")]
    applied = {
        "ok": True,
        "changes": {"state": "applied", "files": ["src/a.py", "old.py"], "deleted": ["old.py"]},
    }
    held = {"ok": True, "changes": {"state": "held", "files": ["src/b.py"]}}
    forged = {"ok": True, "changes": {"state": "applied", "files": ["../etc/passwd"]}}
    for n, artifact in enumerate((applied, held, forged), 1):
        history += _call(n, "call_subagent", {"task": f"t{n}"}, "[done]\nok", artifact=artifact)
    history += _call(
        4, "edit_file", {"path": "src/a.py", "old_string": "a", "new_string": "b"}, "ok"
    )
    ledger = collect_ledger(history)
    text = render_ledger(ledger)
    assert "- src/a.py: edited, changed by a subagent (+1 −1 lines)" in text
    assert "- old.py: deleted by a subagent\n" in text + "\n"
    assert set(ledger.changes) == {"src/a.py", "old.py"}
    assert [task for task, _ in ledger.subagents] == ["t1", "t2", "t3"]


def test_files_the_user_undid_are_marked_until_changed_again() -> None:
    from agentgraph.session.undo import UndoResult, undo_note

    history: list[BaseMessage] = [HumanMessage("go", id="u")]
    history += _call(1, "write_file", {"path": "a.py", "content": "x\n"}, "created a.py")
    history += _call(2, "write_file", {"path": "b.py", "content": "y\n"}, "created b.py")
    note = undo_note(UndoResult(turns=1, restored=[], removed=["a.py", "b.py"], failed=[]))
    assert note is not None
    history += [
        note,
        *_call(
            3,
            "edit_file",
            {"path": "b.py", "old_string": "y", "new_string": "z"},
            "edited b.py: replaced 1 occurrence",
        ),
    ]
    text = render_ledger(collect_ledger(history))
    assert "- a.py: created (+1 −0 lines), then put back by the user's /undo" in text
    assert "- b.py: created, edited (+2 −1 lines)" in text


def test_a_call_counts_once_when_a_compaction_moved_a_copy_of_it() -> None:
    history: list[BaseMessage] = [HumanMessage("go", id="u")]
    history += _call(1, "run_bash", {"command": "make"}, "[exit code 0]")
    moved = [m.model_copy(update={"id": f"{m.id}~1"}) for m in history[1:]]
    assert collect_ledger([*history, *moved]).commands == {"make": ["exit 0"]}


def test_past_its_share_the_largest_read_folder_folds_and_changes_never_do() -> None:
    history: list[BaseMessage] = [HumanMessage("go", id="u")]
    for i in range(60):
        history += _read(i, f"vendor/{chr(97 + i % 26)}{i}.js", 1, 5, 5)
    history += _call(100, "write_file", {"path": "out.txt", "content": "x"}, "created out.txt")
    counter = get_counter("gpt-4o-mini")
    text = render_ledger(collect_ledger(history), max_tokens=120, count=counter.count_text)
    assert "vendor/ 60 files (folded" in text
    assert "- out.txt: created" in text


def _edit(n: int, path: str) -> list[BaseMessage]:
    args = {"path": path, "old_string": "STATUS: open", "new_string": "STATUS: done"}
    return _call(n, "edit_file", args, f"edited {path}: replaced 1 occurrence (first at line 2)")


def test_past_its_share_numbered_files_changed_alike_stay_named_as_a_run() -> None:
    # A task that edits a folder of numbered files one by one: one line a file does not
    # fit a small window's share, and a count per folder would leave the model to edit
    # them all again; runs of files changed alike keep every name. (Every other edit
    # adds a line: files changed exactly alike are one line within the share already.)
    history: list[BaseMessage] = [HumanMessage("go", id="u")]
    for i in range(1, 201):
        path = f"logs/part_{i:03d}.txt"
        args = {
            "path": path,
            "old_string": "STATUS: open",
            "new_string": "STATUS: done" + "\nx" * (i % 2),
        }
        history += _call(i, "edit_file", args, f"edited {path}: replaced 1 occurrence")
    history += _call(300, "write_file", {"path": "logs/part_050.txt", "content": "x\n"}, "ok")
    created = "created report.md: 2 bytes, 1 lines"
    history += _call(301, "write_file", {"path": "report.md", "content": "a\n"}, created)
    ledger = collect_ledger(history)
    counter = get_counter("gpt-4o-mini")
    text = render_ledger(ledger, max_tokens=300, count=counter.count_text)
    assert counter.count_text(text) <= 300
    assert "- logs/ part_001.txt … part_049.txt (49 files): edited (+74 −49 lines in all)" in text
    assert "- logs/part_050.txt: rewritten, edited (+2 −1 lines)" in text
    assert "- report.md: created (+1 −0 lines)" in text
    for path in ledger.changes:
        assert _listed(text, path), path
    # Named as a run, the files count as listed: a summary's list of them goes.
    assert listed_paths(ledger, text)[1] == set(ledger.changes)


def test_numbered_files_changed_exactly_alike_are_one_line_within_the_share() -> None:
    # One line a file repeats the same words and counts for every file of a folder a
    # task goes through: a run line loses nothing of them, so it is there at once, not
    # only once the ledger is past its share (55 lines had cost ~770 tokens a prompt).
    history: list[BaseMessage] = [HumanMessage("go", id="u")]
    for i in range(1, 56):
        history += _edit(i, f"logs/part_{i:03d}.txt")
    # part_056 added a line more: its counts differ, so it ends the run.
    args = {"path": "logs/part_056.txt", "old_string": "a", "new_string": "a\nb"}
    history += _call(56, "edit_file", args, "edited logs/part_056.txt: replaced 1 occurrence")
    for i in range(57, 60):
        history += _edit(i, f"logs/part_{i:03d}.txt")
    ledger = collect_ledger(history)
    counter = get_counter("gpt-4o-mini")
    for text in (
        render_ledger(ledger),
        render_ledger(ledger, max_tokens=100_000, count=counter.count_text),
    ):
        changed = text.split("Files created or changed:\n", 1)[1].splitlines()
        assert changed == [
            "- logs/ part_001.txt … part_055.txt (55 files): edited (+1 −1 lines each)",
            "- logs/part_056.txt: edited (+2 −1 lines)",
            "- logs/ part_057.txt … part_059.txt (3 files): edited (+1 −1 lines each)",
        ]
        assert listed_paths(ledger, text)[1] == set(ledger.changes)


_CHANGES = st.lists(
    st.tuples(
        st.sampled_from(["logs", "src", ""]),
        st.integers(1, 40),
        st.sampled_from(["edit", "write"]),
    ),
    min_size=1,
    max_size=120,
)


@settings(max_examples=80, deadline=None, database=None)
@given(changes=_CHANGES, share=st.integers(60, 900))
def test_every_file_changed_is_named_or_counted_in_its_folder(
    changes: list[tuple[str, int, str]], share: int
) -> None:
    history: list[BaseMessage] = [HumanMessage("go", id="u")]
    for n, (folder, number, how) in enumerate(changes):
        path = posixpath.join(folder, f"part_{number:03d}.txt")
        if how == "edit":
            history += _edit(n, path)
        else:
            history += _call(n, "write_file", {"path": path, "content": "x\n"}, "ok")
    ledger = collect_ledger(history)
    counter = get_counter("gpt-4o-mini")
    text = render_ledger(ledger, max_tokens=share, count=counter.count_text)
    counted = re.findall(r"^- (\S*)/ (\d+) files? changed", text, re.MULTILINE)
    folded = {"" if folder == "." else folder for folder, _n in counted}
    named = {p for p in ledger.changes if _listed(text, p)}
    assert named == listed_paths(ledger, text)[1]
    for path in set(ledger.changes) - named:
        assert posixpath.dirname(path) in folded, (path, text)
    # Each file once: named in one line, or in its folder's count.
    shown = len(named) + sum(int(n) for _folder, n in counted)
    assert shown == len(ledger.changes), text


def test_a_ledger_of_thousands_of_files_in_single_file_folders_fits_its_share() -> None:
    history: list[BaseMessage] = [HumanMessage("go", id="u")]
    for i in range(2_400):
        history += _read(i, f"pkg{i % 1_200}/sub{i}/mod.py", 1, 5, 5)
    for i in range(300):
        history += _call(5_000 + i, "run_bash", {"command": f"make target{i}"}, "[exit code 0]")
    history += _call(9_999, "write_file", {"path": "out.txt", "content": "x"}, "created out.txt")
    counter = get_counter("gpt-4o-mini")
    text = render_ledger(collect_ledger(history), max_tokens=1_280, count=counter.count_text)
    assert counter.count_text(text) <= 1_280
    assert "- out.txt: created" in text
    assert "earlier commands (folded" in text and "$ make target299 → exit 0" in text


def test_one_command_over_numbered_files_is_one_line_that_no_share_drops() -> None:
    """A model reading through a command the ledger does not take for a read (``grep -v
    '^#' F``) runs one command a file: 300 lines that a ledger past its share dropped,
    oldest first, to a count, and with them which files the model had been through."""
    history: list[BaseMessage] = [HumanMessage("go", id="u")]
    for i in range(1, 301):
        status = 2 if i == 150 else 0
        command = f"grep -v '^#' logs/part_{i:03d}.txt"
        history += _call(i, "run_bash", {"command": command}, f"x\n[exit code {status}]")
    history += _call(400, "run_bash", {"command": "cat a_1.py b_2.py"}, "[exit code 0]")
    for i in (5, 6):
        history += _call(500 + i, "run_bash", {"command": f"head src/m{i}.py"}, "[exit code 0]")
    counter = get_counter("gpt-4o-mini")
    text = render_ledger(collect_ledger(history), max_tokens=300, count=counter.count_text)
    assert counter.count_text(text) <= 300
    run = "logs/part_001.txt … logs/part_149.txt → exit 0 each (149 commands, one a file)"
    assert text.splitlines()[-6:] == [
        f"- $ grep -v '^#' {run}",
        "- $ grep -v '^#' logs/part_150.txt → exit 2",
        "- $ grep -v '^#' logs/part_151.txt … logs/part_300.txt → exit 0 each "
        "(150 commands, one a file)",
        "- $ cat a_1.py b_2.py → exit 0",  # two numbered files: no run
        "- $ head src/m5.py → exit 0",  # a run of two stays two lines
        "- $ head src/m6.py → exit 0",
    ], text
    assert "folded" not in text
    for i in range(1, 301):
        assert _command_shown(text, f"grep -v '^#' logs/part_{i:03d}.txt"), i


def test_a_command_naming_one_file_is_a_reading_of_it_though_the_ledger_lists_a_command() -> None:
    """The summary's check of what it left out and the readings kept in view take a
    command that names one file, exited 0 and printed something, as a reading of that
    file; the ledger still lists it as a command."""
    history: list[BaseMessage] = [HumanMessage("go", id="u")]
    history += _call(1, "run_bash", {"command": "grep -v '^#' logs/a.txt"}, "x\n[exit code 0]")
    history += _call(2, "run_bash", {"command": "grep -v '^#' logs/b.txt"}, "[exit code 1]")
    history += _call(3, "run_bash", {"command": "grep -n x logs/c.txt"}, "\n[exit code 0]")
    history += _call(4, "run_bash", {"command": "diff a.txt b.txt"}, "< a\n[exit code 0]")
    history += _call(5, "run_bash", {"command": "cat logs/d.txt"}, "d\n[exit code 0]")
    history += _call(6, "read_file", {"path": "/ws/src/e.py"}, "1\te")
    history += _call(7, "run_bash", {"command": "grep -n def /ws/src/f.py"}, "1:def\n[exit code 0]")
    assert read_calls(history, workspace="/ws") == {
        "c1": ("logs/a.txt",),
        "c4": ("a.txt", "b.txt"),  # a command naming two files: a reading of both
        "c5": ("logs/d.txt",),
        "c6": ("src/e.py",),
        "c7": ("src/f.py",),
    }
    ledger = collect_ledger(history, workspace="/ws")
    assert "$ grep -v '^#' logs/a.txt → exit 0" in render_ledger(ledger)
    assert ledger.command_reads == {
        "grep -v '^#' logs/a.txt": ("logs/a.txt",),
        "diff a.txt b.txt": ("a.txt", "b.txt"),
        "grep -n def /ws/src/f.py": ("src/f.py",),
    }


def test_a_run_of_commands_is_as_old_as_its_newest_and_counts_them_all_when_dropped() -> None:
    history: list[BaseMessage] = [HumanMessage("go", id="u")]
    for i in range(1, 301):
        command = f"grep -v '^#' logs/part_{i:03d}.txt"
        history += _call(i, "run_bash", {"command": command}, "x\n[exit code 0]")
    for i in range(60):
        history += _call(1_000 + i, "run_bash", {"command": f"make target{i}"}, "[exit code 0]")
    history += _call(
        2_000, "run_bash", {"command": "grep -v '^#' logs/part_301.txt"}, "[exit code 0]"
    )
    counter = get_counter("gpt-4o-mini")
    text = render_ledger(collect_ledger(history), max_tokens=300, count=counter.count_text)
    assert counter.count_text(text) <= 300
    # The run's newest command ran last: the make commands drop first, each one command.
    assert "logs/part_001.txt … logs/part_301.txt → exit 0 each (301 commands" in text
    dropped = re.search(r"- (\d+) earlier commands \(folded", text)
    assert dropped is not None
    shown = text.count("$ make target")
    assert int(dropped.group(1)) + shown == 60
    # A run whose newest command ran before the make commands drops before them, and
    # the note counts every command it stood for.
    early = history[: 1 + 2 * 300] + history[1 + 2 * 300 : 1 + 2 * 360]
    text = render_ledger(collect_ledger(early), max_tokens=200, count=counter.count_text)
    dropped = re.search(r"- (\d+) earlier commands \(folded", text)
    assert dropped is not None and "grep -v" not in text, text
    assert int(dropped.group(1)) == 300 + 60 - text.count("$ make target"), text


def test_a_numeric_string_offset_is_a_partial_read() -> None:
    history: list[BaseMessage] = [HumanMessage("go", id="u")]
    body = (
        "11\tline\n12\tline\n[showing lines 11-12 of 40; call read_file with offset=12 to continue]"
    )
    history += _call(1, "read_file", {"path": "a.txt", "offset": "10"}, body)
    assert "a.txt (lines 11-12 of 40)" in render_ledger(collect_ledger(history))


# -- a property over long sessions with compactions ------------------------------------

_PATHS = [f"src/m{i}.py" for i in range(6)] + [f"logs/part_{i:03d}.txt" for i in range(1, 9)]
_ACTIONS = st.lists(
    st.one_of(
        st.tuples(st.just("read"), st.sampled_from(_PATHS), st.integers(0, 2)),
        st.tuples(st.just("write"), st.sampled_from(_PATHS), st.integers(1, 5)),
        st.tuples(
            st.just("bash"),
            st.sampled_from(["make", "pytest", "ls", *(f"wc -l src/m{i}.py" for i in range(1, 5))]),
            st.integers(0, 2),
        ),
        st.tuples(st.just("compact"), st.just(""), st.integers(0, 1)),
    ),
    min_size=1,
    max_size=40,
)


# A run of files read, or of files changed alike (its kind and line totals after it).
_RUN_RE = re.compile(r"^(\D*)(\d+)(\D*) … \D*(\d+)\D* \(\d+ files\)(?:: .*)?$")


# A run of one command over numbered files: its words before the file, the two ends'
# numbers, its words after.
_COMMAND_RUN_RE = re.compile(r"^- \$ (.*?)(\S*?)(\d+)(\.\w+) … \S*?(\d+)\.\w+(.*?) → .* each \(")


def _command_shown(text: str, command: str) -> bool:
    """Whether ``text`` shows ``command``: its own line, or a run holding it."""
    if f"$ {command} →" in text:
        return True
    for line in text.splitlines():
        run = _COMMAND_RUN_RE.match(line)
        if run is None:
            continue
        before, stem, low, suffix, high, after = run.groups()
        for n in range(int(low), int(high) + 1):
            if command == f"{before}{stem}{n:0{len(low)}d}{suffix}{after}":
                return True
    return False


def _listed(text: str, path: str) -> bool:
    """Whether the ledger ``text`` names ``path`` (literally or inside a numbered run)."""
    folder, _, name = path.rpartition("/")
    for line in text.splitlines():
        if not line.startswith(f"- {folder or '.'}/ "):
            continue
        for item in line.split(" ", 2)[2].split(", "):
            if item == name or item.startswith(f"{name} (lines"):
                return True
            run = _RUN_RE.match(item)
            if run and name.startswith(run.group(1)) and name.endswith(run.group(3)):
                number = name[len(run.group(1)) : len(name) - len(run.group(3))]
                if number.isdigit() and int(run.group(2)) <= int(number) <= int(run.group(4)):
                    return True
    return any(line.startswith(f"- {path}: ") for line in text.splitlines())


def _settings(tmp: str) -> Settings:
    return Settings(  # type: ignore[call-arg]
        _env_file=None,
        AGENTGRAPH_HOME=tmp,
        OPENAI_BASE_URL="http://127.0.0.1:9/v1",
        AGENTGRAPH_MODEL="gpt-4o-mini",
        AGENTGRAPH_CONTEXT_WINDOW="16000",
    )


@settings(max_examples=60, deadline=None, database=None)
@given(actions=_ACTIONS, lossy=st.booleans())
def test_every_path_and_command_the_ledger_held_survives_every_compaction(
    actions: list[tuple[str, str, int]], lossy: bool, tmp_path_factory: Any
) -> None:
    settings_ = _settings(str(tmp_path_factory.mktemp("home")))
    # A summarizer that forgets everything (or fails): the ledger must not depend on it.
    reply: Any = "" if lossy else "progress: some files"
    compactor = Compactor(
        ScriptedChatModel([reply], on_exhausted="repeat_last"),
        get_counter(settings_.model),
        budget_for(settings_),
        sleep=lambda _s: None,
    )
    state: list[BaseMessage] = [HumanMessage("work through the files", id="u")]
    held_paths: set[str] = set()
    held_commands: set[str] = set()
    for n, (kind, arg, size) in enumerate(actions):
        if kind == "read":
            state += _read(n, arg, 1 + size * 10, 10 + size * 10, 40)
        elif kind == "write":
            state += _call(
                n, "write_file", {"path": arg, "content": "x\n" * size}, f"created {arg}"
            )
        elif kind == "bash":
            state += _call(n, "run_bash", {"command": arg}, f"out\n[exit code {size}]")
        else:
            ledger = collect_ledger(state)
            held_paths, held_commands = ledger.paths(), set(ledger.commands)
            trigger = "manual" if size else "guard"
            outcome = compactor(state, trigger=trigger, system=[], tools=[])
            if outcome is None:
                continue
            state = list(add_messages(state, outcome.updates))  # type: ignore[arg-type]
            after = collect_ledger(state)
            assert held_paths <= after.paths()
            assert held_commands <= set(after.commands)
            # And the model sees it: the ledger message after the summary names them.
            shown = [m for m in since_last_boundary(state) if agentgraph_kind(m) == LEDGER_KIND]
            if held_paths or held_commands:
                assert len(shown) == 1
                for path in held_paths:
                    assert _listed(shown[0].text, path), (path, shown[0].text)
                for command in held_commands:
                    assert _command_shown(shown[0].text, command), (command, shown[0].text)


def test_the_ledger_is_redacted_and_carries_the_spiral_note_not_the_summary(
    tmp_path_factory: Any,
) -> None:
    settings_ = _settings(str(tmp_path_factory.mktemp("home")))
    compactor = Compactor(
        ScriptedChatModel(["progress"], on_exhausted="repeat_last"),
        get_counter(settings_.model),
        budget_for(settings_),
        sleep=lambda _s: None,
        redact=lambda text: text.replace("hunter2", "[REDACTED]"),
    )
    state: list[BaseMessage] = [HumanMessage("load the dump", id="u")]
    state += _call(1, "run_bash", {"command": "mysql -phunter2 < dump.sql"}, "[exit code 0]")
    outcome = compactor(
        state, trigger="guard", system=[], tools=[], course_change="[agentgraph: stalled]"
    )
    assert outcome is not None
    view = since_last_boundary(list(add_messages(state, outcome.updates)))  # type: ignore[arg-type]
    (ledger,) = [m for m in view if agentgraph_kind(m) == LEDGER_KIND]
    assert ledger.text.startswith("[agentgraph: stalled]")
    assert "mysql -p[REDACTED] < dump.sql → exit 0" in ledger.text
    assert "hunter2" not in str(outcome.record)
    assert all("stalled" not in m.text for m in view if agentgraph_kind(m) == "summary")


def test_a_shared_memo_never_gives_one_session_anothers_entries() -> None:
    """Local servers number their calls from call_1 in every session: the memo keys on
    the result too, so the same id with another output is parsed anew."""
    memo = LedgerMemo()
    first: list[BaseMessage] = [HumanMessage("go", id="u"), *_read(1, "a.txt", 1, 10, 10)]
    second: list[BaseMessage] = [HumanMessage("go", id="u"), *_read(1, "a.txt", 1, 5, 90)]
    assert "a.txt (lines" not in render_ledger(collect_ledger(first, memo=memo))
    again = render_ledger(collect_ledger(second, memo=memo))
    assert "a.txt (lines 1-5 of 90)" in again
    assert again == render_ledger(collect_ledger(second))


def test_read_calls_names_each_successful_read_by_its_call() -> None:
    history: list[BaseMessage] = [HumanMessage("go", id="u")]
    history += _read(1, "./logs/a.txt", 1, 3, 3)
    history += _call(2, "read_file", {"path": "gone.txt"}, "Error: no such file", status="error")
    history += _call(3, "write_file", {"path": "b.txt", "content": "x"}, "created b.txt")
    history += _read(4, "src/app.py", 1, 2, 9)
    pending = AIMessage(
        "", id="a5", tool_calls=[{"name": "read_file", "args": {"path": "c.txt"}, "id": "c5"}]
    )
    assert read_calls([*history, pending]) == {"c1": ("logs/a.txt",), "c4": ("src/app.py",)}


def _bash(n: int, command: str, result: str) -> list[BaseMessage]:
    return _call(n, "run_bash", {"command": command}, result)


def test_files_read_through_the_shell_are_files_read_and_nothing_else_is() -> None:
    """``cat``, ``sed -n`` and ``tail -n +K`` read files as read_file does: they are listed
    (and summaries checked against them) as files read, not as commands run."""
    lines = "".join(f"line {i}\n" for i in range(1, 37))
    history: list[BaseMessage] = [HumanMessage("go", id="u")]
    for i in range(1, 6):
        history += _bash(i, f"cat logs/part_{i:03d}.txt", f"{lines}[exit code 0]")
    history += _bash(10, "sed -n '1,80p' src/app.py", f"{lines * 3}[exit code 0]")
    history += _bash(11, "tail -n +201 src/app.py", f"{lines}[exit code 0]")
    history += _bash(12, "cat gone.txt", "cat: gone.txt: No such file or directory\n[exit code 1]")
    history += _bash(13, "cat notes.md | head", f"{lines}[exit code 0]")
    text = render_ledger(collect_ledger(history))
    assert "- logs/ part_001.txt … part_005.txt (5 files)" in text
    assert "- src/ app.py (lines 1-80, 201-236 of 236)" in text
    assert "$ cat logs/" not in text and "sed -n" not in text
    assert "- $ cat gone.txt → exit 1" in text
    assert "- $ cat notes.md | head → exit 0" in text
    assert "notes.md (" not in text.split("Commands run")[0]
    assert read_calls(history) == {
        **{f"c{i}": (f"logs/part_{i:03d}.txt",) for i in range(1, 6)},
        "c10": ("src/app.py",),
        "c11": ("src/app.py",),
        "c13": ("notes.md",),  # a command naming one file: a reading of it to the summary
    }


def test_cat_of_several_files_reads_each_whole_when_nothing_was_cut() -> None:
    """``cat A B C D``, as models skimming a folder read: each file printed whole is a
    file read (listed as such, and a summary checked against each); a failed or cut one
    stays a command, whose output is still a reading of every file it names."""
    lines = "".join(f"line {i}\n" for i in range(1, 37))
    four = " ".join(f"logs/part_{i:03d}.txt" for i in range(1, 5))
    history: list[BaseMessage] = [HumanMessage("go", id="u")]
    history += _bash(1, f"cat {four}", f"{lines * 4}[exit code 0]")
    cut = f"{lines}\n…1,200 tokens truncated… full output: /tmp/x.txt\n{lines}[exit code 0]"
    history += _bash(2, "cat src/a.py src/b.py", cut)
    history += _bash(3, "cat src/c.py gone.py", f"{lines}cat: gone.py: No such file\n[exit code 1]")
    ledger = collect_ledger(history, workspace="/ws")
    text = render_ledger(ledger)
    assert "- logs/ part_001.txt … part_004.txt (4 files)" in text
    assert all(ledger.reads[f"logs/part_{i:03d}.txt"].complete for i in range(1, 5))
    assert "- $ cat src/a.py src/b.py → exit 0" in text and "src/a.py" not in ledger.reads
    assert "- $ cat src/c.py gone.py → exit 1" in text
    assert read_calls(history) == {
        "c1": tuple(f"logs/part_{i:03d}.txt" for i in range(1, 5)),
        "c2": ("src/a.py", "src/b.py"),
    }


def test_cat_of_several_files_cut_file_by_file_reads_the_lines_each_note_names() -> None:
    """An output the tool node cut file by file: each file its marker records as shown
    in part was read up to that line, the others whole. The same notes in an output
    nothing cut are a file's own text: every file read whole."""
    lines = "".join(f"line {i}\n" for i in range(1, 37))
    head = "".join(f"line {i}\n" for i in range(1, 21))
    note = "[showing lines 1-20 of 36; call read_file with offset=20 to continue]"
    answer = f"{lines}{head}src/b.py: {note}\n{lines}[exit code 0]"
    history: list[BaseMessage] = [HumanMessage("go", id="u")]
    history += _bash(1, "cat src/a.py src/b.py src/c.py", answer)
    cut = ShownCut(answer, {"src/b.py": (20, 36)})
    history[-1] = with_marker(history[-1], **cut_marker(lines * 3), **shown_marker(cut))
    history += _bash(2, "cat lib/a.py lib/b.py", answer.replace("src/b.py", "lib/b.py"))
    ledger = collect_ledger(history, workspace="/ws")
    assert ledger.reads["src/a.py"].complete and ledger.reads["src/c.py"].complete
    assert not ledger.reads["src/b.py"].complete
    assert "src/ a.py, b.py (lines 1-20 of 36), c.py" in render_ledger(ledger)
    assert ledger.reads["lib/a.py"].complete and ledger.reads["lib/b.py"].complete


def test_one_file_printed_by_cat_and_cut_reads_the_lines_its_marker_records() -> None:
    """``cat F`` (``tail -n +K F``) the tool node cut: the lines its marker records were
    read, not those its note says to read on to. The same text nothing marked is a read
    of what it printed."""
    head = "".join(f"line {i}\n" for i in range(1, 21))
    note = "[showing lines 1-20 of 100; call read_file with offset=20 to continue]"
    answer = f"{head}src/app.py: {note}\n[exit code 0]"
    whole = "".join(f"line {i}\n" for i in range(1, 101))
    history: list[BaseMessage] = [HumanMessage("go", id="u")]
    history += _bash(1, "cd src && cat app.py", answer)
    cut = ShownCut(answer, {}, {"src/app.py": ShownLines(1, 20, 100)})
    history[-1] = with_marker(history[-1], **cut_marker(whole), **shown_marker(cut))
    history += _bash(2, "cat lib/app.py", answer.replace("src/app.py", "lib/app.py"))
    history += _bash(3, "tail -n +41 lib/b.py", answer.replace("src/app.py", "lib/b.py"))
    cut = ShownCut(answer, {}, {"lib/b.py": ShownLines(41, 60, 100)})
    history[-1] = with_marker(history[-1], **cut_marker(whole), **shown_marker(cut))
    numbered = "".join(f"{i:6d}\tline {i}\n" for i in range(61, 81))
    page = f"{numbered}lib/c.py: {note.replace('1-20', '61-80')}\n[exit code 0]"
    history += _bash(4, "nl -ba lib/c.py | sed -n '61,200p'", page)
    cut = ShownCut(page, {}, {"lib/c.py": ShownLines(61, 80, 100)})
    history[-1] = with_marker(history[-1], **cut_marker(whole), **shown_marker(cut))
    ledger = collect_ledger(history, workspace="/ws")
    assert ledger.reads["src/app.py"].spans == [(1, 20)]
    assert ledger.reads["lib/b.py"].spans == [(41, 60)]
    assert ledger.reads["lib/c.py"].spans == [(61, 80)]  # a numbered page, cut
    assert "- src/ app.py (lines 1-20 of 100)\n" in render_ledger(ledger)
    assert ledger.reads["lib/app.py"].spans == [(1, 21)]  # as printed: 20 lines and a note
    assert read_calls(history) == {
        "c1": ("src/app.py",),
        "c2": ("lib/app.py",),
        "c3": ("lib/b.py",),
        "c4": ("lib/c.py",),
    }


def test_files_edited_through_the_shell_are_files_changed() -> None:
    """``sed -i`` that exited 0 changed its files: the ledger lists them as changed (runs
    of numbered files as one line), not as commands whose lines drop past its share; a
    failed one stays a command."""
    history: list[BaseMessage] = [HumanMessage("go", id="u")]
    for i in range(1, 41):
        name = f"logs/part_{i:03d}.txt"
        command = f"sed -i 's/STATUS part_{i:03d}: open/STATUS part_{i:03d}: done/' {name}"
        history += _bash(i, command, "[exit code 0]")
    history += _bash(50, "sed -i 's/a/b/' src/app.py", "[exit code 0]")
    history += _bash(51, "sed -i 's/a/b/' src/app.py", "[exit code 0]")
    history += _call(
        52, "edit_file", {"path": "src/app.py", "old_string": "b", "new_string": "c"}, "ok"
    )
    history += _bash(53, "sed -i 's/a/b/' gone.py", "sed: can't read gone.py\n[exit code 2]")
    history += _bash(54, "sed -i 's/a/b/' /ws/src/b.py", "[exit code 0]")
    ledger = collect_ledger(history, workspace="/ws")
    text = render_ledger(ledger)
    assert "- logs/ part_001.txt … part_040.txt (40 files): edited by a command\n" in text
    assert "- src/app.py: edited ×3 (some by a command) (+1 −1 lines)" in text
    assert "- src/b.py: edited by a command\n" in text + "\n"
    assert "$ sed -i 's/a/b/' gone.py → exit 2" in text
    assert "sed -i 's/STATUS" not in text
    assert set(ledger.changes) == {
        *(f"logs/part_{i:03d}.txt" for i in range(1, 41)),
        "src/app.py",
        "src/b.py",
    }
    counter = get_counter("gpt-4o-mini")
    folded = render_ledger(ledger, max_tokens=150, count=counter.count_text)
    assert "- logs/ part_001.txt … part_040.txt (40 files): edited by a command" in folded
    tight = render_ledger(ledger, max_tokens=60, count=counter.count_text)
    assert "+0 −0" not in tight and "logs/ 40 files changed" in tight


def test_files_written_through_a_here_document_are_files_changed() -> None:
    """``cat > F <<'EOF'`` that exited 0 wrote F and ``cat >> F`` appended to it: the
    ledger lists them as changed with the lines written, not as a command named by its
    first line; a failed one, or one followed by another command, stays a command."""
    history: list[BaseMessage] = [HumanMessage("go", id="u")]
    history += _bash(1, "cat > src/app.py <<'EOF'\nimport os\nprint(os.sep)\nEOF", "[exit code 0]")
    history += _bash(2, "cat >> notes.md <<'EOF'\n- done\nEOF", "[exit code 0]")
    history += _bash(3, "cat >> notes.md <<'EOF'\n- again\nEOF", "[exit code 0]")
    history += _call(4, "write_file", {"path": "b.py", "content": "x = 1\n"}, "created b.py")
    history += _bash(5, "cat > /ws/b.py <<'EOF'\nx = 2\nEOF", "[exit code 0]")
    history += _bash(6, "cat > gone/c.py <<'EOF'\nx\nEOF", "No such file\n[exit code 1]")
    history += _bash(7, "cat > d.py <<'EOF'\nx\nEOF\npython d.py", "[exit code 0]")
    history += _bash(8, "tee ./e.md e.md <<'EOF'\nx\nEOF", "x\n[exit code 0]")
    warned = "warning: here-document at line 1 delimited by end-of-file (wanted `EOF')"
    history += _bash(9, "cat > f.md <<'EOF'\n- a\nEOF'", f"bash: line 3: {warned}\n[exit code 0]")
    history += _bash(10, "echo '- b' >> f.md", "[exit code 0]")
    history += _bash(11, "rm -f old.py src/app.py", "[exit code 0]")
    history += _bash(12, "rm gone.py", "rm: cannot remove 'gone.py'\n[exit code 1]")
    history += _bash(13, "rm -rf build never.txt", "[exit code 0]")  # never.txt: unknown
    history += _bash(15, "rm b.py", "[exit code 0]")
    history += _bash(16, "sed -i 's/a/b/' b.py", "[exit code 0]")  # b.py is back
    history += _bash(14, "cat > build <<'EOF'\nx\nEOF", "[exit code 0]")
    ledger = collect_ledger(history, workspace="/ws")
    text = render_ledger(ledger)
    assert "old.py" not in text  # ``rm -f`` of a path the session never saw
    assert "- src/app.py: written by a command, deleted by a command (+2 −0 lines)" in text
    assert "- b.py: created, edited by a command (+2 −0 lines)" in text
    assert "- build: written by a command (+1 −0 lines)" in text
    assert "$ rm gone.py → exit 1" in text
    assert "- notes.md: appended to ×2 by a command (+2 −0 lines)" in text
    assert "- e.md: written by a command (+1 −0 lines)" in text
    assert "- f.md: written by a command, appended to by a command (+3 −0 lines)" in text
    assert set(ledger.changes) == {*("src/app.py", "notes.md", "b.py", "e.md", "f.md", "build")}
    assert "$ cat > gone/c.py <<'EOF'… → exit 1" in text
    assert "$ cat > d.py <<'EOF'… → exit 0" in text
    assert "cat > src/app.py" not in text


def _scanned(messages: list[BaseMessage], **changes: Any) -> list[BaseMessage]:
    """``messages`` (a call and its result) with the result recording ``changes`` as the
    tools node does after scanning the workspace around the step."""
    result = messages[-1]
    assert isinstance(result, ToolMessage)
    return [*messages[:-1], with_scanned_changes(result, ScanChanges(**changes))]


def test_files_a_scan_saw_a_command_change_are_files_changed() -> None:
    """A command no reading of its line follows (a script, ``perl -pi``, ``mv``) changed
    what the workspace scan recorded on its result, whatever its exit status; the command
    is still listed, unless it is the step's one call, one program's run that exited 0
    and names each file it changed (as ``sed -i``, its files say what it did); what a
    command line of the step told (a here-document's lines) is not counted twice; the
    paths past the scan's record are counted."""
    history: list[BaseMessage] = [HumanMessage("go", id="u")]
    history += _call(1, "read_file", {"path": "a.py"}, "1\tx = 1")
    history += _scanned(
        _bash(2, "perl -pi -e 's/1/2/; s/3/4/' ./a.py", "[exit code 0]"), modified=("a.py",)
    )
    history += _scanned(
        _bash(3, "mv b.txt c.txt && pytest -q", "1 passed\n[exit code 0]"),
        created=("c.txt",),
        deleted=("b.txt",),
    )
    history += _scanned(
        _bash(4, "python3 gen.py", "Traceback …\n[exit code 1]"), created=("out.json",), more=7
    )
    history += _scanned(
        _bash(5, "cat > d.py <<'EOF'\nx = 1\nEOF", "[exit code 0]"), created=("d.py",)
    )
    history += _scanned(_bash(6, "black .", "[exit code 0]"), modified=("c.txt", "d.py"))
    # One step, two commands: the scan's record is on the first; the second's line told.
    calls = [
        {"name": "run_bash", "args": {"command": "true"}, "id": "c7"},
        {"name": "run_bash", "args": {"command": "cat > e.py <<'EOF'\ny\nEOF"}, "id": "c8"},
    ]
    history += [
        AIMessage("", id="a7", tool_calls=calls),
        with_scanned_changes(
            ToolMessage("[exit code 0]", tool_call_id="c7", name="run_bash", id="t7"),
            ScanChanges(created=("e.py",)),
        ),
        ToolMessage("[exit code 0]", tool_call_id="c8", name="run_bash", id="t8"),
    ]
    ledger = collect_ledger(history, workspace="/ws")
    text = render_ledger(ledger)
    assert "- a.py: edited by a command\n" in text
    assert "- b.txt: deleted by a command\n" in text
    assert "- c.txt: created by a command, edited by a command\n" in text
    assert "- out.json: created by a command\n" in text
    assert "- d.py: written by a command, edited by a command (+1 −0 lines)" in text
    assert "- e.py: written by a command (+1 −0 lines)" in text
    assert "$ python3 gen.py → exit 1" in text and "$ black . → exit 0" in text
    assert "$ mv b.txt c.txt && pytest -q → exit 0" in text  # what else it ran is kept
    assert "perl" not in text  # it names each file it changed: they say what it did
    assert "Files changed by commands, not listed: 7" in text
    assert set(ledger.changes) == {"a.py", "b.txt", "c.txt", "out.json", "d.py", "e.py"}


def test_a_command_that_changes_directory_first_names_its_files_from_the_workspace() -> None:
    """``cd D && …``, as many models start a command: its reads, writes, in-place edits
    and removals are the files under ``D`` (an absolute ``D`` under the workspace names
    them from its root), and a one-program command after it that names each file a scan
    saw it change is listed by those files. Read as a list, such a command was a command:
    no file read or changed, and a summary that left its files unsaid was not asked
    about them."""
    lines = "".join(f"line {i}\n" for i in range(1, 11))
    history: list[BaseMessage] = [HumanMessage("go", id="u")]
    history += _bash(1, "cd logs && cat part_001.txt", f"{lines}[exit code 0]")
    history += _bash(2, "cd /ws && sed -n '1,5p' src/app.py", f"{lines[:35]}[exit code 0]")
    history += _bash(3, "cd src && sed -i 's/a/b/' app.py", "[exit code 0]")
    history += _bash(4, "cd src && cat > new.py <<'EOF'\nx = 1\nEOF", "[exit code 0]")
    history += _bash(5, "cd logs && rm part_001.txt", "[exit code 0]")
    history += _scanned(
        _bash(6, "cd /ws/src && perl -pi -e 's/1/2/' util.py", "[exit code 0]"),
        modified=("src/util.py",),
    )
    history += _scanned(
        _bash(7, "cd docs && perl -pi -e 's/1/2/' ../README.md", "[exit code 0]"),
        modified=("README.md",),
    )
    history += _bash(8, "cd logs; cat part_002.txt", f"{lines}[exit code 0]")
    ledger = collect_ledger(history, workspace="/ws")
    text = render_ledger(ledger)
    assert set(ledger.reads) == {"logs/part_001.txt", "src/app.py"}
    assert ledger.reads["src/app.py"].spans == [(1, 5)]
    assert set(ledger.changes) == {
        "src/app.py",
        "src/new.py",
        "logs/part_001.txt",
        "src/util.py",
        "README.md",
    }
    assert ledger.changes["logs/part_001.txt"].deleted
    assert "- src/util.py: edited by a command\n" in text and "util.py →" not in text
    # ``../README.md`` names a file outside ``docs``: the command says what it did.
    assert "- $ cd docs && perl -pi -e 's/1/2/' ../README.md → exit 0" in text
    # After ``;`` the rest runs where ``cd`` failed too: which file it read is not certain.
    assert "- $ cd logs; cat part_002.txt → exit 0" in text
    assert read_calls(history, workspace="/ws") == {
        "c1": ("logs/part_001.txt",),
        "c2": ("src/app.py",),
    }


def test_files_a_scan_saw_an_mcp_tool_change_are_changed_by_a_tool() -> None:
    """A record on an MCP tool's result (a step with no command): its files are changed
    or deleted by a tool; the tool is still counted by name, and a command beside it in
    the step takes the record (its changes are then the command's)."""
    history: list[BaseMessage] = [HumanMessage("go", id="u")]
    history += _scanned(
        _call(1, "mcp__files__write_text", {"path": "notes/plan.md"}, "wrote 8 characters"),
        created=("notes/plan.md",),
    )
    history += _scanned(
        _call(2, "mcp__files__write_text", {"path": "notes/plan.md"}, "wrote 9 characters"),
        modified=("notes/plan.md",),
    )
    history += _scanned(
        _call(3, "mcp__files__remove", {"path": "old.txt"}, "removed"), deleted=("old.txt",)
    )
    ledger = collect_ledger(history)
    text = render_ledger(ledger)
    assert "- notes/plan.md: changed ×2 by a tool\n" in text
    assert "- old.txt: deleted by a tool\n" in text
    assert ledger.other == {"mcp__files__write_text": 2, "mcp__files__remove": 1}


def test_a_build_s_outputs_are_counted_by_folder_and_a_real_edit_stays_named() -> None:
    """A step that changed more new files than the ledger lists one by one (a build) has
    them counted by folder, and indexed for the search the count points to; a file the
    session read or changed is still named (a ledger of 1,005 build lines at 4,000 tokens
    had folded the one real edit into a count)."""
    history: list[BaseMessage] = [HumanMessage("go", id="u")]
    history += _call(1, "read_file", {"path": "src/app.py"}, "1\tx = 1")
    for step in range(2, 7):
        built = tuple(f"target/debug/o{step}_{n:03d}.o" for n in range(LEDGER_SCAN_LISTED_MAX))
        history += _scanned(
            _bash(step, "cargo build", "[exit code 0]"),
            created=(*built, f"target/x{step}.d"),
            modified=("src/app.py",),
            more=3,
        )
    ledger = collect_ledger(history)
    text = render_ledger(ledger)
    assert "- src/app.py: edited ×5 by a command\n" in text
    assert "target/debug/o2_000.o" not in text
    total = 5 * (LEDGER_SCAN_LISTED_MAX + 1 + 3)
    assert f"Files changed by commands, not listed: {total} (target/debug/ 100, target/ 5)" in text
    doc = history_docs(history)[4]
    assert doc.body.endswith("modified src/app.py]") and "created target/debug/o2_000.o" in doc.body


def test_a_scan_record_that_is_not_one_changes_nothing() -> None:
    """A record an imported or hand-edited session holds that names a path outside the
    workspace, or is not a record, is ignored."""
    history: list[BaseMessage] = [HumanMessage("go", id="u")]
    bad: list[object] = [
        {"modified": ["../etc/passwd"]},
        {"created": ["/etc/passwd"]},
        {"deleted": ["a/../../b"]},
        {"modified": "a.py"},
        {"created": [1]},
        {"modified": ["a.py"], "more": -1},
        {"modified": ["a.py"], "more": True},
        ["a.py"],
        {"modified": [f"f{i}" for i in range(CHANGED_PATHS_MAX + 1)]},
    ]
    for n, record in enumerate(bad, 1):
        call = _bash(n, "make", "[exit code 0]")
        result = call[-1]
        history += [call[0], with_marker(result, **{FILES_CHANGED_KEY: record})]
    ledger = collect_ledger(history)
    assert ledger.changes == {} and ledger.unlisted_changes == 0
    assert ledger.commands == {"make": ["exit 0"] * len(bad)}


def test_a_memo_shared_by_sessions_never_gives_one_call_the_entry_of_anothers_arguments() -> None:
    """Local servers number their call ids (``call_1``) in every session; two calls with
    the same id, tool and output but other arguments are two entries."""
    memo = LedgerMemo()
    first = _call(1, "run_bash", {"command": "make build"}, "exit code 0")
    second = _call(1, "run_bash", {"command": "rm -rf dist"}, "exit code 0")
    assert list(collect_ledger(first, memo=memo).commands) == ["make build"]
    assert list(collect_ledger(second, memo=memo).commands) == ["rm -rf dist"]


def _reads_and_a_write(names: list[str]) -> list[BaseMessage]:
    history: list[BaseMessage] = [HumanMessage("go", id="u")]
    for i, name in enumerate(names):
        history += _read(i, name, 1, 10, 10)
    history += _call(900, "write_file", {"path": "report.md", "content": "x"}, "created report.md")
    return history


def test_a_summary_line_that_only_lists_files_the_ledger_shows_becomes_a_count() -> None:
    names = [f"logs/part_{i:03d}.txt" for i in range(1, 41)] + ["src/app.py"]
    ledger = collect_ledger(_reads_and_a_write(names))
    rendered = render_ledger(ledger)
    summary = "\n".join(
        [
            "Task: read the logs, then write report.md.",
            "Files read: " + ", ".join(n.rsplit("/", 1)[-1] for n in names[:40]),
            "- `src/app.py` (lines 1-10 of 10)",
            "- src/app.py: its retry loop never resets the counter",
            "Files written: report.md",
            "Codes: CODE part_001: ORBIT-1; CODE part_002: DOCK-2",
        ]
    )
    lean = without_listed_files(summary, ledger, rendered)
    assert lean.splitlines() == [
        "Task: read the logs, then write report.md.",
        "Files read: 40 files (listed in the progress ledger)",
        "- src/app.py: its retry loop never resets the counter",
        "Files written: 1 file (listed in the progress ledger)",
        "Codes: CODE part_001: ORBIT-1; CODE part_002: DOCK-2",
    ]
    assert without_listed_files(lean, ledger, rendered) == lean


def test_files_commands_the_ledger_shows_named_are_left_to_it_too() -> None:
    """A model that printed each file with a command that is no plain read: the ledger
    shows the commands (one line for the run), so a summary's list of those files
    repeats it as a list of files read does."""
    history: list[BaseMessage] = [HumanMessage("go", id="u")]
    for i in range(1, 41):
        command = f"grep -v '^#' logs/part_{i:03d}.txt"
        history += _call(i, "run_bash", {"command": command}, f"line {i}\n[exit code 0]")
    history += _call(50, "run_bash", {"command": "pytest tests/test_app.py"}, "ok\n[exit code 0]")
    history += _call(51, "run_bash", {"command": "diff a.txt b.txt"}, "< a\n[exit code 1]")
    history += _call(52, "run_bash", {"command": "python setup_db.py"}, "boom\n[exit code 1]")
    history += _call(53, "run_bash", {"command": "touch notes.md"}, "[exit code 0]")
    long = "grep -E '" + "x|" * 80 + "y' src/app.py"  # shown cut: the file is not in view
    history += _call(54, "run_bash", {"command": long}, "1:y\n[exit code 0]")
    assert read_calls(history)["c54"] == ("src/app.py",)  # still a reading to the summary
    ledger = collect_ledger(history)
    rendered = render_ledger(ledger)
    assert "logs/part_001.txt … logs/part_040.txt → exit 0 each (40 commands" in rendered
    summary = "\n".join(
        [
            "Files read: " + ", ".join(f"part_{i:03d}.txt" for i in range(1, 41)),
            "- tests/test_app.py",
            "- a.txt",
            "Still to fix: setup_db.py, notes.md",
            "- src/app.py",
        ]
    )
    assert without_listed_files(summary, ledger, rendered).splitlines() == [
        "Files read: 40 files (listed in the progress ledger)",
        "- a.txt",  # its command failed
        "Still to fix: setup_db.py, notes.md",  # failed, or printed nothing
        "- src/app.py",
    ]


def test_a_list_whose_label_says_what_the_ledger_does_not_hold_stays() -> None:
    """``Failing tests: tests/test_a.py`` or ``Marked done: a.txt`` (a file only read)
    says something of the files the ledger beside it does not: folded into a count, which
    files fail, or which were marked, was gone (a model marking files done with ``sed -i``
    read the files again until the spiral guard stopped it)."""
    names = ["tests/test_a.py", "tests/test_b.py", "a.txt", "src/app.py"]
    history = _reads_and_a_write(names)
    history += _call(901, "edit_file", {"path": "src/app.py", "old_string": "a"}, "ok")
    ledger = collect_ledger(history)
    rendered = render_ledger(ledger)
    summary = "\n".join(
        [
            "Failing tests: tests/test_a.py, tests/test_b.py",
            "Marked done: a.txt",
            "Files read: tests/test_a.py, a.txt",
            "Marked done: src/app.py",
            "Key files: src/app.py",
        ]
    )
    assert without_listed_files(summary, ledger, rendered).splitlines() == [
        "Failing tests: tests/test_a.py, tests/test_b.py",
        "Marked done: a.txt",
        "Files read: 2 files (listed in the progress ledger)",
        "Marked done: 1 file (listed in the progress ledger)",
        "Key files: src/app.py",
    ]


def test_files_the_ledger_folded_or_never_recorded_stay_in_the_summary() -> None:
    names = [f"vendor/{chr(97 + i % 26)}{i}.js" for i in range(60)] + ["src/app.py"]
    ledger = collect_ledger(_reads_and_a_write(names))
    counter = get_counter("gpt-4o-mini")
    rendered = render_ledger(ledger, max_tokens=120, count=counter.count_text)
    assert "vendor/ 60 files (folded" in rendered
    read, changed = listed_paths(ledger, rendered)
    assert "src/app.py" in read and "vendor/a0.js" not in read and changed == {"report.md"}
    summary = "\n".join(
        [
            "Files read: vendor/a0.js, src/app.py",  # one the ledger folded to a count
            "Files read: src/app.py, notes/todo.txt",  # one it never recorded
            "Files changed: src/app.py",  # read, not changed
            "Files read: src/app.py",
        ]
    )
    lean = without_listed_files(summary, ledger, rendered)
    assert lean.splitlines()[:3] == summary.splitlines()[:3]
    assert lean.splitlines()[3] == "Files read: 1 file (listed in the progress ledger)"


def test_a_file_of_the_same_name_in_another_folder_is_not_the_ledgers() -> None:
    """A written path ending in a file name the ledger holds once is that file only
    when written alone or under a prefix of the ledger's own path (hypothesis found
    ``aa/a_0.py`` taken for the ledger's ``a/a_0.py`` now and then)."""
    ledger = collect_ledger(_reads_and_a_write(["a/a_0.py", "src/app.py", "x/b.py"]))
    rendered = render_ledger(ledger)
    summary = "\n".join(
        [
            "Files read: aa/a_0.py",
            "Files read: /ws/src/app.py, a_0.py, ./x/b.py",
            "Files read: aa/x/b.py",
            "Changed: /ws/report.md",  # a file at the workspace's root, written absolutely
            "prose",
        ]
    )
    assert without_listed_files(summary, ledger, rendered).splitlines() == [
        "Files read: aa/a_0.py",
        "Files read: 3 files (listed in the progress ledger)",
        "Files read: aa/x/b.py",
        "Changed: 1 file (listed in the progress ledger)",
        "prose",
    ]


_PATHS = st.lists(
    st.from_regex(r"[a-c]{1,2}/[a-z]{1,3}_[0-9]{1,2}\.(py|txt)", fullmatch=True),
    min_size=1,
    max_size=12,
    unique=True,
)


@settings(max_examples=60, deadline=None)
@given(
    read=_PATHS,
    mentioned=_PATHS,
    words=st.lists(st.sampled_from(["Files read", "Notes", "- ", "Codes", ""]), max_size=6),
)
def test_only_lines_of_files_the_ledger_shows_change(
    read: list[str], mentioned: list[str], words: list[str]
) -> None:
    ledger = collect_ledger(_reads_and_a_write(read))
    rendered = render_ledger(ledger)
    shown, _ = listed_paths(ledger, rendered)
    lines = [
        f"{word}: {', '.join(mentioned[: i + 1])}" if word.strip(" -") else f"- {mentioned[i]}"
        for i, word in enumerate(words[: len(mentioned)])
    ] + ["prose with a.py and more words"]
    lean = without_listed_files("\n".join(lines), ledger, rendered).splitlines()
    for line in lines:
        if line not in lean:
            # Only a list whose every file the ledger shows one by one leaves the summary.
            assert all(p in shown for p in mentioned if p in line.split(": ", 1)[-1].split(", "))
            assert all(p in shown for p in mentioned if line == f"- {p}")
    for line in lean:
        assert line in lines or line.endswith(
            ("files (listed in the progress ledger)", "1 file (listed in the progress ledger)")
        )
    assert lean[-1] == lines[-1]


def test_a_file_named_by_its_absolute_path_is_the_entry_of_its_workspace_path() -> None:
    # Models trained on tools that take absolute paths name workspace files that way,
    # and mix both: one file, one entry, named as the workspace names it.
    ws = "/home/dev/repo"
    history: list[BaseMessage] = [HumanMessage("go", id="h")]
    history += _read(1, f"{ws}/src/app.py", 1, 40, 90)
    history += _read(2, "src/app.py", 41, 90, 90)
    history += _call(3, "edit_file", {"path": f"{ws}/./src/app.py"}, "edited src/app.py")
    history += _bash(4, f"cat {ws}/README.md", "hello\n[exit code 0]")
    history += _read(5, "/etc/hosts", 1, 2, 2)
    history += _read(6, f"{ws}-old/src/app.py", 1, 2, 2)
    ledger = collect_ledger(history, workspace=ws)
    assert set(ledger.reads) == {"src/app.py", "README.md", "/etc/hosts", f"{ws}-old/src/app.py"}
    # The file check names them as the ledger does.
    assert read_calls(history, workspace=ws)["c1"] == ("src/app.py",)
    assert read_calls(history, workspace=ws)["c4"] == ("README.md",)
    assert ledger.reads["src/app.py"].complete
    assert set(ledger.changes) == {"src/app.py"}
    # Without the workspace a path stays as written.
    assert f"{ws}/src/app.py" in collect_ledger(history).reads


def test_a_compaction_lists_workspace_files_by_their_workspace_path(
    tmp_path_factory: Any,
) -> None:
    settings_ = _settings(str(tmp_path_factory.mktemp("home")))
    ws = str(tmp_path_factory.mktemp("ws"))
    compactor = Compactor(
        ScriptedChatModel(["progress"], on_exhausted="repeat_last"),
        get_counter(settings_.model),
        budget_for(settings_),
        sleep=lambda _s: None,
    )
    state: list[BaseMessage] = [HumanMessage("read the app", id="u")]
    state += _read(1, f"{ws}/src/app.py", 1, 40, 90)
    state += _read(2, "src/app.py", 41, 90, 90)
    outcome = compactor(state, trigger="manual", system=[], tools=[], workspace=ws)
    assert outcome is not None
    view = since_last_boundary(list(add_messages(state, outcome.updates)))  # type: ignore[arg-type]
    (ledger,) = [m for m in view if agentgraph_kind(m) == LEDGER_KIND]
    # One entry, read whole from its two halves.
    assert ledger.text.endswith("\n- src/ app.py") and ws not in ledger.text


def test_a_workspace_linked_to_its_own_ancestor_names_files_from_the_workspace(
    tmp_path: Any,
) -> None:
    # Its own path and its resolved one are both prefixes of a path under it: the
    # longer one names it from the workspace.
    (tmp_path / "a").mkdir()
    ws = tmp_path / "a" / "w"
    ws.symlink_to(tmp_path / "a")
    history: list[BaseMessage] = [HumanMessage("go", id="h")]
    history += _read(1, f"{ws}/x.py", 1, 2, 2)
    # The two prefixes were a set, tried in an order the process's hash seed decided.
    assert set(collect_ledger(history, workspace=str(ws)).reads) == {"x.py"}
