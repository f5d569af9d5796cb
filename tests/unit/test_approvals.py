"""Approvals as LangGraph interrupts, through the real graph on a real SQLite file.

``AGENTGRAPH_BASH=ask`` / ``AGENTGRAPH_EDITS=ask`` stop the run before any tool of the
step runs; answers resume it with ``Command(resume={interrupt_id: answer})``. The
question survives a restart (a new Agent on the same file), several questions in one
step are asked one by one and every approved command runs exactly once.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain_core.messages import ToolMessage

from agentgraph.config import Settings
from agentgraph.persistence import Store, open_store
from agentgraph.runtime.history import validate_history
from agentgraph.security.approvals import APPROVAL_DIFF_MAX_CHARS, is_approved
from agentgraph.session.agent import Agent, TurnResult
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.scripts import ai_text, ai_tools, tool_call


def _drain(events: Any) -> tuple[list[dict[str, Any]], TurnResult]:
    seen = list(events)
    assert seen[-1]["type"] == "turn_end"
    return seen, seen[-1]["result"]


def _tool_results(agent: Agent, thread_id: str) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in agent.messages(thread_id) if isinstance(m, ToolMessage)}


def test_bash_ask_stops_before_the_command_and_runs_it_once_approved(
    make_settings: Callable[..., Settings], store: Store, workspace: Path
) -> None:
    settings = make_settings(AGENTGRAPH_BASH="ask")
    model = ScriptedChatModel(
        [ai_tools(tool_call("run_bash", {"command": "echo x >> log.txt"}, id="b1")), ai_text("ok")]
    )
    agent = Agent(settings, store, model=model)
    events, result = _drain(agent.stream_turn("t", "log once", workspace))
    (question,) = result.pending_approvals
    assert question["type"] == "approval" and question["tool"] == "run_bash"
    assert question["command"] == "echo x >> log.txt" and question["tool_call_id"] == "b1"
    assert [e for e in events if e["type"] == "approval"] == [question]
    assert not (workspace / "log.txt").exists()  # nothing ran before the answer
    assert agent.pending_approvals("t") == [question]

    _, resumed = _drain(agent.stream_resume("t", workspace, {question["id"]: "y"}))
    assert resumed.pending_approvals == [] and resumed.answer == "ok"
    assert (workspace / "log.txt").read_text() == "x\n"  # exactly once
    assert "[exit code 0]" in str(_tool_results(agent, "t")["b1"].content)
    assert agent.pending_approvals("t") == []
    for prompt in model.calls:
        assert validate_history(prompt) == []


def test_a_declined_command_is_not_run_and_the_model_is_told(
    make_settings: Callable[..., Settings], store: Store, workspace: Path
) -> None:
    settings = make_settings(AGENTGRAPH_BASH="ask")
    model = ScriptedChatModel(
        [ai_tools(tool_call("run_bash", {"command": "touch made"}, id="b1")), ai_text("fine")]
    )
    agent = Agent(settings, store, model=model)
    result = agent.run_turn("t", "make it", workspace, approve=lambda q: False)
    assert result.answer == "fine" and result.pending_approvals == []
    assert not (workspace / "made").exists()
    tool = _tool_results(agent, "t")["b1"]
    assert tool.status == "error" and "declined" in str(tool.content)


def test_two_questions_in_one_step_are_asked_in_turn_and_answered_by_id(
    make_settings: Callable[..., Settings], store: Store, workspace: Path
) -> None:
    settings = make_settings(AGENTGRAPH_BASH="ask")
    model = ScriptedChatModel(
        [
            ai_tools(
                tool_call("run_bash", {"command": "echo a >> a.txt"}, id="b1"),
                tool_call("now", {}, id="n1"),
                tool_call("run_bash", {"command": "echo b >> b.txt"}, id="b2"),
            ),
            ai_text("both handled"),
        ]
    )
    agent = Agent(settings, store, model=model)
    _, first = _drain(agent.stream_turn("t", "two commands", workspace))
    (q1,) = first.pending_approvals
    assert q1["tool_call_id"] == "b1"
    _, second = _drain(agent.stream_resume("t", workspace, {q1["id"]: True}))
    (q2,) = second.pending_approvals
    assert q2["tool_call_id"] == "b2" and q2["id"] != q1["id"]
    assert not (workspace / "a.txt").exists()  # still nothing ran: one more question
    _, done = _drain(agent.stream_resume("t", workspace, {q2["id"]: {"approved": False}}))
    assert done.answer == "both handled"
    assert (workspace / "a.txt").read_text() == "a\n"  # once, although the node ran 3 times
    assert not (workspace / "b.txt").exists()
    results = _tool_results(agent, "t")
    assert results["b2"].status == "error" and "declined" in str(results["b2"].content)
    assert results["n1"].status != "error"
    for prompt in model.calls:
        assert validate_history(prompt) == []


def test_a_question_survives_a_restart(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    settings = make_settings(AGENTGRAPH_BASH="ask")
    script = [
        ai_tools(tool_call("run_bash", {"command": "echo r > r.txt"}, id="b1")),
        ai_text("ok"),
    ]
    with open_store(settings) as store:
        agent = Agent(settings, store, model=ScriptedChatModel(script[:1]))
        _, result = _drain(agent.stream_turn("t", "go", workspace))
        (asked,) = result.pending_approvals
    # A new process: a new store and agent on the same SQLite file.
    with open_store(settings) as store:
        agent = Agent(settings, store, model=ScriptedChatModel(script[1:]))
        assert agent.pending_approvals("t") == [asked]
        _, resumed = _drain(agent.stream_resume("t", workspace, {asked["id"]: "yes"}))
    assert resumed.answer == "ok"
    assert (workspace / "r.txt").read_text() == "r\n"


def test_edits_ask_shows_a_diff_and_writes_only_when_approved(
    make_settings: Callable[..., Settings], store: Store, workspace: Path
) -> None:
    settings = make_settings(AGENTGRAPH_EDITS="ask")
    (workspace / "a.py").write_text("x = 1\ny = 2\n")
    model = ScriptedChatModel(
        [
            ai_tools(
                tool_call(
                    "edit_file",
                    {"path": "a.py", "old_string": "y = 2", "new_string": "y = 3"},
                    id="e1",
                )
            ),
            ai_tools(tool_call("write_file", {"path": "new.txt", "content": "hello\n"}, id="w1")),
            ai_text("edited"),
        ]
    )
    agent = Agent(settings, store, model=model)
    seen: list[dict[str, Any]] = []

    def approve(question: dict[str, Any]) -> bool:
        seen.append(question)
        return question["tool"] == "edit_file"

    result = agent.run_turn("t", "edit", workspace, approve=approve)
    assert result.answer == "edited"
    edit, write = seen
    assert edit["path"] == "a.py" and edit["setting"] == "AGENTGRAPH_EDITS"
    assert "-y = 2" in edit["diff"] and "+y = 3" in edit["diff"] and "--- a/a.py" in edit["diff"]
    assert write["path"] == "new.txt" and "+hello" in write["diff"]
    assert (workspace / "a.py").read_text() == "x = 1\ny = 3\n"
    assert not (workspace / "new.txt").exists()


def test_an_edit_question_of_a_file_holding_a_token_stores_no_token(
    make_settings: Callable[..., Settings], store: Store, workspace: Path
) -> None:
    """The diff an edit's question shows comes from the file as it is: a token in its
    context lines reached the question, and the question (a LangGraph interrupt) the
    session's database. Redacted as the diff events are, the token never does."""
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    settings = make_settings(AGENTGRAPH_EDITS="ask")
    (workspace / "ci.py").write_text(f'TOKEN = "{token}"\nY = 2\n')
    edit = {"path": "ci.py", "old_string": "Y = 2", "new_string": "Y = 3"}
    model = ScriptedChatModel(
        [
            ai_tools(tool_call("edit_file", edit, id="e1")),
            ai_tools(tool_call("write_file", {"path": "ci.py", "content": "Y = 4\n"}, id="w1")),
            ai_text("edited"),
        ]
    )
    agent = Agent(settings, store, model=model)
    seen: list[dict[str, Any]] = []

    def approve(question: dict[str, Any]) -> bool:
        seen.append(question)
        return question["tool"] == "edit_file"

    assert agent.run_turn("t", "edit", workspace, approve=approve).answer == "edited"
    assert [q["tool"] for q in seen] == ["edit_file", "write_file"]
    assert all(token not in q["diff"] and "[REDACTED]" in q["diff"] for q in seen), seen
    assert "+Y = 3" in seen[0]["diff"] and "+Y = 4" in seen[1]["diff"]
    assert (workspace / "ci.py").read_text() == f'TOKEN = "{token}"\nY = 3\n'
    stored = [p for p in settings.home.rglob("*") if p.is_file() and "snapshots" not in p.parts]
    assert stored and not [p for p in stored if token.encode() in p.read_bytes()]


