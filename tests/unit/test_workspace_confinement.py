"""Every file tool stays inside the workspace, whatever path form the model tries."""

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.prebuilt import ToolNode

from agentgraph.capabilities.tools import build_tools, format_tool_error
from agentgraph.capabilities.tools.base import ToolError
from agentgraph.capabilities.tools.workspace import (
    PATH_MAX_CHARS,
    display_path,
    resolve_in_workspace,
    resolve_readable,
)
from agentgraph.config import Settings
from agentgraph.runtime.runctx import RunContext
from agentgraph.runtime.state import AppState

SECRET_TEXT = "TOPSECRET-outside-content"


def run_calls(
    tools: list[Any], workspace: Path, calls: list[tuple[str, dict[str, Any]]], **extra: Any
) -> list[ToolMessage]:
    """Execute tool calls through a real ToolNode inside a one-node graph."""
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
    state = {k: v for k, v in extra.items() if k != "artifacts_dir"}
    context = RunContext(workspace_path=str(workspace), artifacts_dir=extra.get("artifacts_dir"))
    out = graph.compile().invoke({"messages": [message], **state}, context=context)
    results = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    by_id = {m.tool_call_id: m for m in results}
    return [by_id[f"call-{i}"] for i in range(len(calls))]


def _snapshot(root: Path) -> dict[str, bytes | str]:
    """Every entry under root with its content (files) or link target."""
    found: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            full = Path(dirpath) / name
            rel = str(full.relative_to(root))
            if full.is_symlink():
                found[rel] = "link:" + os.readlink(full)
            elif full.is_file():
                found[rel] = full.read_bytes()
            else:
                found[rel] = "dir"
    return found


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    workspace = tmp_path / "ws"
    outside = tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text(f"{SECRET_TEXT}\n")
    (workspace / "inside.txt").write_text("inside SECRET\n")
    (workspace / "sub").mkdir()
    (workspace / "link").symlink_to(outside, target_is_directory=True)
    (workspace / "linkfile").symlink_to(outside / "secret.txt")
    (workspace / "sub" / "up").symlink_to("../../outside")
    (workspace / "dangling").symlink_to(outside / "not-yet.txt")
    return workspace, outside


ESCAPES = [
    "../outside/secret.txt",
    "sub/../../outside/secret.txt",
    "./../outside/secret.txt",
    "~",
    "~/secret.txt",
    "~root/.bashrc",
    "link/secret.txt",
    "link/new.txt",
    "link",
    "linkfile",
    "dangling",
    "sub/up/secret.txt",
    "sub/up/newdir/new.txt",
    "inside.txt\x00.png",
    "a" * (PATH_MAX_CHARS + 1),
    "x" * 300 + "/f.txt",
    "",
    "   ",
    "/etc/passwd",
]


def _calls_for(path: str, outside_abs: str) -> list[tuple[str, dict[str, Any]]]:
    calls: list[tuple[str, dict[str, Any]]] = []
    for candidate in (path, outside_abs):
        calls += [
            ("read_file", {"path": candidate}),
            ("write_file", {"path": candidate, "content": "PWNED"}),
            ("edit_file", {"path": candidate, "old_string": "TOPSECRET", "new_string": "PWNED"}),
            ("list_dir", {"path": candidate}),
            ("glob", {"pattern": "*", "path": candidate}),
            ("grep", {"pattern": "SECRET", "path": candidate}),
        ]
    return calls


@pytest.mark.parametrize("escape", ESCAPES, ids=lambda p: repr(p)[:40])
def test_every_file_tool_refuses_every_escape(
    layout: tuple[Path, Path], tmp_path: Path, escape: str
) -> None:
    workspace, outside = layout
    tools = build_tools(Settings(AGENTGRAPH_HOME=str(tmp_path / "home"), _env_file=None))
    before_outside = _snapshot(outside)
    before_tmp = sorted(p.name for p in tmp_path.iterdir())
    calls = _calls_for(escape, str(outside / "secret.txt"))
    results = run_calls(tools, workspace, calls)
    for (name, args), result in zip(calls, results, strict=True):
        assert result.status == "error", (name, args["path"][:60], result.content)
        assert SECRET_TEXT not in str(result.content)
        assert str(result.content).startswith("Error: ")
        assert "\n" not in str(result.content), "error messages are one line"
    assert _snapshot(outside) == before_outside
    assert sorted(p.name for p in tmp_path.iterdir()) == before_tmp


