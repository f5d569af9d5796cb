"""Session lifecycle around the store: in-use checks, delete, cleanup, import, turn hooks.

A session in use by a process holds its lease (``persistence/leases.py``); ``export``,
``delete``, ``compact`` and cleanup refuse (or skip) a session another live process holds.
Deleting a session removes its checkpoints, index row, artifacts
(``artifacts/<thread_id>``), undo snapshots (``snapshots/<thread_id>``) and
isolated workspace (``workspaces/<thread_id>``).
"""

from __future__ import annotations

import contextlib
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.graph import END, START, StateGraph

from agentgraph.config import Settings
from agentgraph.persistence.index import SessionInfo, shorten_title
from agentgraph.persistence.leases import SessionInUse, holding, in_use_error
from agentgraph.persistence.store import Store
from agentgraph.persistence.thread_ids import is_valid_thread_id, session_path
from agentgraph.providers.pricing import reply_usages
from agentgraph.runtime.history import agentgraph_kind
from agentgraph.runtime.state import MAIN_CONTEXT_ID, AppState
from agentgraph.session.titles import SOURCE_FIRST_MESSAGE, TitleWriter
from agentgraph.session.transcript import ImportedSession, new_session_id
from agentgraph.session.undo import Scan, TurnChanges, UndoStore, snapshots_dir
from agentgraph.session.workspaces import WORKSPACES_DIR_NAME

SECONDS_PER_DAY = 86_400
# Bound of the start-up cleanup (it runs in a background thread).
CLEANUP_TIME_BUDGET_S = 10.0

# Claude Code's resume preamble, without the summary: the prompt view already holds it.
RESUME_PREAMBLE = (
    "This session is being continued from a previous conversation that ran out of "
    "context. The conversation is summarized above."
)
RESUME_KIND = "resume"


# --------------------------------------------------------------------------- in use


def ensure_not_in_use(store: Store, thread_id: str, action: str) -> None:
    """Raise :class:`SessionInUse` when another live process holds the session.

    For read-only actions (export); anything that writes takes the lease instead
    (``store.leases.acquire`` or :func:`holding`).
    """
    current = store.leases.holder(thread_id)
    if current is not None:
        raise in_use_error(thread_id, action, current)


# --------------------------------------------------------------------------- delete


def session_dirs(home: Path, thread_id: str) -> list[Path]:
    """Folders belonging to a session (artifacts, snapshots, isolated workspace)."""
    return [
        session_path(home, "artifacts", thread_id),
        snapshots_dir(home, thread_id),
        session_path(home, WORKSPACES_DIR_NAME, thread_id),
    ]


def delete_session(store: Store, home: Path, thread_id: str, *, with_children: bool = True) -> int:
    """Delete a session (and its subagent sessions) with all its files.

    Returns:
        Number of sessions deleted.
    """
    ids = [thread_id]
    if with_children:
        stack = [thread_id]
        while stack:
            for child in store.index.children(stack.pop()):
                ids.append(child.thread_id)
                stack.append(child.thread_id)
    for tid in ids:
        store.delete_thread(tid)
        for folder in session_dirs(home, tid):
            if folder.is_dir() and folder.parent.parent == home:
                shutil.rmtree(folder, ignore_errors=True)
        store.leases.release(tid)
    return len(ids)


# --------------------------------------------------------------------------- cleanup


@dataclass
class CleanupResult:
    """Sessions removed (or that would be, in a dry run)."""

    sessions: list[SessionInfo] = field(default_factory=list)
    skipped_in_use: list[str] = field(default_factory=list)
    complete: bool = True


def stale_sessions(
    store: Store,
    older_than_days: float,
    *,
    now: float | None = None,
    keep: set[str] | frozenset[str] = frozenset(),
) -> CleanupResult:
    """Top-level sessions not updated for ``older_than_days`` (never ``keep`` or in use)."""
    now = time.time() if now is None else now
    cutoff = now - older_than_days * SECONDS_PER_DAY
    result = CleanupResult()
    for info in store.index.list_sessions(include_subagents=False):
        if info.updated_at >= cutoff or info.thread_id in keep:
            continue
        if store.leases.holder(info.thread_id) is not None:
            result.skipped_in_use.append(info.thread_id)
            continue
        result.sessions.append(info)
    return result


