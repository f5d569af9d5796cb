"""``cat`` of several files over its room is cut file by file (context/shown_files.py)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import ToolMessage

from agentgraph.capabilities.tools.files import page_note
from agentgraph.context.artifacts import cut_marker, output_artifact_path
from agentgraph.context.shown_files import (
    ShownCut,
    ShownLines,
    cut_command_output,
    cut_shown_file,
    cut_shown_files,
    files_printed,
    page_of_shown_files,
    read_shown_texts,
    shown_lines,
    shown_marker,
    shown_spans,
)
from agentgraph.context.tokens import get_counter
from agentgraph.runtime.history.kinds import with_marker

COUNTER = get_counter("gpt-4o-mini")
STATUS = "[exit code 0]"
NOTE_RE = re.compile(
    r"^(?P<path>\S+): \[showing lines 1-(?P<last>\d+) of (?P<total>\d+); "
    r"call read_file with offset=(?P=last) to continue\]$"
)


def _log(name: str, lines: int) -> str:
    return "".join(f"{name} line {n}: subsystem reported nominal values\n" for n in range(lines))


def _noted(text: str) -> dict[str, tuple[int, int]]:
    """The spans the page notes of ``text`` name, as the model reads them."""
    found = (NOTE_RE.match(line) for line in text.splitlines())
    return {m["path"]: (int(m["last"]), int(m["total"])) for m in found if m}


def _expected(files: list[tuple[str, str]], spans: dict[str, tuple[int, int]]) -> str:
    """The answer a cut with ``spans`` shows: each file whole, or its leading lines and
    its note; the shell tool's newline where the output lacked one; the status line."""
    out = ""
    for path, text in files:
        if path not in spans:
            out += text
            continue
        last, total = spans[path]
        head = "".join(line + "\n" for line in text.split("\n")[:last])
        note = f"[showing lines 1-{last} of {total}; call read_file with offset={last} to continue]"
        out += f"{head}{path}: {note}\n"
    return (out if out.endswith("\n") else out + "\n") + STATUS


def test_small_files_are_shown_whole_and_the_large_ones_share_the_rest() -> None:
    """Files under an equal share of the room are printed as ``cat`` printed them; each
    larger one shows its leading lines and the page note read_file writes, after its
    path; the whole fits the bound."""
    files = [("a.txt", _log("a", 3)), ("b.txt", _log("b", 60)), ("c.txt", _log("c", 60))]
    whole = "".join(text for _, text in files)
    cap = COUNTER.count_text(whole) // 2
    cut = cut_shown_files(whole, STATUS, files, cap, COUNTER)
    assert cut is not None and COUNTER.count_text(cut.text) <= cap
    assert cut.text.startswith(files[0][1] + _log("b", 1)) and cut.text.endswith(STATUS)
    assert list(_noted(cut.text)) == ["b.txt", "c.txt"]
    assert _noted(cut.text) == cut.spans and {t for _, t in cut.spans.values()} == {60}
    assert cut.text == _expected(files, dict(cut.spans))


@pytest.mark.parametrize(
    "output",
    [
        "x" + _log("a", 3) + _log("b", 40),  # more than the files: not cat's plain output
        _log("a", 3),  # fewer
        _log("b", 40) + _log("a", 3),  # another order
        "",
    ],
)
def test_an_output_that_is_not_the_files_one_after_the_other_is_left_to_the_cut(
    output: str,
) -> None:
    files = [("a.txt", _log("a", 3)), ("b.txt", _log("b", 40))]
    assert cut_shown_files(output, STATUS, files, 100, COUNTER) is None


def test_no_file_is_cut_to_nothing() -> None:
    """A room too small for a file's first line and its note: left to the ordinary cut."""
    files = [(f"f{i}.txt", _log(f"f{i}", 30)) for i in range(8)]
    whole = "".join(text for _, text in files)
    assert cut_shown_files(whole, STATUS, files, 60, COUNTER) is None


