"""Classify model-provider failures by what the caller must do about them.

An overflow needs a smaller prompt (truncate tool outputs, compact); an output
overflow needs a smaller ``max_tokens``; a rate limit or a transient failure needs a
retry with backoff; auth, not-found and bad requests need the user. A tokens-per-
minute rate limit mentions "tokens" and often "context" too, and taking it for an
overflow would compact for nothing; so overflows are recognised only by the
providers' real overflow phrasings, and rate limits are checked first.

Works on exceptions from the ``openai`` SDK (any version; it may ship its own httpx
fork), ``anthropic``-style SDKs (``status_code``/``body``/``response``), LangChain's
``ModelError`` family, httpx transport errors, and on raw error texts.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Literal

from langchain_core.exceptions import (
    ContextOverflowError,
    ModelAPIError,
    ModelAuthenticationError,
    ModelConnectionError,
    ModelInvalidRequestError,
    ModelNotFoundError,
    ModelPermissionDeniedError,
    ModelRateLimitError,
    ModelTimeoutError,
)

from agentgraph.lazy_re import LazyPattern

ProviderErrorKind = Literal[
    "overflow",
    "output_overflow",
    "rate_limit",
    "transient",
    "unreachable",
    "auth",
    "not_found",
    "bad_request",
    "other",
]

MESSAGE_MAX_CHARS = 300
OUTPUT_RESERVE_TOKENS = 1_000
MIN_OUTPUT_TOKENS = 3_000
# How far down __cause__/__context__ to look for the provider's own exception.
EXCEPTION_CHAIN_MAX_DEPTH = 6
# Nested JSON-in-a-string error messages (gateways wrapping Gemini) are unwrapped
# at most this many times.
MESSAGE_UNWRAP_MAX_DEPTH = 3

_TRANSIENT_STATUSES = frozenset({408, 409, 425, 500, 502, 503, 504, 520, 522, 524, 529})
_AUTH_STATUSES = frozenset({401, 402, 403, 407})


# Compiled at first use (LazyPattern): errors are classified only when a call fails.
_NUM = r"(\d{1,3}(?:,\d{3})+|\d+)"

_QUOTA_RE = LazyPattern(
    r"insufficient_quota|billing[_ ]hard[_ ]limit|credit balance is too low|requires more credits",
    re.IGNORECASE,
)
# OpenAI's "exceeded your current quota" is billing; Gemini uses the same words for a
# per-minute quota that resets (RESOURCE_EXHAUSTED with a retry delay).
_BILLING_QUOTA_RE = LazyPattern(r"exceeded your current quota", re.IGNORECASE)
_RESETTING_QUOTA_RE = LazyPattern(r"resource_exhausted|retrydelay|retry in", re.IGNORECASE)
_AUTH_RE = LazyPattern(
    r"invalid[_ ]api[_ ]key|incorrect api key|authentication_error|permission_error|"
    r"unauthori[sz]ed|permission denied|api key not valid|invalid x-api-key",
    re.IGNORECASE,
)
_NOT_FOUND_RE = LazyPattern(
    r"model_not_found|not_found_error|\bmodel\b[^.\n]{0,80}\b(?:not found|does not exist)",
    re.IGNORECASE,
)
_RATE_LIMIT_RE = LazyPattern(
    r"rate[ _-]?limit|too many requests|tokens per min|requests per min|per minute|"
    r"\b(?:TPM|RPM|TPD|RPD)\b|tokens per day|requests per day|resource[_ ]exhausted|"
    r"quota exceeded|throttl",
    re.IGNORECASE,
)
# Real overflow phrasings (OpenAI, Azure, Anthropic, vLLM, llama.cpp, Ollama,
# DeepSeek, Gemini, Mistral, Groq, Cerebras, OpenRouter, xAI, TGI, Fireworks,
# LM Studio, LiteLLM). Never the bare words "context" or "token".
_OVERFLOW_RE = LazyPattern(
    "|".join(
        (
            r"context_length_exceeded",
            r"context[_ ]?window[_ ]?exceeded",
            r"maximum context length",
            r"maximum (?:model|prompt) length",
            r"max(?:imum)? context (?:length|window|size) (?:is|of)",
            r"context (?:length|window|size|limit) (?:exceeded|is exceeded|overflow)",
            r"exceed(?:s|ed)? (?:the )?(?:model'?s? )?(?:maximum |max |available |configured )?"
            r"context (?:length|window|size|limit)",
            r"exceed_context_size_error",
            r"prompt is too long",
            r"input (?:is )?too long",
            r"too long to fit into the model",
            r"input token count[^.\n]{0,40}exceeds the maximum number of tokens",
            r"too large for model with \d+ maximum context length",
            r"reduce the length of the messages",
            r"input tokens exceed the configured limit",
            r"`inputs` tokens \+ `max_new_tokens` must be <=",
            r"request_too_large",
            r"number of tokens to keep from the initial prompt is greater than the context",
        )
    ),
    re.IGNORECASE,
)
_TRANSIENT_RE = LazyPattern(
    r"overloaded|server[_ ]error|internal error|service unavailable|temporarily unavailable|"
    r"bad gateway|gateway time-?out|timed out|timeout|connection (?:reset|aborted|refused)|"
    r"server disconnected|peer closed connection|incomplete chunked read|remoteprotocolerror|"
    r"try again later",
    re.IGNORECASE,
)

# (regex, names of the captured numbers) tried in order; the first value found for a
# name wins. Names: p = prompt tokens, r = requested output tokens, l = limit, t = total.
_NUMBER_PATTERNS: tuple[tuple[LazyPattern, tuple[str, ...]], ...] = tuple(
    (LazyPattern(pattern, re.IGNORECASE), names)
    for pattern, names in (
        (rf"exceed context limit:\s*{_NUM}\s*\+\s*{_NUM}\s*>\s*{_NUM}", ("p", "r", "l")),
        (rf"prompt is too long:\s*{_NUM}\s*tokens?\s*>\s*{_NUM}", ("p", "l")),
        (rf"prompt is too long:\s*{_NUM},\s*model maximum context length:\s*{_NUM}", ("p", "l")),
        (
            # "(7554 in the messages, 1000 in the completion)", "(6283 in your prompt; 256
            # for the completion)", "(6683 in the messages, 730 in the functions, and 800
            # in the completion)": the prompt is the total minus the completion.
            rf"requested (?:about )?{_NUM} tokens \([^)]*?{_NUM} (?:in|for) the "
            rf"(?:completion|output)\)",
            ("t", "r"),
        ),
        (rf"messages resulted in {_NUM} tokens", ("p",)),
        (rf"request has {_NUM} input tokens", ("p",)),
        (rf"'max_tokens' or 'max_completion_tokens' is too large:\s*{_NUM}", ("r",)),
        (rf"maximum context length is {_NUM}", ("l",)),
        (
            rf"input token count \(?{_NUM}\)? exceeds the maximum number of tokens allowed "
            rf"\(?{_NUM}\)?",
            ("p", "l"),
        ),
        (rf"prompt contains {_NUM} tokens", ("p",)),
        (rf"too large for model with {_NUM} maximum context length", ("l",)),
        (rf"request \({_NUM} tokens\) exceeds the available context size \({_NUM}", ("p", "l")),
        (rf"['\"]?n_prompt_tokens['\"]?\s*[:=]\s*{_NUM}", ("p",)),
        (rf"['\"]?n_ctx['\"]?\s*[:=]\s*{_NUM}", ("l",)),
        (
            rf"must be <= {_NUM}\. Given: {_NUM} `inputs` tokens and {_NUM} `max_new_tokens`",
            ("l", "p", "r"),
        ),
        (rf"maximum prompt length is {_NUM} but the request contains {_NUM}", ("l", "p")),
        (
            rf"prompt \(length {_NUM}\) is longer than the maximum model length of {_NUM}",
            ("p", "l"),
        ),
        (
            rf"prompt \(total length {_NUM}\) is too long to fit into the model "
            rf"\(context length {_NUM}\)",
            ("p", "l"),
        ),
        (rf"input prompt \({_NUM} tokens\) is too long and exceeds limit of {_NUM}", ("p", "l")),
        (rf"current length is {_NUM} while limit is {_NUM}", ("p", "l")),
        (rf"cannot exceed {_NUM} - received {_NUM}", ("l", "p")),
    )
)
# OpenAI / Groq "Request too large ... (TPM): Limit 30000, Requested 36278".
_TPM_NUMBERS_RE = LazyPattern(rf"Limit:?\s*{_NUM},\s*Requested:?\s*{_NUM}", re.IGNORECASE)

_DURATION_PART_RE = LazyPattern(r"(\d+(?:\.\d+)?)\s*(ms|h|m|s)")
_RETRY_TEXT_RES = (
    LazyPattern(r"(?:try again|retry) in\s*((?:\d+(?:\.\d+)?\s*(?:ms|h|m|s)\s*)+)", re.IGNORECASE),
    LazyPattern(r"retry after\s*(\d+(?:\.\d+)?)\s*seconds?", re.IGNORECASE),
    LazyPattern(r"['\"]retryDelay['\"]\s*:\s*['\"](\d+(?:\.\d+)?s)['\"]", re.IGNORECASE),
)

_LIMIT_TYPE_TOKENS_RE = LazyPattern(
    r"tokens per min|['\"]type['\"]\s*:\s*['\"]tokens['\"]", re.IGNORECASE
)
_LIMIT_TYPE_REQUESTS_RE = LazyPattern(
    r"requests per min|['\"]type['\"]\s*:\s*['\"]requests['\"]", re.IGNORECASE
)

_SECRET_RES: tuple[tuple[LazyPattern, str], ...] = (
    (LazyPattern(r"\b(?:sk|rk|pk|xai)-[A-Za-z0-9_\-*]{6,}"), "[redacted]"),
    (LazyPattern(r"\b(?:gsk|hf|ghp|gho|ghs|github_pat|glpat)_[A-Za-z0-9_\-]{8,}"), "[redacted]"),
    (LazyPattern(r"\bAIza[0-9A-Za-z_\-]{20,}"), "[redacted]"),
    (LazyPattern(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=\-]{8,}"), "Bearer [redacted]"),
    (
        LazyPattern(r"(?i)([?&](?:key|api[_-]?key|token|access_token|sig)=)[^&\s'\"]+"),
        r"\1[redacted]",
    ),
    (
        LazyPattern(
            r"(?i)((?:api[_-]?key|x-api-key|authorization|access[_-]?token)['\"]?\s*[:=]\s*['\"]?)"
            r"(?!\[redacted\])[^\s'\",}]{4,}"
        ),
        r"\1[redacted]",
    ),
)

_MESSAGE_FIELD_RE = LazyPattern(
    r"""['"](?:message|error)['"]\s*:\s*(?:"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)')"""
)

