"""``agentgraph run PROMPT``: one task, non-interactively."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rich.console import Console
from rich.markup import escape

from agentgraph.agent import Agent, new_thread_id
from agentgraph.cancel import EXIT_CANCELLED
from agentgraph.cli import collector_paused
from agentgraph.cli.common import process_environment, resolve_workspace, start_mcp
from agentgraph.cli.render import EventPrinter
from agentgraph.cli.stream_json import StreamJsonPrinter
from agentgraph.config import Settings
from agentgraph.context.pricing import usage_json
from agentgraph.errors import (
    EXIT_RUN_TIMEOUT,
    EXIT_STEP_LIMIT,
    EXIT_USAGE,
    AgentGraphError,
    AmbiguousSession,
    SessionNotFound,
)
from agentgraph.mcp import MCP_WAIT_SLACK_S
from agentgraph.model import check_model_config
from agentgraph.nodes.finalize import STOP_STEP_LIMIT
from agentgraph.persistence import Store, open_store
from agentgraph.persistence.index import resolve_session
from agentgraph.run_limits import RunTimedOut, wall_clock_cap
from agentgraph.thread_ids import check_thread_id
from agentgraph.tools.bash import kill_orphaned_commands
from agentgraph.workspaces import isolated_workspace

STOP_TIMEOUT = "timeout"
"""``stopped`` in ``--json`` when AGENTGRAPH_RUN_TIMEOUT_S ended the run."""


def thread_for_run(store: Store, requested: str | None) -> str:
    """``--thread``: an exact id, else a unique prefix of one, else a new thread by that id.

    Raises:
        SessionNotFound: the value is a prefix of several sessions.
    """
    if not requested:
        return new_thread_id()
    if store.index.get(requested) is not None:
        return requested
    try:
        return resolve_session(store.index, requested).thread_id
    except AmbiguousSession:
        raise
    except SessionNotFound:
        return requested


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
    if resume is not None:
        check_thread_id(resume, "--resume")


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


def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    """Run the agent on ``args.prompt`` and print the answer (or JSON, see --output-format)."""
    args.prompt = read_prompt(args.prompt)
    output = "json" if args.json else args.output_format
    if not args.prompt.strip():
        # Providers reject an empty user turn; say so before touching the session.
        raise AgentGraphError('the prompt is empty: agentgraph run "WHAT TO DO"', EXIT_USAGE)
    if args.thread is not None:
        check_thread_id(args.thread, "--thread")
    check_reopen_options(args)
    workspace = resolve_workspace(getattr(args, "workspace", None))
    check_model_config(settings)
    err = Console(stderr=True, highlight=False)
    with open_store(settings) as store, start_mcp(settings, workspace) as mcp:
        kill_orphaned_commands()  # left by an agentgraph that was killed mid-command
        with collector_paused():  # the chat model's import, tool schemas, the graph
            agent = Agent(settings, store, base_env=process_environment(), mcp=mcp)
        # One task, no one to type a next message: its first request gets every server
        # that answers within its start limit (servers connected meanwhile, in parallel).
        mcp.wait(settings.mcp_start_timeout_s + MCP_WAIT_SLACK_S)
        for notice in [*mcp.new_problems(), *agent.notices()]:
            err.print(f"[yellow]{escape(notice)}[/]")
        from agentgraph.cli.reopen import session_to_reopen

        reopened = session_to_reopen(
            store, resume=getattr(args, "resume", None), cont=args.cont, workspace=workspace
        )
        thread_id = reopened or thread_for_run(store, args.thread)
        agent, settings = _session_model(agent, thread_id, err)
        printer = EventPrinter(out=err, err=err, stream_tokens=False)
        stream = StreamJsonPrinter(sys.stdout) if output == "stream-json" else None
        diffs: list[dict[str, Any]] = []

        def on_event(event: dict[str, Any]) -> None:
            if event.get("type") == "diff":
                diffs.append(event)
            (stream or printer)(event)

        if stream is not None:
            stream.write({"type": "start", "thread_id": thread_id, "model": settings.model})
        # --isolated: own workspace; @file mentions resolve in the launch dir and are copied.
        launch_dir = workspace if getattr(args, "isolated", False) else None
        if launch_dir is not None:
            workspace = isolated_workspace(settings.home, thread_id)
        try:
            with wall_clock_cap(settings.run_timeout_s, agent.cancel):
                result = agent.run_turn(
                    thread_id, args.prompt, workspace, on_event=on_event, attach_root=launch_dir
                )
        except RunTimedOut:
            printer.finish()
            message = (
                f"run stopped: AGENTGRAPH_RUN_TIMEOUT_S ({settings.run_timeout_s:g}s) reached; "
                f"the session is saved (continue with: agentgraph run --thread {thread_id} ...)"
            )
            if stream is not None:
                stream.error(message, EXIT_RUN_TIMEOUT)
            elif output == "json":
                stopped: dict[str, Any] = {"thread_id": thread_id, "answer": None}
                stopped.update(stopped=STOP_TIMEOUT, exit_code=EXIT_RUN_TIMEOUT)
                sys.stdout.write(json.dumps(stopped) + "\n")
            raise AgentGraphError(message, EXIT_RUN_TIMEOUT) from None
        except AgentGraphError as exc:
            if stream is not None:
                stream.error(str(exc), exc.exit_code)
            raise
        except KeyboardInterrupt:
            if stream is not None:
                stream.error("interrupted", EXIT_CANCELLED)
            raise
        printer.finish()
    code = EXIT_STEP_LIMIT if result.stop_reason == STOP_STEP_LIMIT else 0
    if stream is not None:
        return code
    if output == "json":
        payload: dict[str, Any] = {
            "thread_id": result.thread_id,
            "answer": result.answer,
            "usage": usage_json(
                result.input_tokens,
                result.output_tokens,
                result.cached_input_tokens,
                result.cost_usd,
            ),
            "tool_calls": result.tool_calls,
            "stopped": result.stop_reason,
            "exit_code": code,
            "diffs": diffs,
        }
        sys.stdout.write(json.dumps(payload, ensure_ascii=False) + "\n")
    else:
        # Plain write: rich would re-wrap the answer at the terminal width when piped.
        sys.stdout.write(result.answer + "\n")
        err.print(f"[dim]thread: {result.thread_id}[/]")
    if code == EXIT_STEP_LIMIT:
        err.print(
            f"agentgraph: stopped at the step limit (MAX_LOOPS={settings.max_loops}); the "
            f"answer may be partial (continue with: agentgraph run --thread {result.thread_id} "
            "...)",
            markup=False,
        )
    return code
