"""A strict, scripted Anthropic Messages API server on loopback, with a prompt cache.

``FakeAnthropicServer`` is a real HTTP server (stdlib ``ThreadingHTTPServer`` in a
thread) that ``ChatAnthropic(base_url=server.url, api_key=...)`` talks to unchanged:
``POST /v1/messages``, streamed (SSE) or not. It answers from a script and rejects, with
Anthropic's 400 body, what the real API rejects here: roles other than user/assistant,
empty text, a ``tool_use`` without its ``tool_result`` in the next message (or the
reverse), bad tool names, and more than :data:`CACHE_BREAKPOINTS_MAX` ``cache_control``
breakpoints.

Prompt caching as Anthropic does it (only what a request marks is cached):

* The request is a sequence of blocks in Anthropic's order — each tool, each system
  block, each message's content blocks. A block carrying ``cache_control`` is a
  breakpoint; a top-level ``cache_control`` (automatic caching) is one more, on the last
  block.
* At each breakpoint whose prefix has at least ``cache_min_tokens`` the prefix is
  written to the cache. A read is the longest prefix ending at a breakpoint or at most
  :data:`CACHE_LOOKBACK_BLOCKS` blocks before one that an earlier request wrote.
* Usage reports ``cache_read_input_tokens`` (that prefix), ``cache_creation_input_tokens``
  (from there to the last breakpoint written) and ``input_tokens`` (the rest), tokens
  being :data:`CHARS_PER_TOKEN` characters of each block's JSON (``cache_control``
  itself excluded).

Script replies: ``{"content": "text"}``, ``{"tool_calls": [{"name": ..., "arguments":
{...}, "id"?: ...}], "content"?: ...}``, or ``callable(request_json) -> reply``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

CHARS_PER_TOKEN = 4
# Anthropic: at most 4 breakpoints a request; a hit is looked for up to 20 blocks back.
CACHE_BREAKPOINTS_MAX = 4
CACHE_LOOKBACK_BLOCKS = 20
# The smallest cacheable prefix of Claude Sonnet / Opus 4.x models.
CACHE_MIN_TOKENS = 1024
STREAM_TEXT_PIECE_CHARS = 16
STREAM_ARGS_PIECE_CHARS = 8
SERVER_STOP_TIMEOUT_S = 5.0
SERVER_POLL_INTERVAL_S = 0.02
DEFAULT_API_KEY = "sk-ant-test-fake-key"
MESSAGES_PATH = "/v1/messages"
ROLES = ("user", "assistant")
TOOL_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")

# Anthropic's real error texts.
TOO_MANY_BREAKPOINTS_TEXT = "A maximum of 4 blocks with cache_control may be provided. Found {n}."
UNANSWERED_TEXT = (
    "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately "
    "after: {ids}. Each `tool_use` block must have a corresponding `tool_result` block in "
    "the next message."
)
ORPHAN_TEXT = (
    "messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: "
    "{id}. Each `tool_result` block must have a corresponding `tool_use` block in the "
    "previous message."
)
EMPTY_TEXT = "messages: text content blocks must be non-empty"
BAD_KEY_TEXT = "invalid x-api-key"

Reply = Mapping[str, Any] | str | Callable[[dict[str, Any]], Any]


def anthropic_error(message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    """Anthropic's error body."""
    return {"type": "error", "error": {"type": kind, "message": message}}


@dataclass(frozen=True)
class Block:
    """One cacheable block of a request.

    Attributes:
        where: ``tools[3]``, ``system[0]``, ``messages[4].content[1]``.
        key: Its JSON without ``cache_control`` (what the cache compares).
        tokens: Its size in this server's tokens.
        marked: It carries a ``cache_control`` breakpoint.
    """

    where: str
    key: str
    tokens: int
    marked: bool


