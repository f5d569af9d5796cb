"""Everything the nodes need that is not state: built once per process, never stored."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool

from agentgraph.capabilities.hooks import Hooks
from agentgraph.config import Settings
from agentgraph.context.tokens import TokenCounter
from agentgraph.context.windows import Budget
from agentgraph.providers.served_windows import AskOnce
from agentgraph.runtime.runctx import RunContext, artifacts_dir_for, complete_context
from agentgraph.security.redaction import Redactor

Emit = Callable[[dict[str, Any]], None]


@dataclass
class CompactionOutcome:
    """What a compaction produced: the state update and the new history."""

    updates: list[BaseMessage]
    messages: list[BaseMessage]
    tokens_before: int
    tokens_after: int
    record: dict[str, Any] = field(default_factory=dict)


class Compactor(Protocol):
    """Replaces old history with a handoff summary (implemented in context/compaction.py)."""

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
    ) -> CompactionOutcome | None: ...

    def part_outgrows_one_call(
        self,
        messages: Sequence[BaseMessage],
        *,
        system: Sequence[BaseMessage],
        tools: Sequence[BaseTool],
        measured: tuple[int, int],
        growth: int,
    ) -> bool:
        """Whether the part an automatic compaction would summarize now fits one
        summarizer call and would not, ``growth`` tokens longer, a model call later."""
        ...


@dataclass
class AgentDeps:
    """Process-wide collaborators of the graph's nodes.

    Attributes:
        settings: The typed configuration.
        model: The main chat model.
        tools: All tools the agent may use (``allowed_tools`` narrows them per state).
        counter: Token counter for the main model.
        budget: Context budget for the main model.
        compactor: Compaction strategy, or None to disable compaction.
        sleep: Injected for retry backoff (tests pass a fake).
    """

    settings: Settings
    model: BaseChatModel
    tools: list[BaseTool]
    counter: TokenCounter
    budget: Budget
    compactor: Compactor | None = None
    sleep: Callable[[float], None] = time.sleep
    # Prompt sections for (state, workspace): the skills listing, the delegation hint.
    extra_system_sections: Callable[[Any, str], Sequence[str]] | None = None
    # The subagent runner (agentgraph.capabilities.subagents.SubagentRunner) holding the compiled
    # graph, so call_subagent can run child threads on it; None when not wired.
    subagents: Any = None
    # The LangGraph server's workspace: it overrides whatever a client's run context says.
    pinned_workspace: Path | None = None
    # Why run_bash has no sandbox where it should (AGENTGRAPH_SANDBOX=auto and bwrap cannot
    # start): each command then needs the user's approval. None: sandboxed, or off by choice.
    unsandboxed_shell: str | None = None
    # Redacts credentials from tool results; None: built from the settings' secrets alone.
    redactor: Redactor | None = None
    # Told the window an overflow error named once the budget adopted it (the agent
    # keeps it for its next processes); None: nothing outlives the process.
    on_window_learned: Callable[[int], None] | None = None
    # Asks a local server that stated no window what it loaded the model with, after the
    # first reply (Ollama, LM Studio); None: nothing to ask.
    ask_loaded_window: AskOnce | None = None
    # The user's hooks (agentgraph/capabilities/hooks.py), run around each tool call; None: none.
    hooks: Hooks | None = None

    def artifacts_dir(self, thread_id: str) -> Path:
        """Folder holding full tool outputs for ``thread_id``."""
        return artifacts_dir_for(self.settings, thread_id)

    def run_context(self, raw: Any, config: RunnableConfig | None = None) -> RunContext:
        """This run's completed ``RunContext`` (see ``runctx.complete_context``)."""
        return complete_context(raw, self.settings, config, pinned_workspace=self.pinned_workspace)
