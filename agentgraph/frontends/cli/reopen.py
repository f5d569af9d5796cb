"""Which stored session ``--resume ID`` / ``--continue`` name (REPL and ``run`` alike)."""

from __future__ import annotations

from pathlib import Path

from agentgraph.errors import AgentGraphError
from agentgraph.persistence import Store
from agentgraph.persistence.index import resolve_session


def session_to_reopen(
    store: Store, *, resume: str | None, cont: bool, workspace: Path
) -> str | None:
    """The id of the session ``--resume ID`` or ``--continue`` names; None for neither.

    Args:
        store: The opened session store.
        resume: ``--resume``'s value: a full id or a unique prefix (not empty: the
            picker is the REPL's business).
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
