"""agentgraph's tools, confined to the session workspace.

:func:`build_tools` is the single entry point used by the graph.
"""

from collections.abc import Mapping

from langchain_core.tools import BaseTool

from agentgraph.capabilities.tools.base import HANDLED_TOOL_ERRORS, ToolError, format_tool_error
from agentgraph.capabilities.tools.bash import make_bash_tool, tool_environment
from agentgraph.capabilities.tools.clock import make_clock_tool
from agentgraph.capabilities.tools.files import make_file_tools
from agentgraph.capabilities.tools.sandbox import SandboxPlan
from agentgraph.capabilities.tools.spec import BUILTIN_TOOLS, tools_where
from agentgraph.capabilities.tools.todos import make_todo_tools
from agentgraph.capabilities.tools.workspace import display_path, resolve_in_workspace
from agentgraph.config import Settings
from agentgraph.security.redaction import build_redactor

# The public lists of which built-in tools may change files and which argument names
# a tool's file, derived from their specs (agentgraph/capabilities/tools/spec.py).
TOOLS_THAT_MODIFY_FILES = tools_where(lambda spec: spec.modifies_files)
FILE_PATH_ARGS: dict[str, str] = {
    name: spec.path_arg for name, spec in BUILTIN_TOOLS.items() if spec.path_arg is not None
}

__all__ = [
    "FILE_PATH_ARGS",
    "HANDLED_TOOL_ERRORS",
    "TOOLS_THAT_MODIFY_FILES",
    "ToolError",
    "build_tools",
    "display_path",
    "format_tool_error",
    "resolve_in_workspace",
    "tool_environment",
]


def build_tools(
    settings: Settings,
    base_env: Mapping[str, str] | None = None,
    sandbox: SandboxPlan | None = None,
) -> list[BaseTool]:
    """The tools the agent may call.

    Args:
        settings: Configuration (bash mode and timeout, secret values).
        base_env: The agent's environment, usually ``dict(os.environ)`` from
            the CLI; run_bash passes on only its allowlisted variables. None runs
            commands with a minimal PATH/HOME/LANG environment.
        sandbox: How run_bash runs commands (``capabilities.tools.bash.sandbox_plan_for``);
            None: decided from the settings.

    Returns:
        read_file, write_file, edit_file, list_dir, glob, grep, run_bash
        (absent when ``settings.bash == "off"``), todo_write, todo_read, now.
    """
    tools = make_file_tools(build_redactor(settings.secret_values(), base_env))
    if settings.bash != "off":
        tools.append(make_bash_tool(settings, base_env, sandbox=sandbox))
    tools.extend(make_todo_tools())
    tools.append(make_clock_tool())
    return tools
