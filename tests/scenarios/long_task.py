"""A long task that reads far more than the context window holds.

Shared by tests/integration/test_long_task.py, bench/bench_long_task.py and
bench/bench_context_v2.py. The model is the strict FakeOpenAIServer driven by
:class:`LongTaskDriver`: it reads every file in turn, writes a report, then answers with
every planted fact it can still see in its prompt — so the answer proves what survived
compaction. The tool names and argument keys are parameters, so the same script drives
other harnesses (LangChain ``create_agent``, deepagents) with the tools they accept.
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
# The role line of LangChain's SummarizationMiddleware prompt (deepagents extends it).
LANGCHAIN_SUMMARY_MARKER = "Context Extraction Assistant"
PLANTED_FACTS = {
    1: "FACT-1: LAUNCH-7731",
    2: "FACT-2: ORBIT-4402",
    3: "FACT-3: VECTOR-9120",
}
# Words of the generated facts (planted_facts): FACT_RE needs [A-Z]+-\d+ values.
FACT_WORDS = ("LAUNCH", "ORBIT", "VECTOR", "APOGEE", "BURN", "DOCK", "GIMBAL", "HATCH")
LINE_TEMPLATE = "log line {n:05d}: subsystem {s} reported nominal values {v} and checksum {c}\n"


def planted_facts(count: int, files: int) -> dict[int, str]:
    """``count`` distinct facts spread evenly over files 1..``files`` (file index -> fact).

    Args:
        count: How many facts (at most ``files``).
        files: How many files the workspace has.

    Returns:
        A mapping for :func:`make_workspace`'s ``facts``.
    """
    if not 0 < count <= files:
        raise ValueError(f"need 0 < count <= files, got {count} facts for {files} files")
    facts = {}
    for k in range(1, count + 1):
        word = FACT_WORDS[(k - 1) % len(FACT_WORDS)]
        facts[1 + (k - 1) * files // count] = f"FACT-{k}: {word}-{(k * 7919) % 9000 + 1000}"
    return facts


def make_workspace(
    root: Path,
    *,
    files: int = 24,
    lines_per_file: int = 400,
    facts: Mapping[int, str] = PLANTED_FACTS,
) -> list[str]:
    """Write ``files`` large text files; file ``i`` in ``facts`` plants that fact in its head."""
    paths = []
    for i in range(1, files + 1):
        rel = f"logs/part_{i:02d}.txt"
        body = []
        if i in facts:
            body.append(f"{facts[i]}\n")
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


def note_of(body: Mapping[str, Any]) -> str:
    """A short note restating the last tool result of a request (the last number of four
    digits or more it shows), as a model that writes down what it read does; "" when
    the request has no tool result."""
    results = [m for m in body.get("messages") or [] if m.get("role") == "tool"]
    if not results:
        return ""
    numbers = re.findall(r"\d{4,}", str(results[-1].get("content") or ""))
    return f"noted {numbers[-1]}" if numbers else ""


def facts_in(body: Mapping[str, Any]) -> set[str]:
    """Planted facts visible anywhere in a request."""
    found: set[str] = set()
    for text in _texts(body):
        found.update(FACT_RE.findall(text))
    return found


def is_summary_request(
    body: Mapping[str, Any], markers: tuple[str, ...] = (SUMMARY_MARKER,)
) -> bool:
    """Whether a request is a compaction summary call (agentgraph's by default)."""
    return any(m in t for t in _texts(body)[:2] for m in markers)


@dataclass
class LongTaskDriver:
    """Scripted model for the long task (a callable reply of FakeOpenAIServer).

    Attributes:
        paths: Workspace-relative files to read, in order.
        path_key: Argument name of the file path in both tool calls.
        path_prefix: Prepended to each path (``"/"`` for deepagents' absolute paths).
        read_tool: Name of the read tool.
        write_tool: Name of the write tool.
        summary_markers: Text that marks a request as the harness's summary call.
        lossy: Summaries keep only every other fact they see (a summarizer that drops
            half of the details).
        notes: Each call also carries a one-line note restating the last tool result
            (a model that writes down what it reads; masking hides only what was noted).
        answered: Whether the final answer was sent.
    """

    paths: list[str]
    step: int = 0
    summary_calls: int = 0
    main_calls: int = 0
    answer_facts: set[str] = field(default_factory=set)
    path_key: str = "path"
    path_prefix: str = ""
    read_tool: str = "read_file"
    write_tool: str = "write_file"
    summary_markers: tuple[str, ...] = (SUMMARY_MARKER,)
    lossy: bool = False
    notes: bool = False
    answered: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            if is_summary_request(body, self.summary_markers):
                self.summary_calls += 1
                facts = sorted(facts_in(body))
                if self.lossy:
                    facts = facts[::2]
                text = (
                    "1. Task and progress: reading the log files one by one.\n"
                    "4. Critical data:\n" + "\n".join(facts)
                )
                return {"content": text}
            self.main_calls += 1
            step = self.step
            self.step += 1
        if step < len(self.paths):
            path = self.path_prefix + self.paths[step]
            reply = {"tool_calls": [{"name": self.read_tool, "arguments": {self.path_key: path}}]}
            return {**reply, "content": note_of(body)} if self.notes else reply
        if step == len(self.paths):
            args = {self.path_key: self.path_prefix + "report.md", "content": "all logs read\n"}
            return {"tool_calls": [{"name": self.write_tool, "arguments": args}]}
        self.answer_facts = facts_in(body)
        self.answered = True
        return {"content": "Facts I know: " + json.dumps(sorted(self.answer_facts))}
