"""Manual compaction between turns (QA, real graph + scripted model).

``/compact`` (and ``sessions compact``) runs after a turn has ended: the last request
is answered, so the kept part must hold whole exchanges (a question with its answer),
a cancelled turn's request is summarized as cancelled, and a compaction that would
not make the prompt smaller is not applied.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from rich.console import Console

from agentgraph.config import Settings
from agentgraph.context.compaction import COMPACTION_KINDS, Compactor, since_last_boundary
from agentgraph.context.tokens import get_counter
from agentgraph.context.windows import budget_for
from agentgraph.frontends.cli.repl import load_slash_commands
from agentgraph.frontends.cli.slash import dispatch
from agentgraph.persistence import open_store
from agentgraph.persistence.index import SessionInfo
from agentgraph.runtime.cancel import TurnCancelled
from agentgraph.runtime.history import agentgraph_kind, is_user_request, validate_history
from agentgraph.session.agent import Agent
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.scripts import ai_text, ai_tools
from tests.slash_helpers import slash_context

WINDOW = "16000"
ESSAY = "write a long essay about the history of arithmetic"
QUESTION = "What does mul() in calc.py do?"
ANSWER = "mul() multiplies two numbers."

CALC = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n\n\n" + "".join(
    f"# note {n}: arithmetic helpers are used by the billing module\n" for n in range(60)
)


def _unanswered_requests(view: list[BaseMessage]) -> list[str]:
    """User requests of a view not followed by an assistant message."""
    body = [m for m in view if agentgraph_kind(m) not in ("summary", "reinjected_file")]
    out = []
    for i, msg in enumerate(body):
        if is_user_request(msg):
            nxt = body[i + 1] if i + 1 < len(body) else None
            if not isinstance(nxt, AIMessage):
                out.append(msg.text)
    return out


def _session(agent: Agent, workspace: Path, thread: str, *, cancel_turn: bool = True) -> None:
    """Turn A (tools + answer), turn B cancelled before any text, turn C answered."""
    agent.run_turn(thread, "Read calc.py and fix the add() bug", workspace)
    if cancel_turn:
        with pytest.raises((TurnCancelled, KeyboardInterrupt)):
            agent.run_turn(thread, ESSAY, workspace)
        agent.record_interrupted()
    agent.run_turn(thread, QUESTION, workspace)


def _model(agent_box: list[Agent]) -> ScriptedChatModel:
    def cancel(_messages: list[BaseMessage]) -> AIMessage:
        agent_box[0].cancel()  # Ctrl-C while the model is thinking: no text yet
        return ai_text("An essay")

    return ScriptedChatModel(
        [
            ai_tools(("read_file", {"path": "calc.py"})),
            ai_tools(
                (
                    "edit_file",
                    {"path": "calc.py", "old_string": "return a - b", "new_string": "return a + b"},
                )
            ),
            ai_text("Fixed add(): it subtracted instead of adding."),
            cancel,
            ai_text(ANSWER),
            ai_text("add() adds two numbers."),
        ],
        on_exhausted="raise",
    )


def test_manual_compact_between_turns_keeps_question_with_its_answer(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    (workspace / "calc.py").write_text(CALC)
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    summarizer = ScriptedChatModel(["calc.py: add fixed."], on_exhausted="repeat_last")
    box: list[Agent] = []
    model = _model(box)
    with open_store(settings) as store:
        agent = Agent(settings, store, model=model, summarizer=summarizer, sleep=lambda _s: None)
        box.append(agent)
        store.index.upsert(SessionInfo(thread_id="s"))
        _session(agent, workspace, "s")
        record = agent.compact("s", focus="keep the calc.py facts")
        assert record is not None and record.get("applied", True), record
        state = agent.messages("s")
        agent.run_turn("s", "And what does add() do?", workspace)
    view = since_last_boundary(state)
    # The question of turn C is never kept without its answer.
    assert _unanswered_requests(view) == []
    kept_texts = [m.text for m in view]
    assert (QUESTION in kept_texts) == (ANSWER in kept_texts)
    # Before the boundary, the essay request is not followed by turn C's answer alone.
    boundary = max(i for i, m in enumerate(state) if agentgraph_kind(m) == "compact_boundary")
    before = [m.text for m in state[:boundary]]
    if ANSWER in before:
        assert QUESTION in before
    # The next prompt: summary, files, whole exchanges, then the new request.
    prompt = model.calls[-1]
    assert validate_history(prompt) == []
    assert _unanswered_requests(prompt[:-1]) == []
    # The essay turn reads as cancelled, never as work to do: kept (when the Ctrl-C came
    # after the first streamed words, an exchange with its interrupted reply, which fits
    # the kept share) it is followed by that reply; summarized, the summarizer was told.
    if ESSAY in kept_texts:
        after = view[kept_texts.index(ESSAY) + 1]
        assert agentgraph_kind(after) == "interrupted"
        return
    seen = str(summarizer.calls[0][-1].content)
    essay_at = seen.index(ESSAY)
    assert "cancelled" in seen[max(essay_at - 120, 0) : essay_at + len(ESSAY) + 120]


def test_manual_compact_that_would_grow_the_prompt_is_not_applied(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    (workspace / "calc.py").write_text("def mul(a, b):\n    return a * b\n")
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    long_summary = "calc.py facts: " + " ".join(f"fact{n}={n * 7}" for n in range(150))
    summarizer = ScriptedChatModel([long_summary], on_exhausted="repeat_last")
    model = ScriptedChatModel(
        [ai_tools(("read_file", {"path": "calc.py"})), ai_text(ANSWER)], on_exhausted="raise"
    )
    with open_store(settings) as store:
        agent = Agent(settings, store, model=model, summarizer=summarizer, sleep=lambda _s: None)
        store.index.upsert(SessionInfo(thread_id="g"))
        agent.run_turn("g", QUESTION, workspace)
        before = agent.messages("g")
        record = agent.compact("g", focus="keep the calc.py facts")
        after = agent.messages("g")
        info = store.index.get("g")
        # The REPL's /compact says so in one line.
        load_slash_commands()
        ctx, out = slash_context(agent, "g", workspace)
        dispatch(ctx, "/compact keep the calc.py facts")
        unchanged = agent.messages("g")
    assert len(summarizer.calls) == 2  # it was tried, then not applied
    assert record is None or record.get("applied") is False, record
    lines = out.getvalue().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nothing to compact: "), lines
    assert "smaller" in lines[0]
    assert [m.id for m in unchanged] == [m.id for m in before]
    assert [m.id for m in after] == [m.id for m in before]
    assert not any(agentgraph_kind(m) == "compact_boundary" for m in after)
    assert info is not None and info.compactions == 0


def _long_turn(question: str, steps: int, tag: str) -> list[BaseMessage]:
    msgs: list[BaseMessage] = [HumanMessage(question, id=f"{tag}-q")]
    for i in range(steps):
        msgs.append(
            AIMessage(
                "",
                id=f"{tag}-a{i}",
                tool_calls=[{"name": "read_file", "args": {"path": f"f{i}.py"}, "id": f"{tag}{i}"}],
            )
        )
        msgs.append(
            ToolMessage("y" * 4000, tool_call_id=f"{tag}{i}", name="read_file", id=f"{tag}-t{i}")
        )
    return msgs


def test_in_turn_compaction_still_keeps_the_pending_request_alone(
    make_settings: Callable[..., Settings],
) -> None:
    # In the middle of a turn (auto), the unanswered request is kept even though the
    # tool traffic right after it is summarized; between turns (manual, answered) the
    # kept part starts at a user request and holds its answer.
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    compactor = Compactor(
        ScriptedChatModel(["summary"], on_exhausted="repeat_last"),
        get_counter(settings.model),
        budget_for(settings),
        sleep=lambda _s: None,
    )
    first = [*_long_turn("first task", 3, "p"), AIMessage("first done", id="p-done")]
    in_turn = [*first, *_long_turn("second task", 12, "s")]
    outcome = compactor(in_turn, trigger="auto", system=[], tools=[])
    assert outcome is not None
    kept = [m for m in outcome.messages[-outcome.record["kept_messages"] :]]
    assert kept[0].text == "second task" and isinstance(kept[1], AIMessage)
    assert "s-a0" not in {m.id.split("~")[0] for m in kept if m.id}  # traffic summarized

    answered = [*in_turn, AIMessage("second done", id="s-done")]
    outcome = compactor(answered, trigger="manual", system=[], tools=[])
    assert outcome is not None
    view = since_last_boundary(outcome.messages)
    body = [m for m in view if agentgraph_kind(m) not in COMPACTION_KINDS]
    assert not body or is_user_request(body[0])
    assert _unanswered_requests(view) == []


def test_resume_recap_labels_the_summary_and_files_as_what_they_are(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    from agentgraph.frontends.cli.repl import RESUME_PREVIEW_MESSAGES, show_history_briefly

    (workspace / "calc.py").write_text(CALC)
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW=WINDOW)
    summary = "calc.py: add fixed; mul multiplies."
    summarizer = ScriptedChatModel([summary], on_exhausted="repeat_last")
    box: list[Agent] = []
    with open_store(settings) as store:
        agent = Agent(
            settings, store, model=_model(box), summarizer=summarizer, sleep=lambda _s: None
        )
        box.append(agent)
        store.index.upsert(SessionInfo(thread_id="r"))
        _session(agent, workspace, "r")
        assert agent.compact("r") is not None
        tail = agent.messages("r")[-RESUME_PREVIEW_MESSAGES:]
        out = io.StringIO()
        show_history_briefly(Console(file=out, width=400), agent, "r")
    shown = out.getvalue()
    assert any(agentgraph_kind(m) == "summary" for m in tail), [m.text[:40] for m in tail]
    assert "summary: " in shown
    assert "you: " not in "".join(
        line for line in shown.splitlines() if summary[:20] in line or "re-read" in line
    )
