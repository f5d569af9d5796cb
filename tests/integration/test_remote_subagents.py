"""Subagents on a LangGraph server: ``langgraph dev`` on loopback, serving langgraph.json.

The server is started once for the module, its model the same loopback strict fake
server the local CLI talks to; every reply is a function of the request alone. The
server's workspace holds a ``where.txt`` that says ``SERVER``, the caller's one that
says ``LOCAL``: a subagent that reports ``SERVER`` ran on the server.

Skipped with a reason when ``langgraph dev`` cannot start, unless
``AGENTGRAPH_REQUIRE_SERVER=1`` (set by ``.ci/run``) makes that a failure.
"""

from __future__ import annotations

import http.server
import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentgraph.capabilities.remote_subagents import remote_thread_id
from tests.cli_helpers import run_cli, server_env
from tests.fakes.openai_server import FakeOpenAIServer
from tests.langgraph_dev import ServerUnavailable, free_port, langgraph_dev

KEY = "sk-test-remote-0123456789abcdef"
SERVER_KEY = "lg-server-key-0123456789abcdef"
REQUIRE_ENV = "AGENTGRAPH_REQUIRE_SERVER"
TASK = "REMOTE: read where.txt and report it"
SLOW_TASK = "REMOTE-SLOW: take your time"
# A remote subagent that would take this long is cancelled long before.
SLOW_S = 30.0


def _user_texts(body: dict[str, Any]) -> list[str]:
    return [
        m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
        for m in body.get("messages") or []
        if m.get("role") == "user"
    ]


def _tools(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body.get("messages") or [] if m.get("role") == "tool"]


def reply(body: dict[str, Any]) -> dict[str, Any]:
    """The subagent reads where.txt and reports it; the parent delegates (in the
    foreground, or in the background and then collects), then answers with the result."""
    first = (_user_texts(body) or [""])[0]
    done = _tools(body)
    if first.startswith(SLOW_TASK):
        return {"content": "NEVER", "first_byte_delay_s": SLOW_S}
    if first.startswith("cancel"):
        if not done:
            args = {"task": SLOW_TASK, "background": True}
            return {"tool_calls": [{"name": "call_subagent", "arguments": args}]}
        if len(done) == 1:
            task_id = str(done[0]["content"]).split(" ", 1)[0].lstrip("[")
            args = {"task_id": task_id, "action": "cancel"}
            return {"tool_calls": [{"name": "subagent_task", "arguments": args}]}
        return {"content": "PARENT GOT " + str(done[-1]["content"]).replace("\n", " | ")}
    if first.startswith("REMOTE:"):
        if not done:
            return {"tool_calls": [{"name": "read_file", "arguments": {"path": "where.txt"}}]}
        return {"content": "REMOTE SAW " + str(done[-1]["content"]).strip()}
    background = first.startswith("background")
    if not done:
        args: dict[str, Any] = {"task": TASK, "background": background}
        return {"tool_calls": [{"name": "call_subagent", "arguments": args}]}
    if background and len(done) == 1:
        task_id = str(done[0]["content"]).split(" ", 1)[0].lstrip("[")
        args = {"task_id": task_id, "action": "result", "wait_s": 60}
        return {"tool_calls": [{"name": "subagent_task", "arguments": args}]}
    return {"content": "PARENT GOT " + str(done[-1]["content"]).replace("\n", " | ")}


def _unavailable(reason: str) -> None:
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but {reason}")
    pytest.skip(reason)


@dataclass
class Served:
    url: str
    model: FakeOpenAIServer
    workspace: Path


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """``langgraph dev`` on a loopback port, its model the strict fake server."""
    root = tmp_path_factory.mktemp("lg-server")
    workspace = root / "ws"
    workspace.mkdir()
    (workspace / "where.txt").write_text("SERVER\n")
    with FakeOpenAIServer([reply], require_key=KEY, on_exhausted="repeat_last") as model:
        try:
            with langgraph_dev(root, workspace, model.url, KEY) as url:
                yield Served(url, model, workspace)
        except ServerUnavailable as exc:
            _unavailable(str(exc))


