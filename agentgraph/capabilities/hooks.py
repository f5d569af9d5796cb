"""Hooks: the user's commands run at points of a session, on Claude Code's contract.

A hook is a shell command from the ``[hooks]`` table of the user's
``$AGENTGRAPH_HOME/config.toml`` (or of the project's ``.agentgraph/config.toml``, only
once the user allowed that file as it is with ``agentgraph trust``: a cloned
repository must not be able to make the agent run commands). Configuration, in TOML,
mirrors Claude Code's JSON::

    [[hooks.PreToolUse]]
    matcher = "run_bash"          # a regular expression over the tool name; none: every tool
    [[hooks.PreToolUse.hooks]]
    type = "command"
    command = "python3 ~/bin/guard.py"
    timeout = 10                  # seconds (HOOK_TIMEOUT_S when not given)

The command gets the event as one JSON object on stdin (``session_id``, ``cwd``,
``hook_event_name``, and per event ``tool_name``, ``tool_input``, ``tool_response``,
``prompt``, ``trigger``, ``source``, ``last_assistant_message``). It runs in the
workspace with the environment the tools get (secrets left out), bounded in time and
output. Its exit status decides: 0 is success (its stdout is shown; JSON
``{"decision": "block", "reason": …}`` blocks; a ``SessionStart`` or
``UserPromptSubmit`` hook's stdout, or its JSON ``additionalContext``, is also context
for the model: :func:`context_message`), 2 blocks (its stderr is the reason: for
``PreToolUse`` the tool does not run and the model is told why; for ``PostToolUse`` the
model is told; ``UserPromptSubmit`` refuses the prompt), anything else is an error that
is shown and blocks nothing. A hook that cannot start, fails or
hangs never stops the session: one line says so.

Contract details: ``docs/hooks.md``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import threading
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from agentgraph.errors import AgentGraphError, ConfigError
from agentgraph.protocol.events import HOOK_OUTCOME_BLOCKED as OUTCOME_BLOCKED
from agentgraph.protocol.events import HOOK_OUTCOME_ERROR as OUTCOME_ERROR
from agentgraph.protocol.events import HOOK_OUTCOME_OK as OUTCOME_OK
from agentgraph.security.settings_sources import (
    PROJECT_CONFIG_PATH,
    USER_CONFIG_NAME,
    is_allowed,
    read_user_config,
)

PRE_TOOL_USE = "PreToolUse"
POST_TOOL_USE = "PostToolUse"
STOP = "Stop"
PRE_COMPACT = "PreCompact"
SESSION_START = "SessionStart"
USER_PROMPT_SUBMIT = "UserPromptSubmit"
HOOK_EVENTS = (PRE_TOOL_USE, POST_TOOL_USE, STOP, PRE_COMPACT, SESSION_START, USER_PROMPT_SUBMIT)
# Events whose matcher is read against the tool's name (the others run every hook).
TOOL_EVENTS = frozenset({PRE_TOOL_USE, POST_TOOL_USE})
# The config table the hooks live in (the same key in the user's and the project's file).
HOOKS_TABLE = "hooks"
HOOK_TYPE_COMMAND = "command"

# Seconds a hook may run before its process group is killed (Claude Code's default).
HOOK_TIMEOUT_S = 60.0
# Largest per-hook ``timeout`` accepted, in seconds: a hook holds up the session.
HOOK_TIMEOUT_MAX_S = 600.0
# Bytes kept of each of a hook's stdout and stderr; the rest is read and dropped.
HOOK_OUTPUT_MAX_BYTES = 64 * 1024
# Characters of a hook's output shown to the user or given to the model.
HOOK_TEXT_MAX_CHARS = 4000
# Characters of what the hooks of one SessionStart / UserPromptSubmit event add to the
# model's context, all hooks together (Claude Code's cap on additionalContext).
HOOK_CONTEXT_MAX_CHARS = 10_000
# Events whose successful hooks' stdout is context for the model, as in Claude Code.
CONTEXT_EVENTS = frozenset({SESSION_START, USER_PROMPT_SUBMIT})
# Seconds to wait for a killed hook's pipes to close (a detached child may hold them).
HOOK_DRAIN_S = 1.0
HOOK_READ_CHUNK_BYTES = 8192
# The exit status by which a hook blocks (Claude Code's).
HOOK_BLOCK_EXIT_CODE = 2
HOOK_SHELL = "/bin/sh"
# Variable naming the workspace in a hook's environment (Claude Code: CLAUDE_PROJECT_DIR).
PROJECT_DIR_ENV = "AGENTGRAPH_PROJECT_DIR"

Redact = Callable[[str], str]

if TYPE_CHECKING:
    from langchain_core.messages import HumanMessage


class PromptBlocked(AgentGraphError):
    """A ``UserPromptSubmit`` hook blocked the prompt: nothing of the turn was stored."""


@dataclass(frozen=True)
class HookCommand:
    """One configured command.

    Attributes:
        command: The shell command line.
        timeout_s: Seconds it may run.
        source: The file it was configured in.
    """

    command: str
    timeout_s: float
    source: str


@dataclass(frozen=True)
class HookMatcher:
    """The commands run for an event, for the tools whose name matches.

    Attributes:
        event: The event name (one of :data:`HOOK_EVENTS`).
        pattern: Compiled ``matcher`` (matched whole against the tool name); None: all.
        commands: The commands, in configured order.
    """

    event: str
    pattern: re.Pattern[str] | None
    commands: tuple[HookCommand, ...]

    def matches(self, tool_name: str | None) -> bool:
        """Whether this entry applies to a call of ``tool_name`` (None: not a tool event)."""
        if self.pattern is None or tool_name is None:
            return True
        return self.pattern.fullmatch(tool_name) is not None


@dataclass(frozen=True)
class HookConfig:
    """Every hook to run, and what could not be read (one line each).

    Attributes:
        matchers: The configured entries, user's first.
        problems: Lines telling the user what was ignored and why.
    """

    matchers: tuple[HookMatcher, ...] = ()
    problems: tuple[str, ...] = ()


def _timeout(value: Any, where: str, problems: list[str]) -> float:
    if value is None:
        return HOOK_TIMEOUT_S
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        problems.append(f"{where}: timeout must be a positive number of seconds; using the default")
        return HOOK_TIMEOUT_S
    return min(float(value), HOOK_TIMEOUT_MAX_S)


def _commands(entries: Any, where: str, source: str, problems: list[str]) -> list[HookCommand]:
    if not isinstance(entries, list):
        problems.append(f"{where}: 'hooks' must be a list of commands; ignored")
        return []
    commands: list[HookCommand] = []
    for index, entry in enumerate(entries):
        spot = f"{where}.hooks[{index}]"
        if not isinstance(entry, dict):
            problems.append(f"{spot}: not a table; ignored")
            continue
        kind = entry.get("type", HOOK_TYPE_COMMAND)
        command = entry.get("command")
        if kind != HOOK_TYPE_COMMAND:
            problems.append(f"{spot}: type {kind!r} is not supported (only 'command'); ignored")
            continue
        if not isinstance(command, str) or not command.strip() or "\x00" in command:
            problems.append(f"{spot}: 'command' must be a non-empty string; ignored")
            continue
        timeout = _timeout(entry.get("timeout"), spot, problems)
        commands.append(HookCommand(command, timeout, source))
    return commands


def parse_hooks(table: Any, source: str) -> tuple[list[HookMatcher], list[str]]:
    """A ``[hooks]`` table as matchers, and a line per part that was ignored.

    Args:
        table: The table's value as TOML read it.
        source: The file it came from (named in the lines).

    Returns:
        The matchers, and the problems (nothing raised: a broken hook never stops a
        session).
    """
    problems: list[str] = []
    if not isinstance(table, dict):
        return [], [f"{source}: [{HOOKS_TABLE}] must be a table; ignored"]
    matchers: list[HookMatcher] = []
    for event, groups in table.items():
        where = f"{source}: {HOOKS_TABLE}.{event}"
        if event not in HOOK_EVENTS:
            problems.append(f"{where}: unknown event (known: {', '.join(HOOK_EVENTS)}); ignored")
            continue
        if not isinstance(groups, list):
            problems.append(f"{where}: must be a list of [[{HOOKS_TABLE}.{event}]] tables; ignored")
            continue
        for index, group in enumerate(groups):
            spot = f"{where}[{index}]"
            if not isinstance(group, dict):
                problems.append(f"{spot}: not a table; ignored")
                continue
            matcher = group.get("matcher")
            pattern: re.Pattern[str] | None = None
            if matcher is not None and not isinstance(matcher, str):
                problems.append(f"{spot}: 'matcher' must be a string; ignored")
                continue
            if matcher and matcher != "*" and event in TOOL_EVENTS:
                try:
                    pattern = re.compile(matcher)
                except re.error as exc:
                    problems.append(f"{spot}: matcher {matcher!r} is not a valid pattern ({exc})")
                    continue
            commands = _commands(group.get("hooks"), spot, source, problems)
            if commands:
                matchers.append(HookMatcher(event, pattern, tuple(commands)))
    return matchers, problems


def _file_hooks(path: Path) -> tuple[Any, str | None]:
    """The ``[hooks]`` table of a settings file (None when it has none), or why not."""
    try:
        return read_user_config(path).get(HOOKS_TABLE), None
    except ConfigError as exc:
        return None, f"hooks not read: {exc}"


def load_hooks(home: Path, project_file: Path = PROJECT_CONFIG_PATH) -> HookConfig:
    """The user's hooks, then the project's when the user allowed that file as it is.

    Args:
        home: ``AGENTGRAPH_HOME`` (its ``config.toml``, and the allowed files' record).
        project_file: The project's settings file (``.agentgraph/config.toml`` here).

    Returns:
        The hooks, and one line for each thing ignored (a project's hooks not allowed,
        a malformed entry).
    """
    matchers: list[HookMatcher] = []
    problems: list[str] = []
    user_file = home / USER_CONFIG_NAME
    table, problem = _file_hooks(user_file)
    problems.extend([problem] if problem else [])
    if table is not None:
        found, bad = parse_hooks(table, str(user_file))
        matchers.extend(found)
        problems.extend(bad)
    if project_file.is_file():
        table, problem = _file_hooks(project_file)
        problems.extend([problem] if problem else [])
        if table is not None:
            if is_allowed(project_file, home):
                found, bad = parse_hooks(table, str(project_file))
                matchers.extend(found)
                problems.extend(bad)
            else:
                problems.append(
                    f"the hooks in {project_file} were not run: a project's hooks run "
                    "only once you allow the file as it is (`agentgraph trust`)"
                )
    return HookConfig(tuple(matchers), tuple(problems))


def hook_commands_in(path: Path) -> list[str]:
    """The hook commands a settings file configures (for ``agentgraph trust`` to name)."""
    table, _problem = _file_hooks(path)
    if table is None:
        return []
    matchers, _problems = parse_hooks(table, str(path))
    return [command.command for matcher in matchers for command in matcher.commands]


@dataclass(frozen=True)
class HookRun:
    """What one command did.

    Attributes:
        exit_code: Its exit status; None when it did not start or timed out.
        stdout: Its output (the first :data:`HOOK_OUTPUT_MAX_BYTES`, decoded).
        stderr: Its error output (as bounded).
        timed_out: It was killed at its timeout.
        error: Why it could not start ("" when it did).
    """

    exit_code: int | None
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    error: str = ""


def _read_bounded(pipe: IO[bytes], into: list[bytes], limit: int) -> None:
    """Read ``pipe`` to its end, keeping the first ``limit`` bytes in ``into``."""
    kept = 0
    with contextlib.suppress(OSError, ValueError):
        while chunk := pipe.read1(HOOK_READ_CHUNK_BYTES):  # type: ignore[attr-defined]
            if kept < limit:
                into.append(chunk[: limit - kept])
                kept += len(into[-1])


def _write_input(pipe: IO[bytes], data: bytes) -> None:
    """Hand the event to the hook; one that does not read it is not an error."""
    with contextlib.suppress(OSError, ValueError):
        pipe.write(data)
    with contextlib.suppress(OSError, ValueError):
        pipe.close()


def _kill_group(pgid: int) -> None:
    # The group may be gone already; that is the goal, not an error.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


# Process groups of the hooks running now, so that a cancelled turn (Ctrl-C) stops them
# instead of waiting for their timeout.
_RUNNING_HOOKS: set[int] = set()
_RUNNING_LOCK = threading.Lock()


def kill_running_hooks() -> int:
    """SIGKILL every hook running now (the turn was cancelled); returns how many."""
    with _RUNNING_LOCK:
        groups = list(_RUNNING_HOOKS)
    for pgid in groups:
        _kill_group(pgid)
    return len(groups)


def run_hook(
    hook: HookCommand,
    payload: Mapping[str, Any],
    *,
    cwd: str,
    env: Mapping[str, str],
    max_output_bytes: int = HOOK_OUTPUT_MAX_BYTES,
) -> HookRun:
    """Run one hook command with the event on its stdin.

    Args:
        hook: The command.
        payload: The event (written as one JSON object).
        cwd: The working directory (the workspace).
        env: The complete environment.
        max_output_bytes: Bytes kept of each of stdout and stderr.

    Returns:
        What it did; nothing is raised.
    """
    try:
        proc = subprocess.Popen(
            [HOOK_SHELL, "-c", hook.command],
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own group: a timeout kills its children too
            close_fds=True,
        )
    except OSError as exc:
        return HookRun(None, error=str(exc.strerror or exc))
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    with _RUNNING_LOCK:
        _RUNNING_HOOKS.add(proc.pid)  # a new session makes the shell its group leader
    data = json.dumps(dict(payload), ensure_ascii=False, default=str).encode()
    out: list[bytes] = []
    err: list[bytes] = []
    limit = max_output_bytes
    threads = [
        threading.Thread(target=_write_input, args=(proc.stdin, data), daemon=True),
        threading.Thread(target=_read_bounded, args=(proc.stdout, out, limit), daemon=True),
        threading.Thread(target=_read_bounded, args=(proc.stderr, err, limit), daemon=True),
    ]
    for thread in threads:
        thread.start()
    timed_out = False
    try:
        proc.wait(timeout=hook.timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        _kill_group(proc.pid)  # stragglers left in the background go too
        if proc.poll() is None:
            proc.wait()
        with _RUNNING_LOCK:
            _RUNNING_HOOKS.discard(proc.pid)
    for thread in threads:
        thread.join(HOOK_DRAIN_S)
    for pipe in (proc.stdout, proc.stderr):
        with contextlib.suppress(OSError):
            pipe.close()
    return HookRun(
        None if timed_out else proc.returncode,
        stdout=b"".join(out).decode("utf-8", "replace"),
        stderr=b"".join(err).decode("utf-8", "replace"),
        timed_out=timed_out,
    )


def _clip(text: str) -> str:
    text = text.strip()
    if len(text) > HOOK_TEXT_MAX_CHARS:
        return text[: HOOK_TEXT_MAX_CHARS - 1] + "…"
    return text


def _json_output(stdout: str) -> dict[str, Any] | None:
    """A hook's stdout as Claude Code's JSON output, when it is a JSON object."""
    text = stdout.strip()
    if not text.startswith("{"):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


@dataclass
class HookVerdict:
    """What the hooks of one event decided, and what to show.

    Attributes:
        blocked: A hook blocked (exit 2, or JSON ``decision: "block"`` / a
            ``PreToolUse`` ``permissionDecision: "deny"``).
        reasons: The blocking hooks' reasons (for the model).
        context: Text successful hooks added for the model (``additionalContext``).
        events: UI events (``{"type": "hook", …}``), one per hook with something to show.
    """

    blocked: bool = False
    reasons: list[str] = field(default_factory=list)
    context: list[str] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def reason(self) -> str:
        """The blocking reasons as one text."""
        return "\n".join(self.reasons) or "blocked by a hook"


def _judge(event: str, hook: HookCommand, run: HookRun, verdict: HookVerdict) -> None:
    """Fold one command's run into ``verdict`` (the contract in the module docstring)."""
    shown = ""
    outcome = OUTCOME_OK
    if run.error:
        outcome, shown = OUTCOME_ERROR, f"could not start: {run.error}"
    elif run.timed_out:
        outcome, shown = OUTCOME_ERROR, f"timed out after {hook.timeout_s:g} s"
    elif run.exit_code == HOOK_BLOCK_EXIT_CODE:
        reason = _clip(run.stderr) or _clip(run.stdout) or "blocked by a hook"
        outcome, shown = OUTCOME_BLOCKED, reason
        verdict.blocked = True
        verdict.reasons.append(reason)
    elif run.exit_code != 0:
        detail = _clip(run.stderr) or _clip(run.stdout)
        outcome = OUTCOME_ERROR
        shown = f"exit {run.exit_code}" + (f": {detail}" if detail else "")
    else:
        data = _json_output(run.stdout)
        if data is None:
            shown = _clip(run.stdout)
            if shown and event in CONTEXT_EVENTS:
                verdict.context.append(shown)
        else:
            specific = data.get("hookSpecificOutput")
            specific = specific if isinstance(specific, dict) else {}
            denied = specific.get("permissionDecision") == "deny" and event == PRE_TOOL_USE
            if data.get("decision") == "block" or denied:
                given = data.get("reason") or specific.get("permissionDecisionReason")
                said = _clip(str(given or "")) or "blocked by a hook"
                outcome, shown = OUTCOME_BLOCKED, said
                verdict.blocked = True
                verdict.reasons.append(said)
            else:
                shown = _clip(str(data.get("systemMessage") or ""))
            extra = specific.get("additionalContext")
            if isinstance(extra, str) and extra.strip():
                verdict.context.append(_clip(extra))
    if shown or outcome != OUTCOME_OK:
        verdict.events.append(
            {
                "type": "hook",
                "event": event,
                "command": hook.command,
                "outcome": outcome,
                "exit_code": run.exit_code,
                "text": shown,
            }
        )


class Hooks:
    """The configured hooks, ready to run.

    Args:
        config: What :func:`load_hooks` found.
        env: The environment hooks run with (the tools' secret-free one); the
            workspace is added as :data:`PROJECT_DIR_ENV`.
        redact: Applied to everything a hook printed before it is shown or sent on.
    """

    def __init__(
        self, config: HookConfig, env: Mapping[str, str], redact: Redact = lambda text: text
    ) -> None:
        self.config = config
        self.env = dict(env)
        self.redact = redact

    def active(self, event: str) -> bool:
        """Whether any hook is configured for ``event`` (nothing to build otherwise)."""
        return any(m.event == event for m in self.config.matchers)

    def commands(self, event: str, tool_name: str | None = None) -> list[HookCommand]:
        """The commands to run for ``event`` (and a call of ``tool_name``), in order."""
        return [
            command
            for matcher in self.config.matchers
            if matcher.event == event and matcher.matches(tool_name)
            for command in matcher.commands
        ]

    def run(
        self,
        event: str,
        *,
        session_id: str,
        cwd: str,
        tool_name: str | None = None,
        fields: Mapping[str, Any] | None = None,
    ) -> HookVerdict:
        """Run every hook of ``event`` in order, each with the event on stdin.

        Args:
            event: One of :data:`HOOK_EVENTS`.
            session_id: The session (thread id).
            cwd: The workspace the hooks run in.
            tool_name: The tool of a tool event (matched against each ``matcher``).
            fields: The event's own fields (``tool_input``, ``trigger``…).

        Returns:
            The verdict; each hook runs even after one blocked, as in Claude Code.
        """
        verdict = HookVerdict()
        commands = self.commands(event, tool_name)
        if not commands:
            return verdict
        payload: dict[str, Any] = {"session_id": session_id, "cwd": cwd, "hook_event_name": event}
        if tool_name is not None:
            payload["tool_name"] = tool_name
        payload.update(fields or {})
        env = {**self.env, PROJECT_DIR_ENV: cwd}
        for command in commands:
            _judge(event, command, run_hook(command, payload, cwd=cwd, env=env), verdict)
        verdict.reasons = [self.redact(r) for r in verdict.reasons]
        verdict.context = [self.redact(c) for c in verdict.context]
        for item in verdict.events:
            item["text"] = self.redact(str(item["text"]))
        return verdict


def context_message(event: str, verdict: HookVerdict) -> HumanMessage | None:
    """What the hooks of a ``SessionStart`` / ``UserPromptSubmit`` event added for the
    model, as a message of kind ``hook_context`` (appended to the history: the system
    prompt never changes), or None when they added nothing.

    The texts are already redacted (:meth:`Hooks.run`); together they are cut at
    :data:`HOOK_CONTEXT_MAX_CHARS`.
    """
    from langchain_core.messages import HumanMessage

    from agentgraph.runtime.history.kinds import AGENTGRAPH_KEY, HOOK_CONTEXT_KIND

    text = "\n\n".join(c for c in verdict.context if c.strip())
    if event not in CONTEXT_EVENTS or not text:
        return None
    if len(text) > HOOK_CONTEXT_MAX_CHARS:
        text = text[: HOOK_CONTEXT_MAX_CHARS - 1] + "…"
    return HumanMessage(
        content=f"Output of the user's {event} hook (context, not a request):\n{text}",
        additional_kwargs={AGENTGRAPH_KEY: {"kind": HOOK_CONTEXT_KIND, "event": event}},
    )


def hook_feedback(event: str, verdict: HookVerdict) -> str:
    """The note the model gets when a hook blocked (what it said, for the model)."""
    return f"{event} hook: {verdict.reason}"


# The session a compaction outside a graph run (``/compact``) works on.
COMPACTING_SESSION: ContextVar[str] = ContextVar("agentgraph_compacting_session", default="")


def _session_of_run() -> str:
    """The thread id of the graph run this code runs in, else :data:`COMPACTING_SESSION`."""
    from langgraph.config import get_config

    try:
        thread = (get_config().get("configurable") or {}).get("thread_id")
    except RuntimeError:
        thread = None
    return str(thread or COMPACTING_SESSION.get())


def run_pre_compact(
    hooks: Hooks,
    emit: Callable[[dict[str, Any]], None],
    *,
    trigger: str,
    focus: str | None,
    workspace: str | None,
) -> None:
    """Run the ``PreCompact`` hooks (they cannot stop a compaction; what they say is shown).

    Args:
        hooks: The hooks.
        emit: Where their events go (the run's event stream).
        trigger: Why the history is compacted (``auto``, ``guard``, ``distil``, ``manual``).
        focus: The user's ``/compact FOCUS`` (Claude Code's ``custom_instructions``).
        workspace: The workspace (the hooks' working directory), or None for this one.
    """
    if not hooks.active(PRE_COMPACT):
        return
    verdict = hooks.run(
        PRE_COMPACT,
        session_id=_session_of_run(),
        cwd=workspace or str(Path.cwd()),
        fields={"trigger": trigger, "custom_instructions": focus or ""},
    )
    for event in verdict.events:
        emit(event)
