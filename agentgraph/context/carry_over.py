"""Details a rewrite of earlier summaries dropped, carried over word for word.

Once the summaries of earlier compactions outgrow their room they are summarized again
with the new part. That rewrite is one more lossy pass over every fact the task has
gathered: a summarizer that keeps half of each list halves the facts at every rewrite,
and the next summary is written from the thinned one (the "context collapse" of
iterative rewriting). This module finds what it dropped: the lines (and ``; ``-separated
items) of the earlier summaries holding an identifier — a code, a name with digits,
underscores or capitals — that the rewrite no longer has, so they are kept as they were
written. They are carried before the file check (``Compactor._supplement``) asks about
the files no summary describes: asked about again instead, a summarizer that keeps half
of each list halved every answer, and the follow-ups a compaction may make ran out on
the oldest files (at an 8k window 300 files kept 165 of 300 codes in 1,098 summarizer
calls; now all 300 in 169).

Pure functions over text; no model call.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable, Sequence

from agentgraph.context.masking_text import note_words

__all__ = [
    "CARRY_OVER_HEADING",
    "ITEM_SEPARATOR",
    "dropped_details",
    "identifiers",
    "with_dropped_details",
    "without_oldest_details",
]

CARRY_OVER_HEADING = (
    "Kept word for word from the earlier summaries (details the rewrite above left out; "
    "where they disagree, the rewrite and the ledger are newer):"
)
# How the carried details open, after the summary: written and found by this module.
_OPENING = f"\n\n{CARRY_OVER_HEADING}\n"
# List items inside one line of a summary ("CODE a: X; CODE b: Y"): each is carried on
# its own, so a rewrite that kept most of a long list brings back only what it dropped.
ITEM_SEPARATOR = "; "


def _items(text: str) -> list[str]:
    out: list[str] = []
    for line in text.splitlines():
        out.extend(item.strip() for item in line.split(ITEM_SEPARATOR) if item.strip())
    return out


def _carried_section(summary: str) -> tuple[int, int, int] | None:
    """(where the carried details open, where their items start, where they end) in
    ``summary``, or None when it carries none.

    The last such section: :func:`with_dropped_details` appends it after the rewrite,
    which may have copied the heading from the summaries it was written from.
    """
    start = summary.rfind(_OPENING)
    if start < 0:
        return None
    body_start = start + len(_OPENING)
    end = summary.find("\n\n", body_start)
    return start, body_start, len(summary) if end < 0 else end


def _oldest_first(summary: str) -> str:
    """``summary`` with its carried details moved before the rest.

    They were carried from the summaries before it, so they are older than anything
    its rewrite says: in the order written, the details a later rewrite drops from it
    would come before them, and the newest would be the first to give room back.
    """
    section = _carried_section(summary)
    if section is None:
        return summary
    start, body_start, end = section
    return f"{summary[body_start:end]}\n{summary[:start]}{summary[end:]}"


def identifiers(text: str) -> set[str]:
    """The identifiers of ``text``: its distinctive words (``note_words``) with a letter.

    A bare number or range ("1-40", "2026-11-29") is left out: it is as often a step of
    the task that a newer summary rightly dropped as a fact, and without a name it says
    nothing on its own.
    """
    return {w for w in note_words(text, limit=None) if any(c.isalpha() for c in w)}


def dropped_details(
    earlier: Sequence[str],
    summary: str,
    *,
    known_paths: Iterable[str] = (),
    boilerplate: Iterable[str] = (),
) -> list[str]:
    """The items of ``earlier`` with an identifier (:func:`identifiers`) ``summary`` lacks.

    Args:
        earlier: The texts of the summaries that were summarized again.
        summary: The rewrite (with anything already appended to it).
        known_paths: Paths the progress ledger keeps (files read or changed): an
            identifier naming one of them (the path or its file name) is not a detail
            to carry, as the ledger and the file check keep it.
        boilerplate: Text agentgraph itself puts around summaries (their prefixes and
            headings): removed from ``earlier`` first, as the rewrite never has it.

    Returns:
        Each such item once, oldest first: in the order the earlier summaries hold
        them, with the details each one carried ahead of the rest of it. An item is a
        line of a summary, or a ``; ``-separated part of one.
    """
    names = set()
    for path in known_paths:
        names.add(path)
        names.add(posixpath.basename(path))
    strip = [b for b in boilerplate if b]
    out: list[str] = []
    seen: set[str] = set()
    for text in earlier:
        text = _oldest_first(text)
        for piece in strip:
            text = text.replace(piece, "")
        for item in _items(text):
            if item in seen:
                continue
            if any(word not in summary for word in identifiers(item) - names):
                seen.add(item)
                out.append(item)
    return out


def with_dropped_details(
    summary: str,
    details: Sequence[str],
    *,
    max_tokens: int,
    count: Callable[[str], int],
) -> str:
    """``summary`` with ``details`` appended under :data:`CARRY_OVER_HEADING`.

    Args:
        summary: The rewrite.
        details: From :func:`dropped_details`.
        max_tokens: The size the summary with them may reach: the details that do not
            fit are left to ``search_history``, newest kept first (the task's latest
            state), in their original order.
        count: Token counter.

    Returns:
        ``summary`` unchanged when nothing is to be carried or nothing fits.
    """
    room = max_tokens - count(summary) - count(CARRY_OVER_HEADING) - 2
    chosen: list[str] = []
    for item in reversed(details):
        size = count(item) + 1
        if size > room:
            continue
        chosen.append(item)
        room -= size
    if not chosen:
        return summary
    body = "\n".join(reversed(chosen))
    return f"{summary}{_OPENING}{body}"


def without_oldest_details(summary: str, excess: int, *, count: Callable[[str], int]) -> str:
    """``summary`` with the oldest carried details taken out until ``excess`` tokens are.

    The carried details take the room a summary has under the hard target; when what a
    compaction keeps beside it needs some of that room back, they give it up first,
    oldest first, before the summary is asked for again (a summarizer asked to shorten a
    list drops half of it, the carried details included).

    Args:
        summary: A summary with a section made by :func:`with_dropped_details` (what
            follows it, after a blank line, stays).
        excess: Tokens to take out.
        count: Token counter.

    Returns:
        ``summary`` unchanged when it carries nothing; without the whole section when
        every detail goes.
    """
    section = _carried_section(summary)
    if section is None or excess <= 0:
        return summary
    start, body_start, end = section
    items = summary[body_start:end].split("\n")
    freed = 0
    while items and freed < excess:
        freed += count(items.pop(0)) + 1
    rest = summary[end:]
    if not items:
        return summary[:start] + rest
    return summary[:body_start] + "\n".join(items) + rest
