"""Windows learned from overflow errors, kept in AGENTGRAPH_HOME for later processes."""

from __future__ import annotations

import json
import multiprocessing
from collections.abc import Callable
from pathlib import Path

import pytest

from agentgraph.config import Settings
from agentgraph.context.learned_windows import (
    DEFAULT_ENDPOINT,
    LEARNED_WINDOWS_FILE,
    LEARNED_WINDOWS_MAX_BYTES,
    LEARNED_WINDOWS_MAX_ENTRIES,
    endpoint_key,
    learned_window,
    remember_learned_window,
)

MODEL = "qwen2.5-coder-1.5b"


def _file(settings: Settings) -> Path:
    return settings.home / LEARNED_WINDOWS_FILE


@pytest.mark.parametrize(
    ("url", "key"),
    [
        (None, DEFAULT_ENDPOINT),
        ("  ", DEFAULT_ENDPOINT),
        ("http://user:pw@127.0.0.1:8080/v1/?api-key=s#frag", "http://127.0.0.1:8080/v1"),
        ("HTTPS://API.Example.com/v1", "https://api.example.com/v1"),
        ("http://[::1]:8080/v1", "http://[::1]:8080/v1"),
        ("http://[::1", "unparsable"),
    ],
)
def test_the_endpoint_key_never_holds_credentials(url: str | None, key: str) -> None:
    assert endpoint_key(url) == key


def test_a_window_is_remembered_per_endpoint_and_model(
    make_settings: Callable[..., Settings],
) -> None:
    here = make_settings(AGENTGRAPH_MODEL=MODEL, OPENAI_BASE_URL="http://127.0.0.1:8080/v1")
    remember_learned_window(here, MODEL, 4_096)
    learned = learned_window(here, MODEL)
    assert learned is not None and learned.window == 4_096
    assert "4,096 tokens" in learned.notice(MODEL)
    # Another model, another endpoint: nothing learned there.
    assert learned_window(here, "other-model") is None
    elsewhere = make_settings(OPENAI_BASE_URL="http://127.0.0.1:8081/v1")
    assert learned_window(elsewhere, MODEL) is None
    # An explicit window always wins.
    assert learned_window(make_settings(AGENTGRAPH_CONTEXT_WINDOW="8192"), MODEL) is None


def test_no_configured_secret_reaches_the_file(make_settings: Callable[..., Settings]) -> None:
    key = "sk-proxy-key-in-the-path-123456"
    settings = make_settings(
        OPENAI_API_KEY=key, OPENAI_BASE_URL=f"http://u:hunter2@127.0.0.1:9/{key}/v1"
    )
    remember_learned_window(settings, MODEL, 4_096)
    stored = _file(settings).read_text()
    assert key not in stored and "hunter2" not in stored
    learned = learned_window(settings, MODEL)
    assert learned is not None and key not in learned.notice(MODEL)


def _entry(window: object = 4_096, learned_at: object = 1.7e9) -> bytes:
    data = {"version": 1, "windows": {DEFAULT_ENDPOINT: {MODEL: {"window": window}}}}
    if learned_at is not None:
        data["windows"][DEFAULT_ENDPOINT][MODEL]["learned_at"] = learned_at  # type: ignore[index]
    return json.dumps(data).encode()


@pytest.mark.parametrize(
    "content",
    [
        b"not json",
        b"[]",
        b'{"version": 1, "windows": []}',
        b'{"version": 1, "windows": {"default": []}}',
        _entry(window="4096"),
        _entry(window=True),
        _entry(window=12),
        _entry(learned_at=None),
        b'{"version": 1, "windows": {"default": {"qwen2.5-coder-1.5b": '
        b'{"window": 4096, "learned_at": NaN}}}}',
        _entry(learned_at=1e300),
        _entry(learned_at=-5),
        _entry().replace(b'"version": 1', b'"version": 99'),
        b"[" * 100_000,  # json.loads raises RecursionError
        b"\xff\xfe",
        b" " * (LEARNED_WINDOWS_MAX_BYTES + 1),
    ],
)
def test_a_malformed_file_is_an_empty_one_and_gets_replaced(
    make_settings: Callable[..., Settings], content: bytes
) -> None:
    settings = make_settings(OPENAI_BASE_URL=None)
    settings.home.mkdir(parents=True, exist_ok=True)
    _file(settings).write_bytes(_entry())
    assert learned_window(settings, MODEL) is not None  # the well-formed file is read
    _file(settings).write_bytes(content)
    assert learned_window(settings, MODEL) is None
    remember_learned_window(settings, MODEL, 4_096)
    learned = learned_window(settings, MODEL)
    assert learned is not None and learned.window == 4_096


def test_a_file_that_cannot_be_written_changes_nothing(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings()
    settings.home.mkdir(parents=True, exist_ok=True)
    _file(settings).mkdir()  # a folder where the file should be
    remember_learned_window(settings, MODEL, 4_096)
    assert learned_window(settings, MODEL) is None


def test_the_table_keeps_the_newest_entries(make_settings: Callable[..., Settings]) -> None:
    settings = make_settings()
    for n in range(LEARNED_WINDOWS_MAX_ENTRIES + 5):
        remember_learned_window(settings, f"model-{n}", 4_096)
    endpoints = json.loads(_file(settings).read_text())["windows"]
    assert sum(len(models) for models in endpoints.values()) == LEARNED_WINDOWS_MAX_ENTRIES
    assert learned_window(settings, "model-0") is None
    assert learned_window(settings, f"model-{LEARNED_WINDOWS_MAX_ENTRIES + 4}") is not None


def test_a_provider_prefix_names_its_local_endpoint(make_settings: Callable[..., Settings]) -> None:
    settings = make_settings(OPENAI_BASE_URL=None, AGENTGRAPH_MODEL="ollama:qwen2.5-coder:7b")
    remember_learned_window(settings, settings.model, 8_192)
    learned = learned_window(settings, settings.model)
    assert learned is not None and learned.endpoint == "http://127.0.0.1:11434/v1"


def test_a_short_secret_does_not_mangle_the_endpoint(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings(OPENAI_API_KEY="local", OPENAI_BASE_URL="http://localhost:8080/v1")
    remember_learned_window(settings, MODEL, 4_096)
    learned = learned_window(settings, MODEL)
    assert learned is not None and learned.endpoint == "http://localhost:8080/v1"


def _learn_many(home: str, worker: int, count: int) -> None:
    settings = Settings(_env_file=None, AGENTGRAPH_HOME=home)  # type: ignore[call-arg]
    for n in range(count):
        remember_learned_window(settings, f"model-{worker}-{n}", 4_096 + n)


def test_processes_learning_at_once_lose_nothing(make_settings: Callable[..., Settings]) -> None:
    settings = make_settings(OPENAI_BASE_URL=None)
    workers, each = 4, 20
    context = multiprocessing.get_context("spawn")
    procs = [
        context.Process(target=_learn_many, args=(str(settings.home), w, each))
        for w in range(workers)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
        assert proc.exitcode == 0
    endpoints = json.loads(_file(settings).read_text())["windows"]
    assert sum(len(models) for models in endpoints.values()) == workers * each
