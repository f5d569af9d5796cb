"""Custom slash commands: prompts kept as Markdown files, run as ``/name args``.

``.agentgraph/commands/NAME.md`` in the workspace (the project's, shared in its
repository) and ``$AGENTGRAPH_HOME/commands/NAME.md`` (the user's, for every project)
each define ``/NAME``. The file's text, with ``$ARGUMENTS`` replaced by everything
typed after the name (and ``$1`` … ``$9`` by its words), is sent as the user's next
message. An optional front matter gives the line ``/help`` shows::

    ---
    description: Review the staged changes
    ---
    Review the staged diff. Focus on $ARGUMENTS.

A command is only text for the model (nothing runs), so a project's commands need no
trust; still, a file is read only when it is a regular file (no symlink out of the
project) of at most :data:`COMMAND_MAX_BYTES`, and its name must be a plain command
name. A built-in command's name cannot be taken, and on a clash the user's file wins
over the project's, as Claude Code's personal skills win over a project's: a
repository cannot change what the user's own command does.
"""

from __future__ import annotations

import re
import stat
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from agentgraph.errors import ConfigError

PROJECT_COMMANDS_DIR = Path(".agentgraph") / "commands"
USER_COMMANDS_DIR = "commands"  # under AGENTGRAPH_HOME
COMMAND_SUFFIX = ".md"
# Largest command file read, in bytes: a prompt, not a document.
COMMAND_MAX_BYTES = 32 * 1024
# Command files looked at per folder (a folder with more is cut at this many names).
COMMANDS_MAX_PER_DIR = 200
# Characters of a description shown by /help and Tab.
DESCRIPTION_MAX_CHARS = 120
# A command name: what can follow "/" on the REPL line and be completed.
COMMAND_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
# ``$ARGUMENTS`` or ``$1`` … ``$9``, replaced in one pass (what the user typed is not
# read again for placeholders).
PLACEHOLDER = re.compile(r"\$ARGUMENTS|\$([1-9])")
FRONT_MATTER_FENCE = "---"
SCOPE_USER = "user"
SCOPE_PROJECT = "project"


@dataclass(frozen=True)
class CustomCommand:
    """One command file.

    Attributes:
        name: The command's name (``/name``).
        description: Its front matter's ``description`` ("" when none).
        body: The prompt text (front matter removed).
        path: The file.
        scope: ``user`` or ``project``.
    """

    name: str
    description: str
    body: str
    path: Path
    scope: str

    @property
    def help(self) -> str:
        """The line /help and Tab show for it."""
        return f"{self.description or '(custom command)'} [{self.scope}]"


def parse_command_text(text: str) -> tuple[str, str]:
    """A command file's description and body (the front matter is optional)."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != FRONT_MATTER_FENCE:
        return "", text
    for end in range(1, len(lines)):
        if lines[end].strip() == FRONT_MATTER_FENCE:
            description = ""
            for line in lines[1:end]:
                key, sep, value = line.partition(":")
                if sep and key.strip() == "description":
                    description = " ".join(value.split()).strip("\"'")[:DESCRIPTION_MAX_CHARS]
            return description, "".join(lines[end + 1 :]).lstrip("\n")
    return "", text  # no closing fence: all of it is the prompt


def read_command_file(path: Path) -> str:
    """A command file's text, refused unless it is a small regular UTF-8 file.

    Raises:
        ConfigError: A symlink or special file, too large, unreadable or not UTF-8.
    """
    try:
        info = path.lstat()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"{path} is not a regular file (symlinks are not followed)")
    if info.st_size > COMMAND_MAX_BYTES:
        raise ConfigError(f"{path} is larger than {COMMAND_MAX_BYTES} bytes")
    try:
        with path.open("rb") as handle:
            raw = handle.read(COMMAND_MAX_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    if len(raw) > COMMAND_MAX_BYTES:
        raise ConfigError(f"{path} is larger than {COMMAND_MAX_BYTES} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path} is not UTF-8 text") from None


def _folder_commands(folder: Path, scope: str) -> dict[str, CustomCommand]:
    """The valid command files of one folder, by name (the others are left out)."""
    try:
        names = sorted(p.name for p in folder.iterdir())[:COMMANDS_MAX_PER_DIR]
    except OSError:
        return {}
    found: dict[str, CustomCommand] = {}
    for file_name in names:
        name = file_name[: -len(COMMAND_SUFFIX)]
        if not file_name.endswith(COMMAND_SUFFIX) or not COMMAND_NAME.fullmatch(name):
            continue
        try:
            description, body = parse_command_text(read_command_file(folder / file_name))
        except ConfigError:
            continue
        found[name] = CustomCommand(name, description, body, folder / file_name, scope)
    return found


def custom_commands(
    home: Path, workspace: Path, builtin: Collection[str]
) -> dict[str, CustomCommand]:
    """The custom commands visible from ``workspace``, by name, sorted.

    Args:
        home: ``AGENTGRAPH_HOME`` (the user's ``commands/`` folder).
        workspace: The workspace (its ``.agentgraph/commands/`` folder).
        builtin: The built-in command names, which custom files cannot take.

    Returns:
        The user's commands over the project's; built-in names left out.
    """
    merged = _folder_commands(workspace / PROJECT_COMMANDS_DIR, SCOPE_PROJECT)
    merged.update(_folder_commands(home / USER_COMMANDS_DIR, SCOPE_USER))
    return {name: merged[name] for name in sorted(merged) if name not in builtin}


def expand(body: str, arguments: str) -> str:
    """The prompt a command sends: ``$ARGUMENTS`` and ``$1`` … ``$9`` replaced.

    A body that uses no placeholder gets the arguments appended on their own line,
    so that what the user typed is never dropped.
    """
    words = arguments.split()

    def value(match: re.Match[str]) -> str:
        if match.group(1) is None:
            return arguments
        index = int(match.group(1)) - 1
        return words[index] if index < len(words) else ""

    text = PLACEHOLDER.sub(value, body)
    if arguments and PLACEHOLDER.search(body) is None:
        text = f"{text.rstrip()}\n\nARGUMENTS: {arguments}"
    return text.strip()
