"""The stateless scripted models of bench_context_v3 (tests/scenarios/stateless.py)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.scenarios.long_task import LANGCHAIN_SUMMARY_MARKER, SUMMARY_MARKER
from tests.scenarios.stateless import (
    BIG_LINES,
    CODE_RE,
    EXTRA_PERSONAS,
    LEDGER_RUN_RE,
    PERSONAS,
    QUESTION,
    SHELL_EDIT_RE,
    SHELL_TOOL,
    SMALL_LINES,
    SUMMARY_HEADER,
    SUMMARY_WRITTEN,
    Persona,
    Recorder,
    ScriptedModel,
    ShellStyle,
    Summarizer,
    Turn,
    code_for,
    codes_in,
    cut_summaries,
    expand_run,
    make_workspace,
    marked_done,
    planted_codes,
    read_evidence,
    scan,
    shell_path,
    status_line,
    task_text,
    visible_codes,
)

TOOLS = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]


def request(*messages: dict[str, Any], tools: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "m", "messages": [{"role": "system", "content": "sys"}]}
    body["messages"] += list(messages)
    if tools:
        body["tools"] = TOOLS
    return body


def exchange(call_id: str, name: str, args: dict[str, Any], result: str) -> list[dict[str, Any]]:
    """An assistant call of tool ``name`` and its tool result."""
    call = {"id": call_id, "type": "function"}
    call["function"] = {"name": name, "arguments": json.dumps(args)}
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": result},
    ]


def read(call_id: str, path: str, result: str, offset: int = 0) -> list[dict[str, Any]]:
    """An assistant read call and its tool result."""
    args: dict[str, Any] = {"path": path} | ({"offset": offset} if offset else {})
    return exchange(call_id, "read_file", args, result)


def small(i: int) -> str:
    return f"1\t{code_for(i)}\n2\tlog line 00000: subsystem 1 reported nominal values 0"


def two_files_read() -> dict[str, Any]:
    return request(
        {"role": "user", "content": task_text(1, 2)},
        *read("c1", "logs/part_001.txt", small(1)),
        *read("c2", "logs/part_002.txt", small(2)),
    )


def call_of(reply: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    (call,) = reply["tool_calls"]
    return call["name"], call["arguments"]


@pytest.mark.parametrize("kind", (*PERSONAS, *EXTRA_PERSONAS))
def test_replies_are_a_function_of_the_request_alone(kind: str) -> None:
    bodies = [
        request({"role": "user", "content": task_text(1, 3)}),
        two_files_read(),
        request(
            {"role": "user", "content": task_text(1, 2)},
            *read("c1", "logs/part_001.txt", "[tool output masked: read_file returned 9 tokens]"),
        ),
    ]
    for body in bodies:
        first = ScriptedModel(Persona(kind), Summarizer(), Recorder())  # type: ignore[arg-type]
        again = ScriptedModel(Persona(kind), Summarizer(), Recorder())  # type: ignore[arg-type]
        replies = [first(copy.deepcopy(body)), first(copy.deepcopy(body))]
        assert replies == [again(copy.deepcopy(body)), again(copy.deepcopy(body))]
        assert replies[0] == replies[1]


def test_a_persona_reads_the_first_file_it_has_no_evidence_of() -> None:
    body = request({"role": "user", "content": task_text(1, 3)})
    assert call_of(Persona()(body)) == ("read_file", {"path": "logs/part_001.txt"})
    body = two_files_read()
    body["messages"][1]["content"] = task_text(1, 3)
    assert call_of(Persona()(body)) == ("read_file", {"path": "logs/part_003.txt"})
    deep = Persona(path_key="file_path", path_prefix="/")
    assert call_of(deep(body)) == ("read_file", {"file_path": "/logs/part_003.txt"})


def test_a_batch_asks_for_the_next_reads_in_one_reply() -> None:
    body = two_files_read()
    body["messages"][1]["content"] = task_text(1, 6)
    hidden = copy.deepcopy(body)
    hidden["messages"][3]["content"] = "[tool output masked: read_file returned 900 tokens]"
    paths = [c["arguments"]["path"] for c in Persona(batch=3)(body)["tool_calls"]]
    assert paths == [f"logs/part_00{i}.txt" for i in (3, 4, 5)]
    paths = [c["arguments"]["path"] for c in Persona("re_reader", batch=3)(hidden)["tool_calls"]]
    assert paths == [f"logs/part_00{i}.txt" for i in (1, 3, 4)]
    # The end of the range: fewer than a batch, then the report.
    body["messages"][1]["content"] = task_text(1, 3)
    assert call_of(Persona(batch=3)(body)) == ("read_file", {"path": "logs/part_003.txt"})


SEARCH_TOOLS = [
    *TOOLS,
    {"type": "function", "function": {"name": "search_history", "parameters": {}}},
]


def test_the_searcher_searches_its_history_before_it_reads_a_file_again() -> None:
    hidden = two_files_read()
    hidden["messages"][3]["content"] = "[tool output masked: read_file returned 900 tokens]"
    # Without a history search it is the re-reader.
    assert call_of(Persona("searcher")(hidden)) == ("read_file", {"path": "logs/part_001.txt"})
    hidden["tools"] = SEARCH_TOOLS
    asked = call_of(Persona("searcher")(hidden))
    assert asked == ("search_history", {"query": "part_001"})
    # A search that shows the code: it goes on (here, to the report).
    found = copy.deepcopy(hidden)
    found["messages"] += exchange("c3", *asked, f"msg:4 [tool read_file] {code_for(1)}")
    name, args = call_of(Persona("searcher")(found))
    assert name == "write_file" and args["content"] == f"{code_for(1)}\n{code_for(2)}\n"
    # A search that does not: it reads the file again, once.
    missed = copy.deepcopy(hidden)
    missed["messages"] += exchange("c3", *asked, "no matches for 'part_001'")
    assert call_of(Persona("searcher")(missed)) == ("read_file", {"path": "logs/part_001.txt"})
    # A first read is never searched for.
    fresh = request({"role": "user", "content": task_text(1, 3)})
    fresh["tools"] = SEARCH_TOOLS
    assert call_of(Persona("searcher")(fresh)) == ("read_file", {"path": "logs/part_001.txt"})


def test_a_search_is_not_a_read() -> None:
    recorder = Recorder()
    search = {"name": "search_history", "arguments": {"query": "part_001"}}
    recorder.observe({"tool_calls": [search, search]}, summary=False)
    assert recorder.searches == 2 and recorder.reads == []


def test_the_re_reader_re_reads_what_it_can_no_longer_see() -> None:
    body = two_files_read()
    for kind in PERSONAS:
        name, args = call_of(Persona(kind)(body))  # type: ignore[arg-type]
        assert name == "write_file" and args["content"] == f"{code_for(1)}\n{code_for(2)}\n"
    hidden = copy.deepcopy(body)
    hidden["messages"][3]["content"] = "[tool output masked: read_file returned 900 tokens]"
    assert call_of(Persona("re_reader")(hidden)) == ("read_file", {"path": "logs/part_001.txt"})
    # silent knows it read the file (the call shows) and writes what it still sees.
    name, args = call_of(Persona("silent")(hidden))
    assert name == "write_file" and args["content"] == f"{code_for(2)}\n"
    # With the whole exchange gone there is no evidence at all: every persona reads it.
    gone = copy.deepcopy(body)
    del gone["messages"][2:4]
    for kind in PERSONAS:
        reply = Persona(kind)(gone)  # type: ignore[arg-type]
        assert call_of(reply) == ("read_file", {"path": "logs/part_001.txt"})


def test_paging_reads_on_where_the_note_says() -> None:
    page = "1\tlog\n[showing lines 1-62 of 240; call read_file with offset=62 to continue]"
    body = request(
        {"role": "user", "content": task_text(1, 2)}, *read("c1", "logs/part_001.txt", page)
    )
    assert call_of(Persona()(body)) == ("read_file", {"path": "logs/part_001.txt", "offset": 62})
    deep = "@@ lines 1-100 of 240 | next offset 100 @@\nlog line"
    body = request(
        {"role": "user", "content": task_text(1, 2)}, *read("c1", "logs/part_001.txt", deep)
    )
    assert call_of(Persona()(body))[1] == {"path": "logs/part_001.txt", "offset": 100}
    # The last page reached the end: the file is read (its code, when lost, is lost).
    end = "200\tlog\n[showing lines 126-240 of 240; end of file]"
    body["messages"] += read("c2", "logs/part_001.txt", end, offset=125)
    assert call_of(Persona()(body)) == ("read_file", {"path": "logs/part_002.txt"})


def test_ledger_runs_and_partial_entries() -> None:
    (match,) = LEDGER_RUN_RE.finditer("- logs/ part_001.txt … part_120.txt (120 files)")
    names = expand_run(match)
    assert len(names) == 120 and names[0] == "part_001.txt" and names[-1] == "part_120.txt"
    assert "part_057.txt" in names
    (odd,) = LEDGER_RUN_RE.finditer("part_001.txt … part_0120.txt")
    assert expand_run(odd) == []  # not the same digit width
    ledger = (
        "[Progress ledger]\nFiles read (whole unless lines are given):\n"
        "- logs/ part_001.txt … part_004.txt (4 files), part_005.txt (lines 1-87 of 240)"
    )
    body = request(
        {"role": "user", "content": task_text(1, 6)}, {"role": "user", "content": ledger}
    )
    assert read_evidence(body) == {f"part_{i:03d}.txt" for i in range(1, 6)}
    assert scan(body).read["part_005.txt"] == (87, 240)
    assert call_of(Persona()(body))[1] == {"path": "logs/part_005.txt", "offset": 87}
    # The task message's own names are no evidence.
    assert read_evidence(request({"role": "user", "content": task_text(1, 6)})) == set()


def test_note_taker_notes_the_codes_of_the_latest_result() -> None:
    reply = Persona("note_taker")(two_files_read())
    assert reply["content"] == f"noted: {code_for(2)}"
    assert "content" not in Persona("silent")(two_files_read())


def test_question_and_forced_answers_list_the_visible_codes() -> None:
    body = two_files_read()
    body["messages"] += [
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": QUESTION},
    ]
    answer = Persona("re_reader")(body)
    assert "tool_calls" not in answer
    assert codes_in(answer["content"]) == {code_for(1), code_for(2)}
    forced = Persona()(dict(two_files_read(), tool_choice="none"))
    assert codes_in(forced["content"]) == {code_for(1), code_for(2)}


def summary_request(marker: str, *extra: str) -> dict[str, Any]:
    body = two_files_read()
    body["messages"][0]["content"] = f"You are performing a {marker}. " + " ".join(extra)
    body["messages"] += read("c3", "logs/part_003.txt", small(3))
    body["messages"][1]["content"] = task_text(1, 4)
    return body


@pytest.mark.parametrize("marker", [SUMMARY_MARKER, LANGCHAIN_SUMMARY_MARKER])
def test_summarizers(marker: str) -> None:
    body = summary_request(marker)
    recorder = Recorder()
    model = ScriptedModel(Persona(), Summarizer("faithful"), recorder)
    faithful = model(body)["content"]
    assert recorder.summary_calls == 1 and recorder.main_calls == 0
    assert codes_in(faithful) == {code_for(i) for i in (1, 2, 3)}
    assert all(f"part_00{i}.txt" in faithful for i in (1, 2, 3))
    lossy = Summarizer("lossy")(body)["content"]
    assert codes_in(lossy) == {code_for(1), code_for(3)}
    assert "part_002.txt" not in lossy
    terse = Summarizer("terse")(body)["content"]
    assert "\n" not in terse and not CODE_RE.search(terse) and "part_00" not in terse
    # A persona reading the summary alone (the task message replaced) resumes the task.
    after = request({"role": "user", "content": f"Here is a summary:\n{faithful}"})
    assert call_of(Persona()(after)) == ("read_file", {"path": "logs/part_004.txt"})
    verbose = Summarizer("verbose")(body)["content"]
    assert len(verbose) > 3 * 4 * 100 and codes_in(verbose) == codes_in(faithful)
    told = summary_request(marker, "Keep it to at most 1,200 tokens.")
    assert Summarizer("verbose")(told) == Summarizer("faithful")(told)


def test_a_report_written_before_a_restatement_of_the_same_task_stays_written() -> None:
    """A compaction keeps the task's message after a summary that says the report is
    written: the same task, done (a real model answers). A different task, or a summary
    of a transcript with the write call in its text, is read as a real model reads it."""
    summary = (
        f"{SUMMARY_HEADER}\nTask: read log files 1-2 (logs/part_NNN.txt), note each file's "
        f"code, then write report.md.\nProgress: 2 files read, 2 codes noted. "
        f"{SUMMARY_WRITTEN}.\nCodes: {code_for(1)}; {code_for(2)}"
    )
    same = request(
        {"role": "user", "content": summary}, {"role": "user", "content": task_text(1, 2)}
    )
    assert scan(same).written
    assert "tool_calls" not in Persona()(same)
    other = request(
        {"role": "user", "content": summary}, {"role": "user", "content": task_text(3, 4)}
    )
    assert not scan(other).written
    transcript = request(
        {"role": "user", "content": task_text(1, 2)},
        {
            "role": "user",
            "content": '[assistant]\n[tool call] write_file({"path": "report.md", "content": "x"})',
        },
    )
    assert scan(transcript).written


def test_workspace_plants_one_code_per_file(tmp_path: Path) -> None:
    paths = make_workspace(tmp_path, files=12, size="big", fact_at="middle")
    assert paths[0] == "logs/part_001.txt" and len(paths) == 12
    lines = (tmp_path / paths[6]).read_text(encoding="utf-8").splitlines()
    assert len(lines) == BIG_LINES and lines[BIG_LINES // 2] == code_for(7)
    assert sum(bool(CODE_RE.search(line)) for line in lines) == 1
    assert len(planted_codes(paths)) == 12
    make_workspace(tmp_path / "s", files=2)
    text = (tmp_path / "s" / "logs" / "part_002.txt").read_text(encoding="utf-8")
    assert text.splitlines()[0] == code_for(2) and len(text.splitlines()) == SMALL_LINES
    assert 2_000 < len(text) < 4_000


def test_visible_codes_and_cut_summaries() -> None:
    body = two_files_read()
    assert visible_codes(body) == {code_for(1), code_for(2)}
    cut = f"{SUMMARY_HEADER}\nFiles read: part_001.txt\n…1,234 tokens truncated…\nCodes:"
    body["messages"].append({"role": "user", "content": cut})
    assert cut_summaries([body, body]) == 1


def test_recorder_counts_reads_at_the_same_offset() -> None:
    recorder = Recorder()
    for offset in (0, 0, 62):
        args = {"path": "logs/part_001.txt"} | ({"offset": offset} if offset else {})
        recorder.observe({"tool_calls": [{"name": "read_file", "arguments": args}]}, summary=False)
    recorder.observe(
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "logs/part_002.txt"}}]},
        summary=False,
    )
    assert recorder.reads[-1] == ("part_002.txt", 0) and recorder.reread_files() == 1


def test_a_shell_reader_reads_with_cat_and_reads_on_with_tail() -> None:
    shell = Persona("re_reader", shell_tool=SHELL_TOOL)
    body = two_files_read()
    body["messages"][1]["content"] = task_text(1, 3)
    assert call_of(shell(body)) == (SHELL_TOOL, {"command": "cat logs/part_003.txt"})
    page = "1\tlog\n[showing lines 1-62 of 240; call read_file with offset=62 to continue]"
    paged = request(
        {"role": "user", "content": task_text(1, 2)}, *read("c1", "logs/part_001.txt", page)
    )
    assert call_of(shell(paged)) == (SHELL_TOOL, {"command": "tail -n +63 logs/part_001.txt"})
    # A file read through the shell whose code is gone from view is read again.
    gone = request(
        {"role": "user", "content": task_text(1, 2)},
        *exchange("c1", SHELL_TOOL, {"command": "cat logs/part_001.txt"}, "[masked]"),
    )
    assert call_of(shell(gone)) == (SHELL_TOOL, {"command": "cat logs/part_001.txt"})
    recorder = Recorder()
    for command in ("cat logs/part_001.txt", "tail -n +63 logs/part_001.txt", "ls logs"):
        call = {"name": SHELL_TOOL, "arguments": {"command": command}}
        recorder.observe({"tool_calls": [call]}, summary=False)
    recorder.observe({"tool_calls": [shell(gone)["tool_calls"][0]]}, summary=False)
    assert recorder.reads == [("part_001.txt", 0), ("part_001.txt", 62), ("part_001.txt", 0)]
    assert recorder.reread_files() == 1


def _shell_reader(style: ShellStyle) -> tuple[Persona, dict[str, Any]]:
    """A re-reading persona reading through the shell in ``style``, and a request whose
    task is three files, two of them read."""
    body = two_files_read()
    body["messages"][1]["content"] = task_text(1, 3)
    return Persona("re_reader", shell_tool=SHELL_TOOL, shell_style=style), body


def _observed(*commands: str) -> Recorder:
    """A recorder that saw one reply per shell command."""
    recorder = Recorder()
    for command in commands:
        recorder.observe(
            {"tool_calls": [{"name": SHELL_TOOL, "arguments": {"command": command}}]}, summary=False
        )
    return recorder


def test_a_numbered_shell_reader_reads_pages_with_nl_and_sed() -> None:
    shell, body = _shell_reader("nl")
    first_page = "nl -ba logs/part_003.txt | sed -n '1,200p'"
    assert call_of(shell(body)) == (SHELL_TOOL, {"command": first_page})
    page = "1\tlog\n[showing lines 1-62 of 240; call read_file with offset=62 to continue]"
    paged = request(
        {"role": "user", "content": task_text(1, 2)}, *read("c1", "logs/part_001.txt", page)
    )
    on = "nl -ba logs/part_001.txt | sed -n '63,262p'"
    assert call_of(shell(paged)) == (SHELL_TOOL, {"command": on})
    again = "nl -ba logs/part_001.txt | sed -n '1,200p'"
    gone = request(
        {"role": "user", "content": task_text(1, 2)},
        *exchange("c1", SHELL_TOOL, {"command": again}, "[masked]"),
    )
    assert call_of(shell(gone)) == (SHELL_TOOL, {"command": again})
    recorder = _observed(first_page, on, "nl -ba logs/part_003.txt | grep CODE")
    assert recorder.reads == [("part_003.txt", 0), ("part_001.txt", 62)]


def test_a_grep_shell_reader_prints_each_file_through_grep() -> None:
    shell, body = _shell_reader("grep")
    command = "grep -v '^#' logs/part_003.txt"
    assert call_of(shell(body)) == (SHELL_TOOL, {"command": command})
    gone = request(
        {"role": "user", "content": task_text(1, 2)},
        *exchange("c1", SHELL_TOOL, {"command": "grep -v '^#' logs/part_001.txt"}, "[masked]"),
    )
    assert call_of(shell(gone)) == (SHELL_TOOL, {"command": "grep -v '^#' logs/part_001.txt"})
    recorder = _observed(command, command, "grep -v x logs/part_001.txt")
    assert recorder.reads == [("part_003.txt", 0), ("part_003.txt", 0)]
    assert recorder.reread_files() == 1


def test_a_cd_shell_reader_reads_and_edits_from_the_file_s_folder() -> None:
    shell, body = _shell_reader("cd")
    assert call_of(shell(body)) == (SHELL_TOOL, {"command": "cd logs && cat part_003.txt"})
    page = "1\tlog\n[showing lines 1-62 of 240; call read_file with offset=62 to continue]"
    paged = request(
        {"role": "user", "content": task_text(1, 2)}, *read("c1", "logs/part_001.txt", page)
    )
    on = "cd logs && tail -n +63 part_001.txt"
    assert call_of(shell(paged)) == (SHELL_TOOL, {"command": on})
    gone = request(
        {"role": "user", "content": task_text(1, 2)},
        *exchange("c1", SHELL_TOOL, {"command": "cd logs && cat part_001.txt"}, "[masked]"),
    )
    assert call_of(shell(gone)) == (SHELL_TOOL, {"command": "cd logs && cat part_001.txt"})
    seen = request(
        {"role": "user", "content": task_text(1, 1, edits=True)},
        *exchange("c1", SHELL_TOOL, {"command": "cd logs && cat part_001.txt"}, small(1)),
    )
    seen["messages"][-1]["content"] += f"\n3\t{status_line(1, 'open')}"
    mark = "cd logs && sed -i 's/STATUS part_001: open/STATUS part_001: done/' part_001.txt"
    assert call_of(shell(seen)) == (SHELL_TOOL, {"command": mark})
    recorder = _observed("cd logs && cat part_003.txt", on, mark, "cd logs && ls")
    assert recorder.reads == [("part_003.txt", 0), ("part_001.txt", 62)]
    assert recorder.edits == [("part_001.txt", "STATUS part_001: done")]
    match = SHELL_EDIT_RE.fullmatch(mark)
    assert match is not None and shell_path(match) == "logs/part_001.txt"


def edit(
    call_id: str, path: str, index: int, result: str, old: str = "open", new: str = "done"
) -> list[dict[str, Any]]:
    """An assistant edit call marking file ``index`` done (``old`` to ``new``), and its
    tool result."""
    args = {"path": path, "old_string": status_line(index, old)}
    args["new_string"] = status_line(index, new)
    return exchange(call_id, "edit_file", args, result)


def with_status(i: int) -> str:
    return f"1\t{code_for(i)}\n2\t{status_line(i, 'open')}\n3\tlog line 00000: subsystem 1"


def test_an_editing_task_reads_a_file_edits_it_where_the_open_line_shows_then_moves_on() -> None:
    task = {"role": "user", "content": task_text(1, 2, edits=True)}
    assert scan(request(task)).turn == Turn("task", 1, 2, edits=True)
    assert "part_001" not in task["content"].split("one by one")[1]  # no file's own line
    body = request(task)
    assert call_of(Persona()(body)) == ("read_file", {"path": "logs/part_001.txt"})
    body = request(task, *read("c1", "logs/part_001.txt", with_status(1)))
    assert call_of(Persona()(body)) == (
        "edit_file",
        {
            "path": "logs/part_001.txt",
            "old_string": status_line(1, "open"),
            "new_string": status_line(1, "done"),
        },
    )
    deep = Persona(path_key="file_path", path_prefix="/")
    assert call_of(deep(body))[1]["file_path"] == "/logs/part_001.txt"
    done = [
        *read("c1", "logs/part_001.txt", with_status(1)),
        *edit("c2", "logs/part_001.txt", 1, "ok"),
    ]
    assert call_of(Persona()(request(task, *done))) == ("read_file", {"path": "logs/part_002.txt"})
    # The read result gone (its call kept): the open line must be seen again to edit.
    hidden = copy.deepcopy(request(task, *read("c1", "logs/part_001.txt", with_status(1))))
    hidden["messages"][3]["content"] = "[tool output masked: read_file returned 90 tokens]"
    assert call_of(Persona()(hidden)) == ("read_file", {"path": "logs/part_001.txt"})


@pytest.mark.parametrize(
    ("evidence", "next_file"),
    [
        ("Marked done: part_001.txt, part_002.txt", 3),
        (
            "Files created or changed:\n- logs/part_001.txt: edited (+1 −1 lines)\n"
            "- logs/part_002.txt: edited (+1 −1 lines)",
            3,
        ),
        ("- logs/ part_001.txt … part_003.txt (3 files): edited (+3 −3 lines in all)", 4),
        (f"2\t{status_line(1, 'done')}\n2\t{status_line(2, 'done')}", 3),
    ],
)
def test_a_file_named_as_edited_is_not_edited_again(evidence: str, next_file: int) -> None:
    body = request(
        {"role": "user", "content": task_text(1, 4, edits=True)},
        {"role": "user", "content": evidence},
    )
    assert {"part_001.txt", "part_002.txt"} <= scan(body).edited
    path = f"logs/part_00{next_file}.txt"
    assert call_of(Persona()(body)) == ("read_file", {"path": path})


def test_every_file_marked_done_the_report_follows() -> None:
    task = {"role": "user", "content": task_text(1, 1, edits=True)}
    done = [
        *read("c1", "logs/part_001.txt", with_status(1)),
        *edit("c2", "logs/part_001.txt", 1, "ok"),
    ]
    name, args = call_of(Persona()(request(task, *done)))
    assert name == "write_file" and args["content"] == f"{code_for(1)}\n"


def test_summarizers_restate_an_editing_task_and_the_files_marked_done() -> None:
    body = request(
        {"role": "system", "content": SUMMARY_MARKER},
        {"role": "user", "content": task_text(1, 4, edits=True)},
        *[m for i in (1, 2) for m in read(f"r{i}", f"logs/part_00{i}.txt", with_status(i))],
        *[m for i in (1, 2) for m in edit(f"e{i}", f"logs/part_00{i}.txt", i, "ok")],
    )
    faithful = Summarizer("faithful")(body)["content"]
    assert "Marked done: part_001.txt, part_002.txt" in faithful
    assert "Marked done: part_001.txt" in Summarizer("lossy")(body)["content"]
    assert "part_002.txt" not in Summarizer("lossy")(body)["content"].split("Marked done")[1]
    # The restatement alone keeps the task an editing one and names no file done.
    restated = request({"role": "user", "content": faithful.split("\n")[1]})
    assert scan(restated).turn == Turn("task", 1, 4, edits=True)
    assert scan(request({"role": "user", "content": faithful})).edited == {
        "part_001.txt",
        "part_002.txt",
    }


def test_recorder_counts_files_edited_twice(tmp_path: Path) -> None:
    recorder = Recorder()
    for name in ("part_001.txt", "part_002.txt", "part_001.txt"):
        args = {"path": f"logs/{name}", "old_string": "a", "new_string": "b"}
        recorder.observe({"tool_calls": [{"name": "edit_file", "arguments": args}]}, summary=False)
    assert recorder.reedited_files() == 1
    paths = make_workspace(tmp_path, files=3, edits=True)
    text = (tmp_path / paths[0]).read_text()
    assert text.splitlines()[:2] == [code_for(1), status_line(1, "open")]
    (tmp_path / paths[0]).write_text(text.replace(status_line(1, "open"), status_line(1, "done")))
    assert marked_done(tmp_path, paths) == 1


def lag_step(*messages: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The call a persona makes on a task over files 1-3 with a lag, after ``messages``."""
    task = {"role": "user", "content": task_text(1, 3, edits=True, lag=True)}
    return call_of(Persona()(request(task, *messages)))


