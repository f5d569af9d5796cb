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
file hid, a value another marker of the text took left out. A marker none of these
decides is refused (:class:`Unrestorable`): which value goes where is not certain, and
guessing could swap two secrets unseen. A value put back must be hidden again where it
lands (:func:`written_as_hidden`): against a word character it no longer matches its
pattern, and the next read would show it. The model never sees a value; what it wrote is
written with the values it could not see.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from difflib import SequenceMatcher
from itertools import accumulate
from typing import Any

from agentgraph.security.redaction import REDACTED

__all__ = [
    "ALIGN_MAX_LINES",
    "ALIKE_CONTEXT_MAX_LINES",
    "LINE_CONTEXT_MAX_CHARS",
    "Hidden",
    "Unrestorable",
    "hidden_values",
    "restore_hidden",
    "restore_rewrite",
    "shown_to_raw",
    "written_as_hidden",
]

# Characters of a marker's line kept on each side of it to tell lines apart: a one-line
# JSON of 800 tokens kept its whole 0.84 MB line per marker, twice (714 MB).
LINE_CONTEXT_MAX_CHARS = 256
# Lines difflib aligns at most (the part between the lines a rewrite kept at both ends,
# else only its lines that hold markers): its line matching is about cubic in the worst
# case (4,000 repetitive lines, every seventh changed, took 48 s; 1,000 took 1.8 s, 500
# 0.2 s).
ALIGN_MAX_LINES = 500
# Lines on either side of a marker line the file holds more than once that are compared
# with it to tell its places apart (``KEY=[REDACTED]`` under ``[prod]`` and ``[dev]``).
ALIKE_CONTEXT_MAX_LINES = 8


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
        before: The marker's line before it, as the model saw it (its last
            :data:`LINE_CONTEXT_MAX_CHARS`).
        after: The marker's line after it, as the model saw it (its first
            :data:`LINE_CONTEXT_MAX_CHARS`, without a ``\r`` that ends it).
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
        before, after = _around(shown, at)
        hidden.append(Hidden(at, start, raw[start:stop], before, after))
        at = at + len(REDACTED) + len(piece)
    return hidden


def _around(text: str, at: int) -> tuple[str, str]:
    """The text of the marker at ``at``'s line before and after it, each at most
    :data:`LINE_CONTEXT_MAX_CHARS` (lines end at ``\n`` only, as read_file numbers them,
    and a ``\r`` before it is no part of the line)."""
    floor = max(0, at - LINE_CONTEXT_MAX_CHARS)
    line_start = text.rfind("\n", floor, at)
    before = text[floor if line_start < 0 else line_start + 1 : at]
    after_at = at + len(REDACTED)
    ceiling = after_at + LINE_CONTEXT_MAX_CHARS
    line_end = text.find("\n", after_at, ceiling + 1)
    if line_end < 0:
        return before, text[after_at:ceiling]
    return before, text[after_at:line_end].removesuffix("\r")


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
    text: str,
    shown: str,
    hidden: list[Hidden],
    replaced: tuple[int, int] | None = None,
    only: Callable[[str], bool] | None = None,
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
        only: Whether the marker on this line (its text around it, bounded) stands for a
            value; a marker it refuses stays the marker. None: every marker does.

    Raises:
        Unrestorable: A marker no rule decides.
    """
    if REDACTED not in text or not hidden:
        return text
    start, end = replaced if replaced is not None else (0, len(shown))
    scope = [h for h in hidden if start <= h.at < end]
    aligned = _aligned(text, shown, start, end, scope)
    # A value the alignment gave one marker is not handed to another by a fallback: a
    # line moved by deleting it and inserting it beside another took the other's value.
    taken = set(aligned.values())
    out: list[str] = []
    pos = 0
    while (at := text.find(REDACTED, pos)) >= 0:
        before, after = _around(text, at)
        if only is not None and not only(before + REDACTED + after):
            out += [text[pos:at], REDACTED]
            pos = at + len(REDACTED)
            continue
        value = aligned.get(at) or _fallback(before, after, hidden, scope, taken, replaced)
        if value is None:
            line = (before + REDACTED + after)[-2 * LINE_CONTEXT_MAX_CHARS :]
            raise Unrestorable(f"{REDACTED} on the line {line!r}")
        out += [text[pos:at], value]
        pos = at + len(REDACTED)
    out.append(text[pos:])
    return "".join(out)


def written_as_hidden(restored: str, written: str, redact: Callable[[str], str]) -> bool:
    """Whether ``restored`` (a text with values put back) redacts to what ``written``
    (the same text as the model wrote it, markers and all) redacts to: a value put
    against a word character or out of its pattern's context (``x[REDACTED]``,
    ``postgres://u:[REDACTED] @h``) is no longer found by redaction, and the next read
    would show it to the model whole.

    Args:
        restored: The text to write.
        written: The text as the model wrote it.
        redact: What the model's view of the file passes through.
    """
    return redact(restored) == redact(written)


def restore_rewrite(
    before: str, after: str, redact: Callable[[str], str], command: str
) -> str | None:
    """``after``, a file's text that was ``before`` until something the model ran rewrote
    it (a shell command: a here-document, ``printf``, a script), with each marker it
    wrote given back the value it stands for in ``before`` (:func:`restore_hidden`, the
    whole file replaced); None when it wrote none (no more markers than ``before`` held
    literally) or ``before`` hid nothing.

    Only a marker whose line, as the file holds it, the command text holds too (its
    backslash escapes aside) was written by the model from what it saw: a command that
    scrubs tokens to the marker (``sed 's/ghp_…/[REDACTED]/'``) or copies a template
    holding it means the marker, and putting the value back had the token on disk again.
    The text around the markers stays as the command wrote it: a value the command kept
    or wrote itself (from the environment, say) is never touched.

    Args:
        before: The file's text before the command.
        after: Its text after.
        redact: What the model's view of the file passed through.
        command: The step's command lines.

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
    plain = command.replace("\\", "")
    restored = restore_hidden(after, shown, hidden, only=lambda line: line in plain)
    if not written_as_hidden(restored, after, redact):
        raise Unrestorable("a value put back would not be hidden where it was written")
    return None if restored == after else restored