_KIND_LABELS: dict[str, str] = {
    "overflow": "context window exceeded",
    "output_overflow": "prompt plus max_tokens exceed the context window",
    "rate_limit": "rate limited",
    "transient": "temporary provider failure",
    "unreachable": "connection failed",
    "auth": "not authorized",
    "not_found": "model or endpoint not found",
    "bad_request": "request rejected",
    "other": "provider error",
}

# The HTTP stacks a model SDK may raise from: httpx, and the openai SDK's own fork
# (httpx2) with their transports. Classes are looked up in whichever are loaded:
# an exception of theirs cannot exist before its module is imported, and importing
# them here would add their import to every start.
_HTTP_MODULES = ("httpx", "httpx2", "httpcore", "httpcore2")
_CONNECT_NAMES = ("ConnectError",)
_TIMEOUT_NAMES = (
    "TimeoutException",
    "ConnectTimeout",
    "ReadTimeout",
    "WriteTimeout",
    "PoolTimeout",
)
_DROPPED_NAMES = (
    "RemoteProtocolError",
    "ReadError",
    "WriteError",
    "NetworkError",
    "ProtocolError",
    "TransportError",
    "CloseError",
)


def _loaded_classes(
    modules: Iterable[str], names: Iterable[str]
) -> tuple[type[BaseException], ...]:
    found: list[type[BaseException]] = []
    for module_name in modules:
        module = sys.modules.get(module_name)
        for name in names if module is not None else ():
            cls = getattr(module, name, None)
            if isinstance(cls, type) and issubclass(cls, BaseException):
                found.append(cls)
    return tuple(found)


