"""A compiled agent bound to settings and a store: what the CLI and tests drive."""

from __future__ import annotations

import contextlib
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import get_checkpoint_id
from langgraph.types import Command, StateSnapshot, StreamMode

from agentgraph.capabilities.hooks import (
    COMPACTING_SESSION,
    SESSION_START,
    STOP,
    USER_PROMPT_SUBMIT,
    Hooks,
    HookVerdict,
    PromptBlocked,
    context_message,
    kill_running_hooks,
    load_hooks,
    run_pre_compact,
)
from agentgraph.capabilities.mcp import McpManager
from agentgraph.capabilities.recall.memory import (
    Memory,
    MemoryRefused,
    delete_memory,
    list_memories,
    resolve_memory_id,
)
from agentgraph.capabilities.recall.memory import namespace as memory_namespace
from agentgraph.capabilities.recall.search import (
    SEARCH_LIMIT_DEFAULT,
    SearchResult,
    index_errors,
    read_message,
    search_transcript,
)
from agentgraph.capabilities.skills import (
    LOAD_SKILL_TOOL,
    SkillCatalog,
    activation_update,
    catalog_for,
    make_load_skill_tool,
    skill_message,
    skills_prompt_section,
)
from agentgraph.capabilities.subagent_tasks import BackgroundTasks, make_subagent_task_tool
from agentgraph.capabilities.subagents import (
    SUBAGENT_PROMPT_SECTION,
    SUBAGENT_TASK_TOOL,
    SUBAGENT_TOOL,
    SubagentRunner,
    make_subagent_tool,
    sigint_cancels,
)
from agentgraph.capabilities.tools import build_tools
from agentgraph.capabilities.tools.bash import (
    kill_running_commands,
    sandbox_plan_for,
    tool_environment,
)
from agentgraph.capabilities.tools.history_tools import make_history_tools
from agentgraph.capabilities.tools.memory_tools import make_memory_tools
from agentgraph.capabilities.tools.plan import make_plan_tool
from agentgraph.capabilities.tools.search import cancel_running_searches
from agentgraph.capabilities.tools.tool_set import choose_tool_set, core_tool_set_notice, core_tools
from agentgraph.config import Settings
from agentgraph.context.compaction import Compactor
from agentgraph.context.tokens import TokenCounter, get_counter
from agentgraph.context.windows import Budget, budget_for
from agentgraph.middleware import context_pipeline
from agentgraph.middleware.events import EVENT_SINK_KEY, emit
from agentgraph.persistence.delta import messages_delta_reducer
from agentgraph.persistence.index import SessionInfo, shorten_title
from agentgraph.persistence.saver import AgentSqliteSaver
from agentgraph.persistence.store import Store
from agentgraph.persistence.thread_ids import session_path
from agentgraph.providers.learned_windows import apply_learned_window, remember_learned_window
from agentgraph.providers.model import build_chat_model, text_tool_calls_on
from agentgraph.providers.pricing import UsageTotals, add_cost
from agentgraph.providers.retry import RetryPolicy
from agentgraph.providers.served_windows import AskOnce, apply_loaded_window, apply_served_window
from agentgraph.runtime.cancel import CancelGuard, RunningTurn, TurnCancelled, interrupted_message
from agentgraph.runtime.deps import AgentDeps, CompactionOutcome
from agentgraph.runtime.graph import build_graph
from agentgraph.runtime.history import agentgraph_kind
from agentgraph.runtime.history.kinds import stamped
from agentgraph.runtime.instructions import InstructionsCache
from agentgraph.runtime.nodes.tools import tool_output_cap_tokens
from agentgraph.runtime.runctx import RunContext, run_config
from agentgraph.runtime.state import MAIN_CONTEXT_ID
from agentgraph.runtime.token_stream import TokenStreamer
from agentgraph.runtime.user_offload import offload_user_messages
from agentgraph.security.approvals import APPROVAL_TYPE
from agentgraph.security.permissions import PRESENT_PLAN_TOOL
from agentgraph.security.redaction import build_redactor, redact_value
from agentgraph.session.images import model_accepts_images
from agentgraph.session.lifecycle import SessionHooks
from agentgraph.session.mentions import resolve_mentions, user_content
from agentgraph.session.turn_start import memory_inputs, turn_inputs
from agentgraph.session.undo import UndoResult, undo_note

Event = dict[str, Any]
OnEvent = Callable[[Event], None]

# "values": the turn's final state comes with the stream, so ending a turn does not
# rebuild the whole history from the store (get_state replays it). Not "custom": UI
# events reach the turn through its event sink (agentgraph/middleware/events.py), so
# LangGraph runs each task inline instead of in a pool thread (and the run's one-thread
# pool, runctx.RUN_POOL_THREADS, serves only these modes).
STREAM_MODES: list[StreamMode] = ["updates", "values"]
# The worker thread a turn runs in (Agent.drive_turn; see agentgraph.frontends.cli.turns).
TURN_THREAD_NAME = "agentgraph-turn"
# After Ctrl-C, how long the turn may take to stop by itself before it is recorded as
# interrupted anyway (the prompt must come back within a second).
CANCEL_GRACE_S = 0.5
# How often the calling thread wakes while it waits for the turn's next event (Ctrl-C
# lands between two waits).
EVENT_POLL_S = 0.1


def new_thread_id() -> str:
    """A fresh session id (uuid4, hex form; prefixes of it select the session)."""
    return uuid.uuid4().hex


def git_branch(workspace: Path) -> str | None:
    """The checked-out branch of ``workspace`` read from ``.git/HEAD`` (no subprocess)."""
    head = workspace / ".git" / "HEAD"
    try:
        text = head.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    prefix = "ref: refs/heads/"
    return text[len(prefix) :] if text.startswith(prefix) else text[:12] or None


def new_messages(update: Any) -> list[Any]:
    """The messages a node update adds, without what a compaction re-added.

    A compaction in the planner re-adds the kept messages after its boundary (moved
    copies) with the summary and files; they are not new tool calls, results or
    answers. The planner's own reply always comes last.
    """
    messages = list((update or {}).get("messages") or []) if isinstance(update, dict) else []
    for i, msg in enumerate(messages):
        if isinstance(msg, BaseMessage) and agentgraph_kind(msg) == "compact_boundary":
            return [*messages[:i], *messages[i + 1 :][-1:]]
    return messages


def _approvals(snapshot: StateSnapshot) -> list[dict[str, Any]]:
    """The approval questions ``snapshot`` is stopped at (``id`` + the interrupt payload)."""
    return [
        {**intr.value, "id": intr.id}
        for intr in snapshot.interrupts
        if isinstance(intr.value, dict) and intr.value.get("type") == APPROVAL_TYPE
    ]


@dataclass
class TurnResult:
    """What one user turn produced."""

    thread_id: str
    answer: str
    input_tokens: int
    output_tokens: int
    tool_calls: int
    prompt_tokens: int | None
    # Approval questions the turn stopped at (answer them with Agent.stream_resume).
    pending_approvals: list[dict[str, Any]] = field(default_factory=list)
    # Why the turn ended early ("max_loops": the loop cap), None when it just finished.
    stop_reason: str | None = None
    # Prompt tokens the provider served from its cache; estimated cost (None: unknown
    # price, see context/pricing.py).
    cached_input_tokens: int = 0
    cost_usd: float | None = None