def _fallback(
    before: str,
    after: str,
    hidden: list[Hidden],
    scope: list[Hidden],
    taken: set[str],
    replaced: tuple[int, int] | None,
) -> str | None:
    """The value of a marker the alignment left, by the rules after it in the module
    docstring (looked for only then: over every hidden value, for each marker, they
    took seconds on a file of thousands)."""
    same = {h.value for h in hidden if h.before == before and h.after == after}
    fitting = {h.value for h in hidden if h.before.endswith(before) and h.after.startswith(after)}
    return (
        _one(same)
        or _one(fitting)
        or (_one({h.value for h in scope} - taken) if replaced is not None else None)
        or _one({h.value for h in hidden} - taken)
    )


def _aligned(text: str, shown: str, start: int, end: int, scope: list[Hidden]) -> dict[int, str]:
    """Offset in ``text`` of each marker on a line that ``shown[start:end]`` holds in the
    same place of a line-by-line alignment → the value of the marker it matches.

    Lines end at ``\n`` only and compare without a ``\r`` before it (read_file shows a
    CRLF file's lines without it; ``str.splitlines`` also split at form feeds and
    ``\u2028``, and a piece of one line matched a piece of another). The lines kept at
    both ends are matched first; difflib aligns the rest when it is at most
    :data:`ALIGN_MAX_LINES` lines, else only its lines that hold markers, each with its
    neighbours.
    """
    old_lines = _lines(shown[start:end])
    new_lines = _lines(text)
    old_starts = [start, *(start + n for n in accumulate(len(line) for line in old_lines))]
    new_starts = [0, *accumulate(len(line) for line in new_lines)]
    old_keys = [_key(line) for line in old_lines]
    new_keys = [_key(line) for line in new_lines]
    # Marker lines alike (``DB_PASSWORD=[REDACTED]`` under ``# prod`` and ``# dev``) are
    # matched by their neighbours too, never by their place alone: two sections swapped
    # had each value written under the other's heading.
    alike = _alike_marker_lines(old_keys) | _alike_marker_lines(new_keys)
    old_cmp, new_cmp = _told_apart(old_keys, new_keys, alike)
    head = 0
    while head < min(len(old_cmp), len(new_cmp)) and old_cmp[head] == new_cmp[head]:
        head += 1
    tail = 0
    most = min(len(old_cmp), len(new_cmp)) - head
    while tail < most and old_cmp[-1 - tail] == new_cmp[-1 - tail]:
        tail += 1
    pairs = [(i, i) for i in range(head)]
    pairs += [(len(old_keys) - 1 - k, len(new_keys) - 1 - k) for k in range(tail)]
    old_mid = list(range(head, len(old_keys) - tail))
    new_mid = list(range(head, len(new_keys) - tail))
    old_seq: list[Any] = [old_cmp[i] for i in old_mid]
    new_seq: list[Any] = [new_cmp[j] for j in new_mid]
    if max(len(old_mid), len(new_mid)) > ALIGN_MAX_LINES:
        # Each line that holds a marker with the lines on either side of it: two lines
        # alike (``KEY=[REDACTED]`` under ``[prod]`` and ``[dev]``) are told apart by
        # them as the whole alignment would.
        old_mid = [i for i in old_mid if REDACTED in old_keys[i]]
        new_mid = [j for j in new_mid if REDACTED in new_keys[j]]
        old_seq = _unique([tuple(old_keys[max(0, i - 1) : i + 2]) for i in old_mid])
        new_seq = _unique([tuple(new_keys[max(0, j - 1) : j + 2]) for j in new_mid])
    if 0 < max(len(old_mid), len(new_mid)) <= ALIGN_MAX_LINES:
        matcher = SequenceMatcher(None, old_seq, new_seq, autojunk=False)
        for tag, i1, i2, j1, _j2 in matcher.get_opcodes():
            if tag == "equal":
                pairs += [(old_mid[i1 + k], new_mid[j1 + k]) for k in range(i2 - i1)]
    by_at = {h.at: h.value for h in scope}
    found: dict[int, str] = {}
    for i, j in pairs:
        line = old_keys[i]
        pos = line.find(REDACTED)
        while pos >= 0:
            if old_starts[i] + pos in by_at:
                found[new_starts[j] + pos] = by_at[old_starts[i] + pos]
            pos = line.find(REDACTED, pos + len(REDACTED))
    return found


