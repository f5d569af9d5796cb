"""Context engine v3: a context-management benchmark the scripted model cannot fool.

Run: uv run python bench/bench_context_v3.py [--quick] [--out FILE] [--json]
     [--workload W]… [--harness H]… [--persona P]… [--summarizer S]…
(the filters are repeatable; --quick: fewer files and cells, a few minutes on 2 cores).

The scripted model of bench_context_v2 (tests/scenarios/long_task.py) counts its own
steps, so it reads the next file whatever the agent showed it: lost context never shows.
Here the model is stateless (tests/scenarios/stateless.py): every reply is a function of
the request alone. It reads the first file of the turn's range the prompt does not show
as read (reading on in a file whose page note says it continues), writes report.md with
the codes it sees, and answers the question turn with the codes it sees. A harness that
hides what was read makes it read again; one that hides codes makes it forget them; a
summary that is cut or lossy loses both. Personas: ``silent`` (tool calls only),
``note_taker`` (a one-line note of each code found, in its own messages) and
``re_reader`` (re-reads a file it knows it read but whose code it cannot see: spirals
show). Summarizers: ``faithful``, ``lossy`` (every other code and file), ``verbose``
(~120 tokens of filler per file unless told ``at most N tokens``) and ``terse`` (the
task only).

Workloads, each at a 16k window (``--window`` for another) on the strict loopback server
(real HTTP, ChatOpenAI), which stops a text reply where a real server stops generating:
at the request's ``max_tokens`` and at the room the window leaves after the prompt
(``finish_reason`` ``length``):

* ``many-small``: 300 files of ~3 KB (--quick: 100), one turn; facts = codes in the
  last report.md the model wrote.
* ``small-middle``: the same with 100 files (--quick: 50) whose code is on the middle
  line: a summarizer input that cuts results keeps their head and tail and loses it.
* ``parallel``: the same 100 files (--quick: 50), read eight per reply (the calls of one
  reply run together, as models that call tools in parallel ask), then the question
  turn: a batch's results arrive together and push the prompt past the compaction point
  before the model has seen them (silent and re-reading models, faithful and lossy
  summarizers).
* ``big-start`` / ``big-middle``: 30 files of ~20 KB (more than a read page), the code
  on the first or the middle line, then the question turn "Which codes do you
  remember? List them."; facts = codes in that answer.
* ``multi-turn+restart``: 60 small files over 3 turns of 20, the harness restarted
  (new store / new agent object on the same checkpointer) before turn 3, then the
  question turn.
* ``edit-small``: 100 small files (--quick: 50), each with a line ``STATUS part_017:
  open`` the task asks to edit to ``done`` before the file's code is noted: the model
  reads a file, edits it where it sees the open line, and goes on to the first file it
  sees no evidence of an edit of (an edit call, a ``done`` line, a summary's or a
  ledger's line naming it as edited); a harness that loses which files it changed makes
  it read them again (files read twice) or edit them twice. The LangChain peers get an
  ``edit_file`` tool on this workload only (their prompts elsewhere stay as they were);
  deepagents and agentgraph have their own.
* ``edit-lag``: the same files and task, each file marked ``started`` first and ``done``
  only once the next file is started (its read, its start, the next file's read and
  start, then its second edit): one file always waits for its second edit, as a module
  a model edits, tests and edits again does. A file shows as started by its
  ``started`` line, a summary's ``Marked started`` or a ledger line naming it edited
  once, and as done by ``done``, ``Marked done`` or ``edited ×2``; the model reads a
  file again when the line it must change is not in view. A compaction that drops the
  waiting file's started line makes it read that file twice.

The editing workloads run when named (``--workload edit-small``): the tables without
``--workload`` are the six read workloads above.

``--files N`` (repeatable) runs each single-turn workload with N files instead, its rows
named ``WORKLOAD, N files``: a task's totals move with where its last compaction falls
against its end, so a comparison made at one size is checked at several.

``--shell`` makes the model read through ``run_bash`` (``cat F``; ``tail -n +K F`` to
read on), as models trained on a shell do, its rows named ``WORKLOAD (shell)``;
``--shell nl`` in numbered pages (``nl -ba F | sed -n '1,200p'``), as Codex's models
read, its rows named ``WORKLOAD (shell, nl)``; ``--shell grep`` through a command that
prints a file but is no plain read (``grep -v '^#' F``), its rows ``WORKLOAD (shell,
grep)``; ``--shell multi`` several whole files in one command (``cat A B C D``: the
reads of one reply, at least four), as a model skimming a folder does, its rows
``WORKLOAD (shell, multi)``; ``--shell sed`` reads with ``cat`` and changes lines through
the shell too (``sed -i 's/…: open/…: done/' F``, the editing workloads), its rows
``WORKLOAD (shell, sed)``; ``--shell perl`` the same with ``perl -pi -e`` (a change no
reading of the command line follows, as a script's), its rows ``WORKLOAD (shell,
perl)``; ``--shell heredoc`` reads with ``cat`` and changes a file by
writing it whole through a here-document (``cat > F <<'EOF'`` … ``EOF``, the file as last
seen with its line changed), its rows ``WORKLOAD (shell, heredoc)``; ``--shell cd`` as
``sed`` from the file's folder (``cd logs && cat F``, ``cd logs && sed -i … F``), as models
that change directory first do, its rows ``WORKLOAD (shell, cd)``. Small-file workloads
only, but with ``cat`` and ``nl``: agentgraph cuts ``cat F``, ``tail -n +K F`` and a
numbered page of a file over a read page as that page, with read_file's note, and the
model reads on from the offset it names (``--shell --workload big-middle``, ``--shell nl
--workload big-middle``); the other styles page no file. The peers get a
``run_bash`` answering those commands as agentgraph's prints them, whole (deepagents' own
tools have no shell without a sandbox backend).

``--persona searcher`` (run only when named) adds the model that asks the history search
(``search_history``) for a code it knows it read but cannot see before reading the file
again, as agentgraph's system prompt tells a model to; against a harness without such a
search it is the re-reader. ``--json`` rows count its searches (``history_searches``).

Harnesses: ``agentgraph`` (the real Agent graph, its defaults, or the settings
``--agentgraph-setting AGENTGRAPH_NAME=VALUE`` gives it; the peers keep its default
points; where its shell sandbox cannot start, commands run unsandboxed,
``AGENTGRAPH_SANDBOX=off``, said on stderr and in the report's command); ``deepagents``
(``create_deep_agent``, ``FilesystemBackend(virtual_mode=True)``); ``lc-summary``
(``create_agent`` + ``SummarizationMiddleware`` triggered at agentgraph's compaction
point, in tokens, as in bench_context_v2, and the default ``trim_tokens_to_summarize``); ``lc-summary-untrimmed``
(the same with ``trim_tokens_to_summarize=None``); ``lc-edit+summary``
(``ContextEditingMiddleware(ClearToolUsesEdit)`` + the untrimmed summary, as v2);
``lc-edit+summary (same tools)`` (the same with agentgraph's system prompt and tool
schemas, bench_context_v2.same_tools: about 2,300 tokens where the others send about 200,
so only context management differs). Peers keep their thread in a LangGraph ``InMemorySaver``. Every turn may make at most
``min(3 × files of the turn + 20, 500)`` model calls (4 × with a lag; agentgraph: ``MAX_LOOPS``; peers:
the bench stops the turn after its tool step once the cap is passed), so only a real
spiral reaches it.

Columns: finished (every turn ended with an answer, else the first reason why not),
model calls (all requests), summary calls, summarizer tokens (server estimate of the
summary requests' prompts), prompt tokens (server estimate, non-summary requests), billed (cached prefix at 10%, bench_context_v2.billed_input), facts recalled /
planted, files read twice (files with more than one read call at the same offset, from
the scripted model's own calls: agentgraph's re-injected files are not counted), invalid
requests (strict rejections), overflow 400s, agentgraph's masking events and
compactions, cut summaries (distinct summaries reaching the main prompt with a
truncation marker) and wall seconds; a table with an editing workload adds files marked
done at the end / planted (a file counts only if that line is all that changed: one
rewritten whole from a text missing some of its lines is damaged, not done) and files
edited twice (an edit call made twice, the same replacement text), after files read twice.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import itertools
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langchain.agents import create_agent
from langchain.agents.middleware import (
    ClearToolUsesEdit,
    ContextEditingMiddleware,
    SummarizationMiddleware,
)
from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphRecursionError
from pydantic import ValidationError

from agentgraph.capabilities.tools.bash import sandbox_plan_for
from agentgraph.config import MAX_LOOPS_MAX, Settings
from agentgraph.persistence import open_store
from agentgraph.session.agent import Agent
from bench.bench_context_v2 import (
    API_KEY,
    ENV_PREFIXES,
    LC_CLEAR_KEEP_RESULTS,
    MODEL,
    PEER_SYSTEM_PROMPT,
    SAME_TOOLS,
    Prefix,
    agentgraph_prefix,
    agentgraph_triggers,
    billed_input,
    in_workspace,
    peer_model,
    same_tools,
    summary_middleware,
    workspace_tools,
)
from tests.fakes.openai_server import FakeOpenAIServer
from tests.scenarios.stateless import (
    EXTRA_PERSONAS,
    NO_TASK_ANSWER,
    PERSONAS,
    QUESTION,
    SHELL_EDIT_RE,
    SHELL_HEREDOC_RE,
    SHELL_STYLES,
    SHELL_TOOL,
    SUMMARIZERS,
    FactAt,
    PersonaKind,
    Recorder,
    ScriptedModel,
    ShellStyle,
    Size,
    Summarizer,
    SummarizerKind,
    codes_in,
    cut_summaries,
    is_summary,
    make_workspace,
    marked_done,
    persona_for,
    planted_codes,
    shell_path,
    shell_reads,
    task_text,
)

# The last one runs lc-edit+summary with agentgraph's system prompt and tool schemas
# (bench_context_v2.same_tools): the others' prompts and two tools are about 200 tokens
# where agentgraph's are about 2,300, which at a 16k window is most of the difference in
# prompt tokens; with the same prefix only context management differs.
HARNESSES = (
    "agentgraph",
    "deepagents",
    "lc-summary",
    "lc-summary-untrimmed",
    "lc-edit+summary",
    "lc-edit+summary" + SAME_TOOLS,
)
WINDOW = 16_000
THREAD = "bench"
# The loop cap of a turn: three calls a file (a read, a page, a re-read) and some slack.
CALLS_PER_FILE = 3
# A task with a lag edits each file twice: one call a file more.
LAG_CALLS_PER_FILE = CALLS_PER_FILE + 1
# Files a several-file shell read (``--shell multi``) asks for in one ``cat`` at least:
# about 3k tokens of small files, a fifth of a 16k window.
MULTI_SHELL_BATCH = 4
# The shell styles a model pages a file in (``tail -n +K F``, ``nl -ba F | sed -n
# 'K,Lp'``): the only ones that read files over a page.
PAGING_SHELL_STYLES = ("cat", "nl")
# Reads per reply on the ``parallel`` workload: a batch of small files is about a third
# of a 16k window, so a batch's arrival is what crosses the compaction point.
PARALLEL_BATCH = 8
CALL_SLACK = 20
# LangGraph super-steps a peer may take per model call (model, tools, middleware hooks):
# a safety net only, the bench's own call cap ends a turn first.
PEER_STEPS_PER_CALL = 10
# LangChain's own default trim of the summarizer's input (4,000 tokens).
LC_DEFAULT_TRIM = (
    inspect.signature(SummarizationMiddleware).parameters["trim_tokens_to_summarize"].default
)


@dataclass(frozen=True)
class Workload:
    """Files, their size and code position, and the turns over them.

    Attributes:
        turns: File ranges, one task turn each.
        restart_before: Index of the task turn before which the harness restarts.
        question: Whether a question turn ("which codes do you remember?") follows.
        batch: Reads the model asks for in one reply.
        edits: Whether each task also asks to mark every file done (an edit a file).
        lag: With ``edits``, whether each file is marked started first and done once
            the next is started (two edits a file, one file always waiting).
        shell: How the model reads through ``run_bash``, as models trained on a shell
            do: ``cat`` (``cat F``; ``tail -n +K F`` to read on) or ``nl`` (``nl -ba F |
            sed -n 'K,Lp'``, numbered pages, as Codex's models do); None: with read_file.
    """

    name: str
    files: int
    size: Size
    fact_at: FactAt
    turns: tuple[tuple[int, int], ...]
    restart_before: int | None = None
    question: bool = False
    window: int = WINDOW
    batch: int = 1
    edits: bool = False
    lag: bool = False
    shell: ShellStyle | None = None

    def texts(self) -> list[str]:
        """The user message of every turn, in order."""
        tasks = [task_text(a, b, self.edits, self.lag) for a, b in self.turns]
        return tasks + ([QUESTION] if self.question else [])

    def cap(self) -> int:
        """Model calls one turn may make."""
        widest = max(b - a + 1 for a, b in self.turns)
        per_file = LAG_CALLS_PER_FILE if self.lag else CALLS_PER_FILE
        return min(per_file * widest + CALL_SLACK, MAX_LOOPS_MAX)


def workloads(quick: bool) -> tuple[Workload, ...]:
    """The eight workloads (smaller with ``quick``)."""
    small, middle, big, per_turn = (100, 50, 20, 10) if quick else (300, 100, 30, 20)
    return (
        Workload("many-small", small, "small", "start", ((1, small),)),
        Workload(
            "parallel",
            middle,
            "small",
            "middle",
            ((1, middle),),
            question=True,
            batch=PARALLEL_BATCH,
        ),
        Workload("small-middle", middle, "small", "middle", ((1, middle),)),
        Workload("big-start", big, "big", "start", ((1, big),), question=True),
        Workload("big-middle", big, "big", "middle", ((1, big),), question=True),
        Workload(
            "multi-turn+restart",
            3 * per_turn,
            "small",
            "start",
            tuple((k * per_turn + 1, (k + 1) * per_turn) for k in range(3)),
            restart_before=2,
            question=True,
        ),
        Workload("edit-small", middle, "small", "start", ((1, middle),), edits=True),
        Workload("edit-lag", middle, "small", "start", ((1, middle),), edits=True, lag=True),
    )


@dataclass(frozen=True)
class Cell:
    """One run: a workload, a persona, a summarizer, a harness."""

    load: Workload
    persona: PersonaKind
    summarizer: SummarizerKind
    harness: str
    # agentgraph's settings overridden for this run only (``--agentgraph-setting``); the
    # peers keep agentgraph's default points.
    overrides: tuple[tuple[str, str], ...] = ()


def matrix(
    quick: bool,
    everywhere: Sequence[SummarizerKind] = (),
    extra: Sequence[PersonaKind] = (),
) -> list[Cell]:
    """Every workload × harness × persona with the faithful summarizer, plus on
    ``big-start`` the other summarizers × ``silent``/``re_reader`` (--quick: every
    persona on ``many-small``, ``silent``/``re_reader`` and only ``lossy`` besides
    ``faithful`` on ``big-start``, ``silent`` on the others), plus ``everywhere``'s
    summarizers × ``silent``/``re_reader`` on every workload that lacks them, plus the
    ``extra`` personas (:data:`EXTRA_PERSONAS`) wherever ``re_reader`` runs."""
    out: list[Cell] = []
    others: tuple[SummarizerKind, ...] = ("lossy",) if quick else ("lossy", "verbose", "terse")
    for load in workloads(quick):
        personas: tuple[PersonaKind, ...] = PERSONAS
        if quick and load.name != "many-small":
            personas = ("silent", "re_reader") if load.name == "big-start" else ("silent",)
        combos: list[tuple[PersonaKind, SummarizerKind]] = [(p, "faithful") for p in personas]
        if load.name == "big-start":
            combos += [(p, s) for s in others for p in ("silent", "re_reader")]
        if load.name == "parallel" or load.edits:
            # A note per batch is one note for eight results (and editing is measured on
            # the models that note nothing): silent and re-reading models only, with
            # the summarizer that drops half of what it sees too.
            combos = [(p, s) for s in ("faithful", "lossy") for p in ("silent", "re_reader")]
        combos += [
            (p, s)
            for s in everywhere
            for p in ("silent", "re_reader")
            if (p, s) not in combos and p in personas
        ]
        combos += [(p, s) for r, s in list(combos) if r == "re_reader" for p in extra]
        out += [Cell(load, p, s, h) for p, s in combos for h in HARNESSES]
    return out


def quiet_disconnects() -> None:
    """Drop the loopback server's traceback for a client that closed its connection.

    httpx closes keep-alive connections when an agent's client goes away; the server's
    handler thread then prints a ConnectionResetError traceback into stderr, which is
    this bench's progress log. Any other error still prints.
    """
    from tests.fakes import openai_server

    base = openai_server._HTTPServer.handle_error

    def handle_error(self: Any, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            base(self, request, client_address)

    openai_server._HTTPServer.handle_error = handle_error  # type: ignore[method-assign]


# --- harness sessions ---------------------------------------------------------------------


class AgentgraphSession:
    """The real agentgraph graph on one thread; a restart reopens store and Agent."""

    def __init__(
        self,
        server: FakeOpenAIServer,
        ws: Path,
        home: Path,
        cap: int,
        overrides: Mapping[str, str] | None = None,
    ) -> None:
        self.ws = ws
        self.events: list[dict[str, Any]] = []
        self.settings = Settings(  # type: ignore[call-arg]
            _env_file=None,
            **{
                "AGENTGRAPH_HOME": str(home),
                "OPENAI_BASE_URL": server.url,
                "OPENAI_API_KEY": API_KEY,
                "AGENTGRAPH_MODEL": MODEL,
                "AGENTGRAPH_CONTEXT_WINDOW": str(server.window),
                "AGENTGRAPH_PROVIDER_MAX_RETRIES": "0",
                "MAX_LOOPS": str(cap),
                **(overrides or {}),
            },
        )
        self.stack = contextlib.ExitStack()
        self.restart()

    def restart(self) -> None:
        """Close the store (if open) and open a new one and a new Agent on the same home."""
        self.stack.close()
        store = self.stack.enter_context(open_store(self.settings))
        # The process's environment, as the command line passes it (the bench cleared
        # agentgraph's and the providers' variables): the shell sandbox is found on its PATH.
        self.agent = Agent(self.settings, store, base_env=dict(os.environ), sleep=lambda _s: None)

    def turn(self, text: str) -> str:
        """Run one turn; return why it did not end with an answer ("" when it did)."""
        try:
            result = self.agent.run_turn(THREAD, text, self.ws, self.events.append)
        except Exception as exc:  # a failed turn is a measured outcome
            return f"{type(exc).__name__}: {str(exc)[:80]}"
        if result.stop_reason:
            return f"stopped: {result.stop_reason}"
        return "" if result.answer.strip() else "empty answer"

    def close(self) -> None:
        """Close the store."""
        self.stack.close()

    def counts(self) -> tuple[int, int]:
        """(masking events, compactions) over every turn."""
        kinds = [e.get("type") for e in self.events]
        return kinds.count("masking"), kinds.count("compaction")


_PREFIX: dict[str, Prefix] = {}


def shell_tool(ws: Path) -> BaseTool:
    """A ``run_bash`` for the peers that answers the shell-reading model's reads (``cat
    F``, ``tail -n +K F``, ``nl -ba F | sed -n 'K,Lp'``, ``grep -v '^#' F``: the files
    have no comment line; ``cat A B …``) as agentgraph's run_bash prints them: the lines (numbered as
    ``nl -ba`` numbers them), then ``[exit code 0]``; and its edits (``sed -i 's/A/B/'
    F`` or ``perl -pi -e 's/A/B/' F``, ``cat > F <<'EOF'`` … ``EOF``), answered
    ``[exit code 0]``.
    Anything else exits 2: the persona sends nothing else."""

    @tool(SHELL_TOOL)
    def run_bash(command: str) -> str:
        """Run a bash command in the workspace: stdout+stderr, then the exit code."""
        found = shell_reads(command)
        edit = SHELL_EDIT_RE.fullmatch(command.strip())
        written = SHELL_HEREDOC_RE.fullmatch(command.strip())
        if written is not None:  # ``cat > F <<'EOF'``: the document, whole
            try:
                target = in_workspace(ws, written["path"].lstrip("/"))
                target.write_text(written["body"], encoding="utf-8")
            except (OSError, ValueError) as exc:
                return f"{exc}\n[exit code 2]"
            return "[exit code 0]"
        if edit is not None:  # ``sed -i``/``perl -pi -e 's/OLD/NEW/' F``: first match a line
            try:
                target = in_workspace(ws, shell_path(edit).lstrip("/"))
                text = target.read_text(encoding="utf-8")
                lines = [
                    line.replace(edit["old"], edit["new"], 1) for line in text.splitlines(True)
                ]
                target.write_text("".join(lines), encoding="utf-8")
            except (OSError, ValueError) as exc:
                return f"{exc}\n[exit code 2]"
            return "[exit code 0]"
        shown = ""
        try:
            if not found:
                raise ValueError(f"not supported in this benchmark: {command}")
            for path, first, last, numbered in found:
                # deepagents' paths are rooted at the workspace (its virtual mode).
                target = in_workspace(ws, path.lstrip("/"))
                lines = target.read_text(encoding="utf-8").splitlines(keepends=True)
                picked = lines[first - 1 : last]
                if numbered:
                    picked = [f"{first + i:6d}\t{line}" for i, line in enumerate(picked)]
                shown += "".join(picked)
                if shown and not shown.endswith("\n"):
                    shown += "\n"
        except (OSError, ValueError) as exc:
            return f"{exc}\n[exit code 2]"
        return f"{shown}[exit code 0]"

    return run_bash


def build_peer(
    harness: str,
    server: FakeOpenAIServer,
    ws: Path,
    saver: InMemorySaver,
    edits: bool = False,
    shell: bool = False,
) -> Any:
    """A peer agent object on ``saver`` (a restart is a new one on the same saver);
    ``edits``: the LangChain peers get an edit tool too; ``shell``: every peer gets
    :func:`shell_tool`."""
    model = peer_model(server, server.window or WINDOW)
    extra = [shell_tool(ws)] if shell else []
    system, tools = PEER_SYSTEM_PROMPT, [*workspace_tools(ws, edits=edits), *extra]
    if harness.endswith(SAME_TOOLS):
        if "prefix" not in _PREFIX:  # agentgraph's, read once per process
            _PREFIX["prefix"] = agentgraph_prefix(ws.parent)
        prefix = _PREFIX["prefix"]
        system = prefix.system.replace(prefix.workspace, str(ws))
        tools = same_tools(ws, prefix, extra)
        harness = harness.removesuffix(SAME_TOOLS)
    if harness == "deepagents":
        from deepagents import create_deep_agent
        from deepagents.backends import FilesystemBackend

        backend = FilesystemBackend(root_dir=ws, virtual_mode=True)
        return create_deep_agent(
            model=model,
            tools=extra,
            system_prompt=PEER_SYSTEM_PROMPT,
            backend=backend,
            checkpointer=saver,
        )
    summary = summary_middleware(model)  # untrimmed: trim_tokens_to_summarize=None
    if harness == "lc-summary":
        summary.trim_tokens_to_summarize = LC_DEFAULT_TRIM
    middleware: list[Any] = [summary]
    if harness == "lc-edit+summary":
        trigger = agentgraph_triggers(server.window or WINDOW)[0]
        edit = ClearToolUsesEdit(trigger=trigger, keep=LC_CLEAR_KEEP_RESULTS)
        middleware.append(ContextEditingMiddleware(edits=[edit]))
    return create_agent(
        model, tools, system_prompt=system, middleware=middleware, checkpointer=saver
    )


class PeerSession:
    """A LangChain / deepagents peer on one checkpointed thread."""

    def __init__(
        self,
        harness: str,
        server: FakeOpenAIServer,
        ws: Path,
        cap: int,
        calls: Callable[[], int],
        edits: bool = False,
        shell: bool = False,
    ) -> None:
        self.saver = InMemorySaver()
        self.cap = cap
        self.calls = calls
        self.build = lambda: build_peer(harness, server, ws, self.saver, edits, shell)
        self.agent = self.build()

    def restart(self) -> None:
        """A new agent object on the same checkpointer."""
        self.agent = self.build()

    def turn(self, text: str) -> str:
        """Run one turn; return why it did not end with an answer ("" when it did)."""
        config: Any = {
            "configurable": {"thread_id": THREAD},
            "recursion_limit": self.cap * PEER_STEPS_PER_CALL + CALL_SLACK,
        }
        start = self.calls()
        try:
            for update in self.agent.stream(
                {"messages": [{"role": "user", "content": text}]}, config, stream_mode="updates"
            ):
                # Stop after a tool step (the history stays valid for the next turn).
                if self.calls() - start > self.cap and "tools" in (update or {}):
                    return "stopped: call cap"
        except GraphRecursionError:
            return "recursion limit"
        except Exception as exc:  # a provider error ends the turn: measured, not fatal
            return f"{type(exc).__name__}: {str(exc)[:80]}"
        messages = self.agent.get_state(config).values.get("messages") or []
        last = messages[-1] if messages else None
        done = isinstance(last, AIMessage) and not last.tool_calls and last.text.strip()
        return "" if done else "no answer"

    def close(self) -> None:
        """Nothing to close."""


# --- one cell ------------------------------------------------------------------------------


# Every path a run shows the model (its workspace, its home) is the same string but for
# fixed-width digits, which the tokenizer splits the same way whatever they are: with
# mkdtemp's random names the counts of a prompt, and so where compactions fell, moved
# from run to run (a 20 KB-files cell at 8k took 124,262 or 125,892 prompt tokens).
RUN_NUMBER_DIGITS = 4
PID_DIGITS = 7
_RUN_NUMBERS = itertools.count(1)


@contextlib.contextmanager
def bench_dir() -> Iterator[Path]:
    """A fresh directory for this process's runs (``agentgraph-bench-<pid>`` in the
    temporary folder, the pid at a fixed width), removed afterwards."""
    path = Path(tempfile.gettempdir()) / f"agentgraph-bench-{os.getpid():0{PID_DIGITS}d}"
    shutil.rmtree(path, ignore_errors=True)  # a previous process with the same pid
    path.mkdir()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def run(cell: Cell, tmp: Path) -> dict[str, Any]:
    """Run one cell; return its measured row."""
    load = cell.load
    run_dir = tmp / f"run-{next(_RUN_NUMBERS):0{RUN_NUMBER_DIGITS}d}"
    run_dir.mkdir()
    ws = run_dir / "ws"
    ws.mkdir()
    paths = make_workspace(
        ws, files=load.files, size=load.size, fact_at=load.fact_at, edits=load.edits
    )
    planted = planted_codes(paths)
    # What each file held before the task: a file counts as marked done only if that
    # one line changed (a model rewriting a file whole from a cut text damages it).
    originals = {p: (ws / p).read_text(encoding="utf-8") for p in paths}
    recorder = Recorder()
    persona = persona_for(cell.persona, cell.harness, load.batch, load.shell)
    model = ScriptedModel(persona, Summarizer(cell.summarizer), recorder)
    started = time.perf_counter()
    with FakeOpenAIServer(
        [model], window=load.window, on_exhausted="repeat_last", cut_at_output_limit=True
    ) as server:
        session: AgentgraphSession | PeerSession
        if cell.harness == "agentgraph":
            session = AgentgraphSession(
                server, ws, run_dir / "home", load.cap(), dict(cell.overrides)
            )
        else:
            session = PeerSession(
                cell.harness,
                server,
                ws,
                load.cap(),
                lambda: recorder.main_calls,
                load.edits,
                load.shell is not None,
            )
        stops: list[str] = []
        answers_before_question = 0
        for k, text in enumerate(load.texts()):
            if k == load.restart_before:
                session.restart()
            if text == QUESTION:
                answers_before_question = len(recorder.answers)
            answered = len(recorder.answers)
            stop = session.turn(text)
            if NO_TASK_ANSWER in recorder.answers[answered:]:
                stop = stop or "lost the task"
            stops.append(f"turn {k + 1}: {stop}" if stop else "")
        session.close()
        wall = time.perf_counter() - started
        requests = [r for r in server.requests if isinstance(r, dict)]
        violations, overflows = len(server.violations), server.overflow_count
    main = [r for r in requests if not is_summary(r)]
    tokens = [FakeOpenAIServer.token_estimate(r) for r in main]
    summary_tokens = sum(FakeOpenAIServer.token_estimate(r) for r in requests if is_summary(r))
    if load.question:
        answer = recorder.answers[answers_before_question:]
        recalled = codes_in(answer[-1]) if answer else set()
    else:
        recalled = codes_in(recorder.reports[-1]) if recorder.reports else set()
    maskings, compactions = (
        session.counts() if isinstance(session, AgentgraphSession) else (None, None)
    )
    return {
        "workload": load.name,
        "persona": cell.persona,
        "summarizer": cell.summarizer,
        "harness": cell.harness,
        "finished": next((s for s in stops if s), "yes"),
        "calls": len(requests),
        "summaries": recorder.summary_calls,
        "summary_tokens": summary_tokens,
        "prompt_tokens": sum(tokens),
        "billed": billed_input(main, tokens),
        "facts": len(recalled & planted),
        "facts_total": len(planted),
        "read_twice": recorder.reread_files(),
        "history_searches": recorder.searches,
        "marked_done": marked_done(ws, paths, originals) if load.edits else None,
        "edited_twice": recorder.reedited_files() if load.edits else None,
        "invalid": violations,
        "overflow_400": overflows,
        "maskings": maskings,
        "compactions": compactions,
        "cut_summaries": cut_summaries(main),
        "wall_s": wall,
    }


# --- report --------------------------------------------------------------------------------


def head(edits: bool = False) -> str:
    """The table's header (``edits``: with the editing workload's two columns)."""
    extra = ["marked done", "files edited twice"] if edits else []
    names = [
        "workload",
        "persona",
        "summarizer",
        "harness",
        "finished",
        "model calls",
        "summary calls",
        "summarizer tokens",
        "prompt tokens",
        "billed",
        "facts",
        "files read twice",
        *extra,
        "invalid",
        "overflow 400s",
        "masking",
        "compactions",
        "cut summaries",
        "wall s",
    ]
    aligns = ["---"] * 5 + ["---:"] * (len(names) - 5)
    return f"| {' | '.join(names)} |\n| {' | '.join(aligns)} |"


def has_edits(rows: Sequence[Mapping[str, Any]]) -> bool:
    """Whether any row is of an editing workload (its table shows their columns)."""
    return any(r.get("marked_done") is not None for r in rows)


def fmt_row(r: Mapping[str, Any], edits: bool = False) -> str:
    """One Markdown table row (``edits``: with the editing workload's two columns)."""

    def opt(value: int | None) -> str:
        return "—" if value is None else str(value)

    extra = ""
    if edits:
        done = r.get("marked_done")
        shown = "—" if done is None else f"{done}/{r['facts_total']}"
        extra = f"| {shown} | {opt(r.get('edited_twice'))} "
    return (
        f"| {r['workload']} | {r['persona']} | {r['summarizer']} | {r['harness']} "
        f"| {r['finished']} | {r['calls']} | {r['summaries']} | {r['summary_tokens']:,} "
        f"| {r['prompt_tokens']:,} "
        f"| {r['billed']:,.0f} | {r['facts']}/{r['facts_total']} | {r['read_twice']} {extra}"
        f"| {r['invalid']} | {r['overflow_400']} | {opt(r['maskings'])} "
        f"| {opt(r['compactions'])} | {r['cut_summaries']} | {r['wall_s']:.0f} |"
    )


def report(rows: list[dict[str, Any]], command: str, seconds: float) -> str:
    """The Markdown report: command, wall time, one table."""
    took = f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"
    edits = has_edits(rows)
    lines = [
        "# Context engine v3: stateless scripted model (`bench/bench_context_v3.py`)",
        "",
        f"Command: `{command}` ({took} in all). See the module docstring for what each "
        "column measures.",
        "",
        head(edits),
        *(fmt_row(r, edits) for r in rows),
    ]
    return "\n".join(lines) + "\n"


def _overrides(
    parser: argparse.ArgumentParser, specs: Sequence[str]
) -> tuple[tuple[str, str], ...]:
    """``NAME=VALUE`` pairs of agentgraph settings, checked against :class:`Settings`
    (a bad one ends the run with the parser's one-line error)."""
    names = (f.validation_alias for f in Settings.model_fields.values())
    known = {n for n in names if isinstance(n, str)}
    pairs: list[tuple[str, str]] = []
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not sep or not name.startswith("AGENTGRAPH_") or name not in known:
            parser.error(f"--agentgraph-setting {spec!r}: expected AGENTGRAPH_NAME=VALUE")
        pairs.append((name, value))
    try:
        Settings(_env_file=None, **dict(pairs))  # type: ignore[call-arg]
    except ValidationError as exc:
        first = exc.errors()[0]
        parser.error(f"--agentgraph-setting: {first['loc'][0]}: {first['msg']}")
    return tuple(pairs)


def _unsandboxed_without_bubblewrap(
    overrides: tuple[tuple[str, str], ...],
) -> tuple[tuple[str, str], ...]:
    """``overrides`` and ``AGENTGRAPH_SANDBOX=off`` where agentgraph's shell sandbox cannot
    start and no sandbox mode was asked for, said in one line on stderr.

    Its default mode then asks before each command, which a benchmark run cannot answer:
    every command of a shell workload was refused and the run stopped on the repeated
    call. Unsandboxed, the commands print the same; only run_bash's description lacks
    the sandbox's sentence, as on any machine without it (the report's command carries
    the setting).
    """
    if any(name == "AGENTGRAPH_SANDBOX" for name, _ in overrides):
        return overrides
    settings = Settings(_env_file=None, **dict(overrides))  # type: ignore[call-arg]
    plan = sandbox_plan_for(settings, os.environ)
    if plan.approval is None:
        return overrides
    print(
        "bench: agentgraph runs commands unsandboxed (AGENTGRAPH_SANDBOX=off): the shell "
        f"sandbox cannot start here ({plan.approval})",
        file=sys.stderr,
    )
    return (*overrides, ("AGENTGRAPH_SANDBOX", "off"))


def _sized(cell: Cell, sizes: Sequence[int]) -> list[Cell]:
    """``cell`` once for each number of files in ``sizes`` when its workload is one turn
    (a task's phase against where compactions fall moves with its length); a workload of
    several turns as it is."""
    load = cell.load
    if len(load.turns) != 1:
        return [cell]
    return [
        replace(cell, load=replace(load, name=f"{load.name}, {n} files", files=n, turns=((1, n),)))
        for n in sizes
    ]


def main(argv: list[str] | None = None) -> None:
    """Run the matrix (filtered) and print (and optionally write) the report."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer files and cells")
    names = [w.name for w in workloads(False)]
    parser.add_argument("--workload", action="append", choices=names, help="repeatable")
    parser.add_argument("--harness", action="append", choices=HARNESSES, help="repeatable")
    parser.add_argument(
        "--persona",
        action="append",
        choices=(*PERSONAS, *EXTRA_PERSONAS),
        help="repeatable; 'searcher' only when named",
    )
    parser.add_argument("--summarizer", action="append", choices=SUMMARIZERS, help="repeatable")
    parser.add_argument(
        "--summarizer-everywhere",
        action="append",
        choices=SUMMARIZERS,
        help="add this summarizer's cells (silent and re-reading models) to every workload; "
        "repeatable",
    )
    parser.add_argument(
        "--window", type=int, default=WINDOW, help=f"context window in tokens ({WINDOW:,})"
    )
    parser.add_argument(
        "--files",
        action="append",
        type=int,
        metavar="N",
        help="run each single-turn workload with N files instead (its rows named "
        "'WORKLOAD, N files'); repeatable",
    )
    parser.add_argument(
        "--shell",
        nargs="?",
        const="cat",
        choices=SHELL_STYLES,
        help="the model reads through run_bash instead of read_file: with cat (the default), "
        "nl (numbered pages: nl -ba F | sed -n 'K,Lp'), grep (grep -v '^#' F, no plain "
        "read), multi (several whole files in one cat, at least "
        f"{MULTI_SHELL_BATCH} a reply), sed (cat, and sed -i for edits), perl (cat, and "
        "perl -pi -e for edits), heredoc (cat, and cat > F <<'EOF' for edits) or cd (as sed, "
        "from the file's folder: cd D && cat F), its rows named "
        "'WORKLOAD (shell)' or "
        "'WORKLOAD (shell, STYLE)'; small-file "
        "workloads only but with cat",
    )
    parser.add_argument(
        "--agentgraph-setting",
        action="append",
        metavar="AGENTGRAPH_NAME=VALUE",
        help="an agentgraph setting for its runs only (the peers keep its default points); "
        "repeatable",
    )
    parser.add_argument(
        "--json", action="store_true", help="print the rows as JSON (--out still gets the report)"
    )
    parser.add_argument("--out", type=Path, help="write the Markdown report here")
    args = parser.parse_args(argv)
    overrides = _overrides(parser, args.agentgraph_setting or [])
    cells = [
        c
        for c in matrix(
            args.quick,
            args.summarizer_everywhere or (),
            [p for p in EXTRA_PERSONAS if p in (args.persona or ())],
        )
        # The editing workload runs when named: the default tables are the read tasks.
        if (c.load.name in args.workload if args.workload else not c.load.edits)
        and (not args.harness or c.harness in args.harness)
        and (not args.persona or c.persona in args.persona)
        and (not args.summarizer or c.summarizer in args.summarizer)
    ]
    if args.window != WINDOW:
        cells = [replace(c, load=replace(c.load, window=args.window)) for c in cells]
    if args.shell:
        if args.shell not in PAGING_SHELL_STYLES and any(c.load.size != "small" for c in cells):
            parser.error(
                f"--shell {args.shell}: the model pages no file through the shell that way;"
                " pick small-file workloads"
            )
        suffix = " (shell)" if args.shell == "cat" else f" (shell, {args.shell})"
        cells = [
            replace(
                c,
                load=replace(
                    c.load,
                    name=c.load.name + suffix,
                    shell=args.shell,
                    batch=max(c.load.batch, MULTI_SHELL_BATCH)
                    if args.shell == "multi"
                    else c.load.batch,
                ),
            )
            for c in cells
        ]
    if args.files:
        if min(args.files) < 1:
            parser.error("--files: give a number of files of at least 1")
        cells = [sized for c in cells for sized in _sized(c, args.files)]
    for name in [n for n in os.environ if n.startswith(ENV_PREFIXES)]:
        del os.environ[name]
    if any(c.harness == "agentgraph" for c in cells):
        overrides = _unsandboxed_without_bubblewrap(overrides)
    if overrides:
        cells = [replace(c, overrides=overrides) if c.harness == "agentgraph" else c for c in cells]
    quiet_disconnects()
    started = time.perf_counter()
    rows = []
    with bench_dir() as tmp:
        for i, cell in enumerate(cells, 1):
            print(
                f"[{i}/{len(cells)}] {cell.load.name} {cell.persona} "
                f"{cell.summarizer} {cell.harness} …",
                file=sys.stderr,
                flush=True,
            )
            rows.append(run(cell, Path(tmp)))
            print(fmt_row(rows[-1], has_edits(rows[-1:])), file=sys.stderr, flush=True)
    shown = ["--quick"] if args.quick else []
    for flag in ("workload", "harness", "persona", "summarizer", "summarizer_everywhere"):
        for value in getattr(args, flag) or ():
            shown += [f"--{flag.replace('_', '-')}", value]
    if args.window != WINDOW:
        shown += ["--window", str(args.window)]
    if args.shell:
        shown += ["--shell"] if args.shell == "cat" else ["--shell", args.shell]
    for n in args.files or ():
        shown += ["--files", str(n)]
    for name, value in overrides:
        shown += ["--agentgraph-setting", f"{name}={value}"]
    if args.out is not None:
        shown += ["--out", str(args.out)]
    command = shlex.join(["uv", "run", "python", "bench/bench_context_v3.py", *shown])
    text = report(rows, command, time.perf_counter() - started)
    print(json.dumps(rows) if args.json else text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
