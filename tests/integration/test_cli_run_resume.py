"""``agentgraph run`` continuing a session with ``-r ID`` / ``--continue``, like the REPL."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from agentgraph.config import Settings
from agentgraph.persistence import open_store
from agentgraph.session.agent import Agent
from tests.cli_helpers import run_cli, server_env
from tests.fakes.openai_server import FakeOpenAIServer

KEY = "sk-test-secret-0123456789abcdef"


def _user_texts(request: dict[str, object]) -> list[str]:
    messages = request["messages"]
    assert isinstance(messages, list)
    return [str(m["content"]) for m in messages if m["role"] == "user"]


def test_run_continues_the_session_named_by_resume_or_continue(home: Path, workspace: Path) -> None:
    script = [{"content": "one"}, {"content": "two"}, {"content": "three"}, {"content": "four"}]
    with FakeOpenAIServer(script, require_key=KEY) as server:
        env = server_env(home, server.url, KEY)
        first = run_cli(["run", "first task", "--json"], cwd=workspace, env=env)
        assert first.returncode == 0, first.stderr
        thread_id = json.loads(first.stdout)["thread_id"]

        # -r with a unique prefix, before the subcommand (as for the REPL).
        second = run_cli(
            ["-r", thread_id[:8], "run", "second task", "--json"], cwd=workspace, env=env
        )
        assert second.returncode == 0, second.stderr
        assert json.loads(second.stdout)["thread_id"] == thread_id
        assert _user_texts(server.requests[-1]) == ["first task", "second task"]

        # --continue: the most recent session of this workspace.
        third = run_cli(["--continue", "run", "third task", "--json"], cwd=workspace, env=env)
        assert third.returncode == 0, third.stderr
        assert json.loads(third.stdout)["thread_id"] == thread_id
        assert _user_texts(server.requests[-1]) == ["first task", "second task", "third task"]

        # After the subcommand too.
        fourth = run_cli(["run", "-r", thread_id, "fourth task", "--json"], cwd=workspace, env=env)
        assert fourth.returncode == 0, fourth.stderr
        assert json.loads(fourth.stdout)["thread_id"] == thread_id
        assert len(_user_texts(server.requests[-1])) == 4

        listed = run_cli(["sessions", "list", "--json"], cwd=workspace, env=env)
        rows = json.loads(listed.stdout)
        assert [r["thread_id"] for r in rows] == [thread_id]
        assert rows[0]["message_count"] == 8
    assert server.violations == []


def test_run_refuses_resume_it_cannot_honour_in_one_line(home: Path, workspace: Path) -> None:
    with FakeOpenAIServer([{"content": "never"}], require_key=KEY) as server:
        env = server_env(home, server.url, KEY)
        cases = [
            (["-r", "nosuch", "run", "hello"], "no session matches 'nosuch'"),
            (["-r", "abc", "run", "hello", "--thread", "abc"], "--thread"),
            (["--continue", "run", "hello"], "no previous session"),
            (["run", "-r", "abc", "-c", "hello"], "not allowed with"),
        ]
        for args, expected in cases:
            res = run_cli(args, cwd=workspace, env=env)
            assert res.returncode != 0, (args, res.stdout)
            # One line saying why (argparse's own errors come after its usage lines).
            assert expected in res.stderr.strip().splitlines()[-1], (args, res.stderr)
            assert "Traceback" not in res.stderr
        assert server.requests == []  # refused before anything ran
        listed = run_cli(["sessions", "list", "--json"], cwd=workspace, env=env)
        assert json.loads(listed.stdout) == []


def test_run_continues_a_session_on_the_model_it_chose_with_slash_model(
    home: Path, workspace: Path, make_settings: Callable[..., Settings]
) -> None:
    script = [{"content": "one"}, {"content": "two"}]
    with FakeOpenAIServer(script, require_key=KEY) as server:
        env = server_env(home, server.url, KEY)
        first = run_cli(["run", "first task", "--json"], cwd=workspace, env=env)
        assert first.returncode == 0, first.stderr
        thread_id = json.loads(first.stdout)["thread_id"]
        assert server.requests[-1]["model"] == "gpt-4o-mini"

        # What /model gpt-4.1 records in the REPL.
        settings = make_settings(
            AGENTGRAPH_HOME=str(home / ".agentgraph"), OPENAI_BASE_URL=server.url
        )
        with open_store(settings) as store:
            Agent(settings, store).set_model_preference(thread_id, "gpt-4.1")

        second = run_cli(["-r", thread_id, "run", "second task", "--json"], cwd=workspace, env=env)
        assert second.returncode == 0, second.stderr
        assert server.requests[-1]["model"] == "gpt-4.1"
        assert _user_texts(server.requests[-1]) == ["first task", "second task"]
    assert server.violations == []
