"""Benchmark: what cutting a tool output to its cap costs, and how close the marker is.

Run: ``uv run python bench/bench_cuts.py`` (writes docs/bench/cuts.md; ``--no-write``
prints only).

The tools node's own steps on the benchmark corpus (``bench/corpus.py``): whether the
output fits the cap (``TokenCounter.fits``), then ``truncate_tool_output`` to 1,000
o200k tokens, in one process, alternating:

* ``fitting``: the text counted whole, head and tail fitted by counting pieces (the
  path of every counter without an exact tokenizer, and of o200k before);
* ``offsets``: the exact tokenizer's ``codec`` — counted up to the cap, cut at token
  offsets, the removed middle counted when short and estimated when long.

Reported: CPU ms per output (median of five passes over the same outputs, each with a
fresh counter), the kept tokens, and for ``offsets`` the error of the marker's N against
the exact count of what was removed.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from corpus import samples  # noqa: E402

from agentgraph.context.tokens import TokenCounter  # noqa: E402
from agentgraph.context.truncation import truncate_tool_output  # noqa: E402

CAP_TOKENS = 1_000
OUTPUTS = 300
PASSES = 5
SEED = 7
KINDS = ("code", "shell", "prose", "json")
ARTIFACT = "/home/user/.agentgraph/artifacts/thread/tool-0123456789abcdef.txt"


def outputs(rng: random.Random) -> list[str]:
    """5-60 KB outputs of one kind, or half of one kind and half of another."""
    pools = {kind: "".join(samples(kind, 60, SEED)) for kind in KINDS}
    made = []
    for i in range(OUTPUTS):
        size = rng.randint(5_000, 60_000)
        if i % 4 == 3:
            first, second = rng.sample(KINDS, 2)
            made.append(pools[first][: size // 2] + pools[second][: size // 2])
        else:
            pool = pools[rng.choice(KINDS)]
            start = rng.randrange(0, len(pool) - size - 1)
            made.append(pool[start : start + size])
    return made


def one_pass(texts: Sequence[str], offsets: bool) -> tuple[float, list[int], list[int]]:
    """CPU ms per output, kept tokens, marker N of each cut output."""
    counter = TokenCounter("gpt-4o")
    codec = counter.codec if offsets else None
    kept, reported = [], []
    start = time.process_time()
    for text in texts:
        if counter.fits(text, CAP_TOKENS):
            continue
        cut = truncate_tool_output(
            text, CAP_TOKENS, count=counter.count_text, artifact_path=ARTIFACT, codec=codec
        )
        kept.append(cut.kept_tokens)
        reported.append(cut.removed_tokens)
    return (time.process_time() - start) * 1000 / len(texts), kept, reported


def huge(mib: int, offsets: bool) -> float:
    """CPU ms to cut one output of ``mib`` MiB of code and logs."""
    pool = "".join(samples("code", 60, SEED) + samples("shell", 60, SEED))
    text = (pool * (mib * 2**20 // len(pool) + 1))[: mib * 2**20]
    counter = TokenCounter("gpt-4o")
    start = time.process_time()
    truncate_tool_output(
        text,
        CAP_TOKENS,
        count=counter.count_text,
        artifact_path=ARTIFACT,
        codec=counter.codec if offsets else None,
    )
    return (time.process_time() - start) * 1000


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-write", action="store_true", help="do not write docs/bench")
    args = parser.parse_args(argv)
    texts = outputs(random.Random(SEED))
    times: dict[bool, list[float]] = {False: [], True: []}
    results: dict[bool, tuple[list[int], list[int]]] = {}
    for _ in range(PASSES):
        for offsets in (False, True):
            ms, kept, reported = one_pass(texts, offsets)
            times[offsets].append(ms)
            results[offsets] = (kept, reported)
    exact = TokenCounter("gpt-4o")
    errors = []
    cut_texts = [t for t in texts if not exact.fits(t, CAP_TOKENS)]
    for text, kept, reported in zip(cut_texts, *results[True], strict=True):
        removed = exact.count_text(text) - kept
        errors.append(abs(reported - removed) / removed)
    errors.sort()
    huge_ms = {offsets: huge(10, offsets) for offsets in (False, True)}
    fit_ms, off_ms = (statistics.median(times[o]) for o in (False, True))
    lines = [
        "# Cutting tool outputs",
        "",
        "Command: `uv run python bench/bench_cuts.py` (a few seconds).",
        "",
        f"{OUTPUTS} outputs of 5-60 KB from the benchmark corpus ({', '.join(KINDS)}; every",
        "fourth half one kind, half another), checked against and cut to "
        f"{CAP_TOKENS:,} o200k tokens",
        f"as the tools node does; CPU per output, median of {PASSES} alternating passes.",
        "",
        "| path | CPU ms per output | kept tokens, median | marker N error, median | 90th pct. | max |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
        f"| fitting (count whole, fit pieces) | {fit_ms:.2f} | "
        f"{statistics.median(results[False][0]):.0f} | exact | exact | exact |",
        f"| offsets (exact tokenizer's codec) | {off_ms:.2f} | "
        f"{statistics.median(results[True][0]):.0f} | {100 * statistics.median(errors):.1f}% | "
        f"{100 * errors[int(0.9 * len(errors))]:.1f}% | {100 * errors[-1]:.1f}% |",
        "",
        f"Offsets / fitting: {off_ms / fit_ms:.2f}×. One 10 MiB output of code and logs: "
        f"{huge_ms[False]:.0f} ms fitting, {huge_ms[True]:.1f} ms by offsets.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        (ROOT / "docs" / "bench" / "cuts.md").write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
