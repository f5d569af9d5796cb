"""The tools node: LangGraph's ToolNode plus allowed-tools checks and output truncation."""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.prebuilt import ToolRuntime
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.runtime import Runtime
from langgraph.types import Command, interrupt

from agentgraph.capabilities.hooks import POST_TOOL_USE, PRE_TOOL_USE, Hooks, hook_feedback
from agentgraph.capabilities.tools.base import ToolError, format_tool_error
from agentgraph.capabilities.tools.bash import bash_status
from agentgraph.capabilities.tools.files import (
    READ_FILE_TOOL_NAME,
    RestoredWrites,
    as_written,
    fit_read_page,
    read_span,
    restore_command_writes,
)
from agentgraph.capabilities.tools.injected import exclude_injected_from_dump
from agentgraph.capabilities.tools.spec import BUILTIN_TOOLS, DECLARED_READ_ONLY_KEY, tool_spec
from agentgraph.capabilities.tools.workspace_scan import (
    NAMED_FILE_MAX_BYTES,
    StatScan,
    changed_spans,
    command_scope,
    foreign_writes_mark,
    foreign_writes_since,
    read_named,
    scan_changes,
    stat_scan,
    with_scanned_changes,
)
from agentgraph.context.artifacts import cut_marker, output_artifact_path
from agentgraph.context.compaction import (
    carried_scale,
    read_page_max_tokens,
    shown_files_max_tokens,
    since_last_boundary,
)
from agentgraph.context.ledger import ledger_path
from agentgraph.context.shell_reads import reads_files, whole_file_reads
from agentgraph.context.shown_files import cut_command_output, shown_marker
from agentgraph.context.truncation import default_tool_output_max_tokens, truncate_tool_output
from agentgraph.middleware.events import emit
from agentgraph.private_api import InlineToolNode
from agentgraph.runtime.call_records import needs_record, record_end, record_start
from agentgraph.runtime.deps import AgentDeps
from agentgraph.runtime.history.kinds import stamped, with_marker
from agentgraph.runtime.nodes.call_order import CallOrder, waits
from agentgraph.runtime.nodes.common import CUT_ARGS_KEY, INVALID_ARGS_KEY
from agentgraph.runtime.runctx import RunContext
from agentgraph.runtime.state import AppState
from agentgraph.security.approvals import (
    answered_rule,
    answers_another_call,
    approval_request,
    cannot_ask_text,
    decline_reason,
    declined_text,
    is_approved,
    misdirected_text,
    unappliable_edit,
)
from agentgraph.security.git_trust import remember_git_dir
from agentgraph.security.permission_rules import Rule, add_rule, load_rules
from agentgraph.security.permissions import (
    ACCEPTED_PLANS,
    PRESENT_PLAN_TOOL,
    effective_mode,
    plan_mode_refusal,
)
from agentgraph.security.redaction import REDACTED, Redactor, build_redactor


def tool_output_cap_tokens(deps: AgentDeps) -> int:
    """``TOOL_OUTPUT_MAX_TOKENS``: the setting, else a fraction of the usable budget."""
    if deps.settings.tool_output_max_tokens is not None:
        return deps.settings.tool_output_max_tokens
    return default_tool_output_max_tokens(deps.budget.usable)


def read_page_cap_tokens(
    deps: AgentDeps, messages: Sequence[BaseMessage], cap: int, files: int = 1
) -> int:
    """The most one ``read_file`` page holds, given ``cap`` (:func:`tool_output_cap_tokens`):
    ``TOOL_OUTPUT_MAX_TOKENS`` when set (the user's cap bounds every output), else
    :func:`read_page_max_tokens`, with the provider/estimate ratio the last compaction of
    ``messages`` recorded (the room it bounds the page by is the provider's). A command
    that prints several ``files`` whole gets a page for each, within a share of the budget
    (:func:`shown_files_max_tokens`)."""
    if deps.settings.tool_output_max_tokens is not None:
        return cap
    scale = 1.0
    if deps.counter.source == "estimate":
        scale = carried_scale(since_last_boundary(messages))
    page = read_page_max_tokens(deps.budget, cap, scale)
    return shown_files_max_tokens(deps.budget, page, files, scale)


