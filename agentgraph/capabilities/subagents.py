"""``call_subagent``: run the same graph on a subtask in an isolated context.

A subagent gets its own ``thread_id`` (checkpointed in the same store, so it can be
listed, shown and resumed), ``context_id = "subagent-<8 hex>"``, ``parent_context`` =
the caller's context, a fresh state whose only message is the task, and its own loop
counter. The caller receives the subagent's final text after one status line
(``[subagent-1a2b3c4d done · 2 steps]``): plain text costs the caller's context about
15 tokens less per result than the JSON object it replaced, and a multi-line answer is
not escaped. The same facts, structured, travel in the result's ``artifact`` (never sent
to the model). None of the subagent's tool traffic enters the caller's history, and the
result is capped at :data:`SUBAGENT_RESULT_MAX_TOKENS`.

Progress: the subagent's own graph stream (``updates`` mode) is read as it runs, and each
tool call it makes is sent to the caller's UI event sink (the agent's per-turn sink, or
LangGraph's ``custom`` stream writer on a LangGraph server; see
:mod:`agentgraph.middleware.events`) as a ``subagent_tool`` event, between
``subagent_started`` and ``subagent_done``.

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
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.types import StreamMode

from agentgraph.capabilities.remote_subagents import (
    REMOTE_POLL_S,
    RUNNING_STATUSES,
    RemoteError,
    RemoteSubagents,
)
from agentgraph.capabilities.subagent_worktrees import (
    PATCH_FILE,
    STATE_HELD,
    STATE_RUNNING,
    Isolation,
    IsolationError,
    applied_record,
    clean_stale,
    create,
)
from agentgraph.capabilities.tools.spec import BUILTIN_TOOLS
from agentgraph.config import Settings
from agentgraph.context.tokens import TokenCounter
from agentgraph.context.truncation import truncate_text
from agentgraph.middleware.events import event_sink
from agentgraph.persistence.index import SessionIndex, SessionInfo, shorten_title
from agentgraph.runtime.call_records import keep_result
from agentgraph.runtime.history.calls import hit_output_limit
from agentgraph.runtime.history.kinds import stopped_reason
from agentgraph.runtime.nodes.limits import STOP_BUDGET, STOP_REPEATED, STOP_STEP_LIMIT
from agentgraph.runtime.runctx import AgentToolRuntime, RunContext, context_of, run_config
from agentgraph.runtime.state import MAIN_CONTEXT_ID

if TYPE_CHECKING:
    from agentgraph.capabilities.subagent_tasks import BackgroundTasks

SUBAGENT_TOOL = "call_subagent"
# The background subagents' tool (agentgraph/capabilities/subagent_tasks.py).
SUBAGENT_TASK_TOOL = "subagent_task"
SUBAGENT_CONTEXT_PREFIX = "subagent-"
SUBAGENT_ID_HEX_CHARS = 8
# Cap on the result handed back to the caller, so a chatty subagent cannot flood it.
SUBAGENT_RESULT_MAX_TOKENS = 2_000
SUBAGENT_RESULT_MARKER = " subagent result cut; the full transcript is in session {thread_id}"
# An answer the provider stopped at the output token limit ends mid-way: the caller is
# told, or it takes the part for the whole answer.
SUBAGENT_ANSWER_CUT_NOTE = (
    "\n[the subagent's answer stopped here at its output token limit; its session is {thread_id}]"
)
SUBAGENT_MAX_LOOPS_DEFAULT = 10
SUBAGENT_TASK_MAX_CHARS = 20_000
SUBAGENT_CANCEL_POLL_S = 0.2
# Bound on the parent-chain walk that computes a thread's nesting depth.
SUBAGENT_DEPTH_WALK_MAX = 32
SUBAGENT_ERROR_MAX_CHARS = 300
# One of runctx.POOL_SAFE_STREAM_MODES: the child runs with run_config's capped pool.
SUBAGENT_STREAM_MODE: StreamMode = "updates"
# The file tools a subagent without ``writes`` does not get (it shares the workspace).
SUBAGENT_WRITE_TOOLS = tuple(
    name for name, spec in BUILTIN_TOOLS.items() if spec.files_role == "writes"
)

SUBAGENT_PROMPT_SECTION = (
    "Delegation: call_subagent(task) runs a helper agent with a fresh context on a "
    "self-contained subtask (reading many or large files, searching, running a skill's "
    "steps) and returns only its final answer. Give it everything it needs in `task`; it "
    "cannot see this conversation."
)

# Why a subagent's request stopped at a limit other than its loop cap, as its result says.
STOPPED_WHY = {
    STOP_REPEATED: "the same tool calls returned the same output again and again",
    STOP_BUDGET: "its budget (AGENTGRAPH_TURN_BUDGET_TOKENS / _USD) is spent",
}


class SubagentCancelled(Exception):
    """The subagent was cancelled (timeout or the user interrupted the turn)."""


@dataclass
class SubagentOutcome:
    """What one subagent run produced (the tool result is built from it).

    Attributes:
        ok: Whether it ended with an answer of its own (not at a limit, not failed).
        result: Its final text (capped), or why it failed.
        context_id: ``subagent-<8 hex>`` (empty when it was refused before starting).
        thread_id: Its session thread.
        loops: Model calls it made.
        elapsed_s: Wall time it ran, in seconds.
        input_tokens: Prompt tokens its model calls used (provider-reported).
        output_tokens: Completion tokens its model calls used.
        changes: For a subagent with ``writes``: what became of its file changes
            (``state``: ``applied``, ``conflict``, ``held`` or ``none``; ``files``;
            ``deleted``: of the files applied, those it deleted; ``patch``: where the
            patch is kept when it was not applied).
    """

    ok: bool
    result: str
    context_id: str
    thread_id: str
    loops: int
    elapsed_s: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    changes: dict[str, Any] | None = None

    @property
    def status(self) -> str:
        """``done`` or ``failed``."""
        return "done" if self.ok else "failed"

    def status_line(self) -> str:
        """``[subagent-1a2b3c4d done · 2 steps]``: the first line of the tool result."""
        who = self.context_id or "subagent"
        steps = f"{self.loops} step" + ("" if self.loops == 1 else "s")
        return f"[{who} {self.status} · {steps}]"

    def to_text(self) -> str:
        """The tool result the model reads: the status line, then the result text."""
        return f"{self.status_line()}\n{self.result}"

    def artifact(self) -> dict[str, Any]:
        """The same facts, structured, for the result's ``artifact`` (not sent to the model)."""
        facts: dict[str, Any] = {
            "ok": self.ok,
            "context_id": self.context_id,
            "thread_id": self.thread_id,
            "loops": self.loops,
            "elapsed_s": round(self.elapsed_s, 3),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
        }
        if self.changes is not None:
            facts["changes"] = self.changes
        return facts


