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

import threading
import typing
from collections.abc import Iterable
from typing import Any

from langchain_core.tools import BaseTool, InjectedToolArg
from langgraph.prebuilt import ToolRuntime
from pydantic import BaseModel
from pydantic.fields import FieldInfo

# One rebuild at a time: parallel tool calls may reach the same tool first together.
_REBUILD_LOCK = threading.Lock()


def _is_injected(annotation: Any, metadata: Iterable[Any]) -> bool:
    origin = typing.get_origin(annotation) or annotation
    if isinstance(origin, type) and issubclass(origin, ToolRuntime):
        return True
    return any(
        isinstance(m, InjectedToolArg) or (isinstance(m, type) and issubclass(m, InjectedToolArg))
        for m in metadata
    )


def _pending_fields(schema: type[BaseModel]) -> list[FieldInfo]:
    return [
        field
        for field in schema.model_fields.values()
        if not field.exclude and _is_injected(field.annotation, field.metadata)
    ]


def exclude_injected_from_dump(tools: Iterable[BaseTool | None]) -> None:
    """Mark the injected fields of each tool's input model ``exclude=True`` (idempotent).

    The tools node calls this for each tool as it is first called, not when the graph
    is built: rebuilding every tool's model costs start-up time (about 6 ms a tool)
    that the first request does not need. Safe from parallel tool calls.

    Args:
        tools: Tools whose ``args_schema`` is a pydantic model (others are left alone).
    """
    for tool in tools:
        schema = tool.args_schema if tool is not None else None
        if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
            continue
        if not _pending_fields(schema):
            continue  # done already: the common case, without the lock
        with _REBUILD_LOCK:
            pending = _pending_fields(schema)
            for field in pending:
                field.exclude = True
            if pending:
                schema.model_rebuild(force=True)
