"""Prompt texts: the system prompt and the fixed instructions the graph sends."""

from __future__ import annotations

import platform
from collections.abc import Sequence
from datetime import datetime

SYSTEM_PROMPT_TEMPLATE = """\
You are agentgraph, a careful software engineering agent working in a workspace on the \
user's machine. Use the tools to inspect and change files and to run commands; do not guess \
file contents. Work step by step, keep going until the task is done, then answer concisely \
with what you did and what remains.

Environment:
- Workspace (all file paths are relative to it): {workspace}
- Date: {date}
- OS: {os}

Rules:
- File tools are confined to the workspace. Read before you edit.
- A truncated tool output names a file holding all of it: page through it with \
read_file(path, offset, limit) instead of re-running the command.
{todo_rule}- Nothing of this session is lost when older messages leave your view: \
search_history(query) searches the whole transcript and read_history(ref) shows a message in full.
{extra}"""

LOOP_CAP_INSTRUCTION = (
    "You have reached the maximum of {max_loops} steps for this request, so no more tools "
    "can run. Answer now, without tools: summarize what you did, the current state, and "
    "what remains to be done."
)

# Stored as the answer when the model, asked to answer without tools at the loop
# cap, still returns only tool calls (it ignores tool_choice=none): the run must
# never end with an empty answer.
LOOP_CAP_NO_ANSWER = (
    "Stopped: the step limit ({max_loops} model calls) was reached before a final answer. "
    "Ask me to continue to pick up where I left off."
)

LOOP_CAP_TOOL_RESULT = "not executed: the step limit ({max_loops}) for this request was reached"

BUDGET_TOOL_RESULT = "not executed: the budget for this work is spent"

# The answer of a request stopped at a budget (``spent``: what of which budget was
# used, see agentgraph.runtime.nodes.limits.budget_spent): no model call writes one, since
# it would spend more.
BUDGET_ANSWER = (
    "Stopped: {spent}, the budget. The session is saved: ask me to continue to pick up "
    "where I left off."
)

RUNAWAY_INSTRUCTION = (
    "You made the same tool calls {repeats} times in a row and got the same output each "
    "time, so they will not run again. Answer now, without tools: summarize what you did, "
    "what you found, and what remains to be done."
)

# Stored as the answer when the model, stopped for repeating itself, still returns only
# tool calls: the run must never end with an empty answer.
RUNAWAY_NO_ANSWER = (
    "Stopped: the same tool calls returned the same output {repeats} times in a row. "
    "Ask me to continue, with a different approach, to pick up where I left off."
)

RUNAWAY_TOOL_RESULT = (
    "not executed: the same call returned the same output {repeats} times in a row already"
)


# The rule that names the todo tool: only where the session has it (the core tool set a
# small window gets does not).
TODO_RULE = "- Keep a todo list with todo_write for multi-step tasks.\n"


def build_system_prompt(
    workspace: str,
    *,
    extra_sections: Sequence[str] = (),
    now: datetime | None = None,
    todos: bool = True,
) -> str:
    """The system prompt of a run in ``workspace``: workspace, date, OS and extra sections.

    Args:
        workspace: The workspace's path.
        extra_sections: Sections after the rules (delegation, skills, AGENTS.md, memories).
        now: The moment whose date the prompt states (default: now).
        todos: Whether the session has the todo tool the rules name.
    """
    moment = now or datetime.now().astimezone()
    extra = "\n".join(s for s in extra_sections if s)
    return SYSTEM_PROMPT_TEMPLATE.format(
        workspace=workspace,
        todo_rule=TODO_RULE if todos else "",
        date=moment.strftime("%Y-%m-%d (%A)"),
        os=f"{platform.system()} {platform.release()}",
        extra=("\n" + extra) if extra else "",
    )
