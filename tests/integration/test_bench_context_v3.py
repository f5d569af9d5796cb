"""bench/bench_context_v3.py's command line: agentgraph's own settings for its runs, the
summarizers asked for everywhere, the editing workload."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.sandbox_helpers import bin_without_bwrap

ROOT = Path(__file__).resolve().parents[2]
BENCH_TIMEOUT_S = 300
CELL = ["--quick", "--workload", "small-middle", "--persona", "silent"]
CELL += ["--summarizer", "faithful", "--harness", "agentgraph", "--json"]


def _bench(*args: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENTGRAPH_"))}
    if path is not None:
        env["PATH"] = path
    return subprocess.run(
        [sys.executable, "bench/bench_context_v3.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=BENCH_TIMEOUT_S,
    )


def _row(*args: str) -> dict[str, Any]:
    proc = _bench(*CELL, *args)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (row,) = json.loads(proc.stdout)
    assert isinstance(row, dict)
    return row


def _measured(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k != "wall_s"}


def test_a_cell_measures_the_same_in_every_process_and_a_setting_changes_it() -> None:
    """Each process runs in a folder of its own whose paths tokenize alike: a cell's
    counts do not depend on where it ran (with random folder names, where compactions
    fell moved from run to run)."""
    default = _row()
    assert _measured(_row()) == _measured(default)
    earlier = _row("--agentgraph-setting", "AGENTGRAPH_COMPACT_THRESHOLD=0.6")
    assert earlier["facts"] == default["facts"] == default["facts_total"]
    assert earlier["compactions"] > default["compactions"] > 0
    assert earlier["prompt_tokens"] < default["prompt_tokens"]


def test_a_setting_that_is_not_agentgraphs_or_not_valid_exits_2_with_one_error_line() -> None:
    for spec in ("OPENAI_API_KEY=x", "AGENTGRAPH_NOPE=1", "AGENTGRAPH_COMPACT_THRESHOLD=x"):
        proc = _bench("--agentgraph-setting", spec, "--workload", "small-middle")
        assert proc.returncode == 2
        errors = [line for line in proc.stderr.splitlines() if "error:" in line]
        assert len(errors) == 1 and "--agentgraph-setting" in errors[0]
        assert "Traceback" not in proc.stderr


def test_a_summarizer_everywhere_adds_its_cells_to_every_workload() -> None:
    """The matrix tries the verbose summarizer on the 20 KB files only; asked for it
    everywhere, ``small-middle`` gets a verbose cell, and its facts are all kept."""
    args = ["--quick", "--workload", "small-middle", "--persona", "silent"]
    args += ["--summarizer", "verbose", "--harness", "agentgraph", "--json"]
    plain = _bench(*args)
    assert plain.returncode == 0 and json.loads(plain.stdout) == []
    proc = _bench(*args, "--summarizer-everywhere", "verbose")
    assert proc.returncode == 0, proc.stderr[-2000:]
    (row,) = json.loads(proc.stdout)
    assert row["summarizer"] == "verbose"
    assert row["facts"] == row["facts_total"]


@pytest.mark.parametrize("workload", ["edit-small", "edit-lag"])
def test_the_editing_workloads_mark_every_file_done_and_show_their_columns(
    tmp_path: Path, workload: str
) -> None:
    """Each harness edits every file (agentgraph's edit_file, the LangChain peer's own;
    with a lag twice, started then done), and the report adds the editing columns.
    agentgraph reads no file twice: a compaction right after a read keeps that read in
    view for the model to edit from (summarized only, the model read it again, its exact
    lines in no summary), and one while a file waits for its second edit shows the lines
    around its first."""
    out = tmp_path / "edits.md"
    args = ["--quick", "--workload", workload, "--persona", "silent"]
    args += ["--summarizer", "faithful", "--harness", "agentgraph"]
    args += ["--harness", "lc-summary-untrimmed", "--out", str(out)]
    proc = _bench(*args, "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "| files read twice | marked done | files edited twice |" in out.read_text()
    rows = json.loads(proc.stdout)
    assert [r["harness"] for r in rows] == ["agentgraph", "lc-summary-untrimmed"]
    for row in rows:
        assert row["finished"] == "yes"
        assert row["marked_done"] == row["facts_total"] == row["facts"]
        assert row["edited_twice"] == 0
        assert row["compactions"] is None or row["compactions"] > 0
    assert rows[0]["compactions"] > 0 and rows[0]["read_twice"] == 0


def test_the_editing_workload_runs_only_when_named() -> None:
    """The tables without ``--workload`` are the read workloads they were made of."""
    args = ["--quick", "--persona", "silent", "--summarizer", "lossy"]
    args += ["--harness", "agentgraph", "--json"]
    proc = _bench(*args)
    assert proc.returncode == 0, proc.stderr[-2000:]
    names = {row["workload"] for row in json.loads(proc.stdout)}
    assert names and not names & {"edit-small", "edit-lag"}


def test_files_runs_each_single_turn_workload_at_each_size_and_rejects_zero() -> None:
    """Where the compactions of a task fall against its end moves its totals: the same
    workload at several sizes is one table."""
    args = ["--workload", "small-middle", "--workload", "multi-turn+restart", "--quick"]
    args += ["--persona", "silent", "--summarizer", "faithful", "--harness", "agentgraph"]
    proc = _bench(*args, "--files", "3", "--files", "5", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads(proc.stdout)
    names = [row["workload"] for row in rows]
    assert names == ["small-middle, 3 files", "small-middle, 5 files", "multi-turn+restart"]
    assert [row["facts_total"] for row in rows[:2]] == [3, 5]
    assert all(row["facts"] == row["facts_total"] for row in rows)
    for bad in ("0", "-2", "x"):
        proc = _bench(*args, "--files", bad)
        assert proc.returncode == 2
        errors = [line for line in proc.stderr.splitlines() if "error:" in line]
        assert len(errors) == 1 and "--files" in errors[0]
        assert "Traceback" not in proc.stderr


def test_a_model_paging_numbered_lines_reads_files_over_a_page_once_each() -> None:
    """``--shell nl`` pages files over a read page (``nl -ba F | sed -n '1,200p'``, then
    from the offset a page note names): agentgraph cuts such a page as read_file's, and
    the re-reading model keeps every code of the 20 KB files with the code mid-file and
    reads none twice (cut head and tail, the pages' middle lines were gone unsaid, and at
    8k it read all 30 twice). Styles that page no file still refuse those files."""
    args = ["--workload", "big-middle", "--persona", "re_reader", "--summarizer", "faithful"]
    args += ["--harness", "agentgraph", "--window", "8192", "--json"]
    proc = _bench(*args, "--shell", "nl")
    assert proc.returncode == 0, proc.stderr[-2000:]
    (row,) = json.loads(proc.stdout)
    assert row["finished"] == "yes"
    assert row["facts"] == row["facts_total"] == 30
    assert row["read_twice"] == 0
    refused = _bench(*args, "--shell", "grep")
    assert refused.returncode == 2
    assert "pages no file" in refused.stderr and "Traceback" not in refused.stderr


def test_without_bubblewrap_the_shell_workloads_run_their_commands_unsandboxed(
    tmp_path: Path,
) -> None:
    """On a machine without bubblewrap agentgraph's default sandbox mode asks before each
    command, which a benchmark cannot answer: every command of a shell workload was
    refused and the run stopped on the repeated call. The bench runs them unsandboxed
    instead, says so in one line, and the report's command carries the setting, so that
    it measures the same wherever it runs."""
    path = bin_without_bwrap(tmp_path / "bin", names=())
    args = ["--workload", "big-middle", "--persona", "re_reader", "--summarizer", "faithful"]
    args += ["--harness", "agentgraph", "--window", "8192", "--shell", "nl"]
    out = tmp_path / "report.md"
    proc = _bench(*args, "--json", "--out", str(out), path=path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (row,) = json.loads(proc.stdout)
    assert row["finished"] == "yes"
    assert row["facts"] == row["facts_total"] == 30
    assert row["read_twice"] == 0
    said = [line for line in proc.stderr.splitlines() if "AGENTGRAPH_SANDBOX=off" in line]
    assert len(said) == 1 and "bwrap is not installed" in said[0], proc.stderr[-2000:]
    assert "--agentgraph-setting AGENTGRAPH_SANDBOX=off" in out.read_text(encoding="utf-8")
    chosen = _bench(*args, "--json", "--agentgraph-setting", "AGENTGRAPH_SANDBOX=on", path=path)
    assert chosen.returncode == 0, chosen.stderr[-2000:]
    (refused,) = json.loads(chosen.stdout)
    assert refused["finished"] != "yes"
    assert "AGENTGRAPH_SANDBOX=off" not in chosen.stderr
