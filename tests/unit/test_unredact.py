"""The values the model saw as ``[REDACTED]``, put back where it writes the marker
(agentgraph/security/unredact.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentgraph.capabilities.tools.base import ToolError
from agentgraph.capabilities.tools.files import (
    edit_text_file,
    unredacted_content,
    unredacted_edit,
    write_text_file,
)
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
    assert restore_rewrite(raw, after, redact, after) == (
        f'A_TOKEN = "{GITHUB}"\nDOC = "{REDACTED} is shown"\nB_TOKEN = "{OTHER}"\nNEW = "{SLACK}"\n'
    )
    assert restore_rewrite(raw, raw.replace("DOC", "NOTE"), redact, "") is None
    assert restore_rewrite("x = 1\n", f'x = "{REDACTED}"\n', redact, "") is None
    two = f'TOKENS = ["{REDACTED}", "{REDACTED}"]\n'
    with pytest.raises(Unrestorable):
        restore_rewrite(raw, two, redact, two)


def _write(folder: Path, name: str, content: str) -> str:
    """``content`` written over ``folder/name`` as write_file writes it."""
    path = folder / name
    written = unredacted_content(_redactor(), path.read_bytes(), name, content)
    write_text_file(str(folder), name, written)
    return path.read_bytes().decode()


def _edit(folder: Path, name: str, old: str, new: str, replace_all: bool = False) -> str:
    """``old`` replaced by ``new`` in ``folder/name`` as edit_file replaces it."""
    path = folder / name
    old, new = unredacted_edit(_redactor(), path.read_bytes(), name, old, new, replace_all)
    edit_text_file(str(folder), name, old, new, replace_all)
    return path.read_bytes().decode()


AWS_KEY_ID = "AKIA" + "IOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@pytest.mark.parametrize(
    ("raw", "written"),
    [
        (f'A = "{GITHUB}"\nB = "{OTHER}"\n', f'A = "x{REDACTED}"\nB = "{REDACTED}"\n'),
        (f"AWS_ACCESS_KEY_ID={AWS_KEY_ID}\n", f"AWS_ACCESS_KEY_ID={REDACTED}Z\n"),
        (
            "DB=postgres://app:s3cr3tPassw0rd@db.local/app\n",
            f"DB=postgres://app:{REDACTED} @db.local/app\n",
        ),
    ],
)
def test_a_value_put_where_redaction_would_not_hide_it_is_refused(
    tmp_path: Path, raw: str, written: str
) -> None:
    """A marker written against a word character or out of its pattern's context would
    put the value where redaction no longer finds it: the next read showed the model the
    whole token. Refused, the file unchanged."""
    (tmp_path / "c.env").write_text(raw)
    with pytest.raises(ToolError, match="nothing was written"):
        _write(tmp_path, "c.env", written)
    with pytest.raises(ToolError, match="nothing was written"):
        first = written.split("\n")[0]
        _edit(tmp_path, "c.env", _redactor().redact(raw).split("\n")[0], first)
    assert (tmp_path / "c.env").read_text() == raw


def test_a_label_stays_outside_the_marker_so_a_line_spelled_out_keeps_its_shape(
    tmp_path: Path,
) -> None:
    """A marker that also hid its label (``Bearer``, ``aws_secret_access_key =``) had
    the label written twice when the model spelled the line out: the file held
    ``Bearer Bearer …``, and redacted, neither the model nor the user's diff showed it."""
    assert _redactor().redact("Authorization: Bearer abcdefghijklmnop1234") == (
        f"Authorization: Bearer {REDACTED}"
    )
    raw = (
        f"[default]\naws_access_key_id = {AWS_KEY_ID}\naws_secret_access_key = {AWS_SECRET}\n"
        'curl -H "Authorization: Bearer abcdefghijklmnop1234567890" https://api\n'
    )
    (tmp_path / "creds").write_text(raw)
    shown = _redactor().redact(raw)
    assert AWS_SECRET not in shown and "aws_secret_access_key = " in shown
    spelled = shown.replace("https://api", "https://api/v2") + "region = eu-central-1\n"
    assert _write(tmp_path, "creds", spelled) == (
        raw.replace("https://api", "https://api/v2") + "region = eu-central-1\n"
    )