def test_an_edit_question_cut_at_its_size_holds_no_part_of_a_token(
    make_settings: Callable[..., Settings], store: Store, workspace: Path
) -> None:
    """A question's diff is cut at :data:`APPROVAL_DIFF_MAX_CHARS`: cut first and
    redacted after, a token the cut fell in no longer matched its pattern, and its first
    29 characters reached the question and the database. Redacted first, none does."""
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    header = "--- a/ci.py\n+++ b/ci.py\n@@ -1,3 +1,3 @@\n"
    # The cut falls 25 characters into the token: " # " + pad + "\n", ' TOKEN = "'.
    pad = APPROVAL_DIFF_MAX_CHARS - len(header) - 4 - 10 - 25
    (workspace / "ci.py").write_text(f'# {"a" * pad}\nTOKEN = "{token}"\nY = 2\n')
    settings = make_settings(AGENTGRAPH_EDITS="ask")
    edit = {"path": "ci.py", "old_string": "Y = 2", "new_string": "Y = 3"}
    model = ScriptedChatModel([ai_tools(tool_call("edit_file", edit, id="e1")), ai_text("ok")])
    seen: list[dict[str, Any]] = []

    def approve(question: dict[str, Any]) -> bool:
        seen.append(question)
        return True

    Agent(settings, store, model=model).run_turn("t", "edit", workspace, approve=approve)
    assert len(seen) == 1 and "(diff cut)" in seen[0]["diff"], seen
    assert token[:12] not in seen[0]["diff"]
    stored = [p for p in settings.home.rglob("*") if p.is_file() and "snapshots" not in p.parts]
    assert stored and not [p for p in stored if token[:12].encode() in p.read_bytes()]