def test_a_file_without_a_final_newline_is_counted_and_cut_by_its_lines() -> None:
    """The shell tool ends an output without a newline with one; the last file's lines
    are its ``\\n``-ended lines and the rest (a carriage return is no line end)."""
    last = _log("b", 39) + "b line 39\rno newline"
    files = [("a.txt", _log("a", 40)), ("b.txt", last)]
    output = files[0][1] + last + "\n"
    cut = cut_shown_files(output, STATUS, files, COUNTER.count_text(output) // 2, COUNTER)
    assert cut is not None and cut.spans["b.txt"][1] == 40


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 80), min_size=2, max_size=9),
    final_newline=st.booleans(),
    share=st.floats(0.05, 1.2),
)
def test_a_cut_answer_fits_and_shows_each_file_from_its_start_with_true_notes(
    sizes: list[int], final_newline: bool, share: float
) -> None:
    """Whatever the files and the room: no answer, or one within the bound that shows
    every file from its first line, each cut file's note naming the lines shown and the
    file's length, in the files' order."""
    paths = [f"logs/f{i}.txt" for i in range(len(sizes))]
    texts = [_log(f"f{i}", n) for i, n in enumerate(sizes)]
    if not final_newline:
        texts[-1] += "tail without newline"
    files = list(zip(paths, texts, strict=True))
    whole = "".join(texts)
    output = whole if whole.endswith("\n") or not whole else whole + "\n"
    cap = max(1, int(COUNTER.count_text(output + STATUS) * share))
    cut = cut_shown_files(output, STATUS, files, cap, COUNTER)
    if cut is None:
        # Only when a file over an equal share of the room cannot show its first line
        # there (a larger file's share is never smaller than that).
        share = (cap - COUNTER.count_text(STATUS)) // len(files)
        first = [
            f"{text.split(chr(10))[0]}\n{path}: {page_note(1, 1, len(text.splitlines()))}\n"
            for path, text in files
            if COUNTER.count_text(text) > share
        ]
        assert not whole or any(COUNTER.count_text(page) > share for page in first)
        return
    assert COUNTER.count_text(cut.text) <= cap and cut.text.endswith(STATUS)
    spans = cut.spans
    assert _noted(cut.text) == spans and cut.text == _expected(files, dict(spans))
    for path, text in files:
        if path in spans:
            last, total = spans[path]
            lines = text.split("\n")
            assert total == len(lines) - (lines[-1] == "") and 1 <= last < total


