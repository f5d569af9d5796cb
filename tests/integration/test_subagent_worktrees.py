"""Subagents that edit work in their own tree; their changes come back as a merged diff.

Through the real CLI (``run --output-format stream-json``) or the real ``Agent`` graph,
against the loopback strict server. Every reply is a function of the request alone: a
subagent is recognised by its task (the first user message, ``WRITE <path> <text>``),
the parent by its own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentgraph.capabilities import subagent_worktrees
from agentgraph.capabilities.subagent_worktrees import (
    OWNER_FILE,
    PATCH_FILE,
    clean_stale,
    create,
    worktrees_dir,
)
from agentgraph.capabilities.tools.workspace_scan import scanned_changes
from agentgraph.config import Settings
from agentgraph.context.ledger import collect_ledger, render_ledger
from agentgraph.persistence.store import Store
from agentgraph.session.agent import Agent
from tests.cli_helpers import run_cli, server_env
from tests.fakes.openai_server import FakeOpenAIServer

KEY = "sk-test-secret-0123456789abcdef"
ORIGINAL = "line 1\nline 2\nline 3\n"
Reply = Callable[[dict[str, Any]], dict[str, Any]]


def _user_texts(body: dict[str, Any]) -> list[str]:
    return [
        m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
        for m in body.get("messages") or []
        if m.get("role") == "user"
    ]


def _tools(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body.get("messages") or [] if m.get("role") == "tool"]


def _task(path: str, text: str) -> str:
    return f"WRITE {path} {text}"


def model(
    tasks: list[str], workspace: Path, seen: list[tuple[str, str | None]], *, writes: bool = True
) -> Reply:
    """Subagents write the file their task names, then (next call) answer; the parent
    delegates ``tasks`` in one response, then answers with the results it got.

    When a subagent's second call arrives, its write is done: what the caller's
    workspace holds at that moment is recorded in ``seen``.
    """

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        first = (_user_texts(body) or [""])[0]
        if first.startswith("WRITE "):
            _, path, text = first.split(" ", 2)
            if not _tools(body):
                args = {"path": path, "content": text + "\n"}
                return {"tool_calls": [{"name": "write_file", "arguments": args}]}
            target = workspace / path
            seen.append((path, target.read_text() if target.exists() else None))
            return {"content": f"wrote {path}"}
        done = _tools(body)
        if not done:
            calls = [
                {"name": "call_subagent", "arguments": {"task": t, "writes": writes}} for t in tasks
            ]
            return {"tool_calls": calls}
        return {"content": " || ".join(str(m["content"]).replace("\n", " | ") for m in done)}

    return reply


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def _repo(workspace: Path) -> None:
    _git(workspace, "init", "-q")
    for name in ("a.txt", "b.txt"):
        (workspace / name).write_text(ORIGINAL)
    _git(workspace, "add", "-A")
    _git(workspace, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")


def _in_background(inner: Reply, body: dict[str, Any]) -> dict[str, Any] | None:
    """``inner``'s reply to a subagent's request or the caller's first, its subagents
    started in the background; None for the caller's later requests."""
    first = (_user_texts(body) or [""])[0]
    if not first.startswith("WRITE ") and _tools(body):
        return None
    answer = inner(body)
    for call in answer.get("tool_calls") or []:
        if call["name"] == "call_subagent":
            call["arguments"]["background"] = True
    return answer


def _collect(started: dict[str, Any]) -> dict[str, Any]:
    """A reply waiting for the background subagent whose start result is ``started``."""
    task_id = str(started["content"]).split(" ", 1)[0].lstrip("[")
    args = {"task_id": task_id, "action": "result", "wait_s": 60}
    return {"tool_calls": [{"name": "subagent_task", "arguments": args}]}