def files_shown(call: ToolCall) -> int:
    """How many read pages ``call`` may fill when it is a shell command that shows files
    (:func:`~agentgraph.context.shell_reads.reads_files`): one per file ``cat A B``
    prints whole, one for any other (``grep -v '^#' A B`` prints what matched, a page at
    most as before); 0 for any other call."""
    command = call["args"].get("command") if isinstance(call.get("args"), Mapping) else None
    if tool_spec(call["name"]).ledger != "command" or not isinstance(command, str):
        return 0
    return len(whole_file_reads(command)) or int(reads_files(command))


def _map_results(output: Any, change: Callable[[ToolMessage], ToolMessage]) -> Any:
    """``output`` of the tool node (or of one tool) with ``change`` applied to each
    ``ToolMessage`` of its state updates: plain updates, lists of them, commands."""
    if isinstance(output, list):
        return [_map_results(item, change) for item in output]
    if isinstance(output, Command):
        update = output.update
        if isinstance(update, dict) and isinstance(update.get("messages"), list):
            return replace(output, update=_map_results(update, change))
        return output
    if isinstance(output, dict) and isinstance(output.get("messages"), list):
        messages = [change(m) if isinstance(m, ToolMessage) else m for m in output["messages"]]
        return {**output, "messages": messages}
    return output


def _declared_read_only(tools: Sequence[BaseTool]) -> frozenset[str]:
    """The bound tools whose metadata declares they change nothing (an MCP server's
    ``readOnlyHint``, :data:`~agentgraph.capabilities.tools.spec.DECLARED_READ_ONLY_KEY`)."""
    return frozenset(
        tool.name for tool in tools if (tool.metadata or {}).get(DECLARED_READ_ONLY_KEY) is True
    )


def _changers(calls: Sequence[ToolCall], tools: Sequence[BaseTool]) -> list[str]:
    """The ids of a step's calls that may change workspace files without saying which:
    its commands, then its calls of bound tools without a spec (an MCP server's) that do
    not declare they change nothing; empty when another call may change files in a way
    of its own (a subagent's applied changes are its result's to tell), so that no
    change is taken for theirs. A call that reads, writes only the file its path names
    (its call records that) or names no tool the agent has leaves the step as it is."""
    declared = _declared_read_only(tools)
    changing = {tool.name for tool in tools if tool.name not in BUILTIN_TOOLS} - declared
    commands: list[str] = []
    tools_: list[str] = []
    for call in calls:
        name = call["name"]
        spec = tool_spec(name)
        if spec.ledger == "command":
            commands.append(call["id"] or "")
        elif name not in BUILTIN_TOOLS:
            if name in changing:
                tools_.append(call["id"] or "")
        elif not (spec.ledger == "todos" or spec.read_only or spec.files_role == "writes"):
            return []
    return [*commands, *tools_]


def _call_order(
    calls: Sequence[ToolCall], tools: Sequence[BaseTool], workspace: str | None
) -> CallOrder | None:
    """The waits of a step's calls (:mod:`~agentgraph.runtime.nodes.call_order`); None
    when no call waits."""
    declared = _declared_read_only(tools)
    order = waits(calls, lambda name: name not in declared, ledger_path(workspace))
    return CallOrder(order) if order else None


def _commands(calls: Sequence[ToolCall]) -> list[str]:
    """The command lines of a step's commands."""
    return [
        command
        for call in calls
        if tool_spec(call["name"]).ledger == "command"
        and isinstance(command := (call.get("args") or {}).get("command"), str)
    ]


def _named_texts(
    calls: Sequence[ToolCall], before: StatScan | None, workspace: str | None
) -> dict[str, bytes]:
    """The text before the step of the files its commands name (see
    :func:`~agentgraph.capabilities.tools.workspace_scan.read_named`)."""
    if before is None or not workspace:
        return {}
    return read_named(before, workspace, _commands(calls), ledger_path(workspace))


