"""Prompt caching (agentgraph.middleware.prompt_caching) through the real graph.

Anthropic models, against a loopback Messages API that caches as Anthropic does, get
breakpoints on the system prompt, the tools and the latest message, and read everything
already sent from the cache; other models' requests pass untouched, and a session on
them never imports ``langchain_anthropic``.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.tools import BaseTool, tool
from langchain_openai import ChatOpenAI

from agentgraph.config import Settings
from agentgraph.middleware import PromptCachingMiddleware, context_middleware
from agentgraph.persistence import open_store
from agentgraph.providers.pricing import PRICES
from agentgraph.session.agent import Agent
from tests.cli_helpers import cli_env, run_cli
from tests.fakes.anthropic_server import (
    CACHE_BREAKPOINTS_MAX,
    DEFAULT_API_KEY,
    FakeAnthropicServer,
    request_blocks,
)
from tests.fakes.openai_server import FakeOpenAIServer

MODEL = "claude-sonnet-4-5"
FILES = ("a.txt", "b.txt", "c.txt")
BREAKPOINT = {"type": "ephemeral", "ttl": "5m"}
PROBE_TIMEOUT_S = 120


def _script() -> list[dict[str, Any]]:
    """Read three files (one call each), answer; then answer a second turn."""
    reads = [{"tool_calls": [{"name": "read_file", "arguments": {"path": f}}]} for f in FILES]
    return [*reads, {"content": "All three files are read."}, {"content": "They are logs."}]


def _workspace(workspace: Path) -> Path:
    for n, name in enumerate(FILES):
        (workspace / name).write_text(f"log line {n}: nothing happened\n" * 30)
    return workspace


def _marked(blocks: list[Any]) -> list[int]:
    return [n for n, b in enumerate(blocks) if isinstance(b, dict) and "cache_control" in b]


def test_anthropic_requests_carry_breakpoints_and_read_what_was_sent(
    make_settings: Callable[..., Settings], workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _workspace(workspace)
    with FakeAnthropicServer(_script()) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", DEFAULT_API_KEY)
        settings = make_settings(
            AGENTGRAPH_MODEL=f"anthropic:{MODEL}", AGENTGRAPH_PROVIDER_MAX_RETRIES="0"
        )
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            first = agent.run_turn("c1", "read a.txt, b.txt and c.txt", workspace)
            second = agent.run_turn("c1", "what are they?", workspace)
            stored = agent.messages("c1")
        requests, reports, usage = server.requests, server.cache_reports, server.reported_usage
    assert server.violations == []  # never more than 4 breakpoints, every request valid
    assert (first.answer, second.answer) == ("All three files are read.", "They are logs.")
    assert len(requests) == len(reports) == 5
    for body, report in zip(requests, reports, strict=True):
        tools, system, messages = body["tools"], body["system"], body["messages"]
        # One breakpoint on the tool list, one on the system prompt, and the moving one:
        # top-level cache_control, which Anthropic puts on the request's last block.
        assert _marked(tools) == [len(tools) - 1]
        assert tools[-1]["cache_control"] == BREAKPOINT
        assert _marked(system) == [len(system) - 1]
        assert body["cache_control"] == BREAKPOINT
        last = messages[-1]
        last_block = 0 if isinstance(last["content"], str) else len(last["content"]) - 1
        assert report.breakpoints == [
            f"tools[{len(tools) - 1}]",
            f"system[{len(system) - 1}]",
            f"messages[{len(messages) - 1}].content[{last_block}]",
        ]
        assert len(report.breakpoints) <= CACHE_BREAKPOINTS_MAX
    # The cached prefix stays stable: each request starts with every block of the
    # previous one, unchanged, and reads all of it from the cache.
    assert reports[0].read == 0 and reports[0].written == reports[0].prompt_tokens
    for n in range(1, len(requests)):
        before = [b.key for b in request_blocks(requests[n - 1])]
        now = [b.key for b in request_blocks(requests[n])]
        assert now[: len(before)] == before, f"request {n} changed the prefix"
        assert reports[n].read == reports[n - 1].prompt_tokens
        assert reports[n].written == reports[n].prompt_tokens - reports[n].read
    # The stored replies keep what the provider reported, cache read and creation.
    replies = [m for m in stored if isinstance(m, AIMessage) and m.usage_metadata]
    assert len(replies) == len(usage)
    for reply, reported in zip(replies, usage, strict=True):
        meta = reply.usage_metadata
        assert meta is not None
        details = meta.get("input_token_details") or {}
        assert details.get("cache_read") == reported["cache_read_input_tokens"]
        assert details.get("cache_creation") == reported["cache_creation_input_tokens"]


def test_run_json_reports_anthropic_cache_reads_and_writes(home: Path, workspace: Path) -> None:
    _workspace(workspace)
    with FakeAnthropicServer(_script()[:4]) as server:
        env = cli_env(
            home,
            AGENTGRAPH_MODEL=f"anthropic:{MODEL}",
            ANTHROPIC_BASE_URL=server.url,
            ANTHROPIC_API_KEY=DEFAULT_API_KEY,
            AGENTGRAPH_PROVIDER_MAX_RETRIES="0",
        )
        result = run_cli(["run", "read a.txt, b.txt and c.txt", "--json"], cwd=workspace, env=env)
        assert result.returncode == 0, result.stderr
        payload = json.loads(result.stdout)
        shown = run_cli(
            ["sessions", "show", payload["thread_id"], "--json"], cwd=workspace, env=env
        )
        assert shown.returncode == 0, shown.stderr
        reported = server.reported_usage
    assert server.violations == []
    assert payload["answer"] == "All three files are read."
    assert len(reported) == 4
    read = sum(u["cache_read_input_tokens"] for u in reported)
    written = sum(u["cache_creation_input_tokens"] for u in reported)
    uncached = sum(u["input_tokens"] for u in reported)
    output = sum(u["output_tokens"] for u in reported)
    assert read > 0 and written > 0
    usage = payload["usage"]
    assert usage["cached_input_tokens"] == read
    assert usage["input_tokens"] == uncached + read + written
    assert usage["output_tokens"] == output
    price = PRICES[MODEL]
    assert price.cache_write is not None
    expected = (
        uncached * price.input
        + read * price.cached_input
        + written * price.cache_write
        + output * price.output
    ) / 1e6
    assert usage["cost_usd"] == pytest.approx(expected, abs=1e-8)
    session = json.loads(shown.stdout)
    assert session["usage"]["cached_input_tokens"] == read


@tool
def service_status() -> str:
    """The service's status page."""
    return "\n".join(f"node {n:03d}: healthy, 0 errors" for n in range(120))


