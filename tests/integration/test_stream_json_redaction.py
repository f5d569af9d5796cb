"""Credentials in a tool call's arguments never reach the event stream or the terminal."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli_helpers import run_cli, server_env
from tests.fakes.openai_server import FakeOpenAIServer

KEY = "sk-test-secret-0123456789abcdef"
GITHUB_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
DB_PASSWORD = "hunter2-prod-Zq9x"


def test_tool_call_args_are_redacted_in_stream_json_and_text(home: Path, workspace: Path) -> None:
    command = f"echo {KEY} {GITHUB_TOKEN} $DB_PASSWORD {DB_PASSWORD} > /dev/null"
    script = [
        {"tool_calls": [{"name": "run_bash", "arguments": {"command": command}}]},
        {"content": "Done."},
    ]
    outputs = {}
    for output in ("stream-json", "text"):
        with FakeOpenAIServer(script, require_key=KEY) as server:
            res = run_cli(
                ["run", "do it", "--output-format", output],
                cwd=workspace,
                env=server_env(home, server.url, KEY, DB_PASSWORD=DB_PASSWORD),
            )
        assert res.returncode == 0, res.stderr
        for secret in (KEY, GITHUB_TOKEN, DB_PASSWORD):
            assert secret not in res.stdout, (output, secret)
            assert secret not in res.stderr, (output, secret)
        outputs[output] = res.stdout
    events = [json.loads(line) for line in outputs["stream-json"].splitlines()]
    call = next(e for e in events if e["type"] == "tool_call")
    # The same shape, the credentials replaced in it.
    assert call["args"] == {
        "command": "echo [REDACTED] [REDACTED] $DB_PASSWORD [REDACTED] > /dev/null"
    }
