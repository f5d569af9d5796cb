"""Which calls of one step wait for which: those that touch the same files run in order.

LangGraph's ``ToolNode`` runs a reply's calls together, in threads. Two ``edit_file``
calls on one file then both read it before either writes: each reports success and the
file keeps one edit (every one of 20 runs of four edits of one 2,000-line file lost
some). A ``read_file`` beside an edit of its file shows either text, a command beside an
edit of a file it reads either one. A model writes its calls in the order it means them,
so a call waits for the earlier calls of its step it conflicts with — one of the two
changes what the other reads or changes — and the rest still run together: reads of
different files, reads beside reads, subagents beside each other.

What a call touches (:func:`touches`): ``read_file`` reads the file its path names, a
write or an edit writes it; other built-in tools that only read read everything (a
``grep`` over the folder of an edited file); a command changes everything, and so does a
tool without a spec (an MCP server's) unless it declares it changes nothing, and
``subagent_task``'s ``apply`` of a background subagent's held changes. Tools that touch
no workspace file (todos, memory, history, plans) wait for nothing. ``call_subagent``
waits for the earlier calls that change files (its subagent starts from the workspace as
they leave it) and nothing waits for it: subagents run side by side, each in its own
tree, and their changes are merged one at a time when they end. A command that waits for
a later call of its own reply (``until [ -f flag ]`` beside a ``write_file`` of the flag)
now waits until its timeout: such pieces belong in one command.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from langchain_core.messages import ToolCall

from agentgraph.capabilities.tools.spec import BUILTIN_TOOLS, tool_spec

__all__ = ["EVERYTHING", "CallOrder", "Touches", "touches", "waits"]

# Every workspace file: what a command may read or change (no path holds a NUL).
_ALL = "\0all"
EVERYTHING: frozenset[str] = frozenset({_ALL})
_NOTHING: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Touches:
    """The workspace files one call reads and changes (:data:`EVERYTHING` for all).

    Attributes:
        reads: Files it reads while it runs.
        writes: Files it changes.
        starts_from: Files it reads once, as it starts (a subagent's tree is a snapshot
            of the workspace): it waits for earlier calls that change them, and nothing
            waits for it on their account.
    """

    reads: frozenset[str] = _NOTHING
    writes: frozenset[str] = _NOTHING
    starts_from: frozenset[str] = _NOTHING

    def conflicts(self, other: Touches) -> bool:
        """Whether one of the two calls changes what the other reads or changes."""
        return _meet(self.writes, other.reads | other.writes) or _meet(
            other.writes, self.reads | self.writes
        )


def _meet(a: frozenset[str], b: frozenset[str]) -> bool:
    """Whether two sets of files share one (:data:`EVERYTHING` shares any)."""
    if not a or not b:
        return False
    return _ALL in a or _ALL in b or not a.isdisjoint(b)


def touches(
    call: ToolCall, changing: Callable[[str], bool], name_of: Callable[[str], str]
) -> Touches:
    """What ``call`` touches.

    Args:
        call: A tool call of the step.
        changing: Whether a tool without a spec may change files (not declared read-only).
        name_of: A path argument as one name for the file however it is spelled.

    Returns:
        The files it reads and changes.
    """
    name = call["name"]
    spec = tool_spec(name)
    args = call.get("args")
    path = args.get(spec.path_arg) if spec.path_arg and isinstance(args, Mapping) else None
    if name not in BUILTIN_TOOLS:
        return Touches(EVERYTHING, EVERYTHING if changing(name) else _NOTHING)
    if spec.path_arg:
        # A call without a usable path fails on its own: it touches nothing.
        if not isinstance(path, str) or not path.strip():
            return Touches()
        file = frozenset({name_of(path)})
        return Touches(file, file if spec.modifies_files else _NOTHING)
    if name == _CALL_SUBAGENT:
        return Touches(starts_from=EVERYTHING)
    if name == _SUBAGENT_TASK and isinstance(args, Mapping) and args.get("action") == "apply":
        # Held changes merged into the workspace: files it cannot name before it runs.
        return Touches(EVERYTHING, EVERYTHING)
    if spec.modifies_files:  # a command
        return Touches(EVERYTHING, EVERYTHING)
    if spec.read_only and name in _READS_WORKSPACE:
        return Touches(EVERYTHING, _NOTHING)
    return Touches()


# Built-in tools without a path argument that read workspace files.
_READS_WORKSPACE = frozenset({"list_dir", "glob", "grep"})
# The background subagents' tool; its "apply" action writes their held changes.
_SUBAGENT_TASK = "subagent_task"
_CALL_SUBAGENT = "call_subagent"


def waits(
    calls: Sequence[ToolCall], changing: Callable[[str], bool], name_of: Callable[[str], str]
) -> dict[str, tuple[str, ...]]:
    """For each call of a step (by id), the ids of the earlier calls it must wait for.

    Args:
        calls: The step's calls, in the order the model wrote them.
        changing: Whether a tool without a spec may change files.
        name_of: A path argument as one name for the file.

    Returns:
        Call id -> earlier conflicting call ids; calls waiting for none are left out.
        None wait when two calls share an id (a call would wait for itself).
    """
    ids = [call.get("id") or "" for call in calls]
    if len(set(ids)) != len(ids):
        return {}
    seen: list[tuple[str, Touches]] = []
    out: dict[str, tuple[str, ...]] = {}
    for call in calls:
        call_id = call.get("id") or ""
        mine = touches(call, changing, name_of)
        earlier = tuple(
            other
            for other, theirs in seen
            if mine.conflicts(theirs) or _meet(theirs.writes, mine.starts_from)
        )
        if earlier and call_id:
            out[call_id] = earlier
        if call_id:
            seen.append((call_id, mine))
    return out


@dataclass
class CallOrder:
    """The waits of one step's calls (:func:`waits`), kept while its calls run in threads.

    Attributes:
        waits: Call id -> the ids of the earlier calls it waits for.
        done: Call id -> set once that call has ended, whatever its outcome.
    """

    waits: Mapping[str, tuple[str, ...]]
    done: dict[str, threading.Event] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for earlier in self.waits.values():
            for call_id in earlier:
                self.done.setdefault(call_id, threading.Event())

    def before(self, call_id: str) -> None:
        """Block until the calls ``call_id`` waits for have ended. They were handed to
        the step's threads before it (in the order written), so each has started."""
        for earlier in self.waits.get(call_id, ()):
            self.done[earlier].wait()

    def after(self, call_id: str) -> None:
        """Mark ``call_id`` ended: the calls waiting for it may start."""
        event = self.done.get(call_id)
        if event is not None:
            event.set()
