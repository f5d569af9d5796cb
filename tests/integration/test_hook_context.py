"""What ``SessionStart`` and ``UserPromptSubmit`` hooks print reaches the model.

Through the real graph (``Agent.run_turn``) against the fake OpenAI-compatible server,
with real hook commands: their stdout (plain, or JSON
``hookSpecificOutput.additionalContext``) is appended to the history as a ``hook_context``
message before the prompt — never in the system prompt — redacted and bounded. The
scripted model is stateless.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentgraph.capabilities.hooks import HOOK_CONTEXT_MAX_CHARS, HOOK_TEXT_MAX_CHARS
from agentgraph.config import Settings
from agentgraph.persistence import open_store
from agentgraph.runtime.history.kinds import HOOK_CONTEXT_KIND, agentgraph_kind
from agentgraph.session.agent import Agent
from tests.fakes.openai_server import FakeOpenAIServer
from tests.integration.test_hooks import KEY, _hook_toml, _script


@pytest.fixture
def hooked(
    make_settings: Callable[..., Settings], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Callable[[str, str], Settings]:
    """Settings whose user config holds the given hooks TOML, for a server URL."""
    monkeypatch.chdir(tmp_path)  # no project settings file

    def make(url: str, toml: str) -> Settings:
        settings = make_settings(
            OPENAI_BASE_URL=url,
            OPENAI_API_KEY=KEY,
            AGENTGRAPH_PROVIDER_MAX_RETRIES="0",
            AGENTGRAPH_SANDBOX="off",
            AGENTGRAPH_TITLES="first_message",
        )
        settings.home.mkdir(parents=True, exist_ok=True)
        (settings.home / "config.toml").write_text(toml)
        return settings

    return make


PROMPT_CONTEXT = {"hookSpecificOutput": {"additionalContext": "ticket ABC-1 is open"}}


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)


def _answers(request: dict[str, Any]) -> dict[str, Any]:
    return {"content": f"seen {len(request['messages'])} messages"}


def _turns(settings: Settings, workspace: Path, prompts: list[str]) -> Agent:
    with open_store(settings) as store:
        agent = Agent(settings, store, sleep=lambda _s: None)
        for prompt in prompts:
            agent.run_turn("t1", prompt, workspace, lambda _event: None)
        return agent


def _chat(server: FakeOpenAIServer) -> list[list[dict[str, Any]]]:
    return [r["messages"] for r in server.requests if "messages" in (r or {})]


def test_session_start_and_prompt_hooks_add_context_after_the_system_prompt(
    hooked: Callable[[str, str], Settings], tmp_path: Path, workspace: Path
) -> None:
    start = _script(tmp_path, "start.py", "print('branch: main, 2 files changed')\n")
    prompt = _script(tmp_path, "prompt.py", f"print({json.dumps(json.dumps(PROMPT_CONTEXT))})\n")
    failing = _script(tmp_path, "fail.py", "print('not for the model'); raise SystemExit(1)\n")
    toml = (
        _hook_toml("SessionStart", start)
        + _hook_toml("UserPromptSubmit", prompt)
        + _hook_toml("UserPromptSubmit", failing)
    )
    with FakeOpenAIServer([_answers], on_exhausted="repeat_last") as server:
        settings = hooked(server.url, toml)
        _turns(settings, workspace, ["first", "second"])
        first, second = _chat(server)
        with open_store(settings) as store:
            stored = Agent(settings, store, sleep=lambda _s: None).messages("t1")
    # Turn 1: system, SessionStart's output, UserPromptSubmit's, then the prompt.
    assert [m["role"] for m in first] == ["system", "user", "user", "user"]
    assert "branch: main, 2 files changed" in _text(first[1]["content"])
    assert "SessionStart" in _text(first[1]["content"])
    assert "ticket ABC-1 is open" in _text(first[2]["content"])
    assert _text(first[3]["content"]) == "first"
    # Turn 2 extends turn 1's request (prefix-stable): SessionStart once per session,
    # the prompt hook's output with each prompt.
    assert second[: len(first)] == first
    added = [_text(m["content"]) for m in second[len(first) :]]
    assert len(added) == 3 and "ticket ABC-1 is open" in added[1] and added[2] == "second"
    everything = json.dumps([first, second])
    assert "not for the model" not in everything  # a failing hook's output is shown only
    assert "branch: main" not in _text(first[0]["content"])  # the system prompt is untouched
    kinds = [agentgraph_kind(m) for m in stored]
    assert kinds.count(HOOK_CONTEXT_KIND) == 3


def test_hook_context_is_redacted_and_bounded(
    hooked: Callable[[str, str], Settings], tmp_path: Path, workspace: Path
) -> None:
    leak = _script(tmp_path, "leak.py", f"print('the key is {KEY}')\n")
    flood = _script(tmp_path, "flood.py", "print('x' * 50_000)\n")
    toml = _hook_toml("UserPromptSubmit", leak) + "".join(
        _hook_toml("UserPromptSubmit", flood) for _ in range(3)
    )
    with FakeOpenAIServer([_answers]) as server:
        _turns(hooked(server.url, toml), workspace, ["go"])
        [messages] = _chat(server)
    assert KEY not in json.dumps(messages)
    [context] = [_text(m["content"]) for m in messages[1:-1]]
    assert "the key is" in context
    # Each hook's output is cut, and all of them together.
    assert context.count("x" * HOOK_TEXT_MAX_CHARS) == 0
    assert len(context) < HOOK_CONTEXT_MAX_CHARS + 100
