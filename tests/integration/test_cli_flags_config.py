"""The command line that sets things for one invocation, and ``agentgraph config``.

``--version``, ``--model``/``-m`` and ``--max-turns`` on the REPL and on ``run``; the
project's ``.agentgraph/config.toml``; ``agentgraph config`` naming where every value
came from. The real CLI in a subprocess (the REPL in a pseudo-terminal) against the
fake OpenAI-compatible server on loopback.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from pathlib import Path

from agentgraph.config import Settings
from agentgraph.persistence import open_store
from agentgraph.session.agent import Agent
from tests.cli_helpers import cli_env, run_cli, server_env
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.scripts import reply_text
from tests.pty_helpers import ENTER, PROMPT, close_repl, expect_on_screen, pty_env, spawn_repl

KEY = "sk-test-secret-flags-0123456789abcdef"
USER_DB_PASSWORD = "user-config-password-42"


def _models(server: FakeOpenAIServer) -> list[str]:
    return [str(r["model"]) for r in server.requests if "messages" in (r or {})]


def test_version_is_the_installed_packages(home: Path, workspace: Path) -> None:
    result = run_cli(["--version"], cwd=workspace, env=cli_env(home))
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"agentgraph {importlib.metadata.version('agentgraph')}\n"


def test_model_flag_before_or_after_run_beats_the_environment(home: Path, workspace: Path) -> None:
    script = [reply_text("one"), reply_text("two"), reply_text("three")]
    with FakeOpenAIServer(script, require_key=KEY) as server:
        env = server_env(home, server.url, KEY, AGENTGRAPH_MODEL="gpt-4o-mini")
        for args in (["run", "-m", "gpt-4.1", "hi"], ["--model", "gpt-4.1", "run", "hi"]):
            result = run_cli(args, cwd=workspace, env=env)
            assert result.returncode == 0, result.stderr
        plain = run_cli(["run", "hi"], cwd=workspace, env=env)
        assert plain.returncode == 0, plain.stderr
    assert _models(server) == ["gpt-4.1", "gpt-4.1", "gpt-4o-mini"]


def test_model_flag_on_the_repl(home: Path, workspace: Path) -> None:
    with FakeOpenAIServer([reply_text("Hello from 4.1.")], require_key=KEY) as server:
        env = pty_env(home, server.url, KEY, AGENTGRAPH_MODEL="gpt-4o-mini")
        child = spawn_repl(["-m", "gpt-4.1"], cwd=workspace, env=env)
        try:
            child.expect_exact(PROMPT)
            expect_on_screen(child, "agentgraph — gpt-4.1 —")
            child.send("hi" + ENTER)
            child.expect_exact("Hello from 4.1.")
            child.expect_exact(PROMPT)
        finally:
            close_repl(child)
    assert _models(server) == ["gpt-4.1"]


def test_max_turns_beats_max_loops_for_one_invocation(home: Path, workspace: Path) -> None:
    script = [{"tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}]}]
    with FakeOpenAIServer(script, on_exhausted="repeat_last", require_key=KEY) as server:
        env = server_env(home, server.url, KEY, MAX_LOOPS="50")
        result = run_cli(["run", "--max-turns", "2", "look around"], cwd=workspace, env=env)
    assert result.returncode == 3, result.stderr  # stopped at the step limit
    assert "MAX_LOOPS=2" in result.stderr


def test_bad_flag_values_are_one_line_exit_2(home: Path, workspace: Path) -> None:
    env = cli_env(home, OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    out_of_range = run_cli(["--max-turns", "0", "run", "hi"], cwd=workspace, env=env)
    assert out_of_range.returncode == 2
    lines = out_of_range.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("agentgraph: invalid --max-turns 0:"), lines
    not_a_number = run_cli(["run", "--max-turns", "many", "hi"], cwd=workspace, env=env)
    assert not_a_number.returncode == 2 and "not a whole number: 'many'" in not_a_number.stderr
    assert "Traceback" not in out_of_range.stderr + not_a_number.stderr


def _config_lines(stdout: str) -> dict[str, tuple[str, str]]:
    """``agentgraph config``'s rows: setting -> (value, from)."""
    rows: dict[str, tuple[str, str]] = {}
    for line in stdout.splitlines()[1:]:
        parts = line.split(maxsplit=3)
        if len(parts) == 4 and not line.startswith("precedence"):
            rows[parts[0]] = (parts[2], parts[3])
    return rows


