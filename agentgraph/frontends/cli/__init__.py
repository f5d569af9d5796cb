"""Command-line entry point: ``agentgraph``."""

from __future__ import annotations

import argparse
import gc
import sqlite3
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from agentgraph.errors import EXIT_FAILURE, AgentGraphError
from agentgraph.frontends.cli.parser import build_parser
from agentgraph.session.failures import failure_line

if TYPE_CHECKING:
    from agentgraph.config import Settings


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while start-up builds long-lived objects.

    Importing LangGraph, LangChain and the OpenAI client, building the tools' pydantic
    schemas and the chat model allocate hundreds of thousands of objects that live as
    long as the process; the collector would traverse them again and again while they
    are created (a large part of the start-up CPU). They are frozen afterwards so later
    collections skip them too. Nests: only the outermost pause turns the collector back on.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


def _command(name: str | None) -> Callable[[argparse.Namespace, Settings], int]:
    """Import the command's module (the bulk of start-up) with the collector paused."""
    with collector_paused():
        if name == "sessions":
            from agentgraph.frontends.cli.sessions import cmd_sessions

            return cmd_sessions
        if name == "trust":
            from agentgraph.frontends.cli.trust import cmd_trust

            return cmd_trust
        if name == "config":
            from agentgraph.frontends.cli.config_cmd import cmd_config

            return cmd_config
        from agentgraph.frontends.cli.deferred_inits import defer_package_inits

        defer_package_inits()  # the agent's imports skip what these packages' __init__ adds
        if name == "run":
            from agentgraph.frontends.cli.run import cmd_run

            return cmd_run
        if name == "web":
            from agentgraph.frontends.cli.web import cmd_web

            return cmd_web
        from agentgraph.frontends.cli.repl import cmd_repl

        return cmd_repl


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return the process exit status."""
    args = build_parser().parse_args(argv)
    from agentgraph.session.startup import harden_process

    harden_process()  # commands the agent runs cannot read its environment or memory
    debug = False
    try:
        with collector_paused():
            from agentgraph.frontends.cli.common import (
                flag_settings,
                load_settings,
                report_ignored_settings,
                report_project_problems,
            )

            problems: list[str] = []
            settings = load_settings(flags=flag_settings(args), problems=problems)
            debug = settings.debug
            report_project_problems(problems)
            if args.command != "trust":
                report_ignored_settings(settings)
            from agentgraph.session.startup import route_logs

            route_logs(settings.home, debug=debug)
            command = _command(args.command)
        return command(args, settings)
    except Exception as exc:  # one line, never a traceback by default
        if debug and not isinstance(exc, AgentGraphError | sqlite3.Error):
            traceback.print_exc()
        return _report(exc)
    except KeyboardInterrupt as exc:
        return _report(exc)


def _report(exc: BaseException) -> int:
    """Print the one line for ``exc`` on stderr; its exit status."""
    message, code = failure_line(exc) or (str(exc), EXIT_FAILURE)
    print(f"agentgraph: {message}", file=sys.stderr)
    return code