@dataclass
class _Tally:
    """What a turn's stored replies add up to (its result's usage, calls and answer)."""

    usage: UsageTotals = field(default_factory=UsageTotals)
    tool_calls: int = 0
    answer: str = ""


class _StepEvents:
    """The event sink of one turn's graph run (see :mod:`agentgraph.middleware.events`).

    Keeps what the turn needs from the events (the streamed answer so far, the prompt's
    size, why the model stopped, compactions) and passes each on: to ``live`` at once,
    else held until the step that sent it is over. Called from the turn's thread and
    from the tools node's worker threads (parallel tool calls).
    """

    def __init__(self, turn: RunningTurn, info: SessionInfo, live: OnEvent | None) -> None:
        self.turn = turn
        self.info = info
        self.live = live
        self.prompt_tokens: int | None = None
        self.stop_reason: str | None = None
        self._held: list[Event] = []
        self._lock = threading.Lock()

    def __call__(self, event: Any) -> None:
        if not isinstance(event, dict):
            return
        kind = event.get("type")
        if kind == "token":
            self.turn.partial.append(str(event["text"]))
        elif kind == "prompt_tokens":
            self.prompt_tokens = int(event["tokens"])
        elif kind == "stopped":
            self.stop_reason = str(event.get("reason"))
        elif kind == "compaction":
            self.info.compactions += 1
        if self.live is not None:
            self.live(event)
        else:
            with self._lock:
                self._held.append(event)

    def held(self) -> list[Event]:
        """The events held since the last call, in the order they were sent."""
        with self._lock:
            events, self._held = self._held, []
        return events


def new_session_row(thread_id: str, workspace: Path, title: str = "") -> SessionInfo:
    """The index row of a session not indexed yet: its workspace and git branch now."""
    return SessionInfo(
        thread_id=thread_id,
        title=title,
        workspace=str(workspace),
        git_branch=git_branch(workspace),
        context_id=MAIN_CONTEXT_ID,
    )