def _command_scope(calls: Sequence[ToolCall], workspace: str | None) -> tuple[str, ...]:
    """Where a step's commands point, for a workspace too big to scan whole (see
    :func:`~agentgraph.capabilities.tools.workspace_scan.command_scope`)."""
    return command_scope(_commands(calls), ledger_path(workspace)) if workspace else ()


def _with_step_changes(
    output: Any,
    calls: Sequence[ToolCall],
    changers: Sequence[str],
    scan: tuple[StatScan, tuple[str, ...] | None, int],
    named: Mapping[str, bytes],
    workspace: str | None,
    redactor: Redactor,
) -> Any:
    """``output`` with the files the step's commands or tools changed, as the workspace
    shows them after it (:mod:`~agentgraph.capabilities.tools.workspace_scan`), recorded
    on the result of the first of ``changers`` (:func:`_changers`) that ran, with the
    lines that changed in the files its commands name (``named``: their text before
    it). The files its write_file and edit_file calls name are theirs: left out.
    ``scan``: the scan before the step, the paths it covered (None: all) and the count of
    this process's own writes outside steps then (a background subagent's applied changes
    meanwhile are its own: left out too).

    A file the commands name that they rewrote with the redaction marker where it hid a
    value gets the value back (:func:`~agentgraph.capabilities.tools.files.restore_command_writes`),
    said on the same result."""
    before, scope, mark = scan
    after = stat_scan(workspace, scope=scope)
    if after is None or not workspace:
        return output
    ignored = set(foreign_writes_since(mark, workspace))
    name = ledger_path(workspace)  # as the scan names a file under the workspace
    for call in calls:
        spec = tool_spec(call["name"])
        path = (call.get("args") or {}).get(spec.path_arg) if spec.path_arg else None
        if spec.files_role == "writes" and isinstance(path, str) and path.strip():
            ignored.add(name(path))
    changes = scan_changes(before, after, ignored)
    if changes.empty:
        return output
    restored = RestoredWrites()
    if named and workspace:
        restored = restore_command_writes(
            workspace,
            named,
            changes.modified,
            redactor,
            NAMED_FILE_MAX_BYTES,
            "\n".join(_commands(calls)),
        )
        changes = replace(changes, spans=changed_spans(workspace, named, changes.modified))
    note = redactor.redact(_restored_note(restored))
    results: dict[str, ToolMessage] = {}

    def collect(message: ToolMessage) -> ToolMessage:
        results.setdefault(message.tool_call_id, message)
        return message

    _map_results(output, collect)
    target = next((cid for cid in changers if _ran(cid, results, calls)), None)
    if target is None:
        return output
    return _map_results(
        output,
        lambda m: _noted(with_scanned_changes(m, changes), note) if m.tool_call_id == target else m,
    )


def _restored_note(restored: RestoredWrites) -> str:
    """What the model is told of the values put back into files its commands rewrote."""
    lines = []
    if restored.restored:
        lines.append(
            f"[the values shown to you as {REDACTED} that this step wrote as the marker into "
            f"{', '.join(restored.restored)} were put back in place; to remove a value, "
            f"write other text than {REDACTED}]"
        )
    if restored.left:
        lines.append(
            f"[{', '.join(restored.left)}: this step wrote {REDACTED} where the file held "
            "values hidden from you, and they could not be put back (which value each "
            "marker stands for is not certain, or the file changed again): the file holds "
            "the marker now; tell the user]"
        )
    return "\n".join(lines)


def _noted(message: ToolMessage, note: str) -> ToolMessage:
    """``message`` with ``note`` after its output (before a command's status line)."""
    content = message.content
    if not note or not isinstance(content, str):
        return message
    status = bash_status(content)
    at = len(content) if status is None else status.start
    head = content[:at] if not content[:at] or content[:at].endswith("\n") else content[:at] + "\n"
    return message.model_copy(update={"content": f"{head}{note}\n{content[at:]}"})