def clean_sessions(
    store: Store,
    home: Path,
    older_than_days: float,
    *,
    dry_run: bool = False,
    now: float | None = None,
    keep: set[str] | frozenset[str] = frozenset(),
    time_budget_s: float | None = None,
) -> CleanupResult:
    """Delete sessions not updated for ``older_than_days`` with their files."""
    start = time.monotonic()
    result = stale_sessions(store, older_than_days, now=now, keep=keep)
    if dry_run:
        return result
    done: list[SessionInfo] = []
    for info in result.sessions:
        if time_budget_s is not None and time.monotonic() - start > time_budget_s:
            result.complete = False
            break
        try:
            # Taken, not only checked: a run starting meanwhile waits for nothing gone.
            with holding(store.leases, info.thread_id, "delete"):
                delete_session(store, home, info.thread_id)
        except SessionInUse:
            result.skipped_in_use.append(info.thread_id)
            continue
        done.append(info)
    result.sessions = done
    return result


def start_background_maintenance(
    settings: Settings, store: Store, keep: Callable[[], set[str]]
) -> threading.Thread:
    """Start-up cleanup (``AGENTGRAPH_CLEANUP_DAYS``) and size-triggered prune, bounded.

    Runs in a daemon thread; ``keep()`` returns the sessions in use (never deleted).
    Failures are swallowed: maintenance must never disturb the session.
    """

    def work() -> None:
        with contextlib.suppress(Exception):
            if settings.cleanup_days > 0:
                clean_sessions(
                    store,
                    settings.home,
                    settings.cleanup_days,
                    keep=keep(),
                    time_budget_s=CLEANUP_TIME_BUDGET_S,
                )
        with contextlib.suppress(Exception):
            threshold = settings.prune_threshold_mb * 1024 * 1024
            if threshold > 0 and store.prunable and store.size_bytes() > threshold:
                store.prune(
                    time_budget_s=settings.prune_time_budget_s,
                    skip=lambda tid: store.leases.holder(tid) is not None,
                )

    thread = threading.Thread(target=work, daemon=True, name="agentgraph-maintenance")
    thread.start()
    return thread


# --------------------------------------------------------------------------- import


def _import_graph(store: Store) -> Any:
    graph = StateGraph(AppState)
    graph.add_node("finalize", lambda _state: {})
    graph.add_edge(START, "finalize")
    graph.add_edge("finalize", END)
    return graph.compile(checkpointer=store.checkpointer)


def load_messages(store: Store, thread_id: str) -> list[BaseMessage]:
    """The stored transcript of ``thread_id`` (no model needed)."""
    config = {"configurable": {"thread_id": thread_id}}
    values = _import_graph(store).get_state(config).values or {}
    return list(values.get("messages") or [])


def find_imported(store: Store, imported: ImportedSession) -> SessionInfo | None:
    """The stored session ``imported`` already is, if any: same id, same messages.

    Importing a file twice would otherwise store a second copy under a new id.

    Args:
        store: The store.
        imported: The parsed transcript.

    Returns:
        The existing session's index row, or None when the transcript is new (or its
        session id holds other messages).
    """
    thread_id = imported.session_id
    if not thread_id or not is_valid_thread_id(thread_id):
        return None
    info = store.index.get(thread_id)
    if info is None:
        return None
    same = [m.id for m in load_messages(store, thread_id)] == [m.id for m in imported.messages]
    return info if same else None


