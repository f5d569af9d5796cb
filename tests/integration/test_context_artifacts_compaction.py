"""Artifacts paged through the graph; compaction edge cases (mid-turn, failed summaries)."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.graph.message import add_messages

from agentgraph.config import Settings
from agentgraph.context.compaction import Compactor, since_last_boundary
from agentgraph.context.tokens import get_counter
from agentgraph.context.windows import SMALL_WINDOW_REPLY_CAP_FRACTION, budget_for
from agentgraph.persistence import open_store
from agentgraph.persistence.index import SessionInfo
from agentgraph.runtime.history import agentgraph_kind, build_prompt_view, validate_history
from agentgraph.session.agent import Agent
from tests.cli_helpers import cli_env, run_cli
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.openai_server import FakeOpenAIServer
from tests.fakes.scripts import ai_text, ai_tools
from tests.scenarios.long_task import LongTaskDriver, make_workspace


def _db_text(home: Path) -> bytes:
    """Every checkpoint and pending write of the session database, as bytes."""
    con = sqlite3.connect(home / "sessions.db")
    try:
        rows = list(con.execute("SELECT checkpoint FROM checkpoints"))
        rows += list(con.execute("SELECT value FROM writes"))
    finally:
        con.close()
    return b"".join(
        bytes(value) if isinstance(value, bytes | memoryview) else str(value).encode()
        for (value,) in rows
        if value is not None
    )


def test_truncated_output_is_paged_from_its_artifact_through_the_graph(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    (workspace / "big.txt").write_text("".join(f"row {n}: some data\n" for n in range(1800)))
    settings = make_settings(AGENTGRAPH_TOOL_OUTPUT_MAX_TOKENS="1000")
    seen: dict[str, str] = {}

    def page(messages: Sequence[BaseMessage]) -> AIMessage:
        cut = str(messages[-1].content)
        found = re.search(r"full output: (\S+) — page through it with read_file", cut)
        assert found is not None, cut[-300:]
        seen["path"] = found.group(1)
        return ai_tools(("read_file", {"path": found.group(1), "offset": 150, "limit": 2}))

    def answer(messages: Sequence[BaseMessage]) -> AIMessage:
        seen["page"] = str(messages[-1].content)
        return ai_text("paged")

    # grep's 200 matching lines (~2k tokens) are cut to 1,000 tokens, the whole saved.
    model = ScriptedChatModel([ai_tools(("grep", {"pattern": "some data"})), page, answer])
    with open_store(settings) as store:
        agent = Agent(settings, store, model=model, sleep=lambda _s: None)
        result = agent.run_turn("art", "grep big.txt", workspace)
        history = agent.messages("art")
    assert result.answer == "paged"
    artifact = Path(seen["path"])
    assert artifact.is_relative_to(settings.home / "artifacts" / "art")
    # The model paged the middle with offset/limit, not an error.
    assert "row 150: some data" in seen["page"] and "row 151: some data" in seen["page"]
    assert "row 152:" not in seen["page"]
    first_result = next(m for m in history if isinstance(m, ToolMessage))
    assert "tokens truncated" in str(first_result.content)
    assert get_counter(settings.model).count_text(str(first_result.content)) <= 1000
    cut = [n for n in range(200) if f"row {n}: " not in str(first_result.content)]
    assert cut and all(f"row {n}: " in artifact.read_text() for n in cut)
    # State and database hold only the truncated copy.
    assert f"row {cut[0]}: ".encode() not in _db_text(settings.home)
    assert b"row 0: some data" in _db_text(settings.home)


def _read_then_read_on(settings: Settings, workspace: Path, path: str, thread: str) -> list[str]:
    """The results a real turn gets for a read_file of ``path`` and for the read from
    the offset the first result's note names."""
    results: list[str] = []

    def read_on(messages: Sequence[BaseMessage]) -> AIMessage:
        results.append(str(messages[-1].content))
        found = re.search(r"call read_file with offset=(\d+) to continue\]$", results[-1])
        assert found is not None, results[-1][-300:]
        return ai_tools(("read_file", {"path": path, "offset": int(found.group(1))}))

    def answer(messages: Sequence[BaseMessage]) -> AIMessage:
        results.append(str(messages[-1].content))
        return ai_text("read on")

    model = ScriptedChatModel([ai_tools(("read_file", {"path": path})), read_on, answer])
    with open_store(settings) as store:
        agent = Agent(settings, store, model=model, sleep=lambda _s: None)
        assert agent.run_turn(thread, f"read {path}", workspace).answer == "read on"
    return results


