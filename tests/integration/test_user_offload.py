"""Huge user messages (pasted or imported) are offloaded like tool outputs."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from langchain_core.messages import HumanMessage

from agentgraph.config import Settings
from agentgraph.persistence import open_store
from agentgraph.session.agent import Agent
from tests.cli_helpers import run_cli, server_env
from tests.fakes.openai_server import FakeOpenAIServer

WINDOW_TOKENS = 32_000
HUGE_BYTES = 20 * 1024 * 1024
LINE = "2026-11-23 07:00:00 INFO worker-7 processed batch {n} without errors\n"


def _huge_text() -> str:
    lines: list[str] = []
    size = 0
    n = 0
    while size < HUGE_BYTES:
        line = LINE.format(n=n)
        lines.append(line)
        size += len(line)
        n += 1
    return "Find the odd line in this log:\n" + "".join(lines) + "END OF LOG"


def _artifact(text: str) -> Path:
    found = re.search(r"full output: (\S+user-[0-9a-f]+\.txt)", text)
    assert found, text[-500:]
    return Path(found.group(1))


def test_pasted_20_mb_message_is_cut_and_kept_whole_in_an_artifact(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    huge = _huge_text()
    script = [{"content": "looked at the head and tail"}, {"content": "still fine"}]
    with FakeOpenAIServer(script, window=WINDOW_TOKENS, on_exhausted="raise") as server:
        settings = make_settings(
            OPENAI_BASE_URL=server.url,
            OPENAI_API_KEY="sk-test",
            AGENTGRAPH_CONTEXT_WINDOW=str(WINDOW_TOKENS),
            AGENTGRAPH_PROVIDER_MAX_RETRIES="0",
        )
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            first = agent.run_turn("huge", huge, workspace)
            second = agent.run_turn("huge", "and now?", workspace)
            stored = agent.messages("huge")
    assert server.violations == [] and server.overflow_count == 0
    assert (first.answer, second.answer) == ("looked at the head and tail", "still fine")
    assert all(server.token_estimate(r) <= WINDOW_TOKENS for r in server.requests)
    user = next(m for m in stored if isinstance(m, HumanMessage))
    text = str(user.content)
    assert text.startswith("Find the odd line") and text.endswith("END OF LOG")
    assert len(text) < len(huge) // 100
    assert _artifact(text).read_text(encoding="utf-8") == huge  # one read_file away


def test_imported_20_mb_message_resumes_within_the_window(home: Path, workspace: Path) -> None:
    huge = _huge_text()
    entry = {
        "uuid": "u1",
        "type": "user",
        "sessionId": "bigimport",
        "cwd": str(workspace),
        "message": {"role": "user", "content": huge},
    }
    answer = {
        "uuid": "a1",
        "type": "assistant",
        "sessionId": "bigimport",
        "message": {"role": "assistant", "content": "seen"},
    }
    source = home / "big.jsonl"
    source.write_text(json.dumps(entry) + "\n" + json.dumps(answer) + "\n", encoding="utf-8")
    with FakeOpenAIServer([{"content": "resumed"}], window=WINDOW_TOKENS) as server:
        env = server_env(home, server.url, "sk-test", AGENTGRAPH_CONTEXT_WINDOW=str(WINDOW_TOKENS))
        imported = run_cli(["sessions", "import", str(source)], cwd=workspace, env=env)
        assert imported.returncode == 0, imported.stderr
        args = ["run", "what was odd?", "--thread", "bigimport", "--json"]
        resumed = run_cli(args, cwd=workspace, env=env)
        assert resumed.returncode == 0, resumed.stderr
        assert json.loads(resumed.stdout)["answer"] == "resumed"
        assert server.violations == [] and server.overflow_count == 0
        sent = server.requests[0]["messages"]
    user = next(m for m in sent if m["role"] == "user")
    assert user["content"].endswith("END OF LOG")
    assert _artifact(user["content"]).read_text(encoding="utf-8") == huge
