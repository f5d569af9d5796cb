"""Operations: what a front end asks of a session, as one tagged union of pydantic models.

A front end that is not in-process (the web UI) sends these as JSON (``{"op": ...}``);
:class:`agentgraph.session.service.SessionService` carries them out.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from agentgraph.persistence.thread_ids import THREAD_ID_MAX_CHARS

__all__ = [
    "OP_MODELS",
    "AnswerApprovals",
    "Cancel",
    "Compact",
    "DeleteSession",
    "ForgetMemory",
    "ListSessions",
    "Op",
    "ResumeSession",
    "SearchHistory",
    "SubmitTurn",
    "SwitchModel",
    "Undo",
    "parse_op",
]

# The longest message a front end may submit in one turn, in characters.
SUBMIT_MAX_CHARS = 200_000
# The longest model name a front end may choose, in characters.
MODEL_NAME_MAX_CHARS = 200
# The longest session search text, in characters.
QUERY_MAX_CHARS = 200
# The most turns one undo may take back.
UNDO_TURNS_MAX = 1_000
# The longest memory id (or id prefix) a front end may name, in characters.
MEMORY_ID_MAX_CHARS = 100


class _Op(BaseModel):
    """Common base: unknown fields are refused (a typo must not pass silently)."""

    model_config = ConfigDict(extra="forbid")


class SubmitTurn(_Op):
    """Run one user turn: a new session when ``thread_id`` is None."""

    op: Literal["submit_turn"] = "submit_turn"
    thread_id: str | None = Field(None, max_length=THREAD_ID_MAX_CHARS)
    text: str = Field(min_length=1, max_length=SUBMIT_MAX_CHARS)


class AnswerApprovals(_Op):
    """Answer the approval questions a turn stopped at, and continue it."""

    op: Literal["answer_approvals"] = "answer_approvals"
    thread_id: str = Field(max_length=THREAD_ID_MAX_CHARS)
    answers: dict[str, bool]


class Cancel(_Op):
    """Stop the session's running turn (as Ctrl-C does)."""

    op: Literal["cancel"] = "cancel"
    thread_id: str = Field(max_length=THREAD_ID_MAX_CHARS)


class Compact(_Op):
    """Compact the session's history now (``/compact``)."""

    op: Literal["compact"] = "compact"
    thread_id: str = Field(max_length=THREAD_ID_MAX_CHARS)
    focus: str | None = Field(None, max_length=QUERY_MAX_CHARS)


class SwitchModel(_Op):
    """Make ``model`` the session's model from its next turn on (``/model NAME``)."""

    op: Literal["switch_model"] = "switch_model"
    thread_id: str = Field(max_length=THREAD_ID_MAX_CHARS)
    model: str = Field(min_length=1, max_length=MODEL_NAME_MAX_CHARS)


class ListSessions(_Op):
    """The sessions of every workspace, newest first, optionally filtered by a search."""

    op: Literal["list_sessions"] = "list_sessions"
    query: str = Field("", max_length=QUERY_MAX_CHARS)


class ResumeSession(_Op):
    """A stored session's conversation replayed as events, with its pending approvals."""

    op: Literal["resume_session"] = "resume_session"
    thread_id: str = Field(max_length=THREAD_ID_MAX_CHARS)


class Undo(_Op):
    """Restore the files the session's last ``turns`` turns changed (``/undo [N]``)."""

    op: Literal["undo"] = "undo"
    thread_id: str = Field(max_length=THREAD_ID_MAX_CHARS)
    turns: int = Field(1, ge=1, le=UNDO_TURNS_MAX)


class SearchHistory(_Op):
    """Full-text search over the session's whole stored transcript (``/search``)."""

    op: Literal["search_history"] = "search_history"
    thread_id: str = Field(max_length=THREAD_ID_MAX_CHARS)
    query: str = Field(min_length=1, max_length=QUERY_MAX_CHARS)


class ForgetMemory(_Op):
    """Delete one long-term memory of the session's workspace (``/memory forget ID``)."""

    op: Literal["forget_memory"] = "forget_memory"
    thread_id: str = Field(max_length=THREAD_ID_MAX_CHARS)
    memory_id: str = Field(min_length=1, max_length=MEMORY_ID_MAX_CHARS)


class DeleteSession(_Op):
    """Delete the session, its subagent sessions and their files (``sessions delete``)."""

    op: Literal["delete_session"] = "delete_session"
    thread_id: str = Field(max_length=THREAD_ID_MAX_CHARS)


Op = Annotated[
    SubmitTurn
    | AnswerApprovals
    | Cancel
    | Compact
    | SwitchModel
    | ListSessions
    | ResumeSession
    | Undo
    | SearchHistory
    | ForgetMemory
    | DeleteSession,
    Field(discriminator="op"),
]
# Every operation model, in the order of the docs' table.
OP_MODELS: tuple[type[BaseModel], ...] = (
    SubmitTurn,
    AnswerApprovals,
    Cancel,
    Compact,
    SwitchModel,
    ListSessions,
    ResumeSession,
    Undo,
    SearchHistory,
    ForgetMemory,
    DeleteSession,
)
_ADAPTER: TypeAdapter[Op] = TypeAdapter(Op)


def parse_op(data: object) -> Op:
    """Validate one operation (a decoded JSON value).

    Raises:
        pydantic.ValidationError: not an operation, or fields of the wrong shape.
    """
    return _ADAPTER.validate_python(data)