class Agent:
    """The agent graph over a store, with session bookkeeping.

    Args:
        settings: Configuration.
        store: Opened store (checkpointer + session index).
        model: Chat model to use instead of building one from settings (tests).
        base_env: The agent's environment: tools pass on only its allowlisted part.
        sleep: Backoff sleep (tests pass a fake).
        summarizer: Model for compaction summaries (default: AGENTGRAPH_SUMMARY_MODEL or
            the main model).
        titler: Model that writes 5-10 word session titles in the background after the
            first exchange (None: the first user message stays the title).
        mcp: The MCP servers, connecting in the background; their tools join the tool
            list between turns (see :meth:`sync_mcp_tools`).
    """

    def __init__(
        self,
        settings: Settings,
        store: Store,
        *,
        model: BaseChatModel | None = None,
        base_env: Mapping[str, str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        summarizer: BaseChatModel | None = None,
        titler: BaseChatModel | None = None,
        mcp: McpManager | None = None,
    ) -> None:
        self.settings = settings
        self.mcp = mcp
        # Kept to build the same agent around another model (/model).
        self._rebuild = {"base_env": base_env, "sleep": sleep, "titler": titler, "mcp": mcp}
        # AGENTS.md files, read once per workspace and process: a stable system prompt.
        self.instructions = InstructionsCache(settings.home)
        self.store = store
        chat_model = model if model is not None else build_chat_model(settings)
        if summarizer is None:
            summarizer = (
                build_chat_model(settings, settings.summary_model)
                if settings.summary_model and model is None
                else chat_model
            )
        counter = get_counter(settings.model)
        # The model's LangChain profile knows its window (unless AGENTGRAPH_CONTEXT_WINDOW).
        budget = budget_for(settings, profile=chat_model.profile)
        # A window an earlier process learned from this endpoint's error (not when
        # AGENTGRAPH_CONTEXT_WINDOW is set): no oversized first request again.
        apply_learned_window(budget, settings, settings.model)
        # A local server states the window it serves (llama.cpp, vLLM, a model LM Studio
        # has loaded); one that states none may load it at the first request (Ollama,
        # LM Studio): asked after the first reply.
        ask_loaded_window = (
            AskOnce(partial(apply_loaded_window, budget, settings, chat_model))
            if apply_served_window(budget, settings, chat_model)
            else None
        )
        # Decided (and bwrap probed) once: the notice is shown once, at start.
        self.sandbox = sandbox_plan_for(settings, base_env) if settings.bash != "off" else None
        tools = build_tools(settings, base_env=base_env, sandbox=self.sandbox)
        tools.extend(make_history_tools(lambda: self.store.history))
        redactor = self._redactor = build_redactor(settings.secret_values(), base_env)
        if settings.memory != "off":
            tools.extend(make_memory_tools(settings, redactor))
        tools.append(make_plan_tool(settings))
        self._builtin_tools = list(tools)
        # The user's hooks (and the project's, once allowed), with the commands'
        # secret-free environment; read once, at start, like the rest of the settings.
        self.hooks = Hooks(
            load_hooks(settings.home),
            tool_environment(base_env or {}, settings.bash_env_allow_names),
            redactor.redact,
        )
        # Sessions whose SessionStart hooks ran in this process.
        self._hooked_sessions: set[str] = set()
        # What SessionStart / UserPromptSubmit hooks printed for the model, per session,
        # until the session's next turn stores it (appended before the prompt).
        self._hook_context: dict[str, list[HumanMessage]] = {}
        # MCP tools come after the built-ins, in config order: a stable tool list. Servers
        # still connecting join later, between turns (sync_mcp_tools).
        self._mcp_tools = mcp.tools if mcp is not None else []
        tools.extend(self._mcp_tools)
        delegate = settings.subagent_max_depth > 0
        # Held (and updated in place when MCP tools join) by load_skill.
        background = delegate and settings.subagent_max_background > 0
        names = [t.name for t in tools] + ["load_skill"] + ([SUBAGENT_TOOL] if delegate else [])
        names += [SUBAGENT_TASK_TOOL] if background else []
        self._tool_names = names
        tools.append(make_load_skill_tool(self.skills, names))
        # The runner gets the graph once it is compiled (the tool is part of the graph).
        self.subagents = SubagentRunner(
            settings,
            store.index,
            counter,
            lambda tid: session_path(settings.home, "artifacts", tid),
            names,
            redact=partial(redact_value, redactor),
        )
        self.background = BackgroundTasks(self.subagents)
        if background:
            self.subagents.tasks = self.background
        if delegate:
            tools.append(make_subagent_tool(self.subagents, self.subagents.tasks))
        if background:
            tools.append(make_subagent_task_tool(self.background))
        self._tail_tools = tools[len(self._builtin_tools) + len(self._mcp_tools) :]
        self._tool_set_notice = self._choose_tool_set(tools, names, counter, budget)
        # Set once a turn has run: MCP tools joining after that are announced.
        self._turn_ran = False
        self.deps = AgentDeps(
            settings=settings,
            model=chat_model,
            tools=tools,
            counter=counter,
            budget=budget,
            sleep=sleep,
            compactor=HookedCompactor(
                self.hooks,
                summarizer,
                counter,
                budget,
                # A summary model of its own has its own window: its requests are sized
                # for it (the main model's budget follows a learned window in place).
                summarizer_budget=(
                    budget_for(settings, settings.summary_model, profile=summarizer.profile)
                    if settings.summary_model and summarizer is not chat_model
                    else None
                ),
                sleep=sleep,
                retry=RetryPolicy(max_retries=settings.provider_max_retries),
                keep_recent_messages=settings.compaction_keep_messages,
                redact=redactor.redact,
            ),
            extra_system_sections=self._system_sections,
            subagents=self.subagents,
            redactor=redactor,
            unsandboxed_shell=self.sandbox.approval if self.sandbox else None,
            on_window_learned=partial(remember_learned_window, settings, settings.model),
            ask_loaded_window=ask_loaded_window,
            hooks=self.hooks,
        )
        self.graph = build_graph(self.deps, checkpointer=store.checkpointer, store=store.memory)
        # Set by cancel() (Ctrl-C): the running turn stops at its next event.
        self.cancelled = threading.Event()
        self._turn: RunningTurn | None = None
        self.subagents.bind(self.graph)
        # thread id -> (checkpoint id, state values) at the end of its last turn here: the
        # next turn starts from it while that checkpoint is still the latest one.
        self._final_states: dict[str, tuple[str, dict[str, Any]]] = {}
        # Each workspace's skills, found once per turn (refresh_skills): every model call's
        # system prompt lists them, and walking the skill folders each time cost ~0.1 ms
        # of file-system calls per call; a skill added mid-turn shows from the next turn.
        self._turn_skills: dict[str, SkillCatalog] = {}
        # Session upkeep around turns: undo snapshots, titles, pruning, resume preamble.
        self.sessions = SessionHooks(settings, store, titler)

    def _choose_tool_set(
        self, tools: list[BaseTool], names: list[str], counter: TokenCounter, budget: Budget
    ) -> str | None:
        """Keep only the core tools where :func:`choose_tool_set` says so (a small window).

        ``tools`` and ``names`` shrink in place (load_skill and the subagent runner hold
        them). MCP tools stay: the user configured them one by one.

        Returns:
            The notice that says so when the window decided it; else None.
        """
        if choose_tool_set(self.settings.tool_set, window=budget.window) == "full":
            return None

        def sent_tokens() -> int:
            # What every request carries until the session first enters plan mode.
            sent = [*self._builtin_tools, *self._tail_tools]
            return counter.count_tools([t for t in sent if t.name != PRESENT_PLAN_TOOL])

        full_tokens = sent_tokens()
        self._builtin_tools = core_tools(self._builtin_tools)
        self._tail_tools = core_tools(self._tail_tools)
        tools[:] = [*self._builtin_tools, *self._mcp_tools, *self._tail_tools]
        names[:] = [t.name for t in tools]
        if self.settings.tool_set == "core":
            return None  # asked for: nothing to explain
        core_tokens = sent_tokens()
        return core_tool_set_notice(budget.window, full_tokens=full_tokens, core_tokens=core_tokens)

    def sync_mcp_tools(self) -> list[str]:
        """Add the tools of MCP servers that connected since the last call.

        Called only between turns, so the tool list never changes within a turn (a
        provider's prompt cache keys on it). A server's tools go to its config
        position: after the built-ins and the servers before it in the config, before
        ``load_skill`` and ``call_subagent``; the request after that is a cache miss once.

        Returns:
            Names of the servers whose tools were added.
        """
        if self.mcp is None:
            return []
        current = self.mcp.tools
        if [id(t) for t in current] == [id(t) for t in self._mcp_tools]:
            return []
        known = {id(t) for t in self._mcp_tools}
        added = [
            str(t.metadata.get("mcp_server")) if t.metadata else t.name
            for t in current
            if id(t) not in known
        ]
        self._mcp_tools = current
        tools = [*self._builtin_tools, *current, *self._tail_tools]
        # In place: the graph's nodes, load_skill and the subagent runner hold these lists.
        self.deps.tools[:] = tools
        self._tool_names[:] = [t.name for t in tools]
        self.subagents.tool_names[:] = self._tool_names
        return list(dict.fromkeys(added))

    def _mcp_before_turn(self) -> Iterator[Event]:
        """Before a turn's first request: wait briefly for MCP servers still connecting,
        then add the tools of those that connected; notices say what happened."""
        mcp = self.mcp
        if mcp is None:
            return
        pending = mcp.pending()
        if pending and mcp.turn_wait_s > 0:
            yield {
                "type": "notice",
                "text": f"waiting up to {mcp.turn_wait_s:g}s for {_servers(pending)} to start",
            }
            mcp.wait(mcp.turn_wait_s, cancelled=self.cancelled)
        for problem in mcp.new_problems():
            yield {"type": "notice", "text": problem}
        added = self.sync_mcp_tools()
        if self._turn_ran:
            for server in added:
                count = len(mcp.tools_of(server))
                yield {
                    "type": "notice",
                    "text": f"MCP server {server!r} connected: its {count} tools are "
                    "available from this message on",
                }
        still = mcp.pending()
        if still:
            yield {
                "type": "notice",
                "text": f"{_servers(still)} still starting: going on without "
                "(tools join a later message when ready; /mcp shows the state)",
            }

    def skills(self, workspace: Path | str | None) -> SkillCatalog:
        """The skills visible from ``workspace`` (repo, home, workspace sources), as found
        at the start of the current turn (see :meth:`refresh_skills`)."""
        key = str(workspace)
        catalog = self._turn_skills.get(key)
        if catalog is None:
            catalog = self._turn_skills[key] = catalog_for(self.settings.home, workspace)
        return catalog

    def refresh_skills(self) -> None:
        """Find the skills again at their next use (each turn starts with this)."""
        self._turn_skills = {}

    def _system_sections(self, state: Mapping[str, Any], workspace: str) -> list[str]:
        """Delegation hint, skills listing (names and descriptions) and AGENTS.md files."""
        sections: list[str] = []
        # Nothing here depends on what changes within a session (an activated skill,
        # its allowed_tools): the system prompt stays byte-stable for the prefix cache.
        denied = set(state.get("denied_tools") or [])
        bound = {t.name for t in self.deps.tools}
        # Background runs are explained by call_subagent's and subagent_task's own
        # descriptions: a sentence here would cost every request of every session.
        if SUBAGENT_TOOL in bound and SUBAGENT_TOOL not in denied:
            sections.append(SUBAGENT_PROMPT_SECTION)
        # The core tool set has no load_skill (the user's @name still loads a skill).
        listing = (
            skills_prompt_section(self.skills(workspace)) if LOAD_SKILL_TOOL in bound else None
        )
        if listing:
            sections.append(listing)
        project = self.instructions.section(workspace)
        if project:
            sections.append(project)
        if state.get("memory_prompt"):
            sections.append(str(state["memory_prompt"]))
        return sections

    def with_model(self, name: str) -> Agent:
        """The same agent (store, tools, MCP servers) around the model ``name``.

        Its token counter, window, budget and prices are those of ``name``; the
        summarizer stays ``AGENTGRAPH_SUMMARY_MODEL`` when set, else the new model.

        Raises:
            ConfigError: ``name`` cannot be built (unknown provider, missing package).
        """
        settings = self.settings.model_copy(update={"model": name})
        chat_model = build_chat_model(settings)
        summarizer = (
            build_chat_model(settings, settings.summary_model) if settings.summary_model else None
        )
        agent = Agent(
            settings,
            self.store,
            model=chat_model,
            summarizer=summarizer,
            **self._rebuild,  # type: ignore[arg-type]
        )
        agent._hooked_sessions = self._hooked_sessions  # the same sessions go on
        agent._hook_context = self._hook_context
        return agent

    def model_preference(self, thread_id: str) -> str | None:
        """The model ``/model`` chose for ``thread_id`` (its state's ``model_pref``)."""
        values = self.graph.get_state(self.config(thread_id)).values or {}
        pref = values.get("model_pref")
        return pref if isinstance(pref, str) and pref else None

    def set_model_preference(self, thread_id: str, name: str) -> None:
        """Record ``name`` as ``thread_id``'s model (resuming the session uses it again)."""
        self.graph.update_state(self.config(thread_id), {"model_pref": name}, as_node="finalize")

    def permission_mode(self, thread_id: str) -> str:
        """``thread_id``'s permission mode: its own choice, else the setting's."""
        from agentgraph.security.permissions import MODE_KEY, effective_mode

        # The latest checkpoint's plain channel, not get_state: the prompt's status line
        # asks at every redraw, and get_state rebuilds the whole history.
        latest = self.store.checkpointer.get_tuple(self.config(thread_id))
        values = latest.checkpoint.get("channel_values", {}) if latest is not None else {}
        return effective_mode({MODE_KEY: values.get(MODE_KEY)}, self.settings)

    def set_permission_mode(self, thread_id: str, mode: str) -> None:
        """Switch ``thread_id`` to permission ``mode`` (kept when the session resumes; the
        model is told before its next request).

        Switch between runs, not while an approval question waits: the questions of a
        step are answered by position, and the mode decides which calls ask.

        Raises:
            ValueError: Not a mode.
        """
        from agentgraph.security.permissions import MODE_KEY, check_mode

        update = {MODE_KEY: check_mode(mode)}
        self.graph.update_state(self.config(thread_id), update, as_node="finalize")

    def goal(self, thread_id: str) -> dict[str, Any] | None:
        """The goal ``/goal`` set for ``thread_id`` (its state's ``goal``), whatever its
        status; None when none is set."""
        config = self.config(thread_id)
        # After a turn its final state is at hand: asked after every turn, the goal must
        # not cost a rebuild of the whole history.
        known = self._final_states.get(thread_id)
        latest = self.store.checkpointer.get_tuple(config) if known is not None else None
        if (
            known is not None
            and latest is not None
            and get_checkpoint_id(latest.config) == known[0]
        ):
            values = known[1]
        else:
            values = self.graph.get_state(config).values or {}
        goal = values.get("goal")
        return dict(goal) if isinstance(goal, Mapping) else None

    def set_goal(self, thread_id: str, goal: Mapping[str, Any] | None) -> None:
        """Store ``goal`` (see :mod:`agentgraph.runtime.goal`) as ``thread_id``'s, or clear it."""
        value = dict(goal) if goal is not None else None
        self.graph.update_state(self.config(thread_id), {"goal": value}, as_node="finalize")

    def accepts_images(self) -> bool:
        """Whether the model in use takes image input (``AGENTGRAPH_VISION``, profile, name)."""
        profile = getattr(self.deps.model, "profile", None)
        return model_accepts_images(
            self.settings.model,
            profile if isinstance(profile, dict) else None,
            self.settings.vision,
        )

    def notices(self, *, sandbox_notice: bool = True) -> list[str]:
        """One-line notices about the set-up (unknown window, estimated counts, no sandbox).

        Args:
            sandbox_notice: Include why commands ask or are refused (no sandbox). A run
                that cannot ask leaves it out: a refused command's result says it, so a
                task that runs no command is not told about commands.
        """
        sandbox = (self.sandbox.notice or self.sandbox.refusal) if self.sandbox else None
        sandbox = sandbox if sandbox_notice else None
        found = (
            self.deps.budget.source_notice,
            self.deps.counter.notice,
            self._tool_set_notice,
            sandbox,
        )
        return [n for n in found if n] + list(self.hooks.config.problems)

    def config(self, thread_id: str) -> RunnableConfig:
        """Run config for ``thread_id`` (see :func:`agentgraph.runtime.runctx.run_config`)."""
        return run_config(thread_id, self.settings.loop_cap)

    def run_context(self, thread_id: str, workspace: Path) -> RunContext:
        """The runtime context of a turn of ``thread_id`` in ``workspace`` (not checkpointed)."""
        return RunContext(
            workspace_path=str(workspace),
            thread_id=thread_id,
            artifacts_dir=str(self.deps.artifacts_dir(thread_id)),
            max_loops=self.settings.loop_cap,
            user_id=self.settings.user_id,
        )

    def _workspace_of(self, thread_id: str) -> str:
        """The workspace recorded for a stored session (for prompts built outside a run)."""
        info = self.store.index.get(thread_id)
        return info.workspace if info is not None and info.workspace else str(Path.cwd())

    def messages(self, thread_id: str) -> list[BaseMessage]:
        """The stored history of ``thread_id`` (empty when unknown)."""
        snapshot = self.graph.get_state(self.config(thread_id))
        return list((snapshot.values or {}).get("messages") or [])

    def touch_index(
        self, thread_id: str, workspace: Path, text: str, *, message_count: int | None = None
    ) -> SessionInfo:
        """Mark the session's index row updated now (a new row: titled by ``text``).

        Args:
            thread_id: The session.
            workspace: Its workspace (recorded in a new row, with its git branch).
            text: The user's message (a new row's title).
            message_count: The stored history's length, when known.

        Returns:
            The row as written.
        """
        info = self.store.index.get(thread_id) or new_session_row(
            thread_id, workspace, shorten_title(text)
        )
        info.updated_at = time.time()
        if message_count is not None:
            info.message_count = message_count
        self.store.index.upsert(info)
        return info

    def mention_inputs(
        self,
        thread_id: str,
        text: str,
        workspace: Path,
        attach_root: Path | None,
        *,
        state: Mapping[str, Any] | None = None,
    ) -> tuple[dict[str, Any], list[str]]:
        """Turn input for ``text`` with its @mentions applied, and notices to show.

        ``@file`` contents are appended to the user message, ``@skill`` bodies are added
        as a message before it (and the skill is activated), ``@subagent`` is recorded.
        ``state`` is the session's stored state when the caller has it (a server's
        node); else it is read from this agent's checkpointer when a skill needs it.
        """
        catalog = self.skills(workspace)
        copy_to = workspace if attach_root is not None and attach_root != workspace else None
        found = resolve_mentions(
            text,
            root=attach_root or workspace,
            skill_ids=catalog.skills,
            count=self.deps.counter.count_text,
            images_allowed=self.accepts_images(),
            copy_to=copy_to,
        )
        inputs: dict[str, Any] = {}
        messages: list[BaseMessage] = []
        if found.skills:
            if state is None:
                state = self.graph.get_state(self.config(thread_id)).values or {}
            state = dict(state)
            for skill_id in found.skills:
                skill = catalog.skills[skill_id]
                update = activation_update(skill, state, [t.name for t in self.deps.tools])
                state.update(update)
                inputs.update(update)
                inputs["skill_dirs"] = [*inputs.get("skill_dirs", []), *update["skill_dirs"]]
                messages.append(skill_message(skill))
        content = user_content(text, found.attachments, found.images)
        meta = {"agentgraph": {"images": [i.path for i in found.images]}} if found.images else {}
        messages.append(
            HumanMessage(content=content, id=f"user-{uuid.uuid4().hex}", additional_kwargs=meta)
        )
        now = time.time()
        messages = [stamped(m, now) for m in messages]
        # A pasted megabyte-sized message is kept whole in an artifact, cut in the history.
        inputs["messages"] = offload_user_messages(
            messages,
            folder=self.deps.artifacts_dir(thread_id),
            max_tokens=tool_output_cap_tokens(self.deps),
            counter=self.deps.counter,
        )
        if found.images:
            inputs["images"] = [i.path for i in found.images]
        if found.attachments:
            inputs["uploaded_files"] = [a.path for a in found.attachments]
        if found.mentioned:
            inputs["mentioned_agents"] = found.mentioned
        notices = list(found.problems)
        notices += [
            f"attached {a.path}" + (" (truncated)" if a.truncated else "")
            for a in found.attachments
        ]
        notices += [
            f"attached image {i.path} ({i.info.width}x{i.info.height})" for i in found.images
        ]
        notices += [f"loaded skill {s}" for s in found.skills]
        return inputs, notices

    def _cancelling_subagents(self, stream: Iterator[Any]) -> Iterator[Any]:
        """``stream``, but an interrupted turn (or any failure) also stops its subagents."""
        try:
            # Not `yield from`: close() must reach the except before the stream closes.
            for item in stream:  # noqa: UP028
                yield item
        except BaseException:
            # Cancel before the graph stream is closed: closing waits for running tasks.
            self.subagents.cancel_all()
            cancel_running_searches()
            raise

    def cancel(self) -> None:
        """Stop the running turn: kill running shell commands, end the stream.

        Safe to call from another thread (the REPL's Ctrl-C handler) and from a
        signal handler: it only sets events and kills processes. The turn's next
        model token, tool or node end raises inside the graph (see cancel.py), so
        nothing of it is written after this; :meth:`record_interrupted` records it.
        """
        self.cancelled.set()
        if self._turn is not None:
            self._turn.cancelled.set()
        self.subagents.cancel_all()
        kill_running_commands()
        kill_running_hooks()
        cancel_running_searches()

    def record_undo(self, thread_id: str, result: UndoResult) -> None:
        """Tell the model, at its next call, which files an undo put back.

        The note is stored now (a kill before the next turn keeps it) after the last
        turn, as the end of that turn.

        Args:
            thread_id: The session the undo was for.
            result: What the undo did.
        """
        note = undo_note(result)
        if note is None:
            return
        self.graph.update_state(self.config(thread_id), {"messages": [note]}, as_node="finalize")
        info = self.store.index.get(thread_id)
        if info is not None:
            self._recount(info)

    def record_interrupted(self, turn: RunningTurn | None = None) -> None:
        """Record a cancelled turn now: its partial answer, the index, undo changes.

        The partial answer is stored as an assistant message marked ``interrupted``
        (nothing when the model had not said anything yet) and the graph is left at
        its end, so the next turn starts cleanly. Does nothing for a settled turn.

        Args:
            turn: The turn (default: the current one).
        """
        turn = turn if turn is not None else self._turn
        if turn is None or not turn.settle():
            return
        message = interrupted_message("".join(turn.partial))
        update = {"messages": [message] if message is not None else []}
        self.graph.update_state(self.config(turn.thread_id), update, as_node="finalize")
        history = self.messages(turn.thread_id)
        info = self.store.index.get(turn.thread_id) or turn.info
        info.message_count = len(history)
        info.updated_at = time.time()
        self.store.index.upsert(info)
        self.sessions.after_turn(turn.thread_id, turn.workspace, history)

    def stream_turn(
        self,
        thread_id: str,
        text: str,
        workspace: Path,
        *,
        attach_root: Path | None = None,
        can_ask: bool = True,
        live: OnEvent | None = None,
    ) -> Iterator[Event]:
        """Run one user turn, yielding UI events; the last event is ``turn_end``.

        When a tool call needs the user's approval the run stops at a LangGraph
        interrupt: ``approval`` events carry the questions, ``turn_end``'s result lists
        them in ``pending_approvals``, and :meth:`stream_resume` continues the turn.

        Args:
            thread_id: The session.
            text: The user's message (``@mentions`` are applied, see mentions.py).
            workspace: The session workspace.
            attach_root: Folder ``@path`` mentions resolve in when it is not the
                workspace (an isolated session: files are copied to ``uploads/``).
            can_ask: Whether approval questions can be put to the user; False
                (``agentgraph run``) declines the calls that need one.
            live: Receives the events sent while a step runs (model tokens, notices,
                diffs, subagent progress) at once, in the thread that sends them (the
                turn's, or a subagent's); without it they are yielded after their step.
        """
        workspace = workspace.resolve()
        self.cancelled.clear()
        self.refresh_skills()
        # One run per thread: refused (SessionInUse) before anything is written when
        # another live process holds it; kept until the store closes.
        self.store.leases.acquire(thread_id, "continue")
        yield from self.start_session(thread_id, workspace)
        yield from self._check_prompt(thread_id, workspace, text)
        mention_inputs, notices = self.mention_inputs(thread_id, text, workspace, attach_root)
        # One read of the stored state serves everything below (each read rebuilds it).
        stored = self._stored_values(thread_id)
        history = list(stored.get("messages") or [])
        known = self.store.index.get(thread_id)
        prompt = mention_inputs.pop("messages")
        inputs: dict[str, Any] = {
            **mention_inputs,
            **turn_inputs(
                self,
                thread_id,
                stored,
                prompt,
                artifacts_dir=self.deps.artifacts_dir(thread_id),
                user_id=self.settings.user_id,
                context_id=known.context_id if known is not None else MAIN_CONTEXT_ID,
            ),
        }
        # The session's first turn (no memory prompt stored yet) loads the memories, and
        # the user is told which of them are new since their last session here.
        inputs.update(
            memory_inputs(
                self.store.memory if self.settings.memory != "off" else None,
                stored,
                user_id=self.settings.user_id,
                workspace=workspace,
                notices=notices,
            )
        )
        # The prompt is durable before anything slow or fallible (undo snapshot, model
        # call): its own checkpoint, written synchronously, as if the tools node had
        # just run, so the graph continues at the planner. A kill from here on loses
        # nothing; LangGraph's input checkpoint is written in the background instead.
        self.graph.update_state(self.config(thread_id), inputs, as_node="tools")
        # The stored prompt counts even if the model never answers; one write of the
        # row, so nothing else of the run's start waits on the store's write lock. The
        # count is the channel's reducer applied to what was just read, not a second
        # read (which would rebuild the whole history from the store).
        count = len(messages_delta_reducer(history, [inputs["messages"]]))
        info = self.touch_index(thread_id, workspace, text, message_count=count)
        self.sessions.snapshot(thread_id, workspace)
        for notice in notices:
            yield {"type": "notice", "text": notice}
        yield from self._mcp_before_turn()
        self._turn_ran = True
        try:
            yield from self._stream(thread_id, workspace, None, info, can_ask=can_ask, live=live)
        except Exception:
            self._recount(info)  # what the failed turn stored before failing counts
            raise

    def _stored_values(self, thread_id: str) -> dict[str, Any]:
        """The stored state of ``thread_id``: the last turn's final state while nothing
        has written a checkpoint since (one row read instead of rebuilding the history)."""
        config = self.config(thread_id)
        known = self._final_states.pop(thread_id, None)
        if known is not None:
            latest = self.store.checkpointer.get_tuple(config)
            if latest is not None and get_checkpoint_id(latest.config) == known[0]:
                return known[1]
        # Written elsewhere since (another process, a client of the server): what it
        # left unpruned is pruned after this turn.
        self.store.prune_after_turn(thread_id)
        return self.graph.get_state(config).values or {}

    def _remember_final(self, thread_id: str, values: dict[str, Any]) -> None:
        """Keep ``values`` (the state the stream ended with) for the next turn's start,
        and give its history to the saver, whose next load then replays nothing."""
        saver = self.store.checkpointer
        latest = saver.get_tuple(self.config(thread_id))
        checkpoint_id = get_checkpoint_id(latest.config) if latest is not None else None
        if latest is None or not checkpoint_id:
            return
        self._final_states[thread_id] = (checkpoint_id, values)
        if isinstance(saver, AgentSqliteSaver):
            saver.remember(latest.config, list(values.get("messages") or []))

    def _recount(self, info: SessionInfo) -> None:
        """Set the index row's message count to the stored history's length."""
        info.message_count = len(self.messages(info.thread_id))
        latest = self.store.index.get(info.thread_id) or info  # keeps a title set meanwhile
        latest.message_count = info.message_count
        self.store.index.upsert(latest)

    def pending_approvals(self, thread_id: str) -> list[dict[str, Any]]:
        """Approval questions the session is stopped at (``id`` + the interrupt payload).

        A session killed while a question was on screen still has it: the REPL asks
        it again on resume, before anything else.
        """
        return _approvals(self.graph.get_state(self.config(thread_id)))

    def stream_resume(
        self,
        thread_id: str,
        workspace: Path,
        answers: Mapping[str, Any],
        *,
        live: OnEvent | None = None,
    ) -> Iterator[Event]:
        """Continue a turn stopped at approval questions; events as :meth:`stream_turn`.

        Args:
            thread_id: The session.
            workspace: The session workspace.
            answers: Interrupt id -> answer (True/False, ``"y"``/``"n"``…; see
                ``approvals.is_approved``), as LangGraph's ``Command(resume=...)`` takes.
            live: As for :meth:`stream_turn`.
        """
        workspace = workspace.resolve()
        self.cancelled.clear()
        self.refresh_skills()
        self.store.leases.acquire(thread_id, "continue")  # one run per thread
        info = self.touch_index(thread_id, workspace, "")
        yield from self._stream(
            thread_id, workspace, Command(resume=dict(answers)), info, live=live
        )

    def _stream(
        self,
        thread_id: str,
        workspace: Path,
        graph_input: Any,
        info: SessionInfo,
        *,
        can_ask: bool = True,
        live: OnEvent | None = None,
    ) -> Iterator[Event]:
        """Stream the graph on ``graph_input`` and turn its output into UI events."""
        tally = _Tally()
        context = replace(self.run_context(thread_id, workspace), can_ask=can_ask)
        final_values: dict[str, Any] | None = None
        interrupted = False
        turn = self._turn = RunningTurn(thread_id, workspace, info)
        if self.cancelled.is_set():  # Ctrl-C before the turn was registered
            turn.cancelled.set()
        sent = _StepEvents(turn, info, live)
        config = self.config(thread_id)
        config["configurable"][EVENT_SINK_KEY] = sent
        # Tokens come from TokenStreamer through the event sink: LangGraph's "messages"
        # mode would walk the whole transcript at every node start.
        config["callbacks"] = [
            CancelGuard(turn.cancelled),
            TokenStreamer(hold_text_calls=text_tool_calls_on(self.settings)),
        ]
        stream: Iterator[Any] = self.graph.stream(
            graph_input,
            config,
            context=context,
            stream_mode=STREAM_MODES,
        )
        stream = self._cancelling_subagents(stream)
        # Background subagents of this session report to this turn while it runs.
        detach = self.background.attach(thread_id, sent)
        stored_count = info.message_count
        try:
            for mode, payload in turn.guard(stream, self.record_interrupted):
                yield from sent.held()  # sent while the step ran: before what it stored
                if mode == "values":
                    final_values = payload if isinstance(payload, dict) else None
                    # What each step stored counts at once: a run killed mid-turn is
                    # listed with it, not with the count of its last finished turn.
                    count = len((final_values or {}).get("messages") or [])
                    if final_values is not None and count != stored_count:
                        self.store.index.set_message_count(thread_id, count)
                        stored_count = count
                elif mode == "updates":
                    interrupted = interrupted or "__interrupt__" in (payload or {})
                    for update in (payload or {}).values():
                        yield from self._update_events(update, turn, tally)
        except BaseException:
            yield from sent.held()  # sent by the step that failed: before its error
            raise
        finally:
            detach()
        yield from sent.held()
        if not turn.settle():  # cancelled: recorded as interrupted by the canceller
            raise TurnCancelled()
        # The final state came with the stream; a turn stopped at questions reads the
        # stored state once for them.
        final = None
        if interrupted or final_values is None:
            final = self.graph.get_state(self.config(thread_id))
            final_values = dict(final.values or {})
        else:
            self._remember_final(thread_id, final_values)
        history = list(final_values.get("messages") or [])
        self._index_history(thread_id, history)
        info.message_count = len(history)
        usage = tally.usage
        info.input_tokens += usage.input_tokens
        info.output_tokens += usage.output_tokens
        info.cached_input_tokens += usage.cached_input_tokens
        info.cost_usd = add_cost(info.cost_usd, usage.cost_usd)
        info.context_tokens = sent.prompt_tokens or info.context_tokens
        info.model = self.settings.model
        info.updated_at = time.time()
        # A title written meanwhile (background model title, /title) must survive.
        latest = self.store.index.get(thread_id)
        if latest is not None:
            info.title, info.title_source = latest.title, latest.title_source
        self.store.index.upsert(info)
        pending = [] if self.cancelled.is_set() or final is None else _approvals(final)
        yield from pending  # {"type": "approval", "id", "tool", "command" | "path", …}
        if not pending:  # a turn waiting for an answer is not over yet
            self.sessions.after_turn(thread_id, workspace, history)
            yield from self._hook_events(
                STOP,
                thread_id,
                workspace,
                {"stop_hook_active": False, "last_assistant_message": tally.answer},
            )
        # Background subagents whose outcome the model does not have yet: the next model
        # call of the session gets each (a notice), or got it already if collected.
        waiting = self.background.pending(history)
        if waiting:
            yield {"type": "subagent_tasks", "tasks": waiting}
        yield {
            "type": "turn_end",
            "result": TurnResult(
                thread_id=thread_id,
                answer=tally.answer,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                tool_calls=tally.tool_calls,
                prompt_tokens=sent.prompt_tokens,
                pending_approvals=pending,
                stop_reason=sent.stop_reason,
                cached_input_tokens=usage.cached_input_tokens,
                cost_usd=usage.cost_usd,
            ),
        }

    def start_session(
        self, thread_id: str, workspace: Path, *, resumed: bool | None = None
    ) -> list[Event]:
        """Run the ``SessionStart`` hooks once per session and process: when the REPL
        opens it, else at its first turn here.

        Args:
            thread_id: The session.
            workspace: Its workspace (the hooks' working directory).
            resumed: Whether it has a history already (``source`` ``resume``, else
                ``startup``); None: whether the session index knows it.

        Returns:
            The hooks' events (nothing when they ran already).
        """
        if thread_id in self._hooked_sessions:
            return []
        self._hooked_sessions.add(thread_id)
        if not self.hooks.active(SESSION_START):
            return []
        if resumed is None:
            resumed = self.store.index.get(thread_id) is not None
        source = "resume" if resumed else "startup"
        verdict = self.hooks.run(
            SESSION_START, session_id=thread_id, cwd=str(workspace), fields={"source": source}
        )
        self._keep_hook_context(thread_id, SESSION_START, verdict)
        return list(verdict.events)

    def take_hook_context(self, thread_id: str) -> list[HumanMessage]:
        """What hooks printed for the model since the session's last turn (then forgotten)."""
        return self._hook_context.pop(thread_id, [])

    def _keep_hook_context(self, thread_id: str, event: str, verdict: HookVerdict) -> None:
        """Keep what the hooks printed for the model for the session's next turn."""
        message = context_message(event, verdict)
        if message is not None:
            self._hook_context.setdefault(thread_id, []).append(message)

    def _check_prompt(self, thread_id: str, workspace: Path, text: str) -> Iterator[Event]:
        """Run the ``UserPromptSubmit`` hooks on the prompt, before anything is stored.

        Raises:
            PromptBlocked: A hook blocked it (its reason in the message).
        """
        if not self.hooks.active(USER_PROMPT_SUBMIT):
            return
        verdict = self.hooks.run(
            USER_PROMPT_SUBMIT, session_id=thread_id, cwd=str(workspace), fields={"prompt": text}
        )
        yield from verdict.events
        if verdict.blocked:
            raise PromptBlocked(f"a {USER_PROMPT_SUBMIT} hook blocked the prompt: {verdict.reason}")
        self._keep_hook_context(thread_id, USER_PROMPT_SUBMIT, verdict)

    def _hook_events(
        self, event: str, thread_id: str, workspace: Path, fields: dict[str, Any]
    ) -> list[Event]:
        """Run the hooks of a session event (``SessionStart``, ``Stop``); what they say
        is shown, and they cannot stop the session."""
        if not self.hooks.active(event):
            return []
        verdict = self.hooks.run(event, session_id=thread_id, cwd=str(workspace), fields=fields)
        return list(verdict.events)

    def _update_events(self, update: Any, turn: RunningTurn, tally: _Tally) -> Iterator[Event]:
        """UI events of one node's state update: todos, the replies' calls, the answer,
        tool results; counts the replies' usage and calls into ``tally``."""
        # The REPL shows the todo list whenever todo_write changes it.
        for part in update if isinstance(update, list) else [update]:
            if isinstance(part, dict) and part.get("todos") is not None:
                yield {"type": "todos", "todos": list(part["todos"])}
        for msg in new_messages(update):
            if isinstance(msg, AIMessage):
                turn.partial.clear()  # this reply is complete and stored
                tally.usage.add_message(msg, self.settings.model)
                tally.tool_calls += len(msg.tool_calls)
                for call in msg.tool_calls:
                    yield {
                        "type": "tool_call",
                        "name": call["name"],
                        # Shown outside the session: redacted like outputs.
                        "args": redact_value(self._redactor, call["args"]),
                        "id": call["id"],
                    }
                if not msg.tool_calls:
                    tally.answer = msg.text
                    yield {"type": "answer", "text": tally.answer}
            elif isinstance(msg, ToolMessage):
                yield {
                    "type": "tool_result",
                    "name": msg.name,
                    "id": msg.tool_call_id,
                    "content": msg.text,
                    "status": msg.status,
                }

    def _index_history(self, thread_id: str, history: list[BaseMessage]) -> None:
        """Add the turn's messages to the transcript index (search_history, /search).

        Best effort: a busy or damaged index never fails the turn; the next search
        syncs (or rebuilds) it from the transcript.
        """
        if self.store.history is None:
            return
        with contextlib.suppress(*index_errors()):
            self.store.history.sync(thread_id, history, self._artifacts(thread_id))

    def search_history(
        self, thread_id: str, query: str, limit: int = SEARCH_LIMIT_DEFAULT
    ) -> SearchResult:
        """Full-text search over the session's whole stored transcript (``/search``).

        Raises:
            SearchError: empty or over-long query, bad limit.
        """
        return search_transcript(
            self.store.history,
            thread_id,
            self.messages(thread_id),
            query,
            limit,
            self._artifacts(thread_id),
        )

    def read_history(self, thread_id: str, ref: str) -> str:
        """One stored message in full by its ``msg:N`` reference.

        Raises:
            SearchError: not a reference, or no such message.
        """
        return read_message(self.messages(thread_id), ref, self._artifacts(thread_id))

    def _artifacts(self, thread_id: str) -> str:
        """The session's artifacts folder, where the tools node saved the whole copies of
        outputs it cut (searched and read by reference in place of the cut)."""
        return str(self.deps.artifacts_dir(thread_id))

    def memories(self, workspace: Path) -> list[Memory]:
        """This user's long-term memories for ``workspace``, oldest first (``/memory``)."""
        if self.store.memory is None:
            return []
        ns = memory_namespace(self.settings.user_id, str(workspace.resolve()))
        return list_memories(self.store.memory, ns)

    def forget_memory(self, workspace: Path, memory_id: str) -> Memory:
        """Delete one memory (``/memory forget ID``): its id or a unique prefix of it.

        Raises:
            MemoryRefused: no such memory, a prefix of several, or no memory store.
        """
        if self.store.memory is None:
            raise MemoryRefused("long-term memory is not available with this store")
        ns = memory_namespace(self.settings.user_id, str(workspace.resolve()))
        memory_store = self.store.memory
        return delete_memory(memory_store, ns, resolve_memory_id(memory_store, ns, memory_id))

    def context_report(self, thread_id: str) -> dict[str, Any]:
        """Size and breakdown of the prompt the next model call would send.

        Also lists the session's compactions (``compactions``: their records).
        """
        from agentgraph.context.compaction import since_last_boundary
        from agentgraph.context.report import context_report
        from agentgraph.runtime.history import agentgraph_kind
        from agentgraph.runtime.nodes.common import allowed_tools, system_messages

        snapshot = self.graph.get_state(self.config(thread_id))
        state: Any = dict(snapshot.values or {})
        messages = list(state.get("messages") or [])
        report = context_report(
            since_last_boundary(messages),
            system=system_messages(state, self.deps, workspace=self._workspace_of(thread_id)),
            tools=allowed_tools(state, self.deps),
            counter=self.deps.counter,
            budget=self.deps.budget,
            instructions=self.instructions.section(self._workspace_of(thread_id)),
        )
        info = self.store.index.get(thread_id)
        if info is not None:
            report["usage"] = info.to_json()["usage"]
        report["compactions"] = [
            {k: v for k, v in (m.additional_kwargs.get("agentgraph") or {}).items() if k != "kind"}
            for m in messages
            if agentgraph_kind(m) == "compact_boundary"
        ]
        return report

    def compact(self, thread_id: str, focus: str | None = None) -> dict[str, Any] | None:
        """Compact a stored session now (``/compact``, ``sessions compact``).

        All or nothing: when the summary fails, the session is left unchanged (nothing
        forces a cut here, unlike a full context) and the record says
        ``"applied": False`` with the ``reason``.

        Returns:
            The compaction record, or None when there was nothing to compact.
        """
        snapshot = self.graph.get_state(self.config(thread_id))
        state = dict(snapshot.values or {})
        messages = list(state.get("messages") or [])
        compaction = context_pipeline(self.deps).compaction
        if not messages or compaction is None:
            return None
        from agentgraph.runtime.nodes.common import allowed_tools, system_messages

        workspace = self._workspace_of(thread_id)
        token = COMPACTING_SESSION.set(thread_id)  # the PreCompact hooks' session
        try:
            outcome = compaction.compact(
                messages,
                trigger="manual",
                system=system_messages(state, self.deps, workspace=workspace),  # type: ignore[arg-type]
                tools=allowed_tools(state, self.deps),  # type: ignore[arg-type]
                focus=focus,
                workspace=workspace,
                artifacts=str(self.deps.artifacts_dir(thread_id)),
            )
        finally:
            COMPACTING_SESSION.reset(token)
        if outcome is None:
            return None
        if outcome.record.get("fallback"):
            return {**outcome.record, "applied": False}
        self.graph.update_state(
            self.config(thread_id), {"messages": outcome.updates}, as_node="finalize"
        )
        info = self.store.index.get(thread_id)
        if info is not None:
            info.compactions += 1
            info.message_count = len(self.messages(thread_id))
            info.context_tokens = outcome.tokens_after
            self.store.index.upsert(info)
        return outcome.record

    def run_turn(
        self,
        thread_id: str,
        text: str,
        workspace: Path,
        on_event: OnEvent | None = None,
        *,
        attach_root: Path | None = None,
        approve: Callable[[dict[str, Any]], Any] | None = None,
    ) -> TurnResult:
        """Run one user turn to completion and return its result.

        Ctrl-C during the turn cancels it: subagents and running commands stop
        (see ``sigint_cancels`` and :meth:`cancel`).
        ``attach_root`` is passed to :meth:`stream_turn`.

        Args:
            approve: Answers an approval question (the ``approval`` event) between
                graph runs; None means nobody can be asked, so calls that need approval
                are declined (``agentgraph run``).
        """
        with sigint_cancels(self.cancel):
            result = self.drive_turn(
                partial(
                    self.stream_turn,
                    thread_id,
                    text,
                    workspace,
                    attach_root=attach_root,
                    can_ask=approve is not None,
                ),
                on_event,
            )
            while result is not None and result.pending_approvals and approve is not None:
                answers = {q["id"]: approve(q) for q in result.pending_approvals}
                result = self.drive_turn(
                    partial(self.stream_resume, thread_id, workspace, answers), on_event
                )
        if result is None:
            raise RuntimeError("the turn ended without a turn_end event")
        return result

    def drive_turn(
        self,
        start: Callable[..., Iterator[Event]],
        on_event: OnEvent | None = None,
    ) -> TurnResult | None:
        """Run a turn's events in a worker thread; ``on_event`` gets each event in this
        thread, in order, as it happens.

        ``start(live=...)`` starts the events: a ``functools.partial`` of
        :meth:`stream_turn` or :meth:`stream_resume`.

        The turn runs its graph's steps inline in the worker; this thread only waits, so
        Ctrl-C (a KeyboardInterrupt here) never lands inside a step: the turn is
        cancelled (running commands are killed; the graph raises at its next model token
        or step), recorded as interrupted, and the KeyboardInterrupt re-raised without
        waiting for a model slow to notice. A failing ``on_event`` stops the turn the
        same way.

        Returns:
            The result of the ``turn_end`` event (None if the stream had none).
        """
        events: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        result: TurnResult | None = None

        def live(event: Event) -> None:
            events.put(("event", event))

        def work() -> None:
            try:
                for event in start(live=live):
                    live(event)
            except BaseException as exc:  # handed to the calling thread, which re-raises
                events.put(("error", exc))
            finally:
                events.put(("done", None))

        worker = threading.Thread(target=work, name=TURN_THREAD_NAME, daemon=True)
        worker.start()
        try:
            while True:
                try:
                    kind, payload = events.get(timeout=EVENT_POLL_S)
                except queue.Empty:
                    continue
                if kind == "event":
                    if on_event is not None:
                        on_event(payload)
                    if payload.get("type") == "turn_end":
                        result = payload["result"]
                elif kind == "error":
                    raise payload
                else:
                    return result
        except BaseException:
            if worker.is_alive():
                self.cancel()
                worker.join(timeout=CANCEL_GRACE_S)
            if self.cancelled.is_set():
                self.record_interrupted()
            raise


class HookedCompactor(Compactor):
    """The compaction strategy, run after the ``PreCompact`` hooks (capabilities/hooks.py).

    Args:
        hooks: The hooks.
        *args: The strategy's arguments.
        **kwargs: The strategy's keyword arguments.
    """

    def __init__(self, hooks: Hooks, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.hooks = hooks

    def __call__(
        self,
        messages: Sequence[BaseMessage],
        *,
        trigger: str,
        system: Sequence[BaseMessage],
        tools: Sequence[BaseTool],
        focus: str | None = None,
        workspace: str | None = None,
        measured: tuple[int, int] | None = None,
        course_change: str | None = None,
        artifacts: str | None = None,
    ) -> CompactionOutcome | None:
        """Run the ``PreCompact`` hooks (what they say is shown), then compact."""
        run_pre_compact(self.hooks, emit, trigger=trigger, focus=focus, workspace=workspace)
        return super().__call__(
            messages,
            trigger=trigger,
            system=system,
            tools=tools,
            focus=focus,
            workspace=workspace,
            measured=measured,
            artifacts=artifacts,
            course_change=course_change,
        )


def _servers(names: list[str]) -> str:
    """``MCP server 'a'`` or ``MCP servers 'a', 'b'``."""
    quoted = ", ".join(repr(n) for n in names)
    return f"MCP server {quoted}" if len(names) == 1 else f"MCP servers {quoted}"