def _block(where: str, value: Any) -> Block:
    marked = isinstance(value, Mapping) and "cache_control" in value
    bare = {k: v for k, v in value.items() if k != "cache_control"} if marked else value
    key = json.dumps(bare, sort_keys=True, ensure_ascii=False)
    return Block(where, key, -(-len(key) // CHARS_PER_TOKEN), marked)


def request_blocks(body: Mapping[str, Any]) -> list[Block]:
    """The request's blocks in Anthropic's cache order: tools, system, messages."""
    blocks = [_block(f"tools[{i}]", t) for i, t in enumerate(body.get("tools") or [])]
    system = body.get("system")
    if isinstance(system, str) and system:
        blocks.append(_block("system[0]", {"type": "text", "text": system}))
    elif isinstance(system, list):
        blocks += [_block(f"system[{i}]", b) for i, b in enumerate(system)]
    for i, message in enumerate(body.get("messages") or []):
        role = message.get("role")
        content = message.get("content")
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        for j, part in enumerate(parts or []):
            keyed = {"role": role, **part} if isinstance(part, Mapping) else part
            blocks.append(_block(f"messages[{i}].content[{j}]", keyed))
    return blocks


def validate(body: Any) -> list[str]:
    """Why the real API would reject ``body`` (empty: it would accept it)."""
    if not isinstance(body, Mapping):
        return ["the request body must be a JSON object"]
    errors: list[str] = []
    if not isinstance(body.get("max_tokens"), int):
        errors.append("max_tokens: Field required")
    for i, tool in enumerate(body.get("tools") or []):
        if not TOOL_NAME_RE.match(str(tool.get("name"))) or "input_schema" not in tool:
            errors.append(f"tools.{i}: invalid tool definition")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return [*errors, "messages: at least one message is required"]
    open_calls: set[str] = set()
    for i, message in enumerate(messages):
        role = message.get("role")
        if role not in ROLES:
            errors.append(f"messages.{i}.role: Input should be 'user' or 'assistant'")
            continue
        content = message.get("content")
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        last = i == len(messages) - 1
        answered: set[str] = set()
        for j, part in enumerate(parts or []):
            kind = part.get("type")
            if kind == "text" and not part.get("text") and not (last and role == "assistant"):
                errors.append(EMPTY_TEXT)
            if kind == "tool_result":
                call = str(part.get("tool_use_id"))
                if call not in open_calls:
                    errors.append(ORPHAN_TEXT.format(i=i, j=j, id=call))
                answered.add(call)
        if open_calls - answered:
            errors.append(
                UNANSWERED_TEXT.format(i=i - 1, ids=", ".join(sorted(open_calls - answered)))
            )
        open_calls = (
            {str(p.get("id")) for p in parts or [] if p.get("type") == "tool_use"}
            if role == "assistant"
            else set()
        )
    if open_calls:
        errors.append(
            UNANSWERED_TEXT.format(i=len(messages) - 1, ids=", ".join(sorted(open_calls)))
        )
    marks = sum(b.marked for b in request_blocks(body)) + bool(body.get("cache_control"))
    if marks > CACHE_BREAKPOINTS_MAX:
        errors.append(TOO_MANY_BREAKPOINTS_TEXT.format(n=marks))
    return errors


@dataclass
class CacheReport:
    """How one answered request met the prompt cache.

    Attributes:
        breakpoints: Where its breakpoints were (block positions, top-level resolved).
        prompt_tokens: All its input tokens.
        read: Tokens read from the cache (the prefix an earlier request wrote).
        written: Tokens written to the cache after ``read``.
    """

    breakpoints: list[str]
    prompt_tokens: int
    read: int
    written: int


@dataclass
class _State:
    script: list[Reply]
    cursor: int = 0
    requests: list[dict[str, Any]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    reports: list[CacheReport] = field(default_factory=list)
    usage: list[dict[str, int]] = field(default_factory=list)
    cache: set[str] = field(default_factory=set)


class FakeAnthropicServer:
    """Scripted, strict Anthropic Messages API on ``127.0.0.1`` (see module docstring).

    Attributes:
        violations: One string per rejected request (assert ``== []``).
        cache_reports: One :class:`CacheReport` per answered request, in order.
        reported_usage: The usage block of every answer, in order.
    """

    def __init__(
        self,
        script: Sequence[Reply] = (),
        *,
        api_key: str = DEFAULT_API_KEY,
        cache_min_tokens: int = CACHE_MIN_TOKENS,
    ) -> None:
        """Configure the server (it does not listen until started).

        Args:
            script: Replies consumed in order; the last one repeats once it runs out.
            api_key: The ``x-api-key`` every request must carry.
            cache_min_tokens: Shorter prefixes are not cached.
        """
        self.api_key = api_key
        self.cache_min_tokens = cache_min_tokens
        self._state = _State(list(script))
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> FakeAnthropicServer:
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        httpd.daemon_threads = True
        httpd.owner = self  # type: ignore[attr-defined]
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, args=(SERVER_POLL_INTERVAL_S,), daemon=True
        )
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(SERVER_STOP_TIMEOUT_S)

    @property
    def url(self) -> str:
        """Base URL for ``ChatAnthropic(base_url=...)`` / ``ANTHROPIC_BASE_URL``."""
        assert self._httpd is not None, "the server is not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Parsed bodies of every ``/v1/messages`` request, accepted or rejected."""
        with self._lock:
            return list(self._state.requests)

    @property
    def violations(self) -> list[str]:
        with self._lock:
            return list(self._state.violations)

    @property
    def cache_reports(self) -> list[CacheReport]:
        with self._lock:
            return list(self._state.reports)

    @property
    def reported_usage(self) -> list[dict[str, int]]:
        with self._lock:
            return list(self._state.usage)

    def _next_reply(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            script = self._state.script
            reply = script[min(self._state.cursor, len(script) - 1)] if script else "done"
            self._state.cursor += 1
        if callable(reply):
            reply = reply(body)
        if isinstance(reply, str):
            reply = {"content": reply}
        calls = [
            {
                "id": call.get("id") or f"toolu_fake{next(self._ids):04d}",
                "name": call["name"],
                "input": dict(call.get("arguments") or {}),
            }
            for call in reply.get("tool_calls") or []
        ]
        return {"content": str(reply.get("content") or ""), "tool_calls": calls}

    def _cache(self, body: Mapping[str, Any]) -> CacheReport:
        """Read the longest cached prefix, write this request's breakpoints."""
        blocks = request_blocks(body)
        marks = [n for n, b in enumerate(blocks) if b.marked]
        if body.get("cache_control") and blocks:
            marks.append(len(blocks) - 1)  # automatic caching: the last block
        marks = sorted(set(marks))
        sizes = list(itertools.accumulate(b.tokens for b in blocks))
        hashes: list[str] = []
        running = hashlib.sha256()
        for block in blocks:
            running.update(block.key.encode() + b"\x00")
            hashes.append(running.hexdigest())
        read_end = -1
        with self._lock:
            for mark in marks:
                for n in range(mark, max(-1, mark - CACHE_LOOKBACK_BLOCKS - 1), -1):
                    if hashes[n] in self._state.cache:
                        read_end = max(read_end, n)
                        break
            written_end = read_end
            for mark in marks:
                if sizes[mark] >= self.cache_min_tokens:
                    self._state.cache.add(hashes[mark])
                    written_end = max(written_end, mark)
        read = sizes[read_end] if read_end >= 0 else 0
        written = (sizes[written_end] if written_end >= 0 else 0) - read
        total = sizes[-1] if sizes else 0
        return CacheReport([blocks[n].where for n in marks], total, read, written)

    def _answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any] | None, Any]:
        """``(status, error body or None, (reply, usage))`` for one request."""
        errors = validate(body)
        if errors:
            with self._lock:
                self._state.violations.extend(errors)
            return 400, anthropic_error(errors[0]), None
        reply = self._next_reply(body)
        report = self._cache(body)
        out_chars = len(reply["content"]) + sum(
            len(json.dumps(c["input"])) for c in reply["tool_calls"]
        )
        usage = {
            "input_tokens": report.prompt_tokens - report.read - report.written,
            "cache_creation_input_tokens": report.written,
            "cache_read_input_tokens": report.read,
            "output_tokens": max(1, -(-out_chars // CHARS_PER_TOKEN)),
        }
        with self._lock:
            self._state.reports.append(report)
            self._state.usage.append(usage)
        return 200, None, (reply, usage)

    def _record(self, body: Any) -> None:
        with self._lock:
            self._state.requests.append(body)


def _content(reply: Mapping[str, Any]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if reply["content"]:
        blocks.append({"type": "text", "text": reply["content"]})
    blocks += [{"type": "tool_use", **call} for call in reply["tool_calls"]]
    return blocks


def _stop_reason(reply: Mapping[str, Any]) -> str:
    return "tool_use" if reply["tool_calls"] else "end_turn"


def message_body(
    msg_id: str, model: str, reply: Mapping[str, Any], usage: Mapping[str, int]
) -> dict[str, Any]:
    """A non-streamed ``message`` answer."""
    return {
        "id": msg_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": _content(reply),
        "stop_reason": _stop_reason(reply),
        "stop_sequence": None,
        "usage": dict(usage),
    }


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def stream_events(
    msg_id: str, model: str, reply: Mapping[str, Any], usage: Mapping[str, int]
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The ``(event, data)`` pairs Anthropic streams for one answer."""
    start = message_body(msg_id, model, reply, {**usage, "output_tokens": 1})
    yield (
        "message_start",
        {"type": "message_start", "message": {**start, "content": [], "stop_reason": None}},
    )
    for index, block in enumerate(_content(reply)):
        if block["type"] == "text":
            yield (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                },
            )
            for piece in _pieces(block["text"], STREAM_TEXT_PIECE_CHARS):
                delta = {"type": "text_delta", "text": piece}
                yield (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
        else:
            head = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            yield (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": head},
            )
            for piece in _pieces(json.dumps(block["input"]), STREAM_ARGS_PIECE_CHARS):
                delta = {"type": "input_json_delta", "partial_json": piece}
                yield (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    # message_delta carries the cumulative usage (the figures langchain-anthropic keeps).
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": _stop_reason(reply), "stop_sequence": None},
            "usage": dict(usage),
        },
    )
    yield "message_stop", {"type": "message_stop"}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return  # keep test output clean

    def _send_json(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", f"req_fake{id(self):x}")
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def do_POST(self) -> None:
        owner: FakeAnthropicServer = self.server.owner  # type: ignore[attr-defined]
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if urlsplit(self.path).path.rstrip("/") != MESSAGES_PATH:
            self._send_json(404, anthropic_error(f"Not found: {self.path}", "not_found_error"))
            return
        # The SDK sends the key as x-api-key, or as a bearer token for some endpoints.
        bearer = self.headers.get("Authorization", "").removeprefix("Bearer ")
        if owner.api_key not in (self.headers.get("x-api-key"), bearer):
            self._send_json(401, anthropic_error(BAD_KEY_TEXT, "authentication_error"))
            return
        body: Any = None
        with suppress(ValueError):
            body = json.loads(raw)
        owner._record(body)
        status, error, answer = owner._answer(body)
        if error is not None:
            self._send_json(status, error)
            return
        reply, usage = answer
        msg_id = f"msg_fake{next(owner._ids):04d}"
        model = str(body.get("model"))
        if not body.get("stream"):
            self._send_json(200, message_body(msg_id, model, reply, usage))
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        for event, data in stream_events(msg_id, model, reply, usage):
            self._write_chunk(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
        self._write_chunk(b"")  # a zero-length chunk ends the body