@pytest.mark.parametrize("sep", ["\x0c", "\x0b", "\x1c", "\x85", "\u2028", "\r", " "])
def test_a_line_separator_inside_a_line_aligns_nothing_across_lines(
    tmp_path: Path, sep: str
) -> None:
    """read_file splits lines at ``\\n`` only; the alignment split at every separator
    ``str.splitlines`` knows, so a piece of one line matched a piece of another and the
    value of a line the model deleted was written on the line it kept."""
    (tmp_path / "t.txt").write_text(f"key:{sep}{GITHUB}\n{OTHER}", newline="")
    assert _write(tmp_path, "t.txt", f"key:{sep}{REDACTED}") == f"key:{sep}{GITHUB}"
    (tmp_path / "t.txt").write_text(f"prod:{sep}{GITHUB}\ndev:{sep}{OTHER}\n", newline="")
    with pytest.raises(ToolError, match="nothing was written"):
        _write(tmp_path, "t.txt", f"staging:{sep}{REDACTED}\n")


def test_lines_of_a_crlf_file_keep_their_own_values_as_those_of_an_lf_file(
    tmp_path: Path,
) -> None:
    """read_file shows a CRLF file's lines without their ``\\r``: the model writes them
    back with ``\\n``, and the alignment matched none of them (two lines seen alike were
    refused where the LF file's were restored). An edit of several lines too."""
    for eol in ("\n", "\r\n"):
        (tmp_path / "t.py").write_bytes(f'TOKEN = "{GITHUB}"{eol}TOKEN = "{OTHER}"{eol}'.encode())
        written = f'# tokens\nTOKEN = "{REDACTED}"\nTOKEN = "{REDACTED}"\n'
        assert (
            _write(tmp_path, "t.py", written)
            == f'# tokens\nTOKEN = "{GITHUB}"\nTOKEN = "{OTHER}"\n'
        )
        (tmp_path / "t.py").write_bytes(f'A = "{GITHUB}"{eol}B = "{OTHER}"{eol}'.encode())
        old = f'A = "{REDACTED}"\nB = "{REDACTED}"'
        new = f'A = "{REDACTED}"\nC = 1\nB = "{REDACTED}"'
        assert _edit(tmp_path, "t.py", old, new) == (
            f'A = "{GITHUB}"{eol}C = 1{eol}B = "{OTHER}"{eol}'
        )


def test_an_edit_whose_marker_no_line_decides_is_refused_not_guessed(tmp_path: Path) -> None:
    """An edit's new marker is decided by the text it replaces and the lines it fits,
    never by lining the edit up against the whole file (a new ``KEY=`` under
    ``[staging]`` took prod's value), and a value given to one marker of the text is not
    handed to another by a fallback (a line moved by deleting it and inserting it beside
    another took the other's value)."""
    (tmp_path / "c.ini").write_text(f"[prod]\nKEY={GITHUB}\n[dev]\nKEY={OTHER}\n[staging]\n")
    with pytest.raises(ToolError, match="nothing was written"):
        _edit(tmp_path, "c.ini", "[staging]\n", f"[staging]\nKEY={REDACTED}\n")
    (tmp_path / "c.env").write_text(f"A_TOKEN={GITHUB}\nB_TOKEN={OTHER}\n")
    _edit(tmp_path, "c.env", f"A_TOKEN={REDACTED}\n", "")
    with pytest.raises(ToolError, match="nothing was written"):
        _edit(
            tmp_path, "c.env", f"B_TOKEN={REDACTED}\n", f"B_TOKEN={REDACTED}\nA_TOKEN={REDACTED}\n"
        )
    assert (tmp_path / "c.env").read_text() == f"B_TOKEN={OTHER}\n"
    (tmp_path / "one.env").write_text(f"GITHUB_TOKEN={GITHUB}\n")
    with pytest.raises(ToolError, match="nothing was written"):
        _write(tmp_path, "one.env", f"GITHUB_TOKEN={REDACTED}\nSLACK_TOKEN={REDACTED}\n")


