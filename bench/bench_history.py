"""Benchmark: agentgraph's prompt view vs langchain_core's ``trim_messages``.

Run: ``uv run python bench/bench_history.py`` (writes docs/bench/history.md).

Synthetic coding-agent histories of 100, 1,000 and 10,000 messages (tool
results from 100 B to 200 KB, some CJK, parallel tool calls, a few interrupted
steps) are cut to several token budgets by:

* ``view``: ``build_prompt_view(max_tokens=budget)``;
* ``trim``: ``trim_messages(strategy="last", include_system=True)``;
* ``trim+human``: the same with ``start_on="human"``.

All use the same cheap counter (len(content)//4 + 4 per message). For each we
report the median time, the number of ``validate_history`` violations of the
result (each one is a request a provider would reject), and whether the latest
user request survived.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)

from agentgraph.runtime.history import (
    build_prompt_view,
    latest_user_request_index,
    validate_history,
)

SIZES_MESSAGES = (100, 1_000, 10_000)
BUDGETS_TOKENS = (8_000, 32_000, 128_000)
REPEATS_BY_SIZE = {100: 101, 1_000: 41, 10_000: 21}
SEED = 20_240_601
HUGE_RESULT_BYTES = 200_000
INTERRUPT_PROBABILITY = 0.03
CJK_PROBABILITY = 0.2
OUTPUT_PATH = Path(__file__).resolve().parent.parent / "docs" / "bench" / "history.md"

_ASCII_BASE = "".join(
    f"src/module_{i % 97}.py:{i}: def handler_{i}(request): ...\n" for i in range(6_000)
)
_CJK_BASE = "构建失败：找不到模块，请检查依赖配置。テストが失敗しました。" * 4_000


def count(messages: Sequence[BaseMessage]) -> int:
    """Cheap counter shared by every method: len(content)//4 + 4 per message."""
    return sum(len(str(m.content)) // 4 + 4 for m in messages)


def _content(rng: random.Random, size: int) -> str:
    base = _CJK_BASE if rng.random() < CJK_PROBABILITY else _ASCII_BASE
    start = rng.randrange(0, len(base) - size) if size < len(base) else 0
    return base[start : start + size]


def _result_size(rng: random.Random) -> int:
    r = rng.random()
    if r < 0.70:
        return rng.randint(100, 2_000)
    if r < 0.90:
        return rng.randint(2_000, 20_000)
    if r < 0.98:
        return rng.randint(20_000, 80_000)
    return HUGE_RESULT_BYTES


def make_history(n_messages: int, seed: int = SEED) -> list[BaseMessage]:
    """A coding-agent session of about ``n_messages`` messages."""
    rng = random.Random(seed)
    msgs: list[BaseMessage] = [SystemMessage("You are a coding agent.", id="sys")]
    call_n = 0
    turn = 0
    while len(msgs) < n_messages:
        turn += 1
        msgs.append(HumanMessage(_content(rng, rng.randint(40, 600)), id=f"h{turn}"))
        for step in range(rng.randint(1, 6)):
            ids = []
            for _ in range(rng.choice((1, 1, 1, 2, 3))):
                call_n += 1
                ids.append(f"call_{call_n}")
            calls = [{"name": "bash", "args": {"cmd": f"step {step}"}, "id": i} for i in ids]
            text = _content(rng, rng.randint(0, 300)) if rng.random() < 0.5 else ""
            msgs.append(AIMessage(text, tool_calls=calls, id=f"a{turn}_{step}"))
            if rng.random() < INTERRUPT_PROBABILITY:
                break  # the user interrupted: these calls never got results
            for cid in ids:
                msgs.append(ToolMessage(_content(rng, _result_size(rng)), tool_call_id=cid))
        msgs.append(AIMessage(_content(rng, rng.randint(50, 1_500)), id=f"f{turn}"))
    return msgs[:n_messages]


def _view(msgs: list[BaseMessage], budget: int) -> list[BaseMessage]:
    system = [m for m in msgs[:1] if isinstance(m, SystemMessage)]
    return build_prompt_view(msgs, system=system, max_tokens=budget, counter=count).messages


def _trim(msgs: list[BaseMessage], budget: int) -> list[BaseMessage]:
    return trim_messages(
        msgs, strategy="last", token_counter=count, max_tokens=budget, include_system=True
    )


def _trim_human(msgs: list[BaseMessage], budget: int) -> list[BaseMessage]:
    return trim_messages(
        msgs,
        strategy="last",
        token_counter=count,
        max_tokens=budget,
        include_system=True,
        start_on="human",
    )


METHODS: dict[str, Callable[[list[BaseMessage], int], list[BaseMessage]]] = {
    "view": _view,
    "trim": _trim,
    "trim+human": _trim_human,
}


def _median_ms(fn: Callable[[], object], repeats: int) -> float:
    # Like timeit: no garbage collection inside the timed calls, so a collection
    # triggered by one method's garbage is not billed to another.
    times = []
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    finally:
        gc.enable()
    return statistics.median(times) * 1_000


def run() -> list[dict[str, object]]:
    """Run every method on every size and budget; return one row per combination."""
    rows: list[dict[str, object]] = []
    for size in SIZES_MESSAGES:
        msgs = make_history(size)
        latest = msgs[latest_user_request_index(msgs) or 0]
        total = count(msgs)
        for budget in BUDGETS_TOKENS:
            for name, method in METHODS.items():
                out = method(msgs, budget)
                ms = _median_ms(lambda m=method, h=msgs, b=budget: m(h, b), REPEATS_BY_SIZE[size])
                rows.append(
                    {
                        "size": size,
                        "history_tokens": total,
                        "budget": budget,
                        "method": name,
                        "ms": ms,
                        "kept": len(out),
                        "tokens": count(out),
                        "violations": len(validate_history(out)),
                        "latest_kept": any(m is latest for m in out),
                    }
                )
                print(rows[-1], flush=True)
    return rows


def to_markdown(rows: list[dict[str, object]], command: str) -> str:
    """Render the results as the markdown report."""
    lines = [
        "# History benchmark: prompt view vs `trim_messages`",
        "",
        f"Command: `{command}`",
        "",
        "Synthetic coding-agent histories (tool results 100 B-200 KB, 20% CJK, parallel "
        "calls, ~3% interrupted steps with no results). Counter: len(content)//4 + 4 per "
        "message, shared by all methods. `view` = `build_prompt_view(max_tokens=budget)`; "
        '`trim` = `trim_messages(strategy="last", include_system=True)`; `trim+human` adds '
        '`start_on="human"`. Violations = `len(validate_history(result))` (each is a request '
        "a provider rejects). Time = median of 21-101 repeats, garbage collection off "
        "while timing (as timeit).",
        "",
        "| messages | history tokens | budget | method | median ms | kept msgs | tokens "
        "| violations | latest request kept |",
        "| ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['size']:,} | {r['history_tokens']:,} | {r['budget']:,} | {r['method']} "
            f"| {r['ms']:.2f} | {r['kept']:,} | {r['tokens']:,} | {r['violations']} "
            f"| {'yes' if r['latest_kept'] else 'NO'} |"
        )
    lines += ["", "Totals per method:", ""]
    for name in METHODS:
        mine = [r for r in rows if r["method"] == name]
        violations = sum(int(str(r["violations"])) for r in mine)
        lost = sum(1 for r in mine if not r["latest_kept"])
        lines.append(f"- `{name}`: {violations} violations, latest request lost {lost} times")
    lines += ["", "Median time of `view` / `trim` per size (all budgets):", ""]
    for size in SIZES_MESSAGES:
        ratios = [
            float(str(v["ms"])) / float(str(t["ms"]))
            for v in rows
            for t in rows
            if v["size"] == t["size"] == size
            and v["budget"] == t["budget"]
            and (v["method"], t["method"]) == ("view", "trim")
        ]
        lines.append(f"- {size:,} messages: {statistics.median(ratios):.2f}x")
    return "\n".join(lines) + "\n"


def main() -> None:
    """Entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--output", type=Path, default=OUTPUT_PATH)
    args = parser.parse_args()
    rows = run()
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(to_markdown(rows, "uv run python bench/bench_history.py"))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
