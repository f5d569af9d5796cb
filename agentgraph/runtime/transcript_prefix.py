"""How much of a history is unchanged since it was last seen (incremental passes)."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage


def common_prefix(new: Sequence[BaseMessage], old: list[BaseMessage]) -> int:
    """Length of the longest common prefix of two histories (same or equal messages).

    Args:
        new: The history now.
        old: The history as last seen.

    Returns:
        How many leading messages of ``new`` are the same objects as, or equal to,
        those of ``old``.
    """
    n = min(len(new), len(old))
    head = list(new[:n])
    # List equality checks identity before __eq__: a C-speed pointer scan when the
    # history only grew, which is the common case.
    if head == old[:n]:
        return n
    for i in range(n):
        a, b = head[i], old[i]
        if a is not b and a != b:
            return i
    return n  # pragma: no cover - the slice comparison said they differ