def test_a_file_read_over_the_cap_is_a_page_that_names_the_next_offset(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """Lines 1..N that fit, not a head and a tail: the model reads on from N."""
    (workspace / "big.txt").write_text("".join(f"row {n}: some data\n" for n in range(1800)))
    settings = make_settings(AGENTGRAPH_TOOL_OUTPUT_MAX_TOKENS="1000")
    pages = _read_then_read_on(settings, workspace, "big.txt", "page")
    counter = get_counter(settings.model)
    numbered = [[line for line in p.split("\n") if "\t" in line] for p in pages]
    first, second = numbered
    assert first[0] == "1\trow 0: some data"
    kept = len(first)
    assert first == [f"{n + 1}\trow {n}: some data" for n in range(kept)]
    assert pages[0].endswith(
        f"[showing lines 1-{kept} of 1800; call read_file with offset={kept} to continue]"
    )
    assert counter.count_text(pages[0]) <= 1000
    # The most lines that fit: one more would not.
    longer = "\n".join([*first, f"{kept + 1}\trow {kept}: some data"]) + (
        f"\n[showing lines 1-{kept + 1} of 1800; call read_file with offset={kept + 1} to continue]"
    )
    assert counter.count_text(longer) > 1000
    assert second[0] == f"{kept + 1}\trow {kept}: some data"
    assert "tokens truncated" not in pages[0] + pages[1]
    assert not (settings.home / "artifacts" / "page").exists()  # the file is its own copy


@pytest.mark.parametrize("terminated", [True, False], ids=["key-block", "unterminated-begin"])
def test_a_redacted_file_read_is_still_a_page_with_the_files_own_total(
    make_settings: Callable[..., Settings], workspace: Path, terminated: bool
) -> None:
    """Redaction may join lines (a key block) or drop the read's end (a BEGIN line with
    no END): the page follows the lines' own numbers and states the file's real total."""
    lines = [f"config line {n} with some words in it" for n in range(300)]
    lines[100] = "-----BEGIN RSA PRIVATE KEY-----"
    if terminated:
        lines[101:126] = ["MIIEpAIBAAKCAQEA" + "x" * 48] * 25
        lines[126] = "-----END RSA PRIVATE KEY-----"
    (workspace / "k.txt").write_text("\n".join(lines) + "\n")
    settings = make_settings(AGENTGRAPH_TOOL_OUTPUT_MAX_TOKENS="1500")
    seen: list[str] = []

    def answer(messages: Sequence[BaseMessage]) -> AIMessage:
        seen.append(str(messages[-1].content))
        return ai_text("done")

    model = ScriptedChatModel([ai_tools(("read_file", {"path": "k.txt"})), answer])
    with open_store(settings) as store:
        agent = Agent(settings, store, model=model, sleep=lambda _s: None)
        agent.run_turn("redacted", "read k.txt", workspace)
    (page,) = seen
    assert "MIIEpAIBAAKCAQEA" not in page and "tokens truncated" not in page
    numbered = [line for line in page.split("\n") if re.match(r"\d+\t", line)]
    numbers = [int(line.split("\t", 1)[0]) for line in numbered]
    assert numbers[0] == 1 and numbers == sorted(set(numbers))
    if terminated:  # lines 101-127 are one redacted line; the page goes on after them
        assert 101 in numbers and 102 not in numbers and 128 in numbers
        last = numbers[-1]
        assert page.endswith(
            f"[showing lines 1-{last} of 300; call read_file with offset={last} to continue]"
        )
    else:  # redaction dropped the read's end: the page covers it, nothing to read on
        assert numbers[-1] == 101
        assert page.endswith("[showing lines 1-300 of 300; end of file]")
    assert get_counter(settings.model).count_text(page) <= 1500


def test_a_page_that_ends_on_a_redacted_key_never_points_into_it(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """A page ending on the line a key block was joined into names the offset after
    the block: reading on from it must not show the key's body without its BEGIN."""
    lines = [f"config line {n} with some words in it" for n in range(300)]
    lines[100] = "-----BEGIN RSA PRIVATE KEY-----"
    lines[101:126] = [f"MIIEpAIBAAKCAQEA{n:02d}" + "x" * 46 for n in range(25)]
    lines[126] = "-----END RSA PRIVATE KEY-----"
    (workspace / "k.txt").write_text("\n".join(lines) + "\n")
    counter = get_counter(make_settings().model)
    head = "".join(f"{n + 1}\tconfig line {n} with some words in it\n" for n in range(100))
    # The smallest cap whose page ends on the joined line (101), whatever it covers.
    cap = counter.count_text(
        head + "101\t[REDACTED]\n[showing lines 1-127 of 300; "
        "call read_file with offset=127 to continue]"
    )
    settings = make_settings(AGENTGRAPH_TOOL_OUTPUT_MAX_TOKENS=str(cap))
    first, second = _read_then_read_on(settings, workspace, "k.txt", "key")
    assert first.split("\n")[-2] == "101\t[REDACTED]"
    assert "MIIEpAIBAAKCAQEA" not in first + second
    assert second.startswith("128\tconfig line 127 with some words in it")


def test_compaction_mid_turn_does_not_replay_kept_messages_as_new(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    paths = make_workspace(workspace, files=8)
    driver = LongTaskDriver(paths)
    with FakeOpenAIServer([driver], window=16_000, on_exhausted="repeat_last") as server:
        settings = make_settings(
            OPENAI_BASE_URL=server.url,
            OPENAI_API_KEY="sk-test",
            AGENTGRAPH_CONTEXT_WINDOW="16000",
            AGENTGRAPH_PROVIDER_MAX_RETRIES="0",
            # Masking off: eight reads must reach the compaction threshold mid-turn.
            AGENTGRAPH_MASK_THRESHOLD="1.0",
        )
        events: list[dict] = []
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            result = agent.run_turn("mid", "read every log", workspace, events.append)
    assert server.violations == []
    assert any(e["type"] == "compaction" for e in events)
    calls = [e["id"] for e in events if e["type"] == "tool_call"]
    results = [e["id"] for e in events if e["type"] == "tool_result"]
    # Kept messages moved after the boundary are not new tool calls or results.
    assert len(calls) == len(set(calls)) == len(paths) + 1
    assert len(results) == len(set(results)) == len(paths) + 1
    assert result.tool_calls == len(paths) + 1


def _rows(n_rows: int, tag: str) -> str:
    return "".join(f"{tag} entry {n}: value {n * 7} status ok\n" for n in range(n_rows))


def test_a_tight_budget_keeps_less_without_a_second_summary_call(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW="16000")
    counter = get_counter(settings.model)
    budget = budget_for(settings)
    history: list[BaseMessage] = [HumanMessage("audit all; code word TULIP", id="u0")]
    for i in range(10):
        history.append(
            AIMessage(
                content="",
                id=f"a{i}",
                tool_calls=[{"name": "read_file", "args": {"path": f"f{i}"}, "id": f"c{i}"}],
            )
        )
        history.append(
            ToolMessage(_rows(60, f"f{i}"), tool_call_id=f"c{i}", name="read_file", id=f"t{i}")
        )
    # A large fixed part leaves little room under half the budget: the compaction keeps
    # less instead of asking the summarizer again (which would fail here).
    system = [SystemMessage(_rows(400, "sys"))]
    # It names every file read: nothing is asked about files it left out.
    named = ", ".join(f"f{i}" for i in range(10))
    summarizer = ScriptedChatModel(
        [f"first summary: code word TULIP; read {named}", RuntimeError("down")]
    )
    outcome = Compactor(summarizer, counter, budget, sleep=lambda _s: None)(
        history, trigger="auto", system=system, tools=[]
    )
    assert outcome is not None
    assert summarizer.call_count == 1
    assert outcome.record["fallback"] is False
    view = since_last_boundary(list(add_messages(history, outcome.updates)))  # type: ignore[arg-type]
    assert agentgraph_kind(view[0]) == "summary" and "TULIP" in str(view[0].content)
    assert "Compaction failed" not in str(view[0].content)
    assert validate_history(build_prompt_view(view, counter=counter).messages) == []
    assert outcome.tokens_after < outcome.tokens_before


def test_manual_compact_with_a_failing_summary_leaves_the_session_unchanged(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    settings = make_settings(AGENTGRAPH_CONTEXT_WINDOW="16000")
    summarizer = ScriptedChatModel([RuntimeError("summarizer down")], on_exhausted="repeat_last")
    history: list[BaseMessage] = [HumanMessage("read things", id="u0")]
    for i in range(4):
        call = {"name": "read_file", "args": {"path": f"f{i}"}, "id": f"c{i}"}
        history.append(AIMessage(content="", id=f"a{i}", tool_calls=[call]))
        history.append(
            ToolMessage(_rows(20, f"f{i}"), tool_call_id=f"c{i}", name="read_file", id=f"t{i}")
        )
    history.append(AIMessage(content="done reading", id="a-last"))
    with open_store(settings) as store:
        agent = Agent(
            settings,
            store,
            model=ScriptedChatModel([ai_text("ok")]),
            summarizer=summarizer,
            sleep=lambda _s: None,
        )
        agent.graph.update_state(
            agent.config("mf"),
            {"messages": history, "workspace_path": str(workspace)},
            as_node="finalize",
        )
        store.index.upsert(SessionInfo(thread_id="mf"))
        before = [(m.id, m.content) for m in agent.messages("mf")]
        record = agent.compact("mf")
        after = [(m.id, m.content) for m in agent.messages("mf")]
        report = agent.context_report("mf")
        info = store.index.get("mf")
    assert record is not None and record["fallback"] is True
    assert record["applied"] is False and "summarizer down" in record["reason"]
    assert after == before
    assert report["compactions"] == []
    assert info is not None and info.compactions == 0


def test_sessions_compact_failure_exits_1_and_keeps_the_session(
    tmp_path: Path, workspace: Path
) -> None:
    script = [
        {"content": "first answer"},
        {"content": "second answer"},
        {"error": {"status": 500, "body": {"error": {"message": "summarizer exploded"}}}},
        {"error": {"status": 500, "body": {"error": {"message": "still exploding"}}}},
    ]
    with FakeOpenAIServer(script) as server:
        env = cli_env(
            tmp_path / "home",
            OPENAI_BASE_URL=server.url,
            AGENTGRAPH_MODEL="gpt-4o-mini",
            AGENTGRAPH_PROVIDER_MAX_RETRIES="0",
        )
        for prompt in ("hello", "again"):
            assert (
                run_cli(["run", prompt, "--thread", "cf"], cwd=workspace, env=env).returncode == 0
            )
        compacted = run_cli(["sessions", "compact", "cf"], cwd=workspace, env=env)
        repl = run_cli(["--resume", "cf"], cwd=workspace, env=env, stdin="/compact\n/exit\n")
        shown = json.loads(
            run_cli(["sessions", "show", "cf", "--json"], cwd=workspace, env=env).stdout
        )
    assert compacted.returncode == 1
    assert "summarizer exploded" in compacted.stderr and "unchanged" in compacted.stderr
    assert "Compacted:" not in compacted.stderr
    repl_text = repl.stdout + repl.stderr
    assert "still exploding" in repl_text and "unchanged" in repl_text
    assert "Compacted:" not in repl_text
    assert shown["compactions"] == 0 and shown["context"]["compactions"] == []


def test_summarizer_budget_follows_the_summary_model(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings(
        AGENTGRAPH_MODEL="gpt-4.1", AGENTGRAPH_SUMMARY_MODEL="gpt-4o-mini", OPENAI_API_KEY="sk-x"
    )
    with open_store(settings) as store:
        agent = Agent(settings, store)
        compactor = agent.deps.compactor
    assert isinstance(compactor, Compactor)
    assert budget_for(settings).window == 1_047_576
    # Pieces sent to the 128k summarizer must be sized for it, not for the 1M main model.
    own = compactor.summarizer_budget
    assert own is not None
    # Its profile's reply limit (16,384) caps its reserve, as for a main model.
    assert (own.window, own.usable) == (128_000, 111_616)


# Four UTF-8 bytes each and about three o200k tokens: fewer characters than the cap,
# several times more tokens.
WIDE_TEXT = "𝔘𝔫𝔦𝔠𝔬𝔡𝔢" * 120


def test_an_output_with_fewer_characters_than_the_cap_is_still_held_to_it(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    (workspace / "wide.txt").write_text(WIDE_TEXT, encoding="utf-8")
    settings = make_settings(AGENTGRAPH_TOOL_OUTPUT_MAX_TOKENS="1000")
    count = get_counter(settings.model).count_text
    assert len(WIDE_TEXT) < 1000 < count(WIDE_TEXT)
    model = ScriptedChatModel([ai_tools(("read_file", {"path": "wide.txt"})), ai_text("read")])
    with open_store(settings) as store:
        agent = Agent(settings, store, model=model, sleep=lambda _s: None)
        agent.run_turn("wide", "read wide.txt", workspace)
        agent.run_turn("wide", f"and this one: {WIDE_TEXT}", workspace)
        history = agent.messages("wide")
    result = next(m for m in history if isinstance(m, ToolMessage))
    assert "tokens truncated" in str(result.content)
    assert count(str(result.content)) <= 1000
    pasted = [m for m in history if isinstance(m, HumanMessage)][-1]
    assert "tokens truncated" in str(pasted.content)
    assert count(str(pasted.content)) <= 1000


def test_a_summary_model_of_its_own_gets_a_reply_cap_for_its_window(
    make_settings: Callable[..., Settings], tmp_path: Path
) -> None:
    """A large local model with a small local one as its summary model (one endpoint
    serving both, as llama-swap does): the main model's 256k window sends no reply cap,
    but a server for the 32k summary model would generate until its context is full
    without one, so the summary request carries the cap of its own small window."""
    script = [{"content": "Noted."}, {"content": "Noted."}, {"content": "Summary: notes."}]
    notes = " ".join(f"note{i} says the build passed" for i in range(800))
    with FakeOpenAIServer(script, on_exhausted="raise") as server:
        settings = make_settings(
            OPENAI_BASE_URL=server.url,
            OPENAI_API_KEY="sk-test",
            AGENTGRAPH_MODEL="qwen3-coder-30b",
            AGENTGRAPH_SUMMARY_MODEL="qwen2.5-coder-1.5b",
            AGENTGRAPH_PROVIDER_MAX_RETRIES="0",
        )
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            agent.run_turn("own", f"Remember these notes: {notes}", tmp_path)
            agent.run_turn("own", "And this one.", tmp_path)
            assert agent.compact("own") is not None
        requests = [r for r in server.requests if isinstance(r, dict)]
    turns = [r for r in requests if r["model"] == "qwen3-coder-30b"]
    summaries = [r for r in requests if r["model"] == "qwen2.5-coder-1.5b"]
    assert len(turns) == 2 and summaries
    asked = [r.get("max_completion_tokens", r.get("max_tokens")) for r in requests]
    assert asked[: len(turns)] == [None] * len(turns)
    cap = int(32_768 * SMALL_WINDOW_REPLY_CAP_FRACTION)
    assert asked[len(turns) :] == [cap] * len(summaries)
