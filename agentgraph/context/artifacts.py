"""Full copies of the tool outputs cut for the history: where one is saved, and the copy
a compaction's summarizer reads in place of the cut.

A tool output over its cap keeps its head and tail in the history (the cut names where
the whole of it is) and goes whole to the session's artifacts folder, named after its
call. Given the cut, the summarizer never saw what the cut took, and no summary held
it: a model printing eight small files in one ``cat`` at a 16k window kept 64 of their
100 codes, where deepagents, which cuts nothing there, kept all 100. A compaction now
reads the saved copy, as masked outputs reach it as their originals.

The cut message records the SHA-256 of the copy (:func:`cut_marker`), and only a copy
with that digest, at the path named after that very call, is read: an output may print a
pointer line of its own (a file that holds one, a hostile command), and the path it
names is never opened; a server that numbers its call ids anew may give a later call the
same id, whose copy then holds another output. The copy is opened without following a
link or waiting on a pipe, and one larger than the output buffer of a command is left
as the cut.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path

from langchain_core.messages import BaseMessage, ToolMessage

from agentgraph.capabilities.tools.workspace import read_regular
from agentgraph.runtime.history import AGENTGRAPH_KEY

__all__ = [
    "CUT_DIGEST_KEY",
    "ORIGINAL_MAX_BYTES",
    "cut_marker",
    "cut_original",
    "output_artifact_path",
    "was_cut",
    "with_originals",
]

# The largest saved copy read back: a shell command's own output buffer
# (agentgraph/capabilities/tools/bash.py BASH_OUTPUT_MAX_BYTES); a larger one would
# only be cut again to fit the summarizer's call.
ORIGINAL_MAX_BYTES = 1024 * 1024
# How long the hexadecimal call digest in a copy's file name is.
_DIGEST_CHARS = 16
# Field of a cut message's marker dict: the SHA-256 (hex) of its saved whole copy.
CUT_DIGEST_KEY = "cut_sha256"


def output_artifact_path(folder: Path, tool_call_id: str) -> Path:
    """Where the full output of a call cut for the history is saved.

    Args:
        folder: The session's artifacts folder.
        tool_call_id: The call whose output was cut.

    Returns:
        The copy's path (a digest of the id: ids come from providers and may hold any
        character).
    """
    safe = hashlib.sha1(tool_call_id.encode()).hexdigest()[:_DIGEST_CHARS]
    return folder / f"tool-{safe}.txt"


def cut_marker(whole: str) -> dict[str, str]:
    """The marker fields a message cut from ``whole`` carries (see :func:`cut_original`).

    Args:
        whole: The output as saved to its copy.

    Returns:
        ``{CUT_DIGEST_KEY: sha256 hex of its UTF-8 bytes}``.
    """
    return {CUT_DIGEST_KEY: hashlib.sha256(whole.encode("utf-8")).hexdigest()}


def was_cut(message: BaseMessage) -> bool:
    """Whether the tool node cut ``message`` (its marker records a saved copy)."""
    meta = message.additional_kwargs.get(AGENTGRAPH_KEY)
    return isinstance(meta, dict) and CUT_DIGEST_KEY in meta


def cut_original(message: ToolMessage, folder: str | None) -> str | None:
    """The saved whole output of ``message`` when the history holds it cut, else None.

    Args:
        message: A tool result as the history holds it.
        folder: The session's artifacts folder (None: no copies to read).

    Returns:
        The copy's text; None when the message records no cut (:func:`cut_marker`), or
        its call's copy is gone, a link or no regular file, larger than
        :data:`ORIGINAL_MAX_BYTES`, not UTF-8 or not the digest recorded.
    """
    meta = message.additional_kwargs.get(AGENTGRAPH_KEY)
    digest = meta.get(CUT_DIGEST_KEY) if isinstance(meta, dict) else None
    if not folder or not isinstance(digest, str):
        return None
    path = output_artifact_path(Path(folder), message.tool_call_id)
    data = read_regular(path, ORIGINAL_MAX_BYTES)
    if data is None or hashlib.sha256(data).hexdigest() != digest:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def with_originals(
    messages: Sequence[BaseMessage],
    folder: str | None,
    *,
    shorten: Callable[[str], str] | None = None,
) -> list[BaseMessage]:
    """``messages`` with each cut tool result replaced by a copy holding its saved whole
    output (:func:`cut_original`); every other message is itself.

    Args:
        messages: Messages to summarize.
        folder: The session's artifacts folder.
        shorten: Applied to each saved output before it takes the cut's place (a
            summarizer call's bound).

    Returns:
        The messages, in order.
    """
    if not folder:
        return list(messages)
    out: list[BaseMessage] = []
    for m in messages:
        original = cut_original(m, folder) if isinstance(m, ToolMessage) else None
        if original is not None:
            text = shorten(original) if shorten is not None else original
            m = m.model_copy(update={"content": text})
        out.append(m)
    return out
