"""Shared pieces of the middleware unit tests: a recording model call and a history."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from agentgraph.config import Settings
from agentgraph.context.tokens import get_counter
from agentgraph.context.windows import budget_for
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.scripts import ai_tools

SYSTEM = SystemMessage("You are a test agent.")


class ModelCall:
    """The innermost handler: answers or raises per script, records every request."""

    def __init__(self, *outcomes: AIMessage | BaseException) -> None:
        self.outcomes = list(outcomes)
        self.requests: list[ModelRequest] = []

    def __call__(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        outcome = self.outcomes.pop(0) if self.outcomes else AIMessage("done")
        if isinstance(outcome, BaseException):
            raise outcome
        return ModelResponse(result=[outcome])


def history(turns: int, *, result_chars: int = 4000) -> list[BaseMessage]:
    """A user request followed by ``turns`` read_file calls and their results.

    Each reply notes the code of the output before it (``K0003``), as a model that
    keeps what it read in its own words does: masking hides only what was restated.
    """
    msgs: list[BaseMessage] = [HumanMessage("Audit the files; the code word is TULIP.", id="u0")]
    for i in range(turns):
        note = f"K{i - 1:04d} noted; " if i else ""
        msgs.append(
            AIMessage(
                content=f"{note}reading file {i}",
                id=f"a{i}",
                tool_calls=[{"name": "read_file", "args": {"path": f"f{i}.txt"}, "id": f"c{i}"}],
            )
        )
        msgs.append(
            ToolMessage(
                content=f"content of f{i} K{i:04d} " + "x" * result_chars,
                tool_call_id=f"c{i}",
                name="read_file",
                id=f"t{i}",
            )
        )
    return msgs


def _varied_result(i: int, lines: int) -> ToolMessage:
    """The result of reading ``f{i}.txt``: ``lines`` varied lines (a run of one
    character, as in :func:`history`, counts as few tokens to an estimate)."""
    body = "\n".join(f"line {j} of f{i}: value {j * i + 7} checked" for j in range(lines))
    return ToolMessage(body, tool_call_id=f"c{i}", name="read_file", id=f"t{i}")


def _read_call(i: int) -> dict[str, Any]:
    return {"name": "read_file", "args": {"path": f"f{i}.txt"}, "id": f"c{i}"}


def varied_reads(turns: int, lines: int) -> list[BaseMessage]:
    """``turns`` read_file calls, one a reply, and their results of ``lines`` varied
    lines each."""
    msgs: list[BaseMessage] = []
    for i in range(turns):
        msgs.append(AIMessage(f"reading f{i}", id=f"a{i}", tool_calls=[_read_call(i)]))
        msgs.append(_varied_result(i, lines))
    return msgs


def parallel_reads(first: int, reads: int, lines: int) -> list[BaseMessage]:
    """One reply calling ``read_file`` ``reads`` times from ``f{first}.txt`` on, and the
    results of ``lines`` varied lines each, as :func:`varied_reads` words them."""
    ids = range(first, first + reads)
    call = AIMessage("", id=f"a{first}", tool_calls=[_read_call(i) for i in ids])
    return [call, *(_varied_result(i, lines) for i in ids)]


def request(messages: list[BaseMessage], **overrides: Any) -> ModelRequest:
    """A request as ``create_agent`` builds it: the state's messages, no view yet."""
    fields: dict[str, Any] = {
        "model": ScriptedChatModel([]),
        "messages": list(messages),
        "system_message": SYSTEM,
        "tools": [],
        "state": {"messages": list(messages)},
    }
    fields.update(overrides)
    return ModelRequest(**fields)


def small_settings(window: int = 16_000, **env: Any) -> Settings:
    """Settings of a small window (no .env read)."""
    fields: dict[str, Any] = {
        "AGENTGRAPH_CONTEXT_WINDOW": str(window),
        "AGENTGRAPH_MODEL": "gpt-4o-mini",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        **env,
    }
    return Settings(_env_file=None, **fields)  # type: ignore[call-arg]


def counter_and_budget(settings: Settings) -> tuple[Any, Any]:
    return get_counter(settings.model), budget_for(settings)


def noting_reads(workspace: Path, calls: int) -> list[AIMessage]:
    """Files to read and a script that reads them, each reply noting the file before
    (``F0003``): masking hides only what the model restated."""
    for i in range(calls):
        lines = (f"line {j} of file {i}: alpha beta gamma delta {j * i}" for j in range(40))
        (workspace / f"f{i}.txt").write_text(f"F{i:04d}\n" + "\n".join(lines))
    return [
        ai_tools(("read_file", {"path": f"f{i}.txt"}), content=f"noted F{i - 1:04d}" if i else "")
        for i in range(calls)
    ]
