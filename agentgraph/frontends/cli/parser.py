"""The ``agentgraph`` argument parser.

Kept apart from the commands so that ``agentgraph --help`` and argument errors need
only ``argparse``: the commands import LangGraph, the store and rich when they run.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from agentgraph.session.overrides import BudgetOverride, budget_override

OUTPUT_FORMATS = ("text", "json", "stream-json")
# agentgraph.config.PERMISSION_MODES, repeated: this module imports nothing heavy.
PERMISSION_MODES = ("plan", "ask", "accept-edits", "auto")
# The port ``agentgraph web`` listens on (loopback) unless --port says otherwise.
WEB_DEFAULT_PORT = 8765
DISTRIBUTION = "agentgraph"


class Version(argparse.Action):
    """``--version``: the installed package's version, looked up only when asked."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version(DISTRIBUTION)
        except PackageNotFoundError:  # run from a source tree that was never installed
            number = "unknown (not installed)"
        sys.stdout.write(f"{parser.prog} {number}\n")
        parser.exit()


def _whole_number(text: str) -> int:
    """``--max-turns``, ``--budget``: a whole number (its range is the setting's, checked
    with it)."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None


def _budget(text: str) -> BudgetOverride:
    """``--budget``: tokens or dollars (see :func:`agentgraph.runtime.spend.parse_budget`)."""
    try:
        return budget_override(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _setting_flags() -> argparse.ArgumentParser:
    """``--model``/``-m`` and ``--max-turns``: settings for this invocation, before or after
    ``run`` (SUPPRESS keeps the value given before it)."""
    flags = argparse.ArgumentParser(add_help=False)
    flags.add_argument(
        "--model",
        "-m",
        metavar="NAME",
        default=argparse.SUPPRESS,
        help="the model for this invocation (beats AGENTGRAPH_MODEL and the config files)",
    )
    flags.add_argument(
        "--max-turns",
        dest="max_turns",
        metavar="N",
        type=_whole_number,
        default=argparse.SUPPRESS,
        help="at most N model calls per request (MAX_LOOPS) for this invocation",
    )
    flags.add_argument(
        "--permission-mode",
        dest="permission_mode",
        choices=PERMISSION_MODES,
        default=argparse.SUPPRESS,
        help="what may run without asking: plan (read-only until you accept a plan), ask, "
        "accept-edits or auto (AGENTGRAPH_PERMISSION_MODE; beats a resumed session's mode)",
    )
    return flags


class OutputFormat(argparse.Action):
    """``--json`` and ``--output-format`` choose one output: given both, they must agree.

    ``--json --output-format stream-json`` is a usage error (argparse's, exit 2), never a
    silent choice of one of them; ``--json --output-format json`` is accepted.
    """

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        chosen = self.const if self.nargs == 0 else values
        previous = getattr(namespace, self.dest, None)
        if previous is not None and previous != chosen:
            raise argparse.ArgumentError(
                self,
                f"{chosen} conflicts with {previous} chosen before it (--json and "
                "--output-format choose the same thing: give one)",
            )
        setattr(namespace, self.dest, chosen)


def build_parser() -> argparse.ArgumentParser:
    """The ``agentgraph`` argument parser (imports nothing heavy: ``--help`` is instant)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--workspace", "-w", default=argparse.SUPPRESS, help="workspace directory (default: cwd)"
    )
    common.add_argument(
        "--isolated",
        action="store_true",
        default=argparse.SUPPRESS,
        help="give the session its own workspace under AGENTGRAPH_HOME/workspaces/<id> "
        "(@file mentions are copied into its uploads/)",
    )
    setting_flags = _setting_flags()
    parser = argparse.ArgumentParser(
        prog="agentgraph",
        description="A LangGraph coding agent that manages its own context.",
        parents=[common, setting_flags],
    )
    parser.add_argument("--version", action=Version, help="print the version and exit")
    resume = parser.add_mutually_exclusive_group()
    resume.add_argument(
        "--resume",
        "-r",
        metavar="ID",
        nargs="?",
        const="",
        help="reopen a session (id or prefix); without ID, pick one from a list",
    )
    resume.add_argument(
        "--continue",
        "-c",
        dest="cont",
        action="store_true",
        help="reopen the most recent session of this workspace",
    )
    sub = parser.add_subparsers(dest="command")

    run = sub.add_parser(
        "run", parents=[common, setting_flags], help="run one task non-interactively"
    )
    run.add_argument("prompt", help="the task ('-' reads it from stdin)")
    run.add_argument("--thread", "-t", metavar="ID", help="continue (or create) this thread id")
    run.add_argument(
        "--budget",
        metavar="TOKENS|$USD",
        type=_budget,
        default=None,
        help="stop once the model calls of this request used this many prompt + completion "
        "tokens, or this many estimated dollars ($0.50, 0.50$, USD0.5) "
        "(AGENTGRAPH_TURN_BUDGET_TOKENS / _USD; 0: no budget)",
    )
    # Also accepted before `run`, like the REPL's; SUPPRESS keeps that value.
    reopen = run.add_mutually_exclusive_group()
    reopen.add_argument(
        "--resume", "-r", metavar="ID", default=argparse.SUPPRESS, help="continue this session"
    )
    reopen.add_argument(
        "--continue",
        "-c",
        dest="cont",
        action="store_true",
        default=argparse.SUPPRESS,
        help="continue the most recent session of this workspace",
    )
    run.add_argument(
        "--json",
        action=OutputFormat,
        nargs=0,
        const="json",
        dest="output_format",
        help="print one JSON object on stdout (same as --output-format json)",
    )
    run.add_argument(
        "--output-format",
        action=OutputFormat,
        choices=OUTPUT_FORMATS,
        default=None,  # text; None tells "not given" from an explicit text
        help="text (default), json (same as --json) or stream-json: one JSON event per "
        "line as it happens (docs/events.md)",
    )

    web = sub.add_parser(
        "web",
        parents=[common, setting_flags],
        help="serve a local web page to run sessions in (its address, with an access "
        "token, is the first line printed)",
    )
    web.add_argument(
        "--port",
        type=_whole_number,
        default=WEB_DEFAULT_PORT,
        help=f"port on 127.0.0.1 (default {WEB_DEFAULT_PORT}; 0: any free port)",
    )

    sub.add_parser(
        "trust",
        parents=[common],
        help="allow this folder's .env and .agentgraph/config.toml (as they are now) to set "
        "every setting, as if you had",
    )
    sub.add_parser(
        "config",
        parents=[common],
        help="print every setting, its value (secrets hidden) and where it came from",
    )

    sessions = sub.add_parser("sessions", parents=[common], help="list and manage sessions")
    ssub = sessions.add_subparsers(dest="sessions_command", required=True)
    ls = ssub.add_parser("list", parents=[common], help="list sessions")
    ls.add_argument("--json", action="store_true")
    ls.add_argument("--all", action="store_true", help="all workspaces, with subagent sessions")
    show = ssub.add_parser("show", parents=[common], help="show one session")
    show.add_argument("id")
    show.add_argument("--json", action="store_true")
    add_session_commands(ssub, common)
    return parser


