"""Sessions for front ends that are not the REPL: submit, approve, cancel, list, resume.

:class:`SessionService` carries out the operations of :mod:`agentgraph.protocol.ops`
over one :class:`~agentgraph.agent.Agent` and its store, and publishes the typed events
of :mod:`agentgraph.protocol.events` to whoever subscribed to the session (every open
tab sees the same events). A turn runs in a worker thread, as the REPL's does.

The service holds a session's lease only while one of its turns runs: a session open in
the terminal (whose REPL holds the lease) is refused with the CLI's one-line refusal,
and a session the page used can be continued in the terminal once its turn is over.
The agent runs one turn at a time, so the service does too: a second submit while a
turn runs is refused.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from agentgraph.errors import AgentGraphError
from agentgraph.middleware.masking import MASKING_MARKER_KEY
from agentgraph.persistence.leases import holding
from agentgraph.persistence.store import Store
from agentgraph.persistence.thread_ids import check_thread_id
from agentgraph.protocol.events import (
    Answer,
    BaseEvent,
    Compaction,
    Error,
    Notice,
    TextDelta,
    ToolCall,
    ToolResult,
    UserMessage,
    event_to_show,
    to_event,
)
from agentgraph.protocol.ops import (
    AnswerApprovals,
    Cancel,
    Compact,
    DeleteSession,
    ForgetMemory,
    ListSessions,
    Op,
    ResumeSession,
    SearchHistory,
    SubmitTurn,
    SwitchModel,
    Undo,
)
from agentgraph.runtime.cancel import TurnCancelled
from agentgraph.runtime.history.kinds import INTERNAL_KINDS, agentgraph_kind
from agentgraph.security.redaction import build_redactor, redact_value
from agentgraph.session.agent import CANCEL_GRACE_S, TURN_THREAD_NAME, Agent, new_thread_id
from agentgraph.session.catalog import SessionCatalog
from agentgraph.session.commands import compact_for_window, switch_model, undo_turns
from agentgraph.session.failures import failure_line

_log = logging.getLogger(__name__)
Subscriber = Callable[[BaseEvent], None]
# The line a cancelled turn ends with (the CLI's word for Ctrl-C).
INTERRUPTED_TEXT = "interrupted"


class TurnRefused(AgentGraphError):
    """A submit the service cannot take now (another turn runs here)."""


class SessionService:
    """Operations over ``agent`` and ``store`` for a front end (see the module docstring).

    Args:
        agent: The agent (its store is ``store``).
        store: The opened store.
        workspace: The workspace of new sessions (a resumed one keeps its own).
        base_env: The agent's environment (its secret values are redacted from replayed
            tool-call arguments, as the live events are).
    """

    def __init__(
        self,
        agent: Agent,
        store: Store,
        workspace: Path,
        base_env: Mapping[str, str] | None = None,
    ) -> None:
        self.agent = agent
        redactor = build_redactor(agent.settings.secret_values(), base_env)
        self._redact: Callable[[Any], Any] = partial(redact_value, redactor)
        self.store = store
        self.catalog = SessionCatalog(store, agent.settings)
        self.workspace = workspace.resolve()
        self._lock = threading.Lock()
        self._subscribers: dict[str, list[Subscriber]] = {}
        self._running: str | None = None
        self._worker: threading.Thread | None = None
        # The agent around each model a session chose with /model (built once each), and
        # the one running the current turn.
        self._by_model: dict[str, Agent] = {agent.settings.model: agent}
        self._turn_agent = agent

    @property
    def running(self) -> str | None:
        """The session whose turn runs here now (None: none)."""
        return self._running

    # --- events ---------------------------------------------------------------------

    def subscribe(self, thread_id: str, subscriber: Subscriber) -> Callable[[], None]:
        """Send the session's events to ``subscriber`` from now on; returns the undo.

        ``subscriber`` is called in the turn's worker thread: it must only hand the
        event on (to a queue), never block.
        """
        with self._lock:
            self._subscribers.setdefault(thread_id, []).append(subscriber)

        def unsubscribe() -> None:
            with self._lock:
                listeners = self._subscribers.get(thread_id, [])
                if subscriber in listeners:
                    listeners.remove(subscriber)
                if not listeners:
                    self._subscribers.pop(thread_id, None)

        return unsubscribe

    def _publish(self, thread_id: str, raw: Mapping[str, Any] | BaseEvent) -> None:
        event = event_to_show(raw)
        if event is None:
            return
        with self._lock:
            listeners = list(self._subscribers.get(thread_id, []))
        for listener in listeners:
            try:
                listener(event)
            except Exception:  # a closed tab's stream must not stop the turn
                _log.debug("dropping a failed event subscriber", exc_info=True)
                with self._lock:
                    if listener in self._subscribers.get(thread_id, []):
                        self._subscribers[thread_id].remove(listener)

    # --- operations -----------------------------------------------------------------

    def handle(self, op: Op) -> dict[str, Any]:
        """Carry out one operation; its JSON-ready answer.

        Raises:
            SessionInUse: another process holds the session (the CLI's refusal).
            TurnRefused: a turn runs in this service already.
            SessionNotFound: no such session (resume).
        """
        if isinstance(op, SubmitTurn):
            return {"thread_id": self.submit(op.text, op.thread_id)}
        if isinstance(op, AnswerApprovals):
            return {"thread_id": self.answer(op.thread_id, op.answers)}
        if isinstance(op, Cancel):
            return {"cancelled": self.cancel(op.thread_id)}
        if isinstance(op, Compact):
            return {"record": self.compact(op.thread_id, op.focus)}
        if isinstance(op, ListSessions):
            return {"sessions": self.list_sessions(op.query)}
        if isinstance(op, ResumeSession):
            return self.resume(op.thread_id)
        if isinstance(op, SwitchModel):
            return {"model": self.switch_model(op.thread_id, op.model)}
        if isinstance(op, Undo):
            return self.undo(op.thread_id, op.turns)
        if isinstance(op, SearchHistory):
            return self.search(op.thread_id, op.query)
        if isinstance(op, ForgetMemory):
            return {"forgotten": self.forget_memory(op.thread_id, op.memory_id)}
        if isinstance(op, DeleteSession):
            return {"deleted": self.delete_session(op.thread_id)}
        raise TypeError(f"unknown operation: {op!r}")

    def list_sessions(self, query: str = "") -> list[dict[str, Any]]:
        """Every workspace's sessions (not subagents'), newest first, as
        :meth:`SessionCatalog.search` finds them; ``query`` matches the title, workspace
        or id (case-insensitive)."""
        return [
            {
                "thread_id": info.thread_id,
                "title": info.title,
                "workspace": info.workspace,
                "updated_at": info.updated_at,
                "messages": info.message_count,
                "model": info.model,
                "running": info.thread_id == self._running,
            }
            for info in self.catalog.search(query)
        ]

    def resume(self, thread_id: str) -> dict[str, Any]:
        """A stored session as the page shows it: its row, and its conversation replayed
        as events (the questions it is stopped at last)."""
        check_thread_id(thread_id)
        info = self.catalog.get(thread_id)
        events = [
            e.model_dump(mode="json") for e in replay(self.agent.messages(thread_id), self._redact)
        ]
        if self._running != thread_id:
            for question in self.agent.pending_approvals(thread_id):
                events.append(to_event(question).model_dump(mode="json"))
        return {
            "thread_id": thread_id,
            "info": info.to_json() if info is not None else None,
            "events": events,
            "running": self._running == thread_id,
            "model": self.agent.model_preference(thread_id) or self.agent.settings.model,
        }

    def agent_for(self, thread_id: str) -> Agent:
        """The agent on the model the session chose (``/model``, or :meth:`switch_model`),
        as ``agentgraph run`` and the REPL resume it; the configured one otherwise.

        Raises:
            ConfigError: the chosen model cannot be built now.
        """
        wanted = self.agent.model_preference(thread_id) or self.agent.settings.model
        if wanted not in self._by_model:
            self._by_model[wanted] = self.agent.with_model(wanted)
        return self._by_model[wanted]

    def switch_model(self, thread_id: str, model: str) -> str:
        """Make ``model`` the session's model from its next turn on (``/model NAME``).

        Raises:
            ConfigError: ``model`` cannot be built (nothing is recorded then).
            TurnRefused: a turn runs here.
        """
        self._idle(thread_id, "switch the model")
        with holding(self.store.leases, thread_id, "switch the model of"):
            switched = switch_model(self.agent, thread_id, model)
            self._by_model[model] = switched.agent
            if switched.needs_compaction:  # the session no longer fits the new window
                compact_for_window(switched.agent, thread_id)
        return model

    def _workspace_of(self, thread_id: str) -> Path:
        info = self.catalog.get(thread_id)
        return Path(info.workspace) if info is not None and info.workspace else self.workspace

    def _start(
        self,
        thread_id: str,
        agent: Agent,
        events: Callable[[], Iterator[dict[str, Any]]],
    ) -> None:
        """Run ``events`` (``agent``'s turn) in a worker thread, publishing each."""
        with self._lock:
            if self._running is not None:
                raise TurnRefused(
                    f"a turn of session {self._running[:12]} is running here: "
                    "wait for it to end or stop it"
                )
            # The CLI's refusal (SessionInUse) when another process holds the session;
            # nothing of the turn is written then.
            self.store.leases.acquire(thread_id, "continue")
            self._running = thread_id
            self._turn_agent = agent

        def publish(event: Mapping[str, Any]) -> None:
            self._publish(thread_id, event)

        def work() -> None:
            try:
                for event in events():
                    publish(event)
            except TurnCancelled:
                self._publish(thread_id, Notice(text=INTERRUPTED_TEXT))
                self._publish(thread_id, Error(message=INTERRUPTED_TEXT, exit_code=130))
            except Exception as exc:  # one line for the page, as the CLI prints it
                message, code = failure_line(exc) or (str(exc), 1)
                self._publish(thread_id, Error(message=message, exit_code=code))
            finally:
                if agent.cancelled.is_set():  # recorded while the lease is held
                    agent.record_interrupted()
                with self._lock:
                    self._running = None
                    self._worker = None
                # The terminal may continue the session now (a pending question is in
                # the checkpoint: whoever opens the session next asks it).
                self.store.leases.release(thread_id)

        worker = threading.Thread(target=work, name=TURN_THREAD_NAME, daemon=True)
        with self._lock:
            self._worker = worker
        worker.start()

    def submit(self, text: str, thread_id: str | None = None) -> str:
        """Start a user turn (a new session when ``thread_id`` is None); its thread id.

        The user's message is published first, so every tab shows it.
        """
        thread_id = check_thread_id(thread_id) if thread_id else new_thread_id()
        workspace = self._workspace_of(thread_id)
        agent = self.agent_for(thread_id)

        def events() -> Iterator[dict[str, Any]]:
            yield UserMessage(text=text).model_dump()
            yield from agent.stream_turn(
                thread_id, text, workspace, live=lambda e: self._publish(thread_id, e)
            )

        self._start(thread_id, agent, events)
        return thread_id

    def answer(self, thread_id: str, answers: Mapping[str, bool]) -> str:
        """Answer the approval questions the session is stopped at and continue it."""
        check_thread_id(thread_id)
        workspace = self._workspace_of(thread_id)
        agent = self.agent_for(thread_id)

        def events() -> Iterator[dict[str, Any]]:
            yield from agent.stream_resume(
                thread_id, workspace, dict(answers), live=lambda e: self._publish(thread_id, e)
            )

        self._start(thread_id, agent, events)
        return thread_id

    def cancel(self, thread_id: str) -> bool:
        """Stop the session's running turn as Ctrl-C does; whether one was running."""
        with self._lock:
            worker = self._worker if self._running == thread_id else None
        if worker is None:
            return False
        agent = self._turn_agent
        agent.cancel()
        worker.join(timeout=CANCEL_GRACE_S)
        if worker.is_alive():
            # A turn slow to notice (a model that has not sent a byte) is recorded as
            # interrupted now, what it said so far kept; its worker still holds the lease.
            agent.record_interrupted()
        return True

    def close(self) -> None:
        """Stop the running turn, if any (the server is shutting down)."""
        running = self._running
        if running is not None:
            self.cancel(running)

    def compact(self, thread_id: str, focus: str | None = None) -> dict[str, Any] | None:
        """Compact the session now (``/compact``), under its lease."""
        self._idle(thread_id, "compact")
        with holding(self.store.leases, thread_id, "compact"):
            return self.agent_for(thread_id).compact(thread_id, focus)

    def _idle(self, thread_id: str, doing: str) -> None:
        """Refuse an operation while this service runs a turn (of any session)."""
        check_thread_id(thread_id)
        with self._lock:
            if self._running is not None:
                raise TurnRefused(f"a turn is running here: {doing} after it ends")

    def undo(self, thread_id: str, turns: int = 1) -> dict[str, Any]:
        """Restore the files the session's last ``turns`` turns changed (``/undo [N]``),
        under its lease; the model is told which files went back."""
        self._idle(thread_id, "undo")
        with holding(self.store.leases, thread_id, "undo the changes of"):
            outcome = undo_turns(self.agent, thread_id, self._workspace_of(thread_id), turns)
        if outcome is None:
            return {"turns": 0, "restored": [], "removed": [], "failed": [], "available": 0}
        result = outcome.result
        return {
            "turns": result.turns,
            "restored": result.restored,
            "removed": result.removed,
            "failed": result.failed,
            "available": outcome.available,
        }

    def search(self, thread_id: str, query: str) -> dict[str, Any]:
        """Full-text search over the session's whole stored transcript (``/search``).

        Raises:
            SearchError: a query the index refuses.
        """
        check_thread_id(thread_id)
        found = self.agent.search_history(thread_id, query)
        return {
            "query": found.query,
            "hits": [{**dataclasses.asdict(hit), "ref": hit.ref} for hit in found.hits],
            "rebuilt": found.rebuilt,
        }

    def forget_memory(self, thread_id: str, memory_id: str) -> str:
        """Delete one long-term memory of the session's workspace; its id.

        Raises:
            MemoryRefused: no such memory, a prefix of several, or no memory store.
        """
        check_thread_id(thread_id)
        return self.agent.forget_memory(self._workspace_of(thread_id), memory_id).id

    def delete_session(self, thread_id: str) -> int:
        """Delete the session, its subagent sessions and their files; how many.

        Raises:
            SessionInUse: another process holds it (nothing is deleted).
            TurnRefused: a turn runs here.
        """
        self._idle(thread_id, "delete the session")
        return self.catalog.delete(thread_id)

    def context(self, thread_id: str) -> dict[str, Any]:
        """The context panel's data: ``/context``'s report now, and the prompt of every
        model call over the session with its compactions and maskings (stored with the
        replies, so a session run in another front end or process shows them too)."""
        check_thread_id(thread_id)
        messages = self.agent.messages(thread_id)
        report = self.agent_for(thread_id).context_report(thread_id) if messages else None
        return {
            "report": report,
            "calls": call_points(messages),
            "compactions": compaction_points(messages),
            "maskings": masking_points(messages),
        }


def call_points(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    """Each stored model reply's reported usage, in order (replies without usage skipped:
    the copies a compaction moved, or a provider that reports none)."""
    points = []
    for msg in messages:
        usage = msg.usage_metadata if isinstance(msg, AIMessage) else None
        if not usage:
            continue
        details = usage.get("input_token_details") or {}
        points.append(
            {
                "input_tokens": int(usage.get("input_tokens") or 0),
                "output_tokens": int(usage.get("output_tokens") or 0),
                "cached_tokens": int(details.get("cache_read") or 0),
            }
        )
    return points


def compaction_points(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    """Each compaction boundary: after how many model calls it came, and its record."""
    points, calls = [], 0
    for msg in messages:
        if isinstance(msg, AIMessage) and msg.usage_metadata:
            calls += 1
        if agentgraph_kind(msg) == "compact_boundary":
            record = msg.additional_kwargs.get("agentgraph") or {}
            points.append(
                {
                    "call": calls,
                    "trigger": record.get("trigger"),
                    "tokens_before": record.get("tokens_before"),
                    "tokens_after": record.get("tokens_after"),
                }
            )
    return points


def masking_points(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    """Each masking event, from the reply it shaped: after how many model calls, and what
    it hid (see :func:`agentgraph.middleware.masking.with_masking_marker`)."""
    points, calls = [], 0
    for msg in messages:
        if not isinstance(msg, AIMessage):
            continue
        marker = msg.response_metadata.get(MASKING_MARKER_KEY)
        if isinstance(marker, dict):
            points.append({"call": calls, **marker})
        if msg.usage_metadata:
            calls += 1
    return points


def replay(messages: list[BaseMessage], redact: Callable[[Any], Any]) -> list[BaseEvent]:
    """A stored conversation as the events a live one sends: the user's messages, the
    model's text and tool calls (arguments through ``redact``), the tools' results,
    compactions."""
    events: list[BaseEvent] = []
    for msg in messages:
        kind = agentgraph_kind(msg)
        if kind == "compact_boundary":
            record = dict(msg.additional_kwargs.get("agentgraph") or {})
            record.pop("kind", None)
            events.append(Compaction.model_validate(record))
        elif kind in INTERNAL_KINDS or (kind is not None and not isinstance(msg, AIMessage)):
            continue  # records, summaries, re-read files, notes: not the conversation
        elif isinstance(msg, HumanMessage):
            events.append(UserMessage(text=msg.text))
        elif isinstance(msg, AIMessage):
            if msg.text:
                text_event = TextDelta if msg.tool_calls else Answer
                events.append(text_event(text=msg.text))
            events.extend(
                ToolCall(id=str(c["id"]), name=c["name"], args=redact(c["args"]))
                for c in msg.tool_calls
            )
        elif isinstance(msg, ToolMessage):
            events.append(
                ToolResult(id=msg.tool_call_id, name=msg.name, status=msg.status, content=msg.text)
            )
    return events


__all__ = [
    "SessionService",
    "TurnRefused",
    "call_points",
    "compaction_points",
    "masking_points",
    "replay",
]
