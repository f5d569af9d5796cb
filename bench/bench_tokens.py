"""Benchmark token accounting: cost per turn and estimate error per kind of text.

Run: ``uv run python bench/bench_tokens.py`` (``--calibrate`` refits the
estimate's coefficients; ``--quick`` uses fewer repeats).

Per turn = three new messages were appended since the last count and the whole
history is counted again, as the agent does before every model call.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import math
import pickle
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.messages.utils import count_tokens_approximately

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import corpus

from agentgraph.context import tokens
from agentgraph.context.tokens import TokenCounter, estimate_tokens

HISTORY_SIZES = (100, 1_000, 10_000)
NEW_MESSAGES_PER_TURN = 3
SAMPLES_PER_KIND = 40
EXACT_MODEL = "gpt-4o"
ESTIMATE_MODEL = "qwen3-coder-plus"
# Real text found on this machine, used only as a held-out check (optional).
REAL_TEXT_FILES = {
    "real: vim tutor (en)": "/usr/share/vim/vim90/tutor/tutor",
    "real: vim tutor (ja)": "/usr/share/vim/vim90/tutor/tutor.ja.utf-8",
    "real: vim tutor (zh)": "/usr/share/vim/vim90/tutor/tutor.zh.utf-8",
    "real: vim tutor (ko)": "/usr/share/vim/vim90/tutor/tutor.ko.utf-8",
    "real: GPL-3.0 (en prose)": "/root/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/"
    "share/doc/rust/licenses/GPL-3.0-or-later.txt",
    "real: zh design doc + code": "/work/shared/reference/003_a9c3ad8039be79cc.txt",
    "real: Python stdlib code": str(Path(asyncio.__file__).parent / "base_events.py"),
}
REAL_CHUNK_CHARS = 2_000
REAL_MAX_CHUNKS = 40
_CJK_000_RE = re.compile(r"[\u4e00-\u9fa5]")


def _median_s(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _fresh_copies(msgs: Sequence[BaseMessage]) -> list[BaseMessage]:
    """New message objects with new strings, as after a checkpoint reload."""
    loaded: list[BaseMessage] = pickle.loads(pickle.dumps(list(msgs)))
    return loaded


def bench_turns(repeats: int) -> list[str]:
    """Time per turn for each counting method; returns markdown rows."""
    rows = [
        "| messages | incremental exact (same objects) | incremental exact (reloaded "
        "objects) | from-scratch exact | from-scratch estimate | "
        "count_tokens_approximately | incremental / approx |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size in HISTORY_SIZES:
        base = corpus.history(size + NEW_MESSAGES_PER_TURN * (repeats + 1), seed=7)
        history = base[:size]
        counter = TokenCounter(EXACT_MODEL)
        counter.count_messages(history)
        reload_counter = TokenCounter(EXACT_MODEL)
        reload_counter.count_messages(history)
        same, reloaded = [], []
        for turn in range(repeats):
            start = size + NEW_MESSAGES_PER_TURN * turn
            history = history + base[start : start + NEW_MESSAGES_PER_TURN]
            gc.collect()  # charge no one for the garbage of the previous step
            t0 = time.perf_counter()
            counter.count_messages(history)
            same.append(time.perf_counter() - t0)
            copies = _fresh_copies(history)
            gc.collect()
            t0 = time.perf_counter()
            reload_counter.count_messages(copies)
            reloaded.append(time.perf_counter() - t0)
        scratch = _median_s(lambda h=history: TokenCounter(EXACT_MODEL).count_messages(h), 3)
        estimate = _median_s(lambda h=history: TokenCounter(ESTIMATE_MODEL).count_messages(h), 3)
        approx = _median_s(lambda h=history: count_tokens_approximately(h), repeats)
        inc = statistics.median(same)
        rows.append(
            f"| {size:,} | {inc * 1e3:.2f} ms | {statistics.median(reloaded) * 1e3:.2f} ms | "
            f"{scratch * 1e3:.1f} ms | {estimate * 1e3:.1f} ms | {approx * 1e3:.2f} ms | "
            f"{inc / approx:.2f}x |"
        )
    return rows


def _estimate_000(text: str) -> int:
    cjk = len(_CJK_000_RE.findall(text))
    return math.ceil(cjk / 1.5 + (len(text) - cjk) / 4)


def _real_sets() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, path in REAL_TEXT_FILES.items():
        if path and Path(path).is_file():
            text = Path(path).read_text(encoding="utf-8", errors="replace")
            step = REAL_CHUNK_CHARS
            out[name] = [text[i : i + step] for i in range(0, len(text), step)][:REAL_MAX_CHUNKS]
    return out


def bench_errors(seed: int) -> list[str]:
    """Mean and worst relative error of each estimate per kind; markdown rows."""
    exact = TokenCounter(EXACT_MODEL)
    sets = {kind: corpus.samples(kind, SAMPLES_PER_KIND, seed) for kind in corpus.KINDS}
    sets.update(_real_sets())
    estimators: dict[str, Callable[[str], int]] = {
        "estimate_tokens": estimate_tokens,
        "len/4": lambda t: math.ceil(len(t) / 4),
        "000: CJK/1.5 + others/4": _estimate_000,
    }
    rows = [
        "| text | chars/token | " + " | ".join(estimators) + " | count_tokens_approximately |",
        "|---|---:|" + "---:|" * (len(estimators) + 1),
    ]
    for name, texts in sets.items():
        truth = [exact.count_text(t) for t in texts]
        cells = []
        for fn in estimators.values():
            errs = [(fn(t) - x) / x for t, x in zip(texts, truth, strict=True)]
            total = (sum(map(fn, texts)) - sum(truth)) / sum(truth)
            cells.append(f"{total * 100:+.1f}% (worst {max(map(abs, errs)) * 100:.0f}%)")
        msgs = [HumanMessage(t) for t in texts]
        exact_msgs = sum(exact.count_message(m) for m in msgs)
        approx_msgs = sum(count_tokens_approximately([m]) for m in msgs)
        cells.append(f"{(approx_msgs - exact_msgs) / exact_msgs * 100:+.1f}%")
        ratio = sum(map(len, texts)) / sum(truth)
        rows.append(f"| {name} | {ratio:.2f} | " + " | ".join(cells) + " |")
    return rows


def calibrate() -> None:
    """Refit the EST_* coefficients (weighted least squares on relative error)."""
    exact = TokenCounter(EXACT_MODEL)
    sets = {kind: corpus.samples(kind, SAMPLES_PER_KIND, seed=1) for kind in corpus.KINDS}
    # Half of each real set trains, the other half stays held out.
    sets.update({k: v[0::2] for k, v in _real_sets().items()})
    names = list(tokens._estimate_features("x"))
    size = len(names)
    gram = [[0.0] * size for _ in range(size)]
    rhs = [0.0] * size
    for texts in sets.values():
        for text in texts:
            feats = tokens._estimate_features(text)
            row = [float(feats[n]) for n in names]
            truth = exact.count_text(text)
            weight = 1.0 / (len(texts) * truth * truth)
            for i in range(size):
                rhs[i] += weight * row[i] * truth
                for j in range(size):
                    gram[i][j] += weight * row[i] * row[j]
    for i in range(size):
        gram[i][i] += 1e-3
    aug = [gram[i] + [rhs[i]] for i in range(size)]
    for col in range(size):
        pivot = max(range(col, size), key=lambda r: abs(aug[r][col]))
        aug[col], aug[pivot] = aug[pivot], aug[col]
        for r in range(size):
            if r != col and aug[col][col]:
                factor = aug[r][col] / aug[col][col]
                aug[r] = [a - factor * b for a, b in zip(aug[r], aug[col], strict=True)]
    for i, name in enumerate(names):
        coef = aug[i][size] / aug[i][i] if aug[i][i] else 0.0
        print(f"{name:>14} {coef:.4f}")


# OpenAI cookbook "How to count tokens with tiktoken": prompt tokens the API reported
# for its weather-tool request (two messages + one tool with an enum).
COOKBOOK_REPORTED = {"gpt-4o": 101, "gpt-4o-mini": 101, "gpt-4": 105, "gpt-3.5-turbo": 105}
COOKBOOK_TOOL = {
    "type": "function",
    "function": {
        "name": "get_current_weather",
        "description": "Get the current weather in a given location",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {
                    "type": "string",
                    "description": "The city and state, e.g. San Francisco, CA",
                },
                "unit": {
                    "type": "string",
                    "description": "The unit of temperature to return",
                    "enum": ["celsius", "fahrenheit"],
                },
            },
            "required": ["location"],
        },
    },
}


def bench_tool_schemas() -> list[str]:
    """Tool-schema tokens: OpenAI's formula (ours) vs the JSON text, vs reported usage."""
    from langchain_core.messages import SystemMessage
    from langchain_core.utils.function_calling import convert_to_openai_tool

    from agentgraph.capabilities.tools import build_tools
    from agentgraph.config import Settings

    messages = [
        SystemMessage(
            "You are a helpful assistant that can answer to questions about the weather."
        ),
        HumanMessage("What's the weather like in San Francisco?"),
    ]
    rows = [
        "| request | model | provider reported | agentgraph (formula) | error | JSON text (before) | error |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for model, reported in COOKBOOK_REPORTED.items():
        counter = TokenCounter(model)
        base = counter.count_messages(messages)
        ours = base + counter.count_tools([COOKBOOK_TOOL])
        as_json = base + counter.count_text(json.dumps(COOKBOOK_TOOL, ensure_ascii=False))
        rows.append(
            f"| cookbook weather tool | {model} | {reported} | {ours} | {(ours - reported) / reported * 100:+.1f}% "
            f"| {as_json} | {(as_json - reported) / reported * 100:+.1f}% |"
        )
    tools = build_tools(Settings(_env_file=None))  # type: ignore[call-arg]
    counter = TokenCounter(EXACT_MODEL)
    ours = counter.count_tools(tools)
    as_json = sum(
        counter.count_text(json.dumps(convert_to_openai_tool(t), ensure_ascii=False)) for t in tools
    )
    rows += [
        "",
        f"Built-in tools ({len(tools)}), {EXACT_MODEL}: formula {ours:,} tokens, JSON text {as_json:,} "
        f"(+{as_json - ours:,} tokens, +{(as_json - ours) / ours * 100:.0f}% per request before).",
    ]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calibrate", action="store_true")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.calibrate:
        calibrate()
        return
    repeats = 5 if args.quick else 15
    print(f"## Cost per turn ({NEW_MESSAGES_PER_TURN} new messages, median of {repeats})\n")
    print("\n".join(bench_turns(repeats)))
    print("\n## Estimate error vs exact o200k (sum over samples; worst single sample)\n")
    print("\n".join(bench_errors(seed=2)))
    print("\n## Tool schemas vs reported usage\n")
    print("\n".join(bench_tool_schemas()))


if __name__ == "__main__":
    main()
