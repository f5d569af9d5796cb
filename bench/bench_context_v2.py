"""Context engine v2 side by side: agentgraph vs LangChain v1 middleware vs deepagents.

Run: uv run python bench/bench_context_v2.py [--quick] [--repeat N] [--out FILE]
(full: ~3 min on 2 cores; --quick: 80 files at 16k; --harness NAME, --files N --window W
and --json for one harness or a custom workload).

Every harness runs the same workloads against the same strict loopback
OpenAI-compatible server (real HTTP, real ``ChatOpenAI``) driven by the scripted model
of tests/scenarios/long_task.py: read every file, write a report, then answer with the
planted facts still visible in the prompt (30 facts spread over the files). Its
summarizer keeps only every other fact it sees (a lossy summary). Harnesses:

* ``agentgraph``: the real ``Agent`` graph with its defaults (window from
  ``AGENTGRAPH_CONTEXT_WINDOW``).
* ``lc-summary``: LangChain v1 ``create_agent`` + ``SummarizationMiddleware`` triggered
  at the prompt size where agentgraph's defaults compact (``("tokens", compact_at)``:
  its threshold of the window less its output reserve), keeping ``("fraction", 0.3)``
  (the middleware's documented example); so the counts differ by what each does there,
  not by where it starts.
* ``lc-edit+summary``: ``create_agent`` + ``ContextEditingMiddleware(ClearToolUsesEdit)``
  clearing old tool outputs from the prompt size where agentgraph masks,
  with the same ``SummarizationMiddleware`` as a backstop (clearing alone leaves the
  calls, which still outgrow a 16k window on the long task).
* ``lc-summary (same tools)`` / ``lc-edit+summary (same tools)``: the same two peers
  with agentgraph's prefix: its system prompt and its tool schemas, byte for byte as
  agentgraph sends them (captured from one real agentgraph request); ``read_file``
  answers with agentgraph's own rendering (numbered lines) and ``write_file`` works,
  every other tool answers with an error. Prompt-token differences
  against these rows come from context management alone.
* ``deepagents``: ``create_deep_agent`` with its own filesystem tools over the workspace
  (``FilesystemBackend(virtual_mode=True)``) and its own summarization defaults.

The window reaches the peers the way a user gives it: the model profile's
``max_input_tokens``. Measured per run: model calls, LLM summary calls, masking /
clearing events (agentgraph only), total prompt tokens (server estimate), the share a
prefix cache would serve (per request, the longest prefix of its tools + messages JSON
already sent earlier), planted facts answered, invalid requests (strict rejections),
overflow 400s, whether it ended with a real answer, and wall/CPU seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langchain.agents import create_agent
from langchain.agents.middleware import (
    ClearToolUsesEdit,
    ContextEditingMiddleware,
    SummarizationMiddleware,
)
from langchain_core.tools import BaseTool, StructuredTool, tool
from langchain_openai import ChatOpenAI
from langgraph.errors import GraphRecursionError

from agentgraph.capabilities.tools.files import read_text_file
from agentgraph.config import Settings
from agentgraph.context.windows import budget_for
from agentgraph.persistence import open_store
from agentgraph.session.agent import Agent
from tests.fakes.openai_server import FakeOpenAIServer
from tests.scenarios.long_task import (
    LANGCHAIN_SUMMARY_MARKER,
    SUMMARY_MARKER,
    LongTaskDriver,
    is_summary_request,
    make_workspace,
    planted_facts,
)

FACTS = 30
# Custom workloads (--files/--window): agentgraph's system prompt and tool schemas alone
# take ~3k tokens, so smaller windows measure nothing; more files only cost time.
MIN_WINDOW_TOKENS = 4_000
MAX_FILES = 2_000
MODEL = "gpt-4o-mini"
API_KEY = "sk-bench"
TASK = "read every log and report the facts"
PEER_SYSTEM_PROMPT = (
    "You are a coding agent working in a workspace of log files. Use the file tools to "
    "read them and write the report the user asks for."
)
# LangChain's SummarizationMiddleware docstring example keeps this share of the window.
LC_KEEP_FRACTION = 0.3
# The summarizer sees every message it replaces. LangChain's default (the last 4,000
# tokens, starting on a human message) leaves nothing to summarize in one long agent
# turn, whose only human message is the first: the history is then replaced by "Previous
# conversation was too long to summarize." without any model call.
LC_TRIM_TOKENS_TO_SUMMARIZE = None
# ClearToolUsesEdit's default: the most recent tool results kept verbatim.
LC_CLEAR_KEEP_RESULTS = 3
# Settings' own defaults, so the peers follow agentgraph's thresholds if they change.
COMPACT_THRESHOLD: float = Settings.model_fields["compact_threshold"].default
MASK_THRESHOLD: float = Settings.model_fields["mask_threshold"].default


def agentgraph_triggers(window: int) -> tuple[int, int]:
    """``(mask_at, compact_at)``: the prompt sizes, in tokens, at which agentgraph's
    defaults mask and compact at ``window`` (its thresholds are shares of the window less
    its output reserve). The peers are given the same points, so their counts differ
    from agentgraph's by what each does there, not by where it starts."""
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None, AGENTGRAPH_CONTEXT_WINDOW=str(window), AGENTGRAPH_HOME=tempfile.gettempdir()
    )
    # agentgraph's chat model has the model's profile (its reply limit caps the reserve).
    profile = ChatOpenAI(model=MODEL, api_key=API_KEY).profile  # type: ignore[arg-type]
    budget = budget_for(settings, MODEL, profile=profile)
    return int(budget.usable * MASK_THRESHOLD), budget.compact_at


