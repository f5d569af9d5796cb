"""Export a session as JSONL (ClawdCode's session entry schema) or Markdown; import it back.

One JSON object per line, in transcript order, with ``uuid``, ``parentUuid``,
``sessionId``, ``timestamp``, ``type`` (``user``, ``assistant``, ``tool_use``,
``tool_result``, ``system``), ``subtype`` (``compact_boundary``), ``cwd``,
``gitBranch``, ``version``, ``message`` (``role``, ``content``, ``model``, ``usage``),
``tool``/``toolResult``, ``isCompactSummary`` and ``compactMetadata``. An assistant
message with tool calls is one ``assistant`` entry followed by one ``tool_use`` entry
per call. The export holds the WHOLE transcript, including everything before
compaction boundaries (the state keeps it all).

Two extension fields make the round trip lossless: ``agentgraph`` (the message's
agentgraph marker: kind, compaction record…) and ``name``/``status`` on tool results.
Secrets are never in the state, so they cannot be in an export.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from agentgraph.errors import AgentGraphError
from agentgraph.persistence.index import SessionInfo, shorten_title
from agentgraph.runtime.history import AGENTGRAPH_KEY, agentgraph_kind
from agentgraph.runtime.history.kinds import (
    TIMESTAMP_KEY,
    TIMESTAMP_MAX_S,
    TIMESTAMP_MIN_S,
    message_time,
    stamped,
)
from agentgraph.runtime.tool_ids import provider_ids, unique_call_ids

ENTRY_TYPES = frozenset({"user", "assistant", "tool_use", "tool_result", "system"})
# A session title entry (Claude Code's format): {"type": "summary", "summary": TITLE}.
TITLE_ENTRY_TYPE = "summary"
TITLE_SOURCES = frozenset({"first_message", "model", "user"})
TOOL_USE_SUFFIX = "#tool_use-"
MARKDOWN_TOOL_OUTPUT_MAX_CHARS = 2_000
IMPORT_PROBLEMS_SHOWN = 10
# Deeper JSON is refused line by line: no real transcript nests this deep, and
# deeper values would exhaust the recursion of the JSON parser, the serializer or
# the token counter later on.
MAX_JSON_NESTING_LEVELS = 64


class TranscriptError(AgentGraphError):
    """A transcript file that cannot be imported."""


def agentgraph_version() -> str:
    """The installed agentgraph version (``0`` when not installed)."""
    try:
        return metadata.version("agentgraph")
    except metadata.PackageNotFoundError:
        return "0"


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).isoformat().replace("+00:00", "Z")


def _from_iso(text: Any) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
    # An offset can move a date at the end of the calendar past what a date can show.
    return value if TIMESTAMP_MIN_S <= value <= TIMESTAMP_MAX_S else None


def _meta(msg: BaseMessage) -> dict[str, Any] | None:
    meta = msg.additional_kwargs.get(AGENTGRAPH_KEY)
    return dict(meta) if isinstance(meta, dict) else None


def _compact_metadata(record: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "trigger": record.get("trigger", "auto"),
        "preTokens": int(record.get("tokens_before", 0) or 0),
    }
    if "tokens_after" in record:
        out["postTokens"] = int(record.get("tokens_after", 0) or 0)
    if record.get("files"):
        out["filesIncluded"] = list(record["files"])
    return out


def export_entries(messages: Sequence[BaseMessage], info: SessionInfo) -> list[dict[str, Any]]:
    """The session as JSONL entries (dicts), whole transcript in order."""
    common = {
        "sessionId": info.thread_id,
        "cwd": info.workspace,
        "gitBranch": info.git_branch,
        "version": agentgraph_version(),
    }
    entries: list[dict[str, Any]] = []
    if info.title:
        # The session's title, as Claude Code's transcripts carry theirs: an entry of
        # type "summary" (no uuid: it is not a message).
        entries.append(
            {
                "type": TITLE_ENTRY_TYPE,
                "summary": info.title,
                **common,
                "agentgraph": {"title_source": info.title_source},
            }
        )
    parent: str | None = None
    last_compact: dict[str, Any] | None = None
    # A message written before messages were dated (or by agentgraph itself, undated)
    # takes the time of the one before it, the first ones the session's start.
    when = info.created_at
    for n, msg in enumerate(messages):
        meta = _meta(msg)
        kind = agentgraph_kind(msg)
        own = message_time(msg)
        when = own if own is not None else when
        stamp = _iso(when)
        if meta is not None:
            meta.pop(TIMESTAMP_KEY, None)  # the entry's own timestamp says it
            meta = meta or None
        uid = msg.id or f"message-{n}"
        entry: dict[str, Any] = {"uuid": uid, "parentUuid": parent, **common, "timestamp": stamp}
        if meta is not None:
            entry["agentgraph"] = meta
        if isinstance(msg, SystemMessage):
            entry["type"] = "system"
            entry["message"] = {"role": "system", "content": msg.content}
            if kind == "compact_boundary":
                entry["subtype"] = "compact_boundary"
                last_compact = _compact_metadata(meta or {})
                entry["compactMetadata"] = last_compact
        elif isinstance(msg, HumanMessage):
            entry["type"] = "user"
            entry["message"] = {"role": "user", "content": msg.content}
            if kind == "summary":
                entry["isCompactSummary"] = True
                if last_compact is not None:
                    entry["compactMetadata"] = last_compact
        elif isinstance(msg, AIMessage):
            entry["type"] = "assistant"
            body: dict[str, Any] = {"role": "assistant", "content": msg.content}
            model = (msg.response_metadata or {}).get("model_name")
            if model:
                body["model"] = model
            if msg.usage_metadata:
                body["usage"] = {
                    "input_tokens": int(msg.usage_metadata.get("input_tokens", 0)),
                    "output_tokens": int(msg.usage_metadata.get("output_tokens", 0)),
                }
            entry["message"] = body
            entries.append(entry)
            parent = uid
            original_ids = provider_ids(msg)
            for i, call in enumerate(msg.tool_calls):
                use_id = f"{uid}{TOOL_USE_SUFFIX}{i}"
                use: dict[str, Any] = {
                    "uuid": use_id,
                    "parentUuid": parent,
                    **common,
                    "timestamp": stamp,
                    "type": "tool_use",
                    "tool": {"id": call["id"], "name": call["name"], "input": call["args"]},
                }
                if call["id"] in original_ids:  # the id the provider sent, rewritten
                    use["tool"]["providerId"] = original_ids[call["id"]]
                entries.append(use)
                parent = use_id
            continue
        elif isinstance(msg, ToolMessage):
            entry["type"] = "tool_result"
            result: dict[str, Any] = {"id": msg.tool_call_id, "output": msg.content}
            if msg.status == "error":
                result["error"] = msg.content if isinstance(msg.content, str) else "error"
            entry["toolResult"] = result
            if msg.name:
                entry["name"] = msg.name
            entry["status"] = msg.status
        else:
            entry["type"] = "system"
            entry["message"] = {"role": "system", "content": msg.content}
        entries.append(entry)
        parent = uid
    return entries


def export_jsonl(messages: Sequence[BaseMessage], info: SessionInfo) -> str:
    """The session as JSONL text (one entry per line)."""
    return "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in export_entries(messages, info))


def _at(msg: BaseMessage) -> str:
    """`` · 2026-11-26 03:35:33 UTC`` for a dated message, else nothing."""
    when = message_time(msg)
    if when is None:
        return ""
    return " · " + datetime.fromtimestamp(when, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def export_markdown(messages: Sequence[BaseMessage], info: SessionInfo) -> str:
    """The session as readable Markdown (tool outputs shortened)."""
    lines = [
        f"# {info.title or info.thread_id}",
        "",
        f"- session: `{info.thread_id}`",
        f"- workspace: `{info.workspace}`",
        f"- created: {_iso(info.created_at)}; updated: {_iso(info.updated_at)}",
        f"- messages: {len(messages)}; compactions: {info.compactions}",
        "",
    ]
    for msg in messages:
        kind = agentgraph_kind(msg)
        text: str = msg.text
        if kind == "compact_boundary":
            lines += ["---", f"*{text}*", "---", ""]
        elif isinstance(msg, HumanMessage):
            title = {
                "summary": "Summary",
                "reinjected_file": "File re-read",
                "ledger": "Progress ledger",
                "undo_note": "Undo note",
                "mode_note": "Permission mode",
            }.get(kind or "", "User")
            lines += [f"## {title}{_at(msg)}", "", text, ""]
        elif isinstance(msg, AIMessage):
            lines += [f"## Assistant{_at(msg)}", ""]
            if text:
                lines += [text, ""]
            for call in msg.tool_calls:
                args = json.dumps(call["args"], ensure_ascii=False)
                lines += [f"- tool call `{call['name']}` `{args[:300]}`"]
            if msg.tool_calls:
                lines.append("")
        elif isinstance(msg, ToolMessage):
            shown = text
            if len(shown) > MARKDOWN_TOOL_OUTPUT_MAX_CHARS:
                shown = shown[:MARKDOWN_TOOL_OUTPUT_MAX_CHARS] + f"\n… ({len(text):,} chars)"
            status = " (error)" if msg.status == "error" else ""
            lines += [f"### Tool result `{msg.name or msg.tool_call_id}`{status}", "", "```"]
            lines += [shown.replace("```", "` ` `"), "```", ""]
        elif isinstance(msg, SystemMessage):
            lines += [f"*system: {text[:300]}*", ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------- import


@dataclass
class ImportedSession:
    """A transcript read back from JSONL."""

    session_id: str | None
    messages: list[BaseMessage]
    workspace: str
    git_branch: str | None
    created_at: float
    updated_at: float
    compactions: int
    problems: list[str] = field(default_factory=list)
    title: str | None = None
    title_source: str | None = None


def _kwargs(entry: dict[str, Any]) -> dict[str, Any]:
    meta = entry.get("agentgraph")
    if isinstance(meta, dict):
        return {AGENTGRAPH_KEY: meta}
    if entry.get("subtype") == "compact_boundary":
        cm = entry.get("compactMetadata") or {}
        return {
            AGENTGRAPH_KEY: {
                "kind": "compact_boundary",
                "trigger": cm.get("trigger", "auto"),
                "tokens_before": cm.get("preTokens", 0),
                "tokens_after": cm.get("postTokens", 0),
                "files": list(cm.get("filesIncluded") or []),
            }
        }
    if entry.get("isCompactSummary"):
        return {AGENTGRAPH_KEY: {"kind": "summary"}}
    return {}


def _content(entry: dict[str, Any], line_no: int) -> Any:
    message = entry.get("message")
    if not isinstance(message, dict) or "content" not in message:
        raise ValueError(f"line {line_no}: {entry.get('type')} entry without message.content")
    content = message["content"]
    if not isinstance(content, str | list):
        raise ValueError(f"line {line_no}: message.content must be a string or a list")
    return content


def _nesting_exceeds(raw: str, limit: int) -> bool:
    """Whether the JSON text ``raw`` opens more than ``limit`` nested arrays/objects.

    A linear scan of the text (strings skipped), before any recursive parser sees it.
    """
    if raw.count("[") + raw.count("{") <= limit:
        return False
    depth = 0
    in_string = escaped = False
    for ch in raw:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return True
        elif ch in "]}":
            depth -= 1
    return False


def parse_jsonl(lines: Iterable[str]) -> ImportedSession:
    """Read a JSONL transcript; corrupt lines are skipped and listed in ``problems``.

    Raises:
        TranscriptError: No valid entry at all, or a tool result answers a call id no
            earlier ``tool_use`` made (the file was cut or edited).
    """
    messages: list[BaseMessage] = []
    problems: list[str] = []
    session_id: str | None = None
    workspace = ""
    branch: str | None = None
    stamps: list[float] = []
    known_calls: set[str] = set()
    seen_uuids: set[str] = set()
    compactions = 0
    valid = 0
    title: str | None = None
    title_source: str | None = None
    for line_no, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        if _nesting_exceeds(raw, MAX_JSON_NESTING_LEVELS):
            problems.append(
                f"line {line_no}: JSON nested deeper than {MAX_JSON_NESTING_LEVELS} levels "
                "(skipped)"
            )
            continue
        try:
            entry = json.loads(raw)
        except ValueError:
            problems.append(f"line {line_no}: not valid JSON (skipped)")
            continue
        if not isinstance(entry, dict):
            problems.append(f"line {line_no}: not a JSON object (skipped)")
            continue
        kind = entry.get("type")
        uid = entry.get("uuid")
        if kind == TITLE_ENTRY_TYPE and isinstance(entry.get("summary"), str):
            title = shorten_title(entry["summary"]) or None
            meta = entry.get("agentgraph")
            source = meta.get("title_source") if isinstance(meta, dict) else None
            title_source = source if source in TITLE_SOURCES else "user"
            continue
        if kind not in ENTRY_TYPES or not isinstance(uid, str) or not uid:
            problems.append(f"line {line_no}: missing uuid or unknown type {kind!r} (skipped)")
            continue
        if uid in seen_uuids:
            # add_messages would merge it into the earlier message of that id.
            problems.append(f"line {line_no}: duplicate uuid {uid!r} (skipped)")
            continue
        try:
            msg = _entry_message(entry, kind, uid, line_no, messages, known_calls)
        except ValueError as exc:
            problems.append(f"{exc} (skipped)")
            continue
        valid += 1
        seen_uuids.add(uid)
        session_id = session_id or (entry.get("sessionId") or None)
        cwd = entry.get("cwd")
        workspace = workspace or (cwd if isinstance(cwd, str) else "")
        branch = branch or entry.get("gitBranch") or None
        ts = _from_iso(entry.get("timestamp"))
        if ts is not None:
            stamps.append(ts)
        if msg is None:
            continue
        if ts is not None:
            msg = stamped(msg, ts, again=True)  # the entry's own time, not a copied marker
        if isinstance(msg, ToolMessage) and msg.tool_call_id not in known_calls:
            raise TranscriptError(
                f"line {line_no}: tool result for unknown tool call id {msg.tool_call_id!r}; "
                "nothing was imported"
            )
        if agentgraph_kind(msg) == "compact_boundary":
            compactions += 1
        messages.append(msg)
    if valid == 0:
        first = f": {problems[0]}" if problems else ""
        raise TranscriptError(
            f"not a JSONL session transcript (no valid entry{first}); nothing imported"
        )
    # A transcript from elsewhere may repeat call ids (in one message, across turns,
    # empty): stored with unique ids, each result with its call, it resumes.
    messages, _ = unique_call_ids(messages)
    now = datetime.now(tz=UTC).timestamp()
    return ImportedSession(
        session_id=session_id if isinstance(session_id, str) else None,
        messages=messages,
        workspace=workspace,
        git_branch=branch if isinstance(branch, str) else None,
        created_at=min(stamps) if stamps else now,
        updated_at=max(stamps) if stamps else now,
        compactions=compactions,
        problems=problems,
        title=title,
        title_source=title_source if title else None,
    )


def _entry_message(
    entry: dict[str, Any],
    kind: str,
    uid: str,
    line_no: int,
    messages: list[BaseMessage],
    known_calls: set[str],
) -> BaseMessage | None:
    """The message for one entry; ``tool_use`` entries extend the last assistant message."""
    kwargs = _kwargs(entry)
    if kind == "tool_use":
        tool = entry.get("tool")
        if not isinstance(tool, dict) or not isinstance(tool.get("id"), str):
            raise ValueError(f"line {line_no}: tool_use entry without tool.id")
        call = {
            "name": str(tool.get("name") or "unknown_tool"),
            "args": tool.get("input") if isinstance(tool.get("input"), dict) else {},
            "id": tool["id"],
            "type": "tool_call",
        }
        known_calls.add(tool["id"])
        base_id = uid.split(TOOL_USE_SUFFIX)[0]
        last = messages[-1] if messages else None
        if isinstance(last, AIMessage) and (last.id == base_id or TOOL_USE_SUFFIX not in uid):
            messages[-1] = last.model_copy(update={"tool_calls": [*last.tool_calls, call]})
            return None
        return AIMessage(content="", id=base_id, tool_calls=[call])
    if kind == "tool_result":
        result = entry.get("toolResult")
        if not isinstance(result, dict) or not isinstance(result.get("id"), str):
            raise ValueError(f"line {line_no}: tool_result entry without toolResult.id")
        output = result.get("output")
        status = entry.get("status") or ("error" if result.get("error") else "success")
        return ToolMessage(
            content=output if isinstance(output, str | list) else json.dumps(output),
            tool_call_id=result["id"],
            name=entry.get("name") or None,
            status="error" if status == "error" else "success",
            id=uid,
            additional_kwargs=kwargs,
        )
    content = _content(entry, line_no)
    if kind == "user":
        return HumanMessage(content=content, id=uid, additional_kwargs=kwargs)
    if kind == "assistant":
        body = entry["message"]
        usage = body.get("usage") if isinstance(body.get("usage"), dict) else None
        extra: dict[str, Any] = {}
        if usage:
            i, o = _token_count(usage.get("input_tokens")), _token_count(usage.get("output_tokens"))
            extra["usage_metadata"] = {"input_tokens": i, "output_tokens": o, "total_tokens": i + o}
        if body.get("model"):
            extra["response_metadata"] = {"model_name": body["model"]}
        return AIMessage(content=content, id=uid, additional_kwargs=kwargs, **extra)
    return SystemMessage(content=content, id=uid, additional_kwargs=kwargs)


def _token_count(value: Any) -> int:
    """A usage count from an untrusted file (anything else counts as 0)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def new_session_id() -> str:
    """A fresh session id (same form as ``agent.new_thread_id``)."""
    return uuid.uuid4().hex