def test_a_rewrite_question_shows_the_change_the_tool_will_write(
    make_settings: Callable[..., Settings], store: Store, workspace: Path
) -> None:
    """A rewrite keeping a token the model saw as the marker writes the token back: its
    question showed the marker over the token as a change of that line (``-TOKEN`` /
    ``+TOKEN``, both redacted alike). It shows the change the tool will make; a rewrite
    whose markers' values are not certain is answered with the tool's error, unasked; an
    edit whose old_string holds the marker is asked (it was answered "not found")."""
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    other = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
    (workspace / "ci.py").write_text(f'TOKEN = "{token}"\nY = 2\n')
    (workspace / "pair.py").write_text(f'A = "{token}"\nB = "{other}"\n')
    settings = make_settings(AGENTGRAPH_EDITS="ask")
    rewrite = {"path": "ci.py", "content": 'TOKEN = "[REDACTED]"\nY = 3\n'}
    both = {"path": "pair.py", "content": 'AB = ["[REDACTED]", "[REDACTED]"]\n'}
    typed = {
        "path": "ci.py",
        "old_string": 'TOKEN = "[REDACTED]"',
        "new_string": 'TOKEN: str = "[REDACTED]"',
    }
    model = ScriptedChatModel(
        [
            ai_tools(tool_call("write_file", rewrite, id="w1")),
            ai_tools(tool_call("write_file", both, id="w2")),
            ai_tools(tool_call("edit_file", typed, id="e1")),
            ai_text("ok"),
        ]
    )
    seen: list[dict[str, Any]] = []

    def approve(question: dict[str, Any]) -> bool:
        seen.append(question)
        return True

    Agent(settings, store, model=model).run_turn("t", "edit", workspace, approve=approve)
    assert [q["tool"] for q in seen] == ["write_file", "edit_file"], seen
    diff = seen[0]["diff"]
    assert "+Y = 3" in diff and "-TOKEN" not in diff and "+TOKEN" not in diff, diff
    assert '+TOKEN: str = "[REDACTED]"' in seen[1]["diff"], seen[1]
    assert token not in str(seen)
    assert (workspace / "ci.py").read_text() == f'TOKEN: str = "{token}"\nY = 3\n'
    assert (workspace / "pair.py").read_text() == f'A = "{token}"\nB = "{other}"\n'


