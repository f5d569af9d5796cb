"""Which tool calls were started: honest results for calls cut off by a crash.

The tools node writes a small record just before a tool runs and removes it when
the result exists. A record still present when a session is resumed means the
agent died while that call ran: the command may have completed, and the model
must be told so (not that it never ran). A call left unanswered without a record
never started; the prompt view answers it with the usual "aborted" result.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from agentgraph.capabilities.tools.spec import tool_spec, tools_where

__all__ = [
    "CALLS_DIR",
    "INTERRUPTED_KIND",
    "READ_ONLY_TOOLS",
    "interrupted_results",
    "keep_result",
    "needs_record",
    "record_end",
    "record_start",
]

CALLS_DIR = "calls"
"""Folder under a session's artifacts holding the records of running calls."""
INTERRUPTED_KIND = "interrupted_result"
BASH_TOOL = "run_bash"
RECORD_WRITE_ATTEMPTS = 2
# Results kept until the next turn starts (keep_result), beside the start records.
KEPT_PREFIX = "kept"
INTERRUPTED_TEMPLATE = (
    "interrupted: {what} was started at {started} and may have completed; check its "
    "effects before running it again (agentgraph stopped before its result was recorded)"
)


READ_ONLY_TOOLS = tools_where(lambda spec: spec.read_only)
"""Built-in tools that change nothing (``ToolSpec.read_only``): cut off by a crash,
running them again is safe."""


def needs_record(name: str) -> bool:
    """Whether a call of tool ``name`` gets a start record.

    A record exists so the model is told a cut-off call *may have completed* before it
    repeats an effect (a command, an edit, an MCP tool, a subagent). A read-only call
    cut off changes nothing, so the usual "aborted" answer is as true, and the most
    frequent calls of a long task skip the record's file and folder writes.
    """
    return not tool_spec(name).read_only


def _record_path(folder: Path, call_id: str, prefix: str = "call") -> Path:
    safe = hashlib.sha1(call_id.encode()).hexdigest()[:16]
    return folder / CALLS_DIR / f"{prefix}-{safe}.json"


def keep_result(folder: Path, call_id: str, content: str, artifact: Any) -> None:
    """Keep a call's result on disk until the session's next turn starts.

    For a result that stands for something still going on (a background subagent's
    start, with its task id). The tools node's results are checkpointed only after its
    step: an agent that dies in between would lose the start, and the subagent with
    it. The resume then gives the model this result instead (see
    :func:`interrupted_results`), and delivery goes on as usual. Best effort.

    Args:
        folder: The session's artifacts folder.
        call_id: The tool call's id.
        content: The result's text.
        artifact: The result's artifact (JSON-serializable).
    """
    path = _record_path(folder, call_id, KEPT_PREFIX)
    with contextlib.suppress(OSError, ValueError, TypeError):
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps({"id": call_id, "content": content, "artifact": artifact})
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(path)


def _kept(folder: Path, call_id: str) -> dict[str, Any] | None:
    try:
        data = json.loads(_record_path(folder, call_id, KEPT_PREFIX).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("content"), str) else None


def _drop_kept(folder: Path) -> None:
    """At a turn's start every earlier step is checkpointed: kept results are done with."""
    for path in (folder / CALLS_DIR).glob(f"{KEPT_PREFIX}-*.json"):
        record_end(path)


def record_start(folder: Path, call_id: str, name: str) -> Path | None:
    """Note that ``call_id`` is about to run (best effort: a full disk must not stop it).

    Args:
        folder: The session's artifacts folder.
        call_id: The tool call's id.
        name: The tool's name.

    Returns:
        The record's path, or None when it could not be written.
    """
    path = _record_path(folder, call_id)
    started = datetime.now(tz=UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    text = json.dumps({"id": call_id, "name": name, "started_at": started})
    # Two tries: a parallel call's record_end may remove the empty folder in between.
    for _ in range(RECORD_WRITE_ATTEMPTS):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        except FileNotFoundError:
            continue
        except OSError:
            return None
        return path
    return None


def record_end(path: Path | None) -> None:
    """Remove a record written by :func:`record_start` (the result now exists)."""
    if path is not None:
        with contextlib.suppress(OSError):
            path.unlink()
        # No empty folders left behind: a session without big outputs has no artifacts.
        for folder in (path.parent, path.parent.parent):
            try:
                folder.rmdir()
            except OSError:
                break  # not empty (or gone): stop


def interrupted_results(messages: Sequence[BaseMessage], folder: Path) -> list[ToolMessage]:
    """Results for the calls of the last assistant message that ran when the agent died.

    Only calls with a start record and no result are answered (and their records
    removed); the results go right after the history's existing tail, so the
    pairing stays valid. A call whose result was kept (:func:`keep_result`) gets that
    result. Called when a turn starts: the kept results are removed.

    Args:
        messages: The stored history.
        folder: The session's artifacts folder.

    Returns:
        ``status="error"`` results marked with kind ``interrupted_result``.
    """
    try:
        return _interrupted(messages, folder)
    finally:
        _drop_kept(folder)


def _interrupted(messages: Sequence[BaseMessage], folder: Path) -> list[ToolMessage]:
    tail = len(messages)
    while tail > 0 and isinstance(messages[tail - 1], ToolMessage):
        tail -= 1
    if tail == 0 or not isinstance(messages[tail - 1], AIMessage):
        return []
    last = messages[tail - 1]
    answered = {m.tool_call_id for m in messages[tail:] if isinstance(m, ToolMessage)}
    out: list[ToolMessage] = []
    for call in last.tool_calls:  # type: ignore[attr-defined]
        call_id = call.get("id") or ""
        if not call_id or call_id in answered:
            continue
        name = str(call.get("name") or "")
        kept = _kept(folder, call_id)
        if kept is not None:
            out.append(
                ToolMessage(
                    content=kept["content"],
                    artifact=kept.get("artifact"),
                    tool_call_id=call_id,
                    name=name or None,
                    id=f"agentgraph-interrupted-{call_id}",
                )
            )
            record_end(_record_path(folder, call_id))
            continue
        path = _record_path(folder, call_id)
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # never started: the prompt view answers it as aborted
        what = "the command" if name == BASH_TOOL else f"this {name} call"
        started = str(record.get("started_at") or "an unknown time")
        out.append(
            ToolMessage(
                content=INTERRUPTED_TEMPLATE.format(what=what, started=started),
                tool_call_id=call_id,
                name=name or None,
                status="error",
                id=f"agentgraph-interrupted-{call_id}",
                additional_kwargs={"agentgraph": {"kind": INTERRUPTED_KIND}},
            )
        )
        record_end(path)
    return out