def test_only_regular_utf8_files_read_file_would_read_within_the_output_size_are_read(
    tmp_path: Path,
) -> None:
    """The files are read by read_file's rules, so that each page note names a read
    read_file will make: a link inside the workspace is followed, none leading out, no
    file with a hard link outside it, none holding a NUL byte, no path read_file cannot
    name (a lone surrogate: an imported session's)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("alpha\n")
    (ws / "b.txt").write_text("beta\n")
    (ws / "bin").write_bytes(b"\xff\xfe")
    (ws / "link").symlink_to(ws / "a.txt")
    (tmp_path / "outside.txt").write_text("beta\n")
    (ws / "out").symlink_to(tmp_path)
    os.mkfifo(ws / "fifo")
    (ws / "nul.txt").write_text("alpha\x00beta\n")  # UTF-8, but read_file's binary data
    (ws / "linked.txt").write_text("beta\n")
    os.link(ws / "linked.txt", tmp_path / "linked-outside.txt")  # a hard link leading out
    root = str(ws)
    assert read_shown_texts(root, ["a.txt", "b.txt"], 11) == ["alpha\n", "beta\n"]
    assert read_shown_texts(root, ["a.txt", "link"], 12) == ["alpha\n", "alpha\n"]
    assert read_shown_texts(root, ["a.txt", "b.txt"], 10) is None  # more than was printed
    outside = ("bin", "fifo", "gone.txt", ".", "../outside.txt", "out/outside.txt", "nul.txt")
    outside += ("linked.txt", "a\ud800.txt", "a\x00.txt")  # read_file refuses each
    for odd in (*outside, str(tmp_path / "outside.txt")):
        assert read_shown_texts(root, ["a.txt", odd], 100) is None, odd


def test_only_cat_of_files_that_exited_0_is_cut_by_file(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    for name in ("a", "b"):
        (tmp_path / "logs" / f"{name}.txt").write_text(_log(name, 50))
    output = _log("a", 50) + _log("b", 50)
    cap = COUNTER.count_text(output) // 2
    ws = str(tmp_path)
    cut = cut_command_output("cd logs && cat a.txt b.txt", output + STATUS, cap, COUNTER, ws)
    assert cut is not None and set(cut.spans) == set(_noted(cut.text))
    assert set(cut.spans) == {"logs/a.txt", "logs/b.txt"}
    failed = output + "[exit code 1]"
    assert cut_command_output("cat logs/a.txt logs/b.txt", failed, cap, COUNTER, ws) is None
    one = _log("a", 50) + STATUS
    single = cut_command_output("cat logs/a.txt", one, cap // 2, COUNTER, ws)
    assert single is not None and set(single.lines) == {"logs/a.txt"} and not single.spans
    for other in ("head -n 49 logs/a.txt", "grep line logs/a.txt", "cat logs/a.txt | head -50"):
        assert cut_command_output(other, one, cap // 2, COUNTER, ws) is None, other
    lines = output.splitlines(keepends=True)
    numbered = "".join(f"{n:6}\t{line}" for n, line in enumerate(lines, 1)) + STATUS
    assert cut_command_output("cat -n logs/a.txt logs/b.txt", numbered, cap, COUNTER, ws) is None
    assert (
        cut_command_output("cat logs/a.txt logs/b.txt", output + STATUS, cap, COUNTER, None) is None
    )


def test_a_result_cut_again_is_cut_file_by_file_from_its_whole_output(tmp_path: Path) -> None:
    """A compaction keeping a ``cat`` result the model has not seen cuts it again, file by
    file, from the whole output: the message itself when nothing cut it, else its saved
    copy; with the copy gone or the files changed since, it is left to the other cut."""
    ws, artifacts = tmp_path / "ws", tmp_path / "artifacts"
    (ws / "logs").mkdir(parents=True)
    artifacts.mkdir()
    for name in ("a", "b", "c"):
        (ws / "logs" / f"{name}.txt").write_text(_log(name, 60))
    command = "cat logs/a.txt logs/b.txt logs/c.txt"
    paths = ["logs/a.txt", "logs/b.txt", "logs/c.txt"]
    whole = _log("a", 60) + _log("b", 60) + _log("c", 60) + STATUS
    size = COUNTER.count_text(whole)
    first = cut_command_output(command, whole, size // 2, COUNTER, str(ws))
    assert first is not None
    cut = with_marker(ToolMessage(first.text, tool_call_id="c1"), **cut_marker(whole))
    output_artifact_path(artifacts, "c1").write_text(whole)
    again = page_of_shown_files(
        cut, command, size // 4, COUNTER, artifacts=str(artifacts), workspace=str(ws)
    )
    assert again is not None and COUNTER.count_text(again) <= size // 4
    assert set(_noted(again)) == set(paths)
    assert again.startswith(_log("a", 3)) and _log("b", 3) in again and _log("c", 3) in again
    uncut = ToolMessage(whole, tool_call_id="c2")
    direct = cut_command_output(command, whole, size // 4, COUNTER, str(ws))
    assert direct is not None
    assert (
        page_of_shown_files(uncut, command, size // 4, COUNTER, artifacts=None, workspace=str(ws))
        == direct.text
    )
    gone = {"artifacts": str(tmp_path / "none"), "workspace": str(ws)}
    assert page_of_shown_files(cut, command, size // 4, COUNTER, **gone) is None
    one = "cat logs/a.txt"
    single = ToolMessage(_log("a", 60) + STATUS, tool_call_id="c3")
    paged = page_of_shown_files(single, one, size // 8, COUNTER, artifacts=None, workspace=str(ws))
    assert paged is not None and COUNTER.count_text(paged) <= size // 8
    assert list(_noted(paged)) == ["logs/a.txt"] and paged.startswith(_log("a", 3))
    numbered = "".join(
        f"{n:6d}\t{line}" for n, line in enumerate(_log("a", 60).splitlines(True), 1)
    )
    page = ToolMessage(numbered + STATUS, tool_call_id="c5")
    nl = "nl -ba logs/a.txt | sed -n '1,200p'"
    renumbered = page_of_shown_files(
        page, nl, size // 8, COUNTER, artifacts=None, workspace=str(ws)
    )
    assert renumbered is not None and COUNTER.count_text(renumbered) <= size // 8
    assert list(_noted(renumbered)) == ["logs/a.txt"] and renumbered.startswith(numbered[:200])
    forged = ToolMessage("x\n" * 2000 + STATUS, tool_call_id="c4")  # an imported session's
    assert (
        page_of_shown_files(
            forged, "cat a\ud800.txt", 50, COUNTER, artifacts=None, workspace=str(ws)
        )
        is None
    )
    grep = "grep line logs/a.txt"
    assert (
        page_of_shown_files(single, grep, size // 8, COUNTER, artifacts=None, workspace=str(ws))
        is None
    )
    (ws / "logs" / "b.txt").write_text(_log("b", 61))
    assert (
        page_of_shown_files(uncut, command, size // 4, COUNTER, artifacts=None, workspace=str(ws))
        is None
    )


def test_the_lines_shown_of_each_file_are_the_markers_not_the_texts() -> None:
    """The ledger takes the lines shown from the cut's marker: a file holding a line
    shaped like another file's page note claims nothing, and a malformed marker (a
    session imported from elsewhere) is left out entry by entry."""
    spoof = "b.txt: [showing lines 1-60 of 60; call read_file with offset=60 to continue]\n"
    files = [("a.txt", spoof + _log("a", 40)), ("b.txt", _log("b", 60))]
    whole = "".join(text for _, text in files)
    cut = cut_shown_files(whole, STATUS, files, COUNTER.count_text(whole) // 2, COUNTER)
    assert cut is not None
    message = with_marker(ToolMessage(cut.text, tool_call_id="c1"), **shown_marker(cut))
    spans = shown_spans(message, ["a.txt", "b.txt"])
    assert spans == cut.spans and spans["b.txt"][0] < 60
    assert shown_spans(message, ["a.txt"]) == {"a.txt": cut.spans["a.txt"]}
    assert shown_spans(ToolMessage(cut.text, tool_call_id="c2"), ["a.txt", "b.txt"]) == {}
    odd = ShownCut("", {"a.txt": (3, 3), "b.txt": (0, 9), "c.txt": (2, 9)})
    marked = shown_marker(odd)
    marked["shown_spans"]["d.txt"] = ["2", 9]  # type: ignore[index]
    message = with_marker(ToolMessage("", tool_call_id="c3"), **marked)
    assert shown_spans(message, ["a.txt", "b.txt", "c.txt", "d.txt"]) == {"c.txt": (2, 9)}


def test_one_file_shows_its_leading_lines_and_where_to_read_on() -> None:
    """``cat F`` over its room: the file's leading lines and the page note read_file
    writes, after its path, as a read_file call shows; the marker records the lines."""
    text = _log("a", 200)
    lines = text.splitlines(keepends=True)
    cap = COUNTER.count_text(text) // 4
    cut = cut_shown_file(text, STATUS, "logs/a.txt", text, cap, COUNTER)
    assert cut is not None and COUNTER.count_text(cut.text) <= cap
    first, last, total = cut.lines["logs/a.txt"]
    note = f"logs/a.txt: {page_note(1, last, 200)}\n"
    assert (first, total) == (1, 200) and cut.text == "".join(lines[:last]) + note + STATUS
    assert _noted(cut.text) == {"logs/a.txt": (last, 200)}
    message = with_marker(ToolMessage(cut.text, tool_call_id="c1"), **shown_marker(cut))
    assert shown_lines(message, "logs/a.txt") == (1, last, 200)
    assert shown_lines(message, "logs/b.txt") is None
    assert shown_spans(message, ["logs/a.txt"]) == {}  # several files' marker: not this
    assert cut_shown_file("x" + text, STATUS, "logs/a.txt", text, cap, COUNTER) is None
    assert cut_shown_file(text, STATUS, "logs/a.txt", text, 20, COUNTER) is None  # no first line


def test_lines_of_a_file_printed_from_a_line_on_are_cut_from_there(tmp_path: Path) -> None:
    """``tail -n +K F``, ``sed -n 'A,Bp' F`` or ``head -n N F`` of a file over its room:
    the lines printed that fit from the first and the note naming them by their numbers
    in the file and where to read on; only plain reads of the file's own lines are cut
    so."""
    (tmp_path / "logs").mkdir()
    text = _log("a", 300)
    (tmp_path / "logs" / "a.txt").write_text(text)
    lines = text.splitlines(keepends=True)
    ws = str(tmp_path)
    reads = {
        "tail -n +121 logs/a.txt": (121, 300),
        "sed -n '121,$p' logs/a.txt": (121, 300),
        "cd logs && tail -n +121 a.txt": (121, 300),
        "sed -n '121,280p' logs/a.txt": (121, 280),
        "head -n 250 logs/a.txt": (1, 250),
        "head -n 900 logs/a.txt": (1, 300),  # the file ends first
    }
    for command, (start, end) in reads.items():
        printed = "".join(lines[start - 1 : end]) + STATUS
        cap = COUNTER.count_text(printed) // 4
        cut = cut_command_output(command, printed, cap, COUNTER, ws)
        assert cut is not None and COUNTER.count_text(cut.text) <= cap, command
        first, last, total = cut.lines["logs/a.txt"]
        assert (first, total) == (start, 300) and first < last < end, command
        note = f"logs/a.txt: {page_note(start, last, 300)}\n"
        assert cut.text == "".join(lines[start - 1 : last]) + note + STATUS, command
    printed = "".join(lines[120:]) + STATUS
    cap = COUNTER.count_text(printed) // 4
    assert cut_command_output("tail -n +122 logs/a.txt", printed, cap, COUNTER, ws) is None
    assert cut_command_output("head -n 120 logs/a.txt", printed, cap, COUNTER, ws) is None
    assert files_printed("tail -n +121 logs/a.txt") == (("logs/a.txt",), 121, None)
    assert files_printed("cat a.py b.py") == (("a.py", "b.py"), 1, None)
    assert files_printed("sed -n '1,80p' a.py") == (("a.py",), 1, 80)
    assert files_printed("nl -ba a.py | sed -n '5,80p'") == (("a.py",), 5, 80)
    assert files_printed("grep -v x a.py").paths == ()


@pytest.mark.parametrize(
    ("command", "start", "end"),
    [
        ("nl -ba logs/a.txt | sed -n '121,280p'", 121, 280),
        ("cat -n logs/a.txt | sed -n '121,$p'", 121, 301),
        ("nl -ba logs/a.txt | tail -n +121", 121, 301),
        ("cat -n logs/a.txt", 1, 301),
        ("nl -ba logs/a.txt | head -n 250", 1, 250),
    ],
)
def test_numbered_lines_of_a_file_are_cut_as_printed_from_the_first(
    tmp_path: Path, command: str, start: int, end: int
) -> None:
    """A numbered page (``nl -ba F | sed -n 'A,Bp'``, ``cat -n F``) over its room, as the
    programs print it (a last line without a newline included): the numbered lines that
    fit from the first, as printed, and the note naming where to read on; the marker
    records them. Lines numbered otherwise (``nl`` skips blank lines) are no such page."""
    (tmp_path / "logs").mkdir()
    text = _log("a", 300) + "last line without a newline"
    (tmp_path / "logs" / "a.txt").write_text(text)
    ran = subprocess.run(
        ["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    answer = ran.stdout + ("" if ran.stdout.endswith("\n") else "\n") + STATUS
    numbered = [f"{n:6d}\t{line}" for n, line in enumerate(text.splitlines(True), start=1)]
    assert ran.stdout.rstrip("\n") == "".join(numbered[start - 1 : end]).rstrip("\n")
    cap = COUNTER.count_text(answer) // 4
    cut = cut_command_output(command, answer, cap, COUNTER, str(tmp_path))
    assert cut is not None and COUNTER.count_text(cut.text) <= cap
    first, last, total = cut.lines["logs/a.txt"]
    assert (first, total) == (start, 301) and first < last < end
    note = f"logs/a.txt: {page_note(start, last, 301)}\n"
    assert cut.text == "".join(numbered[start - 1 : last]) + note + STATUS
    (tmp_path / "logs" / "a.txt").write_text(
        text.replace("a line 7: subsystem reported nominal values\n", "\n")
    )
    blank = subprocess.run(
        ["bash", "-c", "nl logs/a.txt"], cwd=tmp_path, capture_output=True, text=True
    ).stdout
    assert cut_command_output("nl logs/a.txt", blank + STATUS, cap, COUNTER, str(tmp_path)) is None


def test_the_lines_the_marker_records_of_one_file_must_be_in_order() -> None:
    """A malformed entry (a session imported from elsewhere) is left out: lines out of
    order, the file's end shown (nothing was cut), or no ints."""
    odd = ([0, 20, 36], [21, 20, 36], [1, 36, 36], [1, 40, 36], [1, "20", 36], [1, 20])
    for entry in odd:
        message = with_marker(ToolMessage("", tool_call_id="c1"), shown_lines={"a.txt": entry})
        assert shown_lines(message, "a.txt") is None, entry
    good = ShownCut("", {}, {"a.txt": ShownLines(5, 20, 36)})
    message = with_marker(ToolMessage("", tool_call_id="c2"), **shown_marker(good))
    assert shown_lines(message, "a.txt") == ShownLines(5, 20, 36)


