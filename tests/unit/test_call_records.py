"""Start records: written for calls with effects, skipped for read-only tools."""

from __future__ import annotations

from pathlib import Path

from langchain_core.tools import StructuredTool

from agentgraph.agent import Agent
from agentgraph.call_records import CALLS_DIR, READ_ONLY_TOOLS, needs_record
from agentgraph.config import Settings
from agentgraph.persistence import open_store
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.scripts import ai_text, ai_tools


def test_only_calls_with_effects_need_a_record() -> None:
    assert not any(needs_record(name) for name in READ_ONLY_TOOLS)
    for name in ("run_bash", "write_file", "edit_file", "call_subagent", "mcp__srv__read_file"):
        assert needs_record(name)


def test_the_tools_node_writes_records_only_for_calls_with_effects(
    settings: Settings, workspace: Path
) -> None:
    """Probes named like a read-only and an effectful tool look for their own record."""
    seen: dict[str, list[str]] = {}
    model = ScriptedChatModel(
        [
            ai_tools(("grep", {"pattern": "x"})),
            ai_tools(("write_file", {"path": "a"})),
            ai_text("ok"),
        ]
    )
    with open_store(settings) as store:
        agent = Agent(settings, store, model=model, sleep=lambda _s: None)
        calls = agent.deps.artifacts_dir("r1") / CALLS_DIR

        def probe(name: str) -> StructuredTool:
            def run(**_kwargs: object) -> str:
                seen[name] = sorted(p.name for p in calls.glob("*")) if calls.is_dir() else []
                return "ok"

            return StructuredTool.from_function(run, name=name, description=f"probe {name}")

        # Tools join the list as MCP tools do: by name, the graph's tools node runs them.
        agent.deps.tools[:] = [
            probe(t.name) if t.name in ("grep", "write_file") else t for t in agent.deps.tools
        ]
        agent.run_turn("r1", "go", workspace)
    assert seen["grep"] == []
    assert len(seen["write_file"]) == 1 and seen["write_file"][0].startswith("call-")
    assert not calls.exists()  # removed once the result exists
