"""Context accounting and compaction from the CLI: sessions show --json, sessions compact."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli_helpers import cli_env, run_cli
from tests.fakes.openai_server import FakeOpenAIServer


def test_show_json_reports_context_and_compact_shrinks_it(tmp_path: Path, workspace: Path) -> None:
    (workspace / "big.txt").write_text("".join(f"row {n}: some data here\n" for n in range(3000)))
    script = [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "big.txt"}}]},
        {"content": "read it"},
        {"content": "second answer"},
        {"content": "third answer"},
        {"content": "SUMMARY: user asked to read big.txt; the rows are numbered."},
    ]
    with FakeOpenAIServer(script) as server:
        env = cli_env(tmp_path / "home", OPENAI_BASE_URL=server.url, AGENTGRAPH_MODEL="gpt-4o-mini")
        for prompt in ("read big.txt", "and again", "one more"):
            done = run_cli(["run", prompt, "--thread", "ctx1"], cwd=workspace, env=env)
            assert done.returncode == 0, done.stderr
        shown = run_cli(["sessions", "show", "ctx1", "--json"], cwd=workspace, env=env)
        assert shown.returncode == 0, shown.stderr
        context = json.loads(shown.stdout)["context"]
        assert context["window"] == 128_000 and 0 < context["tokens"] < context["budget"]
        assert context["source"] in ("exact", "reported", "estimate")
        assert set(context["by_category"]) >= {"system_prompt", "tool_schemas", "tool_results"}
        assert context["by_category"]["tool_results"] > 1000
        assert len(context["largest"]) == 5 and context["largest"][0]["role"] == "tool"

        compacted = run_cli(
            ["sessions", "compact", "ctx1", "--focus", "row numbers"], cwd=workspace, env=env
        )
        assert compacted.returncode == 0, compacted.stderr
        assert "Compacted:" in compacted.stderr
        summary_request = json.dumps(server.requests[-1]["messages"])
        assert (
            "CONTEXT CHECKPOINT COMPACTION" in summary_request and "row numbers" in summary_request
        )

        after = json.loads(
            run_cli(["sessions", "show", "ctx1", "--json"], cwd=workspace, env=env).stdout
        )
    assert after["compactions"] == 1
    assert after["context"]["compactions"][0]["trigger"] == "manual"
    assert after["context"]["by_category"]["summaries"] > 0
    assert server.violations == []


def test_compact_unknown_session_is_one_line(tmp_path: Path, workspace: Path) -> None:
    env = cli_env(tmp_path / "home", OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    result = run_cli(["sessions", "compact", "nope"], cwd=workspace, env=env)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "no session matches" in result.stderr