def _run(
    workspace: Path, home: Path, reply: Reply, **env: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    with FakeOpenAIServer([reply], require_key=KEY, on_exhausted="repeat_last") as server:
        res = run_cli(
            ["run", "delegate the edits", "--output-format", "stream-json"],
            cwd=workspace,
            env=server_env(home, server.url, KEY, **env),
        )
        requests = server.requests
    assert res.returncode == 0, res.stderr
    return [json.loads(line) for line in res.stdout.splitlines() if line.strip()], requests


def _results(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "tool_result" and e["name"] == "call_subagent"]


def _no_trees(home: Path) -> None:
    folder = worktrees_dir(home / ".agentgraph")
    assert not folder.exists() or list(folder.iterdir()) == []


def test_two_parallel_subagents_editing_different_files_both_apply_and_stay_unseen_till_done(
    home: Path, workspace: Path
) -> None:
    _repo(workspace)
    # An uncommitted change: the subagents start from the working tree, not from HEAD.
    (workspace / "b.txt").write_text(ORIGINAL + "line 4 uncommitted\n")
    seen: list[tuple[str, str | None]] = []
    tasks = [_task("a.txt", "A-EDITED"), _task("new/c.txt", "C-NEW")]
    events, requests = _run(workspace, home, model(tasks, workspace, seen))
    results = _results(events)
    assert len(results) == 2 and all(r["status"] == "success" for r in results)
    assert all("[changes applied to the workspace: 1 file" in r["content"] for r in results)
    assert (workspace / "a.txt").read_text() == "A-EDITED\n"
    assert (workspace / "new" / "c.txt").read_text() == "C-NEW\n"
    assert (workspace / "b.txt").read_text() == ORIGINAL + "line 4 uncommitted\n"
    # While each subagent ran, its write was not in the caller's workspace.
    assert sorted(seen) == [("a.txt", ORIGINAL), ("new/c.txt", None)]
    # The parent's answer carries the diff summary the model read.
    assert (
        "a.txt (+1 −3)" in events[-1]["answer"]
        and "new/c.txt (new, +1 −0)" in (events[-1]["answer"])
    )
    # The user's repository is left as it was: no branch, no staged change, no worktree.
    assert _git(workspace, "worktree", "list").count("\n") == 1
    assert _git(workspace, "diff", "--cached", "--name-only") == ""
    _no_trees(home)
    # A subagent with writes gets the file tools; the caller's prompt is untouched.
    sub = [r for r in requests if (_user_texts(r) or [""])[0].startswith("WRITE ")]
    assert sub and all(
        "write_file" in {t["function"]["name"] for t in r.get("tools") or []} for r in sub
    )


def test_the_files_a_subagent_s_applied_changes_changed_are_in_the_callers_ledger(
    make_settings: Callable[..., Settings], store: Store, workspace: Path
) -> None:
    """The caller's result said which files (``[changes applied to the workspace: …]``),
    and a compaction could summarize that away: the ledger, which no compaction loses,
    lists them too."""
    _repo(workspace)
    seen: list[tuple[str, str | None]] = []
    tasks = [_task("a.txt", "A-EDITED"), _task("new/c.txt", "C-NEW")]
    with FakeOpenAIServer(
        [model(tasks, workspace, seen)], require_key=KEY, on_exhausted="repeat_last"
    ) as server:
        settings = make_settings(OPENAI_BASE_URL=server.url, OPENAI_API_KEY=KEY)
        agent = Agent(settings, store)
        agent.run_turn("p", "delegate the edits", workspace)
    ledger = render_ledger(collect_ledger(agent.messages("p"), workspace=str(workspace)))
    assert "- a.txt: changed by a subagent\n" in ledger
    assert "- new/c.txt: changed by a subagent\n" in ledger + "\n"


# The caller's command while its background subagent works: it ends once the subagent's
# file is applied to the workspace, so the apply falls inside the command's step.
WAIT_FOR_APPLY = "until [ -f sub.txt ]; do sleep 0.05; done; echo applied"


def test_a_background_subagent_s_apply_during_a_command_is_not_the_command_s(
    make_settings: Callable[..., Settings], store: Store, workspace: Path
) -> None:
    """The workspace scan around a command step sees every file that changed meanwhile:
    one a background subagent applied is the subagent's, not the command's."""
    _repo(workspace)
    seen: list[tuple[str, str | None]] = []
    inner = model([_task("sub.txt", "BG-NEW")], workspace, seen)

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        done = _tools(body)
        answer = _in_background(inner, body)
        if answer is not None:
            return answer
        if len(done) == 1:
            args = {"command": WAIT_FOR_APPLY, "timeout_s": 120}
            return {"tool_calls": [{"name": "run_bash", "arguments": args}]}
        if len(done) == 2:
            return _collect(done[0])
        return {"content": "COLLECTED"}

    with FakeOpenAIServer([reply], require_key=KEY, on_exhausted="repeat_last") as server:
        settings = make_settings(
            OPENAI_BASE_URL=server.url, OPENAI_API_KEY=KEY, AGENTGRAPH_SANDBOX="off"
        )
        agent = Agent(settings, store)
        agent.run_turn("p", "delegate, then wait", workspace)
    assert (workspace / "sub.txt").read_text() == "BG-NEW\n"
    messages = agent.messages("p")
    waited = [
        m for m in messages if "applied" in str(m.content) and "[exit code 0]" in str(m.content)
    ]
    assert len(waited) == 1 and scanned_changes(waited[0]) is None
    ledger = render_ledger(collect_ledger(messages, workspace=str(workspace)))
    assert "sub.txt: created by a command" not in ledger


def test_two_subagents_editing_the_same_lines_one_applies_the_other_is_a_conflict(
    home: Path, workspace: Path
) -> None:
    _repo(workspace)
    tasks = [_task("a.txt", "FIRST"), _task("a.txt", "SECOND")]
    events, _ = _run(workspace, home, model(tasks, workspace, []))
    results = _results(events)
    applied = [r for r in results if "[changes applied" in r["content"]]
    conflicts = [r for r in results if "[changes NOT applied, conflict: a.txt" in r["content"]]
    assert len(applied) == 1 and len(conflicts) == 1, results
    text = (workspace / "a.txt").read_text()
    assert text in ("FIRST\n", "SECOND\n")
    assert "<<<<<<<" not in text and ">>>>>>>" not in text
    loser = "SECOND" if text == "FIRST\n" else "FIRST"
    # The conflicting change is not lost: its patch is kept and named in the result.
    named = conflicts[0]["content"].split("the patch is in ", 1)[1].split("]", 1)[0]
    assert f"+{loser}" in Path(named).read_text()
    _no_trees(home)


def test_a_background_subagent_with_writes_applies_when_it_ends(
    home: Path, workspace: Path
) -> None:
    _repo(workspace)
    seen: list[tuple[str, str | None]] = []
    inner = model([_task("b.txt", "BG-EDIT")], workspace, seen)

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        done = _tools(body)
        answer = _in_background(inner, body)
        if answer is not None:
            return answer
        if len(done) == 1:
            return _collect(done[0])
        return {"content": "COLLECTED " + str(done[-1]["content"]).replace("\n", " | ")}

    events, _ = _run(workspace, home, reply)
    assert "[changes applied to the workspace: 1 file, +1 −3: b.txt" in events[-1]["answer"]
    assert (workspace / "b.txt").read_text() == "BG-EDIT\n"
    assert seen == [("b.txt", ORIGINAL)]
    _no_trees(home)


def test_a_folder_without_git_is_copied_and_merged_back(home: Path, workspace: Path) -> None:
    (workspace / "a.txt").write_text(ORIGINAL)
    (workspace / "node_modules").mkdir()
    (workspace / "node_modules" / "big.js").write_text("not copied\n")
    seen: list[tuple[str, str | None]] = []
    events, _ = _run(workspace, home, model([_task("a.txt", "COPY-EDIT")], workspace, seen))
    (result,) = _results(events)
    assert "[changes applied to the workspace: 1 file, +1 −3: a.txt" in result["content"]
    assert (workspace / "a.txt").read_text() == "COPY-EDIT\n"
    assert seen == [("a.txt", ORIGINAL)]
    assert not (workspace / ".git").exists()
    _no_trees(home)


def test_a_subagent_without_writes_shares_the_workspace_without_the_edit_tools(
    home: Path, workspace: Path
) -> None:
    (workspace / "a.txt").write_text(ORIGINAL)
    events, requests = _run(
        workspace, home, model([_task("a.txt", "NO")], workspace, [], writes=False)
    )
    sub = [r for r in requests if (_user_texts(r) or [""])[0].startswith("WRITE ")]
    names = {t["function"]["name"] for t in sub[0].get("tools") or []}
    assert "read_file" in names and not names & {"write_file", "edit_file"}
    # The scripted subagent tried anyway: refused, nothing written, no tree made.
    assert (workspace / "a.txt").read_text() == ORIGINAL
    (result,) = _results(events)
    assert "[no file changes]" not in result["content"] and "changes" not in result["content"]
    assert not worktrees_dir(home / ".agentgraph").exists()


def test_ask_mode_holds_the_changes_until_the_user_approves_and_undo_reverts_them(
    make_settings: Callable[..., Settings], store: Store, workspace: Path
) -> None:
    _repo(workspace)

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        first = (_user_texts(body) or [""])[0]
        done = _tools(body)
        if first.startswith("WRITE "):
            if not done:
                args = {"path": "a.txt", "content": "ASKED\n"}
                return {"tool_calls": [{"name": "write_file", "arguments": args}]}
            return {"content": "wrote a.txt"}
        if not done:
            args = {"task": _task("a.txt", "ASKED"), "writes": True}
            return {"tool_calls": [{"name": "call_subagent", "arguments": args}]}
        if len(done) == 1:
            task_id = str(done[0]["content"]).split(" ", 1)[0].lstrip("[")
            args = {"task_id": task_id, "action": "apply"}
            return {"tool_calls": [{"name": "subagent_task", "arguments": args}]}
        return {"content": "APPLY RESULT: " + str(done[-1]["content"])}

    asked: list[dict[str, Any]] = []

    def approve(request: dict[str, Any]) -> bool:
        asked.append(request)
        # Held, not applied, while the question waits.
        assert (workspace / "a.txt").read_text() == ORIGINAL
        return True

    with FakeOpenAIServer([reply], require_key=KEY, on_exhausted="repeat_last") as server:
        settings = make_settings(
            OPENAI_BASE_URL=server.url, OPENAI_API_KEY=KEY, AGENTGRAPH_EDITS="ask"
        )
        agent = Agent(settings, store)
        result = agent.run_turn("p", "delegate", workspace, approve=approve)
    assert result.answer.startswith("APPLY RESULT: applied to the workspace: 1 file, +1 −3")
    (question,) = asked
    assert question["tool"] == "subagent_task" and question["setting"] == "AGENTGRAPH_EDITS"
    assert "+ASKED" in question["diff"] and "-line 1" in question["diff"]
    assert (workspace / "a.txt").read_text() == "ASKED\n"
    assert list(worktrees_dir(settings.home).iterdir()) == []
    # The caller's ledger lists the file the applied changes changed.
    ledger = render_ledger(collect_ledger(agent.messages("p"), workspace=str(workspace)))
    assert "- a.txt: changed by a subagent\n" in ledger + "\n"
    # Applied inside the turn: undo puts the file back.
    undone = agent.sessions.undo_store("p").undo(workspace)
    assert undone.restored == ["a.txt"]
    assert (workspace / "a.txt").read_text() == ORIGINAL


def test_trees_of_a_dead_process_are_removed_with_their_patch_kept(
    tmp_path: Path, workspace: Path
) -> None:
    _repo(workspace)
    home = tmp_path / "agent-home"
    iso = create(home, "subagent-0badf00d", str(workspace), "parent")
    iso.mark("running", thread_id="0badf00d" + "0" * 24)
    (iso.workspace / "a.txt").write_text("PARTIAL\n")
    live = create(home, "subagent-11111111", str(workspace), "parent")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    owner = json.loads((iso.folder / OWNER_FILE).read_text())
    (iso.folder / OWNER_FILE).write_text(json.dumps({**owner, "pid": dead.pid}))
    patches = tmp_path / "patches"
    removed = clean_stale(home, lambda tid: patches / tid)
    assert removed == ["subagent-0badf00d"]
    assert not iso.folder.exists() and live.folder.exists()
    assert "+PARTIAL" in (patches / ("0badf00d" + "0" * 24) / PATCH_FILE).read_text()
    listed = _git(workspace, "worktree", "list")
    assert str(iso.root) not in listed and str(live.root) in listed
    assert (workspace / "a.txt").read_text() == ORIGINAL
    live.remove()
    assert _git(workspace, "worktree", "list").count("\n") == 1


def test_an_isolated_tree_runs_no_monitor_the_repository_names(
    tmp_path: Path, workspace: Path
) -> None:
    """A repository a sandboxed command created is the command's: the agent's own git,
    outside the sandbox, does not run the monitor program its config names."""
    _repo(workspace)
    marker = tmp_path / "monitor-ran"
    _git(workspace, "config", "core.fsmonitor", f"touch {marker}; false")
    (workspace / "a.txt").write_text("uncommitted\n")  # the snapshot then has work to do
    iso = create(tmp_path / "agent-home", "subagent-33333333", str(workspace), "parent")
    assert (iso.workspace / "a.txt").read_text() == "uncommitted\n"
    iso.remove()
    assert not marker.exists()


def test_an_isolated_tree_runs_no_program_a_rewritten_submodule_names(
    tmp_path: Path, workspace: Path
) -> None:
    """A submodule's ``.git`` file is a plain file of the workspace: a command may point
    it at a git dir of its own whose config names a filter. The agent's own ``git add``
    (the snapshot, and the subagent's changes) would run that filter outside the sandbox
    while checking the submodule for changes."""
    source = tmp_path / "lib-source"
    source.mkdir()
    _git(source, "init", "-q")
    (source / "s.txt").write_text("s\n")
    _git(source, "add", "s.txt")
    _git(source, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "lib")
    _repo(workspace)
    _git(
        workspace, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(source), "lib"
    )
    _git(workspace, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "with lib")
    # What a command could write: a copy of the submodule's git dir with a filter, the
    # submodule's .git file naming it, attributes calling the filter, and a file whose
    # time changed but not its size (git must read it, through the filter, to compare).
    marker = tmp_path / "filter-ran"
    planted = workspace / "build" / "g"
    shutil.copytree(workspace / ".git" / "modules" / "lib", planted)
    config = (planted / "config").read_text().replace("\tworktree = ../../../lib\n", "")
    (planted / "config").write_text(config + f'[filter "x"]\n\tclean = "touch {marker}; cat"\n')
    (workspace / "lib" / ".git").write_text("gitdir: ../build/g\n")
    (workspace / "lib" / ".gitattributes").write_text("* filter=x\n")
    os.utime(workspace / "lib" / "s.txt", (1, 1))
    iso = create(tmp_path / "agent-home", "subagent-44444444", str(workspace), "parent")
    assert not marker.exists()
    (iso.root / "lib" / ".git").write_text(f"gitdir: {planted}\n")  # its own command's
    (iso.root / "lib" / ".gitattributes").write_text("* filter=x\n")
    (iso.root / "lib" / "s.txt").write_text("s\n")
    os.utime(iso.root / "lib" / "s.txt", (1, 1))
    iso.changes()
    iso.remove()
    assert not marker.exists()


def test_a_workspace_over_the_copy_limit_is_refused(
    tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentgraph.capabilities import subagent_worktrees
    from agentgraph.capabilities.subagent_worktrees import IsolationError

    monkeypatch.setattr(subagent_worktrees, "COPY_MAX_FILES", 3)
    for n in range(5):
        (workspace / f"f{n}.txt").write_text("x")
    with pytest.raises(IsolationError, match="too big to copy"):
        create(tmp_path / "h", "subagent-22222222", str(workspace), "p")
    assert list(worktrees_dir(tmp_path / "h").iterdir()) == []


# Time each git worktree command is held open in the test below, so that commands run
# together would overlap for certain.
WORKTREE_HOLD_S = 0.2


def test_subagents_started_together_make_their_trees_one_git_worktree_command_at_a_time(
    home: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """git takes no lock while it writes a new worktree's entry, and an add that reads
    a sibling's half-written one dies ("failed to read .git/worktrees/tree/commondir:
    Success"): two subagents started together failed now and then on a loaded machine.
    Four made at once run their worktree commands one after the other, and all four
    trees are made."""
    _repo(workspace)
    real_run = subprocess.run
    running: list[int] = []
    most = [0]
    guard = threading.Lock()

    def watched(cmd: list[str], *args: Any, **kwargs: Any) -> Any:
        if "worktree" not in cmd:
            return real_run(cmd, *args, **kwargs)
        with guard:
            running.append(1)
            most[0] = max(most[0], len(running))
        try:
            time.sleep(WORKTREE_HOLD_S)
            return real_run(cmd, *args, **kwargs)
        finally:
            with guard:
                running.pop()

    monkeypatch.setattr(subagent_worktrees.subprocess, "run", watched)
    made: list[Any] = []
    failed: list[BaseException] = []

    def make(n: int) -> None:
        try:
            made.append(create(home / ".agentgraph", f"ctx-{n}", str(workspace), "parent"))
        except BaseException as exc:
            failed.append(exc)

    threads = [threading.Thread(target=make, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failed == [] and len(made) == 4
    assert most[0] == 1
    for iso in made:
        assert (iso.workspace / "a.txt").read_text() == ORIGINAL
        iso.remove()
