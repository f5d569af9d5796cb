"""A subagent's work is watchable: its tool calls stream to the parent's front ends.

The real CLI (REPL in a pty, ``run --output-format stream-json``) against the loopback
strict server, whose replies are a function of the request alone: a subagent (its task
is the first user message) reads ``notes.txt`` and reports; the parent delegates, then
answers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.cli_helpers import run_cli, server_env
from tests.fakes.openai_server import FakeOpenAIServer
from tests.pty_helpers import (
    ENTER,
    PROMPT,
    close_repl,
    plain,
    pty_env,
    screen_lines,
    spawn_repl,
)

KEY = "sk-test-secret-0123456789abcdef"
TASK = "Read notes.txt and report its first line."
REPORT = "NOTES-FIRST-LINE: alpha beta"


def _first_user_text(body: dict[str, Any]) -> str:
    for message in body.get("messages") or []:
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return ""


def _tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body.get("messages") or [] if m.get("role") == "tool"]


def reply(body: dict[str, Any]) -> dict[str, Any]:
    """The model, as a function of the request: subagent or parent, by the first message."""
    done = _tool_results(body)
    if _first_user_text(body).startswith(TASK):
        if not done:
            return {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]}
        return {"content": f"{REPORT}\nsecond line of the report"}
    if not done:
        return {"tool_calls": [{"name": "call_subagent", "arguments": {"task": TASK}}]}
    return {"content": "The helper reported back."}


def test_repl_shows_subagent_tools_nested_and_its_text_as_the_result(
    home: Path, workspace: Path
) -> None:
    (workspace / "notes.txt").write_text("alpha beta\n")
    with FakeOpenAIServer([reply], require_key=KEY, on_exhausted="repeat_last") as server:
        child = spawn_repl([], cwd=workspace, env=pty_env(home, server.url, KEY))
        try:
            child.expect_exact(PROMPT)
            child.send("delegate the notes" + ENTER)
            child.expect_exact("The helper reported back.")
            child.expect_exact(PROMPT)
            lines = screen_lines(child)
            # /agents lists it with its status, time, tool calls and tokens.
            child.send("/agents" + ENTER)
            child.expect(r"subagent-[0-9a-f]{8} done · [0-9.]+s · 1 tool call · [0-9,]+ tokens")
            child.expect_exact(PROMPT)
        finally:
            close_repl(child)
    call = next(i for i, line in enumerate(lines) if "⏺ call_subagent" in line)
    after = lines[call + 1 :]
    started = next(i for i, line in enumerate(after) if "↳ subagent-" in line)
    # The subagent's tool call, indented under the parent's call, with its elapsed time.
    tool = next(i for i, line in enumerate(after) if "↳ read_file notes.txt ·" in line)
    done = next(i for i, line in enumerate(after) if " done · 2 steps · " in line)
    assert started < tool < done, after
    assert after[tool].startswith("    ↳ read_file notes.txt · ")
    assert after[tool].rstrip().endswith("s")
    # The result is the subagent's own text, not a JSON object or the status line.
    result = after[done + 1]
    assert result.strip() == f"⎿ {REPORT}", after
    assert after[done + 2].strip() == "second line of the report"
    shown = plain(child.logfile_read.getvalue())
    assert '{"ok"' not in shown and "[subagent-" not in shown


def test_stream_json_carries_typed_subagent_events(home: Path, workspace: Path) -> None:
    (workspace / "notes.txt").write_text("alpha beta\n")
    with FakeOpenAIServer([reply], require_key=KEY, on_exhausted="repeat_last") as server:
        res = run_cli(
            ["run", "delegate the notes", "--output-format", "stream-json"],
            cwd=workspace,
            env=server_env(home, server.url, KEY),
        )
    assert res.returncode == 0, res.stderr
    events = [json.loads(line) for line in res.stdout.splitlines() if line.strip()]
    call = next(e for e in events if e["type"] == "tool_call" and e["name"] == "call_subagent")
    kinds = [e["type"] for e in events if e["type"].startswith("subagent_")]
    assert kinds == ["subagent_started", "subagent_tool", "subagent_done"]
    started, tool, done = (e for e in events if e["type"].startswith("subagent_"))
    assert started["id"].startswith("subagent-") and started["tool_call_id"] == call["id"]
    assert started["task"].startswith("Read notes.txt")
    assert tool["id"] == started["id"] and tool["tool_call_id"] == call["id"]
    assert tool["name"] == "read_file" and tool["args"] == {"path": "notes.txt"}
    assert tool["elapsed_s"] >= 0
    assert done["id"] == started["id"] and done["tool_call_id"] == call["id"]
    assert done["ok"] is True and done["status"] == "done" and done["loops"] == 2
    assert done["elapsed_s"] >= tool["elapsed_s"]
    assert done["input_tokens"] > 0 and done["output_tokens"] > 0
    assert done["result"].startswith(REPORT)
    # The model got the status line and the text, with the usage kept out of it.
    result = next(e for e in events if e["type"] == "tool_result" and e["id"] == call["id"])
    assert (
        result["content"]
        == f"[{started['id']} done · 2 steps]\n{REPORT}\nsecond line of the report"
    )
