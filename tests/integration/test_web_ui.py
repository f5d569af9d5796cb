"""``agentgraph web`` in a real browser: headless Chromium driven by Playwright.

One web server (a real ``agentgraph web`` process) and one browser serve the module,
against the scripted fake model server on loopback. The browser tests are skipped with
a reason where Chromium is missing, unless ``AGENTGRAPH_REQUIRE_BROWSER`` is set
(``.ci/run`` sets it): then a missing browser fails. The plain-HTTP tests always run.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.cli_helpers import run_cli, server_env
from tests.fakes.openai_server import FakeOpenAIServer

REQUIRE_ENV = "AGENTGRAPH_REQUIRE_BROWSER"
CHROMIUM_PATHS = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
KEY = "sk-test-web-key"
WEB_START_TIMEOUT_S = 60.0
UI_TIMEOUT_MS = 20_000
HTTP_TIMEOUT_S = 10.0
TERMINAL_THREAD = "terminal-session-1"
TERMINAL_PROMPT = "terminal question about the project"
EDIT_WORD = "please edit"
DELEGATE_WORD = "delegate the notes"
SUB_TASK = "Read notes.txt and report what it says"
SLOW_WORD = "answer slowly"
# A slow answer: this many words, one streamed chunk each, this far apart.
SLOW_WORDS = 30
SLOW_CHUNK_DELAY_S = 0.1
# Shown as text, never parsed: the page must not create this element.
HOSTILE_HTML = '<img src=x onerror="document.title=1">'
HELLO_ANSWER = (
    "**Hello** from the fake model.\n\n- first point\n- second point\n\n"
    f"```python\nprint('hi')\n```\n\n{HOSTILE_HTML} stays text"
)
SCREENSHOT = Path(os.environ.get("AGENTGRAPH_WEB_SCREENSHOT", "/tmp/agentgraph-web.png"))


def _chromium() -> str | None:
    found = next((p for p in CHROMIUM_PATHS if Path(p).exists()), None)
    return found or shutil.which("chromium")


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content or "")


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    return next(
        (_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), ""
    )


def reply(body: dict[str, Any]) -> dict[str, Any]:
    """The model, as a function of the request alone."""
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    if not body.get("tools"):  # a title or a summary
        return {"content": "Fake title"}
    first = next((_text(m.get("content")) for m in messages if m.get("role") == "user"), "")
    if first.startswith(SUB_TASK):  # the subagent: read the notes, then report
        if last.get("role") == "tool":
            return {"content": "Report: the notes say hello."}
        return {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]}
    asked = _last_user_text(messages)
    if last.get("role") == "tool":
        if DELEGATE_WORD in asked:
            return {"content": "The helper reported back."}
        outcome = _text(last.get("content"))
        return {"content": "Done: x is now 2." if outcome.startswith("edited") else "Not edited."}
    if EDIT_WORD in asked:
        args = {"path": "app.py", "old_string": "x = 1", "new_string": "x = 2"}
        return {"tool_calls": [{"name": "edit_file", "arguments": args}]}
    if DELEGATE_WORD in asked:
        return {"tool_calls": [{"name": "call_subagent", "arguments": {"task": SUB_TASK}}]}
    if TERMINAL_PROMPT in asked:
        return {"content": "Answer given in the terminal."}
    if SLOW_WORD in asked:
        words = " ".join(f"word{i}" for i in range(SLOW_WORDS))
        return {"content": f"Slowly: {words} end.", "chunk_delay_s": SLOW_CHUNK_DELAY_S}
    return {"content": HELLO_ANSWER}


@dataclass
class Web:
    """The running web server."""

    url: str  # with the token
    base: str
    token: str
    home: Path
    workspace: Path
    env: dict[str, str]
    model_server: FakeOpenAIServer


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Web]:
    root = tmp_path_factory.mktemp("web")
    home, workspace = root / "home", root / "project"
    home.mkdir()
    workspace.mkdir()
    (workspace / "app.py").write_text("x = 1\n", encoding="utf-8")
    (workspace / "notes.txt").write_text("hello\n", encoding="utf-8")
    # The endpoint serves the two models the page switches between (a model it does not
    # list is refused at the switch, as /model does).
    served = {"gpt-4o-mini", "gpt-4o"}
    with FakeOpenAIServer(
        [reply], require_key=KEY, on_exhausted="repeat_last", known_models=served
    ) as server:
        env = server_env(home, server.url, KEY)
        # A session made in the terminal, before the page exists.
        made = run_cli(
            ["run", TERMINAL_PROMPT, "--thread", TERMINAL_THREAD], cwd=workspace, env=env
        )
        assert made.returncode == 0, made.stderr
        web_env = {**env, "AGENTGRAPH_EDITS": "ask"}
        stderr = root / "web.stderr"
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentgraph", "web", "--port", "0"],
            cwd=workspace,
            env=web_env,
            stdout=subprocess.PIPE,
            stderr=stderr.open("w"),
            text=True,
        )
        try:
            assert proc.stdout is not None
            ready, _, _ = select.select([proc.stdout], [], [], WEB_START_TIMEOUT_S)
            first = proc.stdout.readline().strip() if ready else ""
            assert first.startswith("http://127.0.0.1:"), (first, stderr.read_text())
            base, _, token = first.partition("/?token=")
            yield Web(first, base, token, home, workspace, env, server)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="module")
def page(web: Web) -> Iterator[Any]:
    if _chromium() is None and not os.environ.get(REQUIRE_ENV):
        pytest.skip(
            "Chromium is not installed (apt-get install chromium); set "
            f"{REQUIRE_ENV}=1 to make this a failure"
        )
    from playwright.sync_api import sync_playwright

    executable = _chromium()
    assert executable is not None, f"{REQUIRE_ENV} is set but Chromium is missing"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        tab = context.new_page()
        tab.set_default_timeout(UI_TIMEOUT_MS)
        tab.goto(web.url)
        yield tab
        browser.close()


def _get(url: str, **headers: str) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()


def _post_op(web: Web, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    return _post_raw(web, json.dumps(body).encode())


def test_every_request_needs_the_token(web: Web) -> None:
    for path in ("/", "/static/app.js", "/api/sessions", f"/api/sessions/{TERMINAL_THREAD}"):
        assert _get(web.base + path) == (401, b"")
        assert _get(web.base + path, Authorization="Bearer wrong") == (401, b"")
    assert _get(web.base + "/?token=wrong") == (401, b"")
    status, body = _get(web.base + "/api/sessions", Authorization=f"Bearer {web.token}")
    assert status == 200 and json.loads(body)["sessions"]
    # The right token from a page on another origin is refused too.
    evil = {"Authorization": f"Bearer {web.token}", "Origin": "http://evil.example"}
    assert _get(web.base + "/api/sessions", **evil)[0] == 403


def test_no_websocket_is_served_even_with_the_token(web: Web) -> None:
    host, _, port = web.base.removeprefix("http://").partition(":")
    handshake = (
        f"GET /?token={web.token} HTTP/1.1\r\nHost: {host}:{port}\r\n"
        "Upgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        f"Authorization: Bearer {web.token}\r\n\r\n"
    )
    with socket.create_connection((host, int(port)), timeout=HTTP_TIMEOUT_S) as conn:
        conn.sendall(handshake.encode())
        status_line = conn.recv(4096).split(b"\r\n", 1)[0]
    assert status_line.startswith(b"HTTP/1.1 ") and b" 101 " not in status_line + b" "


def _post_raw(web: Web, data: bytes) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        f"{web.base}/api/op",
        data=data,
        headers={"Authorization": f"Bearer {web.token}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")


@pytest.mark.parametrize(
    ("body", "status", "error"),
    [
        (b"{not json", 400, "the body is not JSON"),
        (b'{"op": "format_disk"}', 400, "bad operation"),
        (b'{"op": "submit_turn", "text": ""}', 400, "bad operation: submit_turn.text"),
        (b'{"op": "resume_session", "thread_id": "../../etc"}', 400, "invalid thread id"),
        (b'{"op": "cancel", "thread_id": "t", "x": 1}', 400, "bad operation"),
        (b"[" * 2_000_000, 413, "operation too large"),
    ],
)
def test_bad_operations_get_one_line(web: Web, body: bytes, status: int, error: str) -> None:
    got, answer = _post_raw(web, body)
    assert got == status
    assert error in answer["error"] and "\n" not in answer["error"]
    assert "Traceback" not in answer["error"]


def test_a_browser_without_the_token_gets_nothing(web: Web, page: Any) -> None:
    from playwright.sync_api import Error

    other = page.context.browser.new_context()
    try:
        assert other.request.get(web.base + "/").status == 401
        # Chromium shows its own error page for an empty 401: nothing of the app loads.
        with pytest.raises(Error, match="ERR_HTTP_RESPONSE_CODE_FAILURE"):
            other.new_page().goto(web.base + "/")
    finally:
        other.close()


def test_a_new_session_streams_a_markdown_answer(web: Web, page: Any) -> None:
    page.click("#new-session")
    page.fill("#prompt", "say hello")
    page.press("#prompt", "Enter")
    answer = page.locator(".msg.assistant").last
    answer.locator("strong", has_text="Hello").wait_for()
    assert answer.locator("li").all_inner_texts() == ["first point", "second point"]
    assert answer.locator("pre code").inner_text() == "print('hi')"
    # Model text is text: the hostile tag is shown, not made.
    assert HOSTILE_HTML in answer.inner_text()
    assert page.locator("#log img").count() == 0
    page.locator("#send:not([disabled])").wait_for()
    page.locator("#sessions li .title", has_text="say hello").wait_for()


def test_an_edit_is_approved_in_the_page_and_its_diff_shown(web: Web, page: Any) -> None:
    page.click("#new-session")
    page.fill("#prompt", f"{EDIT_WORD} app.py")
    page.press("#prompt", "Enter")
    card = page.locator(".approval").last
    card.wait_for()
    assert "edit_file" in card.inner_text() and "+x = 2" in card.inner_text()
    assert "app.py +1 -1 (preview)" in card.inner_text()
    assert (web.workspace / "app.py").read_text(encoding="utf-8") == "x = 1\n"
    card.locator("button[data-answer=yes]").click()
    page.locator(".msg.assistant", has_text="Done: x is now 2.").wait_for()
    diff = page.locator(".tool-tail .diff").last
    assert "app.py +1 -1" in diff.inner_text()
    assert diff.locator(".add").inner_text() == "+x = 2"
    assert (web.workspace / "app.py").read_text(encoding="utf-8") == "x = 2\n"
    page.locator("#send:not([disabled])").wait_for()
    page.screenshot(path=str(SCREENSHOT.with_name("agentgraph-web-diff.png")))


def test_subagent_progress_shows_in_the_page(page: Any) -> None:
    page.click("#new-session")
    page.fill("#prompt", DELEGATE_WORD)
    page.press("#prompt", "Enter")
    page.locator(".msg.assistant", has_text="The helper reported back.").wait_for()
    lines = page.locator(".line-note.subagent").all_inner_texts()
    assert len(lines) == 3, lines
    assert lines[0].startswith("↳ subagent-") and SUB_TASK[:20] in lines[0]
    assert "read_file notes.txt" in lines[1]
    assert " done · 2 steps · " in lines[2]
    call = page.locator(".tool[data-call]", has_text="call_subagent")
    call.locator("summary").click()  # unfolds the tool's output
    assert "Report: the notes say hello." in call.locator("pre.output").inner_text()
    page.locator("#send:not([disabled])").wait_for()


def test_a_terminal_session_continues_in_the_page_and_back(web: Web, page: Any) -> None:
    from playwright.sync_api import expect

    page.fill("#search", "terminal question")
    expect(page.locator("#sessions li")).to_have_count(1)
    page.locator(f"#sessions li[data-thread='{TERMINAL_THREAD}']").click()
    page.locator(".msg.user", has_text=TERMINAL_PROMPT).wait_for()
    page.locator(".msg.assistant", has_text="Answer given in the terminal.").wait_for()
    page.fill("#prompt", "and now from the page")
    page.press("#prompt", "Enter")
    page.locator(".msg.assistant strong", has_text="Hello").wait_for()
    page.locator("#send:not([disabled])").wait_for()
    # Back in the terminal: the page's turn released the session.
    again = run_cli(
        ["run", TERMINAL_PROMPT, "--thread", TERMINAL_THREAD], cwd=web.workspace, env=web.env
    )
    assert again.returncode == 0, again.stderr
    page.fill("#search", "")


def test_a_session_held_by_the_terminal_is_refused_in_one_line(web: Web) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from agentgraph.config import Settings\n"
            "from agentgraph.persistence import open_store\n"
            "with open_store(Settings()) as store:\n"
            f"    store.leases.acquire({TERMINAL_THREAD!r}, 'continue')\n"
            "    print('held', flush=True)\n"
            "    sys.stdin.read()\n",
        ],
        cwd=web.workspace,
        env=web.env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        status, body = _post_op(
            web, {"op": "submit_turn", "thread_id": TERMINAL_THREAD, "text": "hi"}
        )
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=10)
    assert status == 409
    assert body["error"].startswith(f"cannot continue session {TERMINAL_THREAD[:12]}: it is in use")
    assert "\n" not in body["error"]


def test_two_tabs_see_the_same_turn_and_only_one_submits(web: Web, page: Any) -> None:
    from playwright.sync_api import expect

    page.locator(f"#sessions li[data-thread='{TERMINAL_THREAD}']").click()
    page.locator(".msg.user", has_text="and now from the page").wait_for()
    second = page.context.new_page()
    try:
        second.set_default_timeout(UI_TIMEOUT_MS)
        second.goto(web.base + "/")  # the cookie the first tab got is enough
        second.locator(f"#sessions li[data-thread='{TERMINAL_THREAD}']").click()
        second.locator(".msg.user", has_text="and now from the page").wait_for()
        page.fill("#prompt", f"{SLOW_WORD} please")
        page.press("#prompt", "Enter")
        # The other tab sees the message and the answer streaming...
        second.locator(".msg.user", has_text=f"{SLOW_WORD} please").wait_for()
        second.locator(".msg.assistant.streaming", has_text="Slowly").wait_for()
        # ...and cannot submit while the turn runs (the server refuses a second turn).
        expect(second.locator("#send")).to_be_disabled()
        status, body = _post_op(
            web, {"op": "submit_turn", "thread_id": TERMINAL_THREAD, "text": "me too"}
        )
        assert status == 409 and "is running here" in body["error"]
        for tab in (page, second):
            tab.locator(".msg.assistant", has_text="word29 end.").wait_for()
            tab.locator("#send:not([disabled])").wait_for()
    finally:
        second.close()


def test_stop_cancels_a_turn_and_the_session_goes_on(web: Web, page: Any) -> None:
    page.click("#new-session")
    page.fill("#prompt", f"{SLOW_WORD} now")
    page.press("#prompt", "Enter")
    page.locator(".msg.assistant.streaming", has_text="Slowly").wait_for()
    page.click("#stop")
    page.locator(".line-note.error", has_text="interrupted").wait_for()
    page.locator("#send:not([disabled])").wait_for()
    # The interrupted turn left a valid session: the strict model server takes the next.
    page.fill("#prompt", "say hello after the stop")
    page.press("#prompt", "Enter")
    page.locator(".msg.assistant strong", has_text="Hello").wait_for()
    page.locator("#send:not([disabled])").wait_for()


def test_a_model_switched_in_the_page_runs_the_next_turn(web: Web, page: Any) -> None:
    page.fill("#search", "say hello")
    page.locator("#sessions li .title", has_text="say hello").first.click()
    page.locator(".msg.user", has_text="say hello").wait_for()
    assert page.input_value("#model") == "gpt-4o-mini"
    page.fill("#model", "gpt-4o")
    page.press("#model", "Enter")
    page.locator(".line-note.notice", has_text="model: gpt-4o from the next turn on").wait_for()
    page.fill("#prompt", "say hello on the new model")
    page.press("#prompt", "Enter")
    page.locator(".msg.assistant strong", has_text="Hello").nth(1).wait_for()
    page.locator("#send:not([disabled])").wait_for()
    asked = [r for r in web.model_server.log if "say hello on the new model" in json.dumps(r.body)]
    assert asked and {r.body.get("model") for r in asked} == {"gpt-4o"}
    # A model the endpoint does not serve is refused in one line, and nothing changes.
    page.fill("#model", "gpt-nonesuch")
    page.press("#model", "Enter")
    refused = page.locator(".line-note.error", has_text="gpt-nonesuch")
    refused.wait_for()
    assert "gpt-4o" in refused.inner_text()
    # A model that cannot be built (its provider's package is not installed) is one
    # line, and nothing changes.
    page.fill("#model", "groq:some-model")
    page.press("#model", "Enter")
    error = page.locator(".line-note.error", has_text="groq:some-model")
    error.wait_for()
    assert "needs the langchain-groq package" in error.inner_text()
    page.fill("#search", "")


def test_the_context_panel_draws_the_prompt_over_the_session(web: Web, page: Any) -> None:
    page.fill("#search", "")
    page.locator(f"#sessions li[data-thread='{TERMINAL_THREAD}']").click()
    page.locator(".msg.user", has_text="and now from the page").wait_for()
    page.click("#toggle-context")
    chart = page.locator("#context-chart svg[data-type=context-chart]")
    chart.wait_for()
    # One point per stored model reply of the session (the terminal's and the page's).
    status, body = _get(
        f"{web.base}/api/sessions/{TERMINAL_THREAD}/context",
        Authorization=f"Bearer {web.token}",
    )
    calls = json.loads(body)["calls"]
    assert status == 200 and len(calls) >= 3
    assert chart.locator("circle[data-type=call-point]").count() == len(calls)
    page.locator("#context-categories [data-type=category-bar] span").first.wait_for()
    assert "tokens" in page.locator("#context-summary").inner_text()
    # /compact from the page: the chart marks where it came.
    page.click("#compact")
    page.locator(".line-note.compaction", has_text="Compacted (manual)").wait_for()
    chart.locator("line[data-type=compaction]").wait_for(state="attached")
    page.screenshot(path=str(SCREENSHOT.with_name("agentgraph-web-compacted.png")))
    page.screenshot(path=str(SCREENSHOT), full_page=True)


def test_a_port_it_cannot_listen_on_is_one_line(web: Web) -> None:
    taken = int(web.base.rsplit(":", 1)[1])  # the module's server listens there
    for port, why in ((taken, "Address already in use"), (99999, "port must be 0-65535")):
        res = run_cli(["web", "--port", str(port)], cwd=web.workspace, env=web.env)
        assert res.returncode == 2 and res.stdout == ""
        assert res.stderr.startswith(f"agentgraph: cannot listen on 127.0.0.1:{port}: ")
        assert why in res.stderr and res.stderr.count("\n") == 1
