"""Commits of the files a session changed, with a message the model drafts.

Which files: those the session's turns changed (the undo snapshots record them,
``agentgraph/session/undo.py``) that git sees as changed now: modified, created (and not
ignored) or deleted. Nothing else is ever committed: the commit names those paths
(``git commit --only``), so files the session did not touch, and whatever the user
staged of them, stay as they are. The message is drafted by one extra model call from
the diff (bounded in size, credentials redacted as in tool results, within a time
limit); when the model fails, a plain summary of the files stands in. A front end shows
the message and the files and asks before :func:`commit`.

With ``AGENTGRAPH_AUTO_COMMIT=on`` each turn that changed files ends with a commit of
those files, unasked (:func:`auto_commit_due`).
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from langchain_core.messages import HumanMessage, SystemMessage

from agentgraph.capabilities.diffs import FileDiff, unified
from agentgraph.security.git_trust import NO_MONITOR_FLAGS, git_dir_unchanged
from agentgraph.session.agent import Agent
from agentgraph.session.commands import visible
from agentgraph.session.titles import NOSTREAM_TAG

__all__ = [
    "COMMIT_MESSAGE_TIMEOUT_S",
    "CommitRefused",
    "FileDiff",
    "PlannedCommit",
    "auto_commit_due",
    "commit",
    "draft_message",
    "fallback_message",
    "plan_commit",
    "repository_root",
    "turn_mark",
]

# Control characters a drafted message may not carry (tab and newline are kept).
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")

GIT_TIMEOUT_S = 30.0
# A commit runs the repository's hooks (a pre-commit hook may run linters or tests).
GIT_COMMIT_TIMEOUT_S = 600.0
# The model's draft is abandoned after this long (the plain summary is used).
COMMIT_MESSAGE_TIMEOUT_S = 60.0
# The diff the model reads is cut to this many characters (its head: the files come in
# path order, each with its hunks).
COMMIT_DIFF_MAX_CHARS = 16_000
COMMIT_MESSAGE_MAX_CHARS = 2_000
# Files named in the fallback subject line.
SUBJECT_FILES_MAX = 3
COMMIT_SYSTEM = "You write git commit messages."
COMMIT_PROMPT = (
    "Write a git commit message for the following changes: a subject line of at most 72 "
    "characters in the imperative mood, then, if useful, a blank line and a short body "
    "saying what changed and why. Reply with the message only.\n\n{diff}"
)


class CommitRefused(Exception):
    """Why nothing can be committed (one line for the user)."""


@dataclass(frozen=True)
class PlannedCommit:
    """What a commit would contain.

    Attributes:
        root: The repository's top folder.
        paths: Repository-relative paths to commit.
        diffs: Their changes against HEAD.
    """

    root: Path
    paths: list[str]
    diffs: list[FileDiff]


def _git(
    root: Path, *args: str, timeout_s: float = GIT_TIMEOUT_S
) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            ["git", *NO_MONITOR_FLAGS, *args],
            cwd=root,
            capture_output=True,
            timeout=timeout_s,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError:
        raise CommitRefused("git is not installed") from None
    except subprocess.TimeoutExpired:
        raise CommitRefused(f"git {args[0]} did not answer within {timeout_s:g}s") from None


def _error_line(result: subprocess.CompletedProcess[bytes]) -> str:
    text = (result.stderr or result.stdout).decode("utf-8", "replace").strip()
    return text.splitlines()[-1] if text else f"exit status {result.returncode}"


def repository_root(workspace: Path) -> Path:
    """The top folder of the git work tree holding ``workspace``.

    Raises:
        CommitRefused: not inside a git work tree.
    """
    result = _git(workspace, "rev-parse", "--show-toplevel")
    if result.returncode != 0:
        raise CommitRefused(f"{workspace} is not in a git repository")
    if not git_dir_unchanged(workspace):
        # Its hooks would run here, outside the sandbox, with the agent's environment.
        raise CommitRefused(
            f"the repository of {workspace} is not the one it had when this session "
            "started (a command may have made it): commit from your own shell"
        )
    return Path(result.stdout.decode("utf-8", "replace").strip())


def _changed_in_git(root: Path, candidates: Sequence[str]) -> list[str]:
    """Those of ``candidates`` git reports as changed, created or deleted (not ignored)."""
    specs = [f":(literal){path}" for path in candidates]
    result = _git(root, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--", *specs)
    if result.returncode != 0:
        raise CommitRefused(f"git status failed: {_error_line(result)}")
    wanted = set(candidates)
    changed: set[str] = set()
    entries = result.stdout.decode("utf-8", "surrogateescape").split("\0")
    skip_next = False
    for entry in entries:
        if skip_next:  # a rename's source path
            skip_next = False
            continue
        if len(entry) < 4:
            continue
        status, path = entry[:2], entry[3:]
        skip_next = "R" in status or "C" in status
        if path in wanted:
            changed.add(path)
    return sorted(changed)


def _head_blob(root: Path, path: str) -> bytes | None:
    result = _git(root, "cat-file", "blob", f"HEAD:{path}")
    return result.stdout if result.returncode == 0 else None


def _current(root: Path, path: str) -> bytes | None:
    try:
        return (root / path).read_bytes()
    except OSError:
        return None


def plan_commit(
    agent: Agent, thread_id: str, workspace: Path, *, last_turn: bool = False
) -> PlannedCommit:
    """The files the session ``thread_id`` (or its last turn that changed files) would
    commit from ``workspace``.

    Raises:
        CommitRefused: outside a git repository, or nothing of the session to commit.
    """
    workspace = workspace.resolve()
    root = repository_root(workspace).resolve()
    turns = agent.sessions.undo_store(thread_id).turns()
    if last_turn:
        turns = turns[-1:]
    candidates: set[str] = set()
    for turn in turns:
        for rel in turn.before:
            full = Path(os.path.normpath(workspace / rel))
            if full.is_relative_to(root):
                candidates.add(full.relative_to(root).as_posix())
    if not candidates:
        raise CommitRefused("nothing to commit: this session has changed no files")
    paths = _changed_in_git(root, sorted(candidates))
    if not paths:
        raise CommitRefused("nothing to commit: the files this session changed are as committed")
    diffs = [unified(path, _head_blob(root, path), _current(root, path)) for path in paths]
    return PlannedCommit(root, paths, diffs)


def fallback_message(plan: PlannedCommit) -> str:
    """A plain message naming the files and their line counts."""
    names = [visible(Path(path).name) for path in plan.paths]
    subject = ", ".join(names[:SUBJECT_FILES_MAX])
    if len(names) > SUBJECT_FILES_MAX:
        subject += f" and {len(names) - SUBJECT_FILES_MAX} more"
    body = [f"- {visible(d.path)}: +{d.added} -{d.removed}" for d in plan.diffs]
    return f"Update {subject}\n\n" + "\n".join(body)


def _clean_message(raw: str) -> str | None:
    """The model's reply as a message: no code fences, quotes or control characters."""
    raw = "\n".join(_CONTROL_RE.sub("", line) for line in raw.splitlines())
    lines = [line.rstrip() for line in raw.strip().splitlines()]
    lines = [line for line in lines if not line.startswith("```")]
    text = "\n".join(lines).strip().strip("\"'`").strip()
    return text[:COMMIT_MESSAGE_MAX_CHARS] if text else None


