"""Incremental per-session structures equal what a full pass over the history gives.

Random histories edited step by step as the graph edits them (new lists; appends,
compaction moves, in-place replacements, reloaded copies, deletions, reused and empty
call ids): after every step the incremental result equals the full computation.

Profiles: ``HYPOTHESIS_PROFILE=ci`` (many examples, derandomized) or ``dev`` (quick; the
default unless ``CI`` is set).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from agentgraph.runtime.tool_ids import SessionCallIds, admit_reply, call_ids

CI_EXAMPLES = 1_000
DEV_EXAMPLES = 60
_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large]
settings.register_profile(
    "incremental-ci",
    max_examples=CI_EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=_HEALTH,
)
settings.register_profile(
    "incremental-dev", max_examples=DEV_EXAMPLES, deadline=None, suppress_health_check=_HEALTH
)
PROFILE_NAME = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
PROFILE = settings.get_profile("incremental-dev" if PROFILE_NAME == "dev" else "incremental-ci")

OPS = ["append", "append", "append", "compact", "replace", "reload", "delete"]
CALL_IDS = ["c1", "c2", "c3", "", "call_0"]  # reused, empty and provider-style ids


class History:
    """A history edited the way the graph edits one."""

    def __init__(self) -> None:
        self.messages: list[BaseMessage] = []
        self.n = 0

    def _id(self) -> str:
        self.n += 1
        return f"m{self.n}"

    def message(self, data: st.DataObject) -> BaseMessage:
        kind = data.draw(st.integers(0, 3))
        if kind == 0:
            return HumanMessage("hi", id=self._id())
        if kind == 1:
            ids = data.draw(st.lists(st.sampled_from(CALL_IDS), max_size=3))
            calls = [{"name": "read_file", "args": {}, "id": cid} for cid in ids]
            return AIMessage("", tool_calls=calls, id=self._id())
        if kind == 2:
            call_id = data.draw(st.sampled_from(CALL_IDS))
            return ToolMessage("out", tool_call_id=call_id, id=self._id())
        return AIMessage("answer", id=self._id())

    def apply(self, op: str, data: st.DataObject) -> None:
        msgs = list(self.messages)
        if op == "append":
            msgs.extend(self.message(data) for _ in range(data.draw(st.integers(1, 4))))
        elif op == "compact" and msgs:
            keep = data.draw(st.integers(0, min(len(msgs), 4)))
            tail = msgs[len(msgs) - keep :]
            msgs = [*msgs[: len(msgs) - keep], HumanMessage("summary", id=self._id())]
            msgs.extend(m.model_copy(update={"id": self._id()}) for m in tail)
        elif op == "replace" and msgs:
            i = data.draw(st.integers(0, len(msgs) - 1))
            msgs[i] = self.message(data)
        elif op == "reload":
            msgs = [m.model_copy() for m in msgs]
        elif op == "delete" and msgs:
            del msgs[data.draw(st.integers(0, len(msgs) - 1))]
        self.messages = msgs


@PROFILE
@given(data=st.data())
def test_session_call_ids_equal_a_full_pass(data: st.DataObject) -> None:
    memo = SessionCallIds(max_sessions=2)
    sessions = {key: History() for key in ("a", "b", "c")}  # more than the memo keeps
    for _ in range(data.draw(st.integers(1, 15))):
        key = data.draw(st.sampled_from(sorted(sessions)))
        history = sessions[key]
        history.apply(data.draw(st.sampled_from(OPS)), data)
        assert set(memo.ids(key, history.messages)) == call_ids(history.messages)
        reply = history.message(data)
        if isinstance(reply, AIMessage):
            taken = memo.ids(key, history.messages)
            assert admit_reply(reply, history.messages, taken=taken) == admit_reply(
                reply, history.messages
            )