def add_session_commands(ssub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``delete``, ``export``, ``import``, ``clean`` and ``prune`` to ``sessions``."""
    delete = ssub.add_parser("delete", parents=[common], help="delete a session and its files")
    delete.add_argument("id")
    delete.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    export = ssub.add_parser("export", parents=[common], help="export a session transcript")
    export.add_argument("id")
    export.add_argument("--format", choices=("jsonl", "md"), default="jsonl")
    export.add_argument("-o", "--output", metavar="FILE", help="write here (default: stdout)")
    imp = ssub.add_parser("import", parents=[common], help="import a JSONL transcript")
    imp.add_argument("file")
    clean = ssub.add_parser("clean", parents=[common], help="delete sessions not used lately")
    clean.add_argument(
        "--older-than",
        metavar="AGE",
        help="age: days (30d), hours (12h) or minutes (90m) (default: "
        "AGENTGRAPH_CLEANUP_DAYS, else 30d)",
    )
    clean.add_argument("--dry-run", action="store_true", help="only list what would go")
    ssub.add_parser(
        "prune", parents=[common], help="drop old checkpoints (keeps resumable state) and VACUUM"
    )
    compact = ssub.add_parser(
        "compact", parents=[common], help="summarize a session's older history now"
    )
    compact.add_argument("id")
    compact.add_argument("--focus", help="what the summary should keep above all")
