"""Scripted memory calls and what a recorded request shows of them."""

from __future__ import annotations

from typing import Any


def save_reply(content: str) -> dict[str, Any]:
    """A server reply calling ``memory_save`` with ``content``."""
    return {"tool_calls": [{"name": "memory_save", "arguments": {"content": content}}]}


def system_text(request: dict[str, Any]) -> str:
    """The system prompt of a recorded chat request."""
    return str(request["messages"][0]["content"])


def tool_results(request: dict[str, Any]) -> list[str]:
    """The tool results a recorded chat request carries, in order."""
    return [str(m["content"]) for m in request["messages"] if m.get("role") == "tool"]
