"""Long-term memory: saved by the model, listed in later sessions' prompts, scoped."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.memory import InMemoryStore

import agentgraph.frontends.cli.slash_recall  # noqa: F401  (registers /memory)
from agentgraph.capabilities.recall.memory import (
    MEMORY_MAX_CHARS,
    MemoryRefused,
    delete_memory,
    namespace,
    save_memory,
    search_memories,
)
from agentgraph.config import Settings
from agentgraph.frontends.cli.slash import dispatch
from agentgraph.persistence import open_store
from agentgraph.security.redaction import Redactor
from agentgraph.session.agent import Agent
from tests.cli_helpers import run_cli, server_env
from tests.fakes.openai_server import FakeOpenAIServer
from tests.memory_helpers import save_reply, system_text, tool_results
from tests.slash_helpers import slash_context

KEY = "sk-test-secret-0123456789abcdef"
FACT = "The team deploys with make ship-it"
LEAKED = "sk-proj-ABCDEFGHIJKLMNOPQRSTUV123456"


def test_memories_survive_a_new_session_and_stay_cache_stable(
    make_backend_settings: Callable[..., Settings], workspace: Path, tmp_path: Path
) -> None:
    other_ws = tmp_path / "other-ws"
    other_ws.mkdir()
    script: list[Any] = [
        save_reply(f"{FACT}; the deploy key {LEAKED} is in the vault"),
        {"content": "Saved."},
        {"content": "Hello again."},  # s2, turn 1
        save_reply("Tests run with pytest -q"),  # s2, turn 2 saves another memory
        {"content": "Saved too."},
        {"content": "Third."},  # s2, turn 3
        {"content": "bob"},  # s-bob
        {"content": "elsewhere"},  # other workspace
        {"content": "s3"},  # s3 sees both memories
    ]
    with FakeOpenAIServer(script, on_exhausted="raise") as server:
        settings = make_backend_settings(OPENAI_BASE_URL=server.url, OPENAI_API_KEY="sk-test")
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            agent.run_turn("s1", "remember how we deploy", workspace)
            saved = agent.memories(workspace)
        with open_store(settings) as store:  # a new session on a reopened store
            agent = Agent(settings, store, sleep=lambda _s: None)
            agent.run_turn("s2", "hi", workspace)
            agent.run_turn("s2", "remember the test command", workspace)
            agent.run_turn("s2", "and now?", workspace)
            bob = make_backend_settings(
                OPENAI_BASE_URL=server.url, OPENAI_API_KEY="sk-test", AGENTGRAPH_USER_ID="bob"
            )
            Agent(bob, store, sleep=lambda _s: None).run_turn("s-bob", "hi", workspace)
            agent.run_turn("s-other", "hi", other_ws)
            agent.run_turn("s3", "hi", workspace)
        requests = server.requests
    assert server.violations == []
    assert len(saved) == 1 and FACT in saved[0].content
    assert LEAKED not in saved[0].content and "[REDACTED]" in saved[0].content
    s2_first, s2_save, s2_after_save, s2_third = requests[2], requests[3], requests[4], requests[5]
    assert FACT in system_text(s2_first) and f"[{saved[0].id}]" in system_text(s2_first)
    assert LEAKED not in json.dumps(requests[2:])  # later sessions never see it
    # Loaded once per session: the prompt of s2 does not change when s2 saves a memory.
    assert (
        system_text(s2_first)
        == system_text(s2_save)
        == system_text(s2_after_save)
        == system_text(s2_third)
    )
    assert "pytest -q" not in system_text(s2_third)
    assert FACT not in system_text(requests[6])  # another user, same workspace
    assert FACT not in system_text(requests[7])  # same user, another workspace
    assert FACT in system_text(requests[8]) and "pytest -q" in system_text(requests[8])


def test_memory_tools_refuse_oversized_and_unknown_ids_through_the_graph(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    script: list[Any] = [
        save_reply("x" * (MEMORY_MAX_CHARS + 1)),
        {"tool_calls": [{"name": "memory_delete", "arguments": {"id": "nope"}}]},
        {"tool_calls": [{"name": "memory_search", "arguments": {"query": ""}}]},
        {"content": "ok"},
    ]
    with FakeOpenAIServer(script, on_exhausted="raise") as server:
        settings = make_settings(OPENAI_BASE_URL=server.url, OPENAI_API_KEY="sk-test")
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            agent.run_turn("m", "try", workspace)
            assert agent.memories(workspace) == []
        results = tool_results(server.requests[-1])
    assert server.violations == []
    oversized, unknown, empty = results
    assert oversized.startswith("Error:") and "MEMORY_MAX_CHARS" in oversized
    assert str(MEMORY_MAX_CHARS) in oversized
    assert unknown.startswith("Error:") and "no memory 'nope'" in unknown
    assert empty.startswith("Error:") and "empty" in empty


def test_memory_functions_redact_dedupe_search_and_delete() -> None:
    store = InMemoryStore()
    ns = namespace("ann.lee", "/work/proj.v2")
    assert all("." not in label for label in ns)
    secret = "hunter2-production-pw"
    redactor = Redactor(exact_values=[secret])
    text = f"db password is {secret}; ghp_{'a' * 36}"
    memory, new = save_memory(store, ns, text, redactor=redactor)
    assert new and secret not in memory.content and "ghp_" not in memory.content
    again, new_again = save_memory(store, ns, text, redactor=redactor)
    assert not new_again and again.id == memory.id
    save_memory(store, ns, "数据库连接池上限 64")
    assert [m.content for m in search_memories(store, ns, "连接池")] == ["数据库连接池上限 64"]
    assert search_memories(store, ns, '"NEAR" AND (') == []
    with pytest.raises(MemoryRefused, match="limit"):
        search_memories(store, ns, "x", 0)
    delete_memory(store, ns, memory.id)
    with pytest.raises(MemoryRefused, match="no memory"):
        delete_memory(store, ns, memory.id)


def test_slash_memory_lists_and_forgets(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    settings = make_settings()
    with open_store(settings) as store:
        agent = Agent(settings, store, sleep=lambda _s: None)
        assert store.memory is not None
        ns = namespace(settings.user_id, str(workspace.resolve()))
        memory, _ = save_memory(store.memory, ns, "Use tabs in Makefiles")
        ctx, out = slash_context(agent, "x", workspace)
        dispatch(ctx, "/memory")
        dispatch(ctx, "/memory forget nope")
        dispatch(ctx, f"/memory forget {memory.id}")
        dispatch(ctx, "/memory")
        dispatch(ctx, "/memory forget")
    text = out.getvalue()
    assert f"[{memory.id}]" in text and "Use tabs in Makefiles" in text
    assert "memory: no memory 'nope'" in text
    assert f"forgot [{memory.id}] Use tabs in Makefiles" in text
    assert "no memories for this workspace yet" in text
    assert "usage: /memory forget ID" in text


def test_memories_survive_a_new_process_scoped_by_user(home: Path, workspace: Path) -> None:
    script: list[Any] = [
        save_reply(FACT),
        {"content": "Saved."},
        {"content": "I know how you deploy."},
        {"content": "Who are you?"},
    ]
    with FakeOpenAIServer(script, require_key=KEY) as server:
        env = server_env(home, server.url, KEY)
        first = run_cli(["run", "remember how we deploy", "--json"], cwd=workspace, env=env)
        assert first.returncode == 0, first.stderr
        second = run_cli(["run", "how do we deploy?", "--json"], cwd=workspace, env=env)
        assert second.returncode == 0, second.stderr
        other = server_env(home, server.url, KEY, AGENTGRAPH_USER_ID="someone-else")
        third = run_cli(["run", "how do we deploy?", "--json"], cwd=workspace, env=other)
        assert third.returncode == 0, third.stderr
        requests = server.requests
    assert json.loads(first.stdout)["thread_id"] != json.loads(second.stdout)["thread_id"]
    assert FACT not in system_text(requests[0])
    assert FACT in system_text(requests[2])  # a new process, a new session
    assert FACT not in system_text(requests[3])  # another user
    assert (home / ".agentgraph" / "memory.db").exists()


def test_served_graph_uses_the_platform_store(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    from agentgraph.session.server_support import build_server_graph

    platform_store = InMemoryStore()
    script: list[Any] = [save_reply("Release notes go in CHANGES.md"), {"content": "Saved."}]
    with FakeOpenAIServer(script, on_exhausted="raise") as server:
        settings = make_settings(OPENAI_BASE_URL=server.url, OPENAI_API_KEY="sk-test")
        ns = namespace(settings.user_id, str(workspace.resolve()))
        save_memory(platform_store, ns, FACT)
        graph = build_server_graph(settings, workspace=workspace)
        # What LangGraph server does: its own checkpointer and store on the served graph.
        graph = graph.copy(update={"checkpointer": InMemorySaver(), "store": platform_store})
        config = {"configurable": {"thread_id": "srv"}}
        graph.invoke({"messages": [{"role": "user", "content": "remember this"}]}, config)
        requests = server.requests
    assert server.violations == []
    assert FACT in system_text(requests[0]) and system_text(requests[0]) == system_text(requests[1])
    saved = [m.content for m in search_memories(platform_store, ns, "CHANGES.md")]
    assert saved == ["Release notes go in CHANGES.md"]


def test_a_new_memory_store_opened_by_many_at_once(make_settings: Callable[..., Settings]) -> None:
    import threading

    settings = make_settings()
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def opener() -> None:
        try:
            barrier.wait()
            with open_store(settings) as store:
                assert store.memory is not None
                save_memory(store.memory, namespace("u", "/w"), f"fact {threading.get_ident()}")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=opener) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with open_store(settings) as store:
        assert store.memory is not None
        assert len(search_memories(store.memory, namespace("u", "/w"), "fact", 20)) == 4


def test_slash_memory_forget_takes_a_unique_id_prefix(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    settings = make_settings()
    with open_store(settings) as store:
        agent = Agent(settings, store, sleep=lambda _s: None)
        assert store.memory is not None
        ns = namespace(settings.user_id, str(workspace.resolve()))
        # Fixed ids: two share the prefix "ab", one alone starts with "c".
        for key, text in (
            ("ab12", "Tabs in Makefiles"),
            ("ab34", "Ship on Fridays"),
            ("c567", "Use uv"),
        ):
            store.memory.put(ns, key, {"content": text, "created_at": 1.0})
        ctx, out = slash_context(agent, "x", workspace)
        dispatch(ctx, "/memory forget ab")
        dispatch(ctx, "/memory forget c")
        dispatch(ctx, "/memory forget ab3")
        left = [m.id for m in agent.memories(workspace)]
    text = out.getvalue()
    assert "memory: 'ab' matches 2 memories: ab12, ab34; use a longer prefix" in text
    assert "forgot [c567] Use uv" in text
    assert "forgot [ab34] Ship on Fridays" in text
    assert left == ["ab12"]
