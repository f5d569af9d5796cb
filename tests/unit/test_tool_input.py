"""A tool call costs its arguments, not the session: injected state is never re-serialized."""

from __future__ import annotations

from pathlib import Path

from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.prebuilt import ToolRuntime

from agentgraph.config import Settings
from agentgraph.persistence import Store
from agentgraph.runtime.runctx import RunContext
from agentgraph.session.agent import Agent
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.scripts import ai_text, ai_tools

STATE_MESSAGES = 500


def test_validated_tool_input_leaves_the_injected_runtime_out(
    settings: Settings, store: Store, workspace: Path
) -> None:
    (workspace / "a.txt").write_text("alpha\n")
    agent = Agent(
        settings,
        store,
        model=ScriptedChatModel([ai_tools(("read_file", {"path": "a.txt"})), ai_text("done")]),
        sleep=lambda _s: None,
    )
    # The real graph still hands the runtime (state, context) to the tools.
    assert agent.run_turn("t", "read a.txt", workspace).answer == "done"
    result = next(m for m in agent.messages("t") if isinstance(m, ToolMessage))
    assert "alpha" in str(result.content)

    state = {"messages": [HumanMessage(f"m{i}", id=str(i)) for i in range(STATE_MESSAGES)]}
    runtime = ToolRuntime(
        state=state,
        context=RunContext(workspace_path=str(workspace)),
        config={},
        stream_writer=lambda _chunk: None,
        tool_call_id="c1",
        store=None,
    )
    read_file = next(t for t in agent.deps.tools if t.name == "read_file")
    schema = read_file.args_schema
    assert isinstance(schema, type) and "runtime" in schema.model_fields
    dumped = schema.model_validate({"path": "a.txt", "runtime": runtime}).model_dump()
    # BaseTool dumps the validated input on every call: with the runtime in it, that
    # serialized every message of the session, at each tool call.
    assert dumped == {"path": "a.txt", "offset": 0, "limit": 2000}