def test_escaping_glob_patterns_are_refused(layout: tuple[Path, Path], tmp_path: Path) -> None:
    workspace, _ = layout
    tools = build_tools(Settings(AGENTGRAPH_HOME=str(tmp_path / "home"), _env_file=None))
    calls: list[tuple[str, dict[str, Any]]] = [
        ("glob", {"pattern": "../outside/*"}),
        ("glob", {"pattern": "sub/../../*"}),
        ("glob", {"pattern": "/etc/*"}),
        ("glob", {"pattern": "~/*"}),
        ("grep", {"pattern": "SECRET", "glob": "../outside/*"}),
        ("grep", {"pattern": "SECRET", "glob": "/tmp/*"}),
    ]
    for result in run_calls(tools, workspace, calls):
        assert result.status == "error", result.content


def test_recursive_search_does_not_follow_symlinks_out(
    layout: tuple[Path, Path], tmp_path: Path
) -> None:
    workspace, _ = layout
    tools = build_tools(Settings(AGENTGRAPH_HOME=str(tmp_path / "home"), _env_file=None))
    glob_result, grep_result = run_calls(
        tools,
        workspace,
        [("glob", {"pattern": "**/*.txt"}), ("grep", {"pattern": "SECRET"})],
    )
    assert glob_result.content == "inside.txt"
    assert grep_result.content == "inside.txt:1: inside SECRET"


def test_inside_paths_are_allowed(layout: tuple[Path, Path]) -> None:
    workspace, _ = layout
    real_ws = workspace.resolve()
    assert resolve_in_workspace(workspace, "inside.txt") == real_ws / "inside.txt"
    assert resolve_in_workspace(workspace, str(workspace / "inside.txt")) == real_ws / "inside.txt"
    assert resolve_in_workspace(workspace, "sub/../inside.txt") == real_ws / "inside.txt"
    assert resolve_in_workspace(workspace, ".") == real_ws
    assert resolve_in_workspace(workspace, "new/dir/f.txt") == real_ws / "new/dir/f.txt"
    (workspace / "alias").symlink_to("sub", target_is_directory=True)
    assert resolve_in_workspace(workspace, "alias/new.txt") == real_ws / "sub" / "new.txt"


def test_workspace_reached_through_a_symlink(tmp_path: Path) -> None:
    real_ws = tmp_path / "real"
    real_ws.mkdir()
    (real_ws / "f.txt").write_text("x")
    alias = tmp_path / "alias"
    alias.symlink_to(real_ws, target_is_directory=True)
    assert resolve_in_workspace(alias, str(alias / "f.txt")) == real_ws.resolve() / "f.txt"
    assert resolve_in_workspace(alias, str(real_ws / "f.txt")) == real_ws.resolve() / "f.txt"
    assert display_path(alias, real_ws / "f.txt") == "f.txt"


def test_must_exist_and_error_wording(layout: tuple[Path, Path]) -> None:
    workspace, _ = layout
    with pytest.raises(ToolError, match="no such file"):
        resolve_in_workspace(workspace, "missing.txt", must_exist=True)
    with pytest.raises(ToolError, match=r"'\.\.'"):
        resolve_in_workspace(workspace, "../outside/secret.txt")
    with pytest.raises(ToolError, match="symlink"):
        resolve_in_workspace(workspace, "link/secret.txt")
    with pytest.raises(ToolError, match="outside the workspace"):
        resolve_in_workspace(workspace, "/etc/passwd")
    with pytest.raises(ToolError, match="NUL"):
        resolve_in_workspace(workspace, "a\x00b")
    with pytest.raises(ToolError, match="255 bytes"):
        resolve_in_workspace(workspace, "é" * 128)
    with pytest.raises(ToolError, match="'~'"):
        resolve_in_workspace(workspace, "~/x")