def test_create_agent_async_with_context_middleware_caches_anthropic_calls(
    tmp_path: Path,
) -> None:
    script = [
        {"tool_calls": [{"name": "service_status", "arguments": {}}]},
        {"content": "All nodes are healthy."},
    ]
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        AGENTGRAPH_HOME=str(tmp_path / "home"),
        AGENTGRAPH_MODEL=f"anthropic:{MODEL}",
        AGENTGRAPH_PROVIDER_MAX_RETRIES="0",
    )
    with FakeAnthropicServer(script, cache_min_tokens=0) as server:
        llm = ChatAnthropic(  # type: ignore[call-arg]
            model_name=MODEL, base_url=server.url, api_key=DEFAULT_API_KEY, max_retries=0
        )
        agent = create_agent(
            llm,
            [service_status],
            system_prompt="You are an operations assistant.",
            middleware=context_middleware(llm, settings=settings, sleep=lambda _s: None),
        )
        result = asyncio.run(agent.ainvoke({"messages": [HumanMessage("is the service ok?")]}))
        requests, reports = server.requests, server.cache_reports
    assert server.violations == []
    assert result["messages"][-1].content == "All nodes are healthy."
    assert len(requests) == 2
    for body in requests:
        assert body["cache_control"] == BREAKPOINT
        assert body["tools"][-1]["cache_control"] == BREAKPOINT
        assert body["system"][-1]["cache_control"] == BREAKPOINT
    assert reports[1].read == reports[0].prompt_tokens > 0


