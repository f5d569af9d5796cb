"""A budget, not a call cap: a long task runs to its end, a model going round is stopped.

The call cap (``MAX_LOOPS``) is a backstop far above what a long task needs (0 lifts
it); what stops a runaway model is its behaviour: the same tool calls returning the same
output several times in a row. The real CLI in a subprocess against the fake
OpenAI-compatible server on loopback; every scripted model is stateless (its reply is a
function of the request).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentgraph.runtime.nodes.limits import RUNAWAY_REPEATS
from tests.cli_helpers import run_cli, server_env
from tests.fakes.openai_server import FakeOpenAIServer

KEY = "sk-test-secret-runaway-0123456789abcdef"
# More files than the old default cap (100 model calls) let a task read.
LONG_TASK_FILES = 150
# Slack over the longest run the scripts allow, for one subprocess.
LONG_RUN_TIMEOUT_S = 300.0


def _tool_results(request: dict[str, Any]) -> list[str]:
    return [str(m.get("content")) for m in request["messages"] if m.get("role") == "tool"]


def _reads_every_file(request: dict[str, Any]) -> dict[str, Any]:
    """Read file n, where n is the number of tool results so far; then answer."""
    read = len(_tool_results(request))
    if read < LONG_TASK_FILES:
        path = f"notes/file_{read:03d}.txt"
        return {"tool_calls": [{"name": "read_file", "arguments": {"path": path}}]}
    return {"content": f"read {read} files"}


def _rereads_one_file(request: dict[str, Any]) -> dict[str, Any]:
    """Ask for the same file on every request; answer only when tools are refused."""
    if request.get("tool_choice") == "none":
        return {"content": "I kept reading the same file; stopping here."}
    return {"tool_calls": [{"name": "read_file", "arguments": {"path": "stuck.txt"}}]}


def _chat_requests(server: FakeOpenAIServer) -> list[dict[str, Any]]:
    return [r for r in server.requests if "messages" in (r or {})]


@pytest.mark.parametrize("max_loops", [None, "0"], ids=["default-cap", "no-cap"])
def test_a_task_that_reads_150_files_finishes(
    home: Path, workspace: Path, max_loops: str | None
) -> None:
    notes = workspace / "notes"
    notes.mkdir()
    for n in range(LONG_TASK_FILES):
        (notes / f"file_{n:03d}.txt").write_text(f"note number {n}\n")
    extra = {} if max_loops is None else {"MAX_LOOPS": max_loops}
    with FakeOpenAIServer([_reads_every_file], on_exhausted="repeat_last") as server:
        env = server_env(home, server.url, KEY, **extra)
        result = run_cli(
            ["run", "--json", "read every note"],
            cwd=workspace,
            env=env,
            timeout_s=LONG_RUN_TIMEOUT_S,
        )
    assert result.returncode == 0, result.stderr[-2000:]
    payload = json.loads(result.stdout)
    assert payload["answer"] == f"read {LONG_TASK_FILES} files"
    assert payload["stopped"] is None
    assert payload["tool_calls"] == LONG_TASK_FILES
    last = _chat_requests(server)[-1]
    # Every read ran: each file's own content came back, none was refused.
    results = _tool_results(last)
    assert len(results) == LONG_TASK_FILES
    assert all(f"note number {n}" in text for n, text in enumerate(results))


def test_the_same_call_with_the_same_output_stops_the_run(home: Path, workspace: Path) -> None:
    (workspace / "stuck.txt").write_text("nothing changes here\n")
    with FakeOpenAIServer([_rereads_one_file], on_exhausted="repeat_last") as server:
        env = server_env(home, server.url, KEY)
        result = run_cli(["run", "--json", "find the bug"], cwd=workspace, env=env)
    assert result.returncode == 3, result.stderr
    payload = json.loads(result.stdout)
    assert payload["stopped"] == "repeated_calls"
    assert payload["answer"] == "I kept reading the same file; stopping here."
    requests = _chat_requests(server)
    # Three reads ran; the fourth ask was answered as not run, then one ask for an answer
    # without tools: far below any call cap.
    assert len(requests) == RUNAWAY_REPEATS + 2
    final = requests[-1]
    assert final["tool_choice"] == "none"
    results = _tool_results(final)
    assert sum("nothing changes here" in text for text in results) == RUNAWAY_REPEATS
    assert results[-1].startswith("not executed: the same call returned the same output")
    lines = [line for line in result.stderr.splitlines() if line.startswith("agentgraph:")]
    assert lines == [
        "agentgraph: stopped going round: the same tool calls returned the same output "
        f"{RUNAWAY_REPEATS} times in a row; the answer may be partial (continue with: "
        f"agentgraph run --thread {payload['thread_id']} ...)"
    ], result.stderr
    assert "Traceback" not in result.stderr


def test_the_same_call_with_new_output_is_progress(home: Path, workspace: Path) -> None:
    """A log polled while something else writes to it is work, not a repeat."""
    log = workspace / "build.log"
    log.write_text("started\n")
    polls = RUNAWAY_REPEATS + 3

    def poll_the_log(request: dict[str, Any]) -> dict[str, Any]:
        done = len(_tool_results(request))
        # The build (another process) writes a line between two polls.
        with log.open("a") as out:
            out.write(f"step {done}\n")
        if done >= polls:
            return {"content": "the build kept going"}
        return {"tool_calls": [{"name": "read_file", "arguments": {"path": "build.log"}}]}

    with FakeOpenAIServer([poll_the_log], on_exhausted="repeat_last") as server:
        env = server_env(home, server.url, KEY)
        result = run_cli(["run", "--json", "watch the build"], cwd=workspace, env=env)
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["stopped"] is None and payload["answer"] == "the build kept going"
    results = _tool_results(_chat_requests(server)[-1])
    assert len(results) == polls and len(set(results)) == polls


BUDGET_TOKENS = 20_000
# More reads than the budget lets the task make.
BUDGET_TASK_FILES = 60


def _reads_many_files(request: dict[str, Any]) -> dict[str, Any]:
    """Read file n, where n is the number of tool results so far; then answer."""
    read = len(_tool_results(request))
    if read < BUDGET_TASK_FILES:
        path = f"notes/file_{read:03d}.txt"
        return {"tool_calls": [{"name": "read_file", "arguments": {"path": path}}]}
    return {"content": f"read {read} files"}


def test_a_token_budget_stops_the_request_once_spent(home: Path, workspace: Path) -> None:
    notes = workspace / "notes"
    notes.mkdir()
    for n in range(BUDGET_TASK_FILES):
        (notes / f"file_{n:03d}.txt").write_text(f"note number {n}\n" * 20)
    with FakeOpenAIServer([_reads_many_files], on_exhausted="repeat_last") as server:
        env = server_env(home, server.url, KEY)
        result = run_cli(
            ["run", "--json", "--budget", str(BUDGET_TOKENS), "read every note"],
            cwd=workspace,
            env=env,
        )
        requests = _chat_requests(server)
        per_call = [u["prompt_tokens"] + u["completion_tokens"] for u in server.reported_usage]
    assert result.returncode == 3, result.stderr
    payload = json.loads(result.stdout)
    assert payload["stopped"] == "budget"
    spent = payload["usage"]["input_tokens"] + payload["usage"]["output_tokens"]
    assert payload["answer"] == (
        f"Stopped: this request used {spent:,} of {BUDGET_TOKENS:,} tokens, the budget. The "
        "session is saved: ask me to continue to pick up where I left off."
    )
    # It stopped at the first reply that reached the budget, several calls in, and made
    # no model call after it.
    assert spent == sum(per_call) >= BUDGET_TOKENS > sum(per_call[:-1])
    assert 2 < len(requests) < BUDGET_TASK_FILES
    assert all(r.get("tool_choice") != "none" for r in requests)
    lines = [line for line in result.stderr.splitlines() if line.startswith("agentgraph:")]
    assert lines == [
        "agentgraph: stopped at the token budget (--budget / AGENTGRAPH_TURN_BUDGET_TOKENS="
        f"{BUDGET_TOKENS}); the answer may be partial (continue with: agentgraph run "
        f"--thread {payload['thread_id']} ...)"
    ], result.stderr


def test_the_budget_setting_and_budget_0(home: Path, workspace: Path) -> None:
    """AGENTGRAPH_TURN_BUDGET_TOKENS sets the budget; ``--budget 0`` lifts it."""
    notes = workspace / "notes"
    notes.mkdir()
    for n in range(BUDGET_TASK_FILES):
        (notes / f"file_{n:03d}.txt").write_text(f"note number {n}\n" * 20)
    with FakeOpenAIServer([_reads_many_files], on_exhausted="repeat_last") as server:
        env = server_env(home, server.url, KEY, AGENTGRAPH_TURN_BUDGET_TOKENS=str(BUDGET_TOKENS))
        capped = run_cli(["run", "--json", "read every note"], cwd=workspace, env=env)
        lifted = run_cli(
            ["run", "--json", "--budget", "0", "read every note"], cwd=workspace, env=env
        )
    assert capped.returncode == 3, capped.stderr
    assert json.loads(capped.stdout)["stopped"] == "budget"
    assert lifted.returncode == 0, lifted.stderr
    assert json.loads(lifted.stdout)["answer"] == f"read {BUDGET_TASK_FILES} files"