def test_config_says_where_each_value_came_from_and_hides_secrets(
    home: Path, workspace: Path
) -> None:
    user_file = home / ".agentgraph" / "config.toml"
    user_file.parent.mkdir(parents=True)
    user_file.write_text(
        f'database_url = "postgresql://me:{USER_DB_PASSWORD}@127.0.0.1/db"\n'
        'base_url = "http://127.0.0.1:9/v1"\n'
        "max_loops = 7\n",
        encoding="utf-8",
    )
    (workspace / ".env").write_text("AGENTGRAPH_CONTEXT_WINDOW=8192\n", encoding="utf-8")
    (workspace / ".agentgraph").mkdir()
    (workspace / ".agentgraph" / "config.toml").write_text(
        'max_loops = 42\nbash_network = "on"\n', encoding="utf-8"
    )
    env = cli_env(home, OPENAI_API_KEY=KEY)
    result = run_cli(["-m", "flag-model", "config"], cwd=workspace, env=env)
    assert result.returncode == 0, result.stderr
    rows = _config_lines(result.stdout)
    assert set(rows) >= {"model", "api_key", "base_url", "max_loops", "compact_threshold"}
    assert rows["model"] == ("flag-model", "flag")
    assert rows["api_key"] == ("***", "environment (OPENAI_API_KEY)")
    assert rows["database_url"] == ("***", f"user ({user_file})")
    assert rows["base_url"] == ("http://127.0.0.1:9/v1", f"user ({user_file})")
    assert rows["context_window"] == ("8192", "project (.env)")
    assert rows["max_loops"] == ("42", "project (.agentgraph/config.toml)")
    # Only the user decides the commands' network: the project file's value is ignored.
    assert rows["bash_network"] == ("off", "default")
    assert rows["compact_threshold"] == ("0.9", "default")
    assert KEY not in result.stdout + result.stderr
    assert USER_DB_PASSWORD not in result.stdout + result.stderr
    assert "ignored bash_network from ./.agentgraph/config.toml" in result.stderr


def test_project_config_file_is_limited_until_trusted(home: Path, workspace: Path) -> None:
    with (
        FakeOpenAIServer([reply_text("user endpoint")]) as user,
        FakeOpenAIServer([reply_text("project endpoint")]) as project,
    ):
        user_file = home / ".agentgraph" / "config.toml"
        user_file.parent.mkdir(parents=True)
        user_file.write_text(
            f'base_url = "{user.url}"\nprovider_max_retries = 0\n', encoding="utf-8"
        )
        project_file = workspace / ".agentgraph" / "config.toml"
        project_file.parent.mkdir()
        project_file.write_text(
            f'model = "gpt-4.1"\nbase_url = "{project.url}"\n', encoding="utf-8"
        )
        env = cli_env(home, OPENAI_API_KEY=KEY)
        first = run_cli(["run", "hi"], cwd=workspace, env=env)
        assert first.returncode == 0, first.stderr
        assert "user endpoint" in first.stdout and project.requests == []
        assert "ignored base_url from ./.agentgraph/config.toml" in first.stderr
        assert _models(user) == ["gpt-4.1"]  # the project may pick the model
        allowed = run_cli(["trust"], cwd=workspace, env=env)
        assert allowed.returncode == 0, allowed.stderr
        assert "allowed ./.agentgraph/config.toml as it is now (it sets base_url)" in (
            allowed.stdout
        )
        assert project.url not in allowed.stdout
        second = run_cli(["run", "hi", "--thread", "two"], cwd=workspace, env=env)
        assert second.returncode == 0, second.stderr
        assert "project endpoint" in second.stdout and "ignored" not in second.stderr
    assert len(user.requests) == 1 and len(project.requests) == 1


