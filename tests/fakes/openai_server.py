"""A strict, scripted OpenAI-compatible chat-completions server on loopback.

``FakeOpenAIServer`` is a real HTTP server (stdlib ``ThreadingHTTPServer`` in a thread)
that ``ChatOpenAI(base_url=server.url, api_key=...)`` talks to unchanged. It answers
from a script, and in strict mode it rejects — with the provider's real 400 body — any
history a strict provider would reject (orphan or unanswered tool calls, bad roles, bad
tool schemas...). It can also enforce a context window (answering an overflow with
OpenAI's or llama-server's body), require an API key, inject 429/5xx errors and drop
connections mid-stream.

Script replies (JSON-able dicts, also the ``--script FILE.json`` format of the CLI):

* ``{"content": "text"}`` — a text answer (a bare string is accepted too).
* ``{"tool_calls": [{"name": "read_file", "arguments": {...}, "id"?: "call_1"}],
  "content"?: "..."}`` — tool calls (ids ``call_<n>`` filled when absent; an explicit
  ``""`` is sent as is).
* ``{"error": {"status": 429, "body": {...} | "text", "headers": {"Retry-After": "1"}}}``
* ``{"reset": true, "after_chunks"?: 2, "hard"?: false}`` — drop the connection.
* optional on answers: ``"finish_reason"``, ``"usage"`` (overrides of the computed
  ``prompt_tokens``/``completion_tokens``), ``"chunk_delay_s"`` (pause between SSE chunks),
  ``"first_byte_delay_s"`` (hold the reply that long before sending any byte, headers
  included, as a provider queueing the request does; cut short when the server stops).
* in-process only: ``callable(request_json) -> reply``.

Usage reports ``prompt_tokens_details.cached_tokens`` the way OpenAI's automatic prompt
cache does: the longest prefix of whole messages (same model and tools) that an earlier
answered request already sent, counted with :func:`token_estimate`, rounded down to
``cache_step_tokens`` and 0 under ``cache_min_tokens`` (OpenAI: 128 and 1024).

Run standalone for subprocess tests::

    python -m tests.fakes.openai_server --script replies.json --port 0 --window 4096

It prints ``READY <url>`` on stdout once listening and, with ``--report FILE``, writes the
recorded requests and violations as JSON when it stops (SIGTERM/SIGINT).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

CHARS_PER_TOKEN = 4
# OpenAI's automatic prompt cache: prompts from 1,024 tokens, in steps of 128 tokens.
CACHE_MIN_TOKENS = 1024
CACHE_STEP_TOKENS = 128
MESSAGE_OVERHEAD_TOKENS = 4
IMAGE_PART_TOKENS = 85  # OpenAI's low-detail image cost
TOOL_NAME_MAX_CHARS = 64
STREAM_ARGS_PIECE_CHARS = 8
RESET_DEFAULT_AFTER_CHUNKS = 2
RESET_DEFAULT_CONTENT = "This answer is cut off by a dropped connection before it ends"
DEFAULT_MODEL = "fake-model"
DEFAULT_API_KEY = "sk-test-fake-key"
SERVER_STOP_TIMEOUT_S = 5.0
# How often serve_forever checks for shutdown: bounds how long stop() blocks.
SERVER_POLL_INTERVAL_S = 0.02
PROCESS_READY_TIMEOUT_S = 20.0
PROCESS_STOP_TIMEOUT_S = 10.0
CLI_POLL_INTERVAL_S = 0.2
KEY_VISIBLE_PREFIX_CHARS = 3
KEY_VISIBLE_SUFFIX_CHARS = 4
CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
MODELS_PATHS = ("/v1/models", "/models")
# How the server states the window: not at all; as llama.cpp or vLLM in GET /v1/models;
# as Ollama in GET /api/ps, once a chat request has loaded the model; as LM Studio in
# GET /api/v1/models, for a model loaded by a chat request or from the start.
ModelsWindow = Literal[
    "none", "llama.cpp", "llama.cpp-props", "vllm", "ollama", "lmstudio", "lmstudio-loaded"
]
OLLAMA_PS_PATH = "/api/ps"
LLAMA_PROPS_PATH = "/props"
LMSTUDIO_MODELS_PATH = "/api/v1/models"
LMSTUDIO_MAX_CONTEXT_TOKENS = 32_768

TOOL_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]+$")
VALID_ROLES = ("system", "assistant", "user", "function", "tool", "developer")
INSTRUCTION_ROLES = ("system", "developer")
USER_PART_TYPES = ("text", "image_url", "input_audio", "file")
ASSISTANT_PART_TYPES = ("text", "refusal")
TEXT_PART_TYPES = ("text",)

Reply = Mapping[str, Any] | str | Callable[[dict[str, Any]], Any]
OnExhausted = Literal["repeat_last", "raise", "answer"]
# How the server fills tool-call ids, as providers and local servers really do:
# ``unique`` (OpenAI), ``duplicate`` (one id for every call of a reply), ``reused``
# (``call_0``, ``call_1``… again in every reply), ``empty`` (``""``), ``constant``
# (``call_0`` everywhere). Ids given explicitly in the script win.
IdMode = Literal["unique", "duplicate", "reused", "empty", "constant"]
ID_MODES: tuple[IdMode, ...] = ("unique", "duplicate", "reused", "empty", "constant")
EXHAUSTED_ANSWER = "done"
REPLY_KEYS = frozenset(
    {"content", "tool_calls", "error", "reset", "after_chunks", "hard", "finish_reason"}
    | {"usage", "chunk_delay_s", "first_byte_delay_s"}
)

# Rule names, usable in ``disabled_rules``.
RULE_REQUEST = "request_shape"
RULE_ROLE = "valid_role"
RULE_CONTENT = "content_type"
RULE_NON_EMPTY = "non_empty_content"
RULE_FIRST_USER = "first_message_user"
RULE_TOOL_CALL_SHAPE = "tool_call_shape"
RULE_TOOL_CALL_UNIQUE = "tool_call_id_unique"
RULE_UNANSWERED = "tool_call_unanswered"
RULE_ORPHAN = "tool_message_orphan"
RULE_TOOLS_SCHEMA = "tools_schema"
RULE_TOOL_CHOICE = "tool_choice"
RULE_TOOLS_REQUIRED = "tool_history_needs_tools"
ALL_RULES = frozenset(
    {RULE_REQUEST, RULE_ROLE, RULE_CONTENT, RULE_NON_EMPTY, RULE_FIRST_USER}
    | {RULE_TOOL_CALL_SHAPE, RULE_TOOL_CALL_UNIQUE, RULE_UNANSWERED, RULE_ORPHAN}
    | {RULE_TOOLS_SCHEMA, RULE_TOOL_CHOICE, RULE_TOOLS_REQUIRED}
)

# Real provider texts (OpenAI keeps its "preceeding" typo).
ORPHAN_TOOL_TEXT = (
    "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
    "message with 'tool_calls'."
)
UNANSWERED_TEXT = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding "
    "to each 'tool_call_id'. The following tool_call_ids did not have response messages: {ids}"
)
OVERFLOW_TEXT = (
    "This model's maximum context length is {window} tokens. However, your messages "
    "resulted in {tokens} tokens. Please reduce the length of the messages."
)
OVERFLOW_WITH_COMPLETION_TEXT = (
    "This model's maximum context length is {window} tokens. However, you requested "
    "{total} tokens ({tokens} in the messages, {completion} in the completion). Please "
    "reduce the length of the messages or completion."
)
# llama-server (exceed_context_size_error): the text QA saw from a real server, with
# the numbers also in fields (github.com/ggml-org/llama.cpp/pull/15780).
LLAMA_CPP_OVERFLOW_TEXT = (
    "request ({tokens} tokens) exceeds the available context size ({window} tokens), "
    "try increasing it"
)
LLAMA_CPP_OVERFLOW_TYPE = "exceed_context_size_error"
HTTP_BAD_REQUEST = 400
# Which provider's body a context overflow is answered with.
OverflowStyle = Literal["openai", "llama.cpp"]
OVERFLOW_STYLES: tuple[OverflowStyle, ...] = ("openai", "llama.cpp")
NO_KEY_TEXT = (
    "You didn't provide an API key. You need to provide your API key in an Authorization "
    "header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password "
    "field (with blank username) if you're accessing the API from your browser and are "
    "prompted for a username and password. You can obtain an API key from "
    "https://platform.openai.com/account/api-keys."
)
BAD_KEY_TEXT = (
    "Incorrect API key provided: {masked}. You can find your API key at "
    "https://platform.openai.com/account/api-keys."
)
MODEL_NOT_FOUND_TEXT = "The model `{model}` does not exist or you do not have access to it."
BAD_JSON_TEXT = (
    "We could not parse the JSON body of your request. (HINT: This likely means you aren't "
    "using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was "
    "sent was not valid JSON. If you have trouble figuring out how to fix this, please "
    "contact us through our help center at help.openai.com.)"
)
NO_MODEL_TEXT = "you must provide a model parameter"


class ScriptExhaustedError(AssertionError):
    """The server got more chat requests than its script has replies (``on_exhausted="raise"``)."""


@dataclass(frozen=True)
class Violation:
    """One reason a strict provider would reject a request.

    Attributes:
        rule: Rule name (one of ``ALL_RULES``).
        message: The provider's error message.
        param: The ``param`` field of the error body (e.g. ``"messages.[3].role"``).
    """

    rule: str
    message: str
    param: str | None

    def __str__(self) -> str:
        return f"{self.rule} at {self.param}: {self.message}"

    def error_body(self) -> dict[str, Any]:
        """Return the OpenAI-shaped 400 body for this violation."""
        return openai_error(self.message, param=self.param)


@dataclass
class RecordedRequest:
    """One HTTP request the server received.

    Attributes:
        method: ``GET`` or ``POST``.
        path: URL path.
        headers: Header names lower-cased.
        body: Parsed JSON body, or ``None``.
        raw: The raw body bytes (for leak scans).
        status: Status answered (0 for a dropped connection).
    """

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes = b""
    status: int = 0


def openai_error(
    message: str,
    *,
    type: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
) -> dict[str, Any]:
    """Build an OpenAI error body.

    Args:
        message: Error message.
        type: Error type.
        param: Offending parameter.
        code: Error code.

    Returns:
        ``{"error": {"message", "type", "param", "code"}}``.
    """
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def llama_cpp_overflow_error(tokens: int, window: int) -> dict[str, Any]:
    """llama-server's body for a prompt larger than its ``--ctx-size``.

    Args:
        tokens: Prompt tokens of the request.
        window: The server's context size.

    Returns:
        ``{"error": {"code", "message", "type", "n_prompt_tokens", "n_ctx"}}``.
    """
    return {
        "error": {
            "code": HTTP_BAD_REQUEST,
            "message": LLAMA_CPP_OVERFLOW_TEXT.format(tokens=tokens, window=window),
            "type": LLAMA_CPP_OVERFLOW_TYPE,
            "n_prompt_tokens": tokens,
            "n_ctx": window,
        }
    }


def _ceil_div(n: int, d: int) -> int:
    return -(-n // d)


def _content_size(content: Any) -> tuple[int, int]:
    """Return (text chars, image parts) of a message ``content`` field."""
    if isinstance(content, str):
        return len(content), 0
    chars = images = 0
    if isinstance(content, list):
        for part in content:
            if not isinstance(part, Mapping):
                continue
            if isinstance(part.get("text"), str):
                chars += len(part["text"])
            elif isinstance(part.get("refusal"), str):
                chars += len(part["refusal"])
            elif part.get("type") == "image_url":
                images += 1
    return chars, images


def token_estimate(request_json: Mapping[str, Any]) -> int:
    """Approximate the prompt tokens of a chat-completions request.

    ``ceil(chars / 4) + 4 per message + 85 per image``, where chars counts every message's
    text content, every tool call's ``arguments`` string and the compact JSON of ``tools``.

    Args:
        request_json: The request body.

    Returns:
        Estimated prompt tokens.
    """
    messages = request_json.get("messages")
    if not isinstance(messages, list):
        messages = []
    chars = images = 0
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        c, i = _content_size(message.get("content"))
        chars += c
        images += i
        for tc in message.get("tool_calls") or []:
            function = tc.get("function") if isinstance(tc, Mapping) else None
            if isinstance(function, Mapping) and isinstance(function.get("arguments"), str):
                chars += len(function["arguments"])
    tools = request_json.get("tools")
    if tools:
        chars += len(json.dumps(tools, separators=(",", ":"), sort_keys=True))
    return (
        _ceil_div(chars, CHARS_PER_TOKEN)
        + MESSAGE_OVERHEAD_TOKENS * len(messages)
        + IMAGE_PART_TOKENS * images
    )


# --- strict validation (pure) -----------------------------------------------------------


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _check_content(index: int, message: Mapping[str, Any], last: bool) -> list[Violation]:
    role = message.get("role")
    param = f"messages.[{index}].content"
    content = message.get("content")
    has_calls = role == "assistant" and bool(message.get("tool_calls"))
    allowed = {
        "user": USER_PART_TYPES,
        "assistant": ASSISTANT_PART_TYPES,
        "function": TEXT_PART_TYPES,
    }.get(str(role), TEXT_PART_TYPES)
    if content is None:
        if has_calls or role == "function":
            return []
        if role == "assistant":
            msg = "Invalid value for 'content': expected a string, got null."
        else:
            msg = (
                f"Invalid type for '{param}': expected one of a string or array of objects, "
                "but got null instead."
            )
        return [Violation(RULE_CONTENT, msg, param)]
    if isinstance(content, list):
        for p, part in enumerate(content):
            ptype = part.get("type") if isinstance(part, Mapping) else None
            if ptype not in allowed:
                supported = ", ".join(f"'{t}'" for t in allowed)
                msg = f"Invalid value: '{ptype}'. Supported values are: {supported}."
                return [Violation(RULE_CONTENT, msg, f"{param}.[{p}].type")]
            if ptype in ("text", "refusal") and not isinstance(part.get(ptype), str):
                msg = f"Missing required parameter: '{param}.[{p}].{ptype}'."
                return [Violation(RULE_CONTENT, msg, f"{param}.[{p}].{ptype}")]
    elif not isinstance(content, str):
        msg = (
            f"Invalid type for '{param}': expected one of a string or array of objects, but "
            f"got {_type_name(content)} instead."
        )
        return [Violation(RULE_CONTENT, msg, param)]
    if isinstance(content, str):
        empty = not content.strip()
    else:
        texts = [
            str(p.get(p.get("type"), "")) for p in content if p.get("type") in ("text", "refusal")
        ]
        others = len(content) - len(texts)
        empty = others == 0 and not "".join(texts).strip()
    # Anthropic rejects empty user turns and empty assistant turns without tool calls
    # (only a final assistant prefill may be empty).
    if empty and (role == "user" or (role == "assistant" and not has_calls and not last)):
        msg = (
            f"messages.{index}: all messages must have non-empty content except for the "
            "optional final assistant message"
        )
        return [Violation(RULE_NON_EMPTY, msg, param)]
    return []


def _check_tool_calls(
    index: int, message: Mapping[str, Any], seen: set[str]
) -> tuple[list[str], list[Violation]]:
    calls = message.get("tool_calls")
    param = f"messages.[{index}].tool_calls"
    if not isinstance(calls, list) or not calls:
        msg = (
            f"Invalid '{param}': empty array. Expected an array with minimum length 1, but got "
            "an empty array instead."
        )
        return [], [Violation(RULE_TOOL_CALL_SHAPE, msg, param)]
    ids: list[str] = []
    out: list[Violation] = []
    for c, call in enumerate(calls):
        cparam = f"{param}.[{c}]"
        if not isinstance(call, Mapping):
            out.append(Violation(RULE_TOOL_CALL_SHAPE, f"Invalid type for '{cparam}'.", cparam))
            continue
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            msg = f"Missing required parameter: '{cparam}.id'."
            out.append(Violation(RULE_TOOL_CALL_SHAPE, msg, f"{cparam}.id"))
        elif call_id in seen:
            msg = f"messages.{index}.content.{c}: `tool_use` ids must be unique"
            out.append(Violation(RULE_TOOL_CALL_UNIQUE, msg, f"{cparam}.id"))
        else:
            seen.add(call_id)
            ids.append(call_id)
        if call.get("type") != "function":
            msg = f"Invalid value: '{call.get('type')}'. Supported values are: 'function'."
            out.append(Violation(RULE_TOOL_CALL_SHAPE, msg, f"{cparam}.type"))
        function = call.get("function")
        if not isinstance(function, Mapping):
            msg = f"Missing required parameter: '{cparam}.function'."
            out.append(Violation(RULE_TOOL_CALL_SHAPE, msg, f"{cparam}.function"))
            continue
        name = function.get("name")
        if not isinstance(name, str) or not TOOL_NAME_RE.match(name):
            msg = (
                f"Invalid '{cparam}.function.name': string does not match pattern. Expected a "
                "string that matches the pattern '^[a-zA-Z0-9_-]+$'."
            )
            out.append(Violation(RULE_TOOL_CALL_SHAPE, msg, f"{cparam}.function.name"))
        arguments = function.get("arguments")
        parsed: Any = None
        if isinstance(arguments, str):
            with suppress(ValueError):
                parsed = json.loads(arguments)
        if not isinstance(parsed, dict):
            # OpenAI passes bad JSON through, but Anthropic/Bedrock-backed gateways need an
            # object: the strictest provider wins.
            msg = f"Invalid '{cparam}.function.arguments': expected a JSON object string."
            out.append(Violation(RULE_TOOL_CALL_SHAPE, msg, f"{cparam}.function.arguments"))
    return ids, out


def _check_tools(body: Mapping[str, Any]) -> tuple[set[str], list[Violation]]:
    tools = body.get("tools")
    names: set[str] = set()
    if tools is None:
        return names, []
    if not isinstance(tools, list) or not tools:
        msg = (
            "Invalid 'tools': empty array. Expected an array with minimum length 1, but got an "
            "empty array instead."
        )
        return names, [Violation(RULE_TOOLS_SCHEMA, msg, "tools")]
    out: list[Violation] = []
    for t, tool in enumerate(tools):
        tparam = f"tools[{t}]"
        if not isinstance(tool, Mapping) or tool.get("type") != "function":
            got = tool.get("type") if isinstance(tool, Mapping) else _type_name(tool)
            msg = f"Invalid value: '{got}'. Supported values are: 'function'."
            out.append(Violation(RULE_TOOLS_SCHEMA, msg, f"{tparam}.type"))
            continue
        function = tool.get("function")
        if not isinstance(function, Mapping):
            msg = f"Missing required parameter: '{tparam}.function'."
            out.append(Violation(RULE_TOOLS_SCHEMA, msg, f"{tparam}.function"))
            continue
        name = function.get("name")
        nparam = f"{tparam}.function.name"
        if not isinstance(name, str) or not TOOL_NAME_RE.match(name):
            msg = (
                f"Invalid '{nparam}': string does not match pattern. Expected a string that "
                "matches the pattern '^[a-zA-Z0-9_-]+$'."
            )
            out.append(Violation(RULE_TOOLS_SCHEMA, msg, nparam))
        elif len(name) > TOOL_NAME_MAX_CHARS:
            msg = (
                f"Invalid '{nparam}': string too long. Expected a string with maximum length "
                f"{TOOL_NAME_MAX_CHARS}, but got a string with length {len(name)} instead."
            )
            out.append(Violation(RULE_TOOLS_SCHEMA, msg, nparam))
        elif name in names:
            out.append(Violation(RULE_TOOLS_SCHEMA, "tools: Tool names must be unique.", nparam))
        else:
            names.add(name)
        params = function.get("parameters")
        if params is not None and (
            not isinstance(params, Mapping) or params.get("type") != "object"
        ):
            got = params.get("type") if isinstance(params, Mapping) else _type_name(params)
            msg = (
                f"Invalid schema for function '{name}': schema must be a JSON Schema of "
                f"'type: \"object\"', got 'type: \"{got}\"'."
            )
            out.append(Violation(RULE_TOOLS_SCHEMA, msg, f"{tparam}.function.parameters"))
    return names, out


def _check_tool_choice(body: Mapping[str, Any], names: set[str]) -> list[Violation]:
    choice = body.get("tool_choice")
    if choice is None:
        return []
    if not body.get("tools"):
        msg = (
            "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are "
            "specified."
        )
        return [Violation(RULE_TOOL_CHOICE, msg, "tool_choice")]
    if isinstance(choice, str):
        if choice in ("none", "auto", "required"):
            return []
        msg = f"Invalid value: '{choice}'. Supported values are: 'none', 'auto', and 'required'."
        return [Violation(RULE_TOOL_CHOICE, msg, "tool_choice")]
    function = choice.get("function") if isinstance(choice, Mapping) else None
    name = function.get("name") if isinstance(function, Mapping) else None
    if name not in names:
        msg = f"Invalid value for 'tool_choice': tool '{name}' not found in 'tools'."
        return [Violation(RULE_TOOL_CHOICE, msg, "tool_choice")]
    return []


def _check_pairing(messages: Sequence[Mapping[str, Any]]) -> list[Violation]:
    """Every tool-calling assistant turn must be followed at once by exactly its results."""
    out: list[Violation] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        role = message.get("role")
        if role == "tool":
            # Reached only when not directly after a tool-calling assistant turn.
            out.append(Violation(RULE_ORPHAN, ORPHAN_TOOL_TEXT, f"messages.[{i}].role"))
            i += 1
            continue
        if role != "assistant" or not message.get("tool_calls"):
            i += 1
            continue
        expected = [
            str(c.get("id"))
            for c in message.get("tool_calls") or []
            if isinstance(c, Mapping) and c.get("id")
        ]
        pending = set(expected)
        j = i + 1
        while j < len(messages) and messages[j].get("role") == "tool":
            call_id = messages[j].get("tool_call_id")
            if call_id in pending:
                pending.discard(call_id)
            else:
                out.append(Violation(RULE_ORPHAN, ORPHAN_TOOL_TEXT, f"messages.[{j}].role"))
            j += 1
        if pending:
            ids = ", ".join(c for c in expected if c in pending)
            param = f"messages.[{j}].role" if j < len(messages) else f"messages.[{i}].role"
            out.append(Violation(RULE_UNANSWERED, UNANSWERED_TEXT.format(ids=ids), param))
        i = j
    return out


def validate_request(body: Any) -> list[Violation]:
    """List every reason a strict provider would reject this chat-completions body.

    Pure: ``body`` is not modified.

    Args:
        body: The parsed JSON request body.

    Returns:
        Violations in message order (empty when the request is acceptable).
    """
    if not isinstance(body, Mapping):
        return [Violation(RULE_REQUEST, BAD_JSON_TEXT, None)]
    messages = body.get("messages")
    if messages is None:
        return [Violation(RULE_REQUEST, "Missing required parameter: 'messages'.", "messages")]
    if not isinstance(messages, list) or not messages:
        msg = (
            "Invalid 'messages': empty array. Expected an array with minimum length 1, but got "
            "an empty array instead."
        )
        return [Violation(RULE_REQUEST, msg, "messages")]
    out: list[Violation] = []
    seen_ids: set[str] = set()
    first_checked = False
    uses_tools = False
    dict_messages: list[Mapping[str, Any]] = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            msg = (
                f"Invalid type for 'messages[{i}]': expected an object, but got "
                f"{_type_name(message)} instead."
            )
            out.append(Violation(RULE_REQUEST, msg, f"messages.[{i}]"))
            dict_messages.append({})
            continue
        dict_messages.append(message)
        role = message.get("role")
        if role not in VALID_ROLES:
            msg = (
                f"Invalid value: '{role}'. Supported values are: 'system', 'assistant', 'user', "
                "'function', 'tool', and 'developer'."
            )
            out.append(Violation(RULE_ROLE, msg, f"messages.[{i}].role"))
            continue
        if not first_checked and role not in INSTRUCTION_ROLES:
            first_checked = True
            if role != "user":
                msg = 'messages: first message must use the "user" role'
                out.append(Violation(RULE_FIRST_USER, msg, f"messages.[{i}].role"))
        out.extend(_check_content(i, message, last=i == len(messages) - 1))
        if role == "assistant" and "tool_calls" in message:
            uses_tools = True
            _, problems = _check_tool_calls(i, message, seen_ids)
            out.extend(problems)
        if role == "tool":
            uses_tools = True
            if not isinstance(message.get("tool_call_id"), str):
                msg = (
                    "Missing parameter 'tool_call_id': messages with role 'tool' must have a "
                    "'tool_call_id'."
                )
                out.append(Violation(RULE_TOOL_CALL_SHAPE, msg, f"messages.[{i}].tool_call_id"))
    out.extend(_check_pairing(dict_messages))
    names, problems = _check_tools(body)
    out.extend(problems)
    out.extend(_check_tool_choice(body, names))
    if uses_tools and not body.get("tools"):
        msg = "Requests which include `tool_use` or `tool_result` blocks must define tools."
        out.append(Violation(RULE_TOOLS_REQUIRED, msg, "tools"))
    return out


# --- replies ----------------------------------------------------------------------------


def _check_reply(reply: Any) -> None:
    if isinstance(reply, str) or callable(reply):
        return
    if not isinstance(reply, Mapping):
        raise TypeError(f"server reply must be a dict, str or callable, got {type(reply)!r}")
    unknown = set(reply) - REPLY_KEYS
    if unknown:
        raise ValueError(f"unknown server reply keys {sorted(unknown)} in {reply!r}")


def _mask_key(key: str) -> str:
    if len(key) <= KEY_VISIBLE_PREFIX_CHARS + KEY_VISIBLE_SUFFIX_CHARS:
        return "*" * len(key)
    hidden = len(key) - KEY_VISIBLE_PREFIX_CHARS - KEY_VISIBLE_SUFFIX_CHARS
    return key[:KEY_VISIBLE_PREFIX_CHARS] + "*" * hidden + key[-KEY_VISIBLE_SUFFIX_CHARS:]


@dataclass
class _Plan:
    """What the handler must do for one chat request."""

    kind: Literal["json", "answer", "reset"]
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    reply: dict[str, Any] = field(default_factory=dict)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    owner: FakeOpenAIServer


class FakeOpenAIServer:
    """Scripted, strict OpenAI-compatible server on ``127.0.0.1`` (see module docstring).

    Use as a context manager (``with FakeOpenAIServer([...]) as server:``) or call
    :meth:`start`/:meth:`stop`.

    Attributes:
        violations: One string per strict-mode violation seen (assert ``== []``).
        violation_details: The same as :class:`Violation` objects.
        overflow_count: Requests rejected for exceeding ``window``.
        log: Every HTTP request received, in order.
        reported_usage: The usage block of every answer, in order.
    """

    def __init__(
        self,
        script: Sequence[Reply] = (),
        *,
        strict: bool = True,
        disabled_rules: frozenset[str] | set[str] = frozenset(),
        window: int | None = None,
        count_max_tokens: bool = False,
        cut_at_output_limit: bool = False,
        output_cap: int | None = None,
        overflow_style: OverflowStyle = "openai",
        require_key: str | None = None,
        known_models: set[str] | frozenset[str] | None = None,
        on_exhausted: OnExhausted = "repeat_last",
        id_mode: IdMode = "unique",
        host: str = "127.0.0.1",
        port: int = 0,
        cache_min_tokens: int = CACHE_MIN_TOKENS,
        cache_step_tokens: int = CACHE_STEP_TOKENS,
        models_window: ModelsWindow = "none",
    ) -> None:
        """Configure the server (it does not listen until started).

        Args:
            script: Replies consumed in order by chat requests that pass all checks.
            strict: Reject histories a strict provider would reject (HTTP 400).
            disabled_rules: Strict rules to skip (names in ``ALL_RULES``).
            window: Context window in tokens (see :func:`token_estimate`); ``None`` = none.
            count_max_tokens: Also reject when prompt + ``max_tokens`` exceeds ``window``
                (vLLM/older OpenAI behaviour), with the "you requested" text.
            cut_at_output_limit: Stop a text answer where a real server stops generating:
                at the request's ``max_tokens`` (or ``max_completion_tokens``) and at the
                room ``window`` leaves after the prompt, with ``finish_reason`` ``length``.
                Answers with tool calls are sent whole.
            output_cap: The most tokens a text answer takes whatever the request asks
                for, as a provider's own output cap does (cut as ``cut_at_output_limit``
                cuts, which it implies).
            overflow_style: The body of a prompt overflow: OpenAI's
                ``context_length_exceeded`` or llama-server's ``exceed_context_size_error``.
            require_key: If set, ``Authorization: Bearer <key>`` is required (401 otherwise).
            known_models: If set, other model names get OpenAI's 404.
            on_exhausted: After the script: ``repeat_last``, ``raise`` (HTTP 500 and a
                recorded ``script exhausted`` violation) or ``answer`` (``"done"``).
            id_mode: How tool-call ids absent from the script are filled (see ``IdMode``).
            host: Loopback address to bind.
            port: Port to bind (0 = a free one).
            cache_min_tokens: Prompts shorter than this report no cached tokens.
            cache_step_tokens: Cached tokens are reported in multiples of this.
            models_window: How the server states ``window``: not at all, as a llama.cpp
                build that lists ``meta.n_ctx`` in ``GET /v1/models``, as upstream
                llama-server (``meta`` without it; ``default_generation_settings.n_ctx``
                in ``GET /props``), as vLLM (``max_model_len`` in the list), as Ollama
                (``context_length`` in ``GET /api/ps``, listing the models chat requests
                have loaded) or as LM Studio (``loaded_instances[].config.context_length``
                in ``GET /api/v1/models``: of the models chat requests have loaded, or of
                every model from the start with ``"lmstudio-loaded"``).
        """
        unknown = set(disabled_rules) - ALL_RULES
        if unknown:
            raise ValueError(f"unknown strict rules: {sorted(unknown)}")
        for reply in script:
            _check_reply(reply)
        self.strict = strict
        self.disabled_rules = frozenset(disabled_rules)
        self.window = window
        self.count_max_tokens = count_max_tokens
        self.cut_at_output_limit = cut_at_output_limit or output_cap is not None
        self.output_cap = output_cap
        if overflow_style not in OVERFLOW_STYLES:
            raise ValueError(f"unknown overflow_style {overflow_style!r}")
        self.overflow_style: OverflowStyle = overflow_style
        self.require_key = require_key
        self.known_models = set(known_models) if known_models is not None else None
        self.on_exhausted: OnExhausted = on_exhausted
        if id_mode not in ID_MODES:
            raise ValueError(f"unknown id_mode {id_mode!r}")
        self.id_mode: IdMode = id_mode
        self._host = host
        self._port = port
        self._script: list[Reply] = list(script)
        self._cursor = 0
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self.log: list[RecordedRequest] = []
        self.violations: list[str] = []
        self.violation_details: list[Violation] = []
        self.overflow_count = 0
        # The request bodies whose text answer was cut at its output limit.
        self.cut_requests: list[Mapping[str, Any]] = []
        self.cache_min_tokens = cache_min_tokens
        self.cache_step_tokens = max(1, cache_step_tokens)
        self.models_window: ModelsWindow = models_window
        # (model, tools JSON, message JSONs) of every answered request: the prompt cache.
        self._cached_prompts: list[tuple[str, str, list[str]]] = []
        # The usage block of every answer, in order.
        self.reported_usage: list[dict[str, Any]] = []
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[socket.socket] = set()
        self._stopping = threading.Event()  # ends first_byte_delay_s holds

    # --- lifecycle --------------------------------------------------------------------

    def start(self) -> FakeOpenAIServer:
        """Bind and serve in a daemon thread.

        Returns:
            ``self``.
        """
        if self._httpd is not None:
            return self
        httpd = _HTTPServer((self._host, self._port), _Handler)
        httpd.owner = self
        self._httpd = httpd
        self._stopping.clear()
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            args=(SERVER_POLL_INTERVAL_S,),
            name="fake-openai-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, drop open keep-alive connections and free the port."""
        httpd = self._httpd
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            with suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(SERVER_STOP_TIMEOUT_S)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port (server must be started)."""
        if self._httpd is None:
            raise RuntimeError("FakeOpenAIServer is not started")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """Base URL for clients, e.g. ``http://127.0.0.1:PORT/v1``."""
        return f"http://{self._host}:{self.port}/v1"

    # --- script and recordings ----------------------------------------------------------

    def add_replies(self, *replies: Reply) -> None:
        """Append replies to the script (thread-safe)."""
        for reply in replies:
            _check_reply(reply)
        with self._lock:
            self._script.extend(replies)

    @property
    def remaining(self) -> int:
        """Script replies not yet consumed."""
        with self._lock:
            return max(0, len(self._script) - self._cursor)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Parsed bodies of every chat-completions request, accepted or rejected."""
        with self._lock:
            return [r.body for r in self.log if r.path in CHAT_PATHS and r.method == "POST"]

    @property
    def request_headers(self) -> list[dict[str, str]]:
        """Headers (lower-cased names) of every chat-completions request."""
        with self._lock:
            return [r.headers for r in self.log if r.path in CHAT_PATHS and r.method == "POST"]

    @property
    def statuses(self) -> list[int]:
        """HTTP status answered to each chat-completions request (0 = connection dropped)."""
        with self._lock:
            return [r.status for r in self.log if r.path in CHAT_PATHS and r.method == "POST"]

    @staticmethod
    def token_estimate(request_json: Mapping[str, Any]) -> int:
        """Prompt tokens as this server counts them (see module :func:`token_estimate`)."""
        return token_estimate(request_json)

    def _record(self, record: RecordedRequest) -> None:
        with self._lock:
            self.log.append(record)

    # --- decisions ----------------------------------------------------------------------

    def _auth_error(self, headers: Mapping[str, str]) -> _Plan | None:
        if self.require_key is None:
            return None
        auth = headers.get("authorization", "")
        if not auth.startswith("Bearer ") or not auth[len("Bearer ") :].strip():
            return _Plan("json", 401, openai_error(NO_KEY_TEXT))
        key = auth[len("Bearer ") :].strip()
        if key != self.require_key:
            body = openai_error(BAD_KEY_TEXT.format(masked=_mask_key(key)), code="invalid_api_key")
            return _Plan("json", 401, body)
        return None

    def _plan_chat(self, headers: Mapping[str, str], body: Any) -> _Plan:
        auth = self._auth_error(headers)
        if auth is not None:
            return auth
        if not isinstance(body, dict):
            return _Plan("json", 400, openai_error(BAD_JSON_TEXT))
        model = body.get("model")
        if not isinstance(model, str) or not model:
            return _Plan("json", 400, openai_error(NO_MODEL_TEXT))
        if self.known_models is not None and model not in self.known_models:
            body404 = openai_error(MODEL_NOT_FOUND_TEXT.format(model=model), code="model_not_found")
            return _Plan("json", 404, body404)
        if self.strict:
            found = [v for v in validate_request(body) if v.rule not in self.disabled_rules]
            if found:
                with self._lock:
                    self.violation_details.extend(found)
                    self.violations.extend(str(v) for v in found)
                return _Plan("json", 400, found[0].error_body())
        overflow = self._overflow(body)
        if overflow is not None:
            with self._lock:
                self.overflow_count += 1
            return _Plan("json", 400, overflow)
        return self._plan_reply(body)

    def _overflow(self, body: Mapping[str, Any]) -> dict[str, Any] | None:
        if self.window is None:
            return None
        tokens = token_estimate(body)
        completion = body.get("max_completion_tokens") or body.get("max_tokens")
        if self.count_max_tokens and isinstance(completion, int):
            if tokens + completion > self.window:
                msg = OVERFLOW_WITH_COMPLETION_TEXT.format(
                    window=self.window,
                    total=tokens + completion,
                    tokens=tokens,
                    completion=completion,
                )
                return openai_error(msg, param="messages", code="context_length_exceeded")
            return None
        if tokens > self.window:
            if self.overflow_style == "llama.cpp":
                return llama_cpp_overflow_error(tokens, self.window)
            msg = OVERFLOW_TEXT.format(window=self.window, tokens=tokens)
            return openai_error(msg, param="messages", code="context_length_exceeded")
        return None

    def _next_reply(self, body: dict[str, Any]) -> Any:
        with self._lock:
            if self._cursor < len(self._script):
                reply = self._script[self._cursor]
                self._cursor += 1
            elif self.on_exhausted == "answer":
                reply = EXHAUSTED_ANSWER
            elif self.on_exhausted == "repeat_last" and self._script:
                reply = self._script[-1]
            else:
                message = f"script exhausted after {len(self._script)} replies"
                self.violations.append(f"script_exhausted: {message}")
                raise ScriptExhaustedError(message)
        if callable(reply):
            reply = reply(body)
            _check_reply(reply)
        return reply

    def _plan_reply(self, body: dict[str, Any]) -> _Plan:
        try:
            reply = self._next_reply(body)
        except ScriptExhaustedError as exc:
            return _Plan("json", 500, openai_error(str(exc), type="server_error"))
        if isinstance(reply, str):
            reply = {"content": reply}
        reply = dict(reply)
        if "error" in reply:
            error = reply["error"]
            headers = {str(k): str(v) for k, v in (error.get("headers") or {}).items()}
            return _Plan("json", int(error["status"]), error.get("body"), headers)
        if reply.get("reset"):
            return _Plan("reset", 0, reply=reply)
        calls = []
        reply_n = self._new_id()
        for k, call in enumerate(reply.get("tool_calls") or []):
            arguments = call.get("arguments", {})
            given = call.get("id")
            calls.append(
                {
                    "id": given if isinstance(given, str) else self._call_id(reply_n, k),
                    "name": call["name"],
                    "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                }
            )
        reply["tool_calls"] = calls
        if self.cut_at_output_limit and not calls:
            reply = self._cut_to_output_limit(body, reply)
        return _Plan("answer", 200, reply=reply)

    def _cut_to_output_limit(
        self, body: Mapping[str, Any], reply: dict[str, Any]
    ) -> dict[str, Any]:
        """``reply`` with its text cut where generation stops (see ``cut_at_output_limit``)."""
        limits = [
            v
            for v in (body.get("max_completion_tokens"), body.get("max_tokens"))
            if isinstance(v, int) and not isinstance(v, bool)
        ]
        if self.window is not None:
            limits.append(max(self.window - token_estimate(body), 0))
        if self.output_cap is not None:
            limits.append(self.output_cap)
        content = reply.get("content")
        if not limits or not isinstance(content, str):
            return reply
        room_chars = min(limits) * CHARS_PER_TOKEN
        if len(content) <= room_chars:
            return reply
        with self._lock:
            self.cut_requests.append(body)
        return {**reply, "content": content[:room_chars], "finish_reason": "length"}

    def _call_id(self, reply_n: int, k: int) -> str:
        """The id of call ``k`` of a reply under ``id_mode``."""
        if self.id_mode == "duplicate":
            return f"call_r{reply_n}"
        if self.id_mode == "reused":
            return f"call_{k}"
        if self.id_mode == "empty":
            return ""
        if self.id_mode == "constant":
            return "call_0"
        return f"call_{self._new_id()}"

    def _new_id(self) -> int:
        with self._lock:
            return next(self._ids)

    def completion_usage(
        self, request_json: Mapping[str, Any], reply: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Usage block for an answer: prompt = token estimate, completion = reply chars / 4.

        Args:
            request_json: The request body.
            reply: The normalized reply (``content``, ``tool_calls``, optional ``usage``).

        Returns:
            ``{"prompt_tokens", "completion_tokens", "total_tokens",
            "prompt_tokens_details": {"cached_tokens"}}``.
        """
        chars = len(reply.get("content") or "")
        chars += sum(len(c["arguments"]) for c in reply.get("tool_calls") or [])
        usage: dict[str, Any] = {
            "prompt_tokens": token_estimate(request_json),
            "completion_tokens": _ceil_div(chars, CHARS_PER_TOKEN),
        }
        cached = self.cached_prompt_tokens(request_json)
        overrides = dict(reply.get("usage") or {})
        if "cached_tokens" in overrides:
            cached = int(overrides.pop("cached_tokens"))
        usage.update({k: int(v) for k, v in overrides.items()})
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        usage["prompt_tokens_details"] = {"cached_tokens": min(cached, usage["prompt_tokens"])}
        with self._lock:
            self.reported_usage.append(usage)
        return usage

    def cached_prompt_tokens(self, request_json: Mapping[str, Any]) -> int:
        """Tokens of the longest message prefix an earlier request sent; remembers this one.

        Args:
            request_json: The request body (answered).

        Returns:
            The cached tokens to report (see the module docstring).
        """
        messages = request_json.get("messages")
        messages = messages if isinstance(messages, list) else []
        model = str(request_json.get("model"))
        tools = json.dumps(request_json.get("tools") or [], sort_keys=True)
        keys = [json.dumps(m, sort_keys=True) for m in messages]
        best = 0
        with self._lock:
            for seen_model, seen_tools, seen in self._cached_prompts:
                if seen_model != model or seen_tools != tools:
                    continue
                same = 0
                for a, b in zip(seen, keys, strict=False):
                    if a != b:
                        break
                    same += 1
                best = max(best, same)
            self._cached_prompts.append((model, tools, keys))
        if best == 0 or token_estimate(request_json) < self.cache_min_tokens:
            return 0
        prefix = token_estimate({"messages": messages[:best], "tools": request_json.get("tools")})
        return prefix - prefix % self.cache_step_tokens


