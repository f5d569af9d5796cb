"""Huge user messages are offloaded like tool outputs.

A pasted or imported message of megabytes would fill the whole window by itself:
the current turn could not be trimmed and no summary could be written. Before such
a message is stored, its full text goes to an artifact file and the message keeps
the head and the tail with a pointer to the file (``read_file`` pages through it),
exactly as a long tool output (see ``context/truncation.py``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from langchain_core.messages import BaseMessage, HumanMessage

from agentgraph.context.tokens import TokenCounter
from agentgraph.context.truncation import truncate_tool_output

__all__ = ["OFFLOADED_KEY", "offload_user_messages"]

OFFLOADED_KEY = "offloaded_to"
"""Key in the agentgraph metadata of a cut user message: the artifact with its full text."""


def offload_user_messages(
    messages: Sequence[BaseMessage],
    *,
    folder: Path,
    max_tokens: int,
    counter: TokenCounter,
) -> list[BaseMessage]:
    """Cut user messages longer than ``max_tokens``, saving their full text in ``folder``.

    Args:
        messages: Messages about to be stored.
        folder: The session's artifacts folder.
        max_tokens: The most tokens a stored user message keeps (the tool-output cap).
        counter: The model's token counter.

    Returns:
        The messages; cut ones are copies marked ``agentgraph.offloaded_to``.

    Raises:
        OSError: The artifact could not be written (nothing is cut then).
    """
    out: list[BaseMessage] = []
    for msg in messages:
        text = msg.content
        if (
            not isinstance(msg, HumanMessage)
            or not isinstance(text, str)
            or counter.fits(text, max_tokens)
        ):
            out.append(msg)
            continue
        digest = hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"user-{digest}.txt"
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        cut = truncate_tool_output(
            text,
            max_tokens,
            count=counter.count_text,
            artifact_path=str(path),
            codec=counter.codec,
        )
        kwargs = dict(msg.additional_kwargs)
        meta = dict(kwargs.get("agentgraph") or {})
        meta[OFFLOADED_KEY] = str(path)
        kwargs["agentgraph"] = meta
        out.append(msg.model_copy(update={"content": cut.text, "additional_kwargs": kwargs}))
    return out
