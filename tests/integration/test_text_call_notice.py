"""An answer that looks like a tool call written as text, but is not run, says so.

A small local model writes ``<tools>{…}</tools>``: with ``AGENTGRAPH_TEXT_TOOL_CALLS=off``,
or when the call does not parse, the text is the answer, and one notice line tells the
user that nothing ran. The real CLI against the stateless fake server on loopback.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_helpers import run_cli, server_env
from tests.fakes.openai_server import FakeOpenAIServer

KEY = "sk-test-secret-textcall-0123456789abcdef"
CALL = json.dumps({"name": "read_file", "arguments": {"path": "a.txt"}})
NOTICE = "the answer looks like a tool call written as text"


def _notices(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if NOTICE in line]


@pytest.mark.parametrize(
    ("setting", "text", "why"),
    [
        ("off", f"<tools>{CALL}</tools>", "AGENTGRAPH_TEXT_TOOL_CALLS=on runs such calls"),
        ("auto", f"<tools>{CALL[:-2]}</tools>", "it is not a well-formed call of a declared tool"),
    ],
    ids=["off", "broken"],
)
def test_a_call_written_as_text_that_is_not_run_is_told(
    home: Path, workspace: Path, setting: str, text: str, why: str
) -> None:
    (workspace / "a.txt").write_text("secret plans\n")
    with FakeOpenAIServer([{"content": text}]) as server:
        env = server_env(home, server.url, KEY, AGENTGRAPH_TEXT_TOOL_CALLS=setting)
        result = run_cli(["run", "--json", "read a.txt"], cwd=workspace, env=env)
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["answer"] == text and payload["tool_calls"] == 0
    [line] = _notices(result.stderr)
    assert line.endswith(f"(<tools>); it was not run ({why})"), line


def test_an_ordinary_answer_gets_no_notice(home: Path, workspace: Path) -> None:
    answer = 'The config is {"name": "demo", "debug": true}.'
    with FakeOpenAIServer([{"content": answer}]) as server:
        env = server_env(home, server.url, KEY, AGENTGRAPH_TEXT_TOOL_CALLS="off")
        result = run_cli(["run", "--json", "show the config"], cwd=workspace, env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["answer"] == answer
    assert _notices(result.stderr) == []