def _ran(call_id: str, results: Mapping[str, ToolMessage], calls: Sequence[ToolCall]) -> bool:
    """Whether the call ran (the record of the step's changes goes on its result): a
    command whose result has its status line (a refused one has none), or a tool's call
    whose result is no error (a refused or declined call's is one)."""
    result = results.get(call_id)
    if result is None:
        return False
    call = next((c for c in calls if c["id"] == call_id), None)
    if call is not None and tool_spec(call["name"]).ledger == "command":
        return bash_status(result.text) is not None
    return result.status != "error"


def refusal(call: ToolCall, state: Any) -> ToolMessage | None:
    """The error result of a call that must not run (tool not allowed, broken JSON)."""
    name, call_id = call["name"], call["id"] or ""
    allowed = state.get("allowed_tools") if isinstance(state, dict) else None
    persistent = set(state.get("persistent_tools") or []) if isinstance(state, dict) else set()
    if allowed is not None and name not in allowed and name not in persistent:
        return ToolMessage(
            content=f"Error: tool {name!r} is not allowed here (allowed: {', '.join(allowed)})",
            tool_call_id=call_id,
            name=name,
            status="error",
        )
    if (call.get("args") or {}).get(CUT_ARGS_KEY):
        return ToolMessage(
            content=(
                f"Error: your reply reached the output token limit while this {name} call "
                "was being written, so its arguments are incomplete and it did not run; "
                "re-issue it with less in one call (split long content over several calls)"
            ),
            tool_call_id=call_id,
            name=name,
            status="error",
        )
    if INVALID_ARGS_KEY in (call.get("args") or {}):
        return ToolMessage(
            content=(
                f"Error: the arguments of this {name} call were not valid JSON "
                f"({str(call['args'][INVALID_ARGS_KEY])[:200]!r}); re-issue the call"
            ),
            tool_call_id=call_id,
            name=name,
            status="error",
        )
    return None


# Tool-call id -> error text of the calls of the running step that were not approved.
# Set by the tools node around its ToolNode run; the threads running calls copy it.
_NOT_APPROVED: contextvars.ContextVar[Mapping[str, str] | None] = contextvars.ContextVar(
    "agentgraph_not_approved", default=None
)
# Which calls of the running step wait for which (calls touching the same files run in
# the order written); set like ``_NOT_APPROVED``.
_ORDER: contextvars.ContextVar[CallOrder | None] = contextvars.ContextVar(
    "agentgraph_call_order", default=None
)


def _as_written(
    call: ToolCall, workspace: str, redactor: Redactor | None
) -> tuple[ToolCall, str | None]:
    """``call`` with the arguments its file tool will write with (the values its markers
    stand for given back: :func:`~agentgraph.capabilities.tools.files.as_written`), for
    its question's diff, or as it is with the tool's error when a value is not certain."""
    if redactor is None or tool_spec(call["name"]).approval != "edit":
        return call, None
    try:
        args = as_written(redactor, workspace, call["name"], call.get("args") or {})
    except ToolError as exc:
        return call, format_tool_error(exc)
    return {**call, "args": args}, None


