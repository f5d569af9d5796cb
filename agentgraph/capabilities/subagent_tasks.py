"""Background subagents: ``call_subagent(background=true)``, ``subagent_task``, delivery.

``call_subagent(task, background=true)`` starts the subagent in a worker thread of this
process and answers at once with its task id (its ``context_id``, ``subagent-<8 hex>``);
the caller keeps working. ``subagent_task(task_id, action)`` reports its status, waits
for and returns its result, or cancels it. At most ``AGENTGRAPH_SUBAGENT_MAX_BACKGROUND``
run at once; each has its own loop cap, token budget and timeout, as any subagent.

**Delivery, exactly once.** A background subagent's outcome that the model has not
collected with ``subagent_task`` is delivered as a user message (kind
``subagent_notice``) appended to the caller's history at its next model call — after
everything already there, so the provider's prompt cache still holds the prefix. Which
outcomes are due is a pure function of the caller's history (:func:`deliveries`): every
background start recorded there (the start result's ``artifact``) that no notice and no
collected result settles yet, and that has ended. The notice's id is derived from the
task id, and it enters the history in the same state update as the reply of the model
call that saw it; a model call that fails writes nothing, so the next one delivers it
again. Nothing else keeps delivery state.

**Durable record.** The caller's history (checkpointed) records every start; the
subagent's own thread is checkpointed too. A process killed while background subagents
ran leaves starts with no outcome; the next model call in that session, finding no live
worker for them, reads their threads: a final answer there is delivered as their result,
anything else as ``interrupted`` (the partial work stays in the subagent's session). None
is lost silently.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool

from agentgraph.capabilities.subagent_worktrees import (
    STATE_HELD,
    IsolationError,
    applied_record,
    load,
)
from agentgraph.capabilities.subagents import (
    SUBAGENT_CANCEL_POLL_S,
    SUBAGENT_TASK_TOOL,
    SUBAGENT_TOOL,
    PreparedSubagent,
    SubagentOutcome,
    SubagentRecord,
    SubagentRunner,
)
from agentgraph.persistence.index import shorten_title
from agentgraph.runtime.history.kinds import AGENTGRAPH_KEY, SUBAGENT_NOTICE_KIND
from agentgraph.runtime.runctx import AgentToolRuntime, context_of

Emit = Callable[[dict[str, Any]], None]

# Longest wait one subagent_task(action="result") may ask for, in seconds: the caller's
# step (and the user watching it) is held that long, so it is bounded; the model can ask
# again.
SUBAGENT_WAIT_MAX_S = 120.0
# Seconds a cancel waits for the subagent to stop at its next step before answering.
SUBAGENT_CANCEL_WAIT_S = 5.0
NOTICE_ID_PREFIX = "subagent-notice-"
# Keys of the artifacts that record a background start and a collected result.
BACKGROUND_KEY = "background"
COLLECTED_KEY = "collected"
TASK_ID_KEY = "task_id"

Action = Literal["status", "result", "cancel", "apply", "discard"]
# The actions on an isolated subagent's held changes (capabilities/subagent_worktrees.py).
CHANGE_ACTIONS = frozenset({"apply", "discard"})


@dataclass(frozen=True)
class BackgroundStart:
    """A background subagent the caller's history says was started.

    Attributes:
        task_id: Its id (its ``context_id``).
        thread_id: Its session thread.
        task: Its task, shortened.
    """

    task_id: str
    thread_id: str
    task: str = ""


def background_starts(history: Iterable[BaseMessage]) -> list[BackgroundStart]:
    """Every background start in ``history``, in order (the start results' artifacts)."""
    starts: list[BackgroundStart] = []
    for msg in history:
        if not isinstance(msg, ToolMessage) or msg.name != SUBAGENT_TOOL:
            continue
        art = msg.artifact
        if isinstance(art, Mapping) and art.get(BACKGROUND_KEY) and art.get(TASK_ID_KEY):
            starts.append(
                BackgroundStart(
                    str(art[TASK_ID_KEY]),
                    str(art.get("thread_id") or ""),
                    str(art.get("task") or ""),
                )
            )
    return starts


def settled_ids(history: Iterable[BaseMessage]) -> set[str]:
    """Task ids whose outcome the model already has: delivered notices, collected results."""
    done: set[str] = set()
    for msg in history:
        if isinstance(msg, HumanMessage) and msg.id and msg.id.startswith(NOTICE_ID_PREFIX):
            done.add(msg.id.removeprefix(NOTICE_ID_PREFIX))
        elif isinstance(msg, ToolMessage) and msg.name == SUBAGENT_TASK_TOOL:
            art = msg.artifact
            if isinstance(art, Mapping) and art.get(COLLECTED_KEY):
                done.add(str(art[COLLECTED_KEY]))
    return done


def undelivered(history: Sequence[BaseMessage]) -> list[BackgroundStart]:
    """Background starts in ``history`` whose outcome the model does not have yet."""
    starts = background_starts(history)
    if not starts:
        return []
    done = settled_ids(history)
    return [s for s in starts if s.task_id not in done]


def notice_message(start: BackgroundStart, outcome: SubagentOutcome) -> HumanMessage:
    """The message that delivers ``outcome`` to the caller (a deterministic id)."""
    text = f"Background subagent {start.task_id} ended:\n{outcome.to_text()}"
    return HumanMessage(
        content=text,
        id=NOTICE_ID_PREFIX + start.task_id,
        additional_kwargs={AGENTGRAPH_KEY: {"kind": SUBAGENT_NOTICE_KIND}},
    )


def deliveries(
    history: Sequence[BaseMessage],
    outcome_of: Callable[[BackgroundStart], SubagentOutcome | None],
) -> list[HumanMessage]:
    """The notices due at a model call: ended background subagents not yet delivered.

    Args:
        history: The caller's history as the model call sees it.
        outcome_of: A start's outcome, or None while it still runs.

    Returns:
        One notice per due outcome, in start order (append them after ``history``).
    """
    notices: list[HumanMessage] = []
    for start in undelivered(history):
        outcome = outcome_of(start)
        if outcome is not None:
            notices.append(notice_message(start, outcome))
    return notices


class BackgroundTasks:
    """The background subagents of this process, and their delivery to their callers.

    Args:
        runner: The subagent runner (its records hold every subagent's state).
    """

    def __init__(self, runner: SubagentRunner) -> None:
        self.runner = runner
        self._lock = threading.Lock()
        self._stops: dict[str, threading.Event] = {}
        self._workers: dict[str, threading.Thread] = {}
        # Threads whose history has no undelivered start: skipped at each model call
        # instead of scanning their history again.
        self._clean: set[str] = set()
        # Where each session's running turn shows events (the caller's turn may have
        # ended when a background subagent reports).
        self._sinks: dict[str, Emit] = {}
        # Held from the limit check to the start: parallel calls in one response must
        # not both pass the check.
        self.starting = threading.Lock()

    @property
    def limit(self) -> int:
        """``AGENTGRAPH_SUBAGENT_MAX_BACKGROUND``."""
        return int(self.runner.settings.subagent_max_background)

    def running(self) -> list[SubagentRecord]:
        """Background subagents still running in this process."""
        with self._lock:
            ids = list(self._workers)
        return [
            r for i in ids if (r := self.runner.records.get(i)) is not None and r.outcome is None
        ]

    def attach(self, thread_id: str, sink: Emit) -> Callable[[], None]:
        """Background subagents of ``thread_id`` report to ``sink`` until the returned
        function is called (a turn's events go to that turn)."""
        with self._lock:
            self._sinks[thread_id] = sink

        def detach() -> None:
            with self._lock:
                if self._sinks.get(thread_id) is sink:
                    del self._sinks[thread_id]

        return detach

    def _emit_for(self, parent_thread: str, fallback: Emit | None) -> Emit:
        def emit(event: dict[str, Any]) -> None:
            with self._lock:
                sink = self._sinks.get(parent_thread)
            target = sink if sink is not None else fallback
            if target is not None:
                with contextlib.suppress(Exception):  # UI events are best-effort
                    target(event)

        return emit

    def start(
        self, prepared: PreparedSubagent, *, tool_call_id: str, fallback: Emit | None
    ) -> None:
        """Run ``prepared`` in a worker thread of this process; returns at once."""
        stop = threading.Event()
        emit = self._emit_for(prepared.parent_thread, fallback)
        # Registered before the worker starts: status and the limit see it at once.
        record = self.runner.register(prepared, tool_call_id, background=True)

        def work() -> None:
            try:
                self.runner.execute(
                    prepared,
                    emit=emit,
                    tool_call_id=tool_call_id,
                    stop=stop,
                    background=True,
                    record=record,
                )
            except Exception as exc:  # e.g. the store closed under it as the process ends
                if record.outcome is None:
                    why = f"subagent crashed: {type(exc).__name__}: {exc}"
                    record.outcome = SubagentOutcome(
                        False, why, prepared.context_id, prepared.child.thread_id, 0
                    )

        # An empty context, as for any subagent: LangGraph must not see the caller's run.
        worker = threading.Thread(
            target=contextvars.Context().run,
            args=(work,),
            name=f"{prepared.context_id}-background",
            daemon=True,
        )
        with self._lock:
            self._stops[prepared.context_id] = stop
            self._workers[prepared.context_id] = worker
            self._clean.discard(prepared.parent_thread)
        worker.start()

    def join(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for every background worker to end; whether they did."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            workers = list(self._workers.values())
        for worker in workers:
            worker.join(max(0.0, deadline - time.monotonic()))
        return not any(w.is_alive() for w in workers)

    def outcome_of(self, start: BackgroundStart) -> SubagentOutcome | None:
        """A start's outcome: its live record's, or (no live worker) its stored thread's."""
        record = self.runner.records.get(start.task_id)
        if record is not None:
            return record.outcome
        return self.runner.stored_outcome(start.thread_id, start.task_id)

    def notices(self, thread_id: str, history: Sequence[BaseMessage]) -> list[HumanMessage]:
        """The notices due at a model call of ``thread_id`` (see :func:`deliveries`)."""
        with self._lock:
            if thread_id in self._clean:
                return []
        if not undelivered(history):
            with self._lock:
                self._clean.add(thread_id)
            return []
        return deliveries(history, self.outcome_of)

    def pending(self, history: Sequence[BaseMessage]) -> list[dict[str, Any]]:
        """Background subagents whose outcome the model does not have yet (turn end)."""
        listed: list[dict[str, Any]] = []
        for start in undelivered(history):
            record = self.runner.records.get(start.task_id)
            status = (
                record.status
                if record is not None
                else "on the subagent server"
                if self.runner.remote is not None
                else "interrupted"
            )
            elapsed = record.elapsed_s() if record is not None else 0.0
            task = record.task if record is not None else start.task
            listed.append(
                {
                    "id": start.task_id,
                    "status": status,
                    "elapsed_s": round(elapsed, 3),
                    "task": task,
                }
            )
        return listed

    def find(self, task_id: str, history: Sequence[BaseMessage]) -> BackgroundStart | None:
        """The background start ``task_id`` names in ``history`` (None: unknown id)."""
        wanted = task_id.strip()
        return next((s for s in background_starts(history) if s.task_id == wanted), None)

    def wait(self, task_id: str, timeout_s: float) -> SubagentRecord | None:
        """Wait up to ``timeout_s`` for a live task to end; its record (None: not live)."""
        deadline = time.monotonic() + max(0.0, timeout_s)
        generation = self.runner.generation
        while True:
            record = self.runner.records.get(task_id)
            if record is None or record.outcome is not None:
                return record
            remaining = deadline - time.monotonic()
            # A cancelled turn (Ctrl-C) stops waiting at once.
            if remaining <= 0 or self.runner.generation != generation:
                return record
            with self._lock:
                worker = self._workers.get(task_id)
            if worker is None:
                time.sleep(min(SUBAGENT_CANCEL_POLL_S, remaining))
            else:
                worker.join(min(SUBAGENT_CANCEL_POLL_S, remaining))

    def cancel(self, task_id: str) -> SubagentRecord | None:
        """Stop a live task at its next step; its record once it stopped (or the wait ended)."""
        record = self.runner.records.get(task_id)
        with self._lock:
            stop = self._stops.get(task_id)
        if record is None or stop is None:
            return record
        if record.outcome is None:
            record.cancelled = True
            stop.set()
        return self.wait(task_id, SUBAGENT_CANCEL_WAIT_S)


def held_changes(
    runner: SubagentRunner, task_id: str, thread_id: str, *, apply: bool
) -> tuple[str, bool, dict[str, Any] | None]:
    """Apply or discard the held changes of isolated subagent ``task_id``.

    Args:
        runner: The subagent runner (settings, artifacts folders).
        task_id: The subagent's id.
        thread_id: The caller's session: only its own subagents' changes are reachable.
        apply: Apply (the approval, if asked for, came before the call ran) or discard.

    Returns:
        ``(text for the model, whether it worked, the result's artifact)``: applied, the
        artifact says which files changed (``changes``, as a call_subagent's does).
    """
    isolation = load(runner.settings.home, task_id.strip())
    if isolation is None or isolation.state != STATE_HELD or isolation.parent_thread != thread_id:
        return f"Error: subagent {task_id!r} has no held changes in this session", False, None
    try:
        changes = isolation.changes()
    except IsolationError as exc:
        return f"Error: its changes could not be read: {exc}", False, None
    patch = runner.keep_patch(isolation.thread_id or task_id, changes.patch)
    if not apply:
        isolation.remove()
        return f"discarded: {changes.summary()} (the patch stays in {patch})", True, None
    result = isolation.apply(changes)
    if result.conflicts:
        return (
            (
                f"not applied, conflict: {'; '.join(result.conflicts)}; nothing was written; "
                f'the patch is in {patch}; action="discard" drops the held changes'
            ),
            False,
            None,
        )
    isolation.remove()
    facts = {"changes": applied_record(changes, result.applied)}
    return f"applied to the workspace: {changes.summary()}", True, facts


def _status_text(record: SubagentRecord) -> str:
    steps = f"{record.tool_calls} tool call" + ("" if record.tool_calls == 1 else "s")
    return f"[{record.context_id} {record.status} · {record.elapsed_s():.1f}s · {steps}]"


def make_subagent_task_tool(tasks: BackgroundTasks) -> BaseTool:
    """Build the ``subagent_task`` tool around ``tasks``."""

    @tool(SUBAGENT_TASK_TOOL, parse_docstring=True)
    def subagent_task(
        task_id: str,
        runtime: AgentToolRuntime,
        action: Action = "status",
        wait_s: int = 0,
    ) -> ToolMessage:
        """Status, result or cancel of a background call_subagent.

        Args:
            task_id: Its id.
            action: result waits up to wait_s seconds (max 120).
        """
        call_id = str(runtime.tool_call_id or "")
        state: Mapping[str, Any] = runtime.state if isinstance(runtime.state, Mapping) else {}
        history: list[BaseMessage] = list(state.get("messages") or [])

        def answer(text: str, *, error: bool = False, artifact: Any = None) -> ToolMessage:
            return ToolMessage(
                content=text,
                artifact=artifact,
                tool_call_id=call_id,
                name=SUBAGENT_TASK_TOOL,
                status="error" if error else "success",
            )

        if action in CHANGE_ACTIONS:
            thread_id = context_of(runtime).thread_id
            text, ok, facts = held_changes(
                tasks.runner, task_id, thread_id, apply=action == "apply"
            )
            return answer(text, error=not ok, artifact=facts)
        start = tasks.find(task_id, history)

        if start is None:
            known = ", ".join(s.task_id for s in background_starts(history)) or "none"
            return answer(
                f"Error: unknown subagent task id {task_id!r}; this session's background "
                f"subagents: {known}",
                error=True,
            )
        wait = min(max(0.0, float(wait_s)), SUBAGENT_WAIT_MAX_S)
        if action == "cancel":
            record = tasks.cancel(start.task_id)
        elif action == "result":
            record = tasks.wait(start.task_id, wait)
        else:
            record = tasks.runner.records.get(start.task_id)
        if record is not None and record.outcome is None:  # still running
            text = _status_text(record)
            if action == "result":
                text += f"\nstill running after waiting {wait:g}s"
            elif action == "cancel":
                text += f"\nasked to stop; it had not stopped after {SUBAGENT_CANCEL_WAIT_S:g}s"
            return answer(text)
        outcome = record.outcome if record is not None else tasks.outcome_of(start)
        if outcome is None:  # a run on the subagent server its killed caller left
            return answer(f"[{start.task_id} running on the subagent server]")
        if action == "status":
            return answer(f"{outcome.status_line()} (action=result returns its result)")
        collected = {COLLECTED_KEY: start.task_id, **outcome.artifact()}
        return answer(outcome.to_text(), error=not outcome.ok, artifact=collected)

    return subagent_task


def start_in_background(
    tasks: BackgroundTasks,
    prepared: PreparedSubagent,
    *,
    tool_call_id: str,
    fallback: Emit | None,
) -> ToolMessage:
    """Start ``prepared`` in the background; the start result the caller's history keeps.

    Call with ``tasks.starting`` held, from the limit check on.
    """
    tasks.start(prepared, tool_call_id=tool_call_id, fallback=fallback)
    task_id = prepared.context_id
    text = (
        f"[{task_id} started in the background]\n"
        "Its result arrives as a message when it ends; "
        f'{SUBAGENT_TASK_TOOL}(task_id="{task_id}", action="status" | "result" | "cancel") '
        "checks on it, waits for it or stops it."
    )
    return ToolMessage(
        content=text,
        artifact={
            BACKGROUND_KEY: True,
            TASK_ID_KEY: task_id,
            "thread_id": prepared.child.thread_id,
            "task": shorten_title(prepared.task),
        },
        tool_call_id=tool_call_id,
        name=SUBAGENT_TOOL,
    )


def is_background_start(message: Any) -> bool:
    """Whether ``message`` is a background start result (not the subagent's outcome)."""
    art = getattr(message, "artifact", None)
    return isinstance(art, Mapping) and bool(art.get(BACKGROUND_KEY))