@dataclass
class PreparedSubagent:
    """A subagent whose limits were checked and session row written, not yet run."""

    task: str
    inputs: dict[str, Any]
    child: RunContext
    context_id: str
    parent_thread: str
    isolation: Isolation | None = None
    # Its run on the subagent server, when it was started there already.
    remote_run: str | None = None


@dataclass
class SubagentRecord:
    """One subagent this process ran or runs (``/agents`` lists them).

    Attributes:
        context_id: ``subagent-<8 hex>``; a background subagent's task id.
        thread_id: Its session thread.
        parent_thread: The caller's session thread.
        tool_call_id: The caller's ``call_subagent`` call.
        task: Its task, shortened.
        background: Whether the caller went on without waiting.
        started: ``time.monotonic()`` when it started.
        tool_calls: Tool calls it made so far.
        outcome: Set when it ended.
        cancelled: Set when it was cancelled by its id.
    """

    context_id: str
    thread_id: str
    parent_thread: str
    tool_call_id: str
    task: str
    background: bool = False
    started: float = field(default_factory=time.monotonic)
    tool_calls: int = 0
    outcome: SubagentOutcome | None = None
    cancelled: bool = False

    @property
    def status(self) -> str:
        """``running``, ``done``, ``failed`` or ``cancelled``."""
        if self.outcome is None:
            return "running"
        return "cancelled" if self.cancelled else self.outcome.status

    def elapsed_s(self) -> float:
        """Seconds it ran (so far, while running)."""
        if self.outcome is not None:
            return self.outcome.elapsed_s
        return time.monotonic() - self.started

    def tokens(self) -> int:
        """Prompt + completion tokens, known once it ended."""
        if self.outcome is None:
            return 0
        return self.outcome.input_tokens + self.outcome.output_tokens


