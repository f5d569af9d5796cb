"""Background subagents through the real CLI and graph, against the loopback strict server.

Every scripted reply is a function of the request alone: a subagent is recognised by
its task (the first user message), the parent by its own; the parent keeps working
while the subagent runs and answers once the notice of its outcome is in the prompt.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage, ToolMessage

from agentgraph.capabilities.subagent_tasks import NOTICE_ID_PREFIX
from tests.cli_helpers import run_cli, server_env
from tests.fakes.openai_server import FakeOpenAIServer
from tests.pty_helpers import stored_messages

KEY = "sk-test-secret-0123456789abcdef"
SLOW_TASK = "SLOW JOB: report the answer"
NOTICE_PREFIX = "Background subagent "
# The parent's model calls while it waits: slow enough that it does not spin.
PARENT_STEP_DELAY_S = 0.4
SUBAGENT_DELAY_S = 1.5
# A subagent that would take this long never ends within a test.
FOREVER_S = 60.0
KILL_WAIT_S = 60.0
FILES = 40
Reply = Callable[[dict[str, Any]], dict[str, Any]]


def _user_texts(body: dict[str, Any]) -> list[str]:
    texts = []
    for message in body.get("messages") or []:
        if message.get("role") == "user":
            content = message.get("content")
            texts.append(content if isinstance(content, str) else json.dumps(content))
    return texts


def _tools(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body.get("messages") or [] if m.get("role") == "tool"]


def _notices(body: dict[str, Any]) -> list[str]:
    return [t for t in _user_texts(body) if t.startswith(NOTICE_PREFIX)]


def _task_id(body: dict[str, Any]) -> str:
    for message in _tools(body):
        found = re.search(
            r"\[(subagent-[0-9a-f]{8}) started in the background\]", str(message.get("content"))
        )
        if found:
            return found.group(1)
    raise AssertionError("no background start in the prompt")


def model(subagent: dict[str, Any]) -> Reply:
    """Subagents answer ``subagent``; the parent starts one in the background, then reads
    files one per (slow) step until the notice arrives, then answers with it."""

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        users = _user_texts(body)
        if users and users[0].startswith(SLOW_TASK):
            return subagent
        if _notices(body):
            return {"content": "NOTICED: " + _notices(body)[-1].replace("\n", " | ")}
        done = _tools(body)
        if not done:
            call = {"name": "call_subagent", "arguments": {"task": SLOW_TASK, "background": True}}
            return {"tool_calls": [call]}
        step = len(done) % FILES
        return {
            "tool_calls": [{"name": "read_file", "arguments": {"path": f"f{step}.txt"}}],
            "first_byte_delay_s": PARENT_STEP_DELAY_S,
        }

    return reply


def _files(workspace: Path) -> None:
    for n in range(FILES):
        (workspace / f"f{n}.txt").write_text(f"file {n}\n")


def _events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def _notice_messages(history: list[Any]) -> list[HumanMessage]:
    return [
        m for m in history if isinstance(m, HumanMessage) and str(m.id).startswith(NOTICE_ID_PREFIX)
    ]


def test_the_parent_keeps_working_and_gets_the_result_once_as_a_notice(
    home: Path, workspace: Path
) -> None:
    _files(workspace)
    subagent = {"content": "RESULT-42", "first_byte_delay_s": SUBAGENT_DELAY_S}
    with FakeOpenAIServer([model(subagent)], require_key=KEY, on_exhausted="repeat_last") as server:
        res = run_cli(
            ["run", "start the job", "--output-format", "stream-json"],
            cwd=workspace,
            env=server_env(home, server.url, KEY),
        )
        requests = server.requests
    assert res.returncode == 0, res.stderr
    events = _events(res.stdout)
    result = events[-1]
    assert result["type"] == "result"
    assert "RESULT-42" in result["answer"] and "[subagent-" in result["answer"]
    kinds = [(e["type"], e.get("name")) for e in events]
    started = kinds.index(("subagent_started", None))
    finished = kinds.index(("subagent_done", None))
    # The parent's own tool calls ran while the subagent did.
    assert ("tool_call", "read_file") in kinds[started:finished]
    assert next(e for e in events if e["type"] == "subagent_started")["background"] is True

    history = stored_messages(home, result["thread_id"])
    (notice,) = _notice_messages(history)
    assert "RESULT-42" in str(notice.content)
    # Appended after the parent's earlier work, and every later prompt carries it once.
    position = history.index(notice)
    assert any(isinstance(m, ToolMessage) and m.name == "read_file" for m in history[:position])
    parent_prompts = [r for r in requests if not _user_texts(r)[0].startswith(SLOW_TASK)]
    with_notice = [r for r in parent_prompts if _notices(r)]
    assert with_notice and all(len(_notices(r)) == 1 for r in with_notice)


def test_subagent_task_collects_the_result_and_refuses_unknown_ids(
    home: Path, workspace: Path
) -> None:
    def reply(body: dict[str, Any]) -> dict[str, Any]:
        users = _user_texts(body)
        if users and users[0].startswith(SLOW_TASK):
            return {"content": "RESULT-7", "first_byte_delay_s": SUBAGENT_DELAY_S}
        done = _tools(body)
        if not done:
            call = {"name": "call_subagent", "arguments": {"task": SLOW_TASK, "background": True}}
            return {"tool_calls": [call]}
        if len(done) == 1:
            args = {"task_id": "subagent-deadbeef", "action": "result"}
            return {"tool_calls": [{"name": "subagent_task", "arguments": args}]}
        if len(done) == 2:
            args = {"task_id": _task_id(body), "action": "result", "wait_s": 30}
            return {"tool_calls": [{"name": "subagent_task", "arguments": args}]}
        return {"content": "COLLECTED: " + str(done[-1]["content"]).replace("\n", " | ")}

    with FakeOpenAIServer([reply], require_key=KEY, on_exhausted="repeat_last") as server:
        res = run_cli(
            ["run", "start and collect", "--output-format", "stream-json"],
            cwd=workspace,
            env=server_env(home, server.url, KEY),
        )
    assert res.returncode == 0, res.stderr
    events = _events(res.stdout)
    results = [e for e in events if e["type"] == "tool_result" and e["name"] == "subagent_task"]
    unknown, collected = results
    assert unknown["status"] == "error"
    assert "unknown subagent task id 'subagent-deadbeef'" in unknown["content"]
    assert collected["status"] == "success" and "RESULT-7" in collected["content"]
    assert "COLLECTED: [subagent-" in events[-1]["answer"]
    # Collected with the tool: no notice delivers it a second time, none is pending.
    assert _notice_messages(stored_messages(home, events[-1]["thread_id"])) == []
    assert not any(e["type"] == "subagent_tasks" for e in events)


def _run_until(
    args: list[str], cwd: Path, env: dict[str, str], stop: Callable[[dict[str, Any]], bool]
) -> tuple[str, list[dict[str, Any]]]:
    """Start the CLI, read its stream-json events until ``stop`` holds, then SIGKILL it."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentgraph", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + KILL_WAIT_S
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            seen.append(json.loads(line))
            if stop(seen[-1]):
                break
            assert time.monotonic() < deadline, seen
        else:
            raise AssertionError(f"the run ended before the kill point: {seen}")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    thread_id = next(e["thread_id"] for e in seen if e["type"] == "start")
    return thread_id, seen


