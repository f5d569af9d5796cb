"""``agentgraph run``'s outcomes through the real CLI: Ctrl-C before the model sends
anything, the ``--json`` object of every outcome, conflicting output flags."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cli_helpers import CLI_TIMEOUT_S, cli_env, run_cli, server_env
from tests.fakes.openai_server import FakeOpenAIServer
from tests.pty_helpers import only_session, stored_messages

KEY = "sk-test-secret-0123456789abcdef"
# The server holds its reply this long: far longer than any bound asserted below, so
# only a run that waits for the reply can miss those bounds.
HOLD_S = 180
# Ctrl-C must end the run at once; this bound only catches waiting for the held reply.
CANCEL_BOUND_S = 30
JSON_KEYS = {"thread_id", "answer", "usage", "tool_calls", "stopped", "exit_code", "diffs"}
JSON_KEYS_WITH_ERROR = JSON_KEYS | {"error"}
UNREACHABLE_URL = "http://127.0.0.1:9/v1"  # discard port: nothing listens


def _start_run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "agentgraph", "run", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _interrupt_once_asked(
    proc: subprocess.Popen[str], server: FakeOpenAIServer
) -> tuple[str, str, float]:
    """SIGINT once the model request reached the server; (stdout, stderr, seconds to exit)."""
    deadline = time.monotonic() + CLI_TIMEOUT_S
    while not server.requests:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the model was never asked"
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    sent = time.monotonic()
    try:
        out, err = proc.communicate(timeout=CANCEL_BOUND_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError(f"Ctrl-C did not end the run within {CANCEL_BOUND_S}s") from None
    return out, err, time.monotonic() - sent


def test_ctrl_c_before_the_model_sends_anything_cancels_run_at_once(
    home: Path, workspace: Path
) -> None:
    held = [{"content": "A poem.", "first_byte_delay_s": HOLD_S}]
    with FakeOpenAIServer(held, require_key=KEY) as server:
        env = server_env(home, server.url, KEY)
        proc = _start_run(["Write a poem", "--output-format", "stream-json"], workspace, env)
        out, err, _ = _interrupt_once_asked(proc, server)
    assert proc.returncode == 130, err
    last = json.loads(out.strip().splitlines()[-1])
    assert last == {"type": "error", "message": "interrupted", "exit_code": 130}
    assert err.strip() == "agentgraph: interrupted"  # no warning or traceback lines
    history = stored_messages(home, only_session(home))
    assert [m.type for m in history] == ["human"]  # the prompt is kept, nothing invented


def _one_object(stdout: str) -> dict[str, Any]:
    lines = stdout.splitlines()
    assert len(lines) == 1, f"expected one JSON line on stdout, got {stdout!r}"
    payload = json.loads(lines[0])
    assert isinstance(payload, dict)
    return payload


def _assert_failure_object(payload: dict[str, Any], stderr: str, exit_code: int) -> None:
    assert set(payload) == JSON_KEYS_WITH_ERROR, payload
    assert payload["answer"] is None
    assert payload["exit_code"] == exit_code
    assert set(payload["usage"]) >= {"input_tokens", "output_tokens"}
    assert isinstance(payload["tool_calls"], int)
    assert payload["diffs"] == []
    # stderr keeps its one line, the same message.
    assert stderr.strip() == f"agentgraph: {payload['error']}", stderr
    assert "Traceback" not in stderr


def test_run_json_prints_one_object_for_every_outcome(home: Path, workspace: Path) -> None:
    env = server_env(home, UNREACHABLE_URL, KEY)
    failed = run_cli(["run", "hi", "--json"], cwd=workspace, env=env)
    assert failed.returncode == 1, failed.stderr
    payload = _one_object(failed.stdout)
    _assert_failure_object(payload, failed.stderr, 1)
    assert payload["stopped"] is None
    assert payload["thread_id"]

    held = [{"content": "A poem.", "first_byte_delay_s": HOLD_S}]
    with FakeOpenAIServer(held, require_key=KEY) as server:
        proc = _start_run(["Write a poem", "--json"], workspace, server_env(home, server.url, KEY))
        out, err, _ = _interrupt_once_asked(proc, server)
    assert proc.returncode == 130, err
    payload = _one_object(out)
    _assert_failure_object(payload, err, 130)
    assert payload["error"] == "interrupted"

    with FakeOpenAIServer(held, require_key=KEY) as server:
        env = server_env(home, server.url, KEY, AGENTGRAPH_RUN_TIMEOUT_S="2")
        timed_out = run_cli(["run", "Write a poem", "--json"], cwd=workspace, env=env)
    assert timed_out.returncode == 4, timed_out.stderr
    payload = _one_object(timed_out.stdout)
    _assert_failure_object(payload, timed_out.stderr, 4)
    assert payload["stopped"] == "timeout"
    assert "AGENTGRAPH_RUN_TIMEOUT_S" in payload["error"]

    with FakeOpenAIServer([{"content": "Hello."}], require_key=KEY) as server:
        done = run_cli(
            ["run", "hi", "--json"], cwd=workspace, env=server_env(home, server.url, KEY)
        )
    assert done.returncode == 0, done.stderr
    payload = _one_object(done.stdout)
    assert set(payload) == JSON_KEYS_WITH_ERROR
    assert (payload["answer"], payload["error"], payload["exit_code"]) == ("Hello.", None, 0)


def test_run_json_reports_a_refused_run_in_its_object(home: Path, workspace: Path) -> None:
    # A run refused before it chose a session (no model endpoint configured: exit 2)
    # still prints the object.
    res = run_cli(["run", "hi", "--json"], cwd=workspace, env=cli_env(home))
    assert res.returncode == 2, res.stderr
    payload = _one_object(res.stdout)
    _assert_failure_object(payload, res.stderr, 2)
    assert payload["thread_id"] is None
    # Errors in the command line itself stay on stderr only, like argparse's.
    with FakeOpenAIServer([{"content": "never"}], require_key=KEY) as server:
        env = server_env(home, server.url, KEY)
        for args in (["  ", "--json"], ["hi", "--json", "--thread", "-bad id"]):
            refused = run_cli(["run", *args], cwd=workspace, env=env)
            assert refused.returncode == 2, refused.stderr
            assert refused.stdout == ""
            assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert server.requests == []


def test_run_refuses_json_with_a_conflicting_output_format(home: Path, workspace: Path) -> None:
    with FakeOpenAIServer([{"content": "Hello."}], require_key=KEY) as server:
        env = server_env(home, server.url, KEY)
        for flags in (
            ["--json", "--output-format", "stream-json"],
            ["--output-format", "stream-json", "--json"],
            ["--json", "--output-format", "text"],
        ):
            res = run_cli(["run", *flags, "hi"], cwd=workspace, env=env)
            assert res.returncode == 2, (flags, res.stdout, res.stderr)
            assert res.stdout == ""
            last = res.stderr.strip().splitlines()[-1]
            assert "--json" in last and "--output-format" in last, (flags, res.stderr)
            assert "Traceback" not in res.stderr
        assert server.requests == []  # refused before anything ran
        agreeing = run_cli(
            ["run", "--json", "--output-format", "json", "hi"], cwd=workspace, env=env
        )
    assert agreeing.returncode == 0, agreeing.stderr
    assert _one_object(agreeing.stdout)["answer"] == "Hello."


def _events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_a_reply_cut_at_the_output_limit_is_said_to_the_model_and_the_user(
    home: Path, workspace: Path
) -> None:
    """A write_file call cut off by the output token limit (finish_reason "length", as a
    local server with a small n_predict sends it): the model learns that its reply was cut
    and to send less per call, not only that the JSON was broken; an answer cut the same
    way is flagged to the user."""
    cut = '{"path": "big.txt", "content": "line 1\\nline 2\\nline 3\\nli'
    seen: list[str] = []

    def retry(body: dict[str, Any]) -> dict[str, Any]:
        seen.append(json.dumps(body["messages"][-1]))
        return {
            "content": "The file is too long for one reply; here is the start",
            "finish_reason": "length",
        }

    with FakeOpenAIServer(
        [
            {"tool_calls": [{"name": "write_file", "arguments": cut}], "finish_reason": "length"},
            retry,
        ]
    ) as server:
        env = server_env(home, server.url, KEY)
        proc = run_cli(
            ["run", "--output-format", "stream-json", "write a long file"], cwd=workspace, env=env
        )
    assert proc.returncode == 0, proc.stderr
    result = seen[0]
    assert "output token limit" in result and "less" in result, result
    assert not (workspace / "big.txt").exists()
    notices = [e["text"] for e in _events(proc.stdout) if e["type"] == "notice"]
    assert sum("output token limit" in n for n in notices) == 2, notices


@pytest.mark.parametrize(
    ("first", "notice", "ask"),
    [
        # A local model that goes silent after a tool result (no text, no call).
        ("", "empty reply", "empty"),
        # Qwen2.5-Coder 1.5B, asked to run the tests, wrote a made-up result instead of
        # calling run_bash: no tool ran.
        (
            "<tool_response> Error: command not found: pytest </tool_response>",
            "wrote a tool result",
            "no tool ran",
        ),
        # The same model, asked why a script fails, wrapped its made-up result in the
        # <tools> block its chat template lists the tools in.
        (
            "<tools>\n<tool_response>The file orders.json does not exist.</tool_response>\n"
            "</tools>",
            "wrote a tool result",
            "no tool ran",
        ),
        # Asked to change a file with edit_file, it repeated edit_file's definition.
        (
            '<tools> { "type": "function", "function": { "name": "edit_file", "description": '
            '"Replace old_string, which must occur exactly once unless replace_all.", '
            '"parameters": { "properties": { "path": { "description": "Relative to the '
            'workspace.", "type": "string" }, "old_string": { "description": "Exact text, '
            'whitespace included.", "type": "string" }, "new_string": { "description": '
            '"Replacement.", "type": "string" } }, "required": ["path", "old_string", '
            '"new_string"], "type": "object" } } } </tools>',
            "repeated a tool's definition",
            "no tool ran",
        ),
    ],
    ids=["empty", "imitated-result", "imitated-result-in-tools-block", "echoed-definition"],
)
def test_a_reply_that_is_no_answer_mid_task_is_asked_again_not_taken_as_the_answer(
    home: Path, workspace: Path, first: str, notice: str, ask: str
) -> None:
    """Taken as it is, such a reply would end the run with the task half done; it is asked
    once more (saying why), the user is told, and the stored history keeps no trace of the
    ask or of the reply."""
    seen: list[list[dict[str, Any]]] = []

    def no_answer(body: dict[str, Any]) -> dict[str, Any]:
        seen.append(body["messages"])
        return {"content": first}

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        seen.append(body["messages"])
        return {"content": "notes.txt says hello"}

    (workspace / "notes.txt").write_text("hello\n", encoding="utf-8")
    read = {"tool_calls": [{"name": "read_file", "arguments": '{"path": "notes.txt"}'}]}
    with FakeOpenAIServer([read, no_answer, answer]) as server:
        env = server_env(home, server.url, KEY)
        proc = run_cli(
            ["run", "--output-format", "stream-json", "what does notes.txt say?"],
            cwd=workspace,
            env=env,
        )
    assert proc.returncode == 0, proc.stderr
    events = _events(proc.stdout)
    assert events[-1]["answer"] == "notes.txt says hello"
    assert any(notice in e["text"] for e in events if e["type"] == "notice"), events
    assert seen[1][-1]["role"] == "user" and ask in seen[1][-1]["content"]
    stored = stored_messages(home, only_session(home))
    assert [m.type for m in stored][-3:] == ["ai", "tool", "ai"]
    assert str(stored[-1].content) == "notes.txt says hello"
