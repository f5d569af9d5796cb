"""The real compiled graph, driven by a scripted model, persisted in SQLite on tmp_path."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from agentgraph.config import Settings
from agentgraph.persistence import open_store
from agentgraph.runtime.history import validate_history
from agentgraph.session.agent import Agent
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.scripts import ai_text, ai_tools


def _agent(settings: Settings, model: ScriptedChatModel, store_ctx: list) -> Agent:
    cm = open_store(settings)
    store = cm.__enter__()
    store_ctx.append(cm)
    return Agent(settings, store, model=model, sleep=lambda _s: None)


@pytest.fixture
def stores() -> list:
    opened: list = []
    yield opened
    for cm in opened:
        cm.__exit__(None, None, None)


def test_multi_step_tool_use_writes_and_reads(
    settings: Settings, workspace: Path, stores: list
) -> None:
    model = ScriptedChatModel(
        [
            ai_tools(("write_file", {"path": "notes/a.txt", "content": "alpha\nbeta\n"})),
            ai_tools(("read_file", {"path": "notes/a.txt"})),
            ai_text("The file says alpha and beta."),
        ]
    )
    agent = _agent(settings, model, stores)
    result = agent.run_turn("t1", "write and read a file", workspace)
    assert result.answer == "The file says alpha and beta."
    assert result.tool_calls == 2
    assert (workspace / "notes" / "a.txt").read_text() == "alpha\nbeta\n"
    # The third model call saw the read result with line numbers.
    last_prompt = model.calls[-1]
    tool_texts = [m.content for m in last_prompt if isinstance(m, ToolMessage)]
    assert any("alpha" in str(t) and "1" in str(t) for t in tool_texts)
    for prompt in model.calls:
        assert validate_history(prompt) == []
        assert prompt[0].type == "system"
        assert str(workspace) in str(prompt[0].content)


def test_parallel_tool_calls_each_get_one_result(
    settings: Settings, workspace: Path, stores: list
) -> None:
    (workspace / "a.txt").write_text("A")
    (workspace / "b.txt").write_text("B")
    model = ScriptedChatModel(
        [
            ai_tools(
                ("read_file", {"path": "a.txt"}), ("read_file", {"path": "b.txt"}), ("now", {})
            ),
            ai_text("done"),
        ]
    )
    agent = _agent(settings, model, stores)
    agent.run_turn("t2", "read both", workspace)
    history = agent.messages("t2")
    assert validate_history(history) == []
    calls = next(m for m in history if isinstance(m, AIMessage) and m.tool_calls)
    results = [m for m in history if isinstance(m, ToolMessage)]
    assert sorted(r.tool_call_id for r in results) == sorted(c["id"] for c in calls.tool_calls)


def test_tool_errors_go_back_to_the_model(
    settings: Settings, workspace: Path, stores: list
) -> None:
    model = ScriptedChatModel(
        [
            ai_tools(("read_file", {"path": "../outside.txt"})),
            ai_tools(("read_file", {"path": "missing.txt"})),
            ai_tools(("no_such_tool", {"x": 1})),
            ai_text("gave up"),
        ]
    )
    agent = _agent(settings, model, stores)
    result = agent.run_turn("t3", "try", workspace)
    assert result.answer == "gave up"
    errors = [m for m in agent.messages("t3") if isinstance(m, ToolMessage)]
    assert len(errors) == 3
    assert all(m.status == "error" for m in errors)
    assert not (workspace.parent / "outside.txt").exists()


def test_invalid_json_arguments_are_answered(
    settings: Settings, workspace: Path, stores: list
) -> None:
    bad = AIMessage(
        content="",
        invalid_tool_calls=[
            {
                "name": "read_file",
                "args": "{not json",
                "id": "call_bad",
                "error": "bad",
                "type": "invalid_tool_call",
            }
        ],
    )
    model = ScriptedChatModel([bad, ai_text("ok")])
    agent = _agent(settings, model, stores)
    agent.run_turn("t4", "go", workspace)
    history = agent.messages("t4")
    assert validate_history(history) == []
    result = next(m for m in history if isinstance(m, ToolMessage))
    # Streaming aggregation parses broken JSON leniently (to {}), so the model gets an
    # argument error; either way the call is answered with an error it can act on.
    assert result.tool_call_id == "call_bad" and result.status == "error"
    assert "path" in str(result.content) or "not valid JSON" in str(result.content)


def test_repair_invalid_tool_calls_turns_them_into_answerable_calls() -> None:
    from agentgraph.runtime.nodes.common import INVALID_ARGS_KEY, repair_invalid_tool_calls

    bad = AIMessage(
        content="x",
        tool_calls=[{"name": "now", "args": {}, "id": "ok1"}],
        invalid_tool_calls=[
            {
                "name": "read_file",
                "args": "{oops",
                "id": "bad1",
                "error": "e",
                "type": "invalid_tool_call",
            }
        ],
    )
    fixed = repair_invalid_tool_calls(bad)
    assert [c["id"] for c in fixed.tool_calls] == ["ok1", "bad1"]
    assert fixed.tool_calls[1]["args"] == {INVALID_ARGS_KEY: "{oops"}
    assert fixed.invalid_tool_calls == [] and bad.invalid_tool_calls  # input untouched


@pytest.mark.parametrize(
    "metadata",
    [
        {"finish_reason": "length"},
        {"stop_reason": "max_tokens"},
        {"finish_reason": "MAX_TOKENS"},
        {"incomplete_details": {"reason": "max_output_tokens"}},
        {"stopReason": "max_tokens"},
    ],
)
def test_the_call_written_when_the_output_limit_hit_does_not_run(metadata: dict) -> None:
    from agentgraph.runtime.history.calls import hit_output_limit
    from agentgraph.runtime.nodes.common import CUT_ARGS_KEY, repair_invalid_tool_calls

    cut = AIMessage(
        content="",
        tool_calls=[
            {"name": "now", "args": {}, "id": "ok1"},
            {"name": "write_file", "args": {"path": "a.txt", "content": "li"}, "id": "w1"},
        ],
        response_metadata=metadata,
    )
    assert hit_output_limit(cut)
    fixed = repair_invalid_tool_calls(cut)
    assert fixed.tool_calls[0] == cut.tool_calls[0]  # complete before the limit: runs
    assert fixed.tool_calls[1]["id"] == "w1" and fixed.tool_calls[1]["args"][CUT_ARGS_KEY]
    # Not cut: a reply that ended normally keeps its calls.
    whole = cut.model_copy(update={"response_metadata": {"finish_reason": "tool_calls"}})
    assert not hit_output_limit(whole) and repair_invalid_tool_calls(whole) is whole


def test_loop_cap_finalizes_with_an_answer(
    make_settings: Callable[..., Settings], workspace: Path, stores: list
) -> None:
    settings = make_settings(MAX_LOOPS=3)
    forever = ai_tools(("now", {}))
    model = ScriptedChatModel([forever, forever, forever, ai_text("final summary")])
    agent = _agent(settings, model, stores)
    events: list[dict] = []
    result = agent.run_turn("t5", "loop", workspace, on_event=events.append)
    assert result.answer == "final summary"
    assert model.call_count == 4
    assert model.tool_choices[-1] == "none"  # final call may not use tools
    assert any(e["type"] == "notice" and "step limit" in e["text"] for e in events)
    history = agent.messages("t5")
    assert validate_history(history) == []
    assert "step limit" in str([m.content for m in history if isinstance(m, ToolMessage)][-1])


def test_resume_in_a_fresh_graph_from_the_same_db(
    settings: Settings, workspace: Path, stores: list
) -> None:
    first = ScriptedChatModel([ai_text("remembered: the code word is PLUM")])
    agent1 = _agent(settings, first, stores)
    agent1.run_turn("t6", "the code word is PLUM", workspace)
    for cm in stores:
        cm.__exit__(None, None, None)
    stores.clear()

    second = ScriptedChatModel([ai_text("PLUM")])
    agent2 = _agent(settings, second, stores)
    agent2.run_turn("t6", "what was the code word?", workspace)
    seen = second.calls[0]
    assert any(isinstance(m, HumanMessage) and "PLUM" in str(m.content) for m in seen)
    assert len(agent2.messages("t6")) == 4
    info = agent2.store.index.get("t6")
    assert info is not None and info.message_count == 4 and info.title.startswith("the code word")


def test_dangling_tool_calls_in_stored_history_are_answered(
    settings: Settings, workspace: Path, stores: list
) -> None:
    model = ScriptedChatModel([ai_text("fine")])
    agent = _agent(settings, model, stores)
    config = agent.config("t7")
    agent.graph.update_state(
        config,
        {
            "messages": [
                HumanMessage("start", id="h1"),
                AIMessage(
                    content="let me look",
                    id="a1",
                    tool_calls=[{"name": "now", "args": {}, "id": "c1"}],
                ),
            ],
            "workspace_path": str(workspace),
        },
        as_node="planner",
    )
    agent.run_turn("t7", "continue", workspace)
    prompt = model.calls[0]
    assert validate_history(prompt) == []
    assert any(isinstance(m, ToolMessage) and m.tool_call_id == "c1" for m in prompt)
    assert any(isinstance(m, AIMessage) and m.content == "let me look" for m in prompt)


def _as_tuples(messages: list) -> list[tuple[str, str | None, str]]:
    return [(m.type, m.id, str(m.content)) for m in messages]


def test_the_next_turn_starts_from_the_stored_state(
    settings: Settings, workspace: Path, stores: list
) -> None:
    """A turn ends on the state the stream carried and the next one starts from it,
    unless something wrote a checkpoint in between: that write is what it starts from."""
    model = ScriptedChatModel(
        [
            ai_tools(("write_file", {"path": "a.txt", "content": "alpha\n"})),
            ai_text("wrote it"),
            ai_text("second"),
            ai_text("third"),
        ]
    )
    agent = _agent(settings, model, stores)
    agent.run_turn("t8", "write a file", workspace)
    agent.run_turn("t8", "again", workspace)
    # Written between turns through the graph (as /model, /undo or a compaction do).
    agent.graph.update_state(
        agent.config("t8"),
        {"messages": [HumanMessage("injected between turns", id="between")]},
        as_node="finalize",
    )
    agent.run_turn("t8", "once more", workspace)
    last_prompt = model.calls[-1]
    assert any("injected between turns" in str(m.content) for m in last_prompt)
    remembered = agent.messages("t8")
    for cm in stores:
        cm.__exit__(None, None, None)
    stores.clear()
    # What a fresh process rebuilds from the file is what this one remembered.
    fresh = _agent(settings, ScriptedChatModel([ai_text("-")]), stores)
    rebuilt = fresh.messages("t8")
    assert _as_tuples(rebuilt) == _as_tuples(remembered)
    assert [m.type for m in rebuilt].count("human") == 4
    assert validate_history(rebuilt) == []
