"""agentgraph.middleware inside LangChain's create_agent, against the strict loopback server."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver

from agentgraph.config import Settings
from agentgraph.context.compaction import since_last_boundary
from agentgraph.middleware import RetryMiddleware, context_middleware
from agentgraph.runtime.history import agentgraph_kind, validate_history
from tests.fakes.openai_server import FakeOpenAIServer

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "create_agent_middleware.py"
SERVER_WINDOW_TOKENS = 16_000
# What the middleware is told: larger than the server's real window, so only the
# provider's 400 reveals the overflow and the recovery has to work for it.
CLAIMED_WINDOW_TOKENS = 200_000
BIG_OUTPUT_LINES = 6_000


@tool
def read_log() -> str:
    """Read the service log."""
    lines = [f"{n:05d} INFO served in {n % 97} ms" for n in range(BIG_OUTPUT_LINES)]
    lines[1500] = "01500 ERROR disk full"
    return "\n".join(lines)


def _settings(tmp_path: Path, window: int) -> Settings:
    return Settings(  # type: ignore[call-arg]
        _env_file=None,
        AGENTGRAPH_HOME=str(tmp_path / "home"),
        AGENTGRAPH_MODEL="gpt-4o-mini",
        AGENTGRAPH_CONTEXT_WINDOW=str(window),
        AGENTGRAPH_PROVIDER_MAX_RETRIES="0",
        OPENAI_BASE_URL="http://127.0.0.1:9/v1",
    )


def _llm(server: FakeOpenAIServer) -> ChatOpenAI:
    return ChatOpenAI(
        model="gpt-4o-mini",
        base_url=server.url,
        api_key="sk-test",  # type: ignore[arg-type]
        max_retries=0,
    )


def test_an_overflowing_tool_output_is_recovered_without_an_invalid_request(
    tmp_path: Path,
) -> None:
    script: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "read_log", "arguments": "{}"}]},
        {"content": "The log shows: disk full."},
    ]
    with FakeOpenAIServer(script, window=SERVER_WINDOW_TOKENS, on_exhausted="raise") as server:
        llm = _llm(server)
        agent = create_agent(
            llm,
            [read_log],
            system_prompt="You are an operations assistant.",
            middleware=context_middleware(
                "gpt-4o-mini",
                summarizer=llm,
                settings=_settings(tmp_path, CLAIMED_WINDOW_TOKENS),
                sleep=lambda _s: None,
            ),
        )
        result = agent.invoke({"messages": [HumanMessage("What is wrong per the log?")]})
        sent = server.requests
    assert server.violations == []
    assert server.overflow_count == 1
    assert result["messages"][-1].text == "The log shows: disk full."
    # The recovered request carried the tool output cut down; the state kept it whole.
    tool_sent = next(m for m in sent[-1]["messages"] if m["role"] == "tool")
    assert "truncated" in tool_sent["content"]
    stored = next(m for m in result["messages"] if isinstance(m, ToolMessage))
    assert "truncated" not in stored.text and "01500 ERROR disk full" in stored.text


def test_the_async_path_recovers_too(tmp_path: Path) -> None:
    script: list[dict[str, Any]] = [
        {"error": {"status": 503, "body": "upstream busy"}},
        {"tool_calls": [{"name": "read_log", "arguments": "{}"}]},
        {"content": "Async: disk full."},
    ]
    waits: list[float] = []

    async def fake_sleep(delay: float) -> None:
        waits.append(delay)

    with FakeOpenAIServer(script, window=SERVER_WINDOW_TOKENS, on_exhausted="raise") as server:
        llm = _llm(server)
        units = context_middleware(
            llm,
            summarizer=llm,
            settings=_settings(tmp_path, CLAIMED_WINDOW_TOKENS).model_copy(
                update={"provider_max_retries": 2}
            ),
        )
        for unit in units:
            if isinstance(unit, RetryMiddleware):
                unit.asleep = fake_sleep
        agent = create_agent(llm, [read_log], middleware=units)
        result = asyncio.run(
            agent.ainvoke({"messages": [HumanMessage("What is wrong per the log?")]})
        )
    assert server.violations == []
    assert server.overflow_count == 1 and len(waits) == 1  # the 503 retried once
    assert result["messages"][-1].text == "Async: disk full."


def _long_history(turns: int) -> list[BaseMessage]:
    words = " ".join(f"word{n} value{n * 7 % 101}" for n in range(150))
    msgs: list[BaseMessage] = [HumanMessage("Audit the files; the code word is TULIP.", id="u0")]
    for i in range(turns):
        msgs.append(
            AIMessage(
                content="",
                id=f"a{i}",
                tool_calls=[{"name": "read_log", "args": {}, "id": f"call_{i}"}],
            )
        )
        msgs.append(ToolMessage(content=f"{i}: {words}", tool_call_id=f"call_{i}", id=f"t{i}"))
    msgs.append(AIMessage("Audit done.", id="done"))
    return msgs


def test_compaction_in_create_agent_keeps_the_reply_after_the_boundary(tmp_path: Path) -> None:
    # The history is summarized (in two calls: it is larger than one summarizer call
    # holds, by more than the newest reads a compaction may leave for the next summary,
    # and no log is cut to fit), then the agent answers twice. Every reply is a function
    # of the request.
    def reply(body: dict[str, Any]) -> dict[str, Any]:
        texts = [str(m.get("content") or "") for m in body["messages"]]
        if "CONTEXT CHECKPOINT COMPACTION" in texts[0]:
            return {"content": "Summary: audited the log files; code word TULIP."}
        asked = next(
            t
            for m, t in reversed(list(zip(body["messages"], texts, strict=True)))
            if m["role"] == "user"
        )
        return {"content": "Still TULIP." if asked == "And now?" else "TULIP"}

    script: list[Any] = [reply]
    with FakeOpenAIServer(script, on_exhausted="repeat_last") as server:
        llm = _llm(server)
        agent = create_agent(
            llm,
            [read_log],
            system_prompt="You are an operations assistant.",
            middleware=context_middleware(
                "gpt-4o-mini",
                summarizer=llm,
                # The 62-message history passes a 40-message window: it compacts.
                settings=_settings(tmp_path, 16_000).model_copy(update={"max_message_history": 40}),
            ),
            checkpointer=InMemorySaver(),
        )
        config: Any = {"configurable": {"thread_id": "t"}}
        history = [*_long_history(30), HumanMessage("What was the code word?", id="q")]
        first = agent.invoke({"messages": history}, config)
        second = agent.invoke({"messages": [HumanMessage("And now?", id="q2")]}, config)
        sent = server.requests
    assert server.violations == []
    summaries = [b for b in sent if "CONTEXT CHECKPOINT COMPACTION" in json.dumps(b)]
    assert len(summaries) == 2
    assert "truncated" not in json.dumps(summaries)
    kinds = [agentgraph_kind(m) for m in first["messages"]]
    assert "compact_boundary" in kinds
    view = since_last_boundary(first["messages"])
    assert agentgraph_kind(view[0]) == "summary"
    assert view[-1].text == "TULIP"  # the reply landed after the boundary
    assert validate_history(view) == []
    # The next turn's prompt starts from the summary, not the whole audit.
    prompt = sent[-1]["messages"]
    assert "code word TULIP" in json.dumps(prompt)
    assert len(prompt) < len(history) // 2
    assert second["messages"][-1].text == "Still TULIP."


def test_the_docs_example_runs(tmp_path: Path) -> None:
    script: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "read_log", "arguments": "{}"}]},
        {"content": "Disk full on /var/data."},
    ]
    with FakeOpenAIServer(script, window=SERVER_WINDOW_TOKENS, on_exhausted="raise") as server:
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(tmp_path),
            "OPENAI_BASE_URL": server.url,
            "OPENAI_API_KEY": "sk-test",
            "AGENTGRAPH_MODEL": "gpt-4o-mini",
            "AGENTGRAPH_CONTEXT_WINDOW": str(CLAIMED_WINDOW_TOKENS),
            "AGENTGRAPH_HOME": str(tmp_path / "home"),
            "PYTHONPATH": str(ROOT),
        }
        done = subprocess.run(
            [sys.executable, str(EXAMPLE)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Disk full on /var/data."
    assert server.violations == [] and server.overflow_count == 1
