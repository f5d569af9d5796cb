"""/model: switch a session's model; the choice is kept in the session (model_pref)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from agentgraph.config import Settings
from agentgraph.errors import ConfigError
from agentgraph.frontends.cli.repl import load_slash_commands
from agentgraph.frontends.cli.slash import dispatch
from agentgraph.persistence import open_store
from agentgraph.session.agent import Agent
from tests.fakes.openai_server import fake_openai_server
from tests.fakes.scripts import reply_text
from tests.slash_helpers import slash_context

KEY = "sk-test-secret-0123456789abcdef"


def test_model_switch_is_used_recorded_and_refused_for_unknown_names(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    load_slash_commands()
    script = [reply_text("from the first"), reply_text("from the second")]
    with fake_openai_server(script, known_models={"gpt-4o-mini", "gpt-4.1"}) as server:
        settings = make_settings(OPENAI_BASE_URL=server.url, AGENTGRAPH_MODEL="gpt-4o-mini")
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            agent.run_turn("t1", "hello", workspace)
            ctx, out = slash_context(agent, "t1", workspace)
            with pytest.raises(ConfigError, match="unknown model 'gpt-9'"):
                dispatch(ctx, "/model gpt-9")
            assert ctx.agent is agent  # a refused switch changes nothing
            dispatch(ctx, "/model gpt-4.1")
            assert ctx.agent is not agent and ctx.agent.settings.model == "gpt-4.1"
            assert "model: gpt-4.1 — window" in out.getvalue()
            ctx.agent.run_turn("t1", "again", workspace)
            assert ctx.agent.model_preference("t1") == "gpt-4.1"
            # A new process (a fresh Agent) finds the session's choice.
            assert Agent(settings, store).model_preference("t1") == "gpt-4.1"
    assert [r["model"] for r in server.requests if "messages" in (r or {})] == [
        "gpt-4o-mini",
        "gpt-4.1",
    ]


def test_switch_to_a_smaller_window_compacts_first(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    load_slash_commands()
    big = "lorem ipsum dolor sit amet " * 900  # ~5k tokens: over gpt-4's 8k budget share
    script = [reply_text(big), reply_text("summary of the session"), reply_text("ok")]
    with fake_openai_server(script, known_models={"gpt-4.1", "gpt-4"}) as server:
        settings = make_settings(OPENAI_BASE_URL=server.url, AGENTGRAPH_MODEL="gpt-4.1")
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            agent.run_turn("t1", "write a lot", workspace)
            agent.run_turn("t1", "more " * 10, workspace)
            ctx, out = slash_context(agent, "t1", workspace)
            before = ctx.agent.context_report("t1")["tokens"]
            dispatch(ctx, "/model gpt-4")
            after = ctx.agent.context_report("t1")
            assert "compacted for the smaller window" in out.getvalue()
            assert after["tokens"] < before
            assert after["tokens"] < ctx.agent.deps.budget.compact_at


def test_the_repl_follows_each_sessions_own_model_after_a_switch(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    from agentgraph.frontends.cli.slash_integrations import follow_session_model

    load_slash_commands()
    with fake_openai_server([], known_models={"gpt-4o-mini", "gpt-4.1"}) as server:
        settings = make_settings(OPENAI_BASE_URL=server.url, AGENTGRAPH_MODEL="gpt-4o-mini")
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            agent.set_model_preference("chose", "gpt-4.1")
            ctx, _ = slash_context(agent, "chose", workspace)
            follow_session_model(ctx, settings.model)
            assert ctx.agent.settings.model == "gpt-4.1"
            ctx.thread_id = "other"  # what /switch does
            follow_session_model(ctx, settings.model)
            assert ctx.agent.settings.model == "gpt-4o-mini"


def test_switching_to_a_model_with_a_learned_window_says_where_it_came_from(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """An earlier process learned qwen's window at this endpoint: /model to it shows the
    learned window and where it came from, not the table's 32,768."""
    from agentgraph.providers.learned_windows import remember_learned_window

    load_slash_commands()
    with fake_openai_server(
        [reply_text("hi")], known_models={"gpt-4o-mini", "qwen2.5-coder"}
    ) as server:
        settings = make_settings(OPENAI_BASE_URL=server.url, AGENTGRAPH_MODEL="gpt-4o-mini")
        remember_learned_window(settings, "qwen2.5-coder", 4_096)
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            ctx, out = slash_context(agent, "t1", workspace)
            dispatch(ctx, "/model qwen2.5-coder")
    shown = out.getvalue()
    assert "model: qwen2.5-coder — window 4,096 tokens" in shown, shown
    assert "learned from its error on" in shown


def test_a_local_provider_prefix_wins_over_openai_base_url(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """``/model ollama:…`` (the example its own hint gives) means that Ollama, not the
    endpoint at OPENAI_BASE_URL, whose model list would refuse the name; the OpenAI key
    does not go there."""
    from langchain_openai import ChatOpenAI

    load_slash_commands()
    with fake_openai_server([], known_models={"gpt-4o-mini"}) as server:
        settings = make_settings(
            OPENAI_BASE_URL=server.url,
            OPENAI_API_KEY=KEY,
            AGENTGRAPH_MODEL="gpt-4o-mini",
        )
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            ctx, out = slash_context(agent, "t1", workspace)
            dispatch(ctx, "/model ollama:qwen2.5-coder:7b")
            dispatch(ctx, "/model")
            model = ctx.agent.deps.model
    assert ctx.agent.settings.model == "ollama:qwen2.5-coder:7b"
    shown = out.getvalue()
    assert "model: ollama:qwen2.5-coder:7b at http://127.0.0.1:11434/v1 — window" in shown, shown
    assert isinstance(model, ChatOpenAI)
    assert model.model_name == "qwen2.5-coder:7b"
    assert model.openai_api_base == "http://127.0.0.1:11434/v1"
    assert model.openai_api_key is not None
    assert model.openai_api_key.get_secret_value() != KEY