def _timeout_classes() -> tuple[type[BaseException], ...]:
    return (
        *_loaded_classes(_HTTP_MODULES, _TIMEOUT_NAMES),
        *_loaded_classes(("openai",), ("APITimeoutError",)),
        ModelTimeoutError,
        TimeoutError,
    )


# Typed failures without a status (a stream that broke, an integration that
# classified it already): the type says what the caller must do.
_LANGCHAIN_KINDS: tuple[tuple[type[BaseException], ProviderErrorKind], ...] = (
    (ContextOverflowError, "overflow"),
    (ModelRateLimitError, "rate_limit"),
    (ModelAuthenticationError, "auth"),
    (ModelPermissionDeniedError, "auth"),
    (ModelNotFoundError, "not_found"),
    (ModelAPIError, "transient"),
    (ModelInvalidRequestError, "bad_request"),
)


@dataclass(frozen=True)
class ProviderError:
    """What a provider failure means for the caller.

    Attributes:
        kind: The action class (see module docstring).
        status: HTTP status, when there was a response.
        message: One human-readable line (<= 300 chars), secrets removed.
        retry_after_s: Seconds the provider asked to wait, when it said so.
        prompt_tokens: Prompt size the provider reported (for a tokens-per-minute
            rejection: the tokens the request needed).
        limit_tokens: Context window (or per-minute limit) the provider reported.
        requested_output_tokens: ``max_tokens`` the provider saw, when reported.
        timed_out: The failure is a timeout (no answer in time), not a refusal.
    """

    kind: ProviderErrorKind
    status: int | None
    message: str
    retry_after_s: float | None = None
    prompt_tokens: int | None = None
    limit_tokens: int | None = None
    requested_output_tokens: int | None = None
    timed_out: bool = False

    @property
    def is_overflow(self) -> bool:
        """Whether the prompt or the output reservation does not fit the window."""
        return self.kind in ("overflow", "output_overflow")

    @property
    def retryable(self) -> bool:
        """Whether sending the same request again later can succeed."""
        if self.kind == "transient":
            return True
        if self.kind != "rate_limit":
            return False
        # A request larger than the per-minute limit never passes, however long we wait.
        return not (
            self.prompt_tokens is not None
            and self.limit_tokens is not None
            and self.prompt_tokens > self.limit_tokens
        )


