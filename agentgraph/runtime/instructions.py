"""Project instructions: ``AGENTS.md`` files that go into the system prompt.

Read, in this order (later files are more specific and win where they disagree):

1. ``$AGENTGRAPH_HOME/AGENTS.md`` — the user's own instructions for every project;
2. from the repository root (the nearest folder above the workspace holding ``.git``; the
   workspace itself when there is none) down to the workspace, in each folder
   ``AGENTS.md``, or ``CLAUDE.md`` when that folder has no ``AGENTS.md``.

This is the convention of Codex CLI (``AGENTS.md`` root → cwd) with Claude Code's file
name accepted, so a repository set up for either works unchanged. The text is read once
per session and kept (see :class:`InstructionsCache`): the system prompt must not change
within a session, or the provider's prefix cache would miss on every request.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

INSTRUCTION_FILE_NAMES = ("AGENTS.md", "CLAUDE.md")
# Codex caps project docs at 32 KiB: past that an instructions file is documentation,
# and it would cost that many tokens on every request.
INSTRUCTIONS_MAX_BYTES = 32 * 1024
# Folders walked up from the workspace looking for the repository root.
MAX_PARENT_LEVELS = 64

INSTRUCTIONS_HEADER = (
    "Project instructions (from AGENTS.md files; follow them unless the user says otherwise):"
)


@dataclass(frozen=True)
class InstructionFile:
    """One instructions file and the text taken from it."""

    path: Path
    text: str
    truncated: bool


def repository_root(workspace: Path) -> Path:
    """The nearest folder at or above ``workspace`` with a ``.git`` entry, else ``workspace``."""
    current = workspace
    for _ in range(MAX_PARENT_LEVELS):
        if (current / ".git").exists():
            return current
        if current.parent == current:
            break
        current = current.parent
    return workspace


def _folder_file(folder: Path) -> Path | None:
    for name in INSTRUCTION_FILE_NAMES:
        candidate = folder / name
        if candidate.is_file():
            return candidate
    return None


def instruction_paths(workspace: Path, home: Path) -> list[Path]:
    """The instructions files that apply to ``workspace``, general first."""
    workspace = workspace.resolve()
    paths: list[Path] = []
    user_file = home / "AGENTS.md"
    if user_file.is_file():
        paths.append(user_file)
    root = repository_root(workspace)
    chain = [workspace, *workspace.parents]
    folders = chain[: chain.index(root) + 1] if root in chain else [workspace]
    for folder in reversed(folders):
        found = _folder_file(folder)
        if found is not None and found.resolve() not in {p.resolve() for p in paths}:
            paths.append(found)
    return paths


def load_instructions(workspace: Path, home: Path) -> list[InstructionFile]:
    """Read the instructions files for ``workspace``, within ``INSTRUCTIONS_MAX_BYTES`` total.

    Unreadable files and undecodable bytes never fail a session: the file is skipped or
    its bad bytes replaced.
    """
    files: list[InstructionFile] = []
    left = INSTRUCTIONS_MAX_BYTES
    for path in instruction_paths(workspace, home):
        if left <= 0:
            break
        try:
            with path.open("rb") as fh:
                data = fh.read(left + 1)
        except OSError:
            continue
        truncated = len(data) > left
        text = data[:left].decode("utf-8", errors="replace").strip()
        left -= min(len(data), left)
        if text:
            files.append(InstructionFile(path=path, text=text, truncated=truncated))
    return files


def instructions_section(files: list[InstructionFile], workspace: Path) -> str:
    """The system-prompt section for ``files`` ("" when there are none)."""
    if not files:
        return ""
    parts = [INSTRUCTIONS_HEADER]
    for item in files:
        try:
            shown = str(item.path.relative_to(workspace.resolve()))
        except ValueError:
            shown = str(item.path)
        note = " (truncated)" if item.truncated else ""
        parts.append(f'<instructions file="{shown}"{note}>\n{item.text}\n</instructions>')
    return "\n".join(parts)


class InstructionsCache:
    """The instructions section of each workspace, read once and then kept.

    A session (and its subagents, in the same workspace) sees the files as they were
    when first needed, so its system prompt stays byte-stable; ``/init`` and the next
    start of agentgraph read them again.
    """

    def __init__(self, home: Path) -> None:
        self._home = home
        self._sections: dict[str, str] = {}
        self._lock = threading.Lock()

    def section(self, workspace: Path | str) -> str:
        """The instructions section for ``workspace`` (read on first use)."""
        key = str(workspace)
        with self._lock:
            if key not in self._sections:
                files = load_instructions(Path(workspace), self._home)
                self._sections[key] = instructions_section(files, Path(workspace))
            return self._sections[key]

    def forget(self, workspace: Path | str) -> None:
        """Read the files again on the next use (after ``/init`` wrote one)."""
        with self._lock:
            self._sections.pop(str(workspace), None)