def test_a_parent_killed_while_its_subagent_runs_reports_it_interrupted_on_resume(
    home: Path, workspace: Path
) -> None:
    _files(workspace)
    never = {"content": "NEVER", "first_byte_delay_s": FOREVER_S}
    with FakeOpenAIServer([model(never)], require_key=KEY, on_exhausted="repeat_last") as server:
        env = server_env(home, server.url, KEY)
        reads = []

        def after_two_reads(event: dict[str, Any]) -> bool:
            if event["type"] == "tool_result" and event["name"] == "read_file":
                reads.append(event)
            return len(reads) >= 2

        thread_id, seen = _run_until(
            ["run", "start the job", "--output-format", "stream-json"],
            workspace,
            env,
            after_two_reads,
        )
        assert any(e["type"] == "subagent_started" for e in seen)
        assert not any(e["type"] == "subagent_done" for e in seen)
        res = run_cli(
            ["run", "what happened?", "--thread", thread_id, "--output-format", "stream-json"],
            cwd=workspace,
            env=env,
        )
    assert res.returncode == 0, res.stderr
    answer = _events(res.stdout)[-1]["answer"]
    assert answer.startswith("NOTICED: Background subagent subagent-")
    assert "interrupted" in answer and "NEVER" not in answer
    (notice,) = _notice_messages(stored_messages(home, thread_id))
    assert "subagent interrupted" in str(notice.content)


def test_a_result_stored_before_the_kill_is_delivered_on_resume(
    home: Path, workspace: Path
) -> None:
    _files(workspace)

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        users = _user_texts(body)
        if users and users[0].startswith(SLOW_TASK):
            return {"content": "DONE-9"}
        if _notices(body):
            return {"content": "NOTICED: " + _notices(body)[-1].replace("\n", " | ")}
        if not _tools(body):
            call = {"name": "call_subagent", "arguments": {"task": SLOW_TASK, "background": True}}
            return {"tool_calls": [call]}
        # The parent's next model call hangs: the process is killed during it.
        return {"content": "too late", "first_byte_delay_s": FOREVER_S}

    with FakeOpenAIServer([reply], require_key=KEY, on_exhausted="repeat_last") as server:
        env = server_env(home, server.url, KEY)
        thread_id, _ = _run_until(
            ["run", "start the job", "--output-format", "stream-json"],
            workspace,
            env,
            lambda e: e["type"] == "subagent_done",
        )
        res = run_cli(
            ["run", "and now?", "--thread", thread_id, "--output-format", "stream-json"],
            cwd=workspace,
            env=env,
        )
    assert res.returncode == 0, res.stderr
    answer = _events(res.stdout)[-1]["answer"]
    assert "done · 1 step]" in answer and "DONE-9" in answer
    (notice,) = _notice_messages(stored_messages(home, thread_id))
    assert "DONE-9" in str(notice.content)