# Variables that would change what is measured (agentgraph's settings, a real provider)
# or reach the network (tracing): the bench runs without them.
ENV_PREFIXES = ("AGENTGRAPH_", "OPENAI_", "LANGSMITH_", "LANGCHAIN_", "MAX_LOOPS", "MAX_MESSAGE")

# Measured before context engine v2, kept for comparison across re-runs.
HISTORY_NOTE = (
    "Before context engine v2 (`MAX_MESSAGE_HISTORY=40` forced, no masking, 3 planted "
    "facts): 6 LLM summaries on the 60-file task at 128k; 86 summaries in 387 calls on the "
    "300-file task at 16k."
)

SAME_TOOLS = " (same tools)"
# Price of a cached input token relative to an uncached one: Anthropic's cache reads
# and OpenAI's GPT-5 family (GPT-4.1: 0.25, GPT-4o: 0.5).
CACHED_INPUT_RATE = 0.1
# Which issue targets the run above meets; written from its numbers, kept across re-runs.
TARGETS_NOTE = (
    "What the run above shows (context engine v3): this benchmark's scripted model counts "
    "its own steps and only calls tools, so it cannot show lost context "
    "(bench_context_v3.py, with stateless models, does). agentgraph masks only outputs "
    "the model restated, so for this model it summarizes instead: at 16k 21 compactions "
    "(21-29 for LangChain and deepagents; 42 summarizer calls, as each summary of this "
    "lossy summarizer leaves files out and is asked about them again), 21/30 facts "
    "against 1-2, the fewest billed input tokens of every harness (0.72-0.98x each "
    "peer's); at 128k nothing is summarized or masked (0 summaries, 97.1% cacheable, the "
    "run's ceiling), as before."
)

HARNESSES = (
    "agentgraph",
    "lc-summary",
    "lc-edit+summary",
    "lc-summary" + SAME_TOOLS,
    "lc-edit+summary" + SAME_TOOLS,
    "deepagents",
)


@dataclass(frozen=True)
class Workload:
    """One task: ``files`` log files of ``lines`` lines each at a ``window``-token window."""

    name: str
    files: int
    lines: int
    window: int


# 60 small files at 128k; 300 files of ~3 KB (36 log lines) at 16k.
WORKLOADS = (
    Workload("60 small files @128k", 60, 12, 128_000),
    Workload("300 files of 3 KB @16k", 300, 36, 16_000),
)
QUICK_WORKLOADS = (
    Workload("60 small files @128k", 60, 12, 128_000),
    Workload("80 files of 3 KB @16k", 80, 36, 16_000),
)


