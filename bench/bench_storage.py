"""Benchmark: session storage and turn cost on the real graph.

Run: ``uv run python bench/bench_storage.py`` (writes docs/bench/storage.md);
``--messages 5000`` sets the last mark; ``--quick`` runs agentgraph at a 16k window
only (``--window 128000`` for another; nothing written). Turn times are CPU time of
this process (``time.process_time``, comparable on a shared machine) and wall time.

Every run drives the real :class:`agentgraph.session.agent.Agent` graph (planner with its
prompt view and auto-compaction, the tools node running the real ``read_file``,
finalize, undo snapshots, the store's pruning) with a scripted chat model that
takes no time: each user turn makes 1-4 tool steps of 1-3 ``read_file`` calls on a
generated workspace whose files are 200 B-20 KB (log-uniform) and 5% 20-60 KB, then
answers; summary requests (no tools bound) get a 1.5 KB summary. Usage is reported
as a provider would (prompt characters / 4), so compaction happens as in real use.

Side by side, in one run, each in a fresh SQLite file:

* ``agentgraph`` at a 16k and a 128k window: ``AgentSqliteSaver`` + pruning;
* ``DeltaChannel + SqliteSaver``: the same graph and channel on LangGraph's own
  ``SqliteSaver`` (no remembered value, no pruning), 16k window;
* ``create_react_agent + add_messages``: LangGraph's prebuilt agent with the same
  tools and model on ``SqliteSaver`` (the whole list in every checkpoint), 1k only;
* PostgreSQL (a loopback server started with ``initdb``/``pg_ctl`` as the tests do,
  ``--only postgres``): ``agentgraph`` on ``AgentPostgresSaver`` at a 16k window, and
  LangGraph's own ``PostgresSaver`` under the same graph (``postgres-plain``). Their
  "DB bytes" are ``pg_total_relation_size`` of the checkpoint tables and the archive
  (agentgraph prunes PostgreSQL as it prunes SQLite; LangGraph's saver is not pruned).
  The server's autovacuum wakes every second (``PG_BENCH_SETTINGS``): a run packs a
  session's hours into a minute or two, which autovacuum's default pace (a visit a
  minute) hardly sees, leaving the pruned rows as dead tuples.

Reported per mark: database bytes (after a WAL checkpoint; "live" excludes free
pages SQLite reuses; "checkpoint bytes" counts only the checkpoint tables, their
indexes and the archive, without the full-text search index and the session index),
the message payload (bytes of contents and tool-call
arguments of the stored transcript), compactions so far, and the CPU and wall time
of the turns that ended in the last 20% before the mark (median, p99, max).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import io
import json
import math
import pstats
import random
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from pydantic import Field

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from corpus import samples

from agentgraph.config import Settings
from agentgraph.persistence.index import SqliteSessionIndex
from agentgraph.persistence.prune import db_bytes
from agentgraph.persistence.store import Store, connect_sqlite, open_store
from agentgraph.session.agent import Agent

MARKS_MESSAGES = (1_000, 2_500, 5_000)
BASELINE_REACT_MAX_MESSAGES = 1_000
RUN_TIME_BUDGET_S = 1_800.0
LATENCY_WINDOW_FRACTION = 0.2
SEED = 20_250_101
WORKSPACE_FILES = 400
TOOL_RESULT_MIN_BYTES = 200
TOOL_RESULT_MAX_BYTES = 20_000
LARGE_RESULT_PROBABILITY = 0.05
LARGE_RESULT_MAX_BYTES = 60_000
SUMMARY_BYTES = 1_500
CHARS_PER_TOKEN = 4
THREAD = "bench"
OUTPUT_PATH = Path(__file__).resolve().parent.parent / "docs" / "bench" / "storage.md"
UNDO_OUTPUT_PATH = OUTPUT_PATH.with_name("undo.md")
UNDO_FILES = 5_000
UNDO_FILE_BYTES = 2_000
PROFILE_TOP = 40


class BenchModel(BaseChatModel):
    """A scripted chat model that takes no time (see the module docstring)."""

    seed: int = SEED
    files: list[str] = Field(default_factory=list)
    _rng: random.Random
    _steps_left: int = 0
    _pool: str = ""
    _n: int = 0

    def model_post_init(self, context: Any) -> None:
        self._rng = random.Random(self.seed)
        self._pool = "".join(samples("prose", 40, self.seed) + samples("code", 40, self.seed))

    @property
    def _llm_type(self) -> str:
        return "bench-scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, BaseMessage]:
        names = [getattr(t, "name", None) or t.get("function", {}).get("name") for t in tools]
        return self.bind(tools=names, **kwargs)

    def text(self, size: int) -> str:
        start = self._rng.randrange(0, len(self._pool) - size)
        return self._pool[start : start + size]

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self._n += 1
        prompt_chars = sum(len(str(m.content)) for m in messages)
        usage = {
            "input_tokens": prompt_chars // CHARS_PER_TOKEN,
            "output_tokens": 100,
            "total_tokens": prompt_chars // CHARS_PER_TOKEN + 100,
        }
        rng = self._rng
        if not kwargs.get("tools"):
            reply = AIMessage(self.text(SUMMARY_BYTES), usage_metadata=usage)  # type: ignore[arg-type]
        else:
            last = messages[-1]
            if not isinstance(last, ToolMessage):
                self._steps_left = rng.randint(1, 4)
            if self._steps_left > 0:
                self._steps_left -= 1
                calls = [
                    {
                        "name": "read_file",
                        "args": {"path": rng.choice(self.files)},
                        "id": f"call_{self._n}_{c}",
                        "type": "tool_call",
                    }
                    for c in range(rng.choice((1, 1, 1, 2, 3)))
                ]
                reply = AIMessage(
                    self.text(rng.randint(0, 300)),
                    tool_calls=calls,
                    usage_metadata=usage,  # type: ignore[arg-type]
                )
            else:
                reply = AIMessage(self.text(rng.randint(200, 2000)), usage_metadata=usage)  # type: ignore[arg-type]
        return ChatResult(generations=[ChatGeneration(message=reply)])


def result_size(rng: random.Random) -> int:
    if rng.random() < LARGE_RESULT_PROBABILITY:
        return rng.randint(TOOL_RESULT_MAX_BYTES, LARGE_RESULT_MAX_BYTES)
    low, high = math.log10(TOOL_RESULT_MIN_BYTES), math.log10(TOOL_RESULT_MAX_BYTES)
    return int(10 ** rng.uniform(low, high))


def make_workspace(root: Path) -> list[str]:
    """Files of realistic sizes for ``read_file`` (lines of code and logs)."""
    rng = random.Random(SEED)
    pool = "".join(samples("code", 60, SEED) + samples("shell", 60, SEED))
    names = []
    for i in range(WORKSPACE_FILES):
        size = result_size(rng)
        start = rng.randrange(0, len(pool) - 1)
        text = (pool[start:] + pool)[:size]
        name = f"src/f{i:03d}.txt"
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
        names.append(name)
    return names


def payload_bytes(messages: Sequence[BaseMessage]) -> int:
    """Bytes of what the transcript says: contents and tool-call arguments."""
    total = 0
    for m in messages:
        content = m.content if isinstance(m.content, str) else json.dumps(m.content)
        total += len(content.encode("utf-8"))
        if isinstance(m, AIMessage):
            total += sum(len(json.dumps(c["args"])) for c in m.tool_calls)
    return total


def live_bytes(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        return int((pages - free) * size)
    finally:
        conn.close()


PG_CHECKPOINT_TABLES = (
    "checkpoints",
    "checkpoint_blobs",
    "checkpoint_writes",
    "agentgraph_archive",
)


def pg_bytes(url: str) -> int:
    """``pg_total_relation_size`` (heap, TOAST, indexes) of the checkpoint tables."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        total = 0
        for table in PG_CHECKPOINT_TABLES:
            row = conn.execute("SELECT pg_total_relation_size(to_regclass(%s))", (table,))
            total += int((row.fetchone() or (0,))[0] or 0)
        return total


