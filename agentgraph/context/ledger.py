"""The progress ledger: what the session read, changed and ran, derived from its tool calls.

A summary written by a model forgets; a summary cut to fit forgets its middle, and the
next summary is written from the cut one. The ledger is the part of the progress no
compaction may lose, so no model writes it: it is computed from the whole stored
history (every message before every compaction boundary is still in the state) each
time the history is compacted, and placed after the summaries. Files read (with the
line ranges of partial reads), files created or changed (with the lines added and
removed), commands run with their exit status, subagent tasks with their outcome, the
todo list, and how often every other tool was called.

It is compacted without loss while it fits its share of the budget: files grouped by
folder, runs of numbered names (``part_001.txt … part_120.txt``) written as their two
ends, ranges merged, repeated commands merged with all their exit statuses. Only a
ledger that still does not fit folds, in this order: runs of numbered files changed
alike to one line each (every name stays, each file's own line counts go), the
costliest folders of files read to a count, all files read to a count per top folder
and then to one line, the oldest commands and subagent tasks to a count, and last the
files changed to a count with their line totals per folder. What it folded is named,
and ``search_history`` finds it.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from agentgraph.capabilities.tools.bash import BashStatus, bash_status
from agentgraph.capabilities.tools.files import read_span
from agentgraph.capabilities.tools.spec import tool_spec
from agentgraph.capabilities.tools.workspace_scan import (
    ScanChanges,
    scanned_changes,
    workspace_path,
)
from agentgraph.context.shell_cd import cd_prefix
from agentgraph.context.shell_reads import (
    in_place_edits,
    named_files,
    parse_shell_read,
    printed,
    printed_whole,
    shell_read_lines,
    whole_file_reads,
)
from agentgraph.context.shell_writes import one_command, removed_files, written_files
from agentgraph.context.shown_files import shown_lines, shown_spans
from agentgraph.context.spiral import output_hash
from agentgraph.runtime.history import AGENTGRAPH_KEY, agentgraph_kind
from agentgraph.runtime.history.kinds import UNDO_NOTE_KIND

__all__ = [
    "LEDGER_HEADER",
    "LEDGER_KIND",
    "Ledger",
    "LedgerMemo",
    "collect_ledger",
    "ledger_message",
    "ledger_path",
    "listed_paths",
    "render_ledger",
    "without_listed_files",
]

LEDGER_KIND = "ledger"
LEDGER_HEADER = (
    "[Progress ledger — kept exactly by agentgraph from this session's tool calls, not "
    "written by a model: trust it over any summary; search_history finds the details of "
    "any entry]"
)
# A run of numbered file names shorter than this is listed name by name.
LEDGER_RUN_MIN_FILES = 3
# Files one subagent's applied changes may name (a record naming more is no record).
SUBAGENT_FILES_MAX = 10_000
# Files one step's commands (or MCP tools) changed that the ledger lists one by one; past
# it (a build's outputs) those it does not hold yet are counted by folder (a real edit
# stays named).
LEDGER_SCAN_LISTED_MAX = 20
# Folders named, the largest first, on the line counting files commands changed unlisted.
LEDGER_UNLISTED_FOLDERS_SHOWN = 5
# Characters of a command shown (its first line); the whole command is in the transcript.
LEDGER_COMMAND_MAX_CHARS = 160
# Characters of a subagent task shown.
LEDGER_TASK_MAX_CHARS = 120
# Characters of a todo shown, and todos shown (the rest counted).
LEDGER_TODO_MAX_CHARS = 80
LEDGER_TODOS_SHOWN = 30
# Calls whose parsed ledger entry is remembered (LedgerMemo).
LEDGER_MEMO_MAX_CALLS = 100_000
# Folding passes over a ledger past its share (see render_ledger).
LEDGER_FOLD_PASSES = 3


_NUMBERED_RE = re.compile(r"^(.*?)(\d+)(\D*)$")
# A command's word naming a numbered file (``logs/part_017.txt``, ``tests/test_3.py``):
# the word a run of one command over many files varies. A file word of
# :data:`~agentgraph.context.shell_reads.FILE_WORD_RE` with a number before its
# extension.
_NUMBERED_FILE_WORD_RE = re.compile(r"[\w./-]*\d\.[A-Za-z0-9]*[A-Za-z][A-Za-z0-9]*")
# Tools whose calls may read a file: read_file, and a shell command that is a plain read.
_READ_KINDS = frozenset({"read", "command"})
_TODO_MARK = {"done": "[x]", "in_progress": "[~]", "pending": "[ ]"}


@dataclass
class FileRead:
    """What was read of one file: merged 1-based line spans and its length when known."""

    spans: list[tuple[int, int]] = field(default_factory=list)
    total: int | None = None
    whole: bool = False

    def add(self, first: int, last: int, total: int | None) -> None:
        """Record lines ``first``-``last`` (of ``total``) as read."""
        if total is not None:
            self.total = total
        if last < first:
            return
        spans = sorted([*self.spans, (first, last)])
        merged: list[tuple[int, int]] = []
        for a, b in spans:
            if merged and a <= merged[-1][1] + 1:
                merged[-1] = (merged[-1][0], max(merged[-1][1], b))
            else:
                merged.append((a, b))
        self.spans = merged

    @property
    def complete(self) -> bool:
        """Whether every line of the file was read."""
        if self.whole:
            return True
        return (
            self.total is not None
            and len(self.spans) == 1
            and self.spans[0][0] <= 1
            and self.spans[0][1] >= self.total
        )


@dataclass
class FileChange:
    """Writes and edits of one file: how, how often, lines added and removed."""

    created: bool = False
    writes: int = 0
    edits: int = 0
    added: int = 0
    removed: int = 0
    undone: bool = False  # the user's /undo put the file back since its last change
    # Edits made by a shell command (``sed -i``): their lines are not known.
    command_edits: int = 0
    # Of ``writes``, those a here-document command made (``cat > F <<'EOF'``).
    command_writes: int = 0
    # Lines appended by a here-document command (``cat >> F <<'EOF'``).
    command_appends: int = 0
    # Removed by a command (``rm F``) since its last change.
    deleted: bool = False
    # Created by a command the command line does not tell (the workspace scan saw it).
    command_creates: int = 0
    # Changes a subagent made in its own tree, applied to the workspace.
    subagent_changes: int = 0
    # Created or changed by a tool without a spec (an MCP server's; the scan saw it).
    tool_changes: int = 0
    # What deleted it: "command", "subagent" or "tool".
    deleted_by: str = "command"


@dataclass
class Ledger:
    """The progress of a session, as its tool calls and results show it.

    Attributes:
        reads: Path -> what of it was read, in first-read order.
        changes: Path -> how it was written or edited, in first-change order.
        commands: Command -> its exit statuses in order (``"exit 0"``, ``"timed out"``…).
        command_reads: Command -> the files it names, where a run of it exited 0 and
            printed something: its output was a reading of those files
            (:func:`~agentgraph.context.shell_reads.named_files`).
        subagents: ``(task, outcome)`` per subagent call.
        todos: The latest todo list written.
        other: Tool name -> calls of every other tool.
        unlisted_changes: Files commands (or MCP tools) changed that the ledger does not
            list: past the paths one step's scan names
            (:data:`~agentgraph.capabilities.tools.workspace_scan.CHANGED_PATHS_MAX`), or
            of a step that changed more than :data:`LEDGER_SCAN_LISTED_MAX` new ones.
        unlisted_folders: Of those, the ones named: folder -> how many.
    """

    reads: dict[str, FileRead] = field(default_factory=dict)
    changes: dict[str, FileChange] = field(default_factory=dict)
    commands: dict[str, list[str]] = field(default_factory=dict)
    command_reads: dict[str, tuple[str, ...]] = field(default_factory=dict)
    subagents: list[tuple[str, str]] = field(default_factory=list)
    todos: list[tuple[str, str]] | None = None
    other: dict[str, int] = field(default_factory=dict)
    unlisted_changes: int = 0
    unlisted_folders: dict[str, int] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        """Whether no tool call was recorded."""
        return not (
            self.reads
            or self.changes
            or self.commands
            or self.subagents
            or self.todos
            or self.other
            or self.unlisted_changes
        )

    def paths(self) -> set[str]:
        """Every file path the ledger holds (read or changed)."""
        return set(self.reads) | set(self.changes)


def _norm_path(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    path = value.strip()
    normal = posixpath.normpath(path)
    return normal if normal != "." else path


def _lines(text: Any) -> int:
    if not isinstance(text, str) or not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def _int(value: Any, default: int) -> int:
    # A local model may send "10": the tool's schema coerces it, so the ledger does too.
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        return default
    return value


def _command_status(result: ToolMessage, status: BashStatus | None) -> str:
    """How a command ended, from its answer's status line (``status``, parsed once)."""
    if status is not None:
        return "timed out" if status.exit_code is None else f"exit {status.exit_code}"
    return "error" if result.status == "error" else "done"


