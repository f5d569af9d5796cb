"""read_file, write_file, edit_file, list_dir, glob, grep, todos, now and build_tools."""

import json
import os
import re
import stat
import subprocess
import sys
import tracemalloc
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode

from agentgraph.capabilities.tools import (
    FILE_PATH_ARGS,
    TOOLS_THAT_MODIFY_FILES,
    build_tools,
    format_tool_error,
)
from agentgraph.capabilities.tools.base import ToolError
from agentgraph.capabilities.tools.clock import format_now
from agentgraph.capabilities.tools.files import (
    GLOB_MAX_RESULTS,
    GREP_MAX_MATCHES,
    LIST_DIR_MAX_ENTRIES,
    READ_FILE_MAX_LINE_CHARS,
    READ_FILE_MAX_LINES,
    compile_glob,
    edit_report_line,
    human_size,
)
from agentgraph.capabilities.tools.search import (
    GREP_TIMEOUT_S,
    SEARCH_PATTERN_MAX_CHARS,
    SearchBudget,
    SearchCancelled,
    cancel_running_searches,
)
from agentgraph.capabilities.tools.todos import format_todos, validate_todos
from agentgraph.config import Settings
from agentgraph.persistence import open_store
from agentgraph.runtime.runctx import RunContext
from agentgraph.runtime.state import AppState
from agentgraph.session.agent import Agent
from tests.fakes.chat_model import ScriptedChatModel

MIB = 1024 * 1024
READ_HUGE_FILE_MAX_PEAK_BYTES = 8 * MIB


def invoke(
    workspace: Path, calls: list[tuple[str, dict[str, Any]]], **state: Any
) -> tuple[list[ToolMessage], dict[str, Any]]:
    """Run tool calls through a real ToolNode in a one-node graph; results in call order."""
    tools = build_tools(Settings(AGENTGRAPH_HOME=str(workspace / ".home"), _env_file=None))
    graph = StateGraph(AppState, context_schema=RunContext)
    graph.add_node("tools", ToolNode(tools, handle_tool_errors=format_tool_error))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    message = AIMessage(
        content="",
        tool_calls=[
            {"name": name, "args": args, "id": f"call-{i}"} for i, (name, args) in enumerate(calls)
        ],
    )
    artifacts = state.pop("artifacts_dir", None)
    context = RunContext(workspace_path=str(workspace), artifacts_dir=artifacts)
    out = graph.compile().invoke({"messages": [message], **state}, context=context)
    by_id = {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}
    return [by_id[f"call-{i}"] for i in range(len(calls))], out


def call(workspace: Path, name: str, **args: Any) -> ToolMessage:
    (result,), _ = invoke(workspace, [(name, args)])
    return result


def text(message: ToolMessage) -> str:
    assert isinstance(message.content, str)
    return message.content


# --------------------------------------------------------------------------- build_tools


def test_build_tools_names_and_contract_constants(tmp_path: Path) -> None:
    on = build_tools(Settings(AGENTGRAPH_HOME=str(tmp_path), _env_file=None))
    off = build_tools(
        Settings(AGENTGRAPH_HOME=str(tmp_path), AGENTGRAPH_BASH="off", _env_file=None)
    )
    expected = [
        "read_file",
        "write_file",
        "edit_file",
        "list_dir",
        "glob",
        "grep",
        "run_bash",
        "todo_write",
        "todo_read",
        "now",
    ]
    assert [t.name for t in on] == expected
    assert [t.name for t in off] == [n for n in expected if n != "run_bash"]
    assert frozenset({"write_file", "edit_file", "run_bash"}) == TOOLS_THAT_MODIFY_FILES
    assert FILE_PATH_ARGS == {"read_file": "path", "write_file": "path", "edit_file": "path"}
    for tool in on:
        schema = tool.tool_call_schema.model_json_schema()
        assert "runtime" not in schema.get("properties", {}), tool.name
        assert tool.description
    for name, arg in FILE_PATH_ARGS.items():
        tool = next(t for t in on if t.name == name)
        assert arg in tool.tool_call_schema.model_json_schema()["properties"]


def test_argument_validation_error_goes_back_without_echoing_arguments(tmp_path: Path) -> None:
    result = call(tmp_path, "write_file", path="a.txt")
    assert result.status == "error"
    assert "content" in text(result)
    big = "Z" * 10_000
    result = call(tmp_path, "read_file", path=big[:10], offset="not-a-number")
    assert result.status == "error"
    assert "offset" in text(result)


