"""Hooks through the real graph and CLI, against the fake OpenAI-compatible server.

The hooks are real commands (small Python scripts) configured in the user's
``config.toml``; every scripted model is stateless: it calls a tool until the request
carries a tool result, then answers with that result's text.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentgraph.capabilities.hooks import PromptBlocked
from agentgraph.config import Settings
from agentgraph.persistence import open_store
from agentgraph.session.agent import Agent
from tests.cli_helpers import run_cli, server_env
from tests.fakes.openai_server import FakeOpenAIServer

KEY = "sk-test-secret-hooks-0123456789abcdef"
PY = sys.executable


def _calls_then_answers(name: str, args: dict[str, Any]) -> Callable[[dict[str, Any]], Any]:
    """A model that calls ``name(args)`` once, then repeats the tool's result as its answer."""

    def reply(request: dict[str, Any]) -> dict[str, Any]:
        results = [m for m in request["messages"] if m.get("role") == "tool"]
        if not results:
            return {"tool_calls": [{"name": name, "arguments": args}]}
        return {"content": f"tool said: {results[-1]['content']}"}

    return reply


def _hook_toml(event: str, command: str, matcher: str | None = None) -> str:
    lines = [f"[[hooks.{event}]]"]
    if matcher is not None:
        lines.append(f"matcher = {json.dumps(matcher)}")
    lines += [f"[[hooks.{event}.hooks]]", 'type = "command"', f"command = {json.dumps(command)}"]
    return "\n".join(lines) + "\n"


def _script(folder: Path, name: str, body: str) -> str:
    path = folder / name
    path.write_text(body)
    return f"{PY} {path}"


# Blocks every command that mentions "rm", with the reason on stderr (exit 2).
GUARD = (
    "import json, sys\n"
    "event = json.load(sys.stdin)\n"
    "if 'rm' in event['tool_input'].get('command', ''):\n"
    "    print('rm is not allowed here; move files to trash/ instead', file=sys.stderr)\n"
    "    sys.exit(2)\n"
)
# Rewrites the file an edit touched, as a formatter would (upper-cases it here).
FORMATTER = (
    "import json, pathlib, sys\n"
    "event = json.load(sys.stdin)\n"
    "path = pathlib.Path(event['cwd']) / event['tool_input']['path']\n"
    "path.write_text(path.read_text().upper())\n"
    "print('formatted ' + event['tool_input']['path'])\n"
)


def _agent_turn(
    settings: Settings, workspace: Path, text: str, base_env: dict[str, str] | None = None
) -> tuple[Any, list[dict[str, Any]]]:
    events: list[dict[str, Any]] = []
    with open_store(settings) as store:
        agent = Agent(settings, store, base_env=base_env, sleep=lambda _s: None)
        result = agent.run_turn("t1", text, workspace, events.append)
    return result, events