def test_an_edit_of_text_the_model_saw_twice_is_refused_as_ambiguous(tmp_path: Path) -> None:
    """A file that holds the marker literally (a document about redaction) beside a
    token shows the model the same text twice: an edit of it went to the literal one
    unasked, and the token was left as it was."""
    raw = f"# example: KEY={REDACTED}\nKEY={GITHUB}\n"
    (tmp_path / "c.env").write_text(raw)
    with pytest.raises(ToolError, match="2 times"):
        _edit(tmp_path, "c.env", f"KEY={REDACTED}", f"KEY={OTHER}")
    assert (tmp_path / "c.env").read_text() == raw


def test_the_alignment_of_a_big_rewrite_compares_a_bounded_number_of_lines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Aligning every line with difflib took 48 s for 4,000 repetitive lines (about
    cubic): the lines the rewrite kept at both ends are taken off first, and a middle
    still too big is aligned by its lines that hold markers only. The context kept per
    marker is bounded too (a one-line JSON of 800 tokens took 714 MB)."""
    import agentgraph.security.unredact as unredact

    sizes: list[int] = []
    real = unredact.SequenceMatcher

    def counting(junk: Any, a: Any, b: Any, autojunk: bool = True) -> Any:
        sizes.append(max(len(a), len(b)))
        return real(junk, a, b, autojunk=autojunk)

    monkeypatch.setattr(unredact, "SequenceMatcher", counting)
    lines = [("}" if i % 3 else "    return None") for i in range(4000)]
    lines[1000] = f'TOKEN = "{GITHUB}"'
    raw = "\n".join(lines) + "\n"
    shown = _redactor().redact(raw)
    hidden = hidden_values(raw, shown)
    assert hidden is not None
    changed = shown.split("\n")
    for i in range(0, 4000, 7):
        if i != 1000:
            changed[i] = f"# changed {i}"
    assert restore_hidden("\n".join(changed), shown, hidden).count(GITHUB) == 1
    assert sizes and max(sizes) <= unredact.ALIGN_MAX_LINES
    long_line = "{" + ", ".join(f'"k{i}": "{GITHUB[:-4]}{i:04d}"' for i in range(300)) + "}"
    hidden = hidden_values(long_line, _redactor().redact(long_line))
    assert hidden is not None and len(hidden) == 300
    assert all(
        len(h.before) <= unredact.LINE_CONTEXT_MAX_CHARS
        and len(h.after) <= unredact.LINE_CONTEXT_MAX_CHARS
        for h in hidden
    )


def test_past_the_alignment_s_size_lines_alike_are_told_apart_by_their_neighbours() -> None:
    """A rewrite too big to align line by line is aligned by its lines that hold
    markers: each with the lines beside it, so the one of two ``KEY=`` lines the model
    kept keeps its own value when it deleted the other's section."""
    import agentgraph.security.unredact as unredact

    filler = [f"line {i}" for i in range(unredact.ALIGN_MAX_LINES + 10)]
    raw = "\n".join([*filler, "[prod]", f"KEY={GITHUB}", "[dev]", f"KEY={OTHER}", "end"]) + "\n"
    shown = _redactor().redact(raw)
    hidden = hidden_values(raw, shown)
    assert hidden is not None
    rewritten = [f"# {line}" for line in filler] + ["[dev]", f"KEY={REDACTED}", "end"]
    assert restore_hidden("\n".join(rewritten) + "\n", shown, hidden).endswith(
        f"[dev]\nKEY={OTHER}\nend\n"
    )


