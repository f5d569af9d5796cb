"""A small window gets the core tools: every request carries fewer schemas, and says so.

The real CLI against the stateless fake server on loopback. At a window of at most
12,288 tokens (set, or stated by a local server whose model name implies more) the
requests carry only the core tools' schemas, the system prompt names no tool they lack,
and one notice line says how to get the rest. ``AGENTGRAPH_TOOL_SET`` overrides the
choice either way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentgraph.capabilities.tools.spec import BUILTIN_TOOLS
from tests.cli_helpers import run_cli, server_env
from tests.fakes.openai_server import FakeOpenAIServer

KEY = "sk-test-secret-toolset-0123456789abcdef"
# No offline tokenizer, and a name agentgraph's table maps to 32,768 tokens.
MODEL = "qwen2.5-coder-1.5b"
# present_plan is core but sent only once a session enters plan mode.
CORE = {name for name, spec in BUILTIN_TOOLS.items() if spec.core} - {"present_plan"}
LEFT_OUT = {"todo_write", "todo_read", "now", "memory_save", "load_skill", "call_subagent"}
NOTICE = "the core tools only (files, search, shell, history"
SMALL_WINDOW_TOKENS = 8_192
LARGE_WINDOW_TOKENS = 32_768


def _first_request(server: FakeOpenAIServer) -> tuple[set[str], str]:
    """The tool names and the system prompt of the first chat request."""
    request: dict[str, Any] = next(r for r in server.requests if isinstance(r, dict))
    names = {t["function"]["name"] for t in request["tools"]}
    return names, request["messages"][0]["content"]


@pytest.mark.parametrize(
    ("window", "setting", "core"),
    [
        (SMALL_WINDOW_TOKENS, None, True),
        (SMALL_WINDOW_TOKENS, "full", False),
        (LARGE_WINDOW_TOKENS, None, False),
        (LARGE_WINDOW_TOKENS, "core", True),
    ],
    ids=["small-auto", "small-full", "large-auto", "large-core"],
)
def test_requests_carry_the_tools_the_window_has_room_for(
    home: Path, workspace: Path, window: int, setting: str | None, core: bool
) -> None:
    extra = {"AGENTGRAPH_TOOL_SET": setting} if setting else {}
    with FakeOpenAIServer([{"content": "hello"}]) as server:
        env = server_env(
            home,
            server.url,
            KEY,
            AGENTGRAPH_MODEL=MODEL,
            AGENTGRAPH_CONTEXT_WINDOW=str(window),
            **extra,
        )
        result = run_cli(["run", "--json", "say hello"], cwd=workspace, env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["answer"] == "hello"
    names, system = _first_request(server)
    notices = [line for line in result.stderr.splitlines() if NOTICE in line]
    if core:
        assert names == CORE
        # The prompt names no tool the request lacks (the bundled skills are not listed:
        # without load_skill the user's @name still loads one).
        for absent in LEFT_OUT:
            assert absent not in system, absent
        # Said once when the window chose it; not when the user asked for it.
        assert len(notices) == (0 if setting else 1), result.stderr
    else:
        assert names >= LEFT_OUT
        assert "todo_write" in system and "call_subagent" in system and "load_skill" in system
        assert notices == []
    if notices:
        assert f"context window {window:,} tokens" in notices[0]
        assert notices[0].endswith(
            "AGENTGRAPH_TOOL_SET=full adds todos, memory, skills and subagents"
        )


def test_a_local_server_that_states_a_small_window_gets_the_core_tools(
    home: Path, workspace: Path
) -> None:
    """llama-server at --ctx-size 4096 behind a model name that implies 32k: the window it
    states decides, before the first request."""
    with FakeOpenAIServer(
        [{"content": "hello"}], window=4_096, models_window="llama.cpp-props"
    ) as server:
        env = server_env(home, server.url, KEY, AGENTGRAPH_MODEL=MODEL)
        result = run_cli(["run", "say hello"], cwd=workspace, env=env)
    assert result.returncode == 0, result.stderr
    names, _system = _first_request(server)
    assert names == CORE
    assert "context window 4,096 tokens: the core tools only" in result.stdout + result.stderr
