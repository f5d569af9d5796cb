"""A long task that reads far more than the context window holds.

Shared by tests/integration/test_long_task.py and bench/bench_long_task.py. The model is the
strict FakeOpenAIServer driven by :class:`LongTaskDriver`: it reads every file in
turn, writes a report, then answers with every planted fact it can still see in
its prompt — so the answer proves what survived compaction.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FACT_RE = re.compile(r"FACT-\d+: [A-Z]+-\d+")
SUMMARY_MARKER = "CONTEXT CHECKPOINT COMPACTION"
PLANTED_FACTS = {
    1: "FACT-1: LAUNCH-7731",
    2: "FACT-2: ORBIT-4402",
    3: "FACT-3: VECTOR-9120",
}
LINE_TEMPLATE = "log line {n:05d}: subsystem {s} reported nominal values {v} and checksum {c}\n"


def make_workspace(root: Path, *, files: int = 24, lines_per_file: int = 400) -> list[str]:
    """Write ``files`` large text files; the first three plant a fact in their head."""
    paths = []
    for i in range(1, files + 1):
        rel = f"logs/part_{i:02d}.txt"
        body = []
        if i in PLANTED_FACTS:
            body.append(f"{PLANTED_FACTS[i]}\n")
        for n in range(lines_per_file):
            body.append(LINE_TEMPLATE.format(n=n, s=(n * 7 + i) % 13, v=(n * 31) % 997, c=n * i))
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(body), encoding="utf-8")
        paths.append(rel)
    return paths


def _texts(body: Mapping[str, Any]) -> list[str]:
    out = []
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            out.extend(str(part.get("text", "")) for part in content if isinstance(part, dict))
        for call in message.get("tool_calls") or []:
            out.append(str(call.get("function", {}).get("arguments", "")))
    return out


def facts_in(body: Mapping[str, Any]) -> set[str]:
    """Planted facts visible anywhere in a request."""
    found: set[str] = set()
    for text in _texts(body):
        found.update(FACT_RE.findall(text))
    return found


def is_summary_request(body: Mapping[str, Any]) -> bool:
    """Whether a request is agentgraph's compaction summary call."""
    return any(SUMMARY_MARKER in t for t in _texts(body)[:2])


@dataclass
class LongTaskDriver:
    """Scripted model for the long task (a callable reply of FakeOpenAIServer)."""

    paths: list[str]
    step: int = 0
    summary_calls: int = 0
    main_calls: int = 0
    answer_facts: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            if is_summary_request(body):
                self.summary_calls += 1
                facts = sorted(facts_in(body))
                text = (
                    "1. Task and progress: reading the log files one by one.\n"
                    "4. Critical data:\n" + "\n".join(facts)
                )
                return {"content": text}
            self.main_calls += 1
            step = self.step
            self.step += 1
        if step < len(self.paths):
            return {"tool_calls": [{"name": "read_file", "arguments": {"path": self.paths[step]}}]}
        if step == len(self.paths):
            return {
                "tool_calls": [
                    {
                        "name": "write_file",
                        "arguments": {"path": "report.md", "content": "all logs read\n"},
                    }
                ]
            }
        self.answer_facts = facts_in(body)
        return {"content": "Facts I know: " + json.dumps(sorted(self.answer_facts))}