def test_an_edit_that_cannot_apply_is_answered_without_asking(
    make_settings: Callable[..., Settings], store: Store, workspace: Path
) -> None:
    """A step whose only edits cannot apply (no such file, old_string not there) gets the
    tool's own errors at once: asking would only have the user approve a failure. An
    edit that applies is asked, with the diff the edit makes (CRLF file, LF old_string)."""
    settings = make_settings(AGENTGRAPH_EDITS="ask")
    (workspace / "calc.py").write_bytes(b"def add(a, b):\r\n    return a - b\r\n")
    fix = {"old_string": "b):\n    return a - b", "new_string": "b):\n    return a + b"}
    model = ScriptedChatModel(
        [
            ai_tools(
                tool_call(
                    "edit_file",
                    {"path": "src/calc.py", "old_string": "a - b", "new_string": "a + b"},
                    id="missing",
                ),
                tool_call(
                    "edit_file",
                    {"path": "calc.py", "old_string": "subtract", "new_string": "add"},
                    id="absent",
                ),
            ),
            ai_tools(tool_call("edit_file", {"path": "calc.py", **fix}, id="ok")),
            ai_text("fixed"),
        ]
    )
    agent = Agent(settings, store, model=model)
    seen: list[dict[str, Any]] = []

    def approve(question: dict[str, Any]) -> bool:
        seen.append(question)
        return True

    result = agent.run_turn("t", "fix add", workspace, approve=approve)
    assert result.answer == "fixed"
    assert [q["tool_call_id"] for q in seen] == ["ok"]
    assert "+    return a + b" in seen[0]["diff"]
    results = _tool_results(agent, "t")
    assert str(results["missing"].content).startswith("Error: no such file or directory")
    assert "old_string was not found in calc.py" in str(results["absent"].content)
    assert results["missing"].status == "error" and results["absent"].status == "error"
    assert (workspace / "calc.py").read_bytes() == b"def add(a, b):\r\n    return a + b\r\n"


def test_an_answer_never_reaches_a_call_it_was_not_given_for(
    make_settings: Callable[..., Settings], store: Store, workspace: Path
) -> None:
    """Answers reach the interrupts by position: the edit asked about stops applying
    while its question waits (the file changed), and the command after it must still be
    asked, not run on the edit's "y"."""
    settings = make_settings(AGENTGRAPH_EDITS="ask", AGENTGRAPH_BASH="ask")
    (workspace / "a.py").write_text("x = 1\n")
    model = ScriptedChatModel(
        [
            ai_tools(
                tool_call(
                    "edit_file",
                    {"path": "a.py", "old_string": "x = 1", "new_string": "x = 2"},
                    id="e1",
                ),
                tool_call("run_bash", {"command": "touch ran"}, id="b1"),
            ),
            ai_text("done"),
        ]
    )
    agent = Agent(settings, store, model=model)
    _, result = _drain(agent.stream_turn("t", "edit and run", workspace))
    (question,) = result.pending_approvals
    assert question["tool_call_id"] == "e1"
    (workspace / "a.py").write_text("x = 5\n")  # the edit no longer applies
    _, resumed = _drain(agent.stream_resume("t", workspace, {question["id"]: "y"}))
    assert not (workspace / "ran").exists()
    (bash_question,) = resumed.pending_approvals
    assert bash_question["tool_call_id"] == "b1"
    _, done = _drain(agent.stream_resume("t", workspace, {bash_question["id"]: "n"}))
    assert done.answer == "done" and not (workspace / "ran").exists()
    assert (workspace / "a.py").read_text() == "x = 5\n"


