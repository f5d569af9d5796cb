"""Regular expressions compiled at their first use instead of at import.

For patterns that cost milliseconds to compile (long alternations with IGNORECASE,
large character classes) and serve paths a run may never take (classifying a failed
call, indexing CJK text): compiling them at import added that time to every start.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any


class LazyPattern:
    """``re.compile(pattern, flags)``, done at the first match: the methods used here."""

    __slots__ = ("_compiled", "flags", "pattern")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self.flags = flags
        self._compiled: re.Pattern[str] | None = None

    @property
    def compiled(self) -> re.Pattern[str]:
        """The compiled pattern (compiled now on first access)."""
        compiled = self._compiled
        if compiled is None:  # two threads racing here both compile it, harmlessly
            compiled = self._compiled = re.compile(self.pattern, self.flags)
        return compiled

    def search(self, text: str) -> re.Match[str] | None:
        return self.compiled.search(text)

    def match(self, text: str) -> re.Match[str] | None:
        return self.compiled.match(text)

    def findall(self, text: str) -> list[Any]:
        return self.compiled.findall(text)

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        return self.compiled.finditer(text)

    def sub(self, repl: str, text: str) -> str:
        return self.compiled.sub(repl, text)

    def __repr__(self) -> str:
        return f"LazyPattern({self.pattern!r}, {self.flags!r})"