def _alike_marker_lines(keys: list[str]) -> set[str]:
    """The lines holding a marker that ``keys`` holds more than once."""
    counts = Counter(key for key in keys if REDACTED in key)
    return {key for key, count in counts.items() if count > 1}


def _told_apart(
    old_keys: list[str], new_keys: list[str], alike: set[str]
) -> tuple[list[Any], list[Any]]:
    """``old_keys`` and ``new_keys`` as compared: each line of ``alike`` with the fewest
    lines on either side of it (up to :data:`ALIKE_CONTEXT_MAX_LINES`) that tell its
    places apart in both texts, so that it matches only a line in the same surroundings;
    a line no such window tells apart (alike lines side by side) is compared alone,
    matched by its place as any other line."""
    old_out: list[Any] = list(old_keys)
    new_out: list[Any] = list(new_keys)
    spots: dict[str, tuple[list[int], list[int]]] = {key: ([], []) for key in alike}
    for side, keys in enumerate((old_keys, new_keys)):
        for n, line in enumerate(keys):
            if line in spots:
                spots[line][side].append(n)
    for old_spots, new_spots in spots.values():
        for k in range(1, ALIKE_CONTEXT_MAX_LINES + 1):
            old_windows = [tuple(old_keys[max(0, n - k) : n + k + 1]) for n in old_spots]
            new_windows = [tuple(new_keys[max(0, n - k) : n + k + 1]) for n in new_spots]
            if len(set(old_windows)) == len(old_windows) and len(set(new_windows)) == len(
                new_windows
            ):
                for n, window in zip(old_spots, old_windows, strict=True):
                    old_out[n] = window
                for n, window in zip(new_spots, new_windows, strict=True):
                    new_out[n] = window
                break
    return old_out, new_out


def _unique(keys: list[Any]) -> list[Any]:
    """``keys`` with each one seen more than once made unlike any other: lines alike with
    neighbours alike cannot be told apart, and matching them would guess."""
    seen = Counter(keys)
    return [key if seen[key] == 1 else object() for key in keys]


def _lines(text: str) -> list[str]:
    """``text``'s lines, each with its ``\n``: split there only."""
    lines = text.split("\n")
    out = [line + "\n" for line in lines[:-1]]
    return [*out, lines[-1]] if lines[-1] else out


def _key(line: str) -> str:
    """A line as compared: without its ``\n`` and a ``\r`` before it."""
    return line.removesuffix("\n").removesuffix("\r")


def _one(values: set[str]) -> str | None:
    """The only value of ``values``, or None for none or several."""
    return next(iter(values)) if len(values) == 1 else None
