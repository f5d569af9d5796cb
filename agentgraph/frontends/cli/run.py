"""``agentgraph run PROMPT``: one task, non-interactively."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from contextlib import suppress
from functools import partial
from typing import Any

from rich.console import Console
from rich.markup import escape

from agentgraph.config import Settings
from agentgraph.errors import (
    EXIT_FAILURE,
    EXIT_RUN_TIMEOUT,
    EXIT_USAGE,
    AgentGraphError,
)
from agentgraph.frontends.cli import collector_paused
from agentgraph.frontends.cli.common import process_environment, resolve_workspace
from agentgraph.frontends.cli.consoles import make_console
from agentgraph.frontends.cli.render import EventPrinter
from agentgraph.frontends.cli.stream_json import StreamJsonPrinter
from agentgraph.frontends.cli.turns import run_turn_interruptibly, turn_still_running
from agentgraph.protocol.events import Diff, ToolCall, event_to_show
from agentgraph.session.agent import Agent
from agentgraph.session.failures import failure_line
from agentgraph.session.run import (
    STOP_TIMEOUT,
    RunTimedOut,
    check_session_ids,
    empty_usage,
    failed_run_usage,
    result_usage,
    run_capped,
    run_exit_code,
    stop_explanation,
    thread_for_run,
)
from agentgraph.session.startup import start_session
from agentgraph.session.workspaces import isolated_workspace


def _session_model(agent: Agent, thread_id: str, err: Console) -> tuple[Agent, Settings]:
    """The agent on the model ``thread_id`` chose with ``/model``, as the REPL resumes it.

    A choice that cannot be built now is reported in one line and the configured
    model stays.
    """
    wanted = agent.model_preference(thread_id)
    if wanted is None or wanted == agent.settings.model:
        return agent, agent.settings
    try:
        switched = agent.with_model(wanted)
    except AgentGraphError as exc:
        err.print(f"kept {agent.settings.model}: {exc}", markup=False, style="yellow")
        return agent, agent.settings
    return switched, switched.settings


def check_reopen_options(args: argparse.Namespace) -> None:
    """``--thread``, ``--resume ID`` and ``--continue`` each choose the session: one at most.

    Raises:
        AgentGraphError: (exit 2) several are given, ``-r`` has no id (the session
            picker needs the REPL), or the id breaks the thread-id rule.
    """
    resume = getattr(args, "resume", None)
    given = [args.thread is not None, resume is not None, bool(args.cont)]
    if sum(given) > 1:
        raise AgentGraphError(
            "run takes one of --thread ID, --resume/-r ID and --continue/-c", EXIT_USAGE
        )
    if resume == "":
        raise AgentGraphError(
            "run needs the session's id: agentgraph -r ID run ... (the picker is the REPL's)",
            EXIT_USAGE,
        )
    check_session_ids({"--resume": resume})


# `run -` reads the prompt from stdin, up to this many bytes.
STDIN_PROMPT_MAX_BYTES = 10 * 1024 * 1024


def read_prompt(value: str) -> str:
    """The prompt argument, or stdin for ``-`` (UTF-8; invalid bytes replaced).

    Raises:
        AgentGraphError: stdin is larger than STDIN_PROMPT_MAX_BYTES.
    """
    if value != "-":
        return value
    data = sys.stdin.buffer.read(STDIN_PROMPT_MAX_BYTES + 1)
    if len(data) > STDIN_PROMPT_MAX_BYTES:
        raise AgentGraphError(
            f"the prompt on stdin is over {STDIN_PROMPT_MAX_BYTES // (1024 * 1024)} MiB",
            EXIT_USAGE,
        )
    # The newline a shell pipe or heredoc ends with is not part of the request.
    return data.decode("utf-8", errors="replace").rstrip("\r\n")


class RunReport:
    """What ``--json`` and ``stream-json`` say about a run, whatever its outcome.

    Args:
        output: ``text``, ``json`` or ``stream-json``.
    """

    def __init__(self, output: str) -> None:
        self.output = output
        self.stream = StreamJsonPrinter(sys.stdout) if output == "stream-json" else None
        self.thread_id: str | None = None
        self.diffs: list[dict[str, Any]] = []
        self.call_ids: list[str] = []  # the run's tool calls, in order
        self.usage = empty_usage()
        self.stopped: str | None = None

    def on_event(self, event: dict[str, Any]) -> None:
        """Note what the end-of-run object reports (before it is printed or streamed)."""
        typed = event_to_show(event)
        if isinstance(typed, Diff):
            self.diffs.append(event)  # as emitted: the object reports the event itself
        elif isinstance(typed, ToolCall):
            self.call_ids.append(typed.id)

    def note_failure_usage(self, agent: Agent) -> None:
        """The usage of the model replies the failed run stored (its tool-call replies;
        a reply cut off by the failure reported none). Best effort: the store may be
        what failed."""
        if self.thread_id is None:
            return
        usage = failed_run_usage(agent, self.thread_id, self.call_ids)
        if usage is not None:
            self.usage = usage

    def payload(self, answer: str | None, code: int, error: str | None) -> dict[str, Any]:
        """The ``--json`` object: the same keys for every outcome."""
        return {
            "thread_id": self.thread_id,
            "answer": answer,
            "usage": self.usage,
            "tool_calls": len(self.call_ids),
            "stopped": self.stopped,
            "exit_code": code,
            "diffs": self.diffs,
            "error": error,
        }

    def failed(self, exc: BaseException) -> None:
        """Print the failure on stdout (``--json``: the object; stream-json: ``error``),
        next to the one line ``main`` prints on stderr."""
        line = failure_line(exc)
        if line is None or self.output == "text":
            return
        message, code = line
        with suppress(OSError):  # stdout closed: the stderr line still says it
            if self.stream is not None:
                self.stream.error(message, code)
            else:
                data = json.dumps(self.payload(None, code, message), ensure_ascii=False)
                sys.stdout.write(data + "\n")
                sys.stdout.flush()


def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    """Run the agent on ``args.prompt`` and print the answer (or JSON, see --output-format).

    With ``--json`` every outcome prints one object on stdout, with stream-json every
    outcome ends with ``result`` or ``error``; errors in the command line itself
    (argparse's and :func:`check_arguments`') are on stderr only.
    """
    report = RunReport(args.output_format or "text")
    check_arguments(args)
    try:
        return _run(args, settings, report)
    except BaseException as exc:
        report.failed(exc)
        if turn_still_running():
            _exit_now(exc)
        raise


def _exit_now(exc: BaseException) -> None:
    """End the process now, with the line and status ``main`` would give for ``exc``.

    A cancelled turn whose model has not answered yet keeps a LangGraph pool thread in
    a blocking read, and the interpreter joins pool threads at exit: the process would
    wait for the model (minutes). Everything is recorded and closed by now (the turn as
    interrupted, the store, MCP servers), so nothing is lost by not waiting.
    """
    line = failure_line(exc)
    if line is None:
        return
    message, code = line
    with suppress(OSError):
        sys.stdout.flush()
    with suppress(OSError):
        print(f"agentgraph: {message}", file=sys.stderr, flush=True)
    logging.shutdown()
    os._exit(code)


def check_arguments(args: argparse.Namespace) -> None:
    """The checks of the command line argparse cannot make (reads a ``-`` prompt).

    Raises:
        AgentGraphError: (exit 2) the prompt is empty or too large, an id is malformed,
            or several options choose the session.
    """
    args.prompt = read_prompt(args.prompt)
    if not args.prompt.strip():
        # Providers reject an empty user turn; say so before touching the session.
        raise AgentGraphError('the prompt is empty: agentgraph run "WHAT TO DO"', EXIT_USAGE)
    check_session_ids({"--thread": args.thread})
    check_reopen_options(args)


def _run(args: argparse.Namespace, settings: Settings, report: RunReport) -> int:
    output = report.output
    workspace = resolve_workspace(getattr(args, "workspace", None))
    err = make_console(stderr=True)
    # One task, no one to type a next message: its first request gets every MCP server
    # that answers within its start limit (servers connected meanwhile, in parallel).
    # The collector pauses for the chat model's import, tool schemas and the graph.
    with start_session(
        settings,
        workspace,
        process_environment(),
        building=collector_paused,
        wait_for_servers=True,
    ) as started:
        agent = started.agent
        for notice in [*started.mcp.new_problems(), *agent.notices(sandbox_notice=False)]:
            err.print(f"[yellow]{escape(notice)}[/]")
        from agentgraph.session.catalog import session_to_reopen

        reopened = session_to_reopen(
            started.store, resume=getattr(args, "resume", None), cont=args.cont, workspace=workspace
        )
        thread_id = reopened or thread_for_run(started.store, args.thread)
        report.thread_id = thread_id
        if getattr(args, "model", None) is None:  # --model beats the session's /model choice
            agent, settings = _session_model(agent, thread_id, err)
        if getattr(args, "permission_mode", None) is not None:  # beats the session's mode
            agent.set_permission_mode(thread_id, settings.permission_mode)
        printer = EventPrinter(out=err, err=err, stream_tokens=False)
        stream = report.stream

        def on_event(event: dict[str, Any]) -> None:
            report.on_event(event)
            (stream or printer)(event)

        if stream is not None:
            stream.write({"type": "start", "thread_id": thread_id, "model": settings.model})
        # --isolated: own workspace; @file mentions resolve in the launch dir and are copied.
        launch_dir = workspace if getattr(args, "isolated", False) else None
        if launch_dir is not None:
            workspace = isolated_workspace(settings.home, thread_id)
        # The REPL's way: the turn runs in a worker thread, so Ctrl-C (and the wall-clock
        # cap) cancel at once even while the model has not sent a byte yet.
        turn = partial(
            run_turn_interruptibly,
            agent,
            on_event,
            thread_id,
            args.prompt,
            workspace,
            attach_root=launch_dir,
            can_ask=False,  # nobody to ask: calls that need approval are declined
        )
        try:
            result = run_capped(settings, agent, turn)
            if result is None:
                raise AgentGraphError("the run ended without a result", EXIT_FAILURE)
        except RunTimedOut:
            printer.finish()
            report.stopped = STOP_TIMEOUT
            report.note_failure_usage(agent)
            message = (
                f"run stopped: AGENTGRAPH_RUN_TIMEOUT_S ({settings.run_timeout_s:g}s) reached; "
                f"the session is saved (continue with: agentgraph run --thread {thread_id} ...)"
            )
            raise AgentGraphError(message, EXIT_RUN_TIMEOUT) from None
        except BaseException:
            printer.finish()
            if turn_still_running():  # e.g. printing an event failed: stop the turn too
                agent.cancel()
                agent.record_interrupted()
            report.note_failure_usage(agent)
            raise
        printer.finish()
    code = run_exit_code(result.stop_reason)
    if stream is not None:
        return code
    if output == "json":
        report.usage = result_usage(result)
        report.stopped = result.stop_reason
        report.thread_id = result.thread_id
        payload = report.payload(result.answer, code, None)
        sys.stdout.write(json.dumps(payload, ensure_ascii=False) + "\n")
    else:
        # Plain write: rich would re-wrap the answer at the terminal width when piped.
        sys.stdout.write(result.answer + "\n")
        err.print(f"[dim]thread: {result.thread_id}[/]")
    if code != 0:
        why = stop_explanation(settings, str(result.stop_reason))
        err.print(
            f"agentgraph: stopped {why}; the answer may be partial (continue with: "
            f"agentgraph run --thread {result.thread_id} ...)",
            markup=False,
        )
    return code