SQLITE_CHECKPOINT_TABLES = ("checkpoints", "writes", "agentgraph_archive")


def sqlite_checkpoint_bytes(path: Path) -> int:
    """Pages of the checkpoint tables and their indexes (not the search index, the
    session index or free pages), from SQLite's ``dbstat``."""
    conn = sqlite3.connect(path)
    try:
        marks = ",".join("?" for _ in SQLITE_CHECKPOINT_TABLES)
        row = conn.execute(
            "SELECT sum(pgsize) FROM dbstat WHERE name IN "
            f"(SELECT name FROM sqlite_master WHERE tbl_name IN ({marks}))",
            SQLITE_CHECKPOINT_TABLES,
        ).fetchone()
        return int(row[0] or 0)
    finally:
        conn.close()


def store_bytes(settings: Settings) -> tuple[int, int, int]:
    """(bytes, live bytes, checkpoint bytes) of the SQLite file or PostgreSQL tables."""
    url = settings.database_url.get_secret_value() if settings.database_url else ""
    if url:
        size = pg_bytes(url)
        return size, size, size
    live = live_bytes(settings.db_path)
    return db_bytes(settings.db_path), live, sqlite_checkpoint_bytes(settings.db_path)


def _settings(home: Path, window: int, database_url: str = "") -> Settings:
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        AGENTGRAPH_DATABASE_URL=database_url,
        AGENTGRAPH_HOME=str(home),
        AGENTGRAPH_MODEL="gpt-4o",
        OPENAI_API_KEY="sk-bench",
        AGENTGRAPH_CONTEXT_WINDOW=str(window),
        AGENTGRAPH_PROVIDER_MAX_RETRIES="0",
        AGENTGRAPH_UNDO_MAX_FILES="0",
    )


