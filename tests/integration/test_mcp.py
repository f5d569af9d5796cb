"""MCP servers (real ones: the SDK's FastMCP over stdio and streamable HTTP) as tools."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentgraph.capabilities.mcp import (
    MCP_RESULT_MAX_CHARS,
    McpConfigError,
    McpManager,
    connection_for,
    read_config,
    tool_name,
)

SERVERS = Path(__file__).parents[1] / "mcp_servers"
# Python MCP servers import a web stack: on a loaded 2-core machine start-up takes seconds.
START_TIMEOUT_S = 60.0


def stdio_entry(script: str, *args: str, **extra: object) -> dict[str, object]:
    return {"command": sys.executable, "args": [str(SERVERS / script), *args], **extra}


def write_config(folder: Path, servers: dict[str, object]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "mcp.json").write_text(json.dumps({"mcpServers": servers}))


@pytest.fixture
def manager_for(tmp_path: Path) -> Iterator:
    made: list[McpManager] = []

    def make(servers: dict[str, object], **kwargs: object) -> McpManager:
        ws = tmp_path / "ws"
        write_config(ws / ".agentgraph", servers)
        manager = McpManager(
            ws,
            tmp_path / "home",
            base_env={"PATH": "/usr/bin:/bin"},
            start_timeout_s=kwargs.pop("start_timeout_s", START_TIMEOUT_S),  # type: ignore[arg-type]
            **kwargs,  # type: ignore[arg-type]
        )
        made.append(manager)
        manager.start()
        manager.wait(None)  # each server's start limit bounds it
        return manager

    yield make
    for manager in made:
        manager.close()


def by_name(manager: McpManager, name: str):  # type: ignore[no-untyped-def]
    return next(t for t in manager.tools if t.name == name)


def test_stdio_server_tools_are_called_through_one_held_session(manager_for) -> None:  # type: ignore[no-untyped-def]
    manager = manager_for({"demo": stdio_entry("demo.py")})
    assert manager.servers["demo"].state == "connected"
    assert sorted(manager.servers["demo"].tools) == [
        "mcp__demo__add",
        "mcp__demo__big",
        "mcp__demo__env_value",
        "mcp__demo__fail",
    ]
    add = by_name(manager, "mcp__demo__add")
    assert add.invoke({"a": 2, "b": 40}) == "42"
    assert add.invoke({"a": 1, "b": 1}) == "2"
    # A failing tool is an error result for the model, not an exception.
    assert "boom" in by_name(manager, "mcp__demo__fail").invoke({"reason": "boom"})


def test_stdio_server_gets_no_secrets_from_the_agent_environment(
    manager_for, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_secretsecretsecretsecretsecret1234")
    entry = stdio_entry("demo.py", env={"GREETING": "hi ${USER_NAME:-anon}"})
    manager = manager_for({"demo": entry})
    env_value = by_name(manager, "mcp__demo__env_value")
    assert env_value.invoke({"name": "GITHUB_TOKEN"}) == ""
    assert env_value.invoke({"name": "GREETING"}) == "hi anon"


def test_huge_result_is_cut_before_it_reaches_the_model(manager_for) -> None:  # type: ignore[no-untyped-def]
    manager = manager_for({"demo": stdio_entry("demo.py")})
    text = by_name(manager, "mcp__demo__big").invoke({"chars": MCP_RESULT_MAX_CHARS + 5000})
    assert len(text) < MCP_RESULT_MAX_CHARS + 200
    assert "more characters cut" in text


def test_broken_servers_are_one_line_each_and_the_good_one_still_works(manager_for) -> None:  # type: ignore[no-untyped-def]
    manager = manager_for(
        {
            "demo": stdio_entry("demo.py"),
            "missing": {"command": "/no/such/mcp-server"},
            "hangs": stdio_entry("demo.py", "--hang"),
            "badurl": {"url": "ftp://example"},
            "nothing": {},
        },
        start_timeout_s=20.0,
    )
    states = {name: s.state for name, s in manager.servers.items()}
    assert states == {
        "demo": "connected",
        "missing": "failed",
        "hangs": "failed",
        "badurl": "failed",
        "nothing": "failed",
    }
    assert all("\n" not in p for p in manager.problems)
    assert "no answer within" in (manager.servers["hangs"].error or "")
    assert by_name(manager, "mcp__demo__add").invoke({"a": 1, "b": 2}) == "3"


def test_hostile_schemas_are_skipped_and_odd_names_sanitized(manager_for) -> None:  # type: ignore[no-untyped-def]
    manager = manager_for({"hostile": stdio_entry("hostile.py")})
    status = manager.servers["hostile"]
    assert status.state == "connected"
    assert sorted(status.skipped) == ["huge_schema", "not_object"]
    assert status.tools == ["mcp__hostile__ok_tool_with_odd_chars"]
    assert by_name(manager, status.tools[0]).invoke({}) == "called ok tool/with:odd chars"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_server() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(SERVERS / "demo.py"), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.2)
    yield f"http://127.0.0.1:{port}/mcp"
    proc.terminate()
    proc.wait(timeout=10)


def test_streamable_http_server(manager_for, http_server: str) -> None:  # type: ignore[no-untyped-def]
    manager = manager_for({"web": {"type": "http", "url": http_server}})
    assert manager.servers["web"].state == "connected", manager.servers["web"].error
    assert by_name(manager, "mcp__web__add").invoke({"a": 20, "b": 22}) == "42"


def test_bad_config_files_are_one_line_problems(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "mcp.json").write_text("{not json")
    ws = tmp_path / "ws"
    (ws / ".agentgraph").mkdir(parents=True)
    (ws / ".agentgraph" / "mcp.json").write_text('{"servers": {}}')
    manager = McpManager(ws, home)
    manager.start()
    assert manager.tools == [] and manager.pending() == []
    assert len(manager.problems) == 2
    assert "not valid JSON" in manager.problems[0]
    assert "mcpServers" in manager.problems[1]


def test_config_parsing_rules(tmp_path: Path) -> None:
    assert read_config(tmp_path / "absent.json") == {}
    with pytest.raises(McpConfigError):
        connection_for(
            "x", {"command": "s", "args": "not a list"}, env={}, base_env={}, cwd=tmp_path
        )
    conn = connection_for(
        "x",
        {"type": "http", "url": "https://h/${P:-mcp}", "headers": {"A": "${TOKEN}"}},
        env={"TOKEN": "t"},
        base_env={},
        cwd=tmp_path,
    )
    assert conn == {"transport": "streamable_http", "url": "https://h/mcp", "headers": {"A": "t"}}
    assert tool_name("my server", "x" * 100).startswith("mcp__my_server__")
    assert len(tool_name("s", "x" * 100)) == 64


def _cli_workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    write_config(ws / ".agentgraph", {"demo": stdio_entry("demo.py")})
    return ws


def test_cli_run_calls_an_mcp_tool_of_an_allowed_workspace_server(tmp_path: Path) -> None:
    from tests.cli_helpers import cli_env, run_cli
    from tests.fakes.openai_server import fake_openai_server
    from tests.fakes.scripts import reply_text, reply_tools

    ws = _cli_workspace(tmp_path)
    script = [reply_tools(("mcp__demo__add", {"a": 19, "b": 23})), reply_text("it is 42")]
    with fake_openai_server(script) as server:
        env = cli_env(
            tmp_path / "home",
            OPENAI_BASE_URL=server.url,
            AGENTGRAPH_MCP_TRUST_WORKSPACE="true",
        )
        res = run_cli(["run", "add 19 and 23", "--json"], cwd=ws, env=env)
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout)["answer"] == "it is 42"
        declared = [t["function"]["name"] for t in server.requests[0]["tools"]]
        assert "mcp__demo__add" in declared
        results = [m for m in server.requests[1]["messages"] if m["role"] == "tool"]
        assert results[-1]["content"] == "42"


def test_cli_run_does_not_start_servers_of_a_workspace_config_not_allowed(tmp_path: Path) -> None:
    from tests.cli_helpers import cli_env, run_cli
    from tests.fakes.openai_server import fake_openai_server
    from tests.fakes.scripts import reply_text

    ws = _cli_workspace(tmp_path)
    with fake_openai_server([reply_text("ok")]) as server:
        env = cli_env(tmp_path / "home", OPENAI_BASE_URL=server.url)
        res = run_cli(["run", "hello"], cwd=ws, env=env)
        assert res.returncode == 0, res.stderr
        assert "not started (demo): not yet allowed" in " ".join(res.stderr.split())
        declared = [t["function"]["name"] for t in server.requests[0]["tools"]]
        assert not any(name.startswith("mcp__") for name in declared)


def test_mcp_tools_follow_the_approval_mode(tmp_path: Path) -> None:
    from tests.cli_helpers import cli_env, run_cli
    from tests.fakes.openai_server import fake_openai_server
    from tests.fakes.scripts import reply_text, reply_tools

    ws = _cli_workspace(tmp_path)
    script = [reply_tools(("mcp__demo__add", {"a": 1, "b": 2})), reply_text("could not")]
    with fake_openai_server(script) as server:
        env = cli_env(
            tmp_path / "home",
            OPENAI_BASE_URL=server.url,
            AGENTGRAPH_MCP_TRUST_WORKSPACE="true",
            AGENTGRAPH_MCP_TOOLS="ask",
        )
        res = run_cli(["run", "add", "--json"], cwd=ws, env=env)
        assert res.returncode == 0, res.stderr
        result = [m for m in server.requests[1]["messages"] if m["role"] == "tool"][-1]
        assert "AGENTGRAPH_MCP_TOOLS=ask" in result["content"]
        assert result["content"] != "3"


def test_a_broken_workspace_config_is_reported_even_when_not_allowed(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / ".agentgraph").mkdir(parents=True)
    (ws / ".agentgraph" / "mcp.json").write_text('{"mcpServers": {"x": ')
    manager = McpManager(ws, tmp_path / "home", workspace_trusted=False)
    manager.start()
    assert manager.tools == []
    assert len(manager.problems) == 1 and "not valid JSON" in manager.problems[0]
