"""The terminal renders the protocol's typed events: a real turn's events print the same
whether they come as the agent's dicts or typed, as the session service delivers them.

The turn runs the real ``Agent`` graph against a scripted model whose reply is a
function of the request alone: without a tool result it writes a file and a todo list;
with one it answers.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from rich.console import Console

from agentgraph.config import Settings
from agentgraph.frontends.cli.render import EventPrinter, compaction_line
from agentgraph.frontends.cli.terminal import TerminalPrinter
from agentgraph.persistence import open_store
from agentgraph.protocol.events import Compaction, to_event
from agentgraph.session.agent import Agent
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.scripts import ai_text, ai_tools

ANSWER = "Wrote **a.txt** and planned the rest."
TODO = "check a.txt"
CONSOLE_WIDTH = 120


def reply(messages: list[BaseMessage]) -> AIMessage:
    """Write a file and a todo list first; answer once their results are in."""
    if any(isinstance(m, ToolMessage) for m in messages):
        return ai_text(ANSWER)
    return ai_tools(
        ("write_file", {"path": "a.txt", "content": "one\ntwo\n"}),
        ("todo_write", {"todos": [{"content": TODO, "status": "in_progress"}]}),
    )


def _turn_events(settings: Settings, workspace: Path) -> list[dict[str, Any]]:
    model = ScriptedChatModel([reply], on_exhausted="repeat_last")
    events: list[dict[str, Any]] = []
    with open_store(settings) as store:
        agent = Agent(settings, store, model=model, sleep=lambda _s: None)
        agent.run_turn("t", "write a.txt and plan", workspace, events.append)
    return events


def _console(buffer: io.StringIO) -> Console:
    return Console(file=buffer, width=CONSOLE_WIDTH, color_system=None, force_terminal=False)


def _rendered(
    make: Callable[[Console, Console], EventPrinter], events: list[Any]
) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    printer = make(_console(out), _console(err))
    for event in events:
        printer(event)
    printer.finish()
    return out.getvalue(), err.getvalue()


PRINTERS: dict[str, Callable[[Console, Console], EventPrinter]] = {
    "run": lambda out, err: EventPrinter(out, err, stream_tokens=True),
    "repl": lambda out, err: TerminalPrinter(out, err, lambda _call_id: 1),
}


@pytest.mark.parametrize("printer", sorted(PRINTERS))
def test_a_turns_typed_events_print_as_its_dicts_do(
    printer: str, make_settings: Callable[..., Settings], workspace: Path
) -> None:
    raw = _turn_events(make_settings(), workspace)
    typed = [to_event(dict(event)) for event in raw]

    from_dicts = _rendered(PRINTERS[printer], raw)
    from_typed = _rendered(PRINTERS[printer], typed)

    assert from_typed == from_dicts
    out, err = from_typed
    assert ANSWER in out
    assert "⏺ write_file" in err and "⏺ todo_write" in err
    assert "a.txt +2 -0" in err and "+one" in err
    assert f"[~] {TODO}" in err


def test_a_compaction_line_reads_the_event_and_the_stored_record_alike() -> None:
    record = {"trigger": "guard", "tokens_before": 8_000, "tokens_after": 2_000, "files": ["a"]}
    event = to_event({"type": "compaction", **record})
    assert isinstance(event, Compaction)
    line = "Compacted: 8,000 → 2,000 tokens (−75.0%); files: a"
    assert compaction_line(event) == compaction_line(record) == line
