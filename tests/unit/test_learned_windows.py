"""Windows learned from overflow errors, kept in AGENTGRAPH_HOME for later processes."""

from __future__ import annotations

import json
import multiprocessing
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from agentgraph.config import Settings
from agentgraph.providers import learned_windows
from agentgraph.providers.learned_windows import (
    DEFAULT_ENDPOINT,
    LEARNED_WINDOWS_FILE,
    LEARNED_WINDOWS_MAX_BYTES,
    LEARNED_WINDOWS_MAX_ENTRIES,
    endpoint_key,
    learned_window,
    remember_learned_window,
)

MODEL = "qwen2.5-coder-1.5b"
# The wait bound while a test holds the lock itself.
STALLED_WAIT_S = 0.3


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


@pytest.mark.parametrize(
    ("key", "url"),
    [("local", "http://localhost:8080/v1"), ("llm", "https://llm.example.com/v1")],
)
def test_a_short_secret_does_not_mangle_the_endpoint(
    make_settings: Callable[..., Settings], key: str, url: str
) -> None:
    """A short key is not replaced in the endpoint's label, a hosted endpoint's neither
    (which the redaction of tool output keeps)."""
    settings = make_settings(OPENAI_API_KEY=key, OPENAI_BASE_URL=url)
    remember_learned_window(settings, MODEL, 4_096)
    learned = learned_window(settings, MODEL)
    assert learned is not None and learned.endpoint == url


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


def test_a_holder_that_writes_nothing_is_not_written_past(
    make_settings: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stopped holder is given up on after the wait bound, and its file left alone."""
    import fcntl

    monkeypatch.setattr(learned_windows, "LEARNED_WINDOWS_LOCK_WAIT_S", STALLED_WAIT_S)
    settings = make_settings()
    remember_learned_window(settings, "model-a", 4_096)
    before = _file(settings).read_bytes()
    lock = _file(settings).with_name(LEARNED_WINDOWS_FILE + ".lock")
    with lock.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another open file: as another process's lock
        started = time.monotonic()
        remember_learned_window(settings, "model-b", 8_192)
        assert time.monotonic() - started >= STALLED_WAIT_S
        # Writing without the lock would lose whatever the holder writes next.
        assert _file(settings).read_bytes() == before
    remember_learned_window(settings, "model-b", 8_192)
    learned = learned_window(settings, "model-b")
    assert learned is not None and learned.window == 8_192


# Processes for the property test: started once (each spawn imports LangChain, seconds on
# a small machine) and given one plan per example; they start learning together.
LEARNER_PROCESSES = 5
# The wait bound in the learners: shorter than the real one so that an example takes a
# second or two. A waiter that starves longer than this behind holders that keep
# writing must still wait its turn.
LEARNER_LOCK_WAIT_S = 1.0
# A step that holds the lock this long between reading the file and writing it back, as
# on a slow disk: several in a row keep a waiter out for longer than the wait bound.
SLOW_HOLD_S = 0.3
LEARNER_TIMEOUT_S = 120.0
MODEL_POOL = [f"model-{n}" for n in range(12)]
PROPERTY_BASE_URL = "http://127.0.0.1:9/v1"

Step = tuple[str, int, float]  # model, window, seconds the lock is held before writing


def _property_settings(home: str) -> Settings:
    return Settings(_env_file=None, AGENTGRAPH_HOME=home, OPENAI_BASE_URL=PROPERTY_BASE_URL)  # type: ignore[call-arg]


def _serve_learner(tasks: Any, results: Any, start: Any) -> None:
    from agentgraph.capabilities.tools import files  # noqa: F401  (imported once, not inside an example)
    from agentgraph.providers import learned_windows

    learned_windows.LEARNED_WINDOWS_LOCK_WAIT_S = LEARNER_LOCK_WAIT_S
    update = learned_windows._update
    hold = 0.0

    def slow_update(path: Path, change: Callable[[Any], None]) -> None:
        def slow_change(entries: Any) -> None:
            time.sleep(hold)  # after the read: what this step writes back is that old
            change(entries)

        update(path, slow_change)

    learned_windows._update = slow_update
    while (task := tasks.get()) is not None:
        home, plan = task
        settings = _property_settings(home)
        learned_windows.endpoint_label(settings, MODEL)  # warm the endpoint lookup
        start.wait()
        try:
            for model, window, hold in plan:  # noqa: B007  (hold is read by slow_update)
                remember_learned_window(settings, model, window)
        except Exception as exc:  # reported to the test, which fails with it
            results.put(repr(exc))
        else:
            results.put("ok")


@pytest.fixture(scope="module")
def learners() -> Iterator[tuple[list[Any], Any]]:
    """Learner processes waiting for plans; their task queues and the result queue."""
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(LEARNER_PROCESSES)
    results = context.Queue()
    queues = [context.Queue() for _ in range(LEARNER_PROCESSES)]
    procs = [
        context.Process(target=_serve_learner, args=(queue, results, start), daemon=True)
        for queue in queues
    ]
    for proc in procs:
        proc.start()
    yield queues, results
    for queue in queues:
        queue.put(None)
    for proc in procs:
        proc.join(timeout=LEARNER_TIMEOUT_S)


steps = st.tuples(
    st.sampled_from(MODEL_POOL),
    st.integers(min_value=1_024, max_value=1 << 20),
    st.sampled_from([0.0, 0.0, 0.0, SLOW_HOLD_S]),
)
plans = st.lists(
    st.lists(steps, min_size=1, max_size=6),
    min_size=LEARNER_PROCESSES,
    max_size=LEARNER_PROCESSES,
)
# One process writes slowly five times in a row while the others each learn their own.
BUSY_WRITER: list[list[Step]] = [
    [(f"model-{n}", 4_096, SLOW_HOLD_S) for n in range(5)],
    *([(f"model-{n}", 8_192, 0.0) for n in range(5 + 2 * w, 7 + 2 * w)] for w in range(3)),
    [("model-11", 16_384, 0.0)],
]


@hypothesis_settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(plans=BUSY_WRITER)
@given(plans=plans)
def test_processes_learning_at_once_keep_every_window(
    learners: tuple[list[Any], Any],
    tmp_path_factory: pytest.TempPathFactory,
    plans: list[list[Step]],
) -> None:
    """Whatever several processes learn together, each model's window is one of theirs.

    A model only one process learned keeps that process's last window; one several
    learned keeps one of their last windows. A lost read-modify-write drops a model or
    brings back an older window.
    """
    queues, results = learners
    home = str(tmp_path_factory.mktemp("home"))
    for queue, plan in zip(queues, plans, strict=True):
        queue.put((home, plan))
    outcomes = [results.get(timeout=LEARNER_TIMEOUT_S) for _ in queues]
    assert outcomes == ["ok"] * len(queues)
    last: dict[str, dict[int, int]] = {}
    for learner, plan in enumerate(plans):
        for model, window, _hold in plan:
            last.setdefault(model, {})[learner] = window
    settings = _property_settings(home)
    for model, windows in last.items():
        learned = learned_window(settings, model)
        assert learned is not None, f"{model} was lost"
        assert learned.window in windows.values(), (model, learned.window, windows)
