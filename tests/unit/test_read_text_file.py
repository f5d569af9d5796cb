"""read_file reads a small file whole and a large one line by line: both read the same."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgraph.capabilities.tools import files
from agentgraph.capabilities.tools.base import ToolError
from agentgraph.capabilities.tools.files import (
    READ_FILE_LINE_READ_BYTES,
    READ_FILE_MAX_LINE_CHARS,
    _page_of_bytes,
    _page_streamed,
    read_text_file,
)

# Pieces a line is made of: ASCII, a CR, a whole and a cut 3-byte character, a stray
# continuation byte, a 4-byte character; and runs that reach both cut limits.
_PIECES = st.sampled_from(
    [
        b"a",
        b"def f(x):",
        b"\t",
        b"\r",
        "€".encode(),
        "€".encode()[:2],
        b"\x82",
        "😀".encode(),
        b"x" * (READ_FILE_MAX_LINE_CHARS - 3),
        "€".encode() * (READ_FILE_LINE_READ_BYTES // 3 - 1),
    ]
)
_LINE = st.lists(_PIECES, max_size=6).map(b"".join)


@settings(max_examples=400, deadline=None)
@given(
    lines=st.lists(_LINE, max_size=40),
    final_newline=st.booleans(),
    data=st.data(),
)
def test_a_file_read_whole_reads_as_the_same_file_streamed(
    lines: list[bytes], final_newline: bool, data: st.DataObject
) -> None:
    content = b"\n".join(lines) + (b"\n" if final_newline and lines else b"")
    # Mostly within the file, sometimes past its end.
    offset = data.draw(st.integers(0, len(lines) + 2), label="offset")
    limit = data.draw(st.integers(1, len(lines) + 2), label="limit")
    whole = _page_of_bytes(content, offset, limit)
    streamed = _page_streamed(io.BytesIO(content), offset, limit)
    if whole is not None:  # None: a line it shows is cut, read line by line instead
        assert whole == streamed
    shown = content.split(b"\n")[offset : offset + limit]
    if all(len(line) < 2 * READ_FILE_MAX_LINE_CHARS // 3 for line in shown):
        assert whole is not None  # no line near a cut: the whole-file path serves it


def _spy_whole_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the files read whole from now on."""
    sizes: list[int] = []
    real = files._page_of_bytes

    def spy(data: bytes, offset: int, limit: int) -> tuple[str, int, int] | None:
        sizes.append(len(data))
        return real(data, offset, limit)

    monkeypatch.setattr(files, "_page_of_bytes", spy)
    return sizes


def test_a_file_over_the_whole_read_size_is_streamed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "big.txt"
    path.write_bytes(b"".join(b"line %d\r\n" % i for i in range(1, 3001)))
    sizes = _spy_whole_reads(monkeypatch)
    whole = read_text_file(path, "big.txt", 1000, 5)
    assert sizes == [path.stat().st_size]
    monkeypatch.setattr(files, "READ_FILE_WHOLE_MAX_BYTES", 100)  # the bound, not the logic
    assert read_text_file(path, "big.txt", 1000, 5) == whole
    assert sizes == [path.stat().st_size]  # streamed: not read whole
    assert whole == (
        "1001\tline 1001\n1002\tline 1002\n1003\tline 1003\n1004\tline 1004\n1005\tline 1005\n"
        "[showing lines 1001-1005 of 3000; call read_file with offset=1005 to continue]"
    )


def test_a_file_that_grew_past_the_whole_read_size_after_its_stat_is_streamed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "growing.log"
    path.write_bytes(b"".join(b"entry %d\n" % i for i in range(1, 201)))
    expected = read_text_file(path, "growing.log", 150, 3)
    # The stat said it was small; what is read is over the bound by then.
    monkeypatch.setattr(files, "READ_FILE_WHOLE_MAX_BYTES", path.stat().st_size - 1)
    monkeypatch.setattr(
        files, "_require_regular_file", lambda real, shown: os.stat_result((0o100644,) + (0,) * 9)
    )
    sizes = _spy_whole_reads(monkeypatch)
    assert read_text_file(path, "growing.log", 150, 3) == expected
    assert sizes == []


@pytest.mark.parametrize("whole_max", [files.READ_FILE_WHOLE_MAX_BYTES, 0])
def test_past_the_end_and_empty_files_answer_the_same_either_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, whole_max: int
) -> None:
    monkeypatch.setattr(files, "READ_FILE_WHOLE_MAX_BYTES", whole_max)
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    assert read_text_file(empty, "empty.txt", 5) == "[empty.txt is empty]"
    short = tmp_path / "short.txt"
    short.write_bytes(b"one\ntwo")
    with pytest.raises(ToolError, match=r"offset 2 is past the end of short\.txt, which has 2"):
        read_text_file(short, "short.txt", 2)
    assert read_text_file(short, "short.txt") == "1\tone\n2\ttwo"


@pytest.mark.parametrize(
    "line",
    [
        b"x" * READ_FILE_MAX_LINE_CHARS,
        b"x" * (READ_FILE_MAX_LINE_CHARS + 1),
        b"x" * (READ_FILE_MAX_LINE_CHARS + 1) + b"\r",
        "😀".encode() * (READ_FILE_LINE_READ_BYTES // 4),
        "😀".encode() * (READ_FILE_LINE_READ_BYTES // 4) + b"x",
        # Over the bytes a line is read with, yet no more characters than shown whole
        # once its CR goes: only the byte bound sees that it was cut.
        "😀".encode() * (READ_FILE_LINE_READ_BYTES // 4) + b"\r",
        b"text\r\r",  # one CR goes with the line end, the other is the line's
    ],
    ids=[
        "max-chars",
        "one-char-over",
        "one-char-over-crlf",
        "max-bytes",
        "one-byte-over",
        "max-bytes-crlf",
        "two-crs",
    ],
)
def test_lines_at_the_cut_limits_and_odd_ends_read_the_same_either_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: bytes
) -> None:
    path = tmp_path / "long.txt"
    path.write_bytes(b"first\n" + line + b"\nlast\n")
    whole = read_text_file(path, "long.txt")
    monkeypatch.setattr(files, "READ_FILE_WHOLE_MAX_BYTES", 0)
    assert read_text_file(path, "long.txt") == whole
