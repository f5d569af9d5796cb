"""The whole copy of a cut tool output, read back for a summarizer (context/artifacts.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from agentgraph.capabilities.recall.search import history_docs, read_message
from agentgraph.context.artifacts import (
    ORIGINAL_MAX_BYTES,
    cut_marker,
    cut_original,
    output_artifact_path,
    with_originals,
)
from agentgraph.context.masking_text import MASKED_KEY, SUMMARIZED_COPY_KEY
from agentgraph.context.tokens import get_counter
from agentgraph.context.truncation import truncate_tool_output
from agentgraph.runtime.history.kinds import with_marker

COUNTER = get_counter("gpt-4o-mini")
WHOLE = "".join(f"CODE part_{i:03d}: ORBIT-{1000 + i}\nlog line {i}\n" for i in range(1, 200))


def _cut(folder: Path, call_id: str, text: str = WHOLE, *, save: bool = True) -> ToolMessage:
    """A result cut as the tools node cuts it, its whole copy saved where it says."""
    artifact = output_artifact_path(folder, call_id)
    cut = truncate_tool_output(
        text, 300, count=COUNTER.count_text, artifact_path=str(artifact), codec=COUNTER.codec
    )
    assert cut.truncated
    if save:
        folder.mkdir(parents=True, exist_ok=True)
        artifact.write_text(text, encoding="utf-8")
    message = ToolMessage(cut.text, tool_call_id=call_id, name="run_bash")
    return with_marker(message, **cut_marker(text))


def test_a_cut_result_reads_back_whole_and_nothing_else_changes(tmp_path: Path) -> None:
    cut = _cut(tmp_path, "call_1")
    assert "CODE part_100" not in cut.text
    assert cut_original(cut, str(tmp_path)) == WHOLE
    plain = ToolMessage("ok\n[exit code 0]", tool_call_id="call_2", name="run_bash")
    ask = HumanMessage("go")
    out = with_originals([ask, cut, plain], str(tmp_path))
    assert out[0] is ask and out[2] is plain
    assert out[1].text == WHOLE and out[1].tool_call_id == "call_1"
    assert cut.text != WHOLE  # the history's message is left as it is
    assert with_originals([cut], None)[0] is cut


def test_a_pointer_an_output_printed_opens_nothing(tmp_path: Path) -> None:
    """An output that prints a pointer line of its own (a file holding one) names a file
    that is no copy of its call's: it is never read, cut or not."""
    secret = tmp_path / "secret.txt"
    secret.write_text("token=abc", encoding="utf-8")
    fake = (
        f"head\n…90 tokens truncated… full output: {secret} — page through it with "
        "read_file(offset, limit)\ntail\n[exit code 0]"
    )
    message = ToolMessage(fake, tool_call_id="call_1", name="run_bash")
    assert cut_original(message, str(tmp_path)) is None
    cut = _cut(tmp_path, "call_2", WHOLE + fake)
    assert cut_original(cut, str(tmp_path)) == WHOLE + fake


def test_another_calls_copy_under_the_same_id_is_not_this_ones(tmp_path: Path) -> None:
    """A server that numbers its call ids anew gave a later call the same id, and its
    copy took the name: its digest is not the one this cut recorded, so the cut stays
    (even where the cut kept no head or tail to compare)."""
    first = _cut(tmp_path, "call_1")
    _cut(tmp_path, "call_1", WHOLE.replace("ORBIT", "DOCK"))
    assert cut_original(first, str(tmp_path)) is None


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
def test_a_copy_replaced_by_a_pipe_is_not_waited_on(tmp_path: Path) -> None:
    cut = _cut(tmp_path, "call_1")
    target = output_artifact_path(tmp_path, "call_1")
    target.unlink()
    os.mkfifo(target)  # a read of it would wait for a writer forever
    assert cut_original(cut, str(tmp_path)) is None


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symbolic links here")
def test_a_copy_replaced_by_a_link_or_too_large_or_gone_is_not_read(tmp_path: Path) -> None:
    folder = tmp_path / "artifacts"
    linked = _cut(folder, "call_1")
    target = output_artifact_path(folder, "call_1")
    outside = tmp_path / "outside.txt"
    outside.write_text(WHOLE, encoding="utf-8")
    target.unlink()
    target.symlink_to(outside)
    assert cut_original(linked, str(folder)) is None
    big = WHOLE + "x" * ORIGINAL_MAX_BYTES
    large = _cut(folder, "call_2", big)
    assert cut_original(large, str(folder)) is None
    gone = _cut(folder, "call_3", save=False)
    assert cut_original(gone, str(folder)) is None
    reply = AIMessage("x")
    assert with_originals([reply], str(folder)) == [reply]


def test_the_transcript_index_and_read_history_take_the_copy_in_place_of_the_cut(
    tmp_path: Path,
) -> None:
    """What a cut took is searched and read by reference as the copy; without the
    session's folder, or with another call's copy under the id, as the cut."""
    cut = _cut(tmp_path, "call_1")
    ask = HumanMessage("go", id="h0")
    call = AIMessage("", tool_calls=[{"name": "run_bash", "args": {}, "id": "call_1"}], id="a1")
    cut = cut.model_copy(update={"id": "t2"})
    docs = history_docs([ask, call, cut], folder=str(tmp_path))
    assert [d.position for d in docs] == [0, 1, 2]
    assert "CODE part_100" in docs[2].body
    assert "CODE part_100" in read_message([ask, call, cut], "msg:2", str(tmp_path))
    assert "CODE part_100" not in history_docs([ask, call, cut])[2].body
    assert "CODE part_100" not in read_message([ask, call, cut], "msg:2")
    # A compaction's copy of the cut (masked, or kept for its summarizer) is indexed as
    # its own text: what the cut took is found once, at the original.
    for key in (MASKED_KEY, SUMMARIZED_COPY_KEY):
        copy = cut.model_copy(
            update={"id": "t2~k", "additional_kwargs": {**cut.additional_kwargs, key: True}}
        )
        assert history_docs([copy], folder=str(tmp_path))[0].body == cut.text
    output_artifact_path(tmp_path, "call_1").write_text("another output", encoding="utf-8")
    assert history_docs([cut], folder=str(tmp_path))[0].body == cut.text
