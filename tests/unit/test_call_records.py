"""Start records: written for calls with effects, skipped for read-only tools."""

from __future__ import annotations

from pathlib import Path

from langchain_core.tools import StructuredTool

from agentgraph.config import Settings
from agentgraph.persistence import open_store
from agentgraph.runtime.call_records import CALLS_DIR, READ_ONLY_TOOLS, needs_record
from agentgraph.session.agent import Agent
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


def test_a_kept_result_is_what_the_resume_gives(tmp_path: Path) -> None:
    """A background start whose result was not checkpointed is not lost on resume."""
    from langchain_core.messages import AIMessage, HumanMessage

    from agentgraph.runtime.call_records import (
        interrupted_results,
        keep_result,
        record_end,
        record_start,
    )

    call = {"name": "call_subagent", "args": {"task": "t"}, "id": "c1", "type": "tool_call"}
    other = {"name": "run_bash", "args": {"command": "x"}, "id": "c2", "type": "tool_call"}
    history = [HumanMessage("go"), AIMessage("", tool_calls=[call, other])]
    # The start ran to its end (its record removed) but the step was not checkpointed.
    record_end(record_start(tmp_path, "c1", "call_subagent"))
    record_start(tmp_path, "c2", "run_bash")
    art = {"background": True, "task_id": "subagent-0a0a0a0a", "thread_id": "0a" * 16}
    keep_result(tmp_path, "c1", "[subagent-0a0a0a0a started in the background]", art)
    keep_result(tmp_path, "c9", "a call of an earlier, checkpointed step", {})
    start, bash = interrupted_results(history, tmp_path)
    assert start.status == "success" and start.artifact == art
    assert str(start.content) == "[subagent-0a0a0a0a started in the background]"
    assert bash.status == "error" and "may have completed" in str(bash.content)
    # Kept results last until a turn starts: none is left, nothing is given twice.
    assert not (tmp_path / CALLS_DIR).exists()
    assert interrupted_results(history, tmp_path) == []
