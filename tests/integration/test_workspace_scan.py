"""Files a step's commands changed, as the workspace shows it, through the real graph.

A stateless model (each reply a function of the request: the next step is the first
whose command its prompt does not show yet) changes files with commands no reading of
their line follows; the real run_bash runs them, with and without the sandbox, and the
session's SQLite checkpoint holds the results the ledger is built from.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage

from agentgraph.capabilities.tools.workspace_scan import (
    WORKSPACE_SCAN_MAX_FILES,
    scanned_changes,
    stat_scan,
)
from agentgraph.config import Settings
from agentgraph.context.ledger import collect_ledger, render_ledger
from agentgraph.persistence import open_store
from agentgraph.session.agent import Agent, TurnResult
from tests.cli_helpers import run_cli, server_env
from tests.fakes.openai_server import FakeOpenAIServer
from tests.mcp_servers.files import PEEK_LOG
from tests.sandbox_helpers import sandbox_mode
from tests.scenarios.long_task import is_summary_request

__all__ = ["sandbox_mode"]  # the fixture, used by name

# One reply per step: the calls it makes (run_bash commands, or a write_file beside one).
STEPS: tuple[tuple[dict[str, Any], ...], ...] = (
    (
        {
            "name": "run_bash",
            "arguments": {"command": "mkdir -p pkg && printf 'X = 1\\n' > pkg/mod.py"},
        },
    ),
    ({"name": "run_bash", "arguments": {"command": "perl -pi -e 's/X = 1/X = 2/' pkg/mod.py"}},),
    (
        {
            "name": "run_bash",
            "arguments": {"command": "mv notes.txt notes.md && cp notes.md copy.md"},
        },
    ),
    (
        {
            "name": "run_bash",
            "arguments": {"command": "python3 -c \"open('gen.txt', 'w').write('g')\"; exit 3"},
        },
    ),
    (
        {"name": "run_bash", "arguments": {"command": "rm -rf build"}},
        {"name": "write_file", "arguments": {"path": "./w.py", "content": "W = 1\n"}},
    ),
    ({"name": "run_bash", "arguments": {"command": "touch node_modules/x/index.js; true"}},),
)


def _sent_commands(body: dict[str, Any]) -> set[str | None]:
    """The commands of the calls a request shows."""
    return {
        json.loads(call["function"]["arguments"]).get("command")
        for message in body["messages"]
        for call in message.get("tool_calls") or []
    }


def _reply(body: dict[str, Any]) -> dict[str, Any]:
    """The first step whose first call the request does not show; then an answer."""
    sent = _sent_commands(body)
    for step in STEPS:
        if step[0]["arguments"]["command"] not in sent:
            return {"tool_calls": list(step)}
    return {"content": "done"}


def _turn(
    make_settings: Callable[..., Settings],
    workspace: Path,
    reply: Callable[[dict[str, Any]], dict[str, Any]],
    sandbox: str,
) -> tuple[TurnResult, list[BaseMessage]]:
    """One turn of the real Agent against ``reply``, answered "done"; its messages."""
    with FakeOpenAIServer([reply], on_exhausted="repeat_last") as server:
        settings = make_settings(
            OPENAI_BASE_URL=server.url,
            OPENAI_API_KEY="sk-test",
            AGENTGRAPH_PROVIDER_MAX_RETRIES="0",
            AGENTGRAPH_SANDBOX=sandbox,
            MAX_LOOPS="20",
        )
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            result = agent.run_turn("scan", "change the files", workspace, lambda _e: None)
            messages = agent.messages("scan")
    assert server.violations == []
    assert result.answer == "done"
    return result, messages


def _lists_build_deleted(ledger: str) -> bool:
    """Whether ``ledger`` lists ``build/a.o`` and ``build/b.o`` as deleted by a command."""
    return "build/ a.o, b.o: deleted by a command" in ledger or (
        "- build/a.o: deleted by a command\n" in ledger
        and "- build/b.o: deleted by a command\n" in ledger
    )


def test_files_commands_changed_are_in_the_ledger_whatever_the_command(
    make_settings: Callable[..., Settings], workspace: Path, sandbox_mode: str
) -> None:
    """``printf >`` after ``mkdir -p &&``, ``perl -pi``, ``mv`` and ``cp``, a script
    that writes a file and then fails, ``rm -rf`` of a folder: each file is created,
    edited or deleted by a command in the ledger; write_file's file in the same step is
    its own; a skipped folder (``node_modules``) and a command that changed nothing
    record nothing."""
    (workspace / "notes.txt").write_text("n\n")
    (workspace / "build").mkdir()
    (workspace / "build" / "a.o").write_bytes(b"\x00")
    (workspace / "build" / "b.o").write_bytes(b"\x00")
    (workspace / "node_modules" / "x").mkdir(parents=True)
    (workspace / "node_modules" / "x" / "index.js").write_text("")
    result, messages = _turn(make_settings, workspace, _reply, sandbox_mode)
    assert result.pending_approvals == []
    assert (workspace / "pkg" / "mod.py").read_text() == "X = 2\n"
    text = render_ledger(collect_ledger(messages, workspace=str(workspace)))
    assert "- pkg/mod.py: created by a command, edited by a command\n" in text
    assert "- notes.txt: deleted by a command\n" in text
    assert "- notes.md: created by a command\n" in text
    assert "- copy.md: created by a command\n" in text
    assert "- gen.txt: created by a command\n" in text
    assert _lists_build_deleted(text)
    assert "- w.py: created (+1 −0 lines)" in text
    assert "node_modules" not in text.replace("touch node_modules/x/index.js; true", "")
    records = [r for r in map(scanned_changes, messages) if r is not None]
    assert len(records) == len(STEPS) - 1  # the last changed nothing
    # write_file's file (spelled ./w.py) is its call's, not the command's beside it.
    assert records[4].created == () and "w.py" not in records[4].modified
    assert records[4].deleted == ("build/a.o", "build/b.o")
    # The file perl named was read before it ran: its changed line is known.
    assert records[1].modified == ("pkg/mod.py",) and records[1].spans == (("pkg/mod.py", 1, 1),)


# The steps in a workspace too big to scan whole: each changes what it names.
BIG_STEPS = (
    "perl -pi -e 's/X = 1/X = 2/' pkg/mod.py",
    "cd pkg && python3 -c \"open('gen.py', 'w').write('G = 1')\"",
    "mv notes.txt notes.md",
    "rm -f build/*.o",
)


def _big_reply(body: dict[str, Any]) -> dict[str, Any]:
    """The first command the request does not show; then an answer."""
    sent = _sent_commands(body)
    for command in BIG_STEPS:
        if command not in sent:
            return {"tool_calls": [{"name": "run_bash", "arguments": {"command": command}}]}
    return {"content": "done"}


def test_in_a_workspace_too_big_to_scan_whole_what_commands_name_is_scanned(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """Past ``WORKSPACE_SCAN_MAX_FILES`` files the scan covers each command's ``cd``
    folder, the paths it names and a glob's folder: the files it changed there are in
    the ledger, where nothing was."""
    vendor = workspace / "vendor"
    for folder in range(WORKSPACE_SCAN_MAX_FILES // 1000):
        (vendor / f"lib{folder:02d}").mkdir(parents=True)
        for n in range(1000):
            (vendor / f"lib{folder:02d}" / f"m{n:03d}.py").write_bytes(b"")
    (workspace / "pkg").mkdir()
    (workspace / "pkg" / "mod.py").write_text("X = 1\n")
    (workspace / "notes.txt").write_text("n\n")
    (workspace / "build").mkdir()
    for name in ("a.o", "b.o"):
        (workspace / "build" / name).write_bytes(b"\x00")
    assert stat_scan(workspace) is None  # too big to scan whole
    _, messages = _turn(make_settings, workspace, _big_reply, "off")
    assert (workspace / "pkg" / "gen.py").read_text() == "G = 1"
    text = render_ledger(collect_ledger(messages, workspace=str(workspace)))
    assert "- pkg/mod.py: edited by a command\n" in text
    assert "- pkg/gen.py: created by a command\n" in text
    assert "- notes.txt: deleted by a command\n" in text
    assert "- notes.md: created by a command\n" in text
    assert _lists_build_deleted(text)
    records = [r for r in map(scanned_changes, messages) if r is not None]
    assert len(records) == len(BIG_STEPS)
    assert records[0].spans == (("pkg/mod.py", 1, 1),)  # its text was read before


MCP_SERVERS = Path(__file__).parents[1] / "mcp_servers"
# The steps, one a reply: a long file read (something for a compaction to take), then the
# MCP server writes a file, removes one, and peeks at one (declared read-only: it writes
# its log all the same, which no ledger lists).
MCP_STEPS = (
    ("read_file", {"path": "big.txt"}),
    ("mcp__files__write_text", {"path": "notes/plan.md", "text": "1. ship\n"}),
    ("mcp__files__remove", {"path": "old.txt"}),
    ("mcp__files__peek", {"path": "README.md"}),
)


def _mcp_reply(body: dict[str, Any]) -> dict[str, Any]:
    """A summary for a summary request; else the first MCP step the request does not
    show, then an answer naming the files the request says changed."""
    text = json.dumps(body["messages"])
    if is_summary_request(body):
        return {"content": "The user asked to update the notes."}
    sent = {
        call["function"]["name"]
        for message in body["messages"]
        for call in message.get("tool_calls") or []
    }
    for name, args in MCP_STEPS:
        if name not in sent and "what changed" not in text:
            return {"tool_calls": [{"name": name, "arguments": args}]}
    return {"content": "done"}


def test_files_an_mcp_tool_changed_are_in_the_ledger_after_a_compaction(
    tmp_path: Path, workspace: Path
) -> None:
    """An MCP server's tool writes and removes files of the workspace: the ledger lists
    them (changed, deleted by a tool), so after a compaction the model still knows which
    files it changed; a tool its server declares read-only (``readOnlyHint``) is taken at
    its word. Counted only by name before, such changes were in no ledger."""
    (workspace / "old.txt").write_text("old\n")
    (workspace / "README.md").write_text("# demo\n")
    (workspace / "big.txt").write_text("".join(f"row {n}: some data\n" for n in range(3000)))
    (workspace / ".agentgraph").mkdir()
    entry = {"command": sys.executable, "args": [str(MCP_SERVERS / "files.py")]}
    (workspace / ".agentgraph" / "mcp.json").write_text(
        json.dumps({"mcpServers": {"files": entry}})
    )
    with FakeOpenAIServer([_mcp_reply], on_exhausted="repeat_last") as server:
        env = server_env(
            tmp_path / "home",
            server.url,
            "sk-test",
            AGENTGRAPH_MCP_TRUST_WORKSPACE="true",
            AGENTGRAPH_MCP_START_TIMEOUT_S="60",
            AGENTGRAPH_PERMISSION_MODE="auto",
        )
        first = run_cli(["run", "-t", "mcp1", "update the notes", "--json"], cwd=workspace, env=env)
        assert first.returncode == 0, first.stderr
        compacted = run_cli(["sessions", "compact", "mcp1"], cwd=workspace, env=env)
        assert compacted.returncode == 0, compacted.stderr
        assert "Compacted:" in compacted.stderr
        second = run_cli(["run", "-t", "mcp1", "what changed?", "--json"], cwd=workspace, env=env)
        assert second.returncode == 0, second.stderr
    assert server.violations == []
    assert (workspace / "notes" / "plan.md").read_text() == "1. ship\n"
    assert not (workspace / "old.txt").exists() and (workspace / PEEK_LOG).exists()
    seen = json.dumps(server.requests[-1]["messages"])
    assert "- notes/plan.md: changed by a tool" in seen
    assert "- old.txt: deleted by a tool" in seen
    assert PEEK_LOG not in seen