def redact_secrets(text: str) -> str:
    """Replace anything that looks like an API key or bearer token with ``[redacted]``."""
    for pattern, replacement in _SECRET_RES:
        text = pattern.sub(replacement, text)
    return text


def _one_line(text: str, limit: int = MESSAGE_MAX_CHARS) -> str:
    flat = redact_secrets(" ".join(text.split()))
    if len(flat) <= limit:
        return flat
    return flat[: limit - 1].rstrip() + "…"


def _to_int(raw: str) -> int:
    return int(raw.replace(",", ""))


def _overflow_numbers(text: str) -> dict[str, int]:
    found: dict[str, int] = {}
    for pattern, names in _NUMBER_PATTERNS:
        match = pattern.search(text)
        if match is None:
            continue
        for name, raw in zip(names, match.groups(), strict=True):
            found.setdefault(name, _to_int(raw))
    if "p" not in found and "t" in found and "r" in found:
        found["p"] = found["t"] - found["r"]
    return found


def _parse_duration_s(text: str) -> float | None:
    """Seconds in ``"1.5s"``, ``"20ms"``, ``"6m0s"``, ``"1h2m3s"``."""
    total = 0.0
    matched = False
    for value, unit in _DURATION_PART_RE.findall(text):
        matched = True
        scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}[unit]
        total += float(value) * scale
    return total if matched else None


def _header(headers: Mapping[str, str] | None, name: str) -> str | None:
    if headers is None:
        return None
    try:
        value = headers.get(name)
        if value is None:
            lowered = {str(k).lower(): v for k, v in headers.items()}
            value = lowered.get(name)
    except Exception:  # a half-built response object: no headers to trust
        return None
    return str(value) if value is not None else None


def _retry_after_s(headers: Mapping[str, str] | None, text: str) -> float | None:
    """Wait time from Retry-After / retry-after-ms / x-ratelimit-reset-* / the text."""
    raw_ms = _header(headers, "retry-after-ms")
    if raw_ms is not None:
        try:
            return max(float(raw_ms) / 1000.0, 0.0)
        except ValueError:
            pass
    raw = _header(headers, "retry-after")
    if raw is not None:
        try:
            return max(float(raw), 0.0)
        except ValueError:
            try:
                return max(parsedate_to_datetime(raw).timestamp() - time.time(), 0.0)
            except (TypeError, ValueError, IndexError):
                pass
    for pattern in _RETRY_TEXT_RES:
        match = pattern.search(text)
        if match is not None:
            seconds = _parse_duration_s(match.group(1))
            if seconds is None:
                try:
                    seconds = float(match.group(1))
                except ValueError:
                    continue
            return seconds
    # OpenAI sends both resets on every response; wait for the limit that was hit.
    names: tuple[str, ...] = ("x-ratelimit-reset-tokens", "x-ratelimit-reset-requests")
    if _LIMIT_TYPE_TOKENS_RE.search(text):
        names = ("x-ratelimit-reset-tokens",)
    elif _LIMIT_TYPE_REQUESTS_RE.search(text):
        names = ("x-ratelimit-reset-requests",)
    resets = [
        seconds
        for name in names
        if (value := _header(headers, name)) is not None
        and (seconds := _parse_duration_s(value)) is not None
    ]
    return max(resets) if resets else None


