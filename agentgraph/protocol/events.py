"""Events: what a front end receives from a turn, as one tagged union of pydantic models.

The agent emits plain dicts (``{"type": ..., ...}``) from deep inside a run (middleware,
nodes, tools, subagents); :func:`to_event` turns each into its typed model here, at the
edge, once. ``agentgraph run --output-format stream-json`` writes these models' dumps
(:data:`STREAM_TYPES`), the web UI sends them to the page, and the table of
``docs/events.md`` is generated from their docstrings and field descriptions
(:mod:`agentgraph.protocol.docs`).

Every model allows extra fields: a field the emitter adds reaches the front end before
the model names it, and a dump never loses what the dict had.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

_log = logging.getLogger(__name__)

__all__ = [
    "EVENT_MODELS",
    "HOOK_OUTCOME_BLOCKED",
    "HOOK_OUTCOME_ERROR",
    "HOOK_OUTCOME_OK",
    "INTERNAL_NAMES",
    "STREAM_TYPES",
    "BaseEvent",
    "Event",
    "UnknownEvent",
    "dump_event",
    "event_to_show",
    "to_event",
]


class BaseEvent(BaseModel):
    """Common base: extra fields are kept (and dumped) as they came."""

    model_config = ConfigDict(extra="allow")

    type: str


class Start(BaseEvent):
    """First line of a stream-json run."""

    type: Literal["start"] = "start"
    thread_id: str = Field(description="the session id")
    model: str = Field("", description="the model the run uses")


class Notice(BaseEvent):
    """`@file` attached, skill loaded, step limit reached, a budget spent (the request's or
    the goal's), an answer that looks like a tool call written as text but was not run, the
    same tool calls returned the same output 3 times in a row, output reservation shrunk,
    reply stopped at the output token limit, an empty reply, a made-up tool result or a
    repeated tool definition asked again (and whether that brought an answer)."""

    type: Literal["notice"] = "notice"
    text: str = Field(description="one line for the user")


class Retry(BaseEvent):
    """A rate limit / 5xx is retried."""

    type: Literal["retry"] = "retry"
    text: str = Field(description="the error and when the retry comes")


class Compaction(BaseEvent):
    """The history was compacted (`trigger`: `auto` at the threshold, `distil` once what
    masking hid adds up, `guard` after an overflow, `manual` for `/compact`); the other
    fields of the compaction record (docs/context-management.md) come too."""

    type: Literal["compaction"] = "compaction"
    trigger: str = Field("auto", description="`auto`, `distil`, `guard` or `manual`")
    tokens_before: int = Field(0, description="prompt tokens before")
    tokens_after: int = Field(0, description="prompt tokens after")
    files: list[str] = Field(default_factory=list, description="files re-read into the prompt")
    fallback: bool = Field(False, description="the summary failed: a plain cut was made")
    summary_cut: bool = Field(
        False,
        description=(
            "the summary was cut to fit, or stopped at the summarizer's output limit "
            "even when told it"
        ),
    )
    ledger: str = Field("", description="the progress ledger's text")
    course_change: bool = Field(False, description="the spiral guard's note was added")


class Masking(BaseEvent):
    """Observation masking moved its boundary: old tool outputs are one-line pointers in
    the prompt from now on (the session keeps them)."""

    type: Literal["masking"] = "masking"
    masked_outputs: int = Field(0, description="tool outputs masked")
    tokens_before: int = Field(0, description="prompt tokens before masking")
    tokens_after: int = Field(0, description="prompt tokens after masking")


class TextDelta(BaseEvent):
    """The model streams text. A tool call the model wrote as text is not streamed (where
    such calls are understood: a local endpoint, or `AGENTGRAPH_TEXT_TOOL_CALLS=on`): from
    where its syntax starts the pieces are held until the reply ends, then dropped when they
    are calls (the `tool_call` events follow) or sent as one piece."""

    type: Literal["text_delta"] = "text_delta"
    text: str = Field(description="a piece; concatenating them gives the text")


class ToolCall(BaseEvent):
    """The model asked for a tool."""

    type: Literal["tool_call"] = "tool_call"
    id: str = Field(description="the call's id")
    name: str = Field(description="the tool")
    args: Any = Field(
        description="object; credentials in string values replaced by `[REDACTED]`, "
        "as in tool results"
    )


class Diff(BaseEvent):
    """`write_file` / `edit_file` changed a file (before its `tool_result`). The diff is
    never sent back to the model."""

    type: Literal["diff"] = "diff"
    tool_call_id: str | None = Field(None, description="the call that made the change")
    path: str = Field(description="the file, relative to the workspace")
    diff: str = Field(
        description="unified diff, `---`/`+++`/`@@` headers, at most 2000 lines",
    )
    added: int = Field(description="lines added")
    removed: int = Field(description="lines removed")
    truncated: bool = Field(False, description="the diff was cut at its line limit")
    note: str = Field("", description='`"binary file changed"`, `"too large to diff"` or `""`')


class ToolResult(BaseEvent):
    """A tool finished."""

    type: Literal["tool_result"] = "tool_result"
    id: str = Field(description="the call's id")
    name: str | None = Field(None, description="the tool")
    status: str = Field("success", description='`"success"` / `"error"`')
    content: str = Field("", description="what the model sees")


class Todos(BaseEvent):
    """`todo_write` changed the list."""

    type: Literal["todos"] = "todos"
    todos: list[Any] = Field(description="list of `{content, status}`")


class SubagentStarted(BaseEvent):
    """A delegated subagent starts."""

    type: Literal["subagent_started"] = "subagent_started"
    id: str = Field(description="`subagent-<8 hex>`; a background subagent's task id")
    tool_call_id: str = Field(description="the parent's `call_subagent` call")
    thread_id: str = Field(description="its session")
    task: str = Field(description="the task, shortened")
    background: bool = Field(False, description="runs in the background")


class SubagentTool(BaseEvent):
    """The subagent asked for a tool."""

    type: Literal["subagent_tool"] = "subagent_tool"
    id: str = Field(description="the subagent")
    tool_call_id: str = Field(description="the parent's `call_subagent` call")
    name: str = Field(description="the tool")
    args: Any = Field(description="redacted as in `tool_call`")
    elapsed_s: float = Field(0.0, description="seconds since it started")


class SubagentDone(BaseEvent):
    """The subagent ended (before the parent's `tool_result` for the call)."""

    type: Literal["subagent_done"] = "subagent_done"
    id: str = Field(description="the subagent")
    tool_call_id: str = Field(description="the parent's `call_subagent` call")
    thread_id: str = Field(description="its session")
    ok: bool = Field(description="it finished with an answer")
    status: str = Field(description='`"done"` / `"failed"`')
    loops: int = Field(0, description="model calls it made")
    elapsed_s: float = Field(0.0, description="seconds it ran")
    input_tokens: int = Field(0, description="its prompt tokens")
    output_tokens: int = Field(0, description="its completion tokens")
    result: str = Field("", description="its final text, or why it failed")
    background: bool = Field(False, description="it ran in the background")


class SubagentTasks(BaseEvent):
    """The turn ended with background subagents whose result the model has not had."""

    type: Literal["subagent_tasks"] = "subagent_tasks"
    tasks: list[Any] = Field(
        description="list of `{id, status, elapsed_s, task}`; `status`: `running`, `done`, "
        "`failed`, `cancelled`, or `interrupted` when no live worker runs it"
    )


# A ``hook`` event's outcomes: the hook ran and let things be, blocked, or failed.
HOOK_OUTCOME_OK = "ok"
HOOK_OUTCOME_BLOCKED = "blocked"
HOOK_OUTCOME_ERROR = "error"


class Hook(BaseEvent):
    """A hook (docs/hooks.md) printed something, blocked or failed."""

    type: Literal["hook"] = "hook"
    event: str = Field(
        description="`PreToolUse`, `PostToolUse`, `UserPromptSubmit`, `Stop`, `PreCompact` "
        "or `SessionStart`"
    )
    command: str = Field(description="the hook's command")
    outcome: str = Field(description="`ok`, `blocked` or `error`")
    exit_code: int | None = Field(None, description="`null` when it did not start or timed out")
    text: str = Field(description="what it said, or why it failed; credentials redacted")


class Answer(BaseEvent):
    """A model reply without tool calls (the turn's answer)."""

    type: Literal["answer"] = "answer"
    text: str = Field(description="the answer")


class Stopped(BaseEvent):
    """The run stopped at a limit before the model answered by itself."""

    type: Literal["stopped"] = "stopped"
    reason: str = Field(description='`"max_loops"`, `"budget"` or `"repeated_calls"`')


class Usage(BaseEvent):
    """End of the turn."""

    type: Literal["usage"] = "usage"
    input_tokens: int = Field(description="prompt tokens, summed over the turn's model calls")
    output_tokens: int = Field(description="completion tokens, summed likewise")
    cached_input_tokens: int | None = Field(None, description="prompt tokens served from cache")
    cost_usd: float | None = Field(None, description="estimated cost, when the price is known")


class Result(BaseEvent):
    """Last line of a completed run."""

    type: Literal["result"] = "result"
    thread_id: str = Field(description="the session")
    answer: str = Field(description="the answer")
    tool_calls: int = Field(0, description="count")
    prompt_tokens: int | None = Field(None, description="size of the last prompt, our count")
    stopped: str | None = Field(
        None,
        description='`null`; `"max_loops"` when the run hit MAX_LOOPS, `"budget"` when its '
        "model calls used a budget (tokens or dollars, the request's or the session goal's), "
        '`"repeated_calls"` when the same tool calls '
        "returned the same output 3 times in a row: all exit 3",
    )
    usage: dict[str, Any] = Field(description="as in `usage`")


class Error(BaseEvent):
    """Last line of a failed or interrupted run."""

    type: Literal["error"] = "error"
    message: str = Field(description="the one-line error")
    exit_code: int = Field(
        description="the process exit status: 1 runtime, 2 usage/config, "
        "4 AGENTGRAPH_RUN_TIMEOUT_S reached, 130 interrupted"
    )


class ApprovalRule(BaseModel):
    """The "always allow" rule an approval offers: the tool and the pattern it matches."""

    tool: str
    pattern: str


class Approval(BaseEvent):
    """A tool call waits for the user's approval (a LangGraph interrupt; answer it with the
    `answer_approvals` operation). Not on stream-json: `agentgraph run` declines such calls."""

    type: Literal["approval"] = "approval"
    id: str = Field(description="the interrupt's id (the key of the answer)")
    tool: str = Field(description="the tool")
    tool_call_id: str = Field("", description="the call")
    setting: str = Field("", description="the setting that asks (`bash`, `edits`, `memory` …)")
    command: str | None = Field(None, description="a shell command (or an MCP call) to run")
    path: str | None = Field(None, description="the file an edit changes")
    diff: str | None = Field(None, description="the edit's preview (null when none is possible)")
    memory: str | None = Field(None, description="the text a memory save keeps")
    memory_id: str | None = Field(None, description="the memory a delete removes")
    reason: str | None = Field(None, description="why a command cannot run in the sandbox")
    mode: str | None = Field(None, description="the permission mode, when it is what asks")
    plan: str | None = Field(None, description="the plan `present_plan` asks to accept")
    rule: ApprovalRule | None = Field(
        None, description='what an "always" answer stores (`{tool, pattern}`)'
    )


class PromptTokens(BaseEvent):
    """The size of the prompt a model call sent (our count). In-process only."""

    type: Literal["prompt_tokens"] = "prompt_tokens"
    tokens: int = Field(description="prompt tokens")


class Progress(BaseEvent):
    """Tokens the turn's replies have streamed so far (text and tool-call arguments,
    estimated), at most every half second while a reply streams. In-process only (the
    REPL's spinner)."""

    type: Literal["progress"] = "progress"
    output_tokens: int = Field(description="completion tokens so far")


class TurnEnd(BaseEvent):
    """The turn is over (or stopped at approval questions). In-process only: stream-json
    writes it as `usage` then `result`."""

    type: Literal["turn_end"] = "turn_end"
    thread_id: str = Field(description="the session")
    answer: str = Field("", description="the answer")
    input_tokens: int = Field(0, description="prompt tokens of the turn")
    output_tokens: int = Field(0, description="completion tokens of the turn")
    tool_calls: int = Field(0, description="tool calls the model made")
    prompt_tokens: int | None = Field(None, description="size of the last prompt")
    pending_approvals: list[dict[str, Any]] = Field(
        default_factory=list, description="`approval` questions the turn stopped at"
    )
    stop_reason: str | None = Field(None, description="as `result`'s `stopped`")
    cached_input_tokens: int = Field(0, description="prompt tokens served from cache")
    cost_usd: float | None = Field(None, description="estimated cost")


class UserMessage(BaseEvent):
    """A user's message, as a front end shows it (a replayed session, another tab's
    submit). Not on stream-json."""

    type: Literal["user_message"] = "user_message"
    text: str = Field(description="the message")


class UnknownEvent(BaseEvent):
    """An event type no model names yet: passed on as it came (front ends ignore it)."""


Event = Annotated[
    Start
    | Notice
    | Retry
    | Compaction
    | Masking
    | TextDelta
    | ToolCall
    | Diff
    | ToolResult
    | Todos
    | SubagentStarted
    | SubagentTool
    | SubagentDone
    | SubagentTasks
    | Hook
    | Answer
    | Stopped
    | Usage
    | Result
    | Error
    | Approval
    | PromptTokens
    | Progress
    | TurnEnd
    | UserMessage,
    Field(discriminator="type"),
]
EVENT_MODELS: tuple[type[BaseEvent], ...] = (
    Start,
    Notice,
    Retry,
    Compaction,
    Masking,
    TextDelta,
    ToolCall,
    Diff,
    ToolResult,
    Todos,
    SubagentStarted,
    SubagentTool,
    SubagentDone,
    SubagentTasks,
    Hook,
    Answer,
    Stopped,
    Usage,
    Result,
    Error,
    Approval,
    PromptTokens,
    Progress,
    TurnEnd,
    UserMessage,
)
_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)
_KNOWN = frozenset(str(m.model_fields["type"].default) for m in EVENT_MODELS)
# The agent's internal names and the names events have at the edge.
INTERNAL_NAMES = {"token": "text_delta"}
# What ``agentgraph run --output-format stream-json`` writes, in the order of the table
# in docs/events.md (``turn_end`` becomes ``usage`` + ``result``).
STREAM_TYPES = (
    "start",
    "notice",
    "retry",
    "compaction",
    "masking",
    "stopped",
    "text_delta",
    "tool_call",
    "diff",
    "tool_result",
    "todos",
    "subagent_started",
    "subagent_tool",
    "subagent_done",
    "subagent_tasks",
    "hook",
    "answer",
    "usage",
    "result",
    "error",
)


def to_event(raw: dict[str, Any] | BaseModel) -> BaseEvent:
    """The typed event of one event dict the agent emitted.

    ``token`` is renamed ``text_delta``; ``turn_end`` (whose ``result`` is the agent's
    ``TurnResult``) becomes :class:`TurnEnd` with its fields. A type no model names
    becomes :class:`UnknownEvent` (tests check every type the agent emits is modelled).

    Raises:
        pydantic.ValidationError: a known type with fields of the wrong shape.
    """
    if isinstance(raw, BaseEvent):
        return raw
    if isinstance(raw, BaseModel):
        raise TypeError(f"not an event: {type(raw).__name__}")
    kind = str(raw.get("type"))
    data = {**raw, "type": INTERNAL_NAMES.get(kind, kind)}
    if kind == "turn_end":
        result = data.pop("result", None)
        fields = vars(result) if hasattr(result, "__dict__") else dict(result or {})
        data = {**fields, **data}
    if data["type"] not in _KNOWN:
        return UnknownEvent.model_validate(data)
    event: BaseEvent = _ADAPTER.validate_python(data)
    return event


def event_to_show(raw: Mapping[str, Any] | BaseEvent) -> BaseEvent | None:
    """:func:`to_event` for a front end: a known type of the wrong shape is logged and
    dropped (None), because showing an event must never stop the turn that sent it."""
    try:
        return to_event(raw if isinstance(raw, BaseEvent) else dict(raw))
    except ValidationError as exc:
        _log.warning(
            "dropping a malformed %r event: %s",
            raw.get("type") if isinstance(raw, Mapping) else raw,
            exc.errors()[:1],
        )
        return None


def dump_event(event: BaseModel) -> dict[str, Any]:
    """The JSON-ready dict of ``event``: the fields it was given (no defaults added), then
    any extra ones."""
    return {"type": getattr(event, "type", None)} | event.model_dump(
        mode="json", exclude_unset=True
    )
