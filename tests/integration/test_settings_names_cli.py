"""A setting is named as the user wrote it: its environment name in the environment and
in a ``.env``, its field name in a TOML file — in refusals, in what is ignored and in
``agentgraph config``. The real CLI in a subprocess; no model is called.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli_helpers import cli_env, run_cli

# A context window below the smallest the settings accept (1024).
TOO_SMALL_WINDOW = "12"


def _rows(stdout: str) -> dict[str, tuple[str, str, str]]:
    """``agentgraph config``'s rows: setting -> (variable, value, from)."""
    rows: dict[str, tuple[str, str, str]] = {}
    for line in stdout.splitlines()[1:]:
        parts = line.split(maxsplit=3)
        if len(parts) == 4:
            rows[parts[0]] = (parts[1], parts[2], parts[3])
    return rows


@pytest.mark.parametrize("name", ["AGENTGRAPH_CONTEXT_WINDOW", "agentgraph_context_window"])
def test_a_bad_value_in_the_environment_is_refused_under_its_environment_name(
    home: Path, workspace: Path, name: str
) -> None:
    env = cli_env(home, **{name: TOO_SMALL_WINDOW})
    result = run_cli(["config"], cwd=workspace, env=env)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("agentgraph: invalid setting AGENTGRAPH_CONTEXT_WINDOW: "), lines
    assert "Traceback" not in result.stderr


def test_a_bad_project_value_is_skipped_under_the_name_its_file_wrote(
    home: Path, workspace: Path
) -> None:
    (workspace / ".env").write_text(
        f"AGENTGRAPH_CONTEXT_WINDOW={TOO_SMALL_WINDOW}\nAGENTGRAPH_MODEL=project-model\n",
        encoding="utf-8",
    )
    (workspace / ".agentgraph").mkdir()
    (workspace / ".agentgraph" / "config.toml").write_text(
        "max_output_tokens = 1\n", encoding="utf-8"
    )
    result = run_cli(["config"], cwd=workspace, env=cli_env(home))
    assert result.returncode == 0, result.stderr
    assert "ignored AGENTGRAPH_CONTEXT_WINDOW from .env: " in result.stderr
    assert "ignored max_output_tokens from .agentgraph/config.toml: " in result.stderr
    rows = _rows(result.stdout)
    assert rows["context_window"] == ("AGENTGRAPH_CONTEXT_WINDOW", "(unset)", "default")
    assert rows["max_output_tokens"] == ("AGENTGRAPH_MAX_OUTPUT_TOKENS", "(unset)", "default")
    assert rows["model"] == ("AGENTGRAPH_MODEL", "project-model", "project (.env)")


def test_config_names_each_variable_and_where_a_value_came_from(
    home: Path, workspace: Path
) -> None:
    (workspace / ".env").write_text("AGENTGRAPH_SANDBOX=on\nMAX_LOOPS=9\n", encoding="utf-8")
    env = cli_env(
        home,
        agentgraph_summary_model="env-summary",
        TOOL_OUTPUT_MAX_TOKENS="300",
        OPENAI_BASE_URL="http://127.0.0.1:9/v1",
        AGENTGRAPH_BASE_URL="http://127.0.0.1:8/v1",
    )
    result = run_cli(["config"], cwd=workspace, env=env)
    assert result.returncode == 0, result.stderr
    rows = _rows(result.stdout)
    assert rows["summary_model"] == (
        "AGENTGRAPH_SUMMARY_MODEL",
        "env-summary",
        "environment (AGENTGRAPH_SUMMARY_MODEL)",
    )
    # An earlier name still sets its setting; the variable shown is today's name.
    variable, value, origin = rows["tool_output_max_tokens"]
    assert (variable, value) == ("AGENTGRAPH_TOOL_OUTPUT_MAX_TOKENS", "300")
    assert origin.startswith("environment (")
    assert rows["base_url"] == (
        "OPENAI_BASE_URL",
        "http://127.0.0.1:9/v1",
        "environment (OPENAI_BASE_URL)",
    )
    assert rows["max_loops"] == ("MAX_LOOPS", "9", "project (.env)")
    # The sandbox is the user's: the project's .env does not set it, and says so.
    assert rows["sandbox"][0] == "AGENTGRAPH_SANDBOX"
    assert rows["sandbox"][2] == "environment (AGENTGRAPH_SANDBOX)"
    assert "AGENTGRAPH_SANDBOX" in result.stderr