def status_edit(index: int, old: str, new: str) -> tuple[str, dict[str, Any]]:
    path = f"logs/part_00{index}.txt"
    args = {"path": path, "old_string": status_line(index, old)}
    return "edit_file", {**args, "new_string": status_line(index, new)}


def test_a_task_with_a_lag_starts_the_next_file_before_marking_one_done() -> None:
    task = {"role": "user", "content": task_text(1, 3, edits=True, lag=True)}
    assert scan(request(task)).turn == Turn("task", 1, 3, edits=True, lag=True)
    one = read("r1", "logs/part_001.txt", with_status(1))
    start_one = edit("e1", "logs/part_001.txt", 1, "ok", "open", "started")
    two = read("r2", "logs/part_002.txt", with_status(2))
    start_two = edit("e2", "logs/part_002.txt", 2, "ok", "open", "started")
    assert lag_step() == ("read_file", {"path": "logs/part_001.txt"})
    assert lag_step(*one) == status_edit(1, "open", "started")
    assert lag_step(*one, *start_one) == ("read_file", {"path": "logs/part_002.txt"})
    assert lag_step(*one, *start_one, *two) == status_edit(2, "open", "started")
    assert lag_step(*one, *start_one, *two, *start_two) == status_edit(1, "started", "done")
    # File 1's started line no longer in view (its edit summarized): it is read again.
    summary = {"role": "user", "content": "Marked started: part_001.txt"}
    assert lag_step(summary, *two, *start_two) == ("read_file", {"path": "logs/part_001.txt"})
    # The lines around its edit, re-read after a compaction, are enough to edit it.
    around = {"role": "user", "content": f"2\t{status_line(1, 'started')}"}
    assert lag_step(summary, around, *two, *start_two) == status_edit(1, "started", "done")
    done_one = edit("e3", "logs/part_001.txt", 1, "ok", "started", "done")
    after = (*one, *start_one, *two, *start_two, *done_one)
    assert lag_step(*after) == ("read_file", {"path": "logs/part_003.txt"})
    three = (*read("r3", "logs/part_003.txt", with_status(3)),)
    start_three = edit("e4", "logs/part_003.txt", 3, "ok", "open", "started")
    # The last file has no next one: it is marked done once it is started.
    assert lag_step(*after, *three, *start_three) == status_edit(2, "started", "done")