@dataclass
class _Progress:
    """Turns a subagent's graph updates into ``subagent_tool`` UI events as it runs."""

    context_id: str
    tool_call_id: str
    started: float
    emit: Callable[[dict[str, Any]], None] | None
    redact: Callable[[Any], Any]
    record: SubagentRecord | None = None

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def update(self, chunk: Any) -> None:
        """One ``updates``-mode chunk of the subagent's stream: its new tool calls."""
        if not isinstance(chunk, Mapping):
            return
        for update in chunk.values():
            messages = update.get("messages") if isinstance(update, Mapping) else None
            for msg in messages if isinstance(messages, list) else []:
                if not isinstance(msg, AIMessage):
                    continue
                if self.record is not None:
                    self.record.tool_calls += len(msg.tool_calls)
                emit = self.emit
                if emit is None:
                    continue
                for call in msg.tool_calls:
                    emit(
                        {
                            "type": "subagent_tool",
                            "id": self.context_id,
                            "tool_call_id": self.tool_call_id,
                            "name": call["name"],
                            "args": self.redact(call["args"]),
                            "elapsed_s": round(self.elapsed(), 3),
                        }
                    )


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
        redact: Applied to a subagent's tool-call arguments before they are shown
            (progress events leave the session, as the caller's own calls do).
    """

    def __init__(
        self,
        settings: Settings,
        index: SessionIndex,
        counter: TokenCounter,
        artifacts_dir: Callable[[str], Path],
        tool_names: Sequence[str] = (),
        redact: Callable[[Any], Any] | None = None,
    ) -> None:
        self.settings = settings
        self.redact: Callable[[Any], Any] = redact if redact is not None else (lambda v: v)
        self.index = index
        self.counter = counter
        self.artifacts_dir = artifacts_dir
        self.tool_names = list(tool_names)
        self.graph: Any = None
        self._generation = 0
        self._lock = threading.Lock()
        # Every subagent run in this process, by context id (``/agents``, background tasks).
        self.records: dict[str, SubagentRecord] = {}
        # The background subagents (capabilities.subagent_tasks.BackgroundTasks), when on.
        self.tasks: BackgroundTasks | None = None
        # AGENTGRAPH_SUBAGENT_SERVER: subagents run there instead of in this process.
        self.remote: RemoteSubagents | None = None
        if settings.subagent_server:
            key = settings.subagent_server_api_key
            self.remote = RemoteSubagents(
                settings.subagent_server, key.get_secret_value() if key is not None else None
            )
        # Isolated trees a killed process left behind (their patches are kept).
        with contextlib.suppress(Exception):
            clean_stale(settings.home, artifacts_dir)

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
            denied += [SUBAGENT_TOOL, SUBAGENT_TASK_TOOL]
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
        tool_call_id: str = "",
        writes: bool = False,
    ) -> SubagentOutcome:
        """Run ``task`` in a new subagent thread and wait for its answer.

        Args:
            task: What the subagent must do (its only message).
            state: The caller's graph state.
            context: The caller's run context (its workspace, thread and user).
            max_loops: The subagent's own loop cap (bounded by ``settings.max_loops``).
            exclude_tools: Tools the subagent may not use.
            emit: UI event sink of the caller (``subagent_started``, ``subagent_tool``,
                ``subagent_done``; called from the subagent's worker thread too).
            tool_call_id: The caller's ``call_subagent`` call, named in those events.
            writes: Whether it may edit files (in an isolated tree, merged back at its
                end); without, it shares the workspace without the file-editing tools.

        Returns:
            The outcome; never raises for a subagent failure.
        """
        prepared = self.prepare(
            task, state, context, max_loops=max_loops, exclude_tools=exclude_tools, writes=writes
        )
        if isinstance(prepared, SubagentOutcome):
            return prepared
        return self.execute(prepared, emit=emit, tool_call_id=tool_call_id)

    def prepare(
        self,
        task: str,
        state: Mapping[str, Any],
        context: RunContext,
        *,
        max_loops: int = SUBAGENT_MAX_LOOPS_DEFAULT,
        exclude_tools: Sequence[str] = (),
        writes: bool = False,
    ) -> PreparedSubagent | SubagentOutcome:
        """Check the limits and create the subagent's session row; nothing runs yet.

        Args:
            task: What the subagent must do (its only message).
            state: The caller's graph state.
            context: The caller's run context (its workspace, thread and user).
            max_loops: The subagent's own loop cap (bounded by ``settings.max_loops``).
            exclude_tools: Tools the subagent may not use.
            writes: Give it an isolated tree to edit (see
                :mod:`agentgraph.capabilities.subagent_worktrees`); without, no file-editing tools.

        Returns:
            What :meth:`execute` runs, or the refusal (an outcome with ``ok`` False).
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
        if not writes:
            exclude_tools = [*exclude_tools, *SUBAGENT_WRITE_TOOLS]
        elif self.remote is not None:
            return SubagentOutcome(
                False,
                f"refused: subagents run on {self.remote.where}, in its own workspace; "
                "call without writes",
                "",
                "",
                0,
            )
        elif self.settings.edits == "ask" and self.tasks is None:
            return SubagentOutcome(
                False,
                "refused: with AGENTGRAPH_EDITS=ask a subagent's changes are applied with "
                "subagent_task, which is off here; call without writes",
                "",
                "",
                0,
            )
        allowed, denied = self.child_tools(state, exclude_tools, depth >= limit)
        workspace = context.workspace_path
        isolation: Isolation | None = None
        if writes:
            try:
                isolation = create(self.settings.home, context_id, workspace, parent_thread)
            except (IsolationError, OSError) as exc:
                why = _one_line(exc).split(": ", 1)[-1]
                return SubagentOutcome(
                    False, f"refused: no isolated workspace for it: {why}", "", "", 0
                )
            isolation.mark(STATE_RUNNING, thread_id=thread_id)
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
            "turn_cost_usd": 0.0,
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
            workspace_path=str(isolation.workspace) if isolation is not None else workspace,
            thread_id=thread_id,
            artifacts_dir=str(self.artifacts_dir(thread_id)),
            max_loops=loops_cap,
            user_id=context.user_id,
            can_ask=False,
        )
        return PreparedSubagent(task, inputs, child, context_id, parent_thread, isolation)

    def execute(
        self,
        prepared: PreparedSubagent,
        *,
        emit: Callable[[dict[str, Any]], None] | None = None,
        tool_call_id: str = "",
        stop: threading.Event | None = None,
        background: bool = False,
        record: SubagentRecord | None = None,
    ) -> SubagentOutcome:
        """Run a prepared subagent to its end and return its outcome.

        Args:
            prepared: From :meth:`prepare`.
            emit: UI event sink of the caller (``subagent_started``, ``subagent_tool``,
                ``subagent_done``; called from the subagent's worker thread too).
            tool_call_id: The caller's ``call_subagent`` call, named in those events.
            stop: Set to cancel this subagent alone (it stops at its next step).
            background: Whether the caller went on without waiting (shown by /agents).
            record: Its record, when the caller registered it already (:meth:`register`).

        Returns:
            The outcome; never raises for a subagent failure.
        """
        task, inputs, child = prepared.task, prepared.inputs, prepared.child
        context_id, thread_id = prepared.context_id, child.thread_id
        if record is None:
            record = self.register(prepared, tool_call_id, background=background)
        progress = _Progress(context_id, tool_call_id, record.started, emit, self.redact)
        progress.record = record
        if emit is not None:
            emit(
                {
                    "type": "subagent_started",
                    "id": context_id,
                    "tool_call_id": tool_call_id,
                    "thread_id": thread_id,
                    "task": shorten_title(task),
                    "background": background,
                }
            )
        outcome = self._run_thread(inputs, child, context_id, progress, stop, prepared.remote_run)
        if prepared.isolation is not None:
            self._merge_back(prepared.isolation, outcome)
        outcome.elapsed_s = progress.elapsed()
        usage = self._record(thread_id)
        if usage is not None:
            outcome.input_tokens, outcome.output_tokens = usage
        record.outcome = outcome
        if emit is not None:
            emit(
                {
                    "type": "subagent_done",
                    "id": context_id,
                    "tool_call_id": tool_call_id,
                    "thread_id": thread_id,
                    "ok": outcome.ok,
                    "status": outcome.status,
                    "loops": outcome.loops,
                    "elapsed_s": round(outcome.elapsed_s, 3),
                    "input_tokens": outcome.input_tokens,
                    "output_tokens": outcome.output_tokens,
                    "result": outcome.result,
                    "background": background,
                }
            )
        return outcome

    def _merge_back(self, isolation: Isolation, outcome: SubagentOutcome) -> None:
        """Apply, hold or keep as a patch what an isolated subagent changed; say which.

        Changes of a subagent that finished are applied (``AGENTGRAPH_EDITS=on``) or
        held for ``subagent_task(action="apply")`` (``ask``); those of one that did not
        finish are held too (when ``subagent_task`` exists) so its partial work is not
        applied unasked. A conflict applies nothing and keeps the patch.
        """
        try:
            changes = isolation.changes()
        except IsolationError as exc:
            outcome.changes = {"state": "error"}
            outcome.result = f"[its changes could not be read: {exc}]\n{outcome.result}"
            isolation.remove()
            return
        files = [c.path for c in changes.files]
        if not files:
            outcome.changes = {"state": "none", "files": []}
            outcome.result = f"[no file changes]\n{outcome.result}"
            isolation.remove()
            return
        ask = self.settings.edits == "ask" or not outcome.ok
        if ask and self.tasks is not None:
            isolation.mark(STATE_HELD)
            why = "the user must approve them" if outcome.ok else "it did not finish"
            outcome.changes = {"state": "held", "files": files}
            outcome.result = (
                f"[changes held, not applied ({why}): {changes.summary()}; "
                f'{SUBAGENT_TASK_TOOL}(task_id="{outcome.context_id}", action="apply") '
                f'applies them, action="discard" drops them]\n{outcome.result}'
            )
            return
        patch = self.keep_patch(outcome.thread_id, changes.patch)
        if not ask:
            applied = isolation.apply(changes)
            if not applied.conflicts:
                outcome.changes = applied_record(changes, applied.applied)
                outcome.result = (
                    f"[changes applied to the workspace: {changes.summary()}]\n{outcome.result}"
                )
                isolation.remove()
                return
            outcome.changes = {"state": "conflict", "files": applied.conflicts, "patch": patch}
            outcome.result = (
                f"[changes NOT applied, conflict: {'; '.join(applied.conflicts)}; nothing of "
                f"them was written; the patch is in {patch}]\n{outcome.result}"
            )
        else:
            outcome.changes = {"state": "kept", "files": files, "patch": patch}
            outcome.result = (
                f"[its changes were not applied (it did not finish): {changes.summary()}; "
                f"the patch is in {patch}]\n{outcome.result}"
            )
        isolation.remove()

    def keep_patch(self, thread_id: str, patch: str) -> str:
        """Store a subagent's patch in its artifacts folder; the file's path."""
        folder = self.artifacts_dir(thread_id)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / PATCH_FILE
        path.write_text(patch)
        return str(path)

    def register(
        self, prepared: PreparedSubagent, tool_call_id: str, *, background: bool = False
    ) -> SubagentRecord:
        """Record ``prepared`` as running (``/agents``, ``subagent_task``)."""
        record = SubagentRecord(
            prepared.context_id,
            prepared.child.thread_id,
            prepared.parent_thread,
            tool_call_id,
            shorten_title(prepared.task),
            background,
        )
        with self._lock:
            self.records[prepared.context_id] = record
        return record

    def _run_thread(
        self,
        inputs: dict[str, Any],
        child: RunContext,
        context_id: str,
        progress: _Progress,
        cancel: threading.Event | None = None,
        remote_run: str | None = None,
    ) -> SubagentOutcome:
        if self.remote is not None:
            return self._run_remote(
                self.remote, inputs, child, context_id, progress, cancel, remote_run
            )
        thread_id, loops_cap = child.thread_id, child.max_loops
        config = run_config(thread_id, loops_cap)
        generation = self.generation
        # Set on timeout, or by the caller (a background subagent cancelled by id).
        stop = cancel if cancel is not None else threading.Event()
        box: dict[str, Any] = {}

        def cancelled() -> bool:
            return stop.is_set() or self.generation != generation

        def drive() -> None:
            updates = self.graph.stream(
                inputs, config, context=child, stream_mode=SUBAGENT_STREAM_MODE
            )
            try:
                for chunk in updates:
                    if cancelled():
                        raise SubagentCancelled()
                    with contextlib.suppress(Exception):  # progress is best-effort
                        progress.update(chunk)
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
            if remaining <= 0 or cancelled():
                break
            worker.join(min(SUBAGENT_CANCEL_POLL_S, remaining))
        if worker.is_alive():
            timed_out = not cancelled()
            stop.set()
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

    def _run_remote(
        self,
        remote: RemoteSubagents,
        inputs: dict[str, Any],
        child: RunContext,
        context_id: str,
        progress: _Progress,
        cancel: threading.Event | None,
        run_id: str | None = None,
    ) -> SubagentOutcome:
        """Run the subagent on the subagent server (unless ``run_id`` runs it already)
        and poll it to its end."""
        thread_id = child.thread_id
        generation = self.generation
        stop = cancel if cancel is not None else threading.Event()
        if run_id is None:
            try:
                run_id = self.start_remote(remote, inputs, child)
            except RemoteError as exc:
                return SubagentOutcome(False, f"subagent failed: {exc}", context_id, thread_id, 0)
        deadline = time.monotonic() + self.settings.subagent_timeout_s
        shown = 1  # the task message
        while True:
            stopped = stop.is_set() or self.generation != generation
            if stopped or time.monotonic() >= deadline:
                remote.cancel(thread_id, run_id)
                reason = (
                    "cancelled"
                    if stopped
                    else f"timed out after {self.settings.subagent_timeout_s:g}s"
                )
                return self._failed(thread_id, context_id, reason)
            try:
                status = remote.status(thread_id, run_id)
                messages = remote.values(thread_id).get("messages") or []
            except RemoteError as exc:
                remote.cancel(thread_id, run_id)
                return SubagentOutcome(False, f"subagent failed: {exc}", context_id, thread_id, 0)
            if len(messages) > shown:
                with contextlib.suppress(Exception):  # progress is best-effort
                    progress.update({"remote": {"messages": messages[shown:]}})
                shown = len(messages)
            if status not in RUNNING_STATUSES:
                break
            stop.wait(REMOTE_POLL_S)
        if status == "success":
            return self._finished(thread_id, context_id, child.max_loops)
        why = remote.error_of(thread_id, run_id) if status == "error" else f"its run {status}"
        return self._failed(thread_id, context_id, f"failed on the server: {why}")

    @staticmethod
    def start_remote(remote: RemoteSubagents, inputs: dict[str, Any], child: RunContext) -> str:
        """Start the subagent's run on the subagent server; its run id.

        Raises:
            RemoteError: The server could not be used.
        """
        context = {"max_loops": child.max_loops, "user_id": child.user_id, "can_ask": False}
        return remote.start(child.thread_id, inputs, context)

    def _values(self, thread_id: str) -> dict[str, Any]:
        if self.remote is not None:
            try:
                return self.remote.values(thread_id)
            except RemoteError:  # a failed read must not hide the subagent's own error
                return {}
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

    def stored_outcome(self, thread_id: str, context_id: str) -> SubagentOutcome | None:
        """The outcome of a subagent no live worker runs, from its stored thread.

        A process that died while a background subagent ran left its thread as far as
        its last checkpoint: a final answer there is its result; anything else means it
        was interrupted, its partial work kept in its session. A subagent on the
        subagent server ran on without its caller: while its run goes on there is no
        outcome yet (None), and it is delivered once the run has ended.

        Args:
            thread_id: The subagent's session thread.
            context_id: Its context id.
        """
        if self.remote is not None:
            with contextlib.suppress(RemoteError):  # unreachable: say interrupted
                if self.remote.latest_status(thread_id) in RUNNING_STATUSES:
                    return None
        values = self._values(thread_id)
        messages: list[BaseMessage] = list(values.get("messages") or [])
        last = messages[-1] if messages else None
        if isinstance(last, AIMessage) and not last.tool_calls:
            return self._finished(thread_id, context_id, int(values.get("loops") or 0) or 1)
        loops = int(values.get("loops") or 0)
        why = (
            "subagent interrupted: the agent stopped while it ran; its partial work is in "
            f"session {thread_id}"
        )
        patch = self.artifacts_dir(thread_id) / PATCH_FILE
        if patch.is_file():
            why += f"; its file changes (not applied) are in {patch}"
        return SubagentOutcome(False, why, context_id, thread_id, loops)

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
        if final is not None and hit_output_limit(final):
            answer += SUBAGENT_ANSWER_CUT_NOTE.format(thread_id=thread_id)
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

    def _record(self, thread_id: str) -> tuple[int, int] | None:
        """Update the subagent's index row (message count, usage) after its run.

        Returns:
            Its ``(input_tokens, output_tokens)``, or None without an index row.
        """
        info = self.index.get(thread_id)
        if info is None:
            return None
        messages = list(self._values(thread_id).get("messages") or [])
        from agentgraph.providers.pricing import UsageTotals

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
        return usage.input_tokens, usage.output_tokens


def _refused(call_id: str, text: str) -> ToolMessage:
    """The error result of a ``call_subagent`` call that did not start."""
    return ToolMessage(content=text, tool_call_id=call_id, name=SUBAGENT_TOOL, status="error")


def _start_background(
    runner: SubagentRunner,
    tasks: BackgroundTasks | None,
    task: str,
    state: Mapping[str, Any],
    runtime: Any,
    max_loops: int,
    exclude_tools: list[str] | None,
    emit: Callable[[dict[str, Any]], None],
    writes: bool = False,
) -> ToolMessage:
    """``call_subagent(background=true)``: start it and answer with its task id at once."""

    from agentgraph.capabilities.subagent_tasks import start_in_background

    call_id = str(runtime.tool_call_id or "")
    refused = partial(_refused, call_id)

    if tasks is None or tasks.limit <= 0:
        return refused("refused: background subagents are off here; call without background")
    # The limit check and the start under one lock: parallel calls in one response
    # cannot both pass the limit.
    with tasks.starting:
        running = tasks.running()
        if len(running) >= tasks.limit:
            ids = ", ".join(r.context_id for r in running)
            return refused(
                f"refused: {len(running)} background subagents already run (at most "
                f"{tasks.limit}, AGENTGRAPH_SUBAGENT_MAX_BACKGROUND): {ids}; collect or cancel "
                "one with subagent_task first, or call without background"
            )
        prepared = runner.prepare(
            task,
            state,
            context_of(runtime),
            max_loops=max_loops,
            exclude_tools=list(exclude_tools or []),
            writes=writes,
        )
        if isinstance(prepared, SubagentOutcome):
            return refused(prepared.to_text())
        if runner.remote is not None:
            # The run exists on the server before its task id is returned: a caller killed
            # right after the start still finds it there on resume.
            try:
                run = runner.start_remote(runner.remote, prepared.inputs, prepared.child)
                prepared.remote_run = run
            except RemoteError as exc:
                return refused(f"[{prepared.context_id} failed · 0 steps]\nsubagent failed: {exc}")
        started = start_in_background(tasks, prepared, tool_call_id=call_id, fallback=emit)
        # Until the caller's checkpoint surely holds this start, a file keeps it: a caller
        # killed in between is given this result on resume, and the subagent is delivered.
        ctx = context_of(runtime)
        folder = (
            Path(ctx.artifacts_dir) if ctx.artifacts_dir else runner.artifacts_dir(ctx.thread_id)
        )
        keep_result(folder, call_id, str(started.content), started.artifact)
        return started


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


def make_subagent_tool(runner: SubagentRunner, tasks: BackgroundTasks | None = None) -> BaseTool:
    """Build the ``call_subagent`` tool around ``runner`` (``tasks``: background runs)."""

    @tool(SUBAGENT_TOOL, parse_docstring=True)
    def call_subagent(
        task: str,
        runtime: AgentToolRuntime,
        max_loops: int = SUBAGENT_MAX_LOOPS_DEFAULT,
        exclude_tools: list[str] | None = None,
        background: bool = False,
        writes: bool = False,
    ) -> ToolMessage:
        """Delegate a subtask to a helper agent with your tools but an empty context.

        Returns a status line, then its final answer; calls in one response run in parallel.

        Args:
            task: Complete instructions, including what to report.
            exclude_tools: Tools it may not use.
            background: Return a task id now; the result comes later as a message.
            writes: Edit files in its own worktree.
        """
        state: Mapping[str, Any] = runtime.state if isinstance(runtime.state, Mapping) else {}
        # Captured here: the runner calls it from the subagent's threads.
        sink = event_sink()

        def emit(event: dict[str, Any]) -> None:
            if sink is not None:
                with contextlib.suppress(Exception):  # UI events are best-effort
                    sink(event)

        if background:
            return _start_background(
                runner, tasks, task, state, runtime, max_loops, exclude_tools, emit, writes
            )
        outcome = runner.run(
            task,
            state,
            context_of(runtime),
            max_loops=max_loops,
            exclude_tools=list(exclude_tools or []),
            emit=emit,
            tool_call_id=str(runtime.tool_call_id or ""),
            writes=writes,
        )
        return ToolMessage(
            content=outcome.to_text(),
            artifact=outcome.artifact(),
            tool_call_id=runtime.tool_call_id,
            name=SUBAGENT_TOOL,
            status="success" if outcome.ok else "error",
        )

    return call_subagent
