"""Only whole tool calls run: through ``agentgraph run`` (which streams the reply, as the
REPL does) against the strict fake server.

A call whose arguments are not one complete JSON object is answered with an error the
model can correct, whatever the finish reason; a call written as text is understood only
for a model on a local endpoint (or when the setting says so), and never when its JSON is
incomplete.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from agentgraph.config import Settings
from agentgraph.persistence.store import open_store
from agentgraph.runtime.runctx import RunContext
from agentgraph.session.agent import Agent
from tests.cli_helpers import run_cli, server_env
from tests.fakes.openai_server import FakeOpenAIServer

KEY = "sk-test-secret-0123456789abcdef"
# A hosted endpoint's name: requests reach the loopback fake server through it as their
# HTTP proxy, so the agent sees a non-local endpoint (nothing resolves this name).
HOSTED_BASE_URL = "http://api.hosted-llm.example/v1"


def _tool_results(body: dict[str, Any]) -> list[str]:
    return [str(m.get("content")) for m in body["messages"] if m.get("role") == "tool"]


def _answer_with_results(seen: list[list[str]]) -> Any:
    """A reply that records the tool results the request carries and ends the run."""

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        seen.append(_tool_results(body))
        return {"content": "done"}

    return reply


@pytest.mark.parametrize(
    ("name", "arguments", "left_behind"),
    [
        # Cut inside the command string: the partial-JSON parser closed it and it ran.
        ("run_bash", '{"command": "echo PARTIAL-RAN > partial1.txt', "partial1.txt"),
        # Cut inside the content: the parser closed it and a 14-byte half file was written.
        ("write_file", '{"path": "half.txt", "content": "fourteen bytes', "half.txt"),
        # Cut after a complete value: what arrived parses once a brace is added.
        ("write_file", '{"path": "whole-looking.txt", "content": "x"', "whole-looking.txt"),
    ],
)
def test_arguments_cut_mid_json_do_not_run(
    home: Path, workspace: Path, name: str, arguments: str, left_behind: str
) -> None:
    """The reply ends with finish reason ``tool_calls`` (not ``length``): nothing says the
    call was cut but its JSON."""
    seen: list[list[str]] = []
    script = [
        {"tool_calls": [{"name": name, "arguments": arguments}], "finish_reason": "tool_calls"},
        _answer_with_results(seen),
    ]
    with FakeOpenAIServer(script) as server:
        res = run_cli(["run", "go", "--json"], cwd=workspace, env=server_env(home, server.url, KEY))
        assert server.violations == []
    assert res.returncode == 0, res.stderr
    assert not (workspace / left_behind).exists()
    (result,) = seen[0]  # the call got exactly one result: an error the model can act on
    assert result.startswith("Error:") and "not valid JSON" in result, result
    assert json.loads(res.stdout)["answer"] == "done"


def test_a_whole_call_beside_a_cut_one_still_runs(home: Path, workspace: Path) -> None:
    seen: list[list[str]] = []
    script = [
        {
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": "ok.txt", "content": "whole"}},
                {"name": "run_bash", "arguments": '{"command": "echo CUT > cut.txt'},
            ],
            "finish_reason": "tool_calls",
        },
        _answer_with_results(seen),
    ]
    with FakeOpenAIServer(script) as server:
        res = run_cli(["run", "go", "--json"], cwd=workspace, env=server_env(home, server.url, KEY))
        assert server.violations == []
    assert res.returncode == 0, res.stderr
    assert (workspace / "ok.txt").read_text() == "whole"
    assert not (workspace / "cut.txt").exists()
    assert len(seen[0]) == 2
    assert sum("not valid JSON" in r for r in seen[0]) == 1, seen[0]


def test_arguments_that_do_not_fit_the_schema_do_not_run(home: Path, workspace: Path) -> None:
    """Complete JSON of the wrong shape is an error result too, never a call."""
    seen: list[list[str]] = []
    script = [
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "no-content.txt"}}]},
        _answer_with_results(seen),
    ]
    with FakeOpenAIServer(script) as server:
        res = run_cli(["run", "go", "--json"], cwd=workspace, env=server_env(home, server.url, KEY))
    assert res.returncode == 0, res.stderr
    assert not (workspace / "no-content.txt").exists()
    (result,) = seen[0]
    assert result.startswith("Error: invalid arguments for write_file"), result


def _fenced(name: str, arguments: Any) -> str:
    return "I'll do it.\n```json\n" + json.dumps({"name": name, "arguments": arguments}) + "\n```"


def _hosted_env(home: Path, server: FakeOpenAIServer, **extra: str) -> dict[str, str]:
    """The CLI talking to a hosted-looking endpoint, reached through the fake server."""
    proxy = server.url.removesuffix("/v1")
    return server_env(home, HOSTED_BASE_URL, KEY, HTTP_PROXY=proxy, http_proxy=proxy, **extra)


def test_a_hosted_model_s_text_is_not_run_as_a_call(home: Path, workspace: Path) -> None:
    """gpt-4o-mini on a hosted endpoint writes a fenced JSON block: it is its answer."""
    text = _fenced("run_bash", {"command": "echo TEXT-RAN > text1.txt"})
    with FakeOpenAIServer([{"content": text}, {"content": "done"}]) as server:
        res = run_cli(["run", "go", "--json"], cwd=workspace, env=_hosted_env(home, server))
        assert len(server.requests) == 1  # the request really went through the "hosted" name
    assert res.returncode == 0, res.stderr
    assert not (workspace / "text1.txt").exists()
    out = json.loads(res.stdout)
    assert out["tool_calls"] == 0 and out["answer"] == text


def test_text_calls_on_runs_them_for_a_hosted_model_and_says_so(
    home: Path, workspace: Path
) -> None:
    text = _fenced("run_bash", {"command": "echo TEXT-RAN > text2.txt"})
    with FakeOpenAIServer([{"content": text}, {"content": "done"}]) as server:
        env = _hosted_env(home, server, AGENTGRAPH_TEXT_TOOL_CALLS="on")
        res = run_cli(["run", "go", "--json"], cwd=workspace, env=env)
    assert res.returncode == 0, res.stderr
    assert (workspace / "text2.txt").read_text().strip() == "TEXT-RAN"
    assert json.loads(res.stdout)["tool_calls"] == 1
    assert "wrote its tool calls as text" in " ".join(res.stderr.split())


def test_text_calls_off_leaves_a_local_model_s_text_alone(home: Path, workspace: Path) -> None:
    text = _fenced("run_bash", {"command": "echo TEXT-RAN > text3.txt"})
    with FakeOpenAIServer([{"content": text}, {"content": "done"}]) as server:
        env = server_env(home, server.url, KEY, AGENTGRAPH_TEXT_TOOL_CALLS="off")
        res = run_cli(["run", "go", "--json"], cwd=workspace, env=env)
    assert res.returncode == 0, res.stderr
    assert not (workspace / "text3.txt").exists()
    assert json.loads(res.stdout)["tool_calls"] == 0


def test_a_local_model_s_text_call_runs_and_is_marked(home: Path, workspace: Path) -> None:
    """The fake server is on 127.0.0.1: a local endpoint, so ``auto`` understands it."""
    text = _fenced("run_bash", {"command": "echo TEXT-RAN > text4.txt"})
    with FakeOpenAIServer([{"content": text}, {"content": "done"}]) as server:
        res = run_cli(
            ["run", "go", "--json", "--thread", "t1"],
            cwd=workspace,
            env=server_env(home, server.url, KEY),
        )
        assert server.violations == []
    assert res.returncode == 0, res.stderr
    assert (workspace / "text4.txt").read_text().strip() == "TEXT-RAN"
    assert "wrote its tool calls as text" in " ".join(res.stderr.split())
    exported = run_cli(
        ["sessions", "export", "t1", "--format", "jsonl"],
        cwd=workspace,
        env=server_env(home, "http://127.0.0.1:9/v1", KEY),
    )
    assert exported.returncode == 0, exported.stderr
    records = [json.loads(line) for line in exported.stdout.splitlines() if line.strip()]
    (use,) = [r for r in records if r["type"] == "tool_use"]
    assert "text4.txt" in use["tool"]["input"]["command"]
    (reply,) = [r for r in records if r.get("uuid") == use["parentUuid"]]
    assert reply["agentgraph"]["text_tool_calls"] is True, reply


def test_a_half_written_text_call_stays_text(home: Path, workspace: Path) -> None:
    """A call written as text whose arguments string is cut: nothing repairs it."""
    (workspace / "sub").mkdir()
    text = _fenced("list_dir", '{"path": "sub')
    with FakeOpenAIServer([{"content": text}, {"content": "done"}]) as server:
        res = run_cli(["run", "go", "--json"], cwd=workspace, env=server_env(home, server.url, KEY))
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["tool_calls"] == 0 and out["answer"] == text


def test_a_reply_that_is_not_streamed_runs_only_whole_calls_too(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """The graph invoked without a token consumer (the LangGraph server's way): the
    reply comes in one piece, and the same rule holds."""
    seen: list[list[str]] = []
    script = [
        {
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": "ok.txt", "content": "whole"}},
                {"name": "write_file", "arguments": '{"path": "cut.txt", "content": "ha'},
            ]
        },
        _answer_with_results(seen),
    ]
    with FakeOpenAIServer(script) as server:
        settings = make_settings(OPENAI_BASE_URL=server.url, OPENAI_API_KEY=KEY)
        with open_store(settings) as store:
            agent = Agent(settings, store)
            agent.graph.invoke(
                {"messages": [HumanMessage("go", id="h")], "loops": 0},
                agent.config("plain"),
                context=RunContext(workspace_path=str(workspace), thread_id="plain"),
            )
        assert not server.requests[0].get("stream") and server.violations == []
    assert (workspace / "ok.txt").read_text() == "whole"
    assert not (workspace / "cut.txt").exists()
    assert sum("not valid JSON" in r for r in seen[0]) == 1, seen[0]


def test_at_the_output_limit_only_the_cut_call_is_held_back(home: Path, workspace: Path) -> None:
    """Finish reason ``length``: the call being written when the limit hit is the cut one;
    a whole call before it runs as it always did."""
    seen: list[list[str]] = []
    script = [
        {
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": "first.txt", "content": "whole"}},
                {"name": "write_file", "arguments": '{"path": "second.txt", "content": "ha'},
            ],
            "finish_reason": "length",
        },
        _answer_with_results(seen),
    ]
    with FakeOpenAIServer(script) as server:
        res = run_cli(["run", "go", "--json"], cwd=workspace, env=server_env(home, server.url, KEY))
        assert server.violations == []
    assert res.returncode == 0, res.stderr
    assert (workspace / "first.txt").read_text() == "whole"
    assert not (workspace / "second.txt").exists()
    assert len(seen[0]) == 2 and "output token limit" in seen[0][1], seen[0]