def _message_field(body: Any) -> str | None:
    """The message string of a parsed error body (OpenAI, Anthropic, Ollama, Gemini)."""
    if isinstance(body, list) and body:
        return _message_field(body[0])
    if isinstance(body, str):
        return body or None
    if not isinstance(body, Mapping):
        return None
    error = body.get("error")
    if isinstance(error, Mapping) and isinstance(error.get("message"), str):
        return str(error["message"]) or None
    if isinstance(error, str) and error:
        return error
    for key in ("message", "detail"):
        value = body.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _extract_message(text: str) -> str:
    """The provider's human message from a JSON / Python-repr error text, if any."""
    current = text
    for _ in range(MESSAGE_UNWRAP_MAX_DEPTH):
        stripped = current.strip()
        if stripped[:1] in ("{", "["):
            try:
                inner = _message_field(json.loads(stripped))
            except ValueError:
                inner = None
            if inner is not None and inner.strip() and inner != current:
                current = inner
                continue
        match = _MESSAGE_FIELD_RE.search(current)
        if match is None:
            break
        raw = match.group(1) if match.group(1) is not None else match.group(2)
        try:
            inner = json.loads(f'"{raw}"') if match.group(1) is not None else raw
        except ValueError:
            inner = raw.replace('\\"', '"').replace("\\n", "\n")
        if not inner.strip():
            break
        current = inner
    return current


def _body_text(body: Any) -> str:
    if body is None:
        return ""
    if isinstance(body, str):
        return body
    if isinstance(body, bytes):
        return body.decode("utf-8", "replace")
    try:
        return json.dumps(body, default=str)
    except (TypeError, ValueError):
        return str(body)


def _body_message(body: Any) -> str | None:
    message = _message_field(body)
    return _extract_message(message) if message is not None else None


def _decide_kind(status: int | None, text: str) -> tuple[ProviderErrorKind, dict[str, int]]:
    """Kind and parsed numbers. Order matters: rate limits before overflows."""
    if _QUOTA_RE.search(text) or (
        _BILLING_QUOTA_RE.search(text) and not _RESETTING_QUOTA_RE.search(text)
    ):
        return "auth", {}  # billing: waiting does not help, the user must act
    if status in _AUTH_STATUSES or (status is None and _AUTH_RE.search(text)):
        return "auth", {}
    if status == 404 or (status in (None, 400) and _NOT_FOUND_RE.search(text)):
        return "not_found", {}
    if status == 429 or (
        status in (None, 400, 413) and _RATE_LIMIT_RE.search(text) and not _OVERFLOW_RE.search(text)
    ):
        numbers: dict[str, int] = {}
        tpm = _TPM_NUMBERS_RE.search(text)
        if tpm is not None:
            numbers = {"l": _to_int(tpm.group(1)), "p": _to_int(tpm.group(2))}
        return "rate_limit", numbers
    if _OVERFLOW_RE.search(text) or status == 413:
        numbers = _overflow_numbers(text)
        prompt, limit, requested = numbers.get("p"), numbers.get("l"), numbers.get("r")
        if (
            prompt is not None
            and limit is not None
            and requested is not None
            and prompt < limit < prompt + requested
        ):
            return "output_overflow", numbers
        return "overflow", numbers
    if status is not None and (status in _TRANSIENT_STATUSES or status >= 500):
        return "transient", {}
    if status is None and _TRANSIENT_RE.search(text):
        return "transient", {}
    if status is not None and 400 <= status < 500:
        return "bad_request", {}
    return "other", {}


