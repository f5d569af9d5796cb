"""Shared pieces of agentgraph's tools: the expected-failure exception and its formatter.

A tool raises :class:`ToolError` for a failure the model caused or can work
around (bad path, text not found, command declined). ``ToolNode`` turns it into
an error ``ToolMessage`` when configured with :func:`format_tool_error` (or the
exception types in :data:`HANDLED_TOOL_ERRORS`); any other exception is a bug
and propagates.
"""

from langgraph.prebuilt.tool_node import ToolInvocationError

TOOL_ERROR_MAX_CHARS = 2000
ARG_ERRORS_MAX_COUNT = 5


class ToolError(Exception):
    """An expected tool failure; its one-line message goes back to the model."""


HANDLED_TOOL_ERRORS: tuple[type[Exception], ...] = (ToolError, ToolInvocationError)


# ToolNode infers which exception types to convert from this parameter's
# annotation, so it must stay a plain union of exception classes.
def format_tool_error(error: ToolError | ToolInvocationError) -> str:
    """Render a handled tool failure for the model.

    Pass this as ``ToolNode(tools, handle_tool_errors=format_tool_error)``: ToolNode
    reads the annotation and converts only these two exception types.

    Unlike ToolNode's default, an argument-validation error does not echo the
    call's arguments back (a rejected ``write_file`` would repeat the whole file).

    Args:
        error: The exception raised by the tool or by argument validation.

    Returns:
        The error text, starting with ``Error:``.
    """
    if isinstance(error, ToolInvocationError):
        details = error.filtered_errors
        if details:
            parts = [
                f"{'.'.join(str(loc) for loc in d.get('loc', ())) or 'arguments'}: "
                f"{d.get('msg', 'invalid value')}"
                for d in details[:ARG_ERRORS_MAX_COUNT]
            ]
            text = f"invalid arguments for {error.tool_name}: " + "; ".join(parts)
        else:
            text = f"invalid arguments for {error.tool_name}: {error.source}"
    else:
        text = str(error)
    if len(text) > TOOL_ERROR_MAX_CHARS:
        text = text[:TOOL_ERROR_MAX_CHARS] + "…"
    return f"Error: {text}"
