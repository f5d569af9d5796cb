"""``call_subagent``: run the same graph on a subtask in an isolated context.

A subagent gets its own ``thread_id`` (checkpointed in the same store, so it can be
listed, shown and resumed), ``context_id = "subagent-<8 hex>"``, ``parent_context`` =
the caller's context, a fresh state whose only message is the task, and its own loop
counter. The caller receives one JSON object ``{"ok", "result", "context_id",
"loops"}``; none of the subagent's tool traffic enters the caller's history, and the
result is capped at :data:`SUBAGENT_RESULT_MAX_TOKENS`.

Concurrency and cancellation: the subagent runs in its own worker thread with an
empty ``contextvars`` context, so LangGraph does not mistake it for a subgraph of the
caller (which would nest its checkpoints and stream its tokens into the caller's
output). Several calls in one model response run at once because the tools node runs
parallel calls in threads. The worker checks, between graph steps, a per-call flag
(set on timeout) and the runner's cancel generation (bumped by
:meth:`SubagentRunner.cancel_all`, which ``Agent.stream_turn`` calls when the turn is
interrupted, e.g. by Ctrl-C). The calling thread polls every
:data:`SUBAGENT_CANCEL_POLL_S` seconds so it returns promptly on cancel.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.types import StreamMode

from agentgraph.config import Settings
from agentgraph.context.tokens import TokenCounter
from agentgraph.context.truncation import truncate_text
from agentgraph.history.kinds import stopped_reason
from agentgraph.middleware.events import event_sink
from agentgraph.nodes.limits import STOP_BUDGET, STOP_REPEATED, STOP_STEP_LIMIT
from agentgraph.persistence.index import SessionIndex, SessionInfo, shorten_title
from agentgraph.runctx import AgentToolRuntime, RunContext, context_of, run_config
from agentgraph.state import MAIN_CONTEXT_ID

SUBAGENT_TOOL = "call_subagent"
SUBAGENT_CONTEXT_PREFIX = "subagent-"
SUBAGENT_ID_HEX_CHARS = 8
# Cap on the result handed back to the caller, so a chatty subagent cannot flood it.
SUBAGENT_RESULT_MAX_TOKENS = 2_000
SUBAGENT_RESULT_MARKER = " subagent result cut; the full transcript is in session {thread_id}"
SUBAGENT_MAX_LOOPS_DEFAULT = 10
SUBAGENT_TASK_MAX_CHARS = 20_000
SUBAGENT_CANCEL_POLL_S = 0.2
# Bound on the parent-chain walk that computes a thread's nesting depth.
SUBAGENT_DEPTH_WALK_MAX = 32
SUBAGENT_ERROR_MAX_CHARS = 300
# One of runctx.POOL_SAFE_STREAM_MODES: the child runs with run_config's capped pool.
SUBAGENT_STREAM_MODE: StreamMode = "updates"

SUBAGENT_PROMPT_SECTION = (
    "Delegation: call_subagent(task) runs a helper agent with a fresh context on a "
    "self-contained subtask (reading many or large files, searching, running a skill's "
    "steps) and returns only its final answer. Give it everything it needs in `task`; it "
    "cannot see this conversation. Several call_subagent calls in one response run in "
    "parallel."
)

# Why a subagent's request stopped at a limit other than its loop cap, as its result says.
STOPPED_WHY = {
    STOP_REPEATED: "the same tool calls returned the same output again and again",
    STOP_BUDGET: "its token budget (AGENTGRAPH_TURN_BUDGET_TOKENS) is spent",
}


class SubagentCancelled(Exception):
    """The subagent was cancelled (timeout or the user interrupted the turn)."""


@dataclass
class SubagentOutcome:
    """What one subagent run produced (the JSON sent back is built from it)."""

    ok: bool
    result: str
    context_id: str
    thread_id: str
    loops: int

    def to_json(self) -> str:
        """The tool result: exactly ``ok``, ``result``, ``context_id`` and ``loops``."""
        payload = {
            "ok": self.ok,
            "result": self.result,
            "context_id": self.context_id,
            "loops": self.loops,
        }
        return json.dumps(payload, ensure_ascii=False)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    if len(text) > SUBAGENT_ERROR_MAX_CHARS:
        text = text[: SUBAGENT_ERROR_MAX_CHARS - 1] + "…"
    return f"{type(exc).__name__}: {text}"


def new_subagent_ids() -> tuple[str, str]:
    """A fresh ``(thread_id, context_id)`` pair sharing their first 8 hex digits.

    The thread id is a full uuid4 (not ``<parent>-sub-…``) so prefixes that select the
    parent session never become ambiguous with its children.
    """
    thread_id = uuid.uuid4().hex
    return thread_id, SUBAGENT_CONTEXT_PREFIX + thread_id[:SUBAGENT_ID_HEX_CHARS]


class SubagentRunner:
    """Runs subagent threads on the compiled graph; shared by every call_subagent call.

    The graph is bound after it is compiled (the tool is part of the graph).

    Args:
        settings: Configuration (depth limit, timeout, loop cap).
        index: Session index, for the subagent rows and the depth walk.
        counter: Token counter used to cap results.
        artifacts_dir: Maps a thread id to its artifacts folder.
        tool_names: Names of every tool the agent has.
    """

    def __init__(
        self,
        settings: Settings,
        index: SessionIndex,
        counter: TokenCounter,
        artifacts_dir: Callable[[str], Path],
        tool_names: Sequence[str] = (),
    ) -> None:
        self.settings = settings
        self.index = index
        self.counter = counter
        self.artifacts_dir = artifacts_dir
        self.tool_names = list(tool_names)
        self.graph: Any = None
        self._generation = 0
        self._lock = threading.Lock()

    def bind(self, graph: Any) -> None:
        """Give the runner the compiled graph it runs subagents on."""
        self.graph = graph

    @property
    def generation(self) -> int:
        """Bumped by :meth:`cancel_all`; a subagent started earlier stops."""
        with self._lock:
            return self._generation

    def cancel_all(self) -> None:
        """Cancel every running subagent (they stop at their next step)."""
        with self._lock:
            self._generation += 1

    def depth_of(self, thread_id: str | None) -> int:
        """How many subagent levels ``thread_id`` is below a top-level session."""
        depth = 0
        current = thread_id
        for _ in range(SUBAGENT_DEPTH_WALK_MAX):
            info = self.index.get(current) if current else None
            if info is None or not info.parent_thread_id:
                return depth
            depth += 1
            current = info.parent_thread_id
        return depth

    def child_tools(
        self, state: Mapping[str, Any], exclude: Sequence[str], at_max_depth: bool
    ) -> tuple[list[str], list[str]]:
        """``(allowed_tools, denied_tools)`` for a child of ``state``.

        The child gets the caller's tools minus ``exclude`` (and minus call_subagent
        when it may not nest further); denials accumulate down the chain.
        """
        denied = list(dict.fromkeys([*(state.get("denied_tools") or []), *exclude]))
        if at_max_depth:
            denied.append(SUBAGENT_TOOL)
        allowed = state.get("allowed_tools")
        names = list(self.tool_names) if allowed is None else list(allowed)
        names += [n for n in state.get("persistent_tools") or [] if n not in names]
        return [n for n in names if n not in denied], list(dict.fromkeys(denied))

    def run(
        self,
        task: str,
        state: Mapping[str, Any],
        context: RunContext,
        *,
        max_loops: int = SUBAGENT_MAX_LOOPS_DEFAULT,
        exclude_tools: Sequence[str] = (),
        emit: Callable[[dict[str, Any]], None] | None = None,
    ) -> SubagentOutcome:
        """Run ``task`` in a new subagent thread and wait for its answer.

        Args:
            task: What the subagent must do (its only message).
            state: The caller's graph state.
            context: The caller's run context (its workspace, thread and user).
            max_loops: The subagent's own loop cap (bounded by ``settings.max_loops``).
            exclude_tools: Tools the subagent may not use.
            emit: UI event sink of the caller (start/end notices).

        Returns:
            The outcome; never raises for a subagent failure.
        """
        parent_thread = context.thread_id
        parent_context = str(state.get("context_id") or MAIN_CONTEXT_ID)
        depth = self.depth_of(parent_thread) + 1
        limit = self.settings.subagent_max_depth
        if self.graph is None:
            return SubagentOutcome(False, "subagents are not available here", "", "", 0)
        if depth > limit:
            return SubagentOutcome(
                False,
                f"refused: subagents may nest {limit} level(s) deep and this one would be "
                f"level {depth}; do this task yourself",
                "",
                "",
                0,
            )
        task = task.strip()
        if not task:
            return SubagentOutcome(False, "refused: the task is empty", "", "", 0)
        task = task[:SUBAGENT_TASK_MAX_CHARS]
        loops_cap = max(1, min(int(max_loops), self.settings.loop_cap))
        thread_id, context_id = new_subagent_ids()
        allowed, denied = self.child_tools(state, exclude_tools, depth >= limit)
        workspace = context.workspace_path
        now = time.time()
        self.index.upsert(
            SessionInfo(
                thread_id=thread_id,
                title=shorten_title(task),
                title_source="subagent_task",
                workspace=workspace,
                created_at=now,
                updated_at=now,
                parent_thread_id=parent_thread or None,
                context_id=context_id,
            )
        )
        inputs: dict[str, Any] = {
            "messages": [HumanMessage(content=task, id=f"user-{uuid.uuid4().hex}")],
            "todos": [],
            "loops": 0,
            "turn_tokens": 0,
            "user_id": context.user_id,
            "context_id": context_id,
            "parent_context": parent_context,
            "allowed_tools": allowed,
            "persistent_tools": [],
            "denied_tools": denied,
            "active_skill": None,
            "mentioned_agents": [],
            # The caller's permission mode: a subagent of a plan-mode session reads only.
            "permission_mode": state.get("permission_mode"),
        }
        # A subagent runs unattended: it cannot put an approval question to the user.
        child = RunContext(
            workspace_path=workspace,
            thread_id=thread_id,
            artifacts_dir=str(self.artifacts_dir(thread_id)),
            max_loops=loops_cap,
            user_id=context.user_id,
            can_ask=False,
        )
        if emit is not None:
            emit({"type": "subagent_start", "context_id": context_id, "task": shorten_title(task)})
        outcome = self._run_thread(inputs, child, context_id)
        self._record(thread_id)
        if emit is not None:
            emit(
                {
                    "type": "subagent_end",
                    "context_id": context_id,
                    "ok": outcome.ok,
                    "loops": outcome.loops,
                }
            )
        return outcome

    def _run_thread(
        self, inputs: dict[str, Any], child: RunContext, context_id: str
    ) -> SubagentOutcome:
        thread_id, loops_cap = child.thread_id, child.max_loops
        config = run_config(thread_id, loops_cap)
        generation = self.generation
        stop = threading.Event()
        box: dict[str, Any] = {}

        def cancelled() -> bool:
            return stop.is_set() or self.generation != generation

        def drive() -> None:
            updates = self.graph.stream(
                inputs, config, context=child, stream_mode=SUBAGENT_STREAM_MODE
            )
            try:
                for _ in updates:
                    if cancelled():
                        raise SubagentCancelled()
                box["done"] = True
            except BaseException as exc:  # reported to the caller, never re-raised
                box["error"] = exc
            finally:
                # Close here, in this thread: the stored exception's traceback keeps this
                # frame alive, and a stream closed later (by the garbage collector) would
                # write its last checkpoint after the caller is gone, maybe into a closed store.
                updates.close()

        # A fresh, empty context: LangGraph must not see the caller's run config.
        worker = threading.Thread(
            target=contextvars.Context().run, args=(drive,), name=context_id, daemon=True
        )
        worker.start()
        deadline = time.monotonic() + self.settings.subagent_timeout_s
        while worker.is_alive():
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.generation != generation:
                break
            worker.join(min(SUBAGENT_CANCEL_POLL_S, remaining))
        if worker.is_alive():
            stop.set()
            timed_out = self.generation == generation
            reason = (
                f"timed out after {self.settings.subagent_timeout_s:g}s"
                if timed_out
                else "cancelled"
            )
            return self._failed(thread_id, context_id, reason)
        error = box.get("error")
        if isinstance(error, SubagentCancelled):
            return self._failed(thread_id, context_id, "cancelled")
        if error is not None:
            return self._failed(thread_id, context_id, f"crashed: {_one_line(error)}")
        return self._finished(thread_id, context_id, loops_cap)

    def _values(self, thread_id: str) -> dict[str, Any]:
        try:
            snapshot = self.graph.get_state(run_config(thread_id, 1))
        except Exception:  # a failed read must not hide the subagent's own error
            return {}
        return dict(snapshot.values or {})

    def _cap(self, text: str, thread_id: str) -> str:
        cut = truncate_text(
            text,
            SUBAGENT_RESULT_MAX_TOKENS,
            count=self.counter.count_text,
            marker_suffix=SUBAGENT_RESULT_MARKER.format(thread_id=thread_id),
        )
        return cut.text

    def _failed(self, thread_id: str, context_id: str, reason: str) -> SubagentOutcome:
        loops = int(self._values(thread_id).get("loops") or 0)
        return SubagentOutcome(False, f"subagent {reason}", context_id, thread_id, loops)

    def _finished(self, thread_id: str, context_id: str, loops_cap: int) -> SubagentOutcome:
        values = self._values(thread_id)
        messages: list[BaseMessage] = list(values.get("messages") or [])
        loops = int(values.get("loops") or 0)
        final = next(
            (m for m in reversed(messages) if isinstance(m, AIMessage) and not m.tool_calls),
            None,
        )
        answer = final.text if final is not None else ""
        # finalize marks the answer a request ended with at a limit.
        reason = stopped_reason(final) if final is not None else None
        if reason == STOP_STEP_LIMIT:
            text = f"subagent stopped at its loop cap ({loops_cap} steps); last answer: {answer}"
            return SubagentOutcome(False, self._cap(text, thread_id), context_id, thread_id, loops)
        why = STOPPED_WHY.get(reason or "")
        if why is not None:
            text = f"subagent stopped: {why}; last answer: {answer}"
            outcome = self._cap(text, thread_id)
            return SubagentOutcome(False, outcome, context_id, thread_id, loops)
        return SubagentOutcome(True, self._cap(answer, thread_id), context_id, thread_id, loops)

    def _record(self, thread_id: str) -> None:
        """Update the subagent's index row (message count, usage) after its run."""
        info = self.index.get(thread_id)
        if info is None:
            return
        messages = list(self._values(thread_id).get("messages") or [])
        from agentgraph.context.pricing import UsageTotals

        usage = UsageTotals()
        for m in messages:
            if isinstance(m, AIMessage):
                usage.add_message(m, self.settings.model)
        info.message_count = len(messages)
        info.input_tokens = usage.input_tokens
        info.output_tokens = usage.output_tokens
        info.cached_input_tokens = usage.cached_input_tokens
        info.cost_usd = usage.cost_usd
        info.updated_at = time.time()
        self.index.upsert(info)