@contextmanager
def _plain_pg_store(settings: Settings) -> Iterator[Store]:
    """LangGraph's own PostgresSaver under the same graph (no archive)."""
    from langgraph.checkpoint.postgres import PostgresSaver

    with open_store(settings) as store:
        pool = getattr(store.checkpointer, "conn", None)
        yield Store(checkpointer=PostgresSaver(pool), index=store.index, location=store.location)


@contextmanager
def _plain_store(settings: Settings) -> Iterator[Store]:
    """LangGraph's own SqliteSaver under the same graph: no memory, no pruning."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = settings.db_path
    conn = connect_sqlite(path)
    index_conn = connect_sqlite(path)
    saver = SqliteSaver(conn)
    saver.setup()
    try:
        yield Store(checkpointer=saver, index=SqliteSessionIndex(index_conn), location=str(path))
    finally:
        conn.close()
        index_conn.close()


def cpu_stats(times: Sequence[tuple[int, float, float]], count: int) -> dict[str, float]:
    """Median, p99 and max CPU ms of the turns in the mark's latency window."""
    recent = sorted(c for n, _w, c in times if n >= count * (1 - LATENCY_WINDOW_FRACTION))
    return {
        "cpu_median_ms": statistics.median(recent) * 1000,
        "cpu_p99_ms": recent[min(len(recent) - 1, int(len(recent) * 0.99))] * 1000,
        "cpu_max_ms": recent[-1] * 1000,
    }


