"""A run that fails before the model's first reply still leaves a resumable session."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli_helpers import cli_env, run_cli, server_env
from tests.fakes.openai_server import FakeOpenAIServer

KEY = "sk-test-secret-0123456789abcdef"
# The discard port: nothing listens there, the connection is refused at once.
REFUSED_URL = "http://127.0.0.1:9/v1"


def test_refused_connection_counts_the_stored_prompt_and_resumes(
    home: Path, workspace: Path
) -> None:
    env = cli_env(home, OPENAI_BASE_URL=REFUSED_URL, AGENTGRAPH_PROVIDER_MAX_RETRIES="0")
    failed = run_cli(["run", "remember the blue door"], cwd=workspace, env=env)
    assert failed.returncode == 1, failed.stderr

    listed = run_cli(["sessions", "list", "--json"], cwd=workspace, env=env)
    rows = json.loads(listed.stdout)
    assert len(rows) == 1
    thread_id = rows[0]["thread_id"]
    assert rows[0]["message_count"] == 1, rows  # the prompt is stored in the checkpoint
    shown = run_cli(["sessions", "show", thread_id, "--json"], cwd=workspace, env=env)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["message_count"] == 1, shown.stdout

    with FakeOpenAIServer([{"content": "The blue door."}], require_key=KEY) as server:
        again = run_cli(
            ["-r", thread_id, "run", "what did I ask you to remember?", "--json"],
            cwd=workspace,
            env=server_env(home, server.url, KEY),
        )
        assert again.returncode == 0, again.stderr
        assert json.loads(again.stdout)["thread_id"] == thread_id
        sent = server.requests[-1]["messages"]
        users = [m["content"] for m in sent if m["role"] == "user"]
        assert users == ["remember the blue door", "what did I ask you to remember?"]
    assert server.violations == []
    rows = json.loads(run_cli(["sessions", "list", "--json"], cwd=workspace, env=env).stdout)
    assert rows[0]["message_count"] == 3, rows