def draft_message(agent: Agent, plan: PlannedCommit) -> tuple[str, bool]:
    """The model's commit message for ``plan``, or the fallback; and whether the model
    wrote it. Waits at most :data:`COMMIT_MESSAGE_TIMEOUT_S` for the model."""
    diff = "\n".join(d.diff or f"{d.path}: {d.note}" for d in plan.diffs)
    if len(diff) > COMMIT_DIFF_MAX_CHARS:
        diff = diff[:COMMIT_DIFF_MAX_CHARS] + "\n… (diff cut)"
    redactor = agent.deps.redactor
    if redactor is not None:
        diff = redactor.redact(diff)
    prompt = [
        SystemMessage(content=COMMIT_SYSTEM),
        HumanMessage(content=COMMIT_PROMPT.format(diff=diff)),
    ]
    answer: list[str | None] = []

    def ask() -> None:
        try:
            reply = agent.deps.model.invoke(prompt, config={"tags": [NOSTREAM_TAG]})
            answer.append(_clean_message(reply.text))
        except Exception:  # any failure of the model: the plain summary stands in
            answer.append(None)

    # A thread, so that a model that does not answer is given up after the limit.
    asker = threading.Thread(target=ask, name="agentgraph-commit-message", daemon=True)
    asker.start()
    asker.join(COMMIT_MESSAGE_TIMEOUT_S)
    drafted = answer[0] if answer else None
    if drafted is None:
        return fallback_message(plan), False
    return drafted, True


def commit(plan: PlannedCommit, message: str) -> str:
    """Commit ``plan``'s paths with ``message``; returns the new commit's short hash.

    Raises:
        CommitRefused: git refused (the reason in one line).
    """
    specs = [f":(literal){path}" for path in plan.paths]
    added = _git(plan.root, "add", "-A", "--", *specs)
    if added.returncode != 0:
        raise CommitRefused(f"git add failed: {_error_line(added)}")
    done = _git(
        plan.root,
        "commit",
        "--only",
        "-q",
        "-m",
        message,
        "--",
        *specs,
        timeout_s=GIT_COMMIT_TIMEOUT_S,
    )
    if done.returncode != 0:
        raise CommitRefused(f"git commit failed: {_error_line(done)}")
    head = _git(plan.root, "rev-parse", "--short", "HEAD")
    return head.stdout.decode("utf-8", "replace").strip()


def turn_mark(agent: Agent, thread_id: str) -> float | None:
    """When the session's last file-changing turn was recorded (taken before a turn)."""
    turns = agent.sessions.undo_store(thread_id).turns()
    return turns[-1].at if turns else None


def auto_commit_due(agent: Agent, thread_id: str, mark: float | None) -> bool:
    """Whether the turn that just ended should be committed: ``AGENTGRAPH_AUTO_COMMIT``
    is on and the turn changed files.

    Args:
        agent: The agent in use.
        thread_id: The session.
        mark: :func:`turn_mark` before the turn (no new record: the turn changed nothing).
    """
    return agent.settings.auto_commit == "on" and turn_mark(agent, thread_id) not in (None, mark)
