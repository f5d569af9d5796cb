""" "Always allow" rules: approval answers the user made once and for all, per workspace.

Answering an approval question with "always" (the REPL's ``a``, a client's
``{"approved": true, "always": true}``) stores the question's proposed rule; later calls
that match it, in this session and the next ones of the same workspace, run without
asking. Rules live in ``$AGENTGRAPH_HOME/permission-rules.json`` keyed by the
workspace's real path, never in the repository: a cloned repository cannot pre-approve
its own commands.

Kinds of rule:

- ``run_bash`` with a command prefix (one or two words: ``pytest``, ``git status``). It
  matches a command whose first words are the prefix's words, with any arguments after
  them, and only a *plain* command: one without shell control operators, redirections,
  substitutions, escapes or line breaks (any of :data:`SHELL_SPECIAL`). ``pytest; rm -rf
  /``, ``pytest && curl …``, ``pytest $(…)`` and ``pytest > f`` never match; they ask.
- ``edit`` (``write_file`` and ``edit_file``) with a path glob, workspace-relative:
  ``*`` stays inside one folder, ``**`` crosses folders. The proposed glob is the changed
  file's folder (``src/*``; ``*`` for the workspace's top level).
- an MCP tool (``mcp__server__tool``) with ``*``: every call of that tool.

A rule never replaces the question asked because a command would run without the
sandbox it should have had (``AGENTGRAPH_SANDBOX``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shlex
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from agentgraph.capabilities.tools.base import ToolError
from agentgraph.capabilities.tools.spec import tool_spec
from agentgraph.capabilities.tools.workspace import resolve_in_workspace

RULES_FILE_NAME = "permission-rules.json"
RULES_LOCK_NAME = "permission-rules.lock"
# A rules file is a few kilobytes; a larger one is not ours and is not read.
RULES_FILE_MAX_BYTES = 1024 * 1024
RULES_PER_WORKSPACE_MAX = 500
RULES_FILE_MODE = 0o600
# The tool a command rule names: rules files store it, so it stays this name.
SHELL_TOOL = "run_bash"
# One rule covers every file-changing tool (ToolSpec.approval "edit").
EDIT_RULE_TOOL = "edit"
MCP_TOOL_PREFIX = "mcp__"
MCP_ANY_CALL = "*"
# Characters that make a command more than one plain command: control operators,
# redirections, substitutions and expansions, escapes, line breaks.
SHELL_SPECIAL = frozenset(";&|<>$`()\\\n\r")
# Programs whose second word is a subcommand: their prefix rule names both words, so
# allowing `git status` does not allow `git push`.
SUBCOMMAND_PROGRAMS = frozenset(
    {
        "git",
        "npm",
        "pnpm",
        "yarn",
        "uv",
        "cargo",
        "go",
        "pip",
        "docker",
        "kubectl",
        "make",
        "poetry",
        "dotnet",
        "gh",
    }
)


# Subcommands that run whatever program or script their next word names (`uv run X`,
# `npm exec X`, `docker run IMAGE`): their rule names that word too, so allowing
# `uv run pytest` does not allow `uv run rm …`.
RUNNER_SUBCOMMANDS = frozenset(
    {
        ("uv", "run"),
        ("uv", "tool"),
        ("npm", "run"),
        ("npm", "exec"),
        ("npm", "x"),
        ("pnpm", "run"),
        ("pnpm", "exec"),
        ("pnpm", "dlx"),
        ("yarn", "run"),
        ("yarn", "exec"),
        ("yarn", "dlx"),
        ("poetry", "run"),
        ("docker", "run"),
        ("docker", "exec"),
        ("kubectl", "exec"),
        ("kubectl", "run"),
    }
)
# Programs that run whatever command or code follows them: a rule for them would allow
# everything, so none is offered and each such call asks.
ANY_COMMAND_PROGRAMS = frozenset(
    {
        "sh",
        "bash",
        "zsh",
        "dash",
        "fish",
        "env",
        "sudo",
        "doas",
        "su",
        "xargs",
        "nohup",
        "nice",
        "timeout",
        "time",
        "exec",
        "eval",
        "command",
        "builtin",
        "watch",
        "strace",
        "python",
        "python3",
        "node",
        "deno",
        "bun",
        "perl",
        "ruby",
        "php",
        "npx",
        "uvx",
        "pipx",
        "bunx",
        "ssh",
    }
)


@dataclass(frozen=True)
class Rule:
    """One "always allow" rule.

    Attributes:
        tool: ``run_bash``, ``edit`` or an MCP tool's name.
        pattern: The command prefix, the path glob, or ``*``.
    """

    tool: str
    pattern: str

    def describe(self) -> str:
        """``run_bash: pytest`` — how the rule is listed."""
        return f"{self.tool}: {self.pattern}"


def command_words(command: str) -> list[str] | None:
    """The words of a plain command, or None when it is not plain (see module doc)."""
    if any(ch in SHELL_SPECIAL or not (ch.isprintable() or ch == "\t") for ch in command):
        return None
    try:
        words = shlex.split(command, comments=False, posix=True)
    except ValueError:  # an unbalanced quote
        return None
    return words or None


def command_prefix(command: str) -> str | None:
    """The prefix an "always allow" answer to ``command`` stores, or None (not plain)."""
    words = command_words(command)
    if words is None or words[0] in ANY_COMMAND_PROGRAMS or "=" in words[0]:
        return None  # a wrapper, an interpreter or `VAR=value cmd`: each call asks
    if words[0] not in SUBCOMMAND_PROGRAMS:
        return words[0]
    # The subcommand is part of the rule; options before it (`git -c core.pager=… log`)
    # would make the rule the bare program, which allows every subcommand: none offered.
    if len(words) < 2 or words[1].startswith("-"):
        return None
    if (words[0], words[1]) not in RUNNER_SUBCOMMANDS:
        return f"{words[0]} {words[1]}"
    if len(words) < 3 or words[2].startswith("-"):
        return None
    return " ".join(words[:3])


def _glob_regex(glob: str) -> re.Pattern[str]:
    out = []
    i = 0
    while i < len(glob):
        if glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] == "*":
            out.append("[^/]*")
            i += 1
        elif glob[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return re.compile("".join(out))


def workspace_relative(path: str, workspace: str) -> str | None:
    """``path`` as a tool resolves it, relative to the workspace; None when outside it."""
    try:
        real = Path(resolve_in_workspace(workspace, path))
        rel = real.relative_to(Path(workspace).resolve())
    except (ToolError, ValueError, OSError):
        return None
    text = rel.as_posix()
    return None if text in ("", ".") else text


def edit_glob(path: str, workspace: str) -> str | None:
    """The glob an "always allow" answer to an edit of ``path`` stores: its folder's files."""
    rel = workspace_relative(path, workspace)
    if rel is None:
        return None
    parent = PurePosixPath(rel).parent.as_posix()
    return "*" if parent == "." else f"{parent}/*"