def run_agent(
    kind: str,
    window: int,
    limit: int,
    tmp: Path,
    log: Callable[[str], None],
    database_url: str = "",
    profiler: ThreadsProfiler | None = None,
    floor: FloorProbe | None = None,
) -> dict[int, dict[str, Any]]:
    """Turns on the real Agent until ``limit`` messages; stats at each mark.

    With ``profiler``, the turns in the last mark's latency window are profiled. With
    ``floor``, each turn in a mark's latency window is followed by one of the floor's,
    whose median is reported beside the run's (``floor_median_ms``).
    """
    home = tmp / f"{kind}-{window}"
    ws = home / "ws"
    ws.mkdir(parents=True)
    files = make_workspace(ws)
    settings = _settings(home, window, database_url)
    prompts = BenchModel(seed=SEED + 1, files=files)
    openers = {"delta": _plain_store, "postgres-plain": _plain_pg_store}
    opener = openers.get(kind, open_store)
    marks = sorted({m for m in MARKS_MESSAGES if m <= limit} | {limit})
    results: dict[int, dict[str, Any]] = {}
    with opener(settings) as store:
        agent = Agent(settings, store, model=BenchModel(files=files), sleep=lambda _s: None)
        gc.collect()
        gc.freeze()  # as the CLI does after start-up
        times: list[tuple[int, float, float]] = []
        floor_cpu: list[float] = []  # the floor's turns in the current latency window
        count = 0
        turn = 0
        deadline = time.monotonic() + RUN_TIME_BUDGET_S
        while marks and time.monotonic() < deadline:
            turn += 1
            profiling = profiler is not None and count >= limit * (1 - LATENCY_WINDOW_FRACTION)
            text = prompts.text(prompts._rng.randint(50, 600))
            start, cpu_start = time.perf_counter(), time.process_time()
            if profiling and profiler is not None:
                with profiler:
                    agent.run_turn(THREAD, text, ws)
            else:
                agent.run_turn(THREAD, text, ws)
            elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
            info = store.index.get(THREAD)
            count = info.message_count if info else count
            times.append((count, elapsed, cpu))
            if floor is not None and count >= marks[0] * (1 - LATENCY_WINDOW_FRACTION):
                floor_cpu.append(floor.turn())
            if count >= marks[0]:
                mark = marks.pop(0)
                window_from = count * (1 - LATENCY_WINDOW_FRACTION)
                recent = sorted(t for c, t, _cpu in times if c >= window_from)
                messages = agent.graph.get_state({"configurable": {"thread_id": THREAD}}).values[
                    "messages"
                ]
                size, live, checkpoint_size = store_bytes(settings)
                results[mark] = {
                    "messages": count,
                    "turns": turn,
                    "bytes": size,
                    "live": live,
                    "checkpoints": checkpoint_size,
                    "payload": payload_bytes(messages),
                    "compactions": info.compactions if info else 0,
                    "median_ms": statistics.median(recent) * 1000,
                    "p99_ms": recent[min(len(recent) - 1, int(len(recent) * 0.99))] * 1000,
                    "max_ms": recent[-1] * 1000,
                    "turns_in_window": len(recent),
                    **cpu_stats(times, count),
                }
                if floor_cpu:
                    results[mark]["floor_median_ms"] = statistics.median(floor_cpu) * 1000
                    floor_cpu = []
                log(f"{kind} {window}: {results[mark]}")
        gc.unfreeze()
    return results


class _ReactApp(NamedTuple):
    """A prebuilt agent ready to drive, with what a turn needs besides it."""

    app: Any
    context: Any  # the RunContext of every turn (the generated workspace)
    prompts: BenchModel  # user turns (its own seed, so the turns are the same per run)


def _react_app(home: Path, window: int, saver: Any) -> _ReactApp:
    """LangGraph's ``create_react_agent`` on a generated workspace under ``home``.

    The same scripted model and real tools as agentgraph's runs, so only the graph
    and the saver differ.

    Args:
        home: Directory of the run; the workspace is made in ``home / "ws"``.
        window: Context window of the settings the tools are built from (tokens).
        saver: The agent's checkpointer.

    Returns:
        The compiled agent, its run context and the user-turn generator.
    """
    from langgraph.prebuilt import create_react_agent

    from agentgraph.capabilities.tools import build_tools
    from agentgraph.runtime.runctx import RunContext

    ws = home / "ws"
    ws.mkdir(parents=True)
    files = make_workspace(ws)
    app = create_react_agent(
        BenchModel(files=files),
        build_tools(_settings(home, window)),
        checkpointer=saver,
        context_schema=RunContext,
    )
    return _ReactApp(
        app=app,
        context=RunContext(workspace_path=str(ws)),
        prompts=BenchModel(seed=SEED + 1, files=files),
    )