def _split_content(content: str) -> list[str]:
    return [p for p in re.split(r"(?<=\s)", content) if p]


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def stream_events(
    completion_id: str, model: str, reply: Mapping[str, Any], usage: dict[str, Any] | None
) -> Iterator[dict[str, Any]]:
    """Yield the chat.completion.chunk objects OpenAI streams for one answer.

    Args:
        completion_id: The ``chatcmpl-…`` id shared by all chunks.
        model: Model name echoed back.
        reply: Normalized reply (``content``, ``tool_calls`` with string ``arguments``).
        usage: Usage for the trailing usage chunk, or ``None`` when not requested.

    Yields:
        Chunk objects, in order, without the final ``[DONE]`` marker.
    """
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        event: dict[str, Any] = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "system_fingerprint": None,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if usage is not None:
            event["usage"] = None
        return event

    yield chunk({"role": "assistant", "content": "", "refusal": None})
    for piece in _split_content(str(reply.get("content") or "")):
        yield chunk({"content": piece})
    calls = reply.get("tool_calls") or []
    for index, call in enumerate(calls):
        head = {
            "index": index,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["name"], "arguments": ""},
        }
        yield chunk({"tool_calls": [head]})
        for piece in _pieces(call["arguments"], STREAM_ARGS_PIECE_CHARS):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    finish = reply.get("finish_reason") or ("tool_calls" if calls else "stop")
    yield chunk({}, finish)
    if usage is not None:
        yield {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "system_fingerprint": None,
            "choices": [],
            "usage": usage,
        }


