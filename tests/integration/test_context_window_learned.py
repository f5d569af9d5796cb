"""An endpoint smaller than agentgraph believes: its overflow error names the real window.

QA's case: llama-server started with ``--ctx-size 4096`` serving a model the table maps to
32,768 tokens. The first overflow's 400 says the real window; from then on the budget is
that window, so the same turn finishes (truncation, compaction and the summary request
sized for it) and the next turn works without ``AGENTGRAPH_CONTEXT_WINDOW``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import pytest
from langchain_core.messages import ToolMessage

from agentgraph.config import Settings
from agentgraph.context.tokens import get_counter
from agentgraph.context.truncation import default_tool_output_max_tokens
from agentgraph.context.windows import SMALL_WINDOW_REPLY_CAP_FRACTION
from agentgraph.persistence import open_store
from agentgraph.providers.learned_windows import LEARNED_WINDOWS_FILE
from agentgraph.session.agent import Agent
from tests.cli_helpers import run_cli, server_env
from tests.fakes.openai_server import OVERFLOW_STYLES, FakeOpenAIServer, OverflowStyle
from tests.scenarios.long_task import (
    PLANTED_FACTS,
    LongTaskDriver,
    facts_in,
    is_summary_request,
    make_workspace,
)

# The endpoint's real window (llama-server --ctx-size) and the model name QA used, which
# agentgraph's table maps to 32,768 tokens.
SERVER_WINDOW_TOKENS = 4_096
TABLE_WINDOW_TOKENS = 32_768
MODEL = "qwen2.5-coder-1.5b"
FILES = 4
# ~20 tokens a line: four files of ~800 tokens overflow 4,096 together, one fits.
LINES_PER_FILE = 40
# Read at once, this many files of LINES_PER_FILE_AT_ONCE lines still exceed the real
# window once each output is cut: only a compaction (the guard) makes the call fit.
FILES_AT_ONCE = 8
LINES_PER_FILE_AT_ONCE = 60
PROMPT = "read every log and report the facts"


def _settings(
    make_settings: Callable[..., Settings], server: FakeOpenAIServer, **env: str
) -> Settings:
    """The model the table maps to 32,768 tokens, at the loopback server (no retries)."""
    return make_settings(
        OPENAI_BASE_URL=server.url,
        OPENAI_API_KEY="sk-test",
        AGENTGRAPH_MODEL=MODEL,
        AGENTGRAPH_PROVIDER_MAX_RETRIES="0",
        **env,
    )


def _run(
    make_settings: Callable[..., Settings],
    workspace: Path,
    style: OverflowStyle,
    **env: str,
) -> tuple[FakeOpenAIServer, LongTaskDriver, list[dict[str, Any]], list[Any], Agent]:
    paths = make_workspace(workspace, files=FILES, lines_per_file=LINES_PER_FILE)
    driver = LongTaskDriver(paths)
    events: list[dict[str, Any]] = []
    results: list[Any] = []
    with FakeOpenAIServer(
        [driver], window=SERVER_WINDOW_TOKENS, overflow_style=style, on_exhausted="repeat_last"
    ) as server:
        settings = _settings(make_settings, server, **env)
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            assert agent.deps.budget.window > SERVER_WINDOW_TOKENS
            results.append(agent.run_turn("small", PROMPT, workspace, events.append))
            first_turn_requests = len(server.requests)
            results.append(
                agent.run_turn("small", "which facts did you find?", workspace, events.append)
            )
            assert len(server.requests) > first_turn_requests
    return server, driver, events, results, agent


def _check(
    server: FakeOpenAIServer,
    driver: LongTaskDriver,
    events: list[dict[str, Any]],
    results: list[Any],
    agent: Agent,
) -> None:
    assert server.violations == []
    sizes = [server.token_estimate(r) for r in server.requests]
    first = next(i for i, size in enumerate(sizes) if size > SERVER_WINDOW_TOKENS)
    # One overflow teaches the window: no request after it is larger than the endpoint's.
    assert server.overflow_count == 1, sizes
    assert max(sizes[first + 1 :]) <= SERVER_WINDOW_TOKENS, sizes
    assert agent.deps.budget.window == SERVER_WINDOW_TOKENS
    notices = [e["text"] for e in events if e.get("type") == "notice"]
    learned = [n for n in notices if "learned from its error" in n]
    assert len(learned) == 1, notices
    assert "4,096 tokens" in learned[0]
    assert f"AGENTGRAPH_CONTEXT_WINDOW={SERVER_WINDOW_TOKENS}" in learned[0]
    # The task finished with a real answer, every file read and the report written.
    assert driver.answered
    assert driver.step >= FILES + 2
    first_answer, second_answer = (r.answer for r in results)
    assert first_answer.startswith("Facts I know:"), first_answer
    assert second_answer.startswith("Facts I know:"), second_answer
    # The guard's summary was built for the real window: a real summary, no fallback.
    compactions = [e for e in events if e["type"] == "compaction"]
    assert all(not c["fallback"] for c in compactions), compactions
    assert set(PLANTED_FACTS.values()) <= driver.answer_facts, driver.answer_facts


@pytest.mark.parametrize("style", OVERFLOW_STYLES)
def test_overflow_error_teaches_the_real_window_of_a_known_model(
    make_settings: Callable[..., Settings], workspace: Path, style: OverflowStyle
) -> None:
    """The model name maps to 32,768 tokens; the endpoint has 4,096 (QA's llama.cpp case)."""
    _check(*_run(make_settings, workspace, style))


def test_overflow_error_teaches_a_window_smaller_than_the_configured_one(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """Even AGENTGRAPH_CONTEXT_WINDOW gives way when the endpoint says it is smaller."""
    server, driver, events, results, agent = _run(
        make_settings,
        workspace,
        "llama.cpp",
        AGENTGRAPH_CONTEXT_WINDOW=str(TABLE_WINDOW_TOKENS),
    )
    _check(server, driver, events, results, agent)


class ReadAllAtOnce:
    """A model that reads every file in one turn of parallel calls, then answers."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        self.summary_requests: list[dict[str, Any]] = []
        self.answers: list[set[str]] = []
        self.read = False

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        if is_summary_request(body):
            self.summary_requests.append(body)
            return {"content": "4. Critical data:\n" + "\n".join(sorted(facts_in(body)))}
        if not self.read:
            # A compacted history may hold no tool result: the flag, not the history,
            # says the reads were asked for.
            self.read = True
            calls = [{"name": "read_file", "arguments": {"path": p}} for p in self.paths]
            return {"tool_calls": calls}
        self.answers.append(facts_in(body))
        return {"content": "Facts I know: " + ", ".join(sorted(self.answers[-1]))}


def test_guard_compaction_after_the_first_overflow_is_sized_for_the_real_window(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """QA's shape: parallel reads overflow; the summary request must fit the real window."""
    paths = make_workspace(workspace, files=FILES_AT_ONCE, lines_per_file=LINES_PER_FILE_AT_ONCE)
    driver = ReadAllAtOnce(paths)
    events: list[dict[str, Any]] = []
    with FakeOpenAIServer(
        [driver], window=SERVER_WINDOW_TOKENS, overflow_style="llama.cpp"
    ) as server:
        settings = _settings(make_settings, server)
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            first = agent.run_turn(
                "qa", "read the logs and list the facts", workspace, events.append
            )
            second = agent.run_turn("qa", "list them again", workspace, events.append)
    assert server.violations == []
    sizes = [server.token_estimate(r) for r in server.requests]
    assert server.overflow_count == 1, sizes
    overflow_at = next(i for i, size in enumerate(sizes) if size > SERVER_WINDOW_TOKENS)
    assert max(sizes[overflow_at + 1 :]) <= SERVER_WINDOW_TOKENS, sizes
    guards = [e for e in events if e["type"] == "compaction" and e["trigger"] == "guard"]
    assert len(guards) == 1 and not guards[0]["fallback"], guards
    assert driver.summary_requests  # a real summary, built for 4,096 tokens
    assert all(server.token_estimate(r) <= SERVER_WINDOW_TOKENS for r in driver.summary_requests)
    assert first.answer.startswith("Facts I know:") and second.answer.startswith("Facts I know:")
    assert set(PLANTED_FACTS.values()) <= driver.answers[0], driver.answers
    assert sum("learned from its error" in str(e.get("text")) for e in events) == 1


class FreshDriverPerRun:
    """The long task's scripted model, started afresh for each CLI process."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        self.driver = LongTaskDriver(paths)

    def restart(self) -> None:
        self.driver = LongTaskDriver(self.paths)

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.driver(body)


@contextmanager
def _long_task_endpoint(
    tmp_path: Path, workspace: Path, **server_options: Any
) -> Iterator[tuple[FreshDriverPerRun, FakeOpenAIServer, dict[str, str]]]:
    """The long task's model behind a SERVER_WINDOW_TOKENS endpoint, and the CLI's env."""
    model = FreshDriverPerRun(make_workspace(workspace, files=FILES, lines_per_file=LINES_PER_FILE))
    with FakeOpenAIServer(
        [model], window=SERVER_WINDOW_TOKENS, on_exhausted="repeat_last", **server_options
    ) as server:
        yield model, server, server_env(tmp_path, server.url, "sk-test", AGENTGRAPH_MODEL=MODEL)


def test_the_next_process_starts_with_the_learned_window(tmp_path: Path, workspace: Path) -> None:
    """`agentgraph run` twice on the 4,096-token endpoint: only the first one overflows.

    The second process starts with the window the first learned (announced, with how
    to override it), so the same task fits from its first request. The file names the
    endpoint without the credentials of its URL.
    """
    paths = make_workspace(workspace, files=FILES, lines_per_file=LINES_PER_FILE)
    model = FreshDriverPerRun(paths)
    with FakeOpenAIServer(
        [model], window=SERVER_WINDOW_TOKENS, overflow_style="llama.cpp", on_exhausted="repeat_last"
    ) as server:
        url = server.url.replace("://", "://user:hunter2secret@", 1)
        env = server_env(tmp_path, url, "sk-test", AGENTGRAPH_MODEL=MODEL)
        first = run_cli(["run", PROMPT], cwd=workspace, env=env)
        assert first.returncode == 0, first.stderr
        assert server.overflow_count == 1
        assert "learned from its error" in first.stdout + first.stderr
        model.restart()
        second = run_cli(["run", PROMPT], cwd=workspace, env=env)
        assert second.returncode == 0, second.stderr
        assert model.driver.answered
        assert server.overflow_count == 1, [server.token_estimate(r) for r in server.requests]
        # An explicit window wins over what was learned.
        model.restart()
        with_override = run_cli(
            ["run", PROMPT], cwd=workspace, env={**env, "AGENTGRAPH_CONTEXT_WINDOW": "3000"}
        )
    shown = second.stdout + second.stderr
    assert f"context window {SERVER_WINDOW_TOKENS:,} tokens for {MODEL!r}" in shown, shown
    assert "AGENTGRAPH_CONTEXT_WINDOW overrides it" in shown
    stored = (tmp_path / ".agentgraph" / LEARNED_WINDOWS_FILE).read_text()
    assert "hunter2secret" not in stored and "sk-test" not in stored
    assert str(SERVER_WINDOW_TOKENS) in stored
    assert with_override.returncode == 0, with_override.stderr
    assert "learned from its error on" not in with_override.stdout + with_override.stderr


def _limit(request: dict[str, Any]) -> int | None:
    """The output limit a request set (langchain-openai sends ``max_completion_tokens``)."""
    value = request.get("max_completion_tokens", request.get("max_tokens"))
    return value if isinstance(value, int) else None


def test_a_local_model_gets_the_output_reserve_as_max_tokens(
    tmp_path: Path, workspace: Path
) -> None:
    """llama.cpp and Ollama generate until the context is full when a request sets no
    limit: a model nothing states an output limit for gets a fifth of its window, which
    follows a learned window; a configured limit and a hosted model's profile win."""
    with _long_task_endpoint(tmp_path, workspace, overflow_style="llama.cpp") as (
        model,
        server,
        env,
    ):
        assert run_cli(["run", PROMPT], cwd=workspace, env=env).returncode == 0
        limits = [_limit(r) for r in server.requests]
        assert any(is_summary_request(r) for r in server.requests)  # summaries too
        assert None not in limits, limits
        # 32,768 tokens assumed: a fifth of it for the reply; of 4,096 once learned, or
        # less: what the prompt leaves in the window.
        assert limits[0] == int(TABLE_WINDOW_TOKENS * SMALL_WINDOW_REPLY_CAP_FRACTION), limits
        assert limits[-1] <= int(SERVER_WINDOW_TOKENS * SMALL_WINDOW_REPLY_CAP_FRACTION), limits
        for extra, expected in (
            ({"AGENTGRAPH_MAX_OUTPUT_TOKENS": "300"}, 300),
            ({"AGENTGRAPH_MODEL": "gpt-4"}, None),
        ):
            model.restart()
            before = len(server.requests)
            assert run_cli(["run", "hi"], cwd=workspace, env={**env, **extra}).returncode == 0
            assert {_limit(r) for r in server.requests[before:]} == {expected}


def _first_session(home: Path) -> str:
    """The id of the oldest session stored under ``home``."""
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None, AGENTGRAPH_HOME=str(home / ".agentgraph"), AGENTGRAPH_MODEL=MODEL
    )
    with open_store(settings) as store:
        rows = store.index.list_sessions(include_subagents=False)
    return min(rows, key=lambda r: r.created_at).thread_id


STATED_WINDOW_ASKED = {
    "llama.cpp": ["/v1/models"],
    "llama.cpp-props": ["/v1/models", "/props"],
    "vllm": ["/v1/models"],
    "lmstudio-loaded": ["/v1/models", "/props", "/api/v1/models"],
}


@pytest.mark.parametrize("style", sorted(STATED_WINDOW_ASKED))
def test_a_local_server_that_states_its_window_is_never_overflowed(
    tmp_path: Path,
    workspace: Path,
    style: Literal["llama.cpp", "llama.cpp-props", "vllm", "lmstudio-loaded"],
) -> None:
    """Some llama.cpp builds list the window they serve as ``meta.n_ctx`` of ``GET
    /v1/models``, upstream llama-server states it in ``GET /props``, vLLM as
    ``max_model_len``, LM Studio the context a loaded model has in its own ``GET
    /api/v1/models``: the first process starts with it (and says so), so the same task
    never overflows. An explicit window wins and nothing is asked."""
    with _long_task_endpoint(
        tmp_path, workspace, overflow_style="llama.cpp", models_window=style
    ) as (model, server, env):
        first = run_cli(["run", PROMPT], cwd=workspace, env=env)
        assert first.returncode == 0, first.stderr
        assert model.driver.answered
        assert server.overflow_count == 0, [server.token_estimate(r) for r in server.requests]
        asked = [r for r in server.log if r.method == "GET"]
        # A stated window: nothing is asked after the first reply.
        assert [r.path for r in asked] == STATED_WINDOW_ASKED[style]
        model.restart()
        explicit = run_cli(
            ["run", PROMPT], cwd=workspace, env={**env, "AGENTGRAPH_CONTEXT_WINDOW": "3000"}
        )
        assert explicit.returncode == 0, explicit.stderr
        again = [r for r in server.log if r.method == "GET"]
        assert again == asked
        # The session's report measures against the window the server serves, too.
        shown = run_cli(
            ["sessions", "show", _first_session(tmp_path), "--json"], cwd=workspace, env=env
        )
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["context"]["window"] == SERVER_WINDOW_TOKENS
    shown = first.stdout + first.stderr
    assert f"context window {SERVER_WINDOW_TOKENS:,} tokens for {MODEL!r}, as " in shown, shown
    assert "reports it — AGENTGRAPH_CONTEXT_WINDOW overrides it" in shown
    assert not (tmp_path / ".agentgraph" / LEARNED_WINDOWS_FILE).exists()  # nothing to learn


@pytest.mark.parametrize(
    ("style", "path", "said"),
    [
        ("ollama", "/api/ps", "allocated it"),
        ("lmstudio", "/api/v1/models", "loaded the model with it"),
    ],
)
def test_a_server_that_loads_the_model_is_asked_once_the_model_is_loaded(
    tmp_path: Path,
    workspace: Path,
    style: Literal["ollama", "lmstudio"],
    path: str,
    said: str,
) -> None:
    """Ollama and LM Studio state no window in their OpenAI-compatible model list and
    load a model at its first request (Ollama then drops the beginning of a longer prompt
    silently, so no error would teach it): after the first reply ``GET /api/ps`` (Ollama)
    or ``GET /api/v1/models`` (LM Studio) says what the model was loaded with, and no
    later request is larger."""
    with _long_task_endpoint(tmp_path, workspace, models_window=style) as (
        model,
        server,
        env,
    ):
        result = run_cli(
            ["run", PROMPT, "--output-format", "stream-json"],
            cwd=workspace,
            env=env,
        )
        assert result.returncode == 0, result.stderr
        assert model.driver.answered
        sizes = [server.token_estimate(r) for r in server.requests]
        assert server.overflow_count == 0, sizes
        assert len(sizes) > 2 and max(sizes[1:]) <= SERVER_WINDOW_TOKENS
        after_start = [r for r in server.log if r.method == "GET"][3:]  # list, props, LM Studio
        assert [r.path for r in after_start if r.path == path] == [path]
    notices = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    texts = [str(e.get("text")) for e in notices if e.get("type") == "notice"]
    assert any(
        f"context window {SERVER_WINDOW_TOKENS:,} tokens for {MODEL!r}, as " in t and said in t
        for t in texts
    ), texts


# How long a test waits for an agent to be built before calling it hung (the probes'
# own bound is SERVED_WINDOW_TOTAL_S, 5 s).
HUNG_AGENT_S = 60.0
TRICKLE_PAUSE_S = 0.5


@contextmanager
def _trickling_server() -> Iterator[str]:
    """A loopback server that answers every GET a byte at a time, never finishing."""
    import http.server
    import threading
    import time

    stop = threading.Event()

    class Trickle(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "100000")
            self.end_headers()
            while not stop.is_set():
                try:
                    self.wfile.write(b" ")
                    self.wfile.flush()
                except OSError:
                    return
                time.sleep(TRICKLE_PAUSE_S)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Trickle)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        stop.set()
        server.shutdown()
        server.server_close()