@pytest.fixture
def hooked(
    make_settings: Callable[..., Settings], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Callable[[str, str], Settings]:
    """Settings whose user config holds the given hooks TOML, for a server URL."""
    monkeypatch.chdir(tmp_path)  # no project settings file but the test's own

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


def test_a_blocking_pre_tool_use_hook_stops_the_command_and_tells_the_model(
    hooked: Callable[[str, str], Settings], tmp_path: Path, workspace: Path
) -> None:
    guard = _script(tmp_path, "guard.py", GUARD)
    (workspace / "keep.txt").write_text("precious\n")
    model = _calls_then_answers("run_bash", {"command": "rm keep.txt"})
    with FakeOpenAIServer([model]) as server:
        settings = hooked(server.url, _hook_toml("PreToolUse", guard, "run_bash"))
        result, events = _agent_turn(settings, workspace, "clean up")
        assert server.violations == []
        [tool_message] = [m for m in server.requests[-1]["messages"] if m.get("role") == "tool"]
    assert (workspace / "keep.txt").exists()
    assert "rm is not allowed here; move files to trash/ instead" in tool_message["content"]
    assert "PreToolUse hook" in result.answer
    [hook] = [e for e in events if e["type"] == "hook"]
    assert hook["event"] == "PreToolUse" and hook["outcome"] == "blocked"


def test_a_post_tool_use_hook_formats_the_file_after_an_edit(
    hooked: Callable[[str, str], Settings], tmp_path: Path, workspace: Path
) -> None:
    formatter = _script(tmp_path, "fmt.py", FORMATTER)
    model = _calls_then_answers("write_file", {"path": "a.txt", "content": "hello\n"})
    with FakeOpenAIServer([model]) as server:
        toml = _hook_toml("PostToolUse", formatter, "write_file|edit_file")
        result, events = _agent_turn(hooked(server.url, toml), workspace, "write a.txt")
        assert server.violations == []
    assert (workspace / "a.txt").read_text() == "HELLO\n"
    [hook] = [e for e in events if e["type"] == "hook"]
    assert (hook["event"], hook["outcome"], hook["text"]) == (
        "PostToolUse",
        "ok",
        "formatted a.txt",
    )
    assert result.answer.startswith("tool said:")


def test_hooks_get_no_secrets_and_failing_hooks_never_break_the_turn(
    hooked: Callable[[str, str], Settings], tmp_path: Path, workspace: Path
) -> None:
    dump = tmp_path / "env.json"
    env_dump = _script(
        tmp_path,
        "env.py",
        f"import json, os\nopen({str(dump)!r}, 'w').write(json.dumps(dict(os.environ)))\n",
    )
    crash = _script(tmp_path, "crash.py", "raise SystemExit(3)\n")
    toml = (
        _hook_toml("PreToolUse", env_dump)
        + _hook_toml("PreToolUse", crash)
        + _hook_toml("PostToolUse", "no-such-formatter-anywhere")
    )
    model = _calls_then_answers("run_bash", {"command": "echo ran"})
    base_env = {"PATH": "/usr/bin:/bin", "OPENAI_API_KEY": KEY, "MY_TOKEN": "tok-123456789"}
    with FakeOpenAIServer([model]) as server:
        result, events = _agent_turn(hooked(server.url, toml), workspace, "go", base_env)
    assert result.answer.startswith("tool said: ran")
    seen = json.loads(dump.read_text())
    assert KEY not in json.dumps(seen) and "MY_TOKEN" not in seen
    assert seen["AGENTGRAPH_PROJECT_DIR"] == str(workspace.resolve())
    outcomes = [(e["event"], e["outcome"]) for e in events if e["type"] == "hook"]
    assert outcomes == [("PreToolUse", "error"), ("PostToolUse", "error")]


def test_session_start_and_stop_hooks_see_the_session(
    hooked: Callable[[str, str], Settings], tmp_path: Path, workspace: Path
) -> None:
    log = tmp_path / "log.jsonl"
    record = _script(
        tmp_path,
        "record.py",
        f"import sys\nopen({str(log)!r}, 'a').write(sys.stdin.read() + '\\n')\nprint('noted')\n",
    )
    toml = _hook_toml("SessionStart", record) + _hook_toml("Stop", record)
    with FakeOpenAIServer([{"content": "hi there"}]) as server:
        settings = hooked(server.url, toml)
        events: list[dict[str, Any]] = []
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            agent.run_turn("t1", "hello", workspace, events.append)
            agent.run_turn("t1", "again", workspace, events.append)
    payloads = [json.loads(line) for line in log.read_text().splitlines()]
    assert [p["hook_event_name"] for p in payloads] == ["SessionStart", "Stop", "Stop"]
    assert payloads[0]["source"] == "startup" and payloads[0]["session_id"] == "t1"
    assert payloads[1]["last_assistant_message"] == "hi there"
    kinds = [e["type"] for e in events]
    assert kinds.index("hook") < kinds.index("token")  # SessionStart before the reply
    assert kinds[-2:] == ["hook", "turn_end"]  # Stop at the end


def test_stream_json_carries_hook_events(home: Path, tmp_path: Path, workspace: Path) -> None:
    guard = _script(tmp_path, "guard.py", GUARD)
    config = home / ".agentgraph" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(_hook_toml("PreToolUse", guard, "run_bash"))
    model = _calls_then_answers("run_bash", {"command": "rm -rf build"})
    with FakeOpenAIServer([model]) as server:
        result = run_cli(
            ["run", "--output-format", "stream-json", "clean"],
            cwd=workspace,
            env=server_env(home, server.url, KEY),
        )
    assert result.returncode == 0, result.stderr[-2000:]
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    [hook] = [line for line in lines if line["type"] == "hook"]
    assert hook["outcome"] == "blocked" and hook["event"] == "PreToolUse"
    assert "rm is not allowed here" in hook["text"]


def test_a_project_hook_runs_only_after_agentgraph_trust(
    home: Path, tmp_path: Path, workspace: Path
) -> None:
    marker = tmp_path / "project-hook-ran"
    hook = _script(tmp_path, "mark.py", f"open({str(marker)!r}, 'w').write('ran')\n")
    project = workspace / ".agentgraph" / "config.toml"
    project.parent.mkdir()
    project.write_text(_hook_toml("PreToolUse", hook))
    model = _calls_then_answers("list_dir", {})
    with FakeOpenAIServer([model]) as server:
        env = server_env(home, server.url, KEY)
        first = run_cli(["run", "look"], cwd=workspace, env=env)
        assert first.returncode == 0, first.stderr[-2000:]
        assert not marker.exists()
        notes = [line for line in first.stderr.splitlines() if "hooks in" in line]
        assert len(notes) == 1 and "agentgraph trust" in notes[0], first.stderr

        trusted = run_cli(["trust"], cwd=workspace, env=env)
        assert trusted.returncode == 0, trusted.stderr
        assert "hooks: commands agentgraph will run" in trusted.stdout  # named before they run
        second = run_cli(["run", "look"], cwd=workspace, env=env)
        assert second.returncode == 0, second.stderr[-2000:]
    assert marker.read_text() == "ran"
    assert "hooks in" not in second.stderr


def test_pre_compact_hooks_run_before_a_compaction(
    hooked: Callable[[str, str], Settings], tmp_path: Path, workspace: Path
) -> None:
    log = tmp_path / "compact.jsonl"
    record = _script(
        tmp_path,
        "record.py",
        f"import sys\nopen({str(log)!r}, 'a').write(sys.stdin.read() + '\\n')\n",
    )
    detail = " ".join(f"detail {n} of the answer." for n in range(60))
    with FakeOpenAIServer([{"content": f"answer: {detail}"}]) as server:
        settings = hooked(server.url, _hook_toml("PreCompact", record))
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            for n in range(3):
                agent.run_turn("t1", f"request {n}", workspace)
            assert not log.exists()
            agent.compact("t1", focus="keep the API notes")
    [payload] = [json.loads(line) for line in log.read_text().splitlines()]
    assert payload["hook_event_name"] == "PreCompact" and payload["session_id"] == "t1"
    assert (payload["trigger"], payload["custom_instructions"]) == ("manual", "keep the API notes")


def test_a_blocking_post_tool_use_hook_tells_the_model_after_the_tool_ran(
    hooked: Callable[[str, str], Settings], tmp_path: Path, workspace: Path
) -> None:
    lint = _script(
        tmp_path,
        "lint.py",
        "import sys\nprint('a.txt:1: line too long', file=sys.stderr)\nsys.exit(2)\n",
    )
    model = _calls_then_answers("write_file", {"path": "a.txt", "content": "x\n"})
    with FakeOpenAIServer([model]) as server:
        _agent_turn(hooked(server.url, _hook_toml("PostToolUse", lint)), workspace, "write")
        [result] = [m for m in server.requests[-1]["messages"] if m.get("role") == "tool"]
    assert (workspace / "a.txt").read_text() == "x\n"  # the tool ran
    assert result["content"].endswith("\n\nPostToolUse hook: a.txt:1: line too long")


def test_a_user_prompt_submit_hook_can_refuse_a_prompt_before_anything_is_stored(
    hooked: Callable[[str, str], Settings], tmp_path: Path, workspace: Path
) -> None:
    check = _script(
        tmp_path,
        "check.py",
        "import json, sys\n"
        "prompt = json.load(sys.stdin)['prompt']\n"
        "if 'password' in prompt:\n"
        "    print('do not paste passwords here', file=sys.stderr)\n"
        "    sys.exit(2)\n"
        "print('prompt checked')\n",
    )
    with FakeOpenAIServer([{"content": "fine"}]) as server:
        settings = hooked(server.url, _hook_toml("UserPromptSubmit", check))
        events: list[dict[str, Any]] = []
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            with pytest.raises(PromptBlocked, match="do not paste passwords here"):
                agent.run_turn("t1", "my password is hunter2", workspace, events.append)
            assert server.requests == [] and store.index.get("t1") is None
            assert agent.messages("t1") == []
            result = agent.run_turn("t2", "list the files", workspace, events.append)
    assert result.answer == "fine"
    hooks = [(e["outcome"], e["text"]) for e in events if e["type"] == "hook"]
    assert hooks == [("blocked", "do not paste passwords here"), ("ok", "prompt checked")]