def completion_body(
    completion_id: str, model: str, reply: Mapping[str, Any], usage: dict[str, Any]
) -> dict[str, Any]:
    """Build a non-streaming ``chat.completion`` body for one answer.

    Args:
        completion_id: The ``chatcmpl-…`` id.
        model: Model name echoed back.
        reply: Normalized reply.
        usage: Usage block.

    Returns:
        The JSON body.
    """
    calls = reply.get("tool_calls") or []
    message: dict[str, Any] = {
        "role": "assistant",
        "content": reply.get("content") or (None if calls else ""),
        "refusal": None,
    }
    if calls:
        message["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for c in calls
        ]
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": None,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": reply.get("finish_reason") or ("tool_calls" if calls else "stop"),
            }
        ],
        "usage": usage,
    }


def _loads_model(record: RecordedRequest) -> bool:
    """Whether ``record`` is a chat request, which makes Ollama or LM Studio load its model."""
    return (
        record.method == "POST"
        and record.path in CHAT_PATHS
        and isinstance(record.body, dict)
        and bool(record.body.get("model"))
    )


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked SSE, like real providers
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        owner = self.server.owner
        with owner._lock:
            owner._connections.add(self.connection)

    def finish(self) -> None:
        # After a deliberate reset the socket is gone; flushing it must not raise.
        with suppress(OSError):
            super().finish()
        owner = self.server.owner
        with owner._lock:
            owner._connections.discard(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        return  # keep test output clean

    # --- plumbing ---------------------------------------------------------------------

    def _headers_dict(self) -> dict[str, str]:
        return {k.lower(): v for k, v in self.headers.items()}

    def _send_json(self, status: int, body: Any, headers: Mapping[str, str] | None = None) -> None:
        if isinstance(body, str | bytes):
            data = body.encode() if isinstance(body, str) else body
            ctype = "text/plain; charset=utf-8"
        else:
            data = json.dumps(body).encode()
            ctype = "application/json"
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-request-id", f"req_fake_{id(self):x}")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _drop(self, hard: bool) -> None:
        self.close_connection = True
        with suppress(OSError):
            self.wfile.flush()
        if hard:
            with suppress(OSError):
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
        else:
            with suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
        with suppress(OSError):
            self.connection.close()

    # --- verbs ------------------------------------------------------------------------

    def do_GET(self) -> None:
        owner = self.server.owner
        path = urlsplit(self.path).path
        headers = self._headers_dict()
        record = RecordedRequest("GET", path, headers, None)
        owner._record(record)
        auth = owner._auth_error(headers)
        if auth is not None:
            record.status = auth.status
            self._send_json(auth.status, auth.body)
            return
        if path.rstrip("/") in MODELS_PATHS:
            names = sorted(owner.known_models) if owner.known_models else [DEFAULT_MODEL]
            data: list[dict[str, Any]] = [
                {"id": n, "object": "model", "created": 0, "owned_by": "fake"} for n in names
            ]
            for entry in data:
                if owner.window is not None and owner.models_window == "llama.cpp":
                    entry["meta"] = {"n_ctx": owner.window, "n_ctx_train": 32_768}
                elif owner.models_window == "llama.cpp-props":
                    entry["meta"] = {"n_ctx_train": 32_768, "n_vocab": 151_936}
                elif owner.window is not None and owner.models_window == "vllm":
                    entry["max_model_len"] = owner.window
            record.status = 200
            self._send_json(200, {"object": "list", "data": data})
            return
        if path == LLAMA_PROPS_PATH and owner.models_window == "llama.cpp-props":
            record.status = 200
            self._send_json(
                200, {"default_generation_settings": {"n_ctx": owner.window}, "total_slots": 1}
            )
            return
        if path == OLLAMA_PS_PATH and owner.models_window == "ollama":
            loaded = sorted({str(r.body.get("model")) for r in owner.log if _loads_model(r)})
            running = [{"name": n, "model": n, "context_length": owner.window} for n in loaded]
            record.status = 200
            self._send_json(200, {"models": running})
            return
        if path == LMSTUDIO_MODELS_PATH and owner.models_window in ("lmstudio", "lmstudio-loaded"):
            loaded = {str(r.body.get("model")) for r in owner.log if _loads_model(r)}
            listed = set(owner.known_models) if owner.known_models else {DEFAULT_MODEL}
            listing = [
                {
                    "type": "llm",
                    "key": n,
                    "loaded_instances": (
                        [{"id": n, "config": {"context_length": owner.window}}]
                        if owner.models_window == "lmstudio-loaded" or n in loaded
                        else []
                    ),
                    "max_context_length": LMSTUDIO_MAX_CONTEXT_TOKENS,
                }
                for n in sorted(listed | loaded)
            ]
            record.status = 200
            self._send_json(200, {"models": listing})
            return
        record.status = 404
        self._send_json(404, openai_error(f"Invalid URL (GET {path})"))

    def do_POST(self) -> None:
        owner = self.server.owner
        path = urlsplit(self.path).path.rstrip("/")
        headers = self._headers_dict()
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body: Any = None
        with suppress(ValueError):
            body = json.loads(raw)
        record = RecordedRequest("POST", path, headers, body, raw)
        owner._record(record)
        if path not in CHAT_PATHS:
            record.status = 404
            self._send_json(404, openai_error(f"Invalid URL (POST {path})"))
            return
        plan = owner._plan_chat(headers, body)
        record.status = plan.status
        hold = float((plan.reply or {}).get("first_byte_delay_s") or 0)
        if hold and owner._stopping.wait(hold):
            self._drop(hard=False)  # the server stopped while holding the reply
            return
        if plan.kind == "json":
            self._send_json(plan.status, plan.body, plan.headers)
            return
        streaming = bool(body.get("stream"))
        model = str(body.get("model"))
        completion_id = f"chatcmpl-fake{owner._new_id()}"
        if plan.kind == "reset":
            self._reset(plan.reply, streaming, completion_id, model)
            return
        usage = owner.completion_usage(body, plan.reply)
        if not streaming:
            self._send_json(200, completion_body(completion_id, model, plan.reply, usage))
            return
        options = body.get("stream_options") or {}
        include_usage = bool(options.get("include_usage"))
        delay = float(plan.reply.get("chunk_delay_s") or 0)
        self._start_stream()
        for event in stream_events(
            completion_id, model, plan.reply, usage if include_usage else None
        ):
            self._write_chunk(f"data: {json.dumps(event)}\n\n".encode())
            if delay:
                time.sleep(delay)
        self._write_chunk(b"data: [DONE]\n\n")
        self._write_chunk(b"")  # zero-length chunk ends the chunked body

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("x-request-id", f"req_fake_{id(self):x}")
        self.end_headers()

    def _reset(
        self, reply: Mapping[str, Any], streaming: bool, completion_id: str, model: str
    ) -> None:
        hard = bool(reply.get("hard"))
        if not streaming:
            self._drop(hard)
            return
        after = int(reply.get("after_chunks", RESET_DEFAULT_AFTER_CHUNKS))
        content = str(reply.get("content") or RESET_DEFAULT_CONTENT)
        self._start_stream()
        events = stream_events(completion_id, model, {"content": content}, None)
        for event in itertools.islice(events, after):
            self._write_chunk(f"data: {json.dumps(event)}\n\n".encode())
        self._drop(hard)


# --- pytest-friendly factories ----------------------------------------------------------


@contextmanager
def fake_openai_server(script: Sequence[Reply] = (), **options: Any) -> Iterator[FakeOpenAIServer]:
    """Run a :class:`FakeOpenAIServer` for the duration of a ``with`` block.

    Args:
        script: Replies (see module docstring).
        **options: Keyword options of :class:`FakeOpenAIServer`.

    Yields:
        The started server.
    """
    server = FakeOpenAIServer(script, **options)
    with server:
        yield server


def cli_env(
    server_url: str,
    *,
    api_key: str = DEFAULT_API_KEY,
    model: str = DEFAULT_MODEL,
    window: int | None = None,
    home: Path | None = None,
) -> dict[str, str]:
    """Environment for running the agentgraph CLI in a subprocess against a fake server.

    Starts from ``os.environ`` minus any real ``OPENAI_*``/``AGENTGRAPH_*`` variables so a
    developer's credentials can never reach the test.

    Args:
        server_url: ``server.url``.
        api_key: Key the CLI sends.
        model: Model name the CLI asks for.
        window: ``AGENTGRAPH_CONTEXT_WINDOW`` to set, if any.
        home: ``AGENTGRAPH_HOME`` to set (use ``tmp_path``).

    Returns:
        A new environment mapping.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AGENTGRAPH_"))}
    env.update({"OPENAI_BASE_URL": server_url, "OPENAI_API_KEY": api_key})
    env["AGENTGRAPH_MODEL"] = model
    if window is not None:
        env["AGENTGRAPH_CONTEXT_WINDOW"] = str(window)
    if home is not None:
        env["AGENTGRAPH_HOME"] = str(home)
    return env


@dataclass
class ServerProcess:
    """A fake server running in a child process (see :func:`server_process`).

    Attributes:
        url: Base URL (``http://127.0.0.1:PORT/v1``).
        process: The child process.
        report_path: Where the child writes its report when stopped.
        report: The parsed report, filled after the ``with`` block ends.
    """

    url: str
    process: subprocess.Popen[str]
    report_path: Path
    report: dict[str, Any] = field(default_factory=dict)


@contextmanager
def server_process(
    script: Sequence[Mapping[str, Any] | str],
    workdir: Path,
    *,
    window: int | None = None,
    require_key: str | None = None,
    strict: bool = True,
) -> Iterator[ServerProcess]:
    """Run the fake server as ``python -m tests.fakes.openai_server`` in a child process.

    Args:
        script: JSON-able replies.
        workdir: Directory for the script and report files (use ``tmp_path``).
        window: Context window, if any.
        require_key: Required API key, if any.
        strict: Strict validation on/off.

    Yields:
        A :class:`ServerProcess`; its ``report`` (requests, violations, overflow_count)
        is loaded when the block exits.
    """
    script_path = workdir / "fake_server_script.json"
    report_path = workdir / "fake_server_report.json"
    script_path.write_text(json.dumps(list(script)), encoding="utf-8")
    cmd = [sys.executable, "-m", "tests.fakes.openai_server", "--script", str(script_path)]
    cmd += ["--port", "0", "--report", str(report_path)]
    if window is not None:
        cmd += ["--window", str(window)]
    if require_key is not None:
        cmd += ["--require-key", require_key]
    if not strict:
        cmd.append("--no-strict")
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(cmd, cwd=root, stdout=subprocess.PIPE, text=True)
    try:
        url = _await_ready(proc)
        handle = ServerProcess(url, proc, report_path)
        yield handle
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(PROCESS_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    if report_path.exists():
        handle.report = json.loads(report_path.read_text(encoding="utf-8"))


def _await_ready(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    deadline = time.monotonic() + PROCESS_READY_TIMEOUT_S
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], CLI_POLL_INTERVAL_S)
        if ready:
            line = proc.stdout.readline()
            if line.startswith("READY "):
                return line.split(" ", 1)[1].strip()
            if not line and proc.poll() is not None:
                break
    raise RuntimeError(f"fake server process did not start (exit code {proc.poll()})")


# --- CLI --------------------------------------------------------------------------------


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--script", type=Path, help="JSON file: a list of replies")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--window", type=int, default=None)
    parser.add_argument("--count-max-tokens", action="store_true")
    parser.add_argument("--cut-at-output-limit", action="store_true")
    parser.add_argument("--overflow-style", choices=OVERFLOW_STYLES, default="openai")
    parser.add_argument("--require-key", default=None)
    parser.add_argument("--model", action="append", dest="models", default=None)
    parser.add_argument("--no-strict", action="store_true")
    parser.add_argument("--disable-rule", action="append", dest="disabled", default=[])
    parser.add_argument(
        "--on-exhausted", choices=("repeat_last", "raise", "answer"), default="repeat_last"
    )
    parser.add_argument("--id-mode", choices=ID_MODES, default="unique")
    parser.add_argument("--report", type=Path, default=None, help="write a JSON report on exit")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until SIGTERM/SIGINT; print ``READY <url>`` once listening.

    Args:
        argv: Command-line arguments (default ``sys.argv[1:]``).

    Returns:
        Process exit code.
    """
    args = _parse_args(argv)
    script: list[Any] = []
    if args.script is not None:
        script = json.loads(args.script.read_text(encoding="utf-8"))
    server = FakeOpenAIServer(
        script,
        strict=not args.no_strict,
        disabled_rules=frozenset(args.disabled),
        window=args.window,
        count_max_tokens=args.count_max_tokens,
        cut_at_output_limit=args.cut_at_output_limit,
        overflow_style=args.overflow_style,
        require_key=args.require_key,
        known_models=set(args.models) if args.models else None,
        on_exhausted=args.on_exhausted,
        id_mode=args.id_mode,
        host=args.host,
        port=args.port,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with server:
        print(f"READY {server.url}", flush=True)
        while not stop.wait(CLI_POLL_INTERVAL_S):
            pass
    if args.report is not None:
        report = {
            "requests": server.requests,
            "statuses": server.statuses,
            "violations": server.violations,
            "overflow_count": server.overflow_count,
            "remaining": server.remaining,
        }
        args.report.write_text(json.dumps(report), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
