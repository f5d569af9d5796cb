"""Provider failures from the real CLI over HTTP (11): retried, or one clear line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli_helpers import run_cli
from tests.fakes.openai_server import FakeOpenAIServer
from tests.integration.reliability.helpers import KEY, agent_env

RETRIES = "2"
ERROR_500: dict[str, Any] = {"error": {"status": 500, "body": "upstream exploded"}}
ERROR_429: dict[str, Any] = {
    "error": {
        "status": 429,
        "body": {"error": {"message": "Rate limit reached", "type": "requests"}},
        "headers": {"Retry-After": "1"},
    }
}
RESET: dict[str, Any] = {"reset": True, "after_chunks": 2}


@pytest.mark.parametrize(
    ("faults", "label"),
    [
        ([ERROR_429], "429 with Retry-After"),
        ([ERROR_500, ERROR_500], "two 500s"),
        ([RESET], "connection reset mid-stream"),
        ([{"reset": True, "hard": True}], "hard reset"),
    ],
)
def test_transient_failures_are_retried(
    home: Path, workspace: Path, faults: list[dict[str, Any]], label: str
) -> None:
    script = [*faults, {"content": f"fine after {label}"}]
    with FakeOpenAIServer(script, require_key=KEY) as server:
        env = agent_env(home, server, AGENTGRAPH_PROVIDER_MAX_RETRIES=RETRIES)
        result = run_cli(["run", "hello", "--thread", "t", "--json"], cwd=workspace, env=env)
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["answer"] == f"fine after {label}"
        assert len(server.requests) == len(faults) + 1
        assert server.violations == []
        assert "Traceback" not in result.stderr and KEY not in result.stderr


def test_malformed_tool_arguments_become_an_error_result(home: Path, workspace: Path) -> None:
    script = [
        {"tool_calls": [{"name": "read_file", "arguments": '{"path": "a.txt"'}]},
        {"content": "I will fix my call"},
        {"content": "still here"},
    ]
    with FakeOpenAIServer(script, require_key=KEY) as server:
        env = agent_env(home, server)
        first = run_cli(["run", "read a.txt", "--thread", "bad-json"], cwd=workspace, env=env)
        assert first.returncode == 0, first.stderr
        sent = server.requests[1]["messages"]
        result = next(m for m in sent if m["role"] == "tool")
        assert result["content"].startswith("Error"), result
        second = run_cli(["run", "ok?", "--thread", "bad-json"], cwd=workspace, env=env)
        assert second.returncode == 0, second.stderr
        assert server.violations == []  # the stored session stays valid for the provider


def test_persistent_failure_is_one_line_and_the_session_survives(
    home: Path, workspace: Path
) -> None:
    with FakeOpenAIServer([{"content": "remember PLUM"}]) as good:
        env = agent_env(home, good)
        ok = run_cli(["run", "the word is PLUM", "--thread", "keep"], cwd=workspace, env=env)
        assert ok.returncode == 0, ok.stderr
    with FakeOpenAIServer([ERROR_500] * 2 + [RESET] * 2) as bad:
        env = agent_env(home, bad, AGENTGRAPH_PROVIDER_MAX_RETRIES="1")
        failed = run_cli(["run", "again", "--thread", "keep"], cwd=workspace, env=env)
        assert failed.returncode == 1
        # Retry notices (wrapped to the terminal width), then exactly one error line.
        lines = failed.stderr.strip().splitlines()
        assert [line for line in lines if line.startswith("agentgraph:")] == [lines[-1]], lines
        assert lines[-1].startswith("agentgraph: ") and "500" in lines[-1]
        assert "Traceback" not in failed.stderr
        assert len(bad.requests) == 2
        dropped = run_cli(["run", "and again", "--thread", "keep"], cwd=workspace, env=env)
        assert dropped.returncode == 1 and "Traceback" not in dropped.stderr
        lines = dropped.stderr.strip().splitlines()
        assert [line for line in lines if line.startswith("agentgraph:")] == [lines[-1]], lines
    with FakeOpenAIServer([{"content": "PLUM"}]) as back:
        env = agent_env(home, back)
        resumed = run_cli(
            ["run", "the word?", "--thread", "keep", "--json"], cwd=workspace, env=env
        )
        assert resumed.returncode == 0, resumed.stderr
        assert back.violations == []
        sent = json.dumps(back.requests[-1]["messages"])
    assert "the word is PLUM" in sent and "remember PLUM" in sent