def test_symlink_loop_is_an_error_not_a_crash(layout: tuple[Path, Path], tmp_path: Path) -> None:
    workspace, _ = layout
    (workspace / "loop").symlink_to("loop")
    tools = build_tools(Settings(AGENTGRAPH_HOME=str(tmp_path / "home"), _env_file=None))
    results = run_calls(
        tools,
        workspace,
        [
            ("read_file", {"path": "loop"}),
            ("write_file", {"path": "loop", "content": "x"}),
            ("edit_file", {"path": "loop", "old_string": "a", "new_string": "b"}),
        ],
    )
    assert [r.status for r in results] == ["error", "error", "error"]
    assert (workspace / "loop").is_symlink()


def test_display_path(tmp_path: Path) -> None:
    assert display_path(tmp_path, tmp_path / "a" / "b.txt") == "a/b.txt"
    assert display_path(tmp_path, tmp_path) == "."
    assert display_path(tmp_path / "a", tmp_path / "b.txt") == str(tmp_path / "b.txt")


def test_artifacts_dir_is_readable_but_not_writable(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    artifacts = tmp_path / "artifacts"
    workspace.mkdir()
    artifacts.mkdir()
    saved = artifacts / "call-1.txt"
    saved.write_text("".join(f"out {i}\n" for i in range(3000)))
    tools = build_tools(Settings(AGENTGRAPH_HOME=str(tmp_path / "home"), _env_file=None))
    calls: list[tuple[str, dict[str, Any]]] = [
        ("read_file", {"path": str(saved), "offset": 2000}),
        ("read_file", {"path": "../artifacts/call-1.txt"}),
        ("write_file", {"path": str(artifacts / "x.txt"), "content": "x"}),
        ("edit_file", {"path": str(saved), "old_string": "out 1\n", "new_string": "y"}),
        ("grep", {"pattern": "out", "path": str(artifacts)}),
    ]
    read_ok, read_relative, write, edit, grep = run_calls(
        tools, workspace, calls, artifacts_dir=str(artifacts)
    )
    assert read_ok.status == "success"
    assert "2001\tout 2000" in str(read_ok.content)
    assert "showing lines 2001-3000 of 3000" in str(read_ok.content)
    for refused in (read_relative, write, edit, grep):
        assert refused.status == "error", refused.content
    assert not (artifacts / "x.txt").exists()
    # Without artifacts_dir in the state the same absolute path is refused.
    (without,) = run_calls(tools, workspace, [("read_file", {"path": str(saved)})])
    assert without.status == "error"


def test_resolve_readable_rejects_symlink_escaping_artifacts(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    artifacts = tmp_path / "artifacts"
    workspace.mkdir()
    artifacts.mkdir()
    (artifacts / "leak").symlink_to("/etc/passwd")
    with pytest.raises(ToolError):
        resolve_readable(workspace, str(artifacts / "leak"), artifacts_dir=artifacts)


_SEGMENTS = st.sampled_from(["..", ".", "a", "sub", "link", "up", "", "~", "x\x00", "/"])


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(_SEGMENTS, min_size=1, max_size=8), absolute=st.booleans())
def test_resolution_never_leaves_the_workspace(
    layout: tuple[Path, Path], parts: list[str], absolute: bool
) -> None:
    workspace, _ = layout
    path = "/".join(parts)
    if absolute:
        path = str(workspace) + "/" + path
    root = str(workspace.resolve())
    try:
        resolved = resolve_in_workspace(workspace, path)
    except ToolError:
        return
    assert str(resolved) == root or str(resolved).startswith(root + os.sep)
    assert os.path.realpath(resolved) == str(resolved)


def test_missing_run_context_is_a_programming_error(tmp_path: Path) -> None:
    tools = build_tools(Settings(AGENTGRAPH_HOME=str(tmp_path / "home"), _env_file=None))
    graph = StateGraph(AppState, context_schema=RunContext)
    graph.add_node("tools", ToolNode(tools, handle_tool_errors=format_tool_error))
    graph.add_edge(START, "tools")
    graph.add_edge("tools", END)
    message = AIMessage(content="", tool_calls=[{"name": "list_dir", "args": {}, "id": "call-0"}])
    with pytest.raises(RuntimeError, match="workspace_path"):
        graph.compile().invoke({"messages": [message]})