def proposed_rule(name: str, args: Mapping[str, Any], workspace: str) -> Rule | None:
    """The rule "always allow" would store for a call, or None when none is offered."""
    kind = tool_spec(name).approval
    if kind == "shell":
        prefix = command_prefix(str(args.get("command", "")))
        return Rule(SHELL_TOOL, prefix) if prefix else None
    if kind == "edit":
        glob = edit_glob(str(args.get("path", "")), workspace)
        return Rule(EDIT_RULE_TOOL, glob) if glob else None
    if name.startswith(MCP_TOOL_PREFIX):
        return Rule(name, MCP_ANY_CALL)
    return None


def rule_matches(rule: Rule, name: str, args: Mapping[str, Any], workspace: str) -> bool:
    """Whether ``rule`` allows this call."""
    kind = tool_spec(name).approval
    if kind == "shell":
        if rule.tool != SHELL_TOOL:
            return False
        words = command_words(str(args.get("command", "")))
        wanted = rule.pattern.split()
        return words is not None and bool(wanted) and words[: len(wanted)] == wanted
    if kind == "edit":
        if rule.tool != EDIT_RULE_TOOL:
            return False
        rel = workspace_relative(str(args.get("path", "")), workspace)
        return rel is not None and _glob_regex(rule.pattern).fullmatch(rel) is not None
    return name.startswith(MCP_TOOL_PREFIX) and rule.tool == name


def _key(workspace: str) -> str:
    return str(Path(workspace).resolve())


def _read(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            raw = handle.read(RULES_FILE_MAX_BYTES + 1)
    except FileNotFoundError:
        return {}
    if len(raw) > RULES_FILE_MAX_BYTES:
        return {}
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return {}  # unreadable: no rule applies, every call asks
    return data if isinstance(data, dict) else {}


def _rules_of(data: Mapping[str, Any], workspace: str) -> list[Rule]:
    rows = (data.get("workspaces") or {}).get(_key(workspace)) or []
    rules = []
    for row in rows if isinstance(rows, list) else []:
        if isinstance(row, dict):
            tool, pattern = row.get("tool"), row.get("pattern")
            if isinstance(tool, str) and isinstance(pattern, str) and tool and pattern:
                rules.append(Rule(tool, pattern))
    return rules


def load_rules(home: Path, workspace: str) -> list[Rule]:
    """The workspace's rules, in the order they were made ([] when none or unreadable)."""
    try:
        return _rules_of(_read(home / RULES_FILE_NAME), workspace)
    except OSError:
        return []


@contextlib.contextmanager
def _locked(home: Path) -> Iterator[Path]:
    """The rules file, held against other processes changing it meanwhile."""
    home.mkdir(parents=True, exist_ok=True)
    with (home / RULES_LOCK_NAME).open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield home / RULES_FILE_NAME
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _write(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, RULES_FILE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1, sort_keys=True)
    os.replace(tmp, path)


def _store(path: Path, data: dict[str, Any], workspace: str, rules: list[Rule]) -> None:
    workspaces = data.get("workspaces")
    if not isinstance(workspaces, dict):
        workspaces = {}
    workspaces[_key(workspace)] = [{"tool": r.tool, "pattern": r.pattern} for r in rules]
    _write(path, {**data, "workspaces": workspaces})


def add_rule(home: Path, workspace: str, rule: Rule) -> bool:
    """Store ``rule`` for the workspace (once; at most :data:`RULES_PER_WORKSPACE_MAX`).

    Returns:
        Whether the rule is stored now (False: the file cannot be written, or full).
    """
    try:
        with _locked(home) as path:
            data = _read(path)
            rules = _rules_of(data, workspace)
            if rule in rules:
                return True
            if len(rules) >= RULES_PER_WORKSPACE_MAX:
                return False
            _store(path, data, workspace, [*rules, rule])
    except OSError:
        return False
    return True


def revoke_rule(home: Path, workspace: str, number: int) -> Rule | None:
    """Remove the workspace's rule ``number`` (1-based, as listed); None when no such rule."""
    with _locked(home) as path:
        data = _read(path)
        rules = _rules_of(data, workspace)
        if not 1 <= number <= len(rules):
            return None
        gone = rules.pop(number - 1)
        _store(path, data, workspace, rules)
    return gone