def _build(
    kind: ProviderErrorKind,
    status: int | None,
    detail: str,
    numbers: Mapping[str, int],
    retry_after_s: float | None,
    *,
    timed_out: bool = False,
) -> ProviderError:
    label = _KIND_LABELS[kind]
    where = f" (HTTP {status})" if status is not None else ""
    detail = " ".join(detail.split())
    message = f"{label}{where}: {detail}" if detail else f"{label}{where}"
    return ProviderError(
        kind=kind,
        status=status,
        message=_one_line(message),
        retry_after_s=retry_after_s if kind in ("rate_limit", "transient") else None,
        prompt_tokens=numbers.get("p"),
        limit_tokens=numbers.get("l"),
        requested_output_tokens=numbers.get("r"),
        timed_out=timed_out,
    )


def classify_error_text(
    status: int | None,
    text: str,
    *,
    headers: Mapping[str, str] | None = None,
    message: str | None = None,
) -> ProviderError:
    """Classify a provider failure from its HTTP status and raw body text.

    Args:
        status: HTTP status, or None when unknown (stream errors, wrapped exceptions).
        text: The error body or exception text, JSON or not.
        headers: Response headers, for Retry-After and rate-limit resets.
        message: The human message when already extracted; else taken from ``text``.

    Returns:
        The classification, with token numbers when the text states them.
    """
    kind, numbers = _decide_kind(status, text)
    retry_after = _retry_after_s(headers, text) if kind in ("rate_limit", "transient") else None
    detail = message if message is not None else _extract_message(text)
    return _build(kind, status, detail, numbers, retry_after)


def _exception_chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(chain) < EXCEPTION_CHAIN_MAX_DEPTH:
        if any(current is seen for seen in chain):
            break
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _safe_attr(obj: Any, name: str) -> Any:
    try:
        return getattr(obj, name, None)
    except Exception:  # httpx raises RuntimeError for an unset .request
        return None


def _status_of(exc: BaseException) -> int | None:
    for name in ("status_code", "status", "http_status", "code"):
        value = _safe_attr(exc, name)
        if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
            return value
    response = _safe_attr(exc, "response")
    value = _safe_attr(response, "status_code")
    if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
        return value
    return None


def _safe_url(exc: BaseException) -> str | None:
    """The request URL without query string or credentials (they may hold keys)."""
    url = _safe_attr(_safe_attr(exc, "request"), "url")
    if url is None:
        return None
    text = str(url)
    text = re.sub(r"^([a-z][a-z0-9+.\-]*://)[^/@]*@", r"\1", text, flags=re.IGNORECASE)
    return text.split("?", 1)[0].split("#", 1)[0]


def _first_url(chain: Iterable[BaseException]) -> str | None:
    for item in chain:
        url = _safe_url(item)
        if url:
            return url
    return None


def _from_status_exception(exc: BaseException, status: int) -> ProviderError:
    body = _safe_attr(exc, "body")
    response = _safe_attr(exc, "response")
    headers = _safe_attr(response, "headers")
    body_text = _body_text(body)
    if not body_text and response is not None:
        try:
            body_text = str(response.text)
        except Exception:  # a streamed response that was never read
            body_text = ""
    text = f"{exc}\n{body_text}"
    message = _body_message(body)
    if message is None and body is None and body_text.strip():
        message = _extract_message(body_text)  # raise_for_status(): the body says more
    if message is None:
        own = _safe_attr(exc, "message")
        message = _extract_message(own if isinstance(own, str) and own else str(exc))
    if isinstance(exc, ContextOverflowError) and not _OVERFLOW_RE.search(text):
        return _overflow_from_langchain(status, text, message)
    return classify_error_text(
        status, text, headers=headers if isinstance(headers, Mapping) else None, message=message
    )


def _overflow_from_langchain(status: int | None, text: str, message: str) -> ProviderError:
    numbers = _overflow_numbers(text)
    return _build("overflow", status, message, numbers, None)


def _from_transport(chain: list[BaseException]) -> ProviderError | None:
    url = _first_url(chain)
    where = f" at {url}" if url else ""
    # Nothing listens or the host does not resolve: retrying only makes the user wait.
    connect = _loaded_classes(_HTTP_MODULES, _CONNECT_NAMES)
    timeouts = _timeout_classes()
    dropped = (*_loaded_classes(_HTTP_MODULES, _DROPPED_NAMES), ConnectionError)
    sdk_connection = _loaded_classes(("openai",), ("APIConnectionError",))
    for item in chain:
        if isinstance(item, connect) and not isinstance(item, timeouts):
            reason = _one_line(str(item), 120) or type(item).__name__
            return _build(
                "unreachable",
                None,
                f"cannot reach the model endpoint{where} ({reason}); is the server running?",
                {},
                None,
            )
    for item in chain:
        if isinstance(item, timeouts):
            return _build(
                "transient", None, f"the model endpoint{where} timed out", {}, None, timed_out=True
            )
    for item in chain:
        if isinstance(item, dropped):
            reason = _one_line(str(item), 120) or type(item).__name__
            return _build(
                "transient",
                None,
                f"connection to the model endpoint{where} dropped ({reason})",
                {},
                None,
            )
    for item in chain:
        if isinstance(item, (ModelConnectionError, *sdk_connection)):
            return _build("transient", None, f"cannot reach the model endpoint{where}", {}, None)
    return None


