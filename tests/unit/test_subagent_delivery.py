"""Background subagents' outcomes reach the caller exactly once: the delivery bookkeeping.

:func:`agentgraph.capabilities.subagent_tasks.deliveries` decides, from the caller's history alone
(and which tasks have ended), which notices a model call appends. A simulated session
drives it through random interleavings of starts, finishes, model calls (some failing,
which store nothing), collections with ``subagent_task`` and process kills (the live
registry is lost; ended tasks are read back from their stored threads, the others are
interrupted).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from agentgraph.capabilities.subagent_tasks import (
    BACKGROUND_KEY,
    COLLECTED_KEY,
    NOTICE_ID_PREFIX,
    TASK_ID_KEY,
    BackgroundStart,
    deliveries,
    settled_ids,
    undelivered,
)
from agentgraph.capabilities.subagents import SUBAGENT_TASK_TOOL, SUBAGENT_TOOL, SubagentOutcome

MAX_TASKS = 6
MAX_STEPS = 60


def start_result(task_id: str) -> ToolMessage:
    return ToolMessage(
        content=f"[{task_id} started in the background]",
        artifact={BACKGROUND_KEY: True, TASK_ID_KEY: task_id, "thread_id": f"thread-{task_id}"},
        tool_call_id=f"call-{task_id}",
        name=SUBAGENT_TOOL,
    )


def collected_result(task_id: str, outcome: SubagentOutcome) -> ToolMessage:
    return ToolMessage(
        content=outcome.to_text(),
        artifact={COLLECTED_KEY: task_id, **outcome.artifact()},
        tool_call_id=f"collect-{task_id}-{id(outcome)}",
        name=SUBAGENT_TASK_TOOL,
    )


def done(task_id: str) -> SubagentOutcome:
    return SubagentOutcome(True, f"RESULT-{task_id}", task_id, f"thread-{task_id}", 2)


def interrupted(task_id: str) -> SubagentOutcome:
    return SubagentOutcome(False, "subagent interrupted", task_id, f"thread-{task_id}", 1)


@dataclass
class Session:
    """One caller session and the process running its background subagents."""

    history: list[BaseMessage] = field(default_factory=lambda: [HumanMessage("go", id="u0")])
    live: dict[str, SubagentOutcome | None] = field(default_factory=dict)  # this process
    stored: dict[str, SubagentOutcome] = field(default_factory=dict)  # their threads
    started: list[str] = field(default_factory=list)
    calls: int = 0

    def outcome_of(self, start: BackgroundStart) -> SubagentOutcome | None:
        if start.task_id in self.live:
            return self.live[start.task_id]
        # No live worker: the process that ran it is gone; read its stored thread.
        return self.stored.get(start.task_id, interrupted(start.task_id))

    def start(self) -> None:
        task_id = f"subagent-{len(self.started):08x}"
        self.started.append(task_id)
        self.live[task_id] = None
        self.history.append(start_result(task_id))

    def finish(self, index: int) -> None:
        running = [t for t, o in self.live.items() if o is None]
        if running:
            task_id = running[index % len(running)]
            self.live[task_id] = self.stored[task_id] = done(task_id)

    def model_call(self, fails: bool) -> None:
        before = list(self.history)
        notices = deliveries(self.history, self.outcome_of)
        # Only ended tasks, each at most once, never one already settled.
        settled = settled_ids(self.history)
        assert len({n.id for n in notices}) == len(notices)
        for notice in notices:
            task_id = str(notice.id).removeprefix(NOTICE_ID_PREFIX)
            assert task_id not in settled
            assert self.outcome_of(BackgroundStart(task_id, "")) is not None
        if fails:  # the node raised: nothing of this call is stored
            return
        self.calls += 1
        self.history += [*notices, AIMessage(f"reply {self.calls}", id=f"a{self.calls}")]
        assert self.history[: len(before)] == before  # appended only: the prefix is kept

    def collect(self, index: int) -> None:
        """The model calls subagent_task(action="result") for an ended, unsettled task."""
        due = [s for s in undelivered(self.history) if self.outcome_of(s) is not None]
        if due:
            start = due[index % len(due)]
            outcome = self.outcome_of(start)
            assert outcome is not None
            self.history.append(collected_result(start.task_id, outcome))

    def kill(self) -> None:
        """The process dies: its live registry is gone; stored threads remain."""
        self.live = {}


steps = st.lists(
    st.one_of(
        st.tuples(st.just("start"), st.integers(0, 0)),
        st.tuples(st.just("finish"), st.integers(0, MAX_TASKS)),
        st.tuples(st.just("call"), st.integers(0, 1)),
        st.tuples(st.just("collect"), st.integers(0, MAX_TASKS)),
        st.tuples(st.just("kill"), st.integers(0, 0)),
    ),
    max_size=MAX_STEPS,
)


@settings(max_examples=300, deadline=None)
@given(steps)
def test_every_background_outcome_is_delivered_exactly_once(plan: list[tuple[str, int]]) -> None:
    session = Session()
    for action, n in plan:
        if action == "start" and len(session.started) < MAX_TASKS:
            session.start()
        elif action == "finish":
            session.finish(n)
        elif action == "call":
            session.model_call(fails=n == 1)
        elif action == "collect":
            session.collect(n)
        elif action == "kill":
            session.kill()
    # Whatever still runs ends; the next successful call delivers what is left.
    while any(o is None for o in session.live.values()):
        session.finish(0)
    session.model_call(fails=False)

    history = session.history
    for task_id in session.started:
        notices = [m for m in history if m.id == NOTICE_ID_PREFIX + task_id]
        collected = [
            m
            for m in history
            if isinstance(m, ToolMessage)
            and isinstance(m.artifact, dict)
            and m.artifact.get(COLLECTED_KEY) == task_id
        ]
        assert len(notices) + len(collected) == 1, (task_id, notices, collected)
        text = str((notices or collected)[0].content)
        # The stored result when it ended, "interrupted" when its process died first.
        expected = session.stored.get(task_id, interrupted(task_id))
        assert expected.to_text() in text
    assert undelivered(history) == []
    assert deliveries(history, session.outcome_of) == []


def test_a_running_task_is_not_delivered_and_an_ended_one_is_delivered_once() -> None:
    session = Session()
    session.start()
    session.start()
    session.model_call(fails=False)
    assert not any(str(m.id).startswith(NOTICE_ID_PREFIX) for m in session.history)
    session.finish(1)  # the second ends first
    session.model_call(fails=False)
    session.model_call(fails=False)
    ids = [m.id for m in session.history if str(m.id).startswith(NOTICE_ID_PREFIX)]
    assert ids == [NOTICE_ID_PREFIX + session.started[1]]
