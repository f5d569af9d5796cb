"""``agentgraph run -`` and ``--output-format stream-json`` through the real CLI."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agentgraph.runtime.history import agentgraph_kind
from tests.cli_helpers import CLI_TIMEOUT_S, run_cli, server_env
from tests.fakes.openai_server import FakeOpenAIServer
from tests.pty_helpers import only_session, stored_messages

KEY = "sk-test-secret-0123456789abcdef"


def test_run_dash_reads_the_prompt_from_stdin(home: Path, workspace: Path) -> None:
    prompt = "summarize this:\nline one\nline two — ünïcode"
    with FakeOpenAIServer([{"content": "A summary."}], require_key=KEY) as server:
        res = run_cli(
            ["run", "-"], cwd=workspace, env=server_env(home, server.url, KEY), stdin=prompt
        )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "A summary."
    users = [m for m in server.requests[-1]["messages"] if m["role"] == "user"]
    assert users[-1]["content"] == prompt


def test_run_dash_with_empty_stdin_is_a_usage_error(home: Path, workspace: Path) -> None:
    with FakeOpenAIServer([{"content": "never"}], require_key=KEY) as server:
        res = run_cli(["run", "-"], cwd=workspace, env=server_env(home, server.url, KEY), stdin="")
    assert res.returncode == 2
    assert res.stderr.strip().startswith("agentgraph: the prompt is empty")
    assert "Traceback" not in res.stderr
    assert server.requests == []


def _events(stdout: str) -> list[dict[str, object]]:
    lines = stdout.splitlines()
    assert lines, "no output"
    return [json.loads(line) for line in lines]


def _run_stream(
    home: Path, workspace: Path, script: list[dict[str, object]], prompt: str = "what is x?"
) -> list[dict[str, object]]:
    """``agentgraph run PROMPT --output-format stream-json`` on ``script``: its events."""
    with FakeOpenAIServer(script, require_key=KEY) as server:
        res = run_cli(
            ["run", prompt, "--output-format", "stream-json"],
            cwd=workspace,
            env=server_env(home, server.url, KEY),
        )
    assert res.returncode == 0, res.stderr
    return _events(res.stdout)


def test_stream_json_prints_one_event_per_line(home: Path, workspace: Path) -> None:
    (workspace / "app.py").write_text("x = 1\n")
    script = [
        {
            "content": "Let me fix it.",
            "tool_calls": [
                {
                    "name": "edit_file",
                    "arguments": {"path": "app.py", "old_string": "x = 1", "new_string": "x = 2"},
                }
            ],
        },
        {"content": "Done: x is now 2."},
    ]
    with FakeOpenAIServer(script, require_key=KEY) as server:
        res = run_cli(
            ["run", "set x to 2", "--output-format", "stream-json", "--thread", "t-stream"],
            cwd=workspace,
            env=server_env(home, server.url, KEY),
        )
    assert res.returncode == 0, res.stderr
    events = _events(res.stdout)
    types = [e["type"] for e in events]
    assert types[0] == "start" and events[0]["thread_id"] == "t-stream"
    assert types[-2:] == ["usage", "result"]
    deltas = "".join(str(e["text"]) for e in events if e["type"] == "text_delta")
    assert deltas == "Let me fix it.Done: x is now 2."
    call = next(e for e in events if e["type"] == "tool_call")
    assert call["name"] == "edit_file" and call["args"] == {
        "path": "app.py",
        "old_string": "x = 1",
        "new_string": "x = 2",
    }
    result = next(e for e in events if e["type"] == "tool_result")
    assert result["id"] == call["id"] and result["status"] == "success"
    diff = next(e for e in events if e["type"] == "diff")
    assert diff["tool_call_id"] == call["id"] and diff["path"] == "app.py"
    assert "-x = 1\n+x = 2\n" in str(diff["diff"])
    assert (diff["added"], diff["removed"]) == (1, 1)
    # Order: the call, its diff, its result, then the answer.
    assert types.index("tool_call") < types.index("diff") < types.index("tool_result")
    assert types.index("tool_result") < types.index("answer")
    final = events[-1]
    assert final["answer"] == "Done: x is now 2." and final["thread_id"] == "t-stream"
    usage = events[-2]
    assert int(str(usage["input_tokens"])) > 0 and int(str(usage["output_tokens"])) > 0
    # The model got the one-line confirmation, never the diff.
    sent = json.dumps(server.requests[-1]["messages"])
    assert "edited app.py" in sent and "+x = 2" not in sent


def test_stream_json_ends_with_an_error_event(home: Path, workspace: Path) -> None:
    script = [{"error": {"status": 401, "body": {"error": {"message": "bad key"}}}}]
    with FakeOpenAIServer(script) as server:
        res = run_cli(
            ["run", "hi", "--output-format", "stream-json"],
            cwd=workspace,
            env=server_env(home, server.url, KEY),
        )
    assert res.returncode == 1
    events = _events(res.stdout)
    assert events[-1]["type"] == "error" and events[-1]["exit_code"] == 1
    assert "Traceback" not in res.stderr


def test_json_output_carries_the_diffs(home: Path, workspace: Path) -> None:
    script = [
        {
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": "new.txt", "content": "hi\n"}}
            ]
        },
        {"content": "Created."},
    ]
    with FakeOpenAIServer(script, require_key=KEY) as server:
        res = run_cli(
            ["run", "make it", "--json"], cwd=workspace, env=server_env(home, server.url, KEY)
        )
    assert res.returncode == 0, res.stderr
    payload = json.loads(res.stdout)
    assert [d["path"] for d in payload["diffs"]] == ["new.txt"]
    assert payload["diffs"][0]["diff"].endswith("+hi\n")
    assert "new.txt" in res.stderr  # the text progress on stderr shows it too


@pytest.mark.parametrize("placeholder", ["local", "ollama", "EMPTY"])
def test_a_placeholder_key_of_a_local_server_is_not_cut_out_of_what_tools_show(
    home: Path, workspace: Path, placeholder: str
) -> None:
    """A local server takes any key, and its users set a word (``OPENAI_API_KEY=local``;
    Ollama's guide sets ``ollama``, vLLM's ``EMPTY``). Redacted wherever it appeared,
    that word was cut out of every tool output: the model read ``[REDACTED]host:8080``
    for ``localhost:8080``. A key too short to be a credential is not redacted; a real
    one still is (``test_diffs_never_carry_the_api_key``)."""
    text = "url = http://localhost:8080  # the ollama server, or EMPTY for none\n"
    (workspace / "config.py").write_text(text)
    script = [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "config.py"}}]},
        {"content": "Read."},
    ]
    with FakeOpenAIServer(script, require_key=placeholder) as server:
        res = run_cli(
            ["run", "read config.py", "--json"],
            cwd=workspace,
            env=server_env(home, server.url, placeholder),
        )
        assert res.returncode == 0, res.stderr
        shown = [m for m in server.requests[-1]["messages"] if m.get("role") == "tool"]
    assert len(shown) == 1 and text.rstrip("\n") in str(shown[0]["content"])
    assert "REDACTED" not in str(shown[0]["content"])


def test_diffs_never_carry_the_api_key(home: Path, workspace: Path) -> None:
    script = [
        {
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": ".env", "content": f"KEY={KEY}\n"}}
            ]
        },
        {"content": "Saved."},
    ]
    events = _run_stream(home, workspace, script, "save the key")
    diff = next(e for e in events if e["type"] == "diff")
    assert KEY not in json.dumps(diff) and "+KEY=[REDACTED]" in str(diff["diff"])
    # (The tool_call event repeats the model's own arguments, which held the key.)
    assert all(KEY not in json.dumps(e) for e in events if e["type"] != "tool_call")


def test_repl_with_piped_output_prints_markdown_as_plain_text_once(
    home: Path, workspace: Path
) -> None:
    answer = "## Changes\n\nFixed **add**."
    with FakeOpenAIServer([{"content": answer}], require_key=KEY) as server:
        res = run_cli([], cwd=workspace, env=server_env(home, server.url, KEY), stdin="fix it\n")
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("Fixed **add**.") == 1
    assert "## Changes" in res.stdout
    assert "\x1b[" not in res.stdout


def test_ctrl_c_during_run_records_the_partial_answer_and_exits_130(
    home: Path, workspace: Path
) -> None:
    story = " ".join(f"word{i}" for i in range(100))
    with FakeOpenAIServer([{"content": story, "chunk_delay_s": 0.25}], require_key=KEY) as server:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentgraph", "run", "story", "--output-format", "stream-json"],
            cwd=workspace,
            env=server_env(home, server.url, KEY),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        seen = []
        for line in proc.stdout:
            seen.append(json.loads(line))
            if seen[-1].get("text") == "word3 ":
                break
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=CLI_TIMEOUT_S)
    assert proc.returncode == 130
    last = json.loads(out.strip().splitlines()[-1])
    assert last == {"type": "error", "message": "interrupted", "exit_code": 130}
    assert err.strip() == "agentgraph: interrupted"  # no warning or traceback lines
    history = stored_messages(home, only_session(home))
    assert [m.type for m in history] == ["human", "ai"]
    assert agentgraph_kind(history[1]) == "interrupted"
    assert str(history[1].content).startswith("word0 word1 word2 word3")


def test_calls_written_as_text_are_not_streamed_as_answer_text(home: Path, workspace: Path) -> None:
    """A local model's call written as text (tags, a JSON fence, bare JSON) shows as a
    tool call, never first as answer text; the prose before it still streams."""
    # A different file each time: the same call returning the same output three times
    # in a row is a model going round, which the runaway guard stops.
    for n in range(1, 6):
        (workspace / f"app{n}.py").write_text("x = 1\n")

    def call(n: int) -> str:
        return json.dumps({"name": "read_file", "arguments": {"path": f"app{n}.py"}})

    events = _run_stream(
        home,
        workspace,
        [
            {"content": f"I'll read it.\n<tool_call>\n{call(1)}\n</tool_call>"},
            {"content": f"```json\n{call(2)}\n```"},
            {"content": call(3)},
            # Qwen2.5-Coder 1.5B through llama.cpp, and Llama's function syntax.
            {
                "content": "<tools>\n"
                '<function name="read_file" arguments=\'{"path": "app4.py"}\' />'
                "\n</tools>"
            },
            {"content": 'Again.\n<function=read_file>{"path": "app5.py"}</function>'},
            {"content": "x is 1."},
        ],
    )
    deltas = "".join(str(e["text"]) for e in events if e["type"] == "text_delta")
    assert deltas == "I'll read it.\nAgain.\nx is 1."
    calls = [e for e in events if e["type"] == "tool_call"]
    assert [c["name"] for c in calls] == ["read_file"] * 5
    results = [e for e in events if e["type"] == "tool_result"]
    assert len(results) == 5 and all("x = 1" in str(r["content"]) for r in results)
    assert events[-1]["answer"] == "x is 1."


def test_answers_that_only_look_like_calls_stream_whole(home: Path, workspace: Path) -> None:
    """Code fences, inline code and JSON that calls no declared tool reach the output
    unchanged (JSON-only replies at once when the reply ends)."""
    prose = 'Here:\n```python\nx = {"a": 1}\n```\nand `y` <b>bold</b> ``` done'
    note = "[1] The first point, then the second one and a third for good measure."
    for content in (prose, note, '{"a": 1}', '[{"name": "nope", "arguments": {}}]'):
        events = _run_stream(home, workspace, [{"content": content}])
        pieces = [str(e["text"]) for e in events if e["type"] == "text_delta"]
        assert "".join(pieces) == content
        assert not [e for e in events if e["type"] == "tool_call"]
        if content in (prose, note):  # still streamed as it comes, code blocks included
            assert len(pieces) > 10


def test_with_text_tool_calls_off_such_text_streams_as_it_comes(
    home: Path, workspace: Path
) -> None:
    """Nothing turns the text into calls then: it is the answer and streams as one."""
    text = '<tool_call>\n{"name": "read_file", "arguments": {"path": "app.py"}}\n</tool_call>'
    with FakeOpenAIServer([{"content": text}], require_key=KEY) as server:
        env = server_env(home, server.url, KEY, AGENTGRAPH_TEXT_TOOL_CALLS="false")
        res = run_cli(["run", "hi", "--output-format", "stream-json"], cwd=workspace, env=env)
    assert res.returncode == 0, res.stderr
    pieces = [str(e["text"]) for e in _events(res.stdout) if e["type"] == "text_delta"]
    assert "".join(pieces) == text and len(pieces) > 3
