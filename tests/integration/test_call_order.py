"""A reply's calls that touch the same file run in the order the model wrote them.

Through the real graph and the loopback server: a stateless model (its reply a function
of the request: calls when the request shows no result yet, then an answer) edits one
file four times in one reply, between a read before and a read after.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentgraph.config import Settings
from agentgraph.persistence import open_store
from agentgraph.session.agent import Agent
from tests.fakes.openai_server import FakeOpenAIServer

LINES = 2_000
EDITED = (5, 700, 1_200, 1_500)


def _calls() -> list[dict[str, Any]]:
    edits = [
        {
            "name": "edit_file",
            "arguments": {
                "path": "app.py",
                "old_string": f"line{k} = {k}\n",
                "new_string": f"line{k} = 'edited'\n",
            },
        }
        for k in EDITED
    ]
    read = {"name": "read_file", "arguments": {"path": "app.py", "offset": 1, "limit": 10}}
    return [read, *edits, read]


def _reply(body: dict[str, Any]) -> dict[str, Any]:
    if not any(m["role"] == "tool" for m in body["messages"]):
        return {"tool_calls": _calls()}
    return {"content": "done"}


def _turn(
    make_settings: Callable[..., Settings],
    workspace: Path,
    reply: Callable[[dict[str, Any]], dict[str, Any]],
) -> list[dict[str, Any]]:
    """One turn of the real Agent against ``reply``, answered "done"; the tool results
    its last request sent."""
    with FakeOpenAIServer([reply], on_exhausted="repeat_last") as server:
        settings = make_settings(
            OPENAI_BASE_URL=server.url,
            OPENAI_API_KEY="sk-test",
            AGENTGRAPH_PROVIDER_MAX_RETRIES="0",
            AGENTGRAPH_SANDBOX="off",
        )
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            result = agent.run_turn("order", "do the work", workspace, lambda _e: None)
        results = [m for m in server.requests[-1]["messages"] if m["role"] == "tool"]
    assert result.answer == "done"
    return results


def test_edits_of_one_file_in_one_reply_all_apply_between_the_reads_around_them(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """Run together, each edit read the file before the others wrote it: every edit said
    it applied and the file kept one of them."""
    (workspace / "app.py").write_text("".join(f"line{k} = {k}\n" for k in range(LINES)))
    results = _turn(make_settings, workspace, _reply)
    text = (workspace / "app.py").read_text()
    assert [k for k in EDITED if f"line{k} = 'edited'\n" in text] == list(EDITED)
    first, *edits, last = (json.dumps(r["content"]) for r in results)
    assert all("error" not in e.lower() for e in edits), edits
    assert "line5 = 5" in first and "line5 = 'edited'" in last


# The command writes its file after a pause, so a subagent started beside it would have
# taken its snapshot of the workspace first.
SLOW_WRITE = "sleep 1 && echo from-the-command > made.txt"
SUBAGENT_TASK = "READ made.txt"


def _subagent_reply(body: dict[str, Any]) -> dict[str, Any]:
    """The subagent reads the file its task names, then answers with what it read; the
    caller writes it with a command and hands the reading to a subagent in one reply."""
    messages = body["messages"]
    first = next((m["content"] for m in messages if m["role"] == "user"), "")
    done = [m for m in messages if m["role"] == "tool"]
    if isinstance(first, str) and first.startswith(SUBAGENT_TASK):
        if not done:
            return {"tool_calls": [{"name": "read_file", "arguments": {"path": "made.txt"}}]}
        return {"content": f"READ: {done[0]['content']}"}
    if not done:
        task = {"task": SUBAGENT_TASK, "writes": True}
        return {
            "tool_calls": [
                {"name": "run_bash", "arguments": {"command": SLOW_WRITE}},
                {"name": "call_subagent", "arguments": task},
            ]
        }
    return {"content": "done"}


def test_a_subagent_starts_from_what_the_earlier_calls_of_its_reply_left(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """Its isolated tree is a snapshot of the workspace taken as it starts: started beside
    the command, it did not see the file the command wrote."""
    (workspace / "README.md").write_text("r\n")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "start"]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=workspace,
            check=True,
            capture_output=True,
        )
    results = _turn(make_settings, workspace, _subagent_reply)
    answer = json.dumps(results[1]["content"])
    assert "READ: " in answer and "from-the-command" in answer, answer
