"""Keep injected arguments out of a tool's validated-input dump.

``BaseTool`` validates a call's arguments with the tool's pydantic ``args_schema``
and then ``model_dump()``s the result to pick the arguments to pass. Injected
arguments (``runtime: ToolRuntime``, ``InjectedState``...) are validated too, so the
dump serializes the whole graph state, every message of the session, on every
tool call: 34 ms per call at 3,000 messages, growing with the session. The
injected values are passed from the call's input anyway (never from the dump), so
marking their fields ``exclude=True`` changes nothing a tool receives.
"""

from __future__ import annotations

import typing
from collections.abc import Iterable
from typing import Any

from langchain_core.tools import BaseTool, InjectedToolArg
from langgraph.prebuilt import ToolRuntime
from pydantic import BaseModel


def _is_injected(annotation: Any, metadata: Iterable[Any]) -> bool:
    origin = typing.get_origin(annotation) or annotation
    if isinstance(origin, type) and issubclass(origin, ToolRuntime):
        return True
    return any(
        isinstance(m, InjectedToolArg) or (isinstance(m, type) and issubclass(m, InjectedToolArg))
        for m in metadata
    )


def exclude_injected_from_dump(tools: Iterable[BaseTool]) -> None:
    """Mark the injected fields of each tool's input model ``exclude=True`` (idempotent).

    Args:
        tools: Tools whose ``args_schema`` is a pydantic model (others are left alone).
    """
    for tool in tools:
        schema = tool.args_schema
        if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
            continue
        changed = False
        for field in schema.model_fields.values():
            if field.exclude or not _is_injected(field.annotation, field.metadata):
                continue
            field.exclude = True
            changed = True
        if changed:
            schema.model_rebuild(force=True)
