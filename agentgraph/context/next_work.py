"""What a handoff summary says is left to do, and the files it names there.

A compaction shows a few files again after the summary. Which files a model comes back
to is task knowledge the history does not hold: a file written once may be finished or
waiting for its second change. The summarizer knows, and the handoff prompt asks it to
say so under "Remaining work"; the files named there are the ones to show first.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable

__all__ = ["REMAINING_WORK_HEADINGS", "named_paths", "remaining_work"]

# The headings a summary puts what is left under: agentgraph's handoff prompt asks for
# "Remaining work"; LangChain's summary prompt says "Next steps", Claude Code's "Pending
# tasks" and "Current work".
REMAINING_WORK_HEADINGS = (
    "remaining work",
    "next steps",
    "next step",
    "pending tasks",
    "current work",
    "work in progress",
)
# A heading line: markdown (``## Remaining work``), numbered (``3. Remaining work:``), bold
# (``**Remaining work**``), in brackets (``[remaining work]``, as Qwen2.5-Coder wrote
# agentgraph's headings) or a label that ends with a colon (``Remaining work: …``).
# One run of marks before the number and one after it: two runs side by side would let
# a hostile line of marks backtrack quadratically.
_DECORATION = r"[#*_\[\s]*(?:\d{1,2}[.)][*_\[\s]*)?"
_HEADING_RE = re.compile(
    rf"^{_DECORATION}(?:{'|'.join(re.escape(h) for h in REMAINING_WORK_HEADINGS)})\b",
    re.IGNORECASE,
)
# The start of the next section: a markdown heading, a numbered heading of a capitalized
# word (``4. Critical data``), a bold or bracketed line, or a line that opens with a
# capital and ends with a colon (``Also read (…):``, as agentgraph heads what it adds to
# a summary).
_NEXT_SECTION_RE = re.compile(
    r"^\s*(?:#{1,6}\s|\d{1,2}[.)]\s+[A-Z]|\*\*[^*]+\*\*\s*:?\s*$|\[[^\]]+\]\s*:?\s*$"
    r"|[A-Z][^\n]*:\s*$)"
)
# A word that may be a path: what stands between spaces, quotes, brackets, commas and
# colons (a sentence's closing dot is taken off).
_WORD_RE = re.compile(r"[\w./-]+")


def remaining_work(summary: str) -> str:
    """The text of ``summary``'s sections on what is left to do (:data:`REMAINING_WORK_HEADINGS`):
    each from its heading line to the next section's heading, or the end; "" when it has
    none."""
    out: list[str] = []
    inside = False
    for line in summary.splitlines():
        if _HEADING_RE.match(line):
            inside = True
        elif inside and _NEXT_SECTION_RE.match(line):
            inside = False
        if inside:
            out.append(line)
    return "\n".join(out)


def named_paths(text: str, paths: Iterable[str]) -> list[str]:
    """Of ``paths``, those ``text`` names, in the order it first names them (a list of
    work left starts with the next step): whole, or by a file name of their own standing
    as a word (``app.py`` in "fix app.py", not in "webapp.py" or "src/app.py").

    The text is split into words once: a long session knows thousands of paths.
    """
    first: dict[str, int] = {}
    for hit in _WORD_RE.finditer(text):
        word = hit.group().rstrip(".")
        first.setdefault(word.removeprefix("./"), hit.start())
    found: dict[str, int] = {}
    for path in paths:
        at = [first[word] for word in (path, posixpath.basename(path)) if word in first]
        if at:
            found.setdefault(path, min(at))
    return sorted(found, key=found.__getitem__)