@contextmanager
def sigint_cancels(cancel: Callable[[], None]) -> Iterator[None]:
    """While active, Ctrl-C first calls ``cancel`` (subagents, commands), then interrupts.

    Needed because LangGraph, when a run is interrupted, waits for its running tasks
    (a call_subagent waiting for its child) before the KeyboardInterrupt propagates:
    cancelling first lets those tasks return at once. Only in the main thread, and only
    when SIGINT has Python's default handler (a custom handler is left alone).
    """
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        cancel()
        signal.default_int_handler(signum, frame)

    signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def make_subagent_tool(runner: SubagentRunner) -> BaseTool:
    """Build the ``call_subagent`` tool around ``runner``."""

    @tool(SUBAGENT_TOOL, parse_docstring=True)
    def call_subagent(
        task: str,
        runtime: AgentToolRuntime,
        max_loops: int = SUBAGENT_MAX_LOOPS_DEFAULT,
        exclude_tools: list[str] | None = None,
    ) -> ToolMessage:
        """Delegate a subtask to a helper agent with your tools but an empty context.

        Returns JSON {ok, result, context_id, loops}; calls in one response run in parallel.

        Args:
            task: Complete instructions, including what to report.
            max_loops: Most model calls it may make.
            exclude_tools: Tools it may not use.
        """
        state: Mapping[str, Any] = runtime.state if isinstance(runtime.state, Mapping) else {}
        # Captured here: the runner calls it from the subagent's threads.
        sink = event_sink()

        def emit(event: dict[str, Any]) -> None:
            if sink is not None:
                with contextlib.suppress(Exception):  # UI events are best-effort
                    sink(event)

        outcome = runner.run(
            task,
            state,
            context_of(runtime),
            max_loops=max_loops,
            exclude_tools=list(exclude_tools or []),
            emit=emit,
        )
        return ToolMessage(
            content=outcome.to_json(),
            tool_call_id=runtime.tool_call_id,
            name=SUBAGENT_TOOL,
            status="success" if outcome.ok else "error",
        )

    return call_subagent
