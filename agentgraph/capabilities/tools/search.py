"""Bounded searching for ``grep`` and ``glob``: a linear-time regex engine and a deadline.

Python's ``re`` backtracks: a pattern such as ``(a+)+$`` takes exponential time on
one short line, inside a single C call that holds the GIL, so neither a timer nor
Ctrl-C can stop it. Model-supplied patterns are therefore compiled with RE2
(``google-re2``), whose matching time is linear in the input. RE2 has no
backreferences and no lookaround: such a pattern is refused with an error that says
so and points to ``run_bash`` (``grep -P``), whose commands are killed at their
timeout. There is no fallback to ``re``: an unbounded engine in-process is exactly
what cannot be stopped.

Every search also carries a :class:`SearchBudget`: a wall-clock limit
(:data:`GREP_TIMEOUT_S`, :data:`GLOB_TIMEOUT_S`) checked per line and per file, and a
cancellation check, so a walk over a huge tree ends with an error naming the limit,
and :func:`cancel_running_searches` (called by ``Agent.cancel`` on Ctrl-C) stops
every running search at its next line.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

import re2

from agentgraph.capabilities.tools.base import ToolError

GREP_TIMEOUT_S = 30.0
GLOB_TIMEOUT_S = 30.0
# RE2 matches in time linear in text size times pattern size: a cap on the pattern
# keeps one line's search short even on a multi-megabyte line.
SEARCH_PATTERN_MAX_CHARS = 2000
# RE2's memory budget for one compiled pattern (its default); a bigger automaton is
# refused at compile time instead of growing without bound.
RE2_MAX_MEM_BYTES = 8 << 20

_cancel_lock = threading.Lock()
_cancel_generation = 0


class SearchCancelled(ToolError):
    """The running turn was cancelled while a search was in progress."""


def cancel_running_searches() -> None:
    """Make every search running now stop at its next check (safe from any thread)."""
    global _cancel_generation
    with _cancel_lock:
        _cancel_generation += 1


def _generation() -> int:
    with _cancel_lock:
        return _cancel_generation


class SearchBudget:
    """A search's time limit and cancellation check.

    Args:
        tool: The tool name, for the error message.
        limit_s: Seconds the search may take.
        limit_name: The constant's name, so the message says which limit applied.
    """

    def __init__(self, tool: str, limit_s: float, limit_name: str) -> None:
        self.tool = tool
        self.limit_s = limit_s
        self.limit_name = limit_name
        self._deadline = time.monotonic() + limit_s
        self._generation = _generation()

    def expired(self) -> bool:
        """Whether the time limit has passed."""
        return time.monotonic() >= self._deadline

    def check(self, progress: str = "") -> None:
        """Raise when the search must stop.

        Args:
            progress: What was found so far, appended to the timeout message.

        Raises:
            SearchCancelled: :func:`cancel_running_searches` was called.
            ToolError: The time limit has passed.
        """
        if self._generation != _cancel_generation:  # an int read is atomic
            raise SearchCancelled(f"{self.tool} was cancelled")
        if self.expired():
            detail = f" ({progress})" if progress else ""
            raise ToolError(
                f"{self.tool} stopped after {self.limit_s:g}s, its time limit "
                f"({self.limit_name}){detail}; narrow the path or glob, or simplify the pattern"
            )


def _re2_error_text(exc: Exception) -> str:
    arg = exc.args[0] if exc.args else exc
    return arg.decode("utf-8", "replace") if isinstance(arg, bytes) else str(arg)


def compile_linear(pattern: str, *, ignore_case: bool = False, dot_nl: bool = False) -> Any:
    """Compile a pattern with RE2 (linear-time matching).

    Args:
        pattern: The regular expression (RE2 syntax: Python's minus backreferences
            and lookaround).
        ignore_case: Case-insensitive matching.
        dot_nl: Let ``.`` match a newline.

    Returns:
        A compiled RE2 pattern (``search``, ``fullmatch`` like ``re``).

    Raises:
        ToolError: The pattern is too long, uses a feature RE2 lacks (the
            message says which and what to do instead) or is invalid.
    """
    if len(pattern) > SEARCH_PATTERN_MAX_CHARS:
        raise ToolError(
            f"the pattern is {len(pattern)} characters; at most {SEARCH_PATTERN_MAX_CHARS} "
            "(SEARCH_PATTERN_MAX_CHARS)"
        )
    options = re2.Options()
    options.log_errors = False  # RE2 would print to the terminal; the message goes to the model
    options.case_sensitive = not ignore_case
    options.dot_nl = dot_nl
    options.max_mem = RE2_MAX_MEM_BYTES
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = _re2_error_text(exc)
    try:
        re.compile(pattern)
    except (re.error, OverflowError, RecursionError) as exc:
        raise ToolError(f"invalid regular expression {pattern!r}: {exc}") from None
    raise ToolError(
        f"unsupported regular expression {pattern!r}: {reason}. The search uses RE2 "
        "(linear time, so no pattern can hang it), which has no backreferences or "
        "lookahead/lookbehind; rewrite the pattern without them, or use run_bash "
        "(e.g. grep -P), which is killed at its timeout"
    )