def test_a_local_server_that_trickles_its_answers_does_not_hold_the_start(
    make_settings: Callable[..., Settings],
) -> None:
    """Each read has a 2 s timeout, so a server that sends a byte every half second would
    keep a probe reading forever: all the start's questions share one deadline."""
    import threading

    with _trickling_server() as url:
        settings = make_settings(OPENAI_BASE_URL=url, OPENAI_API_KEY="sk-test")
        built: list[Agent] = []
        with open_store(settings) as store:
            worker = threading.Thread(
                target=lambda: built.append(Agent(settings, store, sleep=lambda _s: None)),
                daemon=True,
            )
            worker.start()
            worker.join(HUNG_AGENT_S)
            assert built, "building the agent hung on the local server's answers"


def _grep_after_reads(paths: list[str]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A stateless model: reads every file at once (turn 1), greps them all (turn 2),
    and answers once its request's tool results, or a ledger of them, are in view."""

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        if is_summary_request(body):
            return {"content": "4. Critical data:\n" + "\n".join(sorted(facts_in(body)))}
        messages = body["messages"]
        text = json.dumps(messages)
        grep_asked = any(
            m.get("role") == "user" and "grep them" in str(m.get("content")) for m in messages
        )
        if grep_asked:
            if any(
                m.get("role") == "tool" and "log line" in str(m.get("content"))
                for m in messages[-2:]
            ):
                return {"content": "done"}
            return {"tool_calls": [{"name": "grep", "arguments": {"pattern": "nominal"}}]}
        if "log line" in text or "logs/" in text.split("Progress ledger", 1)[-1]:
            return {"content": "read"}
        return {"tool_calls": [{"name": "read_file", "arguments": {"path": p}} for p in paths]}

    return reply


def test_tool_outputs_are_cut_for_the_window_learned_from_an_overflow(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    """The tool node sizes outputs with the shared budget: once an overflow taught the
    real window (4,096 where the table says 32,768), a grep of every log line is cut to
    that window's cap, not to the one the graph was built with."""
    paths = make_workspace(workspace, files=FILES_AT_ONCE, lines_per_file=LINES_PER_FILE_AT_ONCE)
    with FakeOpenAIServer(
        [_grep_after_reads(paths)], window=SERVER_WINDOW_TOKENS, overflow_style="llama.cpp"
    ) as server:
        settings = _settings(make_settings, server)
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            agent.run_turn("cut", "read the logs", workspace)
            assert agent.deps.budget.window == SERVER_WINDOW_TOKENS  # learned in turn 1
            assert agent.run_turn("cut", "grep them for nominal", workspace).answer == "done"
            history = agent.messages("cut")
    assert server.violations == []
    # The result as the tool node stored it (a compaction may keep a cut copy after it).
    grep = next(m for m in history if isinstance(m, ToolMessage) and m.name == "grep")
    counter = get_counter(MODEL)
    assert "tokens truncated" in grep.text
    assert counter.count_text(grep.text) <= default_tool_output_max_tokens(agent.deps.budget.usable)
