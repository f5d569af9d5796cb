"""Text tool-call unit, through the CLI and the strict loopback server."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli_helpers import cli_env, run_cli
from tests.fakes.openai_server import fake_openai_server
from tests.fakes.scripts import reply_text


def test_json_written_as_text_runs_as_a_tool_call(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("the password is PELICAN\n")
    call = json.dumps({"name": "read_file", "arguments": {"path": "a.txt"}})
    script = [reply_text(f"```json\n{call}\n```"), reply_text("The password is PELICAN.")]
    with fake_openai_server(script) as server:
        env = cli_env(tmp_path / "home", OPENAI_BASE_URL=server.url, AGENTGRAPH_MODEL="local")
        res = run_cli(["run", "what is the password in a.txt?", "--json"], cwd=ws, env=env)
        assert res.returncode == 0, res.stderr
        out = json.loads(res.stdout)
        assert out["answer"] == "The password is PELICAN." and out["tool_calls"] == 1
        assert "wrote its tool calls as text" in " ".join(res.stderr.split())
        second = server.requests[1]["messages"]
        assistant = next(m for m in second if m["role"] == "assistant")
        assert assistant["tool_calls"][0]["function"]["name"] == "read_file"
        result = next(m for m in second if m["role"] == "tool")
        assert "PELICAN" in result["content"]
        assert server.statuses == [200, 200]


def test_text_call_of_an_undeclared_tool_stays_text(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    text = json.dumps({"name": "format_disk", "arguments": {"device": "/dev/sda"}})
    with fake_openai_server([reply_text(text)]) as server:
        env = cli_env(tmp_path / "home", OPENAI_BASE_URL=server.url, AGENTGRAPH_MODEL="local")
        res = run_cli(["run", "hi", "--json"], cwd=ws, env=env)
        assert res.returncode == 0, res.stderr
        out = json.loads(res.stdout)
        assert out["answer"] == text and out["tool_calls"] == 0
        assert "undeclared tool as text (format_disk)" in " ".join(res.stderr.split())


def test_off_setting_leaves_text_alone(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    call = json.dumps({"name": "now", "arguments": {}})
    with fake_openai_server([reply_text(call)]) as server:
        env = cli_env(
            tmp_path / "home",
            OPENAI_BASE_URL=server.url,
            AGENTGRAPH_MODEL="local",
            AGENTGRAPH_TEXT_TOOL_CALLS="false",
        )
        res = run_cli(["run", "time?", "--json"], cwd=ws, env=env)
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout)["tool_calls"] == 0