def _request(model: Any) -> ModelRequest:
    return ModelRequest(
        model=model,
        messages=[HumanMessage("hi")],
        system_message=SystemMessage("You are terse."),
        tools=[],
        model_settings={"max_tokens": 100},
    )


def test_other_models_get_the_very_same_request() -> None:
    unit = PromptCachingMiddleware()
    request = _request(ChatOpenAI(model="gpt-4o-mini", api_key="sk-test"))  # type: ignore[arg-type]
    seen: list[ModelRequest] = []

    def handler(req: ModelRequest) -> ModelResponse:
        seen.append(req)
        return ModelResponse(result=[AIMessage("ok")])

    unit.wrap_model_call(request, handler)
    assert seen == [request] and seen[0] is request
    assert seen[0].system_message is not None
    assert seen[0].system_message.content == "You are terse."
    assert seen[0].model_settings == {"max_tokens": 100}


def test_anthropic_calls_get_the_same_marked_tool_while_it_is_unchanged() -> None:
    """LangChain's unit marks a copy of the last tool at every call; the model gets the
    same copy while the tool is the same, so its tool binding and schema count are
    reused. Another tool, or another mark, gets its own copy."""

    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        return key

    @tool
    def other(key: str) -> str:
        """Another tool."""
        return key

    model = ChatAnthropic(model=MODEL, api_key="sk-ant-test")  # type: ignore[call-arg]
    seen: list[ModelRequest] = []

    def handler(req: ModelRequest) -> ModelResponse:
        seen.append(req)
        return ModelResponse(result=[AIMessage("ok")])

    unit = PromptCachingMiddleware()
    for tools in ([lookup], [lookup]):
        unit.wrap_model_call(_request(model).override(tools=tools), handler)
    lookup.extras = {"note": "changed"}  # the same tool object, other extras
    for tools in ([lookup], [other], [other]):
        unit.wrap_model_call(_request(model).override(tools=tools), handler)

    async def call_async() -> None:
        async def ahandler(req: ModelRequest) -> ModelResponse:
            return handler(req)

        for _ in range(2):
            await unit.awrap_model_call(_request(model).override(tools=[lookup]), ahandler)

    asyncio.run(call_async())
    last = [req.tools[-1] for req in seen]
    assert all(isinstance(t, BaseTool) and t.extras and "cache_control" in t.extras for t in last)
    assert last[0] is not lookup and last[1] is last[0]  # marked once, then the same copy
    assert last[2] is not last[0] and last[2].extras["note"] == "changed"  # type: ignore[index]
    assert last[3].name == "other" and last[4] is last[3]
    assert last[5].name == "lookup" and last[6] is last[5]  # async calls too
    assert lookup.extras == {"note": "changed"}  # the original is never marked


PROBE = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from agentgraph.session.agent import Agent
    from agentgraph.config import Settings
    from agentgraph.persistence import open_store

    home, workspace, url = sys.argv[1:4]
    settings = Settings(
        _env_file=None, AGENTGRAPH_HOME=home, OPENAI_BASE_URL=url, OPENAI_API_KEY="sk-test",
        AGENTGRAPH_MODEL="gpt-4o-mini", AGENTGRAPH_PROVIDER_MAX_RETRIES="0",
    )
    with open_store(settings) as store:
        answer = Agent(settings, store).run_turn("p1", "read a.txt", Path(workspace)).answer
    print(answer)
    print(sorted(m for m in sys.modules if m.split(".")[0] in ("langchain_anthropic", "anthropic")))
    """
)


def test_openai_sessions_send_no_breakpoint_and_never_import_anthropic(
    home: Path, workspace: Path
) -> None:
    _workspace(workspace)
    script = [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}]},
        {"content": "Read."},
    ]
    with FakeOpenAIServer(script, on_exhausted="raise") as server:
        probe = subprocess.run(
            [sys.executable, "-c", PROBE, str(home / ".agentgraph"), str(workspace), server.url],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            cwd=Path(__file__).resolve().parents[2],
        )
        raw = [r.raw for r in server.log if r.method == "POST"]
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.splitlines()[-2:] == ["Read.", "[]"]
    assert server.violations == []
    assert len(raw) == 2 and all(b"cache_control" not in body for body in raw)