def run_react(limit: int, tmp: Path, log: Callable[[str], None]) -> dict[int, dict[str, Any]]:
    """LangGraph's prebuilt agent: add_messages, whole list in every checkpoint."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    home = tmp / "react"
    home.mkdir(parents=True)  # the database file sits beside the workspace
    path = home / "react.db"
    conn = connect_sqlite(path)
    app, context, prompts = _react_app(home, 128_000, SqliteSaver(conn))
    config = {"configurable": {"thread_id": THREAD}, "recursion_limit": 100}
    results: dict[int, dict[str, Any]] = {}
    times: list[tuple[int, float]] = []
    count = turn = 0
    deadline = time.monotonic() + RUN_TIME_BUDGET_S
    try:
        while count < limit and time.monotonic() < deadline:
            turn += 1
            start, cpu_start = time.perf_counter(), time.process_time()
            out = app.invoke(
                {"messages": [HumanMessage(prompts.text(prompts._rng.randint(50, 600)))]},
                config,
                context=context,
            )
            cpu = time.process_time() - cpu_start
            times.append((len(out["messages"]), time.perf_counter() - start, cpu))
            count = len(out["messages"])
        recent = sorted(t for c, t, _cpu in times if c >= count * (1 - LATENCY_WINDOW_FRACTION))
        results[limit] = {
            "messages": count,
            "turns": turn,
            "bytes": db_bytes(path),
            "live": live_bytes(path),
            "payload": payload_bytes(out["messages"]),
            "compactions": 0,
            "median_ms": statistics.median(recent) * 1000,
            "p99_ms": recent[min(len(recent) - 1, int(len(recent) * 0.99))] * 1000,
            "max_ms": recent[-1] * 1000,
            "turns_in_window": len(recent),
            **cpu_stats(times, count),
        }
        log(f"react: {results[limit]}")
    finally:
        conn.close()
    return results


FLOOR_TURNS = 200


class FloorProbe(contextlib.AbstractContextManager["FloorProbe"]):
    """LangGraph's own turn for the same turn shape, without any history, one at a time.

    ``create_react_agent`` (model node + ``ToolNode``) with the same scripted model
    and the real tools, each turn on a fresh thread, so nothing grows: what is left
    is LangGraph's per-step machinery and checkpoint writes (``memory``:
    ``InMemorySaver``; ``sqlite``: ``SqliteSaver`` on a file). Interleaved with an
    agentgraph run, its turns see the same minutes of the machine, whose speed here
    swung by half between hours and by a third between minutes.
    """

    def __init__(self, saver_kind: str, tmp: Path) -> None:
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.checkpoint.sqlite import SqliteSaver

        home = tmp / f"floor-{saver_kind}"
        home.mkdir(parents=True)  # the database file sits beside the workspace
        self._conn = connect_sqlite(home / "floor.db")
        saver: Any = SqliteSaver(self._conn) if saver_kind == "sqlite" else InMemorySaver()
        self._app, self._context, self._prompts = _react_app(home, 16_000, saver)
        self.turns = 0
        self.steps = 0

    def turn(self) -> float:
        """One turn on a fresh thread: its CPU seconds (this process)."""
        self.turns += 1
        config = {"configurable": {"thread_id": f"floor-{self.turns}"}, "recursion_limit": 100}
        text = self._prompts.text(self._prompts._rng.randint(50, 600))
        start = time.process_time()
        out = self._app.invoke({"messages": [HumanMessage(text)]}, config, context=self._context)
        cpu = time.process_time() - start
        self.steps += sum(isinstance(m, AIMessage) for m in out["messages"]) * 2 - 1
        return cpu

    def __exit__(self, *_exc: object) -> None:
        self._conn.close()


def run_floor(saver_kind: str, tmp: Path, log: Callable[[str], None]) -> dict[str, float]:
    """:class:`FloorProbe`'s turns alone: ``FLOOR_TURNS`` of them."""
    with FloorProbe(saver_kind, tmp) as probe:
        cpu = sorted(probe.turn() for _ in range(FLOOR_TURNS))
    result = {
        "turns": len(cpu),
        "steps_per_turn": probe.steps / len(cpu),
        "cpu_median_ms": statistics.median(cpu) * 1000,
        "cpu_p99_ms": cpu[min(len(cpu) - 1, int(len(cpu) * 0.99))] * 1000,
    }
    log(f"floor {saver_kind}: {result}")
    return result


