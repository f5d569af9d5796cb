"""The stored sessions, for every front end: list, search, resolve, show, rename, reset,
switch, delete, clean, prune, compact, export and import.

The CLI's ``agentgraph sessions …`` commands, the REPL's session commands and the web
UI's :class:`~agentgraph.session.service.SessionService` all go through
:class:`SessionCatalog`, so a session is found, leased, renamed or deleted the same way
whichever front end asks; they only render what it returns.

This module is imported by ``sessions list``: it stays light at import time (the
checkpointer stack, the graph and the models are imported where an operation needs them).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentgraph.config import Settings
from agentgraph.errors import AgentGraphError
from agentgraph.persistence.index import SessionIndex, SessionInfo, resolve_session, shorten_title
from agentgraph.persistence.leases import holding
from agentgraph.persistence.store import Store, home_is_read_only, open_index, open_store
from agentgraph.persistence.thread_ids import check_thread_id

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

    from agentgraph.persistence.prune import PruneStats
    from agentgraph.session.agent import Agent
    from agentgraph.session.lifecycle import CleanupResult
    from agentgraph.session.transcript import ImportedSession

# Characters of a request or answer a session's summary shows (``sessions show``).
SHOW_PREVIEW_CHARS = 200
# Sessions a search returns at most (newest first).
SEARCH_RESULTS_MAX = 500
# Words in an SQLite error that mean another process holds a write lock for now.
STORE_LOCKED_WORDS = ("locked", "busy")


@dataclass(frozen=True)
class CompactOutcome:
    """What compacting a session did.

    Attributes:
        record: The compaction's record; None when nothing was compacted.
        compactor: The compactor that ran (its ``last_skipped`` says why not).
    """

    record: dict[str, Any] | None
    compactor: object


@dataclass(frozen=True)
class ExportedTranscript:
    """A session's transcript as text, secrets redacted.

    Attributes:
        text: The Markdown or JSONL text.
        message_count: How many stored messages it holds.
    """

    text: str
    message_count: int


def check_session_id(text: str) -> str:
    """``text`` if it can name a session (an id or a prefix of one).

    Raises:
        InvalidThreadId: not a valid id (one clear line).
    """
    return check_thread_id(text, "session id")


def list_sessions(
    settings: Settings, *, workspace: str | None, with_subagents: bool
) -> list[SessionInfo]:
    """The stored sessions, most recently updated first, from the index alone.

    Listing never writes: a read-only home (a backup, a shared volume) is read as it is,
    and no checkpointer is loaded.

    Args:
        settings: Where the store is.
        workspace: Only this workspace's sessions (None: every workspace).
        with_subagents: Also the subagent sessions, each listed under its parent.

    Raises:
        StoreError: the store cannot be opened.
    """
    with open_index(settings, read_only=home_is_read_only(settings)) as index:
        return _listed(index, workspace=workspace, with_subagents=with_subagents)


def _listed(
    index: SessionIndex, *, workspace: str | None, with_subagents: bool
) -> list[SessionInfo]:
    rows = index.list_sessions(workspace=workspace, include_subagents=with_subagents)
    if not with_subagents:
        return rows
    ordered: list[SessionInfo] = []
    for top in [r for r in rows if r.parent_thread_id is None]:
        ordered.append(top)
        ordered.extend(index.children(top.thread_id))
    return ordered


def transcript_summary(messages: list[Any]) -> dict[str, Any]:
    """Counts and previews of a stored transcript (``sessions show``)."""
    from collections import Counter

    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from agentgraph.runtime.history import agentgraph_kind, is_user_request

    kinds: Counter[str] = Counter()
    tools: Counter[str] = Counter()
    for msg in messages:
        kind = agentgraph_kind(msg)
        kinds[kind or msg.type] += 1
        if isinstance(msg, AIMessage):
            tools.update(c["name"] for c in msg.tool_calls)
    requests = [m for m in messages if isinstance(m, HumanMessage) and is_user_request(m)]
    answers = [m for m in messages if isinstance(m, AIMessage) and not m.tool_calls]

    def preview(msg: Any) -> str:
        text = " ".join(msg.text.split())
        return text if len(text) <= SHOW_PREVIEW_CHARS else text[: SHOW_PREVIEW_CHARS - 1] + "…"

    return {
        "messages": len(messages),
        "by_type": dict(kinds),
        "user_requests": len(requests),
        "tool_results": sum(1 for m in messages if isinstance(m, ToolMessage)),
        "tool_calls": dict(tools),
        "compaction_boundaries": kinds.get("compact_boundary", 0),
        "first_request": preview(requests[0]) if requests else None,
        "last_request": preview(requests[-1]) if requests else None,
        "last_answer": preview(answers[-1]) if answers else None,
    }


def read_transcript(path: Path) -> ImportedSession:
    """Parse the JSONL transcript at ``path`` (``sessions import``).

    Raises:
        AgentGraphError: the file is missing or unreadable.
        TranscriptError: it is not a JSONL transcript.
    """
    from agentgraph.session.transcript import TranscriptError, parse_jsonl

    try:
        with path.open(encoding="utf-8") as fh:
            return parse_jsonl(fh)
    except FileNotFoundError:
        raise AgentGraphError(f"no such file: {path}") from None
    except UnicodeDecodeError:
        raise TranscriptError(f"{path} is not UTF-8 text (not a JSONL transcript)") from None
    except OSError as exc:
        raise AgentGraphError(f"cannot read {path}: {exc.strerror}") from None


def session_to_reopen(
    store: Store, *, resume: str | None, cont: bool, workspace: Path
) -> str | None:
    """The id of the session ``--resume ID`` or ``--continue`` names; None for neither.

    Args:
        store: The opened session store.
        resume: ``--resume``'s value: a full id or a unique prefix (not empty: the
            picker is the front end's business).
        cont: ``--continue``: the most recently updated session of ``workspace`` that
            holds a message (one opened with ``/new`` and left empty is skipped), else
            the most recent one.
        workspace: The launch workspace.

    Raises:
        SessionNotFound: no session (or several) matches ``resume``.
        AgentGraphError: ``--continue`` and no session of ``workspace`` yet.
    """
    if resume:
        return resolve_session(store.index, resume).thread_id
    if cont:
        rows = store.index.list_sessions(workspace=str(workspace))
        if not rows:
            raise AgentGraphError(f"no previous session in {workspace} to continue")
        used = [row for row in rows if row.message_count > 0]
        return (used or rows)[0].thread_id
    return None


class SessionCatalog:
    """The stored sessions of one opened store (see the module docstring).

    Args:
        store: The opened store.
        settings: Configuration (the home folder, the model, the secrets to redact).
    """

    def __init__(self, store: Store, settings: Settings) -> None:
        self.store = store
        self.settings = settings

    @classmethod
    @contextmanager
    def open(cls, settings: Settings, *, writes: bool = True) -> Iterator[SessionCatalog]:
        """Open the configured store as a catalog.

        Args:
            settings: Where the store is.
            writes: Whether the caller may write. One that only reads serves a read-only
                home: the store is opened without set-up, migrations or upkeep.

        Raises:
            StoreError: the store cannot be opened.
        """
        read_only = not writes and home_is_read_only(settings)
        with open_store(settings, read_only=read_only) as store:
            yield cls(store, settings)

    # --- finding sessions -----------------------------------------------------------

    def get(self, thread_id: str) -> SessionInfo | None:
        """The index row of ``thread_id`` (None: not stored yet)."""
        return self.store.index.get(thread_id)

    def resolve(self, prefix: str) -> SessionInfo:
        """The one session whose id is ``prefix`` or starts with it.

        Raises:
            InvalidThreadId: ``prefix`` cannot be part of an id.
            SessionNotFound: nothing matches, or several sessions do (they are listed).
        """
        return resolve_session(self.store.index, check_session_id(prefix))

    def search(self, query: str = "", *, limit: int = SEARCH_RESULTS_MAX) -> list[SessionInfo]:
        """Every workspace's sessions (not subagents'), newest first, at most ``limit``;
        ``query`` matches the title, workspace or id (case-insensitive)."""
        wanted = query.strip().lower()
        rows = [
            info
            for info in self.store.index.list_sessions()
            if not wanted or wanted in f"{info.title}\n{info.workspace}\n{info.thread_id}".lower()
        ]
        rows.sort(key=lambda info: -info.updated_at)
        return rows[:limit]

    def resumable(self, *, besides: str | None = None) -> list[SessionInfo]:
        """Sessions one can reopen (not subagents'), newest first, ``besides`` left out."""
        return [
            info
            for info in self.store.index.list_sessions(include_subagents=False)
            if info.thread_id != besides
        ]

    def details(self, info: SessionInfo) -> dict[str, Any]:
        """``sessions show``: the row, its holder, its subagents, a transcript summary and
        the context report (counted for the model the session ran with)."""
        from agentgraph.session.lifecycle import load_messages

        messages = load_messages(self.store, info.thread_id)
        payload: dict[str, Any] = info.to_json()
        holder = self.store.leases.holder(info.thread_id)
        payload["in_use_by_pid"] = holder.pid if holder is not None else None
        payload["children"] = [c.thread_id for c in self.store.index.children(info.thread_id)]
        payload["transcript"] = transcript_summary(messages)
        settings = self.settings
        # Counted for the model the session ran with, not the one configured now.
        if info.model and info.model != settings.model:
            settings = settings.model_copy(update={"model": info.model})
        payload["context"] = self._reporting_agent(settings).context_report(info.thread_id)
        return payload

    def _reporting_agent(self, settings: Settings) -> Agent:
        """An Agent for counting only: no model is called.

        With a local endpoint its chat model is built (never called) so that the window
        the server serves is asked, as a run's agent asks it: the report measures against it.
        """
        from langchain_core.language_models.fake_chat_models import FakeListChatModel

        from agentgraph.providers.endpoints import is_local_endpoint
        from agentgraph.providers.model import build_chat_model, endpoint_url
        from agentgraph.session.agent import Agent

        model: Any = None
        if settings.context_window is None and is_local_endpoint(
            endpoint_url(settings, settings.model)
        ):
            with suppress(Exception):  # a report never fails for want of a model
                model = build_chat_model(settings)
        return Agent(settings, self.store, model=model or FakeListChatModel(responses=["unused"]))

    # --- leases ---------------------------------------------------------------------

    def ensure_not_in_use(self, thread_id: str, action: str) -> None:
        """Refuse ``action`` on a session another live process holds.

        Raises:
            SessionInUse: it is held (one line naming the holder).
        """
        from agentgraph.session.lifecycle import ensure_not_in_use

        ensure_not_in_use(self.store, thread_id, action)

    def take(self, thread_id: str, action: str) -> bool:
        """Hold ``thread_id`` for this process; False when the store is write-locked.

        Another process's long write transaction is not a holder of the session: the
        caller goes on, and the session's first turn takes the lease (or fails).

        Raises:
            SessionInUse: another live process holds the session.
        """
        try:
            self.store.leases.acquire(thread_id, action)
        except sqlite3.OperationalError as exc:
            if not any(word in str(exc) for word in STORE_LOCKED_WORDS):
                raise
            return False
        return True

    def release(self, thread_id: str) -> bool:
        """Let go of ``thread_id``; whether it is stored (so it can be resumed)."""
        self.store.leases.release(thread_id)
        return self.store.index.get(thread_id) is not None

    def switch(self, current: str, target: str) -> None:
        """Hold ``target``, then let go of ``current`` (kept when ``target`` is refused).

        Raises:
            SessionInUse: another live process holds ``target``.
        """
        self.store.leases.acquire(target, "switch to")
        self.store.leases.release(current)

    # --- changing sessions ----------------------------------------------------------

    def rename(self, thread_id: str, workspace: Path, text: str) -> SessionInfo:
        """Give the session the user's title (indexed now if it was not yet)."""
        from agentgraph.session.agent import new_session_row
        from agentgraph.session.titles import SOURCE_USER

        info = self.store.index.get(thread_id) or new_session_row(thread_id, workspace)
        info.title = shorten_title(text)
        info.title_source = SOURCE_USER
        self.store.index.upsert(info)
        return info

    def reset(self, thread_id: str) -> None:
        """Clear the session's history: same id, title kept, counters zeroed."""
        self.store.checkpointer.delete_thread(thread_id)
        info = self.store.index.get(thread_id)
        if info is not None:
            info.message_count = info.compactions = 0
            info.input_tokens = info.output_tokens = info.context_tokens = 0
            self.store.index.upsert(info)

    def compact(self, thread_id: str, focus: str | None = None) -> CompactOutcome:
        """Compact the session now, under its lease, with the configured model.

        Raises:
            ConfigError: the model is not configured.
            SessionInUse: another live process holds the session.
        """
        from agentgraph.providers.model import check_model_config
        from agentgraph.session.agent import Agent

        check_model_config(self.settings)
        with holding(self.store.leases, thread_id, "compact"):
            agent = Agent(self.settings, self.store)
            record = agent.compact(thread_id, focus=focus)
        return CompactOutcome(record=record, compactor=agent.deps.compactor)

    def delete(self, thread_id: str) -> int:
        """Delete the session, its subagent sessions and their files, under its lease.

        Returns:
            How many sessions were deleted.

        Raises:
            SessionInUse: another live process holds the session (nothing is deleted).
        """
        from agentgraph.session.lifecycle import delete_session

        with holding(self.store.leases, thread_id, "delete"):
            return delete_session(self.store, self.settings.home, thread_id)

    def clean(
        self,
        older_than_days: float,
        *,
        dry_run: bool = False,
        keep: set[str] | frozenset[str] = frozenset(),
    ) -> CleanupResult:
        """Delete the sessions not updated for ``older_than_days`` (never ``keep`` or
        one in use) with their files; a dry run only says which."""
        from agentgraph.session.lifecycle import clean_sessions

        return clean_sessions(
            self.store, self.settings.home, older_than_days, dry_run=dry_run, keep=keep
        )

    def prune(self) -> PruneStats:
        """Drop the checkpoints no resume needs (sessions in use are skipped).

        Raises:
            AgentGraphError: the store is not the SQLite one.
        """
        if not self.store.prunable:
            raise AgentGraphError("sessions prune works on the SQLite store only")
        return self.store.prune(skip=lambda tid: self.store.leases.holder(tid) is not None)

    # --- transcripts ----------------------------------------------------------------

    def export(
        self, info: SessionInfo, fmt: str, base_env: Mapping[str, str] | None = None
    ) -> ExportedTranscript:
        """The session's transcript as Markdown (``fmt`` "md") or JSONL, redacted.

        Args:
            info: The session.
            fmt: "md" for Markdown, anything else for JSONL.
            base_env: The process environment (its secret values are redacted too).

        Raises:
            SessionInUse: another live process holds the session.
        """
        from agentgraph.security.redaction import build_redactor
        from agentgraph.session.lifecycle import load_messages
        from agentgraph.session.transcript import export_jsonl, export_markdown

        self.ensure_not_in_use(info.thread_id, "export")
        messages = load_messages(self.store, info.thread_id)
        text = export_markdown(messages, info) if fmt == "md" else export_jsonl(messages, info)
        # Tool results were redacted when stored; sessions stored before that, and any
        # credential that got into the history another way, must not leave either.
        text = build_redactor(self.settings.secret_values(), base_env).redact(text)
        return ExportedTranscript(text=text, message_count=len(messages))

    def find_imported(self, imported: ImportedSession) -> SessionInfo | None:
        """The stored session ``imported`` already is (same id, same messages), if any."""
        from agentgraph.session.lifecycle import find_imported

        return find_imported(self.store, imported)

    def import_transcript(self, imported: ImportedSession) -> SessionInfo:
        """Store ``imported`` as a resumable session; huge user messages are cut to the
        tool-output cap, their full text kept in the session's artifacts."""
        from agentgraph.session.lifecycle import import_session

        return import_session(self.store, imported, prepare=self._offloader())

    def _offloader(self) -> Callable[[str, list[BaseMessage]], list[BaseMessage]]:
        from agentgraph.context.tokens import get_counter
        from agentgraph.context.truncation import default_tool_output_max_tokens
        from agentgraph.context.windows import budget_for
        from agentgraph.providers.learned_windows import apply_learned_window
        from agentgraph.runtime.runctx import artifacts_dir_for
        from agentgraph.runtime.user_offload import offload_user_messages

        settings = self.settings
        budget = budget_for(settings)
        apply_learned_window(budget, settings, settings.model)
        cap = settings.tool_output_max_tokens or default_tool_output_max_tokens(budget.usable)
        counter = get_counter(settings.model)

        def prepare(thread_id: str, messages: list[BaseMessage]) -> list[BaseMessage]:
            folder = artifacts_dir_for(settings, thread_id)
            return offload_user_messages(messages, folder=folder, max_tokens=cap, counter=counter)

        return prepare


__all__ = [
    "SEARCH_RESULTS_MAX",
    "SHOW_PREVIEW_CHARS",
    "CompactOutcome",
    "ExportedTranscript",
    "SessionCatalog",
    "SessionInfo",
    "check_session_id",
    "list_sessions",
    "read_transcript",
    "session_to_reopen",
    "transcript_summary",
]
