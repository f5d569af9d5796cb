"""Tab completion in the REPL (prompt_toolkit): slash commands, their arguments, @mentions.

* ``/sw<Tab>`` → ``/switch``; ``/switch <Tab>``, ``/load``, ``/resume`` → session id
  prefixes (with their titles); ``/diff <Tab>`` → ``last``; ``/mode <Tab>`` → the
  permission modes.
* ``@<Tab>`` → skill ids and workspace paths (directories end with ``/``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Protocol

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document

from agentgraph.config import PERMISSION_MODES

# Characters of a session id offered as its completion (a unique prefix in practice).
SESSION_ID_PREFIX_CHARS = 12
COMPLETION_MAX_SESSIONS = 50
COMPLETION_MAX_PATHS = 200
SESSION_ARG_COMMANDS = frozenset({"switch", "load", "resume"})
FIXED_ARGS: dict[str, tuple[str, ...]] = {
    "diff": ("last",),
    "mode": PERMISSION_MODES,
    "permissions": ("revoke",),
}
SKIPPED_NAMES = frozenset({".git", "node_modules", "__pycache__", ".venv"})


class SessionChoice(Protocol):
    """What a completion shows of a session: its id, and its title beside it."""

    @property
    def thread_id(self) -> str: ...

    @property
    def title(self) -> str: ...


class ReplCompleter(Completer):
    """Completions for the REPL line.

    Args:
        commands: Slash command name → one-line help (read at each completion).
        sessions: Lists the sessions to offer (most recent first).
        skills: Skill ids visible now.
        workspace: The current workspace folder.
    """

    def __init__(
        self,
        commands: Callable[[], dict[str, str]],
        sessions: Callable[[], Sequence[SessionChoice]],
        skills: Callable[[], Iterable[str]],
        workspace: Callable[[], Path],
    ) -> None:
        self.commands = commands
        self.sessions = sessions
        self.skills = skills
        self.workspace = workspace

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterator[Completion]:
        """Completions for the text before the cursor."""
        text = document.text_before_cursor
        if text.startswith("/"):
            name, sep, rest = text.partition(" ")
            if not sep:
                for cmd, help_text in self.commands().items():
                    if f"/{cmd}".startswith(name):
                        yield Completion(f"/{cmd}", -len(name), display_meta=help_text)
                return
            yield from self._arguments(name[1:], rest)
            return
        word = text.split()[-1] if text.strip() and not text[-1].isspace() else ""
        if word.startswith("@"):
            yield from self._mentions(word[1:])

    def _arguments(self, command: str, rest: str) -> Iterator[Completion]:
        if " " in rest:
            return
        if command in SESSION_ARG_COMMANDS:
            for info in self.sessions()[:COMPLETION_MAX_SESSIONS]:
                if info.thread_id.startswith(rest):
                    yield Completion(
                        info.thread_id[:SESSION_ID_PREFIX_CHARS],
                        -len(rest),
                        display_meta=info.title,
                    )
        for value in FIXED_ARGS.get(command, ()):
            if value.startswith(rest):
                yield Completion(value, -len(rest))

    def _mentions(self, prefix: str) -> Iterator[Completion]:
        for skill in sorted(self.skills()):
            if skill.startswith(prefix.lower()):
                yield Completion(f"@{skill}", -len(prefix) - 1, display_meta="skill")
        yield from self._paths(prefix)

    def _paths(self, prefix: str) -> Iterator[Completion]:
        root = self.workspace().resolve()
        folder_part, _, name_part = prefix.rpartition("/")
        folder = (root / folder_part).resolve() if folder_part else root
        if folder != root and root not in folder.parents:
            return  # only the workspace is offered
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            return
        shown = 0
        for entry in entries:
            if not entry.name.startswith(name_part) or entry.name in SKIPPED_NAMES:
                continue
            if entry.name.startswith(".") and not name_part.startswith("."):
                continue
            is_dir = entry.is_dir(follow_symlinks=False)
            value = f"{folder_part}/{entry.name}" if folder_part else entry.name
            yield Completion(
                f"@{value}{'/' if is_dir else ''}",
                -len(prefix) - 1,
                display_meta="folder" if is_dir else "file",
            )
            shown += 1
            if shown >= COMPLETION_MAX_PATHS:
                return
