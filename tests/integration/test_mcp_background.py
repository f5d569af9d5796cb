"""MCP servers connect in the background: the session starts at once, tools join between
turns at their config position, and ``agentgraph run`` waits (bounded) for its servers."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentgraph.capabilities.mcp import MCP_TURN_WAIT_S, McpManager
from agentgraph.config import Settings
from agentgraph.persistence import open_store
from agentgraph.session.agent import Agent
from tests.cli_helpers import cli_env, run_cli
from tests.fakes.openai_server import FakeOpenAIServer, fake_openai_server
from tests.fakes.scripts import reply_text, reply_tools
from tests.integration.test_mcp import START_TIMEOUT_S, stdio_entry, write_config
from tests.pty_helpers import ENTER, PROMPT, close_repl, plain, pty_env, spawn_repl

KEY = "sk-test-secret-0123456789abcdef"
DEMO_TOOLS = ["mcp__{}__add", "mcp__{}__env_value", "mcp__{}__big", "mcp__{}__fail"]
POLL_S = 0.2
# A gated server must not time out while the test holds it (the real default is 20 s).
GATED_START_TIMEOUT_S = 300


def until(predicate: Callable[[], bool], timeout_s: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(POLL_S)


def declared(request: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools") or []]


@pytest.fixture
def managers() -> Iterator[list[McpManager]]:
    made: list[McpManager] = []
    yield made
    for manager in made:
        manager.close()


def test_start_returns_at_once_and_tools_keep_config_order(
    tmp_path: Path, managers: list[McpManager]
) -> None:
    gate = tmp_path / "release"
    ws = tmp_path / "ws"
    write_config(
        ws / ".agentgraph",
        {
            "first": stdio_entry("demo.py", "--wait-for", str(gate)),
            "second": stdio_entry("demo.py"),
        },
    )
    manager = McpManager(
        ws, tmp_path / "home", base_env={"PATH": "/usr/bin:/bin"}, start_timeout_s=START_TIMEOUT_S
    )
    managers.append(manager)
    manager.start()
    # start() did not wait: the gated server cannot have answered yet.
    assert manager.servers["first"].state == "connecting"
    assert manager.pending() in (["first", "second"], ["first"])
    until(lambda: manager.servers["second"].state == "connected")
    assert manager.servers["first"].state == "connecting"
    assert [t.name for t in manager.tools] == [n.format("second") for n in DEMO_TOOLS]
    assert manager.wait(0.1) is False  # bounded: "first" is still held
    gate.touch()
    assert manager.wait(START_TIMEOUT_S) is True
    # Config order, not the order in which the servers answered.
    assert [t.name for t in manager.tools] == [
        *(n.format("first") for n in DEMO_TOOLS),
        *(n.format("second") for n in DEMO_TOOLS),
    ]


def test_a_server_that_connects_mid_turn_joins_at_the_next_turn(
    make_settings: Callable[..., Settings],
    workspace: Path,
    tmp_path: Path,
    managers: list[McpManager],
) -> None:
    gate = tmp_path / "release"
    manager: list[McpManager] = []

    def release_then_list_files(_body: dict[str, Any]) -> dict[str, Any]:
        # The server connects while this turn runs: the turn's tool list must not change.
        gate.touch()
        until(lambda: manager[0].servers["gated"].state == "connected")
        return reply_tools(("list_dir", {"path": "."}))

    script: list[Any] = [
        release_then_list_files,
        reply_text("listed"),
        reply_tools(("mcp__gated__add", {"a": 19, "b": 23})),
        reply_text("it is 42"),
    ]
    with fake_openai_server(script) as server:
        settings = make_settings(OPENAI_BASE_URL=server.url)
        write_config(settings.home, {"gated": stdio_entry("demo.py", "--wait-for", str(gate))})
        mcp = McpManager(
            workspace,
            settings.home,
            base_env={"PATH": "/usr/bin:/bin"},
            start_timeout_s=GATED_START_TIMEOUT_S,
            turn_wait_s=0.1,
        )
        managers.append(mcp)
        manager.append(mcp)
        mcp.start()
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None, mcp=mcp)
            first = list(agent.stream_turn("t1", "list the files", workspace))
            assert first[-1]["result"].answer == "listed"
            second = list(agent.stream_turn("t1", "add 19 and 23", workspace))
            assert second[-1]["result"].answer == "it is 42"
    before, within, after = (declared(r) for r in server.requests[:3])
    assert not any(n.startswith("mcp__") for n in before)
    assert within == before  # never changed within a turn
    # From the next turn, at the config position: after the built-ins, before load_skill.
    at = before.index("load_skill")
    assert after == [*before[:at], *(n.format("gated") for n in DEMO_TOOLS), *before[at:]]
    results = [m for m in server.requests[3]["messages"] if m["role"] == "tool"]
    assert results[-1]["content"] == "42"
    notices = [e["text"] for e in second if e.get("type") == "notice"]
    assert any("MCP server 'gated' connected" in n for n in notices), notices


GATED_LINE = re.compile(r"gated\s+stdio\s+(connected \(4 tools\)|connecting)")


def test_repl_prompt_does_not_wait_for_a_server_that_is_still_starting(
    home: Path, workspace: Path, tmp_path: Path
) -> None:
    gate = tmp_path / "release"
    write_config(
        workspace / ".agentgraph",
        {
            "gated": stdio_entry("demo.py", "--wait-for", str(gate)),
            "missing": {"command": "/no/such/mcp-server"},
        },
    )
    script = [
        reply_tools(("list_dir", {"path": "."})),
        reply_text("first done"),
        reply_tools(("mcp__gated__add", {"a": 19, "b": 23})),
        reply_text("sum is 42"),
    ]
    with FakeOpenAIServer(script, require_key=KEY) as server:
        env = pty_env(
            home,
            server.url,
            KEY,
            AGENTGRAPH_MCP_TRUST_WORKSPACE="true",
            AGENTGRAPH_MCP_START_TIMEOUT_S=str(GATED_START_TIMEOUT_S),
        )
        child = spawn_repl([], cwd=workspace, env=env)
        try:
            # The gate is closed: the prompt is there while the server cannot have answered.
            child.expect_exact(PROMPT)
            child.send("/mcp" + ENTER)
            child.expect(GATED_LINE)
            assert child.match.group(1) == "connecting"
            child.expect_exact(PROMPT)
            # A first turn runs with the built-in tools, the server still starting.
            child.send("list the files" + ENTER)
            child.expect_exact("first done")
            child.expect_exact(PROMPT)
            assert not any(n.startswith("mcp__") for n in declared(server.requests[0]))
            gate.touch()
            deadline = time.monotonic() + START_TIMEOUT_S
            while True:
                child.send("/mcp" + ENTER)
                child.expect(GATED_LINE)
                if child.match.group(1) != "connecting":
                    break
                child.expect_exact(PROMPT)
                assert time.monotonic() < deadline, "the released server never connected"
                time.sleep(POLL_S)
            child.expect_exact("missing  stdio  failed: ")
            child.expect_exact(PROMPT)
            # From the next turn its tools are there.
            child.send("add 19 and 23" + ENTER)
            child.expect_exact("sum is 42")
            child.expect_exact(PROMPT)
        finally:
            close_repl(child)
    output = plain(child.logfile_read.getvalue())
    assert "Traceback" not in output
    assert "MCP server 'gated' connected" in output
    assert "mcp__gated__add" in declared(server.requests[2])
    results = [m for m in server.requests[3]["messages"] if m["role"] == "tool"]
    assert results[-1]["content"] == "42"


def test_run_waits_for_a_slow_server_before_its_first_request(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    # Slower than a REPL turn waits: only run's own wait gets its tools into request 1.
    slow = stdio_entry("demo.py", "--delay", str(MCP_TURN_WAIT_S + 2))
    write_config(ws / ".agentgraph", {"slow": slow})
    script = [reply_tools(("mcp__slow__add", {"a": 1, "b": 2})), reply_text("three")]
    with fake_openai_server(script) as server:
        env = cli_env(
            tmp_path / "home", OPENAI_BASE_URL=server.url, AGENTGRAPH_MCP_TRUST_WORKSPACE="true"
        )
        res = run_cli(["run", "add 1 and 2", "--json"], cwd=ws, env=env)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["answer"] == "three"
    assert "mcp__slow__add" in declared(server.requests[0])
    assert [m for m in server.requests[1]["messages"] if m["role"] == "tool"][-1]["content"] == "3"


def test_run_with_a_hanging_server_goes_on_without_it_after_the_start_limit(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    write_config(ws / ".agentgraph", {"hangs": stdio_entry("demo.py", "--hang")})
    with fake_openai_server([reply_text("done anyway")]) as server:
        env = cli_env(
            tmp_path / "home",
            OPENAI_BASE_URL=server.url,
            AGENTGRAPH_MCP_TRUST_WORKSPACE="true",
            AGENTGRAPH_MCP_START_TIMEOUT_S="2",
        )
        res = run_cli(["run", "hello"], cwd=ws, env=env)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "done anyway"
    assert "MCP server 'hangs' failed: no answer within 2s" in " ".join(res.stderr.split())
    assert "Traceback" not in res.stderr
    assert not any(n.startswith("mcp__") for n in declared(server.requests[0]))


def test_bad_start_timeout_setting_is_one_line(tmp_path: Path) -> None:
    env = cli_env(tmp_path / "home", AGENTGRAPH_MCP_START_TIMEOUT_S="soon")
    res = run_cli(["run", "hello"], cwd=tmp_path, env=env)
    assert res.returncode != 0
    assert "AGENTGRAPH_MCP_START_TIMEOUT_S" in res.stderr or "mcp_start_timeout_s" in res.stderr
    assert "Traceback" not in res.stderr