def classify_provider_error(exc: BaseException) -> ProviderError:
    """Classify an exception raised by a model call.

    Looks through ``__cause__``/``__context__`` for the provider's own exception
    (SDKs and LangChain wrap one another).

    Args:
        exc: Whatever the model call raised.

    Returns:
        The classification; ``kind="other"`` for exceptions that are not provider
        failures (programming errors must surface, not be retried).
    """
    chain = _exception_chain(exc)
    for item in chain:
        status = _status_of(item)
        if status is not None:
            return _from_status_exception(item, status)
    transport = _from_transport(chain)
    if transport is not None:
        return transport
    for item in chain:
        body = _safe_attr(item, "body")
        text = f"{item}\n{_body_text(body)}"
        message = _body_message(body) or _extract_message(str(item))
        if isinstance(item, ContextOverflowError):
            return _overflow_from_langchain(None, text, message)
        result = classify_error_text(None, text, message=message)
        if result.kind != "other":
            return result
        for cls, kind in _LANGCHAIN_KINDS:
            if isinstance(item, cls):
                return _build(kind, None, message, {}, None)
    return _build("other", None, f"{type(exc).__name__}: {exc}", {}, None)


def stated_context_window(err: ProviderError) -> int | None:
    """The context window an overflow error says the endpoint has, or None.

    llama.cpp "exceeds the available context size (4096 tokens)" (or its ``n_ctx``
    field), OpenAI / vLLM / DeepSeek "maximum context length is 8192 tokens",
    Anthropic "prompt is too long: 210000 tokens > 200000 maximum", Gemini "the
    maximum number of tokens allowed (1048576)"... Only overflows count: the "Limit"
    of a tokens-per-minute rate limit is a quota, not a window.

    Args:
        err: A classified error.

    Returns:
        The window in tokens; None when ``err`` is not an overflow or its text names
        no window (Ollama's "the input length exceeds the context length", OpenAI's
        newer "Your input exceeds the context window of this model").
    """
    if not err.is_overflow or err.limit_tokens is None or err.limit_tokens <= 0:
        return None
    return err.limit_tokens


def shrink_max_tokens(err: ProviderError, current_max_tokens: int | None) -> int | None:
    """A ``max_tokens`` that fits after an output overflow, or None if none helps.

    Rule (Claude Code): ``limit - prompt - OUTPUT_RESERVE_TOKENS``, at least
    ``MIN_OUTPUT_TOKENS``; None when the prompt alone leaves less than
    ``MIN_OUTPUT_TOKENS``, when the numbers are unknown, or when the result would not
    be smaller than ``current_max_tokens``.

    Args:
        err: A classified error; only ``output_overflow`` can be helped.
        current_max_tokens: The ``max_tokens`` that was sent, if known.

    Returns:
        The new ``max_tokens`` or None.
    """
    if err.kind != "output_overflow" or err.prompt_tokens is None or err.limit_tokens is None:
        return None
    if err.prompt_tokens >= err.limit_tokens - MIN_OUTPUT_TOKENS:
        return None
    candidate = max(MIN_OUTPUT_TOKENS, err.limit_tokens - err.prompt_tokens - OUTPUT_RESERVE_TOKENS)
    ceiling = current_max_tokens if current_max_tokens is not None else err.requested_output_tokens
    if ceiling is not None and candidate >= ceiling:
        return None
    return candidate


__all__ = [
    "MIN_OUTPUT_TOKENS",
    "OUTPUT_RESERVE_TOKENS",
    "ProviderError",
    "ProviderErrorKind",
    "classify_error_text",
    "classify_provider_error",
    "redact_secrets",
    "shrink_max_tokens",
    "stated_context_window",
]
