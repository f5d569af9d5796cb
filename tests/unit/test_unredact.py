"""The values the model saw as ``[REDACTED]``, put back where it writes the marker
(agentgraph/security/unredact.py)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentgraph.security.redaction import REDACTED, Redactor
from agentgraph.security.unredact import (
    Unrestorable,
    hidden_values,
    restore_hidden,
    restore_rewrite,
    shown_to_raw,
)

GITHUB = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
OTHER = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
SLACK = "xoxb-" + "1234567890-0987654321-AbCdEfGhIjKlMnOpQrStUvWx"
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx9\nabcDEF012345\n"
    "-----END RSA PRIVATE KEY-----"
)
SECRETS = (GITHUB, OTHER, SLACK, PEM, "db-password-4711")
PROPERTY_SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def _redactor() -> Redactor:
    return Redactor(exact_values=["db-password-4711"])


def test_a_file_rewritten_with_its_markers_gets_its_values_back() -> None:
    raw = f'TOKEN = "{GITHUB}"\nURL = "https://api.github.com"\n'
    shown = _redactor().redact(raw)
    assert shown == f'TOKEN = "{REDACTED}"\nURL = "https://api.github.com"\n'
    hidden = hidden_values(raw, shown)
    assert hidden is not None
    rewritten = shown + "TIMEOUT = 30\n"
    assert restore_hidden(rewritten, shown, hidden) == raw + "TIMEOUT = 30\n"


def test_each_marker_gets_the_value_of_its_own_line_wherever_the_line_moves() -> None:
    raw = f'A_TOKEN = "{GITHUB}"\nB_TOKEN = "{OTHER}"\nSLACK = {SLACK}\n'
    shown = _redactor().redact(raw)
    hidden = hidden_values(raw, shown)
    assert hidden is not None and [h.value for h in hidden] == [GITHUB, OTHER, SLACK]
    moved = "\n".join(reversed(shown.splitlines())) + "\n"
    assert restore_hidden(moved, shown, hidden) == "\n".join(reversed(raw.splitlines())) + "\n"


def test_a_changed_line_takes_the_one_value_of_what_it_replaces_else_is_refused() -> None:
    raw = f'A_TOKEN = "{GITHUB}"\nB_TOKEN = "{OTHER}"\n'
    shown = _redactor().redact(raw)
    hidden = hidden_values(raw, shown)
    assert hidden is not None
    changed = f'A_TOKEN: str = "{REDACTED}"'
    line_a = (0, shown.index("\n"))
    assert restore_hidden(changed, shown, hidden, line_a) == f'A_TOKEN: str = "{GITHUB}"'
    with pytest.raises(Unrestorable):
        restore_hidden(changed, shown, hidden)
    # Two lines the model saw alike, hiding different values: kept in place, each keeps
    # its own; one of them changed, which one is unknown.
    twin = f'TOKEN = "{GITHUB}"\nTOKEN = "{OTHER}"\n'
    twin_shown = _redactor().redact(twin)
    twin_hidden = hidden_values(twin, twin_shown)
    assert twin_hidden is not None
    assert restore_hidden("# tokens\n" + twin_shown, twin_shown, twin_hidden) == (
        "# tokens\n" + twin
    )
    with pytest.raises(Unrestorable):
        restore_hidden(f'TOKEN: str = "{REDACTED}"\n', twin_shown, twin_hidden)


def test_one_value_hidden_in_the_file_is_the_one_any_marker_stands_for() -> None:
    raw = f"key: {GITHUB}\n"
    shown = _redactor().redact(raw)
    hidden = hidden_values(raw, shown)
    assert hidden is not None
    assert restore_hidden(f"github_key: {REDACTED}  # moved\n", shown, hidden) == (
        f"github_key: {GITHUB}  # moved\n"
    )


def test_a_literal_marker_in_the_file_stays_literal() -> None:
    raw = f'MARK = "{REDACTED}"\nTOKEN = "{GITHUB}"\n'
    shown = _redactor().redact(raw)
    hidden = hidden_values(raw, shown)
    assert hidden is not None and [h.value for h in hidden] == [REDACTED, GITHUB]
    assert restore_hidden(shown, shown, hidden) == raw


def test_markers_side_by_side_or_a_text_that_is_no_redaction_are_not_read() -> None:
    assert hidden_values(f"{GITHUB}{OTHER}", f"{REDACTED}{REDACTED}") is None
    assert hidden_values("abc", f"x{REDACTED}") is None
    assert hidden_values("abc", "abc") == []


def test_offsets_of_the_shown_text_map_to_the_raw_one_outside_markers() -> None:
    raw = f"a={GITHUB};b=1"
    shown = _redactor().redact(raw)
    hidden = hidden_values(raw, shown)
    assert hidden is not None
    at = shown.index(";")
    assert raw[shown_to_raw(hidden, at) or 0] == ";"
    assert shown_to_raw(hidden, shown.index(REDACTED) + 1) is None
    assert shown_to_raw(hidden, 1) == 1


_filler = st.text(alphabet="abc =:\"'\n#xy_", max_size=12)


@PROPERTY_SETTINGS
@given(
    parts=st.lists(st.tuples(_filler, st.sampled_from(SECRETS)), min_size=1, max_size=6),
    tail=_filler,
    order=st.randoms(use_true_random=False),
)
def test_any_order_of_the_lines_seen_is_written_with_their_own_values_or_refused(
    parts: list[tuple[str, str]], tail: str, order: object
) -> None:
    """Over random files of secrets among text: the text as the model saw it is written
    back as the file; its lines in any order are written back as lines of the file that
    the model saw so (each marker a value its line hid), or refused, never with a value
    of another line swapped in."""
    raw = "".join(f + s for f, s in parts) + tail
    shown = _redactor().redact(raw)
    hidden = hidden_values(raw, shown)
    if hidden is None:
        return  # not readable one way: the tools refuse to write markers into it
    assert restore_hidden(shown, shown, hidden) == raw
    if any("\n" in h.value for h in hidden):
        return  # a value spans lines: its shown line is not one raw line
    shown_lines, raw_lines = shown.split("\n"), raw.split("\n")
    assert len(shown_lines) == len(raw_lines)
    index = list(range(len(shown_lines)))
    order.shuffle(index)  # type: ignore[attr-defined]
    try:
        restored = restore_hidden("\n".join(shown_lines[i] for i in index), shown, hidden)
    except Unrestorable:
        return
    for i, line in zip(index, restored.split("\n"), strict=True):
        alike = {r for s, r in zip(shown_lines, raw_lines, strict=True) if s == shown_lines[i]}
        assert line in alike


def test_a_command_s_rewrite_gets_back_only_the_values_it_wrote_as_the_marker() -> None:
    """A file a command rewrote: each marker it wrote gets its line's value; what the
    command kept or wrote itself stays as it is, and a rewrite with no marker more
    than the file held literally is left alone."""
    redact = _redactor().redact
    raw = f'A_TOKEN = "{GITHUB}"\nB_TOKEN = "{OTHER}"\nDOC = "{REDACTED} is shown"\n'
    # The command kept A's raw line (sed), wrote B's from what it saw, moved, and added
    # a value of its own that the model never saw.
    after = (
        f'A_TOKEN = "{GITHUB}"\nDOC = "{REDACTED} is shown"\nB_TOKEN = "{REDACTED}"\n'
        f'NEW = "{SLACK}"\n'
    )
    assert restore_rewrite(raw, after, redact) == (
        f'A_TOKEN = "{GITHUB}"\nDOC = "{REDACTED} is shown"\nB_TOKEN = "{OTHER}"\nNEW = "{SLACK}"\n'
    )
    assert restore_rewrite(raw, raw.replace("DOC", "NOTE"), redact) is None
    assert restore_rewrite("x = 1\n", f'x = "{REDACTED}"\n', redact) is None
    with pytest.raises(Unrestorable):
        restore_rewrite(raw, f'TOKENS = ["{REDACTED}", "{REDACTED}"]\n', redact)
