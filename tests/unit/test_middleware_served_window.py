"""Served-window unit (agentgraph.middleware.served_window): asked once, after a reply."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from langchain_core.messages import AIMessage

from agentgraph.middleware import ServedWindowMiddleware
from agentgraph.providers.served_windows import AskOnce
from tests.middleware_helpers import ModelCall, history, request


def test_the_server_is_asked_once_after_the_first_reply_and_the_user_told() -> None:
    asked: list[int] = []
    events: list[dict[str, Any]] = []
    shared = AskOnce(lambda: asked.append(len(call.requests)) or "context window 4,096 tokens")
    planner = ServedWindowMiddleware(shared, emit=events.append)
    finalize = ServedWindowMiddleware(shared, emit=events.append)  # another pipeline
    call = ModelCall()
    planner.wrap_model_call(request(history(2)), call)
    planner.wrap_model_call(request(history(2)), call)
    finalize.wrap_model_call(request(history(2)), call)
    assert asked == [1]  # after the first reply came back, never again
    assert events == [{"type": "notice", "text": "context window 4,096 tokens"}]


def test_a_failed_call_asks_nothing_and_an_unchanged_budget_says_nothing() -> None:
    asked: list[str] = []
    events: list[dict[str, Any]] = []
    unit = ServedWindowMiddleware(AskOnce(lambda: asked.append("x") or None), emit=events.append)
    with pytest.raises(RuntimeError):
        unit.wrap_model_call(request(history(1)), ModelCall(RuntimeError("endpoint down")))
    assert asked == []  # no reply yet: Ollama may not have loaded the model
    unit.wrap_model_call(request(history(1)), ModelCall())
    assert asked == ["x"] and events == []


def test_threads_sharing_the_question_ask_it_once() -> None:
    count = 0
    lock = threading.Lock()

    def ask() -> str | None:
        nonlocal count
        with lock:
            count += 1
        return None

    shared = AskOnce(ask)
    threads = [threading.Thread(target=shared) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert count == 1


def test_the_reply_passes_through_unchanged() -> None:
    reply = AIMessage("hi", id="a1")
    unit = ServedWindowMiddleware(AskOnce(lambda: None), emit=lambda _e: None)
    response = unit.wrap_model_call(request(history(1)), ModelCall(reply))
    assert response.result == [reply]
