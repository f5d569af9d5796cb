"""Values the model saw as ``[REDACTED]``, put back where it writes the marker again.

Tool output is redacted before the model sees it (:mod:`agentgraph.security.redaction`),
files included: a config holding a token reads ``TOKEN = "[REDACTED]"``. A model that
rewrites such a file whole (``write_file``) or edits it (``edit_file``) writes the marker
where the token was, as that is all it knows of it: the user's token was replaced by the
marker on disk, and the diff the user was shown, redacted too, showed no change on that
line.

Here each marker the new text holds is given back the value it stood for in the file as
it is now: the one hidden value whose line, as the model saw it, fits the marker's line
in the new text (the text before and after the marker on its line: the same line first,
then a line that holds the new one's part), else the one value
the replaced text hid (an edit of the line that holds it), else the one value the whole
file hid. A marker none of these decides is refused (:class:`Unrestorable`): which value
goes where is not certain, and guessing could swap two secrets unseen. The model never
sees a value; what it wrote is written with the values it could not see.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from difflib import SequenceMatcher
from itertools import accumulate

from agentgraph.security.redaction import REDACTED

__all__ = [
    "Hidden",
    "Unrestorable",
    "hidden_values",
    "restore_hidden",
    "restore_rewrite",
    "shown_to_raw",
]


class Unrestorable(ValueError):
    """A marker in new text whose value cannot be told (several values fit, or none)."""


@dataclass(frozen=True)
class Hidden:
    """One marker of the redacted text and the raw text it stands for.

    Attributes:
        at: Offset of the marker in the redacted text.
        start: Offset of the value in the raw text.
        value: The raw text the marker replaced (the marker itself where the raw text
            holds it literally).
        before: The marker's line before it, as the model saw it.
        after: The marker's line after it, as the model saw it.
    """

    at: int
    start: int
    value: str
    before: str
    after: str


def hidden_values(raw: str, shown: str) -> list[Hidden] | None:
    """The value behind each marker of ``shown``, ``raw`` redacted; None when ``shown``
    is not ``raw`` with some of its text replaced by markers, or when that can be read in
    more than one way (two markers side by side, a value holding the text after it).

    Args:
        raw: A text.
        shown: What redacting it gave.
    """
    pieces = shown.split(REDACTED)
    if len(pieces) == 1:
        return [] if raw == shown else None
    head, tail = pieces[0], pieces[-1]
    if not raw.startswith(head) or not raw.endswith(tail):
        return None
    if len(raw) - len(tail) - len(head) < len(pieces) - 1:
        return None
    # The values the earliest and the latest places of the pieces between markers leave:
    # every reading lies between the two, so where they agree there is only one.
    earliest: list[tuple[int, int]] = []
    pos = len(head)
    for piece in pieces[1:-1]:
        found = raw.find(piece, pos + 1)
        if found < 0:
            return None
        earliest.append((pos, found))
        pos = found + len(piece)
    earliest.append((pos, len(raw) - len(tail)))
    latest: list[tuple[int, int]] = []
    end = len(raw) - len(tail)
    for piece in reversed(pieces[1:-1]):
        found = raw.rfind(piece, 0, end - 1)
        if found < 0:
            return None
        latest.append((found + len(piece), end))
        end = found
    latest.append((len(head), end))
    latest.reverse()
    if earliest != latest or any(stop <= start for start, stop in earliest):
        return None
    hidden = []
    at = len(head)
    for (start, stop), piece in zip(earliest, pieces[1:], strict=True):
        line_start = shown.rfind("\n", 0, at) + 1
        after_at = at + len(REDACTED)
        line_end = shown.find("\n", after_at)
        before = shown[line_start:at]
        after = shown[after_at : len(shown) if line_end < 0 else line_end]
        hidden.append(Hidden(at, start, raw[start:stop], before, after))
        at = after_at + len(piece)
    return hidden


def shown_to_raw(hidden: list[Hidden], offset: int) -> int | None:
    """The raw text's offset of the redacted text's ``offset``; None inside a marker."""
    shift = 0
    for h in hidden:
        if offset <= h.at:
            break
        if offset < h.at + len(REDACTED):
            return None
        shift += len(h.value) - len(REDACTED)
    return offset + shift


def restore_hidden(
    text: str, shown: str, hidden: list[Hidden], replaced: tuple[int, int] | None = None
) -> str:
    """``text`` with each marker replaced by the value it stands for (see the module
    docstring).

    Lines of ``text`` the file's replaced part holds in the same order (a file rewritten
    with lines added, dropped or changed around them) take the values of those lines, one
    to one, so two lines the model saw alike keep their own values; any other marker goes
    by the rules of the module docstring.

    Args:
        text: New text for the file (a whole file, or an edit's replacement).
        shown: The file's text as the model was shown it.
        hidden: The file's markers and their values (:func:`hidden_values`).
        replaced: The part of ``shown`` that ``text`` replaces (an edit's); None for
            the whole file.

    Raises:
        Unrestorable: A marker no rule decides.
    """
    if REDACTED not in text or not hidden:
        return text
    start, end = replaced if replaced is not None else (0, len(shown))
    scope = [h for h in hidden if start <= h.at < end]
    aligned = _aligned(text, shown, start, end, scope)
    out: list[str] = []
    pos = 0
    while (at := text.find(REDACTED, pos)) >= 0:
        line_start = text.rfind("\n", 0, at) + 1
        after_at = at + len(REDACTED)
        line_end = text.find("\n", after_at)
        before = text[line_start:at]
        after = text[after_at : len(text) if line_end < 0 else line_end]
        same = {h.value for h in hidden if h.before == before and h.after == after}
        fitting = {
            h.value for h in hidden if h.before.endswith(before) and h.after.startswith(after)
        }
        value = (
            aligned.get(at)
            or _one(same)
            or _one(fitting)
            or (_one({h.value for h in scope}) if replaced is not None else None)
            or _one({h.value for h in hidden})
        )
        if value is None:
            raise Unrestorable(f"{REDACTED} on the line {before + REDACTED + after!r}")
        out += [text[pos:at], value]
        pos = after_at
    out.append(text[pos:])
    return "".join(out)


def restore_rewrite(before: str, after: str, redact: Callable[[str], str]) -> str | None:
    """``after``, a file's text that was ``before`` until something the model ran rewrote
    it (a shell command: a here-document, ``printf``, a script), with each marker it
    wrote given back the value it stands for in ``before`` (:func:`restore_hidden`, the
    whole file replaced); None when it wrote none (no more markers than ``before`` held
    literally) or ``before`` hid nothing.

    The text around the markers stays as the command wrote it: a value the command kept
    or wrote itself (from the environment, say) is never touched.

    Args:
        before: The file's text before the command.
        after: Its text after.
        redact: What the model's view of the file passed through.

    Raises:
        Unrestorable: A marker whose value is not certain, or ``before``'s values whose
            places cannot be told apart.
    """
    if after.count(REDACTED) <= before.count(REDACTED):
        return None
    shown = redact(before)
    if shown == before:
        return None
    hidden = hidden_values(before, shown)
    if hidden is None:
        raise Unrestorable("the places of the values the file hid cannot be told apart")
    restored = restore_hidden(after, shown, hidden)
    return None if restored == after else restored


def _aligned(text: str, shown: str, start: int, end: int, scope: list[Hidden]) -> dict[int, str]:
    """Offset in ``text`` of each marker on a line that ``shown[start:end]`` holds in the
    same place of a line-by-line alignment → the value of the marker it matches."""
    old_lines = shown[start:end].splitlines(keepends=True)
    new_lines = text.splitlines(keepends=True)
    old_starts = [start, *(start + n for n in accumulate(len(line) for line in old_lines))]
    new_starts = [0, *accumulate(len(line) for line in new_lines)]
    by_at = {h.at: h.value for h in scope}
    found: dict[int, str] = {}
    matcher = SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for tag, i1, i2, j1, _j2 in matcher.get_opcodes():
        if tag != "equal":
            continue
        for offset in range(i2 - i1):
            old_at, new_at = old_starts[i1 + offset], new_starts[j1 + offset]
            line = old_lines[i1 + offset]
            pos = line.find(REDACTED)
            while pos >= 0:
                if old_at + pos in by_at:
                    found[new_at + pos] = by_at[old_at + pos]
                pos = line.find(REDACTED, pos + len(REDACTED))
    return found


def _one(values: set[str]) -> str | None:
    """The only value of ``values``, or None for none or several."""
    return next(iter(values)) if len(values) == 1 else None