@pytest.mark.parametrize(
    ("evidence", "done", "started"),
    [
        ("Marked done: part_001.txt\nMarked started: part_002.txt", {1}, {2}),
        (
            "- logs/part_001.txt: edited ×2 (+2 −2 lines)\n"
            "- logs/part_002.txt: edited (+1 −1 lines)",
            {1},
            {2},
        ),
        (
            "- logs/ part_001.txt … part_003.txt (3 files): edited ×2 (+6 −6 lines in all)",
            {1, 2, 3},
            set(),
        ),
        (
            "- logs/ part_001.txt … part_003.txt (3 files): edited (+3 −3 lines in all)",
            set(),
            {1, 2, 3},
        ),
    ],
)
def test_with_a_lag_a_file_edited_once_is_started_and_twice_done(
    evidence: str, done: set[int], started: set[int]
) -> None:
    task = {"role": "user", "content": task_text(1, 4, edits=True, lag=True)}
    ev = scan(request(task, {"role": "user", "content": evidence}))
    assert ev.done == {f"part_00{i}.txt" for i in done}
    assert ev.started == {f"part_00{i}.txt" for i in started}
    assert ev.started_view == set()


def test_summarizers_restate_a_task_with_a_lag_and_the_files_started_and_done() -> None:
    body = request(
        {"role": "system", "content": SUMMARY_MARKER},
        {"role": "user", "content": task_text(1, 4, edits=True, lag=True)},
        *read("r1", "logs/part_001.txt", with_status(1)),
        *edit("e1", "logs/part_001.txt", 1, "ok", "open", "started"),
        *read("r2", "logs/part_002.txt", with_status(2)),
        *edit("e2", "logs/part_002.txt", 2, "ok", "open", "started"),
        *edit("e3", "logs/part_001.txt", 1, "ok", "started", "done"),
    )
    faithful = Summarizer("faithful")(body)["content"]
    assert (
        "Marked done: part_001.txt\nRemaining work (Marked started, to mark done): part_002.txt"
        in faithful
    )
    restated = scan(request({"role": "user", "content": faithful}))
    assert restated.turn == Turn("task", 1, 4, edits=True, lag=True)
    assert (restated.done, restated.started) == ({"part_001.txt"}, {"part_002.txt"})
    verbose = Summarizer("verbose")(body)["content"]
    assert "Marked started." in verbose and "Marked done." in verbose
    assert scan(request({"role": "user", "content": verbose})).started == {"part_002.txt"}