def _events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_foreground_and_background_subagents_run_on_the_server(
    served: Served, home: Path, workspace: Path
) -> None:
    from langgraph_sdk import get_sync_client

    (workspace / "where.txt").write_text("LOCAL\n")
    env = server_env(
        home,
        served.model.url,
        KEY,
        AGENTGRAPH_SUBAGENT_SERVER=served.url,
        AGENTGRAPH_SUBAGENT_SERVER_API_KEY=SERVER_KEY,
    )
    client = get_sync_client(url=served.url, api_key=None)
    for prompt in ("foreground please", "background please"):
        res = run_cli(["run", prompt, "--output-format", "stream-json"], cwd=workspace, env=env)
        assert res.returncode == 0, res.stderr
        events = _events(res.stdout)
        answer = events[-1]["answer"]
        assert answer.startswith("PARENT GOT [subagent-"), answer
        assert "done · 2 steps] | REMOTE SAW" in answer, answer
        assert answer.endswith("SERVER") and "LOCAL" not in answer, answer
        done = next(e for e in events if e["type"] == "subagent_done")
        assert done["ok"] is True and done["background"] is (prompt.startswith("background"))
        # Its tool call was watchable as it ran remotely.
        tools = [e for e in events if e["type"] == "subagent_tool"]
        assert [t["name"] for t in tools] == ["read_file"]
        # The run is the server's: its thread holds the subagent's whole history.
        state = client.threads.get_state(remote_thread_id(done["thread_id"]))
        kinds = [m["type"] for m in state["values"]["messages"]]
        assert kinds == ["human", "ai", "tool", "ai"]
        # The server key is a secret: nowhere in what the CLI printed.
        assert SERVER_KEY not in res.stdout + res.stderr


def test_cancelling_a_remote_background_subagent_cancels_its_run(
    served: Served, home: Path, workspace: Path
) -> None:
    from langgraph_sdk import get_sync_client

    env = server_env(home, served.model.url, KEY, AGENTGRAPH_SUBAGENT_SERVER=served.url)
    started = time.monotonic()
    res = run_cli(
        ["run", "cancel please", "--output-format", "stream-json"], cwd=workspace, env=env
    )
    assert res.returncode == 0, res.stderr
    assert time.monotonic() - started < SLOW_S
    events = _events(res.stdout)
    assert "cancelled" in events[-1]["answer"], events[-1]["answer"]
    thread_id = next(e["thread_id"] for e in events if e["type"] == "subagent_started")
    client = get_sync_client(url=served.url, api_key=None)
    (run,) = client.runs.list(remote_thread_id(thread_id))
    assert run["status"] == "interrupted"


class _Failing(http.server.BaseHTTPRequestHandler):
    def _fail(self) -> None:
        self.send_response(503)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = _fail

    def log_message(self, format: str, *args: Any) -> None:
        return


def test_a_down_or_failing_server_is_one_clear_error_and_nothing_runs_locally(
    home: Path, workspace: Path
) -> None:
    failing = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Failing)
    threading.Thread(target=failing.serve_forever, daemon=True).start()
    down = f"http://127.0.0.1:{free_port()}"
    try:
        with FakeOpenAIServer([reply], require_key=KEY, on_exhausted="repeat_last") as model:
            for url, why in (
                (down, "it is unreachable (ConnectError)"),
                (f"http://127.0.0.1:{failing.server_port}", "it answered HTTP 503"),
            ):
                env = server_env(home, model.url, KEY, AGENTGRAPH_SUBAGENT_SERVER=url)
                res = run_cli(
                    ["run", "foreground please", "--output-format", "stream-json"],
                    cwd=workspace,
                    env=env,
                )
                assert res.returncode == 0, res.stderr
                (result,) = [e for e in _events(res.stdout) if e["type"] == "tool_result"]
                assert result["status"] == "error"
                text = result["content"]
                assert f"subagent failed: the subagent server {url}" in text, text
                assert why in text and "the subagent was not run here" in text
                assert "Traceback" not in res.stderr
            # The local path was not tried: no subagent ever asked the model anything.
            assert not any(
                (_user_texts(r) or [""])[0].startswith("REMOTE:") for r in model.requests
            )
    finally:
        failing.shutdown()