def common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of ``a`` and ``b`` (binary search on slices)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def served_chars(requests: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """Per request: characters a prefix cache would serve, and all its characters."""
    sent: list[str] = []
    out = []
    for body in requests:
        text = _request_text(body)
        out.append((max((common_prefix(prev, text) for prev in sent), default=0), len(text)))
        sent.append(text)
    return out


def cacheable_share(requests: list[dict[str, Any]]) -> float:
    """Share of prompt characters a prefix cache would serve over ``requests``."""
    served = served_chars(requests)
    total = sum(t for _, t in served)
    return sum(s for s, _ in served) / total if total else 0.0


def billed_input(requests: list[dict[str, Any]], tokens: list[int]) -> float:
    """Prompt tokens as billed: cached ones at :data:`CACHED_INPUT_RATE` of the price."""
    billed = 0.0
    for (served, total), count in zip(served_chars(requests), tokens, strict=True):
        share = served / total if total else 0.0
        billed += count * (1 - share + CACHED_INPUT_RATE * share)
    return billed


def _request_text(body: dict[str, Any], messages: list[Any] | None = None) -> str:
    """What a provider caches, in order: the tools, then the messages."""
    chosen = body["messages"] if messages is None else messages
    return json.dumps(body.get("tools"), sort_keys=True) + json.dumps(chosen, sort_keys=True)


def cache_ceiling(requests: list[dict[str, Any]]) -> float:
    """Share of prompt characters the best append-only history could have cached.

    Per request, everything before its newest assistant message (the step that made
    this call: that message and its tool results are new) was sent by the previous
    request of an agent that never rewrites its history; the first request is all new.
    No prefix cache serves more than this on a workload whose every step reads new
    content, whatever its context management.
    """
    total = served = 0
    for i, body in enumerate(requests):
        text = _request_text(body)
        messages = body["messages"]
        last = max((k for k, m in enumerate(messages) if m.get("role") == "assistant"), default=0)
        ideal = len(_request_text(body, messages[:last])) - 1 if i and last else 0
        served += min(max(ideal, 0), len(text))
        total += len(text)
    return served / total if total else 0.0


def peer_model(server: FakeOpenAIServer, window: int) -> ChatOpenAI:
    """The chat model a peer user configures: the window as the profile's input limit."""
    return ChatOpenAI(
        model=MODEL,
        base_url=server.url,
        api_key=API_KEY,  # type: ignore[arg-type]
        max_retries=0,
        profile={"max_input_tokens": window},
    )


def in_workspace(ws: Path, path: str) -> Path:
    """``path`` resolved inside the workspace ``ws`` (ValueError when it leads out)."""
    root = ws.resolve()
    target = (root / path).resolve()
    if not target.is_relative_to(root):
        raise ValueError(f"path outside the workspace: {path}")
    return target


def workspace_tools(ws: Path, edits: bool = False) -> list[BaseTool]:
    """``read_file`` / ``write_file`` (and with ``edits``, ``edit_file``) over ``ws`` for
    the LangChain peers."""

    @tool
    def read_file(path: str) -> str:
        """Read a UTF-8 text file of the workspace (path relative to its root)."""
        return in_workspace(ws, path).read_text(encoding="utf-8")

    @tool
    def write_file(path: str, content: str) -> str:
        """Write a UTF-8 text file in the workspace (path relative to its root)."""
        target = in_workspace(ws, path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        return f"wrote {len(content)} characters to {path}"

    @tool
    def edit_file(path: str, old_string: str, new_string: str) -> str:
        """Replace the one occurrence of ``old_string`` in a workspace file by
        ``new_string`` (path relative to the workspace's root)."""
        target = in_workspace(ws, path)
        text = target.read_text(encoding="utf-8")
        if (found := text.count(old_string)) != 1:
            return f"Error: old_string occurs {found} times in {path}, not once"
        target.write_text(text.replace(old_string, new_string), encoding="utf-8")
        return f"edited {path}"

    return [read_file, write_file, *([edit_file] if edits else [])]


@dataclass(frozen=True)
class Prefix:
    """What agentgraph sends before the messages: system prompt and tool schemas."""

    system: str
    tools: list[dict[str, Any]]
    workspace: str


def agentgraph_prefix(tmp: Path) -> Prefix:
    """agentgraph's system prompt and tool schemas, as its first request carries them."""
    run_dir = Path(tempfile.mkdtemp(prefix="prefix-", dir=tmp))
    ws = run_dir / "ws"
    ws.mkdir()
    with FakeOpenAIServer([{"content": "ok"}], window=128_000) as server:
        run_agentgraph(server, ws, 1, run_dir / "home")
        body = server.requests[0]
    system = next(m["content"] for m in body["messages"] if m["role"] == "system")
    return Prefix(system=str(system), tools=list(body["tools"]), workspace=str(ws))


# The arguments the working tools of same_tools take (agentgraph's schemas have more).
_WORKING_ARGS = ("path", "content", "old_string", "new_string")


def same_tools(ws: Path, prefix: Prefix, extra: Sequence[BaseTool] = ()) -> list[BaseTool]:
    """agentgraph's tool schemas and its ``read_file`` output; the others answer an error.

    ``read_file`` renders as agentgraph's does (numbered lines), so the tool results are
    the same bytes and only context management differs. ``extra`` tools answer under
    their names too, with the arguments they declare.
    """
    working = {t.name: t for t in [*workspace_tools(ws, edits=True), *extra]}
    taken = {t.name: tuple(t.args) for t in extra}

    def read_file(path: str) -> str:
        """agentgraph's read_file rendering of a workspace file."""
        return read_text_file(in_workspace(ws, path), path)

    working["read_file"] = StructuredTool.from_function(read_file, name="read_file")
    out: list[BaseTool] = []
    for schema in prefix.tools:
        fn = schema["function"]
        name = fn["name"]

        def call(_name: str = name, **kwargs: Any) -> str:
            if _name in working:
                names = taken.get(_name, _WORKING_ARGS)
                keep = {k: v for k, v in kwargs.items() if k in names}
                return str(working[_name].invoke(keep))
            return f"Error: {_name} is not available in this benchmark"

        out.append(
            StructuredTool(
                name=name,
                description=fn.get("description", ""),
                args_schema=fn["parameters"],
                func=call,
            )
        )
    return out


def summary_middleware(model: ChatOpenAI) -> SummarizationMiddleware:
    """LangChain's summarization at agentgraph's compaction point (see module doc)."""
    window = (model.profile or {}).get("max_input_tokens")
    if not isinstance(window, int):
        raise ValueError("the peer model has no window in its profile")
    return SummarizationMiddleware(
        model=model,
        trigger=("tokens", agentgraph_triggers(window)[1]),
        keep=("fraction", LC_KEEP_FRACTION),
        trim_tokens_to_summarize=LC_TRIM_TOKENS_TO_SUMMARIZE,
    )


def run_peer(
    harness: str, server: FakeOpenAIServer, ws: Path, window: int, prefix: Prefix | None = None
) -> str | None:
    """Run one peer harness to completion; return why it stopped early, or None.

    With ``prefix`` (the ``(same tools)`` variants) the peer gets agentgraph's system
    prompt and tool schemas instead of its own two tools and short prompt.
    """
    model = peer_model(server, window)
    system, tools = PEER_SYSTEM_PROMPT, workspace_tools(ws)
    if prefix is not None:
        system = prefix.system.replace(prefix.workspace, str(ws))
        tools = same_tools(ws, prefix)
        harness = harness.removesuffix(SAME_TOOLS)
    if harness == "deepagents":
        from deepagents import create_deep_agent
        from deepagents.backends import FilesystemBackend

        agent: Any = create_deep_agent(
            model=model,
            system_prompt=PEER_SYSTEM_PROMPT,
            backend=FilesystemBackend(root_dir=ws, virtual_mode=True),
        )
    else:
        middleware: list[Any] = [summary_middleware(model)]
        if harness == "lc-edit+summary":
            edit = ClearToolUsesEdit(
                trigger=agentgraph_triggers(window)[0], keep=LC_CLEAR_KEEP_RESULTS
            )
            middleware.append(ContextEditingMiddleware(edits=[edit]))
        agent = create_agent(model, tools, system_prompt=system, middleware=middleware)
    try:
        agent.invoke({"messages": [{"role": "user", "content": TASK}]})
    except GraphRecursionError:
        return "recursion limit"
    except Exception as exc:  # a provider error ends the run: report it, measure the rest
        return f"{type(exc).__name__}: {str(exc)[:80]}"
    return None


def run_agentgraph(
    server: FakeOpenAIServer, ws: Path, files: int, home: Path
) -> tuple[int, int, str]:
    """Run the real agentgraph graph; return its compactions, masking events, stop reason."""
    events: list[dict[str, Any]] = []
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        AGENTGRAPH_HOME=str(home),
        OPENAI_BASE_URL=server.url,
        OPENAI_API_KEY=API_KEY,
        AGENTGRAPH_MODEL=MODEL,
        AGENTGRAPH_CONTEXT_WINDOW=str(server.window),
        AGENTGRAPH_PROVIDER_MAX_RETRIES="0",
        MAX_LOOPS=str(files + 5),
    )
    stop = ""
    with open_store(settings) as store:
        agent = Agent(settings, store, sleep=lambda _s: None)
        try:
            result = agent.run_turn("bench", TASK, ws, events.append)
        except Exception as exc:  # a failed turn is a measured outcome, not a bench crash
            stop = f"{type(exc).__name__}: {str(exc)[:80]}"
        else:
            stop = "" if result.answer.strip() else "empty answer"
    kinds = [e["type"] for e in events]
    return kinds.count("compaction"), kinds.count("masking"), stop


def driver_for(harness: str, paths: list[str]) -> LongTaskDriver:
    """The scripted model, speaking the tool names and arguments of ``harness``."""
    if harness == "agentgraph":
        return LongTaskDriver(paths, lossy=True)
    markers = (LANGCHAIN_SUMMARY_MARKER, SUMMARY_MARKER)
    if harness == "deepagents":
        return LongTaskDriver(
            paths, lossy=True, path_key="file_path", path_prefix="/", summary_markers=markers
        )
    return LongTaskDriver(paths, lossy=True, summary_markers=markers)


def run(harness: str, load: Workload, tmp: Path, prefix: Prefix | None = None) -> dict[str, Any]:
    """One harness on one workload: the measured row (``prefix``: see :func:`run_peer`)."""
    run_dir = Path(tempfile.mkdtemp(prefix=f"{harness}-{load.files}-", dir=tmp))
    ws = run_dir / "ws"
    ws.mkdir()
    facts = planted_facts(min(FACTS, load.files), load.files)
    paths = make_workspace(ws, files=load.files, lines_per_file=load.lines, facts=facts)
    driver = driver_for(harness, paths)
    maskings: int | None = None
    compactions: int | None = None
    wall, cpu = time.perf_counter(), time.process_time()
    with FakeOpenAIServer([driver], window=load.window, on_exhausted="repeat_last") as server:
        if harness == "agentgraph":
            compactions, maskings, stop = run_agentgraph(server, ws, load.files, run_dir / "home")
        else:
            same = prefix if harness.endswith(SAME_TOOLS) else None
            stop = run_peer(harness, server, ws, load.window, same) or ""
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        requests = server.requests
        markers = driver.summary_markers
        main = [r for r in requests if isinstance(r, dict) and not is_summary_request(r, markers)]
        tokens = [server.token_estimate(r) for r in main]
        return {
            "harness": harness,
            "workload": load.name,
            "calls": len(requests),
            "summaries": driver.summary_calls,
            # A peer's compaction is one summary call (LangChain's and deepagents'
            # summarizer sends the whole part it replaces in one request).
            "compactions": driver.summary_calls if compactions is None else compactions,
            "maskings": maskings,
            "prompt_tokens": sum(tokens),
            "billed": billed_input(main, tokens),
            "cacheable": cacheable_share(main),
            "ceiling": cache_ceiling(main),
            "facts": len(driver.answer_facts & set(facts.values())),
            "facts_total": len(facts),
            "invalid": len(server.violations),
            "overflow_400": server.overflow_count,
            "answered": driver.answered and not stop,
            "stop": stop,
            "wall_s": wall,
            "cpu_s": cpu,
        }


def median_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Median of every numeric column over repeated runs (the scripted counts are equal)."""
    out = dict(rows[0])
    for key, value in rows[0].items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[key] = statistics.median(r[key] for r in rows)
    return out


def fmt_row(r: dict[str, Any]) -> str:
    """One Markdown table row."""
    masked = "—" if r["maskings"] is None else f"{r['maskings']:.0f}"
    end = "answer" if r["answered"] else (r["stop"] or "no answer")
    return (
        f"| {r['workload']} | {r['harness']} | {r['calls']:.0f} | {r['compactions']:.0f} "
        f"| {r['summaries']:.0f} "
        f"| {masked} | {r['prompt_tokens']:,.0f} | {r['billed']:,.0f} | {r['cacheable']:.1%} "
        f"| {r['ceiling']:.1%} "
        f"| {r['facts']:.0f}/{r['facts_total']:.0f} | {r['invalid']:.0f} "
        f"| {r['overflow_400']:.0f} | {end} | {r['wall_s']:.0f} | {r['cpu_s']:.0f} |"
    )


def ratio(a: float, b: float) -> str:
    """``a / b`` as ``1.23×`` (``—`` when ``b`` is 0)."""
    return f"{a / b:.2f}×" if b else "—"


def ratio_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Per workload: agentgraph's summaries and prompt tokens relative to each peer."""
    lines = []
    for load in dict.fromkeys(r["workload"] for r in rows):
        by = {r["harness"]: r for r in rows if r["workload"] == load}
        ag = by.get("agentgraph")
        if ag is None:
            continue
        for name, peer in by.items():
            if name == "agentgraph":
                continue
            lines.append(
                f"| {load} | {name} | {ag['compactions']:.0f} vs {peer['compactions']:.0f} "
                f"| {ag['summaries']:.0f} vs {peer['summaries']:.0f} "
                f"| {ratio(ag['prompt_tokens'], peer['prompt_tokens'])} "
                f"| {ratio(ag['billed'], peer['billed'])} "
                f"| {ag['facts']:.0f} vs {peer['facts']:.0f} |"
            )
    return lines


def report(rows: list[dict[str, Any]], command: str, seconds: float) -> str:
    """The Markdown section for docs/bench/context_v2.md."""
    took = f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"
    head = (
        "| workload | harness | calls | compactions | LLM summary calls | masking events "
        "| prompt tokens | billed as "
        "| cacheable | cache ceiling | facts | invalid | overflow 400s | ended with | wall s "
        "| CPU s |\n"
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| --- "
        "| ---: "
        "| ---: |"
    )
    text = [
        "# Context engine v2 side by side: agentgraph, LangChain v1 middleware, deepagents"
        " (`bench/bench_context_v2.py`)",
        "",
        f"Command: `{command}` ({took} in all on 2 shared cores; `--quick` runs "
        "80 files instead of 300 at 16k, about half the time). Same strict loopback server and scripted model for "
        "every harness: read every file, write a report, answer with the planted facts "
        f"({FACTS}, spread over the files) still visible in the prompt; the summarizer keeps "
        "every other fact it sees. Harnesses: `agentgraph` (its defaults: "
        f"`MAX_MESSAGE_HISTORY` unset, masking at {MASK_THRESHOLD:.2f}, compaction at "
        f"{COMPACT_THRESHOLD:.2f}); `lc-summary` = LangChain v1 `create_agent` + "
        '`SummarizationMiddleware(trigger=("tokens", agentgraph\'s compaction point: '
        f"{COMPACT_THRESHOLD:.2f} of the window less its output reserve), "
        f'keep=("fraction", {LC_KEEP_FRACTION}), trim_tokens_to_summarize=None)` (with the '
        "default trim of 4,000 tokens starting on a human message, a single long turn "
        'gets no summary call at all: the history is replaced by "Previous conversation '
        'was too long to summarize."); `lc-edit+summary` = the same plus '
        "`ContextEditingMiddleware(ClearToolUsesEdit(trigger=agentgraph's masking point, "
        f"keep={LC_CLEAR_KEEP_RESULTS}))` (clearing first, the summary as backstop: clearing "
        "edits only the request, while the summary's trigger counts the stored messages, "
        "so clearing saves prompt tokens, not summaries); "
        "`… (same tools)` = the same LangChain peer with agentgraph's prefix: its system "
        "prompt and its 17 tool schemas byte for byte (captured from a real agentgraph "
        "request; `read_file` answers with agentgraph's own rendering, numbered lines, and "
        "`write_file` works, the others answer an error), so against "
        "these rows prompt-token differences come from context management alone; "
        "`deepagents` = `create_deep_agent` with its filesystem tools on the workspace "
        "and its own summarization defaults. The peers get the window as the model "
        'profile\'s `max_input_tokens`. "cacheable" = share of prompt characters (tools, '
        "then messages) that are the longest prefix already sent in an earlier request; "
        f'"billed as" = the prompt tokens with the cached ones at {CACHED_INPUT_RATE:.0%} of '
        "the price (Anthropic's cache reads, OpenAI's GPT-5 family): what the input costs; "
        '"cache ceiling" = the most any prefix cache could serve on that run\'s requests '
        "if the history were never rewritten (everything before each request's newest step "
        "cached): every step reads new content, so no harness can pass it; "
        '"compactions": agentgraph\'s compaction events (LLM summary calls count every '
        "request its summarizer makes); a peer's compaction is one summary call; "
        '"masking events" is agentgraph\'s own event (— for peers); "ended with": a real '
        "answer, or why the run stopped; CPU s: the bench process (harness and loopback "
        "server).",
        "",
        head,
        *(fmt_row(r) for r in rows),
        "",
        "agentgraph against each peer (compactions, LLM summary calls, prompt-token and "
        "billed-input ratios agentgraph/peer, facts answered):",
        "",
        "| workload | peer | compactions | summary calls | prompt tokens | billed as | facts |",
        "| --- | --- | --- | --- | ---: | ---: | --- |",
        *ratio_lines(rows),
        "",
        TARGETS_NOTE,
        "",
        HISTORY_NOTE,
    ]
    return "\n".join(text) + "\n"


def main(argv: list[str] | None = None) -> None:
    """Run every harness on every workload and print (and optionally write) the report."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="80 files instead of 300 at 16k")
    parser.add_argument("--repeat", type=int, default=1, help="runs per cell; medians shown")
    parser.add_argument(
        "--harness", action="append", choices=HARNESSES, help="only these (repeatable)"
    )
    parser.add_argument("--files", type=int, help="one custom workload: this many files")
    parser.add_argument("--window", type=int, default=16_000, help="with --files")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument("--out", type=Path, help="write the Markdown report here")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.files is not None and not 1 <= args.files <= MAX_FILES:
        parser.error(f"--files must be between 1 and {MAX_FILES}")
    if args.window < MIN_WINDOW_TOKENS:
        parser.error(f"--window must be at least {MIN_WINDOW_TOKENS} tokens")
    if args.files is not None:
        loads: tuple[Workload, ...] = (
            Workload(f"{args.files} files @{args.window // 1000}k", args.files, 36, args.window),
        )
    else:
        loads = QUICK_WORKLOADS if args.quick else WORKLOADS
    harnesses = tuple(args.harness or HARNESSES)
    for name in [n for n in os.environ if n.startswith(ENV_PREFIXES)]:
        del os.environ[name]
    started = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        prefix = agentgraph_prefix(Path(tmp))
        for load in loads:
            for harness in harnesses:
                runs = [run(harness, load, Path(tmp), prefix) for _ in range(args.repeat)]
                rows.append(median_row(runs))
                if not args.json:
                    print(fmt_row(rows[-1]), file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps(rows))
        return
    shown = ["--quick"] if args.quick else []
    if args.repeat > 1:
        shown += ["--repeat", str(args.repeat)]
    if args.files is not None:
        shown += ["--files", str(args.files), "--window", str(args.window)]
    for name in args.harness or ():
        shown += ["--harness", name]
    if args.out is not None:
        shown += ["--out", str(args.out)]
    command = " ".join(["uv run python bench/bench_context_v2.py", *shown])
    text = report(rows, command, time.perf_counter() - started)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