def test_a_run_that_cannot_ask_declines_with_a_reason(
    make_settings: Callable[..., Settings], store: Store, workspace: Path
) -> None:
    settings = make_settings(AGENTGRAPH_BASH="ask", AGENTGRAPH_EDITS="ask")
    model = ScriptedChatModel(
        [
            ai_tools(
                tool_call("run_bash", {"command": "touch made"}, id="b1"),
                tool_call("write_file", {"path": "f.txt", "content": "x"}, id="w1"),
            ),
            ai_text("could not"),
        ]
    )
    agent = Agent(settings, store, model=model)
    result = agent.run_turn("t", "try", workspace)  # no approve: `agentgraph run`
    assert result.answer == "could not" and result.pending_approvals == []
    results = _tool_results(agent, "t")
    assert "AGENTGRAPH_BASH=ask" in str(results["b1"].content)
    assert "AGENTGRAPH_EDITS=ask" in str(results["w1"].content)
    assert "cannot ask" in str(results["b1"].content)
    assert not (workspace / "made").exists() and not (workspace / "f.txt").exists()


def test_bash_on_and_edits_on_never_ask(settings: Settings, store: Store, workspace: Path) -> None:
    model = ScriptedChatModel(
        [
            ai_tools(
                tool_call("run_bash", {"command": "touch made"}, id="b1"),
                tool_call("write_file", {"path": "f.txt", "content": "x"}, id="w1"),
            ),
            ai_text("done"),
        ]
    )
    agent = Agent(settings, store, model=model)
    result = agent.run_turn("t", "do", workspace)
    assert result.pending_approvals == []
    assert (workspace / "made").exists() and (workspace / "f.txt").exists()


def test_only_clear_yes_answers_approve() -> None:
    for yes in (True, "y", "YES ", {"approved": True}, "approve"):
        assert is_approved(yes)
    for no in (False, None, "", "n", "no", 1, {"approved": "maybe"}, ["y"], "yes please"):
        assert not is_approved(no)


def test_a_new_message_instead_of_an_answer_drops_the_question(
    make_settings: Callable[..., Settings], store: Store, workspace: Path
) -> None:
    settings = make_settings(AGENTGRAPH_BASH="ask")
    model = ScriptedChatModel(
        [ai_tools(tool_call("run_bash", {"command": "touch x"}, id="b1")), ai_text("other")]
    )
    agent = Agent(settings, store, model=model)
    _, first = _drain(agent.stream_turn("t", "first", workspace))
    assert first.pending_approvals
    _, second = _drain(agent.stream_turn("t", "never mind", workspace))
    assert second.answer == "other" and second.pending_approvals == []
    assert agent.pending_approvals("t") == []
    assert not (workspace / "x").exists()  # the unanswered command never runs
    assert validate_history(model.calls[-1]) == []


def test_a_subagent_cannot_ask_and_declines(
    make_settings: Callable[..., Settings], store: Store, workspace: Path
) -> None:
    settings = make_settings(AGENTGRAPH_BASH="ask")
    model = ScriptedChatModel(
        [
            ai_tools(tool_call("call_subagent", {"task": "make a file"}, id="s1")),
            ai_tools(tool_call("run_bash", {"command": "touch made"}, id="b1")),  # the child
            ai_text("child could not"),
            ai_text("parent done"),
        ]
    )
    agent = Agent(settings, store, model=model)
    asked: list[dict[str, Any]] = []
    result = agent.run_turn("p", "delegate", workspace, approve=asked.append)
    assert result.answer == "parent done" and asked == []  # the user was never asked
    assert not (workspace / "made").exists()
    (child,) = store.index.children("p")
    child_results = _tool_results(agent, child.thread_id)
    assert "cannot ask" in str(child_results["b1"].content)


def test_replace_all_is_read_as_the_tool_reads_it(workspace: Path) -> None:
    """ "false" is False for the tool's schema: the edit is ambiguous, not a replace-all."""
    from agentgraph.security.approvals import edit_preview, unappliable_edit

    (workspace / "b.py").write_text("v = 1\nv = 1\n")
    args = {"path": "b.py", "old_string": "v = 1", "new_string": "v = 2", "replace_all": "false"}
    call = {"name": "edit_file", "args": args, "id": "e1", "type": "tool_call"}
    assert edit_preview("edit_file", args, str(workspace)) is None
    assert "occurs 2 times" in str(unappliable_edit(call, str(workspace)))  # type: ignore[arg-type]
    args["replace_all"] = "true"
    assert "+v = 2" in str(edit_preview("edit_file", args, str(workspace)))
