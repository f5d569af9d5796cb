"""MCP at its edges, with real servers: names cut to fit stay distinct, a hung tool ends at
the configured limit, and values expanded into a config never reach the terminal."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentgraph.capabilities.mcp import TOOL_NAME_MAX_CHARS, McpManager, tool_name
from agentgraph.config import Settings
from agentgraph.persistence import open_store
from agentgraph.session.agent import Agent
from agentgraph.session.commands import mcp_lines
from tests.cli_helpers import cli_env, run_cli
from tests.fakes.openai_server import fake_openai_server
from tests.fakes.scripts import reply_text, reply_tools
from tests.integration.test_mcp import START_TIMEOUT_S, stdio_entry, write_config
from tests.mcp_servers.edge import LONG_NAMES

# Well under the 120 s default: a run that waits for the default fails the test.
TOOL_TIMEOUT_S = 2
# The whole `agentgraph run` with a hung tool: server start-up on a loaded machine plus
# the configured limit, far below the default limit.
HUNG_RUN_MAX_S = 90
DEPLOY_TOKEN = "hunter2-deploy-9f8e7d6c5b"
PROJECT_SLUG = "acme-internal-billing"


def declared(request: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools") or []]


def tool_results(request: dict[str, Any]) -> list[str]:
    return [str(m["content"]) for m in request["messages"] if m["role"] == "tool"]


def test_names_cut_to_fit_stay_distinct_and_both_tools_are_called(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    def call_every_report(body: dict[str, Any]) -> dict[str, Any]:
        # Stateless: calls whatever the request declares for the edge server's reports.
        reports = [n for n in declared(body) if n.startswith("mcp__edge__report")]
        return reply_tools(*((name, {}) for name in reports))

    script: list[Any] = [call_every_report, reply_text("both reports read")]
    with fake_openai_server(script) as server:
        settings = make_settings(OPENAI_BASE_URL=server.url)
        write_config(settings.home, {"edge": stdio_entry("edge.py")})
        mcp = McpManager(
            workspace,
            settings.home,
            base_env={"PATH": "/usr/bin:/bin"},
            start_timeout_s=START_TIMEOUT_S,
        )
        try:
            mcp.start()
            assert mcp.wait(START_TIMEOUT_S)
            with open_store(settings) as store:
                agent = Agent(settings, store, sleep=lambda _s: None, mcp=mcp)
                events = list(agent.stream_turn("t", "read both reports", workspace))
        finally:
            mcp.close()
    assert server.violations == []  # a name declared twice is a 400 from the provider
    assert events[-1]["result"].answer == "both reports read"
    names = declared(server.requests[0])
    assert len(names) == len(set(names))
    reports = [n for n in names if n.startswith("mcp__edge__report")]
    # A pure function of the server's and the tool's names: the same in every process,
    # whatever order the servers start in.
    assert reports == [tool_name("edge", n) for n in LONG_NAMES]
    assert len(set(reports)) == 2 and all(len(n) == TOOL_NAME_MAX_CHARS for n in reports)
    assert sorted(tool_results(server.requests[1])) == sorted(f"called {n}" for n in LONG_NAMES)
    # Two tools that read the same once sanitized: the first keeps the name, the second
    # is skipped (and /mcp names it) instead of a request declaring one name twice.
    assert names.count("mcp__edge__same_name") == 1
    assert mcp.servers["edge"].skipped == ["same_name"]
    listing = [text for _style, text in mcp_lines(mcp)]
    assert "    same_name (skipped: its name mcp__edge__same_name is taken)" in listing


def test_a_hung_tool_ends_at_the_configured_limit_and_the_run_goes_on(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write_config(ws / ".agentgraph", {"edge": stdio_entry("edge.py", "--no-long-names")})
    script = [
        reply_tools(("mcp__edge__hang", {})),
        reply_tools(("mcp__edge__ping", {})),
        reply_text("went on"),
    ]
    with fake_openai_server(script) as server:
        env = cli_env(
            tmp_path / "home",
            OPENAI_BASE_URL=server.url,
            AGENTGRAPH_MCP_TRUST_WORKSPACE="true",
            AGENTGRAPH_MCP_TOOL_TIMEOUT_S=str(TOOL_TIMEOUT_S),
        )
        started = time.monotonic()
        res = run_cli(
            ["run", "call the tools", "--json"], cwd=ws, env=env, timeout_s=HUNG_RUN_MAX_S
        )
        took = time.monotonic() - started
        requests = server.requests
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["answer"] == "went on"
    hung = tool_results(requests[1])[-1]
    assert f"timed out after {TOOL_TIMEOUT_S}s" in hung and "AGENTGRAPH_MCP_TOOL_TIMEOUT_S" in hung
    # The server's session outlives the abandoned call.
    assert tool_results(requests[2])[-1] == "pong"
    assert took < HUNG_RUN_MAX_S


def _leaky_config(home: Path) -> None:
    write_config(
        home,
        {
            "bad": {"command": "/nonexistent/${DEPLOY_TOKEN}/server"},
            "slug": {"command": "/nonexistent/${PROJECT_SLUG}/server"},
            "noisy": {
                "command": "sh",
                "args": ["-c", "echo token=$T >&2; exit 3"],
                "env": {"T": "${DEPLOY_TOKEN}"},
            },
        },
    )


def test_values_expanded_into_a_failing_config_are_redacted_on_stderr(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _leaky_config(home / ".agentgraph")
    ws = tmp_path / "ws"
    ws.mkdir()
    with fake_openai_server([reply_text("ok")]) as server:
        env = cli_env(
            home, OPENAI_BASE_URL=server.url, DEPLOY_TOKEN=DEPLOY_TOKEN, PROJECT_SLUG=PROJECT_SLUG
        )
        res = run_cli(["run", "hello", "--json"], cwd=ws, env=env)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["answer"] == "ok"
    for secret in (DEPLOY_TOKEN, PROJECT_SLUG):
        assert secret not in res.stderr and secret not in res.stdout
    stderr = " ".join(res.stderr.split())
    assert "MCP server 'bad' failed: [Errno 2]" in stderr
    assert "/nonexistent/[REDACTED]/server" in stderr
    # What the server itself printed on its stderr passes through the same redaction.
    assert "token=[REDACTED]" in stderr
    assert "Traceback" not in res.stderr


def test_values_expanded_into_a_url_stay_out_of_the_logs(tmp_path: Path) -> None:
    home = tmp_path / "home"
    # Nothing listens on port 9: the transport logs the URL it connects to, then fails.
    url = "http://127.0.0.1:9/mcp?project=${PROJECT_SLUG}"
    write_config(
        home / ".agentgraph",
        {"web": {"type": "http", "url": url, "headers": {"X-Token": "${DEPLOY_TOKEN}"}}},
    )
    ws = tmp_path / "ws"
    ws.mkdir()
    with fake_openai_server([reply_text("ok")]) as server:
        env = cli_env(
            home,
            OPENAI_BASE_URL=server.url,
            DEPLOY_TOKEN=DEPLOY_TOKEN,
            PROJECT_SLUG=PROJECT_SLUG,
            AGENTGRAPH_DEBUG="1",  # log records on stderr too
        )
        res = run_cli(["run", "hello", "--json"], cwd=ws, env=env)
    assert res.returncode == 0, res.stderr
    log = (home / ".agentgraph" / "agentgraph.log").read_text(encoding="utf-8")
    assert "mcp?project=[REDACTED]" in log  # the record is there, its value is not
    for secret in (DEPLOY_TOKEN, PROJECT_SLUG):
        assert secret not in log and secret not in res.stderr and secret not in res.stdout


def test_mcp_listing_and_problems_never_show_expanded_values(tmp_path: Path) -> None:
    home = tmp_path / "home"
    _leaky_config(home)
    # A settings' secret (the API key) written into a workspace config as it is.
    settings_key = "sk-settings-key-0123456789abcdef"
    write_config(tmp_path / "ws" / ".agentgraph", {"keyed": {"command": f"/no/{settings_key}"}})
    manager = McpManager(
        tmp_path / "ws",
        home,
        base_env={"PATH": "/usr/bin:/bin"},
        env={"DEPLOY_TOKEN": DEPLOY_TOKEN, "PROJECT_SLUG": PROJECT_SLUG},
        start_timeout_s=START_TIMEOUT_S,
        secrets=[settings_key],
    )
    try:
        manager.start()
        assert manager.wait(START_TIMEOUT_S)
        shown = "\n".join(text for _style, text in mcp_lines(manager))
        shown += "\n" + "\n".join(manager.problems)
    finally:
        manager.close()
    assert {s.state for s in manager.servers.values()} == {"failed"}
    assert "bad  stdio  failed: [Errno 2]" in shown and "/nonexistent/[REDACTED]/server" in shown
    assert "keyed  stdio  failed" in shown and "/no/[REDACTED]" in shown
    for secret in (DEPLOY_TOKEN, PROJECT_SLUG, settings_key):
        assert secret not in shown