def test_past_the_alignment_s_size_lines_alike_with_alike_neighbours_are_refused() -> None:
    """Two ``KEY=`` lines with the same lines beside them cannot be told apart by their
    neighbours: the one the model kept took the first one's value unasked. Refused."""
    a, b = "ghp_" + "A" * 36, "ghp_" + "B" * 36
    block = ["host=h", "user=x", "KEY={}", "port=1"]
    filler = [f"line {i}" for i in range(600)]
    prod = [line.format(a) for line in block]
    dev = [line.format(b) for line in block]
    raw = "\n".join([*filler, "[prod]", *prod, "[dev]", *dev, *filler]) + "\n"
    shown = _redactor().redact(raw)
    hidden = hidden_values(raw, shown)
    assert hidden is not None
    kept = [line.format(REDACTED) for line in block]
    ends = [f"# {x}" for x in filler]
    rewritten = "\n".join([*ends, "[dev]", *kept, *ends]) + "\n"
    with pytest.raises(Unrestorable):
        restore_hidden(rewritten, shown, hidden)


def test_a_command_s_markers_are_put_back_only_on_lines_it_wrote_itself() -> None:
    """A command that scrubs a file's tokens to the marker (``sed 's/ghp_…/[REDACTED]/'``)
    or copies a template holding it over the file means the marker: put back, the token
    was on disk again. Only a marker whose line the command text holds (a here-document,
    ``printf``, a script's string; backslash escapes aside) gets its value back."""
    redact = _redactor().redact
    raw = f"token={GITHUB}\nB = {OTHER}\n"
    scrubbed = f"token={REDACTED}\nB = {REDACTED}\n"
    scrub = f"sed -i -E 's/ghp_[A-Za-z0-9]+/{REDACTED}/g' app.log"
    assert restore_rewrite(raw, scrubbed, redact, scrub) is None
    assert restore_rewrite(raw, scrubbed, redact, "cp template.log app.log") is None
    heredoc = f"cat > app.log <<'EOF'\ntoken={REDACTED}\nEOF"
    assert restore_rewrite(raw, f"token={REDACTED}\n", redact, heredoc) == f"token={GITHUB}\n"
    printf = f'printf "token={REDACTED}\\nB = \\"x\\"\\n" > app.log'
    assert restore_rewrite(raw, f'token={REDACTED}\nB = "x"\n', redact, printf) == (
        f'token={GITHUB}\nB = "x"\n'
    )
    # One line written, one scrubbed: only the written one is put back.
    both = f"cat > app.log <<'EOF'\ntoken={REDACTED}\nEOF\nsed -i 's/x/{REDACTED}/' app.log"
    assert restore_rewrite(raw, scrubbed, redact, both) == f"token={GITHUB}\nB = {REDACTED}\n"


@pytest.mark.parametrize("how", ["write", "edit"])
def test_sections_with_alike_secret_lines_swapped_never_swap_their_values(
    tmp_path: Path, how: str
) -> None:
    """``DB_PASSWORD=[REDACTED]`` under ``# prod`` and under ``# dev`` are the same line to
    the model: with the sections swapped, each was matched by its place and took the
    other's value, the production password written under ``# dev``. Alike marker lines
    are matched by their neighbours too: each keeps its own value, or the write is
    refused."""
    raw = "# prod\nDB_PASSWORD=Pr0d-Xk9mQ2vLp7\n# dev\nDB_PASSWORD=D3v-Zq81hVx03kLm\n"
    (tmp_path / ".env").write_text(raw)
    shown = _redactor().redact(raw)
    assert shown.count(f"DB_PASSWORD={REDACTED}\n") == 2
    prod, dev = shown.split("# dev\n")
    swapped = f"# dev\n{dev}{prod}"
    try:
        if how == "write":
            result = _write(tmp_path, ".env", swapped)
        else:
            result = _edit(tmp_path, ".env", shown, swapped)
    except ToolError:
        result = raw
    assert result in (
        raw,
        swapped.replace(REDACTED, "D3v-Zq81hVx03kLm", 1).replace(REDACTED, "Pr0d-Xk9mQ2vLp7", 1),
    )
    assert (tmp_path / ".env").read_text() == result
    # One line added beside a section keeps both values where they were.
    added = shown.replace("# dev\n", "# dev\nDEBUG=1\n")
    assert _write(tmp_path, ".env", added) == raw.replace("# dev\n", "# dev\nDEBUG=1\n")