# The run packs a session's hours of turns into a minute or two, which autovacuum's
# default pace (a visit a minute) never sees: pruned rows would stay as dead tuples. A
# visit a second reclaims them at about the pace, in turns, of a real session.
PG_BENCH_SETTINGS = ("autovacuum_naptime=1",)


def run_postgres(
    limit: int, tmp: Path, log: Callable[[str], None]
) -> dict[str, dict[int, dict[str, Any]]]:
    """agentgraph and LangGraph's PostgresSaver on a loopback server, 16k window."""
    from tests.fixtures_pg import running_postgres

    runs: dict[str, dict[int, dict[str, Any]]] = {}
    with running_postgres(settings=PG_BENCH_SETTINGS) as server:
        for kind, name in (
            ("postgres", "agentgraph on PostgreSQL, 16k"),
            ("postgres-plain", "DeltaChannel + PostgresSaver, 16k"),
        ):
            url = server.create_database()
            runs[name] = run_agent(kind, 16_000, limit, tmp, log, database_url=url)
    return runs


def bench_undo(workdir: Path) -> dict[str, Any] | None:
    """Cost of the undo snapshots on a 5,000-file workspace."""
    try:
        from agentgraph.session.undo import UndoStore
    except ImportError:
        return None
    ws = workdir / "ws"
    rng = random.Random(SEED)
    for i in range(UNDO_FILES):
        p = ws / f"pkg{i % 50}" / f"mod{i}.py"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(rng.randbytes(UNDO_FILE_BYTES // 2).hex().encode()[:UNDO_FILE_BYTES])
    undo = UndoStore(workdir / "snapshots" / "bench")
    t0 = time.perf_counter()
    before = undo.snapshot(ws)
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    before = undo.snapshot(ws, previous=before)
    again = time.perf_counter() - t0
    for i in range(10):
        (ws / f"pkg{i % 50}" / f"mod{i}.py").write_text(f"changed {i}\n")
    t0 = time.perf_counter()
    undo.record_turn(ws, before)
    diff = time.perf_counter() - t0
    t0 = time.perf_counter()
    undo.undo(ws, 1)
    undo_s = time.perf_counter() - t0
    store_bytes = sum(f.stat().st_size for f in (workdir / "snapshots").rglob("*") if f.is_file())
    return {
        "files": UNDO_FILES,
        "bytes": UNDO_FILES * UNDO_FILE_BYTES,
        "first_ms": first * 1000,
        "again_ms": again * 1000,
        "diff_ms": diff * 1000,
        "undo_ms": undo_s * 1000,
        "store_bytes": store_bytes,
    }


def report_undo(undo: dict[str, Any]) -> str:
    lines = [
        "# Undo snapshots",
        "",
        "Command: `uv run python bench/bench_storage.py --only undo`",
        "",
        f"Workspace of {undo['files']:,} files of {UNDO_FILE_BYTES:,} B "
        f"({mb(undo['bytes'])}); `.git`, `.venv`, `node_modules`, `__pycache__` skipped.",
        "",
        "| operation | ms |",
        "| --- | ---: |",
        f"| first snapshot (hash + copy every file) | {undo['first_ms']:.0f} |",
        f"| later snapshot (mtime/size unchanged → no re-hash) | {undo['again_ms']:.0f} |",
        f"| record turn changes (10 files changed) | {undo['diff_ms']:.0f} |",
        f"| undo that turn | {undo['undo_ms']:.0f} |",
        "",
        f"Snapshot store after the first snapshot: {mb(undo['store_bytes'])} (content-addressed, "
        "shared by all turns of the session).",
    ]
    return "\n".join(lines) + "\n"


def mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def report(runs: dict[str, dict[int, dict[str, Any]]], command: str) -> str:
    lines = [
        "# Storage and turn cost on the real graph",
        "",
        f"Command: `{command}`",
        "",
        (__doc__ or "").split("\n\n", 1)[1].strip(),
        "",
        "| backend | messages | compactions | DB bytes | live bytes | checkpoint bytes "
        "| payload | DB / payload | checkpoints / payload "
        "| CPU ms/turn median | p99 | max | wall ms/turn median | p99 | max |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, marks in runs.items():
        for _mark, r in sorted(marks.items()):
            checkpoints = r.get("checkpoints", r["live"])
            lines.append(
                f"| {name} | {r['messages']:,} | {r['compactions']} | {mb(r['bytes'])} "
                f"| {mb(r['live'])} | {mb(checkpoints)} | {mb(r['payload'])} "
                f"| {r['bytes'] / r['payload']:.2f}× | {checkpoints / r['payload']:.2f}× "
                f"| {r.get('cpu_median_ms', 0):.1f} | {r.get('cpu_p99_ms', 0):.1f} "
                f"| {r.get('cpu_max_ms', 0):.1f} "
                f"| {r['median_ms']:.1f} | {r['p99_ms']:.1f} | {r['max_ms']:.1f} |"
            )
    lines += ["", "Ratios (same run):", ""]
    for name, marks in runs.items():
        have = sorted(marks)
        if len(have) >= 2:
            a, b = marks[have[-2]], marks[have[-1]]
            first = marks[have[0]]
            ckpt = b.get("checkpoints", b["live"]) / a.get("checkpoints", a["live"])
            lines.append(
                f"* {name}: bytes ×{b['bytes'] / a['bytes']:.2f} (checkpoints ×{ckpt:.2f}) "
                f"for messages "
                f"×{b['messages'] / a['messages']:.2f} ({a['messages']:,} → {b['messages']:,}); "
                f"median turn CPU {first.get('cpu_median_ms', 0):.1f} → "
                f"{b.get('cpu_median_ms', 0):.1f} ms, wall "
                f"{first['median_ms']:.1f} → {b['median_ms']:.1f} ms "
                f"(×{b['median_ms'] / first['median_ms']:.2f}, {first['messages']:,} → "
                f"{b['messages']:,} messages)"
            )
    lines += floor_lines(runs)
    return "\n".join(lines) + "\n"


def floor_lines(runs: dict[str, dict[int, dict[str, Any]]]) -> list[str]:
    """Each mark's median turn against LangGraph's floor measured in the same minutes."""
    rows = [
        f"| {name} | {r['messages']:,} | {r['cpu_median_ms']:.1f} | {r['floor_median_ms']:.1f} "
        f"| {r['cpu_median_ms'] / r['floor_median_ms']:.2f}× "
        f"| {r['cpu_median_ms'] - r['floor_median_ms']:+.1f} |"
        for name, marks in runs.items()
        for _mark, r in sorted(marks.items())
        if "floor_median_ms" in r
    ]
    if not rows:
        return []
    return [
        "",
        "Against LangGraph's floor in the same minutes: after each turn of a mark's latency "
        "window, one turn of `create_react_agent` on `SqliteSaver` with the same scripted "
        "model and tools and no history (a fresh thread each time; `--floor` runs it alone). "
        "CPU ms per turn, medians:",
        "",
        "| run | messages | agentgraph | floor | ratio | difference |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
        *rows,
    ]


class ThreadsProfiler:
    """cProfile of the calling thread and of every thread started while enabled.

    LangGraph runs the nodes in worker threads that a profile of the main thread
    alone shows only as waiting on a lock. Times are each thread's CPU time
    (``time.thread_time``): waiting for a lock, a queue or the disk costs nothing.
    """

    def __init__(self) -> None:
        self.main = cProfile.Profile(time.thread_time)
        self.workers: list[cProfile.Profile] = []

    def _start_in_thread(self, _frame: Any, _event: str, _arg: Any) -> None:
        sys.setprofile(None)
        profile = cProfile.Profile(time.thread_time)
        self.workers.append(profile)
        profile.enable()

    def __enter__(self) -> ThreadsProfiler:
        threading.setprofile(self._start_in_thread)
        self.main.enable()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.main.disable()
        threading.setprofile(None)  # type: ignore[arg-type]

    def report(self) -> str:
        """The top functions of all threads by cumulative and by own time."""
        out = io.StringIO()
        for key in ("cumulative", "tottime"):
            out.write(f"\n=== all threads, sorted by {key} ===\n")
            stats = pstats.Stats(self.main, stream=out)
            for profile in self.workers:
                stats.add(profile)
            stats.sort_stats(key).print_stats(PROFILE_TOP)
        return out.getvalue()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--messages", type=int, default=MARKS_MESSAGES[-1])
    parser.add_argument(
        "--only", choices=("agentgraph", "delta", "react", "undo", "postgres"), action="append"
    )
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument(
        "--quick", action="store_true", help="agentgraph at one window only (--window), no write"
    )
    parser.add_argument(
        "--window", type=int, default=16_000, help="context window of --quick (tokens)"
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="with --quick: cProfile the turns of the last latency window (top 40 functions)",
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="LangGraph's own per-turn CPU (create_react_agent, no history), no write",
    )
    args = parser.parse_args(argv)
    if args.floor:
        with tempfile.TemporaryDirectory(prefix="agentgraph-floor-") as tmp:
            for saver_kind in ("memory", "sqlite"):
                run_floor(saver_kind, Path(tmp), print)
        return 0
    if args.quick:
        profiler = ThreadsProfiler() if args.profile else None
        with tempfile.TemporaryDirectory(prefix="agentgraph-storage-") as tmp:
            # A profile would count the floor's turns as the run's: none then.
            floor: contextlib.AbstractContextManager[FloorProbe | None] = (
                contextlib.nullcontext()
                if profiler is not None
                else FloorProbe("sqlite", Path(tmp))
            )
            with floor as probe:
                quick = run_agent(
                    "agentgraph",
                    args.window,
                    args.messages,
                    Path(tmp),
                    print,
                    profiler=profiler,
                    floor=probe,
                )
        name = f"agentgraph, {args.window // 1000}k window"
        print(report({name: quick}, "--quick (not written)"))
        if profiler is not None:
            print(profiler.report())
        return 0
    only = set(args.only or ("agentgraph", "delta", "react", "undo", "postgres"))
    runs: dict[str, dict[int, dict[str, Any]]] = {}
    if "undo" in only:
        with tempfile.TemporaryDirectory(prefix="agentgraph-undo-") as tmp:
            undo = bench_undo(Path(tmp))
        if undo is not None:
            print(report_undo(undo))
            if not args.no_write:
                UNDO_OUTPUT_PATH.write_text(report_undo(undo), encoding="utf-8")
        if only == {"undo"}:
            return 0
    with tempfile.TemporaryDirectory(prefix="agentgraph-storage-") as tmp:
        if "agentgraph" in only:
            with FloorProbe("sqlite", Path(tmp)) as probe:
                runs["agentgraph, 16k window"] = run_agent(
                    "agentgraph", 16_000, args.messages, Path(tmp), print, floor=probe
                )
                runs["agentgraph, 128k window"] = run_agent(
                    "agentgraph", 128_000, args.messages, Path(tmp), print, floor=probe
                )
        if "delta" in only:
            runs["DeltaChannel + SqliteSaver, 16k"] = run_agent(
                "delta", 16_000, args.messages, Path(tmp), print
            )
        if "postgres" in only:
            runs.update(run_postgres(args.messages, Path(tmp), print))
        if "react" in only:
            runs["create_react_agent + add_messages"] = run_react(
                min(args.messages, BASELINE_REACT_MAX_MESSAGES), Path(tmp), print
            )
    command = (
        "uv run python bench/bench_storage.py"
        + "".join(f" --only {name}" for name in args.only or ())
        + (f" --messages {args.messages}" if args.messages != MARKS_MESSAGES[-1] else "")
    )
    text = report(runs, command)
    print(text)
    if not args.no_write:
        OUTPUT_PATH.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