def test_recorder_counts_an_edit_made_again_not_a_file_edited_twice() -> None:
    recorder = Recorder()
    for new in ("started", "done", "done"):
        args = {"path": "logs/part_001.txt", "old_string": "a", "new_string": new}
        recorder.observe({"tool_calls": [{"name": "edit_file", "arguments": args}]}, summary=False)
        if new == "done" and recorder.reedited_files() == 0:
            assert len(recorder.edits) == 2  # started, then done: two edits, none again
    assert recorder.reedited_files() == 1


def test_a_here_document_editor_writes_the_file_as_it_last_saw_it() -> None:
    """It writes the file whole from the newest text of it in view (a ``cat`` output, or
    a whole file shown again after a compaction, its numbers taken off), the line
    changed; with none in view it reads the file first. A ledger line naming a file
    ``written by a command`` marks it; a line saying a summary was written does not."""
    shell = Persona("re_reader", shell_tool=SHELL_TOOL, shell_style="heredoc")
    task = {"role": "user", "content": task_text(1, 2, edits=True)}
    text = f"{code_for(1)}\n{status_line(1, 'open')}\nlog line 00000\n"
    cat = {"command": "cat logs/part_001.txt"}
    body = request(task, *exchange("c1", SHELL_TOOL, cat, f"{text}[exit code 0]"))
    done = text.replace("open", "done")
    write = f"cat > logs/part_001.txt <<'EOF'\n{done}EOF"
    assert call_of(shell(body)) == (SHELL_TOOL, {"command": write})
    numbered = "".join(f"{n}\t{line}\n" for n, line in enumerate(text.splitlines(), 1))
    shown = "[File re-read from disk after compaction: logs/part_001.txt — lines 1-3 of 3]\n"
    reread = request(
        task,
        {"role": "user", "content": shown + numbered},
        *exchange("c1", SHELL_TOOL, cat, "[tool output masked: run_bash returned 40 tokens]"),
    )
    assert call_of(shell(reread)) == (SHELL_TOOL, {"command": write})
    masked = request(task, *exchange("c1", SHELL_TOOL, cat, f"{status_line(1, 'open')} [cut]"))
    assert call_of(shell(masked)) == (SHELL_TOOL, cat)
    ledger = {"role": "user", "content": "- logs/part_001.txt: written by a command (+3 −0 lines)"}
    assert call_of(shell(request(task, ledger))) == (
        SHELL_TOOL,
        {"command": "cat logs/part_002.txt"},
    )
    asked = (
        "A handoff summary of this conversation was written, but it says nothing of part_001.txt"
    )
    assert "part_001.txt" not in scan(request(task, {"role": "user", "content": asked})).edited
    recorder = _observed(write, write)
    assert recorder.edits == [("part_001.txt", "done"), ("part_001.txt", "done")]
    assert recorder.reedited_files() == 1
