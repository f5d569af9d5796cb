"""Long task at a small window: agentgraph vs the same task without context management.

Run: uv run python bench/bench_long_task.py [--files 24] [--window 16000]

Both runs talk to the strict loopback OpenAI-compatible server (real HTTP, real
ChatOpenAI) with the same scripted model (tests/scenarios/long_task.py). The
baseline is a plain LangGraph ReAct loop (add_messages + ToolNode, same tools)
that sends the whole history every time.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import openai
from langchain_core.messages import AIMessage, HumanMessage
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentgraph.capabilities.tools import build_tools
from agentgraph.config import Settings
from agentgraph.persistence import open_store
from agentgraph.runtime.runctx import RunContext
from agentgraph.session.agent import Agent
from tests.fakes.openai_server import FakeOpenAIServer
from tests.scenarios.long_task import PLANTED_FACTS, LongTaskDriver, make_workspace


def run_agentgraph(files: int, window: int, tmp: Path) -> dict[str, Any]:
    ws = tmp / "ag-ws"
    ws.mkdir()
    driver = LongTaskDriver(make_workspace(ws, files=files))
    with FakeOpenAIServer([driver], window=window) as server:
        settings = Settings(
            _env_file=None,  # type: ignore[call-arg]
            AGENTGRAPH_HOME=str(tmp / "ag-home"),
            OPENAI_BASE_URL=server.url,
            OPENAI_API_KEY="sk-bench",
            AGENTGRAPH_CONTEXT_WINDOW=str(window),
            AGENTGRAPH_PROVIDER_MAX_RETRIES="0",
        )
        events: list[dict[str, Any]] = []
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            agent.run_turn("bench", "read every log and report the facts", ws, events.append)
        sizes = [server.token_estimate(r) for r in server.requests]
        compactions = [e for e in events if e["type"] == "compaction"]
        return {
            "finished": driver.step == files + 2,
            "requests": len(sizes),
            "total_prompt_tokens": sum(sizes),
            "peak_prompt_tokens": max(sizes),
            "overflow_400s": server.overflow_count,
            "violations": len(server.violations),
            "compactions": len(compactions),
            "after": [c["tokens_after"] for c in compactions],
            "before": [c["tokens_before"] for c in compactions],
            "facts": len(set(PLANTED_FACTS.values()) & driver.answer_facts),
        }


class BaselineState(MessagesState):
    """Plain messages state (the tools get their workspace from the run context)."""


def run_baseline(files: int, window: int, tmp: Path) -> dict[str, Any]:
    ws = tmp / "base-ws"
    ws.mkdir()
    driver = LongTaskDriver(make_workspace(ws, files=files))
    with FakeOpenAIServer([driver], window=window) as server:
        settings = Settings(_env_file=None, AGENTGRAPH_HOME=str(tmp / "base-home"))  # type: ignore[call-arg]
        tools = build_tools(settings)
        model = ChatOpenAI(
            model="gpt-4o-mini",
            base_url=server.url,
            api_key="sk-bench",
            max_retries=0,  # type: ignore[arg-type]
        ).bind_tools(tools)

        def planner(state: BaselineState) -> dict[str, Any]:
            return {"messages": [model.invoke(state["messages"])]}

        def route(state: BaselineState) -> str:
            last = state["messages"][-1]
            return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

        graph = StateGraph(BaselineState, context_schema=RunContext)
        graph.add_node("planner", planner)
        graph.add_node("tools", ToolNode(tools))
        graph.add_edge(START, "planner")
        graph.add_conditional_edges("planner", route, ["tools", END])
        graph.add_edge("tools", "planner")
        app = graph.compile()
        error = ""
        try:
            app.invoke(
                {"messages": [HumanMessage("read every log and report the facts")]},
                {"recursion_limit": 200},
                context=RunContext(workspace_path=str(ws)),
            )
        except openai.BadRequestError as exc:
            error = str(exc.body)[:120] if exc.body else str(exc)[:120]
        sizes = [server.token_estimate(r) for r in server.requests]
        accepted = [s for s in sizes if s <= window]
        return {
            "finished": driver.step == files + 2,
            "requests": len(sizes),
            "total_prompt_tokens": sum(accepted),
            "peak_prompt_tokens": max(sizes),
            "overflow_400s": server.overflow_count,
            "violations": len(server.violations),
            "files_read_before_failure": min(driver.step, files),
            "error": error,
            "facts": len(set(PLANTED_FACTS.values()) & driver.answer_facts),
        }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=24)
    parser.add_argument("--window", type=int, default=16_000)
    parser.add_argument("--out", default="docs/bench/long_task.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / "probe"
        probe.mkdir()
        make_workspace(probe, files=args.files)
        file_tokens = sum(len(p.read_text()) for p in (probe / "logs").iterdir()) // 4
        ag = run_agentgraph(args.files, args.window, Path(tmp))
        base = run_baseline(args.files, args.window, Path(tmp))
    lines = [
        "# Long task at a small window (compaction, truncation, guard)",
        "",
        f"Command: `uv run python bench/bench_long_task.py --files {args.files} --window {args.window}`",
        "",
        f"Task: read {args.files} log files (≈{file_tokens:,} tokens in all, "
        f"{file_tokens // args.files:,} each) "
        f"at a {args.window:,}-token window, write a report, then answer with the 3 facts planted "
        "in the first three files. Server-side token estimate (chars/4), strict history checks.",
        "",
        "| | agentgraph | no context management |",
        "| --- | ---: | ---: |",
        f"| finished | {'yes' if ag['finished'] else 'no'} | {'yes' if base['finished'] else 'no — 400 at the window'} |",
        f"| model requests | {ag['requests']} | {base['requests']} |",
        f"| total prompt tokens sent (accepted requests) | {ag['total_prompt_tokens']:,} | {base['total_prompt_tokens']:,} |",
        f"| peak prompt size | {ag['peak_prompt_tokens']:,} | {base['peak_prompt_tokens']:,} |",
        f"| context-overflow 400s | {ag['overflow_400s']} | {base['overflow_400s']} |",
        f"| invalid-history rejections | {ag['violations']} | {base['violations']} |",
        f"| compactions | {ag['compactions']} | — |",
        f"| facts retained in the final prompt | {ag['facts']}/3 | {base['facts']}/3 |",
        "",
        "Tokens before → after each compaction (agentgraph's own exact count of the prompt view): "
        + ", ".join(f"{b:,} → {a:,}" for b, a in zip(ag["before"], ag["after"], strict=True)),
        "",
        f"Baseline failure: after reading {base['files_read_before_failure']} files: `{base['error']}`",
        "",
    ]
    text = "\n".join(lines)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