def ask_approvals(
    calls: list[ToolCall],
    state: Any,
    deps: AgentDeps,
    ctx: RunContext,
    accepted_plans: dict[str, Any] | None = None,
    redactor: Redactor | None = None,
) -> dict[str, str]:
    """Ask for every call of the step that needs approval, before any tool runs.

    One ``interrupt()`` per such call, in call order, from the node's own thread: on
    resume the node runs again, the answered interrupts return their answers and the
    next one (if any) stops the run again. See ``agentgraph/security/approvals.py``. In plan
    mode, write tools are refused without a question.

    The rules "always" answers add are stored once every question of the step is
    answered: stored at once, they would stop a later call of the same step from being
    asked on the next re-run, and the resume answers, given by position, would reach
    the wrong questions.

    Args:
        calls: The step's tool calls.
        state: The graph state (the session's permission mode).
        deps: Settings and the sandbox plan.
        ctx: The run's context (workspace, whether it can ask).
        accepted_plans: Filled with tool-call id -> answer for accepted plans.
        redactor: Redacts an edit's diff (the file's context lines may hold a token):
            a question is an interrupt, stored in the session's checkpoints.

    Returns:
        Tool-call id -> error text, for the calls that may not run.
    """
    mode = effective_mode(state if isinstance(state, dict) else None, deps.settings)
    rules = load_rules(deps.settings.home, ctx.workspace_path)
    refused: dict[str, str] = {}
    asked: list[tuple[ToolCall, dict[str, Any], str | None]] = []
    for call in calls:
        if refusal(call, state) is not None:
            continue  # answered with an error anyway: nothing to ask
        blocked = plan_mode_refusal(call["name"], mode)
        if blocked is not None:
            refused[call["id"] or ""] = blocked
            continue
        written, error = _as_written(call, ctx.workspace_path, redactor)
        request = approval_request(
            written,
            deps.settings,
            ctx.workspace_path,
            unsandboxed=deps.unsandboxed_shell,
            mode=mode,
            rules=rules,
            redact=redactor.redact if redactor is not None else None,
        )
        if request is not None:
            asked.append((call, request, error or unappliable_edit(written, ctx.workspace_path)))
    new_rules: list[Rule] = []
    # When every such call is an edit that cannot apply, nothing is asked: each gets the
    # tool's own error. Otherwise every one is asked, as always: resume answers reach
    # the interrupts by position, so which calls are asked must not depend on files
    # that may change while a question waits.
    nothing_to_ask = all(error is not None for _call, _request, error in asked)
    for call, request, error in asked:
        call_id = call["id"] or ""
        if error is not None and (nothing_to_ask or not ctx.can_ask):
            refused[call_id] = error
        elif not ctx.can_ask:
            refused[call_id] = cannot_ask_text(request)
        else:
            answer = interrupt(request)
            if answers_another_call(request, answer):
                refused[call_id] = misdirected_text(request)
                continue
            if not is_approved(answer):
                refused[call_id] = declined_text(request, decline_reason(answer))
                continue
            rule = answered_rule(request, answer)
            if rule is not None:
                new_rules.append(rule)
            if call["name"] == PRESENT_PLAN_TOOL and accepted_plans is not None:
                accepted_plans[call_id] = answer
    for rule in new_rules:
        add_rule(deps.settings.home, ctx.workspace_path, rule)
    return refused


def hooks_before_tool(hooks: Hooks | None, call: ToolCall, ctx: RunContext) -> ToolMessage | None:
    """Run the ``PreToolUse`` hooks of ``call``: the error result when one blocked it."""
    if hooks is None or not hooks.active(PRE_TOOL_USE):
        return None
    verdict = hooks.run(
        PRE_TOOL_USE,
        session_id=ctx.thread_id,
        cwd=ctx.workspace_path,
        tool_name=call["name"],
        fields={"tool_input": call.get("args") or {}, "tool_use_id": call["id"]},
    )
    for event in verdict.events:
        emit(event)
    if not verdict.blocked:
        return None
    return ToolMessage(
        content=f"Error: this call did not run: {hook_feedback(PRE_TOOL_USE, verdict)}",
        tool_call_id=call["id"] or "",
        name=call["name"],
        status="error",
    )


def hooks_after_tool(
    hooks: Hooks | None, call: ToolCall, ctx: RunContext, result: ToolMessage | None
) -> ToolMessage | None:
    """Run the ``PostToolUse`` hooks of ``call``; a blocking hook's reason is added to
    the (already redacted) result the model gets. None: the result is unchanged."""
    if hooks is None or not hooks.active(POST_TOOL_USE):
        return None
    verdict = hooks.run(
        POST_TOOL_USE,
        session_id=ctx.thread_id,
        cwd=ctx.workspace_path,
        tool_name=call["name"],
        fields={
            "tool_input": call.get("args") or {},
            "tool_use_id": call["id"],
            "tool_response": result.content if result is not None else None,
        },
    )
    for event in verdict.events:
        emit(event)
    if result is None or not verdict.blocked or not isinstance(result.content, str):
        return None
    note = hook_feedback(POST_TOOL_USE, verdict)
    return result.model_copy(update={"content": f"{result.content}\n\n{note}"})


