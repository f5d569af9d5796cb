"""REPL commands for what agentgraph connects to: /mcp, /init, /model."""

from __future__ import annotations

from agentgraph.errors import AgentGraphError
from agentgraph.frontends.cli.slash import SUBMIT_KEY, ReplContext, command
from agentgraph.session.commands import (
    ModelInfo,
    compact_for_window,
    mcp_lines,
    model_info,
)
from agentgraph.session.commands import switch_model as switch_session_model


@command("mcp", "/mcp", "MCP servers: status and tools")
def _mcp(ctx: ReplContext, _rest: str) -> None:
    for style, text in mcp_lines(ctx.agent.mcp):
        ctx.console.print(text, style=style or None, markup=False, highlight=False)
    for problem in ctx.agent.mcp.problems if ctx.agent.mcp is not None else []:
        ctx.console.print(problem, style="yellow", markup=False)


INIT_REQUEST = """\
Write an AGENTS.md file at the root of this workspace: instructions for coding agents \
working in this repository. Explore first (list_dir, glob, read the README, the build and \
test configuration, a few central modules). Then write AGENTS.md, at most about 60 lines, \
with: what the project is (two sentences); how to set up, build, run and test it (exact \
commands that you found, not guesses); the layout (where things live); the conventions a \
contributor must follow (style, tests, commits) as they appear in the code. \
{existing}Do not invent anything you did not see in the files."""
INIT_EXISTING = "An AGENTS.md exists already: read it, keep what is still true and improve it. "


@command("init", "/init", "draft an AGENTS.md for this workspace (the agent explores, then writes)")
def _init(ctx: ReplContext, _rest: str) -> None:
    exists = (ctx.workspace / "AGENTS.md").is_file()
    ctx.extras[SUBMIT_KEY] = INIT_REQUEST.format(existing=INIT_EXISTING if exists else "")
    # The next start reads the new file; this session keeps its cache-stable prompt.
    ctx.console.print(
        "drafting AGENTS.md — it is read into the system prompt from the next session on",
        style="dim",
        markup=False,
    )


def switch_model(ctx: ReplContext, name: str, *, record: bool = True) -> None:
    """Make ``name`` the model of this REPL and session, compacting first if it must.

    Raises:
        ConfigError: the model cannot be built (the current one stays).
    """
    switch = switch_session_model(ctx.agent, ctx.thread_id, name, record=record)
    ctx.agent = switch.agent
    model = switch.model
    ctx.console.print(
        f"model: {name}{_served_by(model)} — window {model.window:,} tokens, "
        f"budget {model.usable:,}",
        markup=False,
    )
    if model.source_notice:  # a guessed window, or one learned by an earlier process
        ctx.console.print(model.source_notice, style="dim", markup=False)
    if switch.needs_compaction:
        # The session no longer fits the smaller window: compact before the next call.
        record_ = compact_for_window(switch.agent, ctx.thread_id)
        if record_ is not None:
            ctx.console.print(
                f"compacted for the smaller window: {record_.get('tokens_before', '?')} → "
                f"{record_.get('tokens_after', '?')} tokens",
                markup=False,
            )


def _served_by(model: ModelInfo) -> str:
    """`` at URL`` when the name's prefix picks a local server (``ollama:`` …), which
    then serves it whatever ``OPENAI_BASE_URL`` says; "" otherwise."""
    return f" at {model.served_at}" if model.served_at else ""


def follow_session_model(ctx: ReplContext, default: str) -> None:
    """Use the current session's model: its ``/model`` choice, else ``default``.

    Called when the REPL starts on a session and after every command (``/switch``,
    ``/resume``, ``/new`` change the session). A choice that cannot be built now is
    reported and the current model stays.
    """
    wanted = ctx.agent.model_preference(ctx.thread_id) or default
    if wanted == ctx.agent.settings.model:
        return
    try:
        switch_model(ctx, wanted, record=False)
    except AgentGraphError as exc:
        ctx.console.print(f"kept {ctx.agent.settings.model}: {exc}", style="yellow", markup=False)


@command("model", "/model [NAME]", "show the model, or switch this session to NAME")
def _model(ctx: ReplContext, rest: str) -> None:
    name = rest.strip()
    if not name:
        model = model_info(ctx.agent)
        ctx.console.print(
            f"model: {model.name}{_served_by(model)} — window "
            f"{model.window:,} tokens, "
            f"budget {model.usable:,} (/model NAME switches; e.g. gpt-4o, "
            "ollama:qwen2.5-coder:7b, anthropic:claude-sonnet-4-5)",
            markup=False,
        )
        if model.source_notice:
            ctx.console.print(model.source_notice, style="dim", markup=False)
        return
    switch_model(ctx, name)