def _subagent_outcome(result: ToolMessage) -> str:
    # Today's results carry the outcome in their artifact; older sessions' results are
    # a JSON object with "ok".
    payload: Any = result.artifact
    if not isinstance(payload, Mapping):
        try:
            payload = json.loads(result.text)
        except (ValueError, RecursionError):
            return "error" if result.status == "error" else "done"
    if isinstance(payload, Mapping) and isinstance(payload.get("ok"), bool):
        return "done" if payload["ok"] else "failed"
    return "error" if result.status == "error" else "done"


def _subagent_applied(result: ToolMessage) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The files a subagent's changes applied to the workspace changed and, of them, those
    it deleted, as its result's artifact says (paths relative to the workspace; a record
    that is not one, from an imported session, says none)."""
    changes = result.artifact.get("changes") if isinstance(result.artifact, Mapping) else None
    if not isinstance(changes, Mapping) or changes.get("state") != "applied":
        return (), ()
    files, deleted = changes.get("files"), changes.get("deleted", [])
    if not isinstance(files, list) or not isinstance(deleted, list):
        return (), ()
    if len(files) > SUBAGENT_FILES_MAX or not all(map(workspace_path, [*files, *deleted])):
        return (), ()
    return tuple(dict.fromkeys(files)), tuple(p for p in dict.fromkeys(deleted) if p in files)


# What one call adds to the ledger, parsed once (see LedgerMemo): its kind and fields.
_Entry = tuple[Any, ...]


def _entry(call: Mapping[str, Any], result: ToolMessage) -> _Entry | None:
    """What ``call`` with its ``result`` adds to a ledger, or None (nothing)."""
    name = str(call.get("name") or "")
    args = call.get("args")
    args = args if isinstance(args, Mapping) else {}
    failed = result.status == "error"
    # What a call adds is its tool's ToolSpec.ledger; the kind names the entry.
    kind = tool_spec(name).ledger
    if kind == "read":
        path = _norm_path(args.get("path"))
        if path is None or failed:
            return None
        first = max(_int(args.get("offset"), 0), 0) + 1
        span = read_span(result.text)
        if span is None:  # an empty file, or a reading that states no lines
            return ("read", path, first, None, None)
        return ("read", path, first, *span)
    if kind in ("write", "edit"):
        path = _norm_path(args.get("path"))
        if path is None or failed:
            return None
        if kind == "write":
            created = result.text.startswith("created ")
            return ("write", path, created, _lines(args.get("content")))
        times = 1
        if args.get("replace_all") and (found := re.search(r"replaced (\d+) ", result.text)):
            times = int(found.group(1))
        added = _lines(args.get("new_string")) * times
        return ("edit", path, added, _lines(args.get("old_string")) * times)
    if kind == "command":
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            return None
        # A plain read through the shell (``cat F``, ``sed -n '1,80p' F``) is a file
        # read: the files read are what a summary's file list is checked against. Cut by
        # the file's lines, its lines are those the cut's marker records.
        shown = parse_shell_read(command)
        seen = None if shown is None else shown_lines(result, shown.path)
        if shown is not None and seen is not None and (path := _norm_path(shown.path)):
            return ("read", path, seen.first, seen.last, seen.total)
        lines = None if shown is None else shell_read_lines(shown, result.text)
        if shown is not None and lines is not None and (path := _norm_path(shown.path)):
            return ("read", path, *lines)
        # ``sed -i … F`` that exited 0 changed F: a change, as an edit_file call is (a
        # model editing through the shell otherwise had no file changed in the ledger,
        # and a summary's list of them was taken for the ledger's files read).
        edited = _norm_paths(in_place_edits(command))
        status = bash_status(result.text)
        exited_0 = status is not None and status.exit_code == 0
        if edited and exited_0:
            return ("command_edits", edited)
        # ``cat > F <<'EOF'`` that exited 0 wrote F (``>>``: appended to it), as a
        # write_file call does: the ledger's files changed list it.
        by_path: dict[str, tuple[str, int, bool]] = {}
        for w in written_files(command, result.text):
            if (path := _norm_path(w.path)) is not None:
                by_path.setdefault(path, (path, w.lines, w.append))  # ``tee ./a a``: one
        written = tuple(by_path.values())
        if written and exited_0:
            return ("command_writes", written)
        # ``rm F`` that exited 0 removed F: a change the ledger keeps (a command's line
        # drops to a count with the oldest past the ledger's share).
        removal = removed_files(command)
        removed = _norm_paths(removal.paths)
        if removed and exited_0:
            return ("command_removes", removed, removal.forced)
        # ``cat A B``: each file printed whole (its lines are not told apart), or, cut
        # file by file, the leading lines the cut's marker records.
        printed_files = whole_file_reads(command)
        several = _norm_paths(printed_files)
        if several and printed_whole(result.text, status):
            cut = shown_spans(result, printed_files)
            spans = {_norm_path(path): span for path, span in cut.items()}
            return (
                "reads",
                tuple(("read", p, 1, *spans.get(p, (None, None))) for p in several),
            )
        return (
            "command",
            command.strip(),
            _command_status(result, status),
            _command_reading(command, result, status),
        )
    applied = _subagent_applied(result) if tool_spec(name).applies_changes else ((), ())
    if kind == "subagent":
        task = str(args.get("task") or "").strip()
        return ("subagent", task, _subagent_outcome(result), *applied)
    if kind == "todos":
        items = args.get("todos")
        if failed or not isinstance(items, list):
            return None
        todos = tuple(
            (str(item.get("status") or "pending"), str(item.get("content") or ""))
            for item in items
            if isinstance(item, Mapping)
        )
        return ("todos", todos)
    if applied[0]:  # ``subagent_task(action="apply")``: held changes applied
        return ("subagent_changes", name, *applied)
    return ("other", name) if name else None


def _first_results(messages: Sequence[BaseMessage]) -> dict[str, ToolMessage]:
    """Each call id's first result: a compaction's moved copies and masked copies of a
    result come later, with the same id."""
    results: dict[str, ToolMessage] = {}
    for msg in messages:
        if isinstance(msg, ToolMessage) and msg.tool_call_id not in results:
            results[msg.tool_call_id] = msg
    return results


def read_calls(
    messages: Iterable[BaseMessage],
    *,
    memo: LedgerMemo | None = None,
    workspace: str | None = None,
) -> dict[str, tuple[str, ...]]:
    """The id of every successful file read in ``messages`` (a ``read_file`` call, or a
    shell command that is a plain read or a ``cat`` of several files,
    :mod:`agentgraph.context.shell_reads`) and the paths it read, and of every reading of
    files by another command: one that names files, exited 0 and printed something is a
    reading of those files for a summary's sake, though the ledger lists it as a command
    (a model reading with ``grep -v '^#' F`` had none of its readings asked about or kept
    in view, and read half of them again behind a summarizer that drops half of what it
    sees).

    Args:
        messages: Messages in history order (a call without its result is left out).
        memo: Entries parsed by earlier calls (the ledger's), reused: a compaction asks
            this of the whole transcript, every shell command of it included.
        workspace: The workspace's absolute path: a file under it named by its
            absolute path is named by its path in it, as :func:`collect_ledger` does.

    Returns:
        Call id → normalized paths, in call order.
    """
    roots = _workspace_roots(workspace)
    listed = list(messages)
    results = _first_results(listed)
    out: dict[str, tuple[str, ...]] = {}
    for msg in listed:
        if not isinstance(msg, AIMessage):
            continue
        for call in msg.tool_calls:
            call_id = str(call.get("id") or "")
            result = results.get(call_id)
            if result is None or tool_spec(str(call.get("name") or "")).ledger not in _READ_KINDS:
                continue
            entry = memo.entry(call_id, call, result) if memo else _entry(call, result)
            if entry is None:
                continue
            if entry[0] == "read":
                out[call_id] = (_within(str(entry[1]), roots),)
            elif entry[0] == "reads":
                out[call_id] = tuple(_within(str(read[1]), roots) for read in entry[1])
            elif entry[0] == "command" and entry[3]:
                out[call_id] = tuple(_within(path, roots) for path in entry[3])
    return out


def _command_reading(
    command: str, result: ToolMessage, status: BashStatus | None
) -> tuple[str, ...]:
    """The files ``command``'s output is a reading of (see :func:`read_calls`); empty
    when it names none, did not exit 0 or printed nothing (``status``: its answer's
    status line, parsed once)."""
    return _norm_paths(named_files(command.strip())) if printed(result.text, status) else ()


def _norm_paths(paths: Iterable[str]) -> tuple[str, ...]:
    """``paths`` normalized (:func:`_norm_path`), each once, in order."""
    return tuple(dict.fromkeys(p for p in map(_norm_path, paths) if p is not None))


def _apply(ledger: Ledger, entry: _Entry) -> None:
    """Add one call's :func:`_entry` to ``ledger``."""
    kind = entry[0]
    if kind == "reads":
        for read in entry[1]:
            _apply(ledger, read)
    elif kind == "read":
        _, path, first, last, total = entry
        read = ledger.reads.setdefault(path, FileRead())
        if last is None:
            read.whole = read.whole or first == 1
        else:
            read.add(first, last, total)
    elif kind in ("write", "edit"):
        change = ledger.changes.setdefault(entry[1], FileChange())
        change.undone = False
        change.deleted = False
        if kind == "write":
            change.writes += 1
            change.created = change.created or entry[2]
            change.added += entry[3]
        else:
            change.edits += 1
            change.added += entry[2]
            change.removed += entry[3]
    elif kind == "command_edits":
        for path in entry[1]:
            change = ledger.changes.setdefault(path, FileChange())
            change.undone = False
            change.deleted = False
            change.command_edits += 1
    elif kind == "command_removes":
        for path in entry[1]:
            if entry[2] and path not in ledger.changes and path not in ledger.reads:
                continue  # ``rm -f`` of a path the session never saw: perhaps never there
            change = ledger.changes.setdefault(path, FileChange())
            change.undone = False
            change.deleted = True
            change.deleted_by = "command"
    elif kind == "command_writes":
        for path, lines, append in entry[1]:
            change = ledger.changes.setdefault(path, FileChange())
            change.undone = False
            change.deleted = False
            change.added += lines
            if append:
                change.command_appends += 1
            else:
                change.writes += 1
                change.command_writes += 1
    elif kind == "command":
        ledger.commands.setdefault(entry[1], []).append(entry[2])
        if entry[3]:
            ledger.command_reads[entry[1]] = entry[3]
    elif kind in ("subagent", "subagent_changes"):
        if kind == "subagent":
            ledger.subagents.append((entry[1], entry[2]))
        else:
            ledger.other[entry[1]] = ledger.other.get(entry[1], 0) + 1
        changed, deleted = entry[-2], entry[-1]
        for path in changed:
            change = ledger.changes.setdefault(path, FileChange())
            change.undone = False
            change.deleted = path in deleted
            if change.deleted:
                change.deleted_by = "subagent"
            else:
                change.subagent_changes += 1
    elif kind == "todos":
        ledger.todos = list(entry[1])
    else:
        ledger.other[entry[1]] = ledger.other.get(entry[1], 0) + 1


def _frozen(value: Any) -> Any:
    """``value`` (JSON-like tool arguments) as a hashable value."""
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _frozen(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value


def _args_hash(call: Mapping[str, Any]) -> int:
    """A hash of a call's arguments (strings hash in C, at memory speed)."""
    return hash(_frozen(call.get("args")))


class LedgerMemo:
    """Each call's ledger entry, parsed once: a compaction reads the whole history, and
    parsing every result again made the ledger most of a compaction's own cost (34 of
    103 ms at 1,000 messages). Keyed by the call's id, tool and the hash of its
    result's text (:func:`output_hash`: Python keeps a string's hash), so a session whose ids repeat
    another's (``call_1`` from a local server) never gets its entries, and by a hash of
    its arguments, so two such calls with the same output (``exit code 0``) but other
    commands or paths are two entries. Bounded; the oldest go first.
    """

    def __init__(self, max_entries: int = LEDGER_MEMO_MAX_CALLS) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[tuple[str, str, int, int], _Entry | None] = OrderedDict()
        self._lock = threading.Lock()  # subagents compact in other threads

    def entry(self, call_id: str, call: Mapping[str, Any], result: ToolMessage) -> _Entry | None:
        """The ledger entry of ``call`` with ``result``, parsed at most once."""
        key = (call_id, str(call.get("name") or ""), output_hash(result), _args_hash(call))
        with self._lock:
            if key in self._entries:
                return self._entries[key]
        parsed = _entry(call, result)
        with self._lock:
            self._entries[key] = parsed
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return parsed


def _workspace_roots(workspace: str | None) -> tuple[str, ...]:
    """The absolute prefixes a path under ``workspace`` may be written with: as given
    and with its links resolved."""
    if not workspace or not posixpath.isabs(workspace):
        return ()
    roots = {posixpath.normpath(workspace), posixpath.normpath(os.path.realpath(workspace))}
    # The longer first: when one is inside the other (a link to its own ancestor), a
    # path under the inner one is named from there.
    return tuple(sorted((r for r in roots if r != "/"), key=len, reverse=True))


def ledger_path(workspace: str | None) -> Callable[[str], str]:
    """How the ledger names a path a model spelled: normalized, and relative to
    ``workspace`` (its absolute path) when under it (see :func:`collect_ledger`)."""
    roots = _workspace_roots(workspace)

    def name(path: str) -> str:
        return _within(_norm_path(path) or path, roots)

    return name


def _within(path: str, roots: Sequence[str]) -> str:
    """``path`` relative to the workspace when it names a file under one of its
    ``roots``; else as it is."""
    for root in roots:
        if path.startswith(root + "/"):
            return path[len(root) + 1 :]
    return path


def _in_workspace(entry: _Entry, roots: Sequence[str]) -> _Entry:
    if entry[0] in ("read", "write", "edit") and isinstance(entry[1], str):
        return (entry[0], _within(entry[1], roots), *entry[2:])
    if entry[0] == "reads":
        return ("reads", tuple(_in_workspace(read, roots) for read in entry[1]))
    if entry[0] in ("command_edits", "command_removes"):
        return (entry[0], tuple(_within(path, roots) for path in entry[1]), *entry[2:])
    if entry[0] == "command_writes":
        written = tuple((_within(path, roots), *rest) for path, *rest in entry[1])
        return ("command_writes", written)
    if entry[0] == "command" and entry[3]:
        return (*entry[:3], tuple(_within(path, roots) for path in entry[3]))
    return entry


def collect_ledger(
    messages: Iterable[BaseMessage],
    *,
    memo: LedgerMemo | None = None,
    workspace: str | None = None,
) -> Ledger:
    """The ledger of ``messages`` (a whole history).

    Each tool call counts once, by id, with the first result recorded for it: a
    compaction moves kept messages after its boundary as copies with the same call ids,
    and a masked copy's placeholder is no result to parse. A call with no result yet
    (pending) is not counted until its result exists.

    Args:
        messages: Messages in history order; internal records are ignored.
        memo: Entries parsed by earlier calls, reused.
        workspace: The workspace's absolute path: a file under it named by its
            absolute path is the entry of its path relative to it, as the tools take
            both and models trained on tools that require absolute paths mix them.

    Returns:
        The ledger.
    """
    roots = _workspace_roots(workspace)
    out = Ledger()
    counted: set[str] = set()
    listed = list(messages)
    results = _first_results(listed)
    for msg in listed:
        if agentgraph_kind(msg) == UNDO_NOTE_KIND:
            _undo(out, msg, roots)
        if not isinstance(msg, AIMessage):
            continue
        # A step's scan covers all its commands: what any of their lines told of a file
        # is not counted again from it.
        told: set[str] = set()
        scans: list[tuple[ScanChanges, str]] = []
        for call in msg.tool_calls:
            call_id = str(call.get("id") or "")
            if not call_id or call_id in counted:
                continue
            result = results.get(call_id)
            if result is None:
                continue
            counted.add(call_id)
            entry = memo.entry(call_id, call, result) if memo else _entry(call, result)
            if entry is not None:
                entry = _in_workspace(entry, roots) if roots else entry
            scanned = scanned_changes(result)
            alone = len(msg.tool_calls) == 1
            told_by_files = scanned and alone and _told_by_files(entry, scanned, roots)
            if entry is not None and not told_by_files:
                _apply(out, entry)
            told |= _entry_paths(entry)
            if scanned is not None:  # on a command's result, or else an MCP tool's
                kind = tool_spec(str(call.get("name") or "")).ledger
                scans.append((scanned, "command" if kind == "command" else "tool"))
        for scanned, by in scans:
            _apply_scanned(out, scanned, told, by)
    return out


def _told_by_files(entry: _Entry | None, scanned: ScanChanges, roots: Sequence[str]) -> bool:
    """Whether a command's line in the ledger would say no more than the files it
    changed do: the step's one call, one program's run that exited 0 and names each of
    them (``perl -pi -e 's/a/b/' F``, ``mv A B``; after a leading ``cd D &&``, by its
    path from ``D``), as a ``sed -i`` command is listed by its files alone. A failed
    command, a list (``pytest && black F``), or one that changed files it does not name
    (``python3 gen.py``) keeps its line (``roots``: :func:`_workspace_roots`)."""
    if entry is None or entry[0] != "command" or entry[2] != "exit 0":
        return False
    if scanned.more or scanned.empty or not one_command(command := str(entry[1])):
        return False  # ``pytest && black F``: what else it ran says more than F
    folder, command = cd_prefix(command)
    base = _within(folder, roots)
    if base in roots:
        base = ""  # ``cd /abs/workspace && …``
    elif posixpath.isabs(base) or base.startswith(".."):
        return False  # a folder outside the workspace names none of its files simply
    return all(
        (name := _from_folder(path, base)) is not None
        and re.search(rf"(?<![\w.~/-])(?:\./)?{re.escape(name)}(?![\w./-])", command)
        for path in (*scanned.modified, *scanned.created, *scanned.deleted)
    )


def _from_folder(path: str, folder: str) -> str | None:
    """``path`` (from the workspace's root) as a command run in ``folder`` (relative to
    the root; ``""`` or ``.`` for the root) names it; None when it is not under it."""
    if folder in ("", "."):
        return path
    return path[len(folder) + 1 :] if path.startswith(folder + "/") else None


def _entry_paths(entry: _Entry | None) -> set[str]:
    """The files a command's entry says it changed (as the entry names them)."""
    if entry is None:
        return set()
    if entry[0] in ("command_edits", "command_removes"):
        return set(entry[1])
    if entry[0] == "command_writes":
        return {path for path, *_rest in entry[1]}
    return set()


def _apply_scanned(ledger: Ledger, scanned: ScanChanges, told: set[str], by: str) -> None:
    """Add the files the workspace scan saw a step's commands (``by`` ``"command"``) or
    tools without a spec (``"tool"``: an MCP server's) change, but those the step's
    command lines (``told``) already recorded with what they know of their lines. A step
    that changed more than :data:`LEDGER_SCAN_LISTED_MAX` files the ledger does not
    hold yet (a build's outputs) has those counted by folder, not listed."""
    fresh = [
        p
        for p in (*scanned.modified, *scanned.created, *scanned.deleted)
        if p not in told and p not in ledger.changes and p not in ledger.reads
    ]
    crowd = set(fresh) if len(fresh) > LEDGER_SCAN_LISTED_MAX else set()
    for path in crowd:
        folder = posixpath.dirname(path) or "."
        ledger.unlisted_folders[folder] = ledger.unlisted_folders.get(folder, 0) + 1
    ledger.unlisted_changes += len(crowd)
    for kind, paths in (
        ("modified", scanned.modified),
        ("created", scanned.created),
        ("deleted", scanned.deleted),
    ):
        for path in paths:
            if path in told or path in crowd:
                continue
            change = ledger.changes.setdefault(path, FileChange())
            change.undone = False
            change.deleted = kind == "deleted"
            change.deleted_by = by
            if by == "tool":
                change.tool_changes += kind != "deleted"
            elif kind == "modified":
                change.command_edits += 1
            elif kind == "created":
                change.command_creates += 1
    ledger.unlisted_changes += scanned.more


def _undo(ledger: Ledger, note: BaseMessage, roots: Sequence[str] = ()) -> None:
    """Mark the files an /undo note names as put back (agentgraph/session/undo.py)."""
    meta = note.additional_kwargs.get(AGENTGRAPH_KEY)
    paths = meta.get("undone") if isinstance(meta, Mapping) else None
    for path in paths if isinstance(paths, list) else []:
        change = ledger.changes.get(_within(_norm_path(path) or "", roots))
        if change is not None:
            change.undone = True


def _numbered_runs(names: Sequence[str], kind: Callable[[str], Hashable | None]) -> list[list[str]]:
    """``names`` split into runs: consecutive numbered names of one ``kind`` share a run
    (a name whose kind is None runs with none)."""
    runs: list[list[str]] = []
    for name in names:
        found = _NUMBERED_RE.match(name)
        key = kind(name)
        if runs and found is not None and key is not None:
            prev = _NUMBERED_RE.match(runs[-1][-1])
            if (
                prev is not None
                and kind(runs[-1][-1]) == key
                and prev.group(1) == found.group(1)
                and prev.group(3) == found.group(3)
                and len(prev.group(2)) == len(found.group(2))
                and int(found.group(2)) == int(prev.group(2)) + 1
            ):
                runs[-1].append(name)
                continue
        runs.append([name])
    return runs


def _read_detail(read: FileRead) -> str:
    if read.complete:
        return ""
    spans = ", ".join(f"{a}-{b}" for a, b in read.spans)
    total = f" of {read.total}" if read.total is not None else ""
    return f" (lines {spans}{total})"


def _by_folder(paths: Iterable[str]) -> dict[str, list[str]]:
    folders: dict[str, list[str]] = {}
    for path in paths:
        folder, name = posixpath.split(path)
        folders.setdefault(folder, []).append(name)
    return folders


def _folder_line(folder: str, names: Sequence[str], reads: Mapping[str, FileRead]) -> str:
    label = f"{folder}/" if folder else "./"

    def whole(name: str) -> bool | None:
        return True if reads[posixpath.join(folder, name)].complete else None

    items = []
    for run in _numbered_runs(sorted(names, key=_natural_key), whole):
        if len(run) >= LEDGER_RUN_MIN_FILES:
            items.append(f"{run[0]} … {run[-1]} ({len(run)} files)")
        else:
            items.extend(n + _read_detail(reads[posixpath.join(folder, n)]) for n in run)
    return f"- {label} " + ", ".join(items)


def _folded_line(folder: str, files: int, what: str = "files") -> str:
    label = f"{folder}/" if folder else "./"
    if files == 1:
        what = what.replace("files", "file", 1)
    return f"- {label} {files} {what} (folded: search_history({(folder or '.')!r}) finds them)"


def _natural_key(name: str) -> tuple[Any, ...]:
    found = _NUMBERED_RE.match(name)
    if found is None:
        return (name, -1, "")
    return (found.group(1), int(found.group(2)), found.group(3))


def _change_how(change: FileChange) -> str:
    how = []
    if change.created:
        how.append("created")
    elif change.command_creates:
        # Seen on disk after a command the ledger cannot read (a script, ``cp``, ``mv``).
        times = f" ×{change.command_creates}" if change.command_creates > 1 else ""
        how.append(f"created{times} by a command")
    if change.writes and not change.created:
        times = f" ×{change.writes}" if change.writes > 1 else ""
        if change.command_writes == change.writes:
            # Whether the file was there before, the command does not tell.
            how.append(f"written{times} by a command")
        else:
            some = " (some by a command)" if change.command_writes else ""
            how.append(f"rewritten{times}{some}")
    edits = change.edits + change.command_edits
    if edits:
        by = ""
        if change.command_edits:
            by = " by a command" if change.command_edits == edits else " (some by a command)"
        how.append("edited" + (f" ×{edits}" if edits > 1 else "") + by)
    if change.command_appends:
        times = f" ×{change.command_appends}" if change.command_appends > 1 else ""
        how.append(f"appended to{times} by a command")
    if change.subagent_changes:
        times = f" ×{change.subagent_changes}" if change.subagent_changes > 1 else ""
        how.append(f"changed{times} by a subagent")
    if change.tool_changes:
        times = f" ×{change.tool_changes}" if change.tool_changes > 1 else ""
        how.append(f"changed{times} by a tool")
    if change.deleted:
        how.append(f"deleted by a {change.deleted_by}")
    return ", ".join(how)


def _undone_note(change: FileChange) -> str:
    return ", then put back by the user's /undo" if change.undone else ""


def _change_line(path: str, change: FileChange) -> str:
    counts = _line_counts(change.added, change.removed, change)
    return f"- {path}: {_change_how(change)}{counts}{_undone_note(change)}"


def _line_counts(added: int, removed: int, change: FileChange, suffix: str = "") -> str:
    """`` (+a −r lines)``, or nothing for a file only commands changed (their lines are
    not known: ``+0 −0`` would say nothing changed)."""
    return f" (+{added} −{removed} lines{suffix})" if _lines_known(change) else ""


def _lines_known(change: FileChange) -> bool:
    """Whether the file's line counts mean something: not only what tells no lines
    changed it (``sed -i``, ``rm``, a change the workspace scan saw, a subagent's) — a
    file tool or a here-document, whose lines are known, did too."""
    if change.writes or change.edits or change.created or change.command_appends:
        return True
    return not (
        change.command_edits
        or change.deleted
        or change.command_creates
        or change.subagent_changes
        or change.tool_changes
    )


def _changed_in_runs(
    changes: Mapping[str, FileChange], *, exact: bool = False
) -> list[tuple[str, list[str]]]:
    """The files changed as lines, runs of numbered files changed alike written as one.

    A run (consecutive numbered names of one folder, each created, rewritten or edited
    as often as the others and put back alike) of at least ``LEDGER_RUN_MIN_FILES``
    files becomes ``- logs/ part_001.txt … part_200.txt (200 files): edited (+200 −200
    lines in all)``: every name stays, only each file's own line counts go.

    Args:
        changes: The ledger's files changed.
        exact: Only runs whose files also added and removed as many lines each, written
            ``(+1 −1 lines each)``: nothing of the files' own lines is lost.

    Returns:
        ``(line, paths it names)`` in the order the files were first changed.
    """
    by_path: dict[str, tuple[str, list[str]]] = {}
    for folder, names in _by_folder(changes).items():
        label = f"{folder}/" if folder else "./"

        def alike(name: str, folder: str = folder) -> tuple[Any, ...]:
            change = changes[posixpath.join(folder, name)]
            key: tuple[Any, ...] = (_change_how(change), _undone_note(change))
            if exact and _lines_known(change):
                key += (change.added, change.removed)
            return key

        for run in _numbered_runs(sorted(names, key=_natural_key), alike):
            paths = [posixpath.join(folder, n) for n in run]
            if len(run) < LEDGER_RUN_MIN_FILES:
                for path in paths:
                    by_path[path] = (_change_line(path, changes[path]), [path])
                continue
            first = changes[paths[0]]
            how, undone = _change_how(first), _undone_note(first)
            if exact:
                counts = _line_counts(first.added, first.removed, first, " each")
            else:
                added = sum(changes[p].added for p in paths)
                removed = sum(changes[p].removed for p in paths)
                counts = _line_counts(added, removed, first, " in all")
            line = f"- {label} {run[0]} … {run[-1]} ({len(run)} files): {how}{counts}{undone}"
            entry = (line, paths)
            for path in paths:
                by_path[path] = entry
    out: dict[str, tuple[str, list[str]]] = {}  # by line: a run's once, at its first
    for path in changes:
        line, paths = by_path[path]
        out.setdefault(line, (line, paths))
    return list(out.values())


def _short(text: str, limit: int) -> str:
    first = text.splitlines()[0] if text else ""
    more = len(first) > limit or "\n" in text
    return first[: limit - 1] + "…" if more else first


def _merged_statuses(statuses: Sequence[str]) -> str:
    merged: list[str] = []
    for status in statuses:  # runs of the same status: "exit 0 ×3"
        if merged and merged[-1].split(" ×")[0] == status:
            head, _, times = merged[-1].partition(" ×")
            merged[-1] = f"{head} ×{int(times or 1) + 1}"
        else:
            merged.append(status)
    return ", then ".join(merged)


def _command_line(command: str, statuses: Sequence[str]) -> str:
    shown = _short(command, LEDGER_COMMAND_MAX_CHARS)
    return f"- $ {shown} → {_merged_statuses(statuses)}"


_Shape = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]
"""A command with its numbered file taken out: the words before and after it, and the
exit statuses of its runs."""


def _command_shape(command: str, statuses: Sequence[str]) -> tuple[_Shape, str] | None:
    """``(shape, word)``: a one-line command with exactly one word naming a numbered file
    is that word in a shape; else None."""
    if "\n" in command or len(command) > LEDGER_COMMAND_MAX_CHARS:
        return None
    words = command.split(" ")
    named = [i for i, w in enumerate(words) if _NUMBERED_FILE_WORD_RE.fullmatch(w)]
    if len(named) != 1:
        return None
    at = named[0]
    return (tuple(words[:at]), tuple(words[at + 1 :]), tuple(statuses)), words[at]


def _command_lines(commands: Mapping[str, Sequence[str]]) -> list[tuple[str, int]]:
    """The commands as lines, each with how many commands it stands for, in the order
    each first ran; a run of one command over numbered files is one line, where its
    newest command first ran (see :func:`_command_line_of`): the oldest lines drop first
    past the ledger's share, and a run drops once its newest command is among them."""
    line_of = _command_line_of(commands)
    places: dict[str, int] = {}
    weights: Counter[str] = Counter()
    for n, command in enumerate(commands):
        places[line_of[command]] = n
        weights[line_of[command]] += 1
    return [(line, weights[line]) for line in sorted(places, key=places.__getitem__)]


def _command_line_of(commands: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """Each command's line in the ledger.

    Commands that differ only in the one word naming a numbered file, over consecutive
    numbers, and ended alike, form a run (``grep -n def logs/part_001.txt``, ``…
    part_002.txt``, …, each ``exit 0``). A run of at least ``LEDGER_RUN_MIN_FILES``
    becomes ``- $ grep -n def logs/part_001.txt … logs/part_300.txt → exit 0 each (300
    commands, one a file)``: what ran on which files stays, in one line where the
    commands took one each and a ledger past its share dropped the oldest to a count.
    """
    by_shape: dict[_Shape, list[str]] = {}
    for command, statuses in commands.items():
        shaped = _command_shape(command, statuses)
        if shaped is not None:
            by_shape.setdefault(shaped[0], []).append(shaped[1])
    line_of: dict[str, str] = {}
    for (before, after, statuses), words in by_shape.items():
        for run in _numbered_runs(sorted(set(words), key=_natural_key), lambda _w: True):
            if len(run) < LEDGER_RUN_MIN_FILES:
                continue
            shown = " ".join([*before, f"{run[0]} … {run[-1]}", *after])
            line = (
                f"- $ {shown} → {_merged_statuses(statuses)} each ({len(run)} commands, one a file)"
            )
            for word in run:
                line_of[" ".join([*before, word, *after])] = line
    return {c: line_of.get(c) or _command_line(c, st) for c, st in commands.items()}


class _Section:
    """The lines of one part of the ledger, each counted once, and how far it is folded.

    Attributes:
        title: Its heading line ("" for none).
        lines: Its lines as shown (folded ones included).
        count: Token count of a text, when the ledger has a share to fit.
        what: What its oldest lines are, in the note that counts them when dropped.
        weights: How many of them each line stands for (a run of commands is one line).
        dropped: How many of them the oldest lines dropped stood for, counted in a note
            before the rest.
        folded: Whether its lines were replaced by counts.
    """

    def __init__(
        self,
        title: str,
        lines: list[str],
        count: Callable[[str], int] | None,
        what: str = "",
        weights: list[int] | None = None,
    ) -> None:
        self.title = title
        self.lines = lines
        self.count = count
        self.what = what
        self.weights = weights if weights is not None else [1] * len(lines)
        self.dropped = 0
        self.folded = False

    def drop_oldest(self) -> str:
        """Drop the oldest line, counted in the note; returns it."""
        self.dropped += self.weights.pop(0)
        return self.lines.pop(0)

    def shown(self) -> list[str]:
        """Its lines, after the note counting those dropped."""
        if not self.dropped:
            return self.lines
        return [_dropped_note(self.dropped, self.what), *self.lines]

    def tokens(self) -> int:
        if not self.lines or self.count is None:
            return 0
        return self.count(self.title) + sum(self.count(line) + 1 for line in self.shown())


def _dropped_note(dropped: int, what: str) -> str:
    return f"- {dropped} earlier {what} (folded: search_history finds them)"


def render_ledger(
    ledger: Ledger,
    *,
    max_tokens: int | None = None,
    count: Callable[[str], int] | None = None,
) -> str:
    """The ledger as the text the model reads; ``""`` when it is empty.

    Args:
        ledger: The ledger.
        max_tokens: Its share of the budget (runs of numbered files changed exactly
            alike are one line each within it too: nothing is lost by that). Past it,
            in this order until it fits: runs of numbered files changed alike become
            one line each (names kept, line counts summed), the
            read folders that cost the most are folded to a count, then all files read
            to a count per top folder, then to one line; the oldest commands and
            subagent tasks to a count; the files changed to a count and their line
            totals per folder. Each line is counted once.
        count: Token count of a text (required with ``max_tokens``).

    Returns:
        The text.
    """
    if ledger.empty:
        return ""
    folders = _by_folder(ledger.reads)
    reads = {f: _folder_line(f, names, ledger.reads) for f, names in folders.items()}
    # Runs of numbered files changed exactly alike are one line from the start: it
    # names every file and its line counts, so nothing is lost by it.
    changes = [line for line, _paths in _changed_in_runs(ledger.changes, exact=True)]
    commands = _command_lines(ledger.commands)
    command_weights = [n for _line, n in commands]
    subagents = [
        f"- {json.dumps(_short(t, LEDGER_TASK_MAX_CHARS), ensure_ascii=False)} → {o}"
        for t, o in ledger.subagents
    ]
    tail = _tail_lines(ledger)
    sections = [
        _Section("Files read (whole unless lines are given):", list(reads.values()), count),
        _Section("Files created or changed:", changes, count),
        _Section(
            "Commands run (with their exit status, in order):",
            [line for line, _n in commands],
            count,
            "commands",
            command_weights,
        ),
        _Section("Subagent tasks:", subagents, count, "subagent tasks"),
        _Section("", tail, count),
    ]
    text = _join(sections)
    if max_tokens is None or count is None:
        return text
    # Each pass folds by the lines' own counts; the joined text can count a few tokens
    # more, so a second pass folds what the first left over.
    folded_reads: set[str] = set()
    for _ in range(LEDGER_FOLD_PASSES):
        over = count(text) - max_tokens
        if over <= 0:
            break
        _fold(sections, ledger, reads, folded_reads, folders, over, count)
        text = _join(sections)
    return text


def _fold(
    sections: Sequence[_Section],
    ledger: Ledger,
    reads: dict[str, str],
    folded_reads: set[str],
    folders: Mapping[str, Sequence[str]],
    over: int,
    count: Callable[[str], int],
) -> None:
    """Fold ``sections`` (in place) by at least ``over`` tokens where they can."""
    read, changed, run, delegated = sections[:4]
    # 0. Runs of numbered files changed alike, one line each: only the runs' files' own
    # line counts go (a count per folder, the last step, would leave the model to find
    # out again which files it changed).
    if over > 0 and changed.lines and not changed.folded:
        runs = [line for line, _paths in _changed_in_runs(ledger.changes)]
        if len(runs) < len(changed.lines):
            before = changed.tokens()
            changed.lines = runs
            over -= before - changed.tokens()
    # 1. The read folders whose lines cost the most become counts (``reads`` keeps the
    # line each folder shows; once folded to top folders, it is not used again).
    if not read.folded:
        costs = {f: count(line) for f, line in reads.items() if f not in folded_reads}
        for folder in sorted(costs, key=lambda f: -costs[f]):
            if over <= 0:
                break
            short = _folded_line(folder, len(folders[folder]))
            saved = costs[folder] - count(short)
            if saved <= 0:
                break  # the rest are as short as their count: fold them all at once below
            over -= saved
            reads[folder] = short
            folded_reads.add(folder)
        read.lines = list(reads.values())
    # 2. All files read, a count per top folder; 3. one line.
    for step in range(2):
        if over > 0 and read.lines:
            before = read.tokens()
            shorter = (
                _top_folder_lines(ledger.reads)
                if step == 0
                else [f"- {len(ledger.reads)} files in {len(folders)} folders (folded)"]
            )
            if len(shorter) < len(read.lines):
                read.lines = shorter
                read.folded = True
                over -= before - read.tokens()
    # 4. The oldest commands and subagent tasks become a count.
    for section in (run, delegated):
        if over <= 0:
            break
        # The note is there once anything is dropped: its cost is reserved up front.
        note_cost = (
            0 if section.dropped else count(_dropped_note(sum(section.weights), section.what)) + 1
        )
        while over + note_cost > 0 and len(section.lines) > 1:
            over -= count(section.drop_oldest()) + 1
        if section.dropped:
            over += note_cost
    # 5. The files changed, a count and their line totals per folder.
    if over > 0 and changed.lines and not changed.folded:
        changed.lines = _changed_by_folder(ledger.changes)
        changed.folded = True


def _join(sections: Sequence[_Section]) -> str:
    lines = [LEDGER_HEADER]
    for section in sections:
        if section.lines:
            lines.extend([section.title, *section.shown()] if section.title else section.shown())
    return "\n".join(lines)


def _tail_lines(ledger: Ledger) -> list[str]:
    lines = []
    if ledger.todos:
        shown = ledger.todos[:LEDGER_TODOS_SHOWN]
        items = " · ".join(
            f"{_TODO_MARK.get(s, '[ ]')} {_short(c, LEDGER_TODO_MAX_CHARS)}" for s, c in shown
        )
        more = len(ledger.todos) - len(shown)
        lines.append(f"Todo list: {items}" + (f" · … {more} more" if more else ""))
    if ledger.other:
        calls = ", ".join(f"{n} ×{k}" for n, k in ledger.other.items())
        lines.append(f"Other tool calls: {calls}")
    if ledger.unlisted_changes:
        biggest = sorted(ledger.unlisted_folders.items(), key=lambda item: -item[1])
        named = [f"{folder}/ {n}" for folder, n in biggest[:LEDGER_UNLISTED_FOLDERS_SHOWN]]
        where = f" ({', '.join(named)}{', …' if len(biggest) > len(named) else ''})"
        lines.append(
            f"Files changed by commands, not listed: {ledger.unlisted_changes}"
            + (where if named else "")
        )
    return lines


def _top_folder_lines(reads: Mapping[str, FileRead]) -> list[str]:
    tops: dict[str, list[str]] = {}
    for path in reads:
        head, _, rest = path.partition("/")
        tops.setdefault(head if rest else "", []).append(path)
    lines = []
    for top, paths in tops.items():
        count = len({posixpath.dirname(p) for p in paths})
        lines.append(_folded_line(top, len(paths), f"files in {count} folders"))
    return lines


def _changed_by_folder(changes: Mapping[str, FileChange]) -> list[str]:
    totals: dict[str, list[int]] = {}
    for path, change in changes.items():
        entry = totals.setdefault(posixpath.dirname(path), [0, 0, 0, 0])
        entry[0] += 1
        entry[1] += change.added
        entry[2] += change.removed
        entry[3] += _lines_known(change)
    return [
        _folded_line(
            folder, n, f"files changed, +{added} −{removed} lines," if counted else "files changed,"
        )
        for folder, (n, added, removed, counted) in totals.items()
    ]


def listed_paths(ledger: Ledger, rendered: str) -> tuple[set[str], set[str]]:
    """The paths ``rendered`` (the ledger as sent, maybe folded) names one by one.

    Args:
        ledger: The ledger it was rendered from.
        rendered: :func:`render_ledger`'s text as it went into the prompt.

    Returns:
        ``(read, changed)``: the files read whose folder's line is shown unfolded, with
        the files the commands shown read (``Ledger.command_reads``), and the files
        changed whose own line or run line is shown.
    """
    lines = set(rendered.splitlines())
    read = {
        posixpath.join(folder, name)
        for folder, names in _by_folder(ledger.reads).items()
        if _folder_line(folder, names, ledger.reads) in lines
        for name in names
    }
    for command, line in _command_line_of(ledger.commands).items():
        paths = ledger.command_reads.get(command, ())
        # A command cut to fit its line may not show its files: not left to the ledger.
        if line in lines and len(command) <= LEDGER_COMMAND_MAX_CHARS:
            read.update(paths)
    changed = {
        path
        for exact in (True, False)
        for line, paths in _changed_in_runs(ledger.changes, exact=exact)
        if line in lines
        for path in paths
    }
    return read, changed


# A summary line that only lists files, as models write them: ``Files read: a.py,
# b/c.py (lines 1-40 of 90)``, ``- `src/app.py` ``. Optional bullet, optional label, then
# path items (a dot or slash in each) with an optional line span.
_LIST_BULLET_RE = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
_LIST_LABEL_RE = re.compile(r"^([A-Za-z][^:`\n]{0,48}):\s+(\S.*)$")
_LIST_ITEM_RE = re.compile(
    r"^`?(?P<path>[\w.~/-]*[./][\w.~/-]*)`?"
    r"(?:\s+\((?:lines?\s+)?\d+(?:\s*[-–]\s*\d+)?(?:\s+of\s+\d+)?\))?$"
)
_LIST_SPLIT_RE = re.compile(r"\s*[,;]\s+")
# A label that says the files were changed (or marked: ``Marked done``): only files the
# ledger lists as changed count.
_CHANGE_LABEL_RE = re.compile(r"creat|chang|edit|modif|writ|wrote|updat|delet|mark", re.IGNORECASE)
# A label that says no more of the files than that they were read (or names none of what
# was done: ``Files``, ``Paths``): the ledger's files read and changed count. Any other
# label says something of the files the ledger does not hold (``Failing tests: a.py``),
# and its line stays as written.
_READ_LABEL_RE = re.compile(
    r"^(?:(?:files?|paths?|sources?)\s*)?(?:(?:were\s+)?(?:read|opened|viewed|inspected|"
    r"examined|looked\s+at|scanned|reviewed|seen)(?:\s+files?)?)?$",
    re.IGNORECASE,
)


def _path_names(paths: Iterable[str], taken: Mapping[str, int]) -> set[str]:
    """``paths`` as a summary may write them: whole, or by a file name no other has
    (``taken``: how many of the ledger's paths have each file name)."""
    names = set(paths)
    for path in paths:
        base = posixpath.basename(path)
        if taken.get(base) == 1:
            names.add(base)
    return names


def _listed_item(item: str, names: set[str], paths: set[str]) -> bool:
    """Whether ``item`` names one of ``paths``: whole (``./`` or not), by a file name no
    other path has written alone (``names``), or under an absolute prefix (the
    workspace's). ``aa/a_0.py`` is not the ledger's ``a/a_0.py``."""
    found = _LIST_ITEM_RE.match(item.strip().rstrip("."))
    if found is None:
        return False
    path = found.group("path").removeprefix("./")
    if path.startswith("/"):
        parts = path.split("/")
        return any("/".join(parts[i:]) in paths for i in range(1, len(parts)))
    return path in names


def without_listed_files(summary: str, ledger: Ledger, rendered: str) -> str:
    """``summary`` without the lines that only list files the ledger shows one by one.

    A summary that lists every file read repeats what the ledger beside it holds
    exactly; on a long task that list grows by a file a read and takes the room of the
    facts only the summary holds. A labelled list becomes its label and a count that
    points at the ledger; a bullet of one file goes. Nothing else changes: a line with
    a word besides files and line spans, or naming a file the ledger folded to a count,
    stays as written.

    Args:
        summary: The summary.
        ledger: The ledger of the same compaction.
        rendered: That ledger's text as it goes into the prompt (see :func:`listed_paths`).

    Returns:
        The summary, leaner where it repeated the ledger.
    """
    read, changed = listed_paths(ledger, rendered)
    if not read and not changed:
        return summary
    taken = Counter(posixpath.basename(p) for p in ledger.paths() | read)
    any_names = _path_names(read | changed, taken)
    changed_names = _path_names(changed, taken)
    out: list[str] = []
    for line in summary.split("\n"):
        bullet = _LIST_BULLET_RE.match(line)
        lead = bullet.group(0) if bullet else ""
        body = line[len(lead) :].strip()
        labelled = _LIST_LABEL_RE.match(body)
        label, items_text = (labelled.group(1), labelled.group(2)) if labelled else ("", body)
        changes_only = _CHANGE_LABEL_RE.search(label)
        if label and not changes_only and not _READ_LABEL_RE.match(label.strip()):
            out.append(line)  # it says something of the files the ledger does not hold
            continue
        names = changed_names if changes_only else any_names
        paths = changed if changes_only else read | changed
        items = [i for i in _LIST_SPLIT_RE.split(items_text.strip()) if i]
        if not items or not all(_listed_item(i, names, paths) for i in items):
            out.append(line)
        elif label:
            files = "1 file" if len(items) == 1 else f"{len(items)} files"
            out.append(f"{lead}{label}: {files} (listed in the progress ledger)")
        elif not lead:
            out.append(line)  # a bare path on a line of its own may be prose: kept
    return "\n".join(out)


def ledger_message(text: str, message_id: str) -> HumanMessage:
    """The ledger as the message placed after the summaries of a compaction."""
    return HumanMessage(
        content=text, id=message_id, additional_kwargs={AGENTGRAPH_KEY: {"kind": LEDGER_KIND}}
    )
