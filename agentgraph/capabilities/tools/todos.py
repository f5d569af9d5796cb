"""todo_write / todo_read: the agent's task list, kept in the graph state.

``todo_write`` returns a ``Command`` so the list lands in ``state["todos"]``
(a last-write-wins channel) together with the tool's answer.
"""

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.types import Command
from pydantic import BaseModel, Field

from agentgraph.capabilities.tools.base import ToolError
from agentgraph.runtime.runctx import AgentToolRuntime
from agentgraph.runtime.state import Todo

TODO_MAX_ITEMS = 100
TODO_CONTENT_MAX_CHARS = 500
TODO_STATUSES = ("pending", "in_progress", "done")
_STATUS_MARKS = {"pending": "[ ]", "in_progress": "[~]", "done": "[x]"}


class TodoItem(BaseModel):
    """One task."""

    content: str = Field(description="Short imperative sentence.")
    status: Literal["pending", "in_progress", "done"]


def validate_todos(items: Sequence[TodoItem | Mapping[str, Any]]) -> list[Todo]:
    """Check a proposed task list and convert it to state entries.

    Args:
        items: The tasks, as models or plain mappings.

    Returns:
        New ``Todo`` dicts in the same order.

    Raises:
        ToolError: Too many tasks, an empty or over-long task, an unknown
            status, or more than one task in progress.
    """
    if len(items) > TODO_MAX_ITEMS:
        raise ToolError(f"{len(items)} todos given; keep the list to {TODO_MAX_ITEMS} or fewer")
    todos: list[Todo] = []
    for number, item in enumerate(items, start=1):
        raw = item.model_dump() if isinstance(item, TodoItem) else dict(item)
        content = str(raw.get("content", "")).strip()
        status = raw.get("status")
        if not content:
            raise ToolError(f"todo {number} has empty content")
        if len(content) > TODO_CONTENT_MAX_CHARS:
            raise ToolError(
                f"todo {number} is {len(content)} characters; keep each under "
                f"{TODO_CONTENT_MAX_CHARS}"
            )
        if status == "pending":
            todos.append({"content": content, "status": "pending"})
        elif status == "in_progress":
            todos.append({"content": content, "status": "in_progress"})
        elif status == "done":
            todos.append({"content": content, "status": "done"})
        else:
            raise ToolError(
                f"todo {number} has status {status!r}; use one of {', '.join(TODO_STATUSES)}"
            )
    in_progress = sum(1 for todo in todos if todo["status"] == "in_progress")
    if in_progress > 1:
        raise ToolError(
            f"{in_progress} todos are in_progress; mark only the one you are working on"
        )
    return todos


def format_todos(todos: Sequence[Mapping[str, Any]] | None) -> str:
    """Render a task list for the model.

    Args:
        todos: The tasks (``content`` and ``status`` keys), or None.

    Returns:
        A count summary line and one ``[ ]``/``[~]``/``[x]`` line per task.
    """
    if not todos:
        return "the todo list is empty"
    counts = {status: 0 for status in TODO_STATUSES}
    lines: list[str] = []
    for number, todo in enumerate(todos, start=1):
        status = str(todo.get("status", "pending"))
        counts[status] = counts.get(status, 0) + 1
        lines.append(f"{number}. {_STATUS_MARKS.get(status, '[?]')} {todo.get('content', '')}")
    summary = (
        f"{len(todos)} todos: {counts['done']} done, {counts['in_progress']} in progress, "
        f"{counts['pending']} pending"
    )
    return "\n".join([summary, *lines])


def make_todo_tools() -> list[BaseTool]:
    """Build todo_write and todo_read.

    Returns:
        The two tools.
    """

    @tool("todo_write", parse_docstring=True)
    def todo_write(todos: list[TodoItem], runtime: AgentToolRuntime) -> Command[Any]:
        """Replace the task list (send all of it); one task in_progress at a time.

        Args:
            todos: The whole list, in order.
        """
        validated = validate_todos(todos)
        message = ToolMessage(
            content=format_todos(validated),
            tool_call_id=runtime.tool_call_id,
            name="todo_write",
        )
        return Command(update={"todos": validated, "messages": [message]})

    @tool("todo_read")
    def todo_read(runtime: AgentToolRuntime) -> str:
        """Show the task list."""
        state = runtime.state
        todos = state.get("todos") if isinstance(state, Mapping) else getattr(state, "todos", None)
        return format_todos(todos)

    return [todo_write, todo_read]