# --------------------------------------------------------------------------- read_file


def test_read_file_numbers_each_line(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("first\n\tsecond\r\nthird")
    assert text(call(tmp_path, "read_file", path="a.py")) == "1\tfirst\n2\t\tsecond\n3\tthird"


def test_read_file_pages_with_offset_and_limit(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("".join(f"line {i}\n" for i in range(1, 9001)))
    first, middle, last, past = invoke(
        tmp_path,
        [
            ("read_file", {"path": "big.txt"}),
            ("read_file", {"path": "big.txt", "offset": 4000, "limit": 3}),
            ("read_file", {"path": "big.txt", "offset": 8999, "limit": 50}),
            ("read_file", {"path": "big.txt", "offset": 9000}),
        ],
    )[0]
    lines = text(first).split("\n")
    assert len(lines) == READ_FILE_MAX_LINES + 1
    assert lines[0] == "1\tline 1"
    assert lines[-2] == "2000\tline 2000"
    assert lines[-1] == (
        "[showing lines 1-2000 of 9000; call read_file with offset=2000 to continue]"
    )
    assert text(middle).split("\n") == [
        "4001\tline 4001",
        "4002\tline 4002",
        "4003\tline 4003",
        "[showing lines 4001-4003 of 9000; call read_file with offset=4003 to continue]",
    ]
    assert text(last) == "9000\tline 9000\n[showing lines 9000-9000 of 9000; end of file]"
    assert past.status == "error"
    assert "past the end" in text(past) and "9000 lines" in text(past)


def test_read_file_paging_without_a_final_newline(tmp_path: Path) -> None:
    (tmp_path / "n.txt").write_text("a\nb\nc")
    third, past = invoke(
        tmp_path,
        [
            ("read_file", {"path": "n.txt", "offset": 2}),
            ("read_file", {"path": "n.txt", "offset": 3}),
        ],
    )[0]
    assert text(third) == "3\tc\n[showing lines 3-3 of 3; end of file]"
    assert past.status == "error" and "3 lines" in text(past)


def test_read_file_caps_limit_and_rejects_bad_numbers(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("x\n" * 5000)
    capped, negative, zero = invoke(
        tmp_path,
        [
            ("read_file", {"path": "big.txt", "limit": 4000}),
            ("read_file", {"path": "big.txt", "offset": -1}),
            ("read_file", {"path": "big.txt", "limit": 0}),
        ],
    )[0]
    assert "showing lines 1-2000 of 5000" in text(capped)
    assert negative.status == "error" and zero.status == "error"


def test_read_file_cuts_long_lines(tmp_path: Path) -> None:
    (tmp_path / "min.js").write_text("a" * 50_000 + "\nshort\n" + "é" * 3000 + "\n")
    lines = text(call(tmp_path, "read_file", path="min.js")).split("\n")
    assert lines[0].startswith("1\t" + "a" * READ_FILE_MAX_LINE_CHARS + " … [line cut")
    assert "50000 bytes in full" in lines[0]
    assert lines[1] == "2\tshort"
    assert lines[2].startswith("3\t" + "é" * READ_FILE_MAX_LINE_CHARS + " …")
    assert "6000 bytes in full" in lines[2]


def test_read_file_refuses_binary_with_size_and_type(tmp_path: Path) -> None:
    (tmp_path / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 3000)
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 cr\xe8me\n".encode("latin-1"))
    (tmp_path / "blob.bin").write_bytes(b"abc\x00def")
    png, latin1, blob = invoke(
        tmp_path,
        [
            ("read_file", {"path": "img.png"}),
            ("read_file", {"path": "latin1.txt"}),
            ("read_file", {"path": "blob.bin"}),
        ],
    )[0]
    assert png.status == "error"
    assert "PNG image" in text(png) and "2.9 KiB" in text(png)
    assert latin1.status == "error" and "UTF-8" in text(latin1) and "11 B" in text(latin1)
    assert blob.status == "error" and "binary" in text(blob)


def test_read_file_utf8_split_across_the_sniff_boundary_is_text(tmp_path: Path) -> None:
    content = ("a" * 99 + "\n") * 81 + "b" * 91 + "é\n"  # é straddles byte 8192
    (tmp_path / "edge.txt").write_text(content)
    result = call(tmp_path, "read_file", path="edge.txt")
    assert result.status == "success"
    assert text(result).endswith("82\t" + "b" * 91 + "é")


def test_read_file_streams_a_huge_file(tmp_path: Path) -> None:
    line = "0123456789" * 9 + "\n"
    with open(tmp_path / "huge.log", "w") as handle:
        for _ in range(40):
            handle.write(line * 10_000)  # 40 MB in total
    tracemalloc.start()
    try:
        result = call(tmp_path, "read_file", path="huge.log", offset=200_000, limit=2)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert text(result).split("\n") == [
        f"200001\t{line.strip()}",
        f"200002\t{line.strip()}",
        "[showing lines 200001-200002 of 400000; call read_file with offset=200002 to continue]",
    ]
    assert peak < READ_HUGE_FILE_MAX_PEAK_BYTES


def test_read_file_refuses_directories_fifos_and_missing(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "empty.txt").write_text("")
    directory, fifo, missing, empty = invoke(
        tmp_path,
        [
            ("read_file", {"path": "d"}),
            ("read_file", {"path": "pipe"}),
            ("read_file", {"path": "nope.txt"}),
            ("read_file", {"path": "empty.txt"}),
        ],
    )[0]
    assert directory.status == "error" and "directory" in text(directory)
    assert fifo.status == "error" and "not a regular file" in text(fifo)
    assert missing.status == "error" and "no such file" in text(missing)
    assert empty.status == "success" and "empty" in text(empty)


def test_a_missing_path_names_the_files_of_that_name_in_the_workspace(tmp_path: Path) -> None:
    (tmp_path / "inventory.py").write_text("class Inventory: ...\n")
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "sub" / "inventory.py").write_text("")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "inventory.py").write_text("")  # never suggested
    guessed, edit, elsewhere = invoke(
        tmp_path,
        [
            ("read_file", {"path": "src/inventory.py"}),
            ("edit_file", {"path": "src/inventory.py", "old_string": "a", "new_string": "b"}),
            ("read_file", {"path": "src/missing.py"}),
        ],
    )[0]
    for result in (guessed, edit):
        assert result.status == "error", text(result)
        assert text(result).endswith(
            "files named 'inventory.py' in the workspace: inventory.py, pkg/sub/inventory.py"
        ), text(result)
    assert text(elsewhere).endswith("no such file or directory: 'src/missing.py'")


def test_the_workspace_path_without_its_leading_slash_means_the_workspace(tmp_path: Path) -> None:
    # Qwen2.5-Coder 1.5B wrote edit_file(path="work/trial5/ws/app.py") for the workspace
    # /work/trial5/ws: its absolute path with the leading "/" lost.
    (tmp_path / "app.py").write_text("total = price * qty\n")
    slashless = str(tmp_path.resolve()).lstrip("/")
    # The read in a step of its own: the calls of one step run together.
    (read,) = invoke(tmp_path, [("read_file", {"path": f"{slashless}/app.py"})])[0]
    edit, new = invoke(
        tmp_path,
        [
            (
                "edit_file",
                {"path": f"{slashless}/app.py", "old_string": "qty", "new_string": "int(qty)"},
            ),
            ("write_file", {"path": f"{slashless}/new.py", "content": "x = 1\n"}),
        ],
    )[0]
    assert read.status == "success" and "price * qty" in text(read), text(read)
    assert edit.status == "success", text(edit)
    assert (tmp_path / "app.py").read_text() == "total = price * int(qty)\n"
    assert new.status == "success" and (tmp_path / "new.py").read_text() == "x = 1\n"
    assert not (tmp_path / slashless.split("/")[0]).exists()
    # A path that, read as absolute, lies outside the workspace stays relative to it.
    (outside,) = invoke(tmp_path, [("write_file", {"path": "etc/hosts", "content": "x\n"})])[0]
    assert outside.status == "success" and (tmp_path / "etc" / "hosts").read_text() == "x\n"


def test_an_edit_through_a_linked_workspace_shows_its_diff(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "app.py").write_text("qty = item['qty']\n")
    link = tmp_path / "link"
    link.symlink_to(real)
    tools = build_tools(Settings(AGENTGRAPH_HOME=str(tmp_path / ".home"), _env_file=None))
    graph = StateGraph(AppState, context_schema=RunContext)
    graph.add_node("tools", ToolNode(tools, handle_tool_errors=format_tool_error))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    # The linked spelling, without its leading slash, as a small model writes it.
    path = str(link / "app.py").lstrip("/")
    args = {"path": path, "old_string": "item['qty']", "new_string": "int(item['qty'])"}
    message = AIMessage("", tool_calls=[{"name": "edit_file", "args": args, "id": "c1"}])
    events = list(
        graph.compile().stream(
            {"messages": [message]},
            context=RunContext(workspace_path=str(link)),
            stream_mode="custom",
        )
    )
    assert (real / "app.py").read_text() == "qty = int(item['qty'])\n"
    (diff,) = [e for e in events if e.get("type") == "diff"]
    assert diff["path"] == "app.py", diff
    assert "-qty = item['qty']" in diff["diff"] and diff["removed"] == 1, diff


def test_a_workspace_folder_named_like_the_path_keeps_its_meaning(tmp_path: Path) -> None:
    slashless = str(tmp_path.resolve()).lstrip("/")
    inner = tmp_path / slashless
    inner.mkdir(parents=True)
    (inner / "app.py").write_text("the inner one\n")
    (tmp_path / "app.py").write_text("the workspace's own\n")
    (read,), _ = invoke(tmp_path, [("read_file", {"path": f"{slashless}/app.py"})])
    assert "the inner one" in text(read), text(read)


def test_a_missing_saved_output_names_no_workspace_files(tmp_path: Path) -> None:
    artifacts = tmp_path / ".home" / "artifacts"
    artifacts.mkdir(parents=True)
    (tmp_path / "tool-1.txt").write_text("a workspace file of that name\n")
    (artifacts / "older").mkdir()
    (artifacts / "older" / "tool-1.txt").write_text("not in the workspace\n")
    missing = str(artifacts / "tool-1.txt")
    (result,), _ = invoke(
        tmp_path, [("read_file", {"path": missing})], artifacts_dir=str(artifacts)
    )
    assert result.status == "error"
    assert text(result).endswith(f"no such file or directory: {missing!r}"), text(result)


# --------------------------------------------------------------------------- write_file


def test_write_file_creates_parents_and_reports(tmp_path: Path) -> None:
    result = call(tmp_path, "write_file", path="a/b/c.py", content="x = 1\ny = 2\n")
    assert text(result) == "created a/b/c.py: 12 bytes, 2 lines"
    assert (tmp_path / "a/b/c.py").read_text() == "x = 1\ny = 2\n"
    again = call(tmp_path, "write_file", path="a/b/c.py", content="é")
    assert text(again) == "overwrote a/b/c.py: 2 bytes, 1 lines"
    assert (tmp_path / "a/b/c.py").read_text() == "é"
    assert sorted(p.name for p in (tmp_path / "a/b").iterdir()) == ["c.py"]


def test_write_file_keeps_mode_and_leaves_no_temp_files(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text("old")
    script.chmod(0o750)
    call(tmp_path, "write_file", path="run.sh", content="#!/bin/sh\n")
    assert stat.S_IMODE(script.stat().st_mode) == 0o750
    assert [p.name for p in tmp_path.iterdir() if p.name != ".home"] == ["run.sh"]


def test_write_file_refuses_git_dir_and_directories(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "pkg").mkdir()
    git, nested_git, directory = invoke(
        tmp_path,
        [
            ("write_file", {"path": ".git/config", "content": "x"}),
            ("write_file", {"path": "sub/.git/hooks/pre-commit", "content": "x"}),
            ("write_file", {"path": "pkg", "content": "x"}),
        ],
    )[0]
    assert git.status == "error" and ".git" in text(git)
    assert nested_git.status == "error"
    assert directory.status == "error"
    assert list((tmp_path / ".git").iterdir()) == []
    assert not (tmp_path / "sub").exists()


# --------------------------------------------------------------------------- edit_file


def test_edit_file_replaces_a_unique_string(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("a = 1\nb = 2\nc = 3\n")
    result = call(tmp_path, "edit_file", path="m.py", old_string="b = 2", new_string="b = 20")
    assert text(result) == "edited m.py: replaced 1 occurrence (first at line 2)"
    assert edit_report_line(text(result)) == 2
    assert edit_report_line("error: `b = 2` not found in m.py (first at line 2) or so") is None
    assert (tmp_path / "m.py").read_text() == "a = 1\nb = 20\nc = 3\n"


def test_edit_file_not_unique_not_found_and_replace_all(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("x = 1\nx = 1\nx = 1\n")
    ambiguous, missing, same, empty = invoke(
        tmp_path,
        [
            ("edit_file", {"path": "m.py", "old_string": "x = 1", "new_string": "y"}),
            ("edit_file", {"path": "m.py", "old_string": "z = 1", "new_string": "y"}),
            ("edit_file", {"path": "m.py", "old_string": "x", "new_string": "x"}),
            ("edit_file", {"path": "m.py", "old_string": "", "new_string": "y"}),
        ],
    )[0]
    assert ambiguous.status == "error"
    assert "3 times" in text(ambiguous) and "replace_all" in text(ambiguous)
    assert missing.status == "error" and "not found" in text(missing)
    assert same.status == "error" and empty.status == "error"
    assert (tmp_path / "m.py").read_text() == "x = 1\nx = 1\nx = 1\n"
    result = call(
        tmp_path, "edit_file", path="m.py", old_string="x = 1", new_string="y", replace_all=True
    )
    assert "replaced 3 occurrences" in text(result)
    assert (tmp_path / "m.py").read_text() == "y\ny\ny\n"


def test_edit_file_names_line_numbers_copied_from_read_file(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("def f():\n    return 1\n")
    numbered = text(call(tmp_path, "read_file", path="m.py"))
    padded = "     1\tdef f():\n     2\t    return 1"  # cat -n's column, as models also write
    results = invoke(
        tmp_path,
        [
            ("edit_file", {"path": "m.py", "old_string": numbered, "new_string": "x"}),
            ("edit_file", {"path": "m.py", "old_string": padded, "new_string": "x"}),
            ("edit_file", {"path": "m.py", "old_string": "9\tnot there", "new_string": "x"}),
        ],
    )[0]
    assert [r.status for r in results] == ["error", "error", "error"]
    assert "line numbers" in text(results[0]) and "line numbers" in text(results[1])
    assert "line numbers" not in text(results[2])  # stripped, it is still not in the file
    assert (tmp_path / "m.py").read_text() == "def f():\n    return 1\n"


def test_edit_file_matches_lf_text_in_a_crlf_file(tmp_path: Path) -> None:
    (tmp_path / "w.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    result = call(tmp_path, "edit_file", path="w.txt", old_string="one\ntwo", new_string="1\n2")
    assert result.status == "success"
    assert (tmp_path / "w.txt").read_bytes() == b"1\r\n2\r\nthree\r\n"


def test_edit_file_refuses_binary_and_missing(tmp_path: Path) -> None:
    (tmp_path / "b.bin").write_bytes(b"\x00\x01abc")
    binary, missing = invoke(
        tmp_path,
        [
            ("edit_file", {"path": "b.bin", "old_string": "abc", "new_string": "x"}),
            ("edit_file", {"path": "no.py", "old_string": "abc", "new_string": "x"}),
        ],
    )[0]
    assert binary.status == "error" and "not a text file" in text(binary)
    assert missing.status == "error"
    assert not (tmp_path / "no.py").exists()


# --------------------------------------------------------------------------- list_dir


def test_list_dir_dirs_first_with_sizes(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "zdir").mkdir(parents=True)
    (ws / "adir").mkdir()
    (ws / "b.txt").write_text("x" * 2048)
    (ws / "a.txt").write_text("hi")
    (ws / "ln").symlink_to("a.txt")
    assert text(call(ws, "list_dir")).split("\n") == [
        "./ (2 directories, 3 other entries)",
        "dir   adir/",
        "dir   zdir/",
        "file  a.txt  (2 B)",
        "file  b.txt  (2.0 KiB)",
        "link  ln -> a.txt",
    ]
    assert text(call(ws, "list_dir", path="adir")) == "adir/ is empty"
    assert call(ws, "list_dir", path="a.txt").status == "error"


def test_list_dir_caps_entries(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    for i in range(LIST_DIR_MAX_ENTRIES + 37):
        (ws / f"f{i:04}").write_text("")
    lines = text(call(ws, "list_dir")).split("\n")
    assert len(lines) == 1 + LIST_DIR_MAX_ENTRIES + 1
    assert lines[-1] == "… and 37 more entries not shown"


# --------------------------------------------------------------------------- glob


def _touch(path: Path, mtime: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("x")
    os.utime(path, (mtime, mtime))


def test_glob_sorts_by_mtime_and_skips_heavy_dirs(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    _touch(ws / "old.py", 1_000)
    _touch(ws / "src/new.py", 3_000)
    _touch(ws / "src/deep/mid.py", 2_000)
    _touch(ws / "src/readme.md", 4_000)
    for skipped in (".git", "node_modules", ".venv", "__pycache__"):
        _touch(ws / skipped / "x.py", 5_000)
    assert text(call(ws, "glob", pattern="**/*.py")).split("\n") == [
        "src/new.py",
        "src/deep/mid.py",
        "old.py",
    ]
    assert text(call(ws, "glob", pattern="*.py")) == "old.py"
    assert text(call(ws, "glob", pattern="*.py", path="src")) == "src/new.py"
    assert text(call(ws, "glob", pattern="src/*.{py,md}")).split("\n") == [
        "src/readme.md",
        "src/new.py",
    ]
    no_match = text(call(ws, "glob", pattern="*.rs"))
    assert "no files match" in no_match and "**/*.rs" in no_match


def test_glob_caps_results(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    for i in range(GLOB_MAX_RESULTS + 5):
        _touch(ws / f"d{i % 7}" / f"f{i}.txt", 10_000 + i)
    lines = text(call(ws, "glob", pattern="**/*.txt")).split("\n")
    assert len(lines) == GLOB_MAX_RESULTS + 1
    assert lines[0].endswith(f"f{GLOB_MAX_RESULTS + 4}.txt")
    assert lines[-1].startswith("… 5 more matches not shown")


def test_compile_glob_semantics() -> None:
    assert compile_glob("**/*.py").fullmatch("a.py")
    assert compile_glob("**/*.py").fullmatch("a/b/c.py")
    assert not compile_glob("*.py").fullmatch("a/b.py")
    assert compile_glob("a/**").fullmatch("a/b/c")
    assert compile_glob("f?.[ch]").fullmatch("f1.c")
    assert not compile_glob("f[!0-9].c").fullmatch("f1.c")
    assert compile_glob("*.{ts,tsx}").fullmatch("x.tsx")
    assert compile_glob("a+b(c).txt").fullmatch("a+b(c).txt")
    for bad in ("", "../x", "/abs/*", "~/x"):
        with pytest.raises(ToolError):
            compile_glob(bad)


# --------------------------------------------------------------------------- grep


def test_grep_output_filters_and_case(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src/a.py").write_text("import os\nTODO: fix\n")
    (ws / "src/b.txt").write_text("todo later\n")
    (ws / "node_modules").mkdir()
    (ws / "node_modules/m.js").write_text("TODO in deps\n")
    (ws / "bin.dat").write_bytes(b"TODO\x00binary")
    assert text(call(ws, "grep", pattern="TODO")) == "src/a.py:2: TODO: fix"
    assert text(call(ws, "grep", pattern="todo", ignore_case=True)).split("\n") == [
        "src/a.py:2: TODO: fix",
        "src/b.txt:1: todo later",
    ]
    assert text(call(ws, "grep", pattern="todo", ignore_case=True, glob="*.txt")) == (
        "src/b.txt:1: todo later"
    )
    assert text(call(ws, "grep", pattern="o", glob="src/*.py", path=".")).startswith("src/a.py:1:")
    assert text(call(ws, "grep", pattern="import", path="src/a.py")) == "src/a.py:1: import os"
    assert "no matches" in text(call(ws, "grep", pattern="zzz"))


def test_grep_invalid_regex_is_a_tool_error(tmp_path: Path) -> None:
    result = call(tmp_path, "grep", pattern="foo(")
    assert result.status == "error"
    assert "invalid regular expression" in text(result)


def test_grep_caps_matches_and_counts_the_rest(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "many.txt").write_text("hit\n" * (GREP_MAX_MATCHES + 50))
    lines = text(call(ws, "grep", pattern="hit")).split("\n")
    assert len(lines) == GREP_MAX_MATCHES + 1
    assert lines[GREP_MAX_MATCHES - 1] == f"many.txt:{GREP_MAX_MATCHES}: hit"
    assert re.match(r"… 50 more matches not shown", lines[-1])


# --------------------------------------------------------------------------- todos & clock


def test_todo_write_returns_a_command_updating_state(tmp_path: Path) -> None:
    todos = [
        {"content": "write tests", "status": "done"},
        {"content": "implement", "status": "in_progress"},
        {"content": "document", "status": "pending"},
    ]
    (result,), state = invoke(tmp_path, [("todo_write", {"todos": todos})])
    assert state["todos"] == todos
    assert result.tool_call_id == "call-0"
    assert text(result).split("\n") == [
        "3 todos: 1 done, 1 in progress, 1 pending",
        "1. [x] write tests",
        "2. [~] implement",
        "3. [ ] document",
    ]
    (read,), _ = invoke(tmp_path, [("todo_read", {})], todos=todos)
    assert text(read) == text(result)


def test_todo_write_validation(tmp_path: Path) -> None:
    two_active = [
        {"content": "a", "status": "in_progress"},
        {"content": "b", "status": "in_progress"},
    ]
    (active, bad_status, blank), state = invoke(
        tmp_path,
        [
            ("todo_write", {"todos": two_active}),
            ("todo_write", {"todos": [{"content": "a", "status": "finished"}]}),
            ("todo_write", {"todos": [{"content": "  ", "status": "pending"}]}),
        ],
    )
    assert active.status == "error" and "in_progress" in text(active)
    assert bad_status.status == "error" and "status" in text(bad_status)
    assert blank.status == "error"
    assert not state.get("todos")
    with pytest.raises(ToolError, match="one of"):
        validate_todos([{"content": "a", "status": "completed"}])
    assert format_todos([]) == "the todo list is empty"


def test_now_is_iso_with_zone_and_weekday(tmp_path: Path) -> None:
    result = text(call(tmp_path, "now"))
    moment = datetime.fromisoformat(result.split(" ")[0])
    assert moment.tzinfo is not None
    assert result.split(" ")[1].strip("(,)") == moment.strftime("%A")
    fixed = datetime(2025, 3, 4, 9, 15, tzinfo=timezone(timedelta(hours=1)))
    assert format_now(fixed) == "2025-03-04T09:15:00+01:00 (Tuesday)"
    assert (
        format_now(datetime(2025, 3, 4, tzinfo=UTC)) == "2025-03-04T00:00:00+00:00 (Tuesday, UTC)"
    )


def test_human_size() -> None:
    assert human_size(0) == "0 B"
    assert human_size(1536) == "1.5 KiB"
    assert human_size(3 * MIB) == "3.0 MiB"
    assert human_size(5 * 1024 * MIB) == "5.0 GiB"


# --------------------------------------------------------------------------- bounded search

# A hang guard, not a timing assertion: on a backtracking engine these searches run
# for hours inside one C call that no signal interrupts, so they run in a child
# process that is killed after this long; RE2 answers in milliseconds.
HANG_GUARD_S = 120
SEARCH_IN_CHILD = """
import json, sys
from tests.integration.test_tools_files import call, text
from pathlib import Path
message = call(Path(sys.argv[1]), sys.argv[2], **json.loads(sys.argv[3]))
print(json.dumps({"status": message.status, "text": text(message)}))
"""


def _search_in_child(workspace: Path, tool: str, **args: Any) -> dict[str, str]:
    """Run one grep/glob call through a real ToolNode in a child process."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", SEARCH_IN_CHILD, str(workspace), tool, json.dumps(args)],
            capture_output=True,
            text=True,
            timeout=HANG_GUARD_S,
            cwd=Path(__file__).resolve().parents[2],
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{tool} {args} did not return within {HANG_GUARD_S}s (unbounded search)")
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr  # no RE2 log lines on the user's terminal
    result: dict[str, str] = json.loads(done.stdout)
    return result


def test_grep_catastrophic_pattern_is_answered(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "evil.txt").write_text("a" * 40 + "!\n" + "aaaa\n")
    result = _search_in_child(ws, "grep", pattern="(a+)+$")
    assert result == {"status": "success", "text": "evil.txt:2: aaaa"}


def test_glob_catastrophic_pattern_is_answered(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ("a" * 200)).write_text("x")
    (ws / "ab").write_text("x")
    result = _search_in_child(ws, "glob", pattern="*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b")
    assert result["status"] == "success"
    assert result["text"].startswith("no files match")
    result = _search_in_child(ws, "glob", pattern="**/**/**/**/**/**/**/**/**/**/*a*a*a*b")
    assert result["status"] == "success"
    assert result["text"].startswith("no files match")


def test_grep_backreference_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("abab\n")
    for pattern in (r"(ab)\1", r"a(?=b)", r"(?<!x)b"):
        result = call(tmp_path, "grep", pattern=pattern)
        assert result.status == "error"
        assert text(result).startswith(f"Error: unsupported regular expression {pattern!r}")
        assert "RE2" in text(result) and "run_bash" in text(result)
    result = call(tmp_path, "grep", pattern="x" * (SEARCH_PATTERN_MAX_CHARS + 1))
    assert result.status == "error" and "SEARCH_PATTERN_MAX_CHARS" in text(result)


def test_search_budget_names_its_limit_and_stops_on_cancel() -> None:
    limit_re = r"grep stopped after 0s, its time limit \(GREP_TIMEOUT_S\)"
    with pytest.raises(ToolError, match=limit_re):
        SearchBudget("grep", 0.0, "GREP_TIMEOUT_S").check("3 matching lines found before it")
    budget = SearchBudget("grep", GREP_TIMEOUT_S, "GREP_TIMEOUT_S")
    budget.check()
    cancel_running_searches()
    with pytest.raises(SearchCancelled):
        budget.check()
    SearchBudget("grep", GREP_TIMEOUT_S, "GREP_TIMEOUT_S").check()  # later searches run


def test_agent_cancel_stops_running_searches(settings: Settings) -> None:
    budget = SearchBudget("grep", GREP_TIMEOUT_S, "GREP_TIMEOUT_S")
    with open_store(settings) as store:
        Agent(settings, store, model=ScriptedChatModel([])).cancel()  # what Ctrl-C calls
    with pytest.raises(SearchCancelled, match="grep was cancelled"):
        budget.check()


def test_no_tool_of_the_agent_shows_its_runtime_to_the_model(settings: Settings) -> None:
    with open_store(settings) as store:
        agent = Agent(settings, store, model=ScriptedChatModel([]))
        tools = list(agent.deps.tools)
    names = {t.name for t in tools}
    assert {"read_file", "memory_save", "search_history", "load_skill", "todo_write"} <= names
    for tool in tools:
        schema = tool.tool_call_schema.model_json_schema()
        assert "runtime" not in schema.get("properties", {}), tool.name
        assert "runtime" not in schema.get("required", []), tool.name


@pytest.mark.parametrize("tool", ["write", "edit"])
def test_a_folder_swapped_for_a_link_after_the_check_gets_no_write_outside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tool: str
) -> None:
    """A process running beside the agent (a command left in the background) can swap a
    folder on a file's path for a link out of the workspace between the path's check and
    the write: the write went through the link. The folder the file is written into is
    checked again once it is open, and the write refused."""
    from agentgraph.capabilities.tools import files

    workspace, outside = tmp_path / "ws", tmp_path / "outside"
    (workspace / "sub").mkdir(parents=True)
    outside.mkdir()
    (workspace / "sub" / "app.cfg").write_text("mode = a\n")
    (outside / "app.cfg").write_text("mode = a\n")
    checked = files.resolve_in_workspace

    def check_then_swap(*args: Any, **kwargs: Any) -> Path:
        real = checked(*args, **kwargs)
        (workspace / "sub").rename(workspace / "sub.old")
        (workspace / "sub").symlink_to(outside)
        return real

    monkeypatch.setattr(files, "resolve_in_workspace", check_then_swap)
    with pytest.raises(ToolError, match="moved out of the workspace"):
        if tool == "write":
            files.write_text_file(str(workspace), "sub/app.cfg", "mode = b\n")
        else:
            files.edit_text_file(str(workspace), "sub/app.cfg", "mode = a", "mode = b")
    assert (outside / "app.cfg").read_text() == "mode = a\n"
    assert sorted(p.name for p in outside.iterdir()) == ["app.cfg"]