def import_session(
    store: Store,
    imported: ImportedSession,
    *,
    prepare: Callable[[str, list[BaseMessage]], list[BaseMessage]] | None = None,
) -> SessionInfo:
    """Store an imported transcript as a resumable session (new id unless free).

    Args:
        store: The store.
        imported: The parsed transcript.
        prepare: Called with the session id and the messages before they are
            stored (e.g. to offload huge user messages into its artifacts).
    """
    thread_id = imported.session_id or new_session_id()
    taken = store.index.get(thread_id) is not None
    if not taken:
        config = {"configurable": {"thread_id": thread_id}}
        taken = store.checkpointer.get_tuple(config) is not None  # type: ignore[arg-type]
    if taken or not is_valid_thread_id(thread_id):
        thread_id = new_session_id()
    graph = _import_graph(store)
    config = {"configurable": {"thread_id": thread_id}}
    messages = list(imported.messages)
    if prepare is not None:
        messages = prepare(thread_id, messages)
    graph.update_state(
        config,
        {
            "messages": messages,
            "context_id": MAIN_CONTEXT_ID,
        },
        as_node="finalize",
    )
    first = next(
        (m for m in imported.messages if isinstance(m, HumanMessage) and not agentgraph_kind(m)),
        None,
    )
    title = shorten_title(str(first.content)) if first is not None else "imported session"
    usages = [u for m in imported.messages if isinstance(m, AIMessage) for u in reply_usages(m)]
    models = [
        m.response_metadata.get("model_name")
        for m in imported.messages
        if isinstance(m, AIMessage) and m.response_metadata
    ]
    info = SessionInfo(
        thread_id=thread_id,
        title=imported.title or title,
        title_source=imported.title_source or SOURCE_FIRST_MESSAGE,
        workspace=imported.workspace,
        git_branch=imported.git_branch,
        created_at=imported.created_at,
        updated_at=imported.updated_at,
        message_count=len(imported.messages),
        compactions=imported.compactions,
        # The transcript keeps each reply's tokens, not what they cost or how many came
        # from a cache: those stay unknown.
        input_tokens=sum(int(u.get("input_tokens") or 0) for u in usages),
        output_tokens=sum(int(u.get("output_tokens") or 0) for u in usages),
        cost_usd=None,
        model=next((m for m in reversed(models) if isinstance(m, str) and m), ""),
    )
    store.index.upsert(info)
    return info


# --------------------------------------------------------------------------- turn hooks


def has_boundary(messages: list[BaseMessage]) -> bool:
    """Whether the history contains a compaction boundary."""
    return any(agentgraph_kind(m) == "compact_boundary" for m in messages)


def resume_message() -> HumanMessage:
    """The one-time resume preamble (sent: its kind is not an internal one)."""
    return HumanMessage(
        content=RESUME_PREAMBLE,
        id=f"resume-{new_session_id()}",
        additional_kwargs={"agentgraph": {"kind": RESUME_KIND}},
    )


class SessionHooks:
    """What the Agent does around each turn for sessions: undo, titles, pruning, preamble.

    Args:
        settings: Configuration (``home``, undo limits).
        store: The store.
        titler: Model that writes titles, or None to keep first-message titles.
    """

    def __init__(self, settings: Settings, store: Store, titler: BaseChatModel | None) -> None:
        self.settings = settings
        self.store = store
        self.titles = TitleWriter(titler, store.index) if titler is not None else None
        self._resumed: set[str] = set()
        self._scans: dict[str, Scan] = {}
        self.last_changes: dict[str, TurnChanges | None] = {}

    def undo_store(self, thread_id: str) -> UndoStore:
        """The undo snapshots of ``thread_id``."""
        return UndoStore(
            snapshots_dir(self.settings.home, thread_id),
            max_file_bytes=self.settings.undo_max_file_bytes,
            max_files=self.settings.undo_max_files,
        )

    def mark_resumed(self, thread_id: str) -> None:
        """The next turn of ``thread_id`` gets the resume preamble if it was compacted."""
        self._resumed.add(thread_id)

    def before_turn(
        self, thread_id: str, workspace: Path, history: Callable[[], list[BaseMessage]]
    ) -> list[BaseMessage]:
        """Snapshot the workspace; return messages to put before the user's message."""
        self.snapshot(thread_id, workspace)
        return self.preamble(thread_id, history)

    def snapshot(self, thread_id: str, workspace: Path) -> None:
        """Snapshot the workspace for undo (before the turn's tools run)."""
        if self.settings.undo_max_files > 0:
            with contextlib.suppress(OSError):
                self._scans[thread_id] = self.undo_store(thread_id).snapshot(
                    workspace, previous=self._scans.get(thread_id)
                )

    def preamble(
        self, thread_id: str, history: Callable[[], list[BaseMessage]]
    ) -> list[BaseMessage]:
        """Messages to put before the user's message (the one-time resume preamble)."""
        extra: list[BaseMessage] = []
        if thread_id in self._resumed:
            self._resumed.discard(thread_id)
            if has_boundary(history()):
                extra.append(resume_message())
        return extra

    def after_turn(self, thread_id: str, workspace: Path, messages: list[BaseMessage]) -> None:
        """Record the turn's file changes, start the title, prune now and then."""
        before = self._scans.get(thread_id)
        if before is not None:
            with contextlib.suppress(OSError):
                changes, after = self.undo_store(thread_id).record_turn(workspace, before)
                self._scans[thread_id] = after
                self.last_changes[thread_id] = changes
        if self.titles is not None:
            self.titles.maybe_start(thread_id, messages)
        self.store.after_turn(thread_id)