def test_model_flag_beats_the_model_a_session_chose_with_slash_model(
    home: Path, workspace: Path, make_settings: Callable[..., Settings]
) -> None:
    script = [reply_text("one"), reply_text("two"), reply_text("three")]
    with FakeOpenAIServer(script, require_key=KEY) as server:
        env = server_env(home, server.url, KEY)
        first = run_cli(["run", "first", "--thread", "chose"], cwd=workspace, env=env)
        assert first.returncode == 0, first.stderr
        settings = make_settings(
            AGENTGRAPH_HOME=str(home / ".agentgraph"), OPENAI_BASE_URL=server.url
        )
        with open_store(settings) as store:  # what /model gpt-4.1 records in the REPL
            Agent(settings, store).set_model_preference("chose", "gpt-4.1")
        flagged = run_cli(["-r", "chose", "run", "-m", "gpt-4o", "second"], cwd=workspace, env=env)
        assert flagged.returncode == 0, flagged.stderr
        unflagged = run_cli(["-r", "chose", "run", "third"], cwd=workspace, env=env)
        assert unflagged.returncode == 0, unflagged.stderr
    assert _models(server) == ["gpt-4o-mini", "gpt-4o", "gpt-4.1"]


def test_model_flag_on_a_resumed_repl_session_switches_it_as_slash_model_would(
    home: Path, workspace: Path, make_settings: Callable[..., Settings]
) -> None:
    script = [reply_text("one"), reply_text("Answered by 4o."), reply_text("three")]
    with FakeOpenAIServer(script, require_key=KEY) as server:
        env = server_env(home, server.url, KEY)
        first = run_cli(["run", "first", "--thread", "chose"], cwd=workspace, env=env)
        assert first.returncode == 0, first.stderr
        settings = make_settings(
            AGENTGRAPH_HOME=str(home / ".agentgraph"), OPENAI_BASE_URL=server.url
        )
        with open_store(settings) as store:  # what /model gpt-4.1 records in the REPL
            Agent(settings, store).set_model_preference("chose", "gpt-4.1")
        child = spawn_repl(
            ["-r", "chose", "-m", "gpt-4o"], cwd=workspace, env=pty_env(home, server.url, KEY)
        )
        try:
            child.expect_exact(PROMPT)
            child.send("second" + ENTER)
            child.expect_exact("Answered by 4o.")
            child.expect_exact(PROMPT)
        finally:
            close_repl(child)
        later = run_cli(["-r", "chose", "run", "third"], cwd=workspace, env=env)
        assert later.returncode == 0, later.stderr
    assert _models(server) == ["gpt-4o-mini", "gpt-4o", "gpt-4o"]


PROJECT_FILE_PROBLEMS = (
    ("config.toml", "model = [", "not valid TOML"),
    ("config.toml", "no_such = 1\n", "unknown setting 'no_such'"),
    ("config.toml", 'max_loops = "lots"\n', "max_loops"),
    (".env", "AGENTGRAPH_CONTEXT_WINDOW=huge\n", "AGENTGRAPH_CONTEXT_WINDOW"),
)


def test_a_bad_project_settings_file_is_said_in_one_line_and_skipped(
    home: Path, workspace: Path
) -> None:
    # A cloned repository's files are input: what is wrong in them is skipped with one
    # line, never a folder where no command (not even `agentgraph trust`) starts.
    (workspace / ".agentgraph").mkdir()
    for name, text, needle in PROJECT_FILE_PROBLEMS:
        project_file = workspace / (".agentgraph/config.toml" if name == "config.toml" else name)
        project_file.write_text(text, encoding="utf-8")
        for args in (["config"], ["trust"]):
            result = run_cli(args, cwd=workspace, env=cli_env(home))
            assert result.returncode == 0, (text, result.stderr)
            lines = result.stderr.strip().splitlines()
            assert len(lines) == 1 and needle in lines[0] and name in lines[0], (text, lines)
        rows = _config_lines(run_cli(["config"], cwd=workspace, env=cli_env(home)).stdout)
        assert rows["max_loops"][1] == "default" and rows["context_window"][1] != "project (.env)"
        project_file.unlink()
        (home / ".agentgraph" / "settings-trusted.json").unlink(missing_ok=True)


def test_a_bad_user_config_file_is_still_one_line_exit_2(home: Path, workspace: Path) -> None:
    user_file = home / ".agentgraph" / "config.toml"
    user_file.parent.mkdir(parents=True)
    user_file.write_text('max_loops = "lots"\n', encoding="utf-8")
    result = run_cli(["config"], cwd=workspace, env=cli_env(home))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "MAX_LOOPS" in lines[0], lines