def make_tools_node(
    deps: AgentDeps,
) -> Callable[[AppState, RunnableConfig, Runtime[RunContext]], Any]:
    """Build the tools node bound to ``deps``: approvals, then LangGraph's ToolNode."""
    redactor = deps.redactor or build_redactor(deps.settings.secret_values(), None)

    def wrap(
        request: ToolCallRequest, execute: Callable[[ToolCallRequest], ToolMessage | Command[Any]]
    ) -> ToolMessage | Command[Any]:
        order = _ORDER.get()
        call_id = request.tool_call["id"] or ""
        if order is None:
            return run_call(request, execute)
        order.before(call_id)
        try:
            return run_call(request, execute)
        finally:
            order.after(call_id)

    def run_call(
        request: ToolCallRequest, execute: Callable[[ToolCallRequest], ToolMessage | Command[Any]]
    ) -> ToolMessage | Command[Any]:
        call = request.tool_call
        state: Any = request.state
        # Tools read run data from runtime.context: hand them the completed context.
        runtime: ToolRuntime[Any, Any] = request.runtime
        ctx = deps.run_context(runtime.context, runtime.config)
        request = replace(request, runtime=replace(runtime, context=ctx))
        call_id = call["id"] or ""
        refused = refusal(call, state)
        if refused is not None:
            return refused
        not_approved = (_NOT_APPROVED.get() or {}).get(call_id)
        if not_approved is not None:  # may quote a path or a command: redacted as results are
            return ToolMessage(
                content=redactor.redact_content(not_approved),
                tool_call_id=call_id,
                name=call["name"],
                status="error",
            )
        blocked = hooks_before_tool(deps.hooks, call, ctx)
        if blocked is not None:
            return blocked
        folder = Path(ctx.artifacts_dir) if ctx.artifacts_dir else deps.artifacts_dir(ctx.thread_id)
        # A crash while the tool runs leaves this record: the resume then says the
        # call may have completed instead of that it never ran.
        record = record_start(folder, call_id, call["name"]) if needs_record(call["name"]) else None
        # Else every call serializes the whole state (done at the tool's first call).
        exclude_injected_from_dump([request.tool])
        try:
            result = execute(request)
        finally:
            record_end(record)
        if isinstance(result, Command):  # its state update's results are redacted
            hooks_after_tool(deps.hooks, call, ctx, None)
            command: Command[Any] = _map_results(
                result,
                lambda m: m.model_copy(update={"content": redactor.redact_content(m.content)}),
            )
            return command
        # Any tool can surface a credential (printenv, read_file on a .env, grep over a
        # config, an MCP server's answer): redacted here, before the model, the
        # checkpoints or the artifacts see it. Error results too.
        raw = result.content
        redacted = redactor.redact_content(raw)
        if redacted != raw:
            result = result.model_copy(update={"content": redacted})
        result = hooks_after_tool(deps.hooks, call, ctx, result) or result
        if not isinstance(result.content, str):
            return result
        content = result.content
        # Sized per call: the budget shrinks in place when an overflow names a smaller
        # window (a grep cut for the 32k a model's name implied filled a 4k window).
        cap = tool_output_cap_tokens(deps)
        is_read = call["name"] == READ_FILE_TOOL_NAME and result.status != "error"
        history = state.get("messages") if isinstance(state, dict) else None
        page_cap = cap
        shown = files_shown(call)
        if is_read or shown:
            # A page of files the model asked to see, as read_file's: cut to the tenth of
            # other outputs, ``cat`` of four 3 KB files kept two of them at a 16k window.
            page_cap = read_page_cap_tokens(deps, history or [], cap, shown)
        fits = deps.counter.fits(content, page_cap)
        if fits and redacted == raw:
            return result
        if is_read:
            # A file read is shortened to the lines that fit, with the next offset. Its
            # span comes from before redaction, which may have joined lines or cut the
            # read's end (and its note: a redacted read is restated as a page even when
            # it fits).
            span = read_span(raw) if isinstance(raw, str) else None
            page = fit_read_page(content, page_cap, deps.counter, span=span)
            if page is not None:
                return result.model_copy(update={"content": page})
        if fits:
            return result
        artifact = output_artifact_path(folder, call_id)
        # ``cat`` of several files: each file's leading lines, as that many read_file
        # calls show, where a head-and-tail cut hid the middle files whole; lines of one
        # file, the read_file page from the first printed. Not where a secret was
        # redacted: the files' texts would no longer tell where each ends.
        line = (call.get("args") or {}).get("command")
        by_file = None
        if shown and redacted == raw and isinstance(line, str):
            by_file = cut_command_output(line, content, page_cap, deps.counter, ctx.workspace_path)
        if by_file is not None:
            kept, marker = by_file.text, shown_marker(by_file)
        else:
            cut = truncate_tool_output(
                content,
                page_cap,
                count=deps.counter.count_text,
                artifact_path=str(artifact),
                codec=deps.counter.codec,
            )
            if not cut.truncated:
                return result
            kept, marker = cut.text, {}
        folder.mkdir(parents=True, exist_ok=True)
        artifact.write_text(content, encoding="utf-8")
        # The copy's digest: a compaction's summarizer reads that copy, and no other, in
        # place of the cut (agentgraph/context/artifacts.py).
        cut_result = result.model_copy(update={"content": kept})
        return with_marker(cut_result, **cut_marker(content), **marker)

    # Rebuilt when deps.tools changes: MCP tools join between turns (Agent.sync_mcp_tools).
    built: dict[tuple[int, ...], InlineToolNode] = {}

    def tool_node_for_current_tools() -> InlineToolNode:
        key = tuple(id(t) for t in deps.tools)
        node = built.get(key)
        if node is None:
            node = InlineToolNode(
                deps.tools, handle_tool_errors=format_tool_error, wrap_tool_call=wrap
            )
            built.clear()
            built[key] = node
        return node

    def tools(state: AppState, config: RunnableConfig, runtime: Runtime[RunContext]) -> Any:
        messages = state.get("messages") or []
        last = messages[-1] if messages else None
        calls = list(last.tool_calls) if isinstance(last, AIMessage) else []
        ctx = deps.run_context(runtime.context, config)
        if ctx.workspace_path:  # before any command of this process runs there
            remember_git_dir(ctx.workspace_path)
        accepted: dict[str, Any] = {}
        token = _NOT_APPROVED.set(ask_approvals(calls, state, deps, ctx, accepted, redactor))
        ordered = _ORDER.set(_call_order(calls, deps.tools, ctx.workspace_path))
        plans = ACCEPTED_PLANS.set(accepted)
        try:
            changers = _changers(calls, deps.tools)
            mark = foreign_writes_mark()
            scope: tuple[str, ...] | None = None
            before = stat_scan(ctx.workspace_path) if changers else None
            if changers and before is None:  # too big to scan whole: where commands point
                scope = _command_scope(calls, ctx.workspace_path)
                before = stat_scan(ctx.workspace_path, scope=scope) if scope else None
            named = _named_texts(calls, before, ctx.workspace_path)
            output = tool_node_for_current_tools().invoke(state, config)
            if before is not None:
                output = _with_step_changes(
                    output,
                    calls,
                    changers,
                    (before, scope, mark),
                    named,
                    ctx.workspace_path,
                    redactor,
                )
            now = time.time()
            return _map_results(output, lambda m: stamped(m, now))  # each result dated
        finally:
            ACCEPTED_PLANS.reset(plans)
            _ORDER.reset(ordered)
            _NOT_APPROVED.reset(token)

    return tools