@settings(max_examples=80, deadline=None)
@given(
    size=st.integers(1, 300),
    start=st.integers(1, 300),
    upto=st.none() | st.integers(1, 400),
    final_newline=st.booleans(),
    share=st.floats(0.02, 1.2),
    numbered=st.booleans(),
)
def test_one_file_cut_fits_and_shows_its_lines_from_the_first_printed(
    size: int, start: int, upto: int | None, final_newline: bool, share: float, numbered: bool
) -> None:
    """Whatever the file, the lines printed (as they are or numbered) and the room: no
    answer, or one within the bound that shows the lines printed from the first, as
    printed, then the note naming them and the offset to read on."""
    text = _log("a", size) + ("" if final_newline else "end without newline")
    lines = text.splitlines(keepends=True)
    if numbered:
        lines = [f"{n:6d}\t{line}" for n, line in enumerate(lines, start=1)]
    total = len(lines)
    first = min(start, total)
    end = total if upto is None else min(max(upto, first), total)
    printed = "".join(lines[first - 1 : end])
    output = printed if printed.endswith("\n") else printed + "\n"
    cap = max(1, int(COUNTER.count_text(output + STATUS) * share))
    asked = (first, None if upto is None else max(upto, first))
    cut = cut_shown_file(output, STATUS, "a.txt", text, cap, COUNTER, lines=asked)
    if cut is None:
        # Only when one line is printed (none to cut), or the first cannot fit beside
        # its note.
        page = f"{lines[first - 1].rstrip(chr(10))}\na.txt: {page_note(first, first, total)}\n"
        assert first == end or not COUNTER.fits(page + STATUS, cap)
        return
    assert COUNTER.count_text(cut.text) <= cap
    shown_first, last, counted = cut.lines["a.txt"]
    assert (shown_first, counted) == (first, total) and first <= last < end
    body = "".join(lines[first - 1 : last])
    assert cut.text == body + f"a.txt: {page_note(first, last, total)}\n" + STATUS
