"""The window a local server states in its model list (agentgraph.providers.served_windows)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgraph.context.windows import MAX_STATED_WINDOW_TOKENS
from agentgraph.providers.served_windows import (
    api_root,
    lmstudio_window_in,
    loaded_window_in,
    props_window_in,
    served_window_in,
)

LLAMA = {"id": "qwen", "object": "model", "meta": {"n_ctx": 8192, "n_ctx_train": 32768}}
VLLM = {"id": "Qwen/Qwen2.5-7B", "object": "model", "max_model_len": 16384}


def test_llama_cpp_and_vllm_lists_state_the_window() -> None:
    assert served_window_in([LLAMA], "qwen") == 8192
    assert served_window_in([VLLM], "Qwen/Qwen2.5-7B") == 16384
    # llama-server serves one model under whatever name it was started with.
    assert served_window_in([LLAMA], "qwen2.5-coder-1.5b") == 8192
    # Several models: only the one requests name counts.
    other = {**VLLM, "id": "other", "max_model_len": 4096}
    assert served_window_in([other, VLLM], "Qwen/Qwen2.5-7B") == 16384
    assert served_window_in([other, VLLM], "missing") is None


@pytest.mark.parametrize(
    "entries",
    [
        [],
        [{"id": "qwen"}],  # a list that states nothing (OpenAI, Ollama)
        [{"id": "qwen", "meta": {"n_ctx": "8192"}}],
        [{"id": "qwen", "meta": {"n_ctx": True}}],
        [{"id": "qwen", "meta": {"n_ctx": -1}}],
        [{"id": "qwen", "meta": {"n_ctx": 12}}],  # below any real window
        [{"id": "qwen", "max_model_len": MAX_STATED_WINDOW_TOKENS + 1}],
        [{"id": "qwen", "max_model_len": 8192.5}],
        [{"id": "qwen", "meta": [8192]}],
        ["qwen", 8192, None],
        [{"id": "qwen", "max_model_len": 8192}, {"id": "qwen", "max_model_len": 4096}],
    ],
)
def test_anything_else_states_no_window(entries: list[Any]) -> None:
    assert served_window_in(entries, "qwen") is None


def json_like(*keys: str) -> st.SearchStrategy[Any]:
    """Decoded JSON of any shape whose objects use ``keys`` (and one other key)."""
    return st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(st.sampled_from([*keys, "x"]), inner, max_size=4)
        ),
        max_leaves=16,
    )


@settings(max_examples=300, deadline=None)
@given(st.lists(json_like("id", "meta", "n_ctx", "max_model_len"), max_size=4))
def test_a_hostile_list_never_raises_and_gives_a_plausible_window(entries: list[Any]) -> None:
    found = served_window_in(entries, "qwen")
    assert found is None or (isinstance(found, int) and 1_024 <= found <= MAX_STATED_WINDOW_TOKENS)


def test_ollama_says_what_it_allocated_for_a_loaded_model() -> None:
    running = {
        "models": [
            {"name": "qwen2.5-coder:7b", "model": "qwen2.5-coder:7b", "context_length": 4096}
        ]
    }
    assert loaded_window_in(running, "qwen2.5-coder:7b") == 4096
    latest = {"models": [{"name": "llama3.2:latest", "context_length": 8192}]}
    assert loaded_window_in(latest, "llama3.2") == 8192  # no tag is Ollama's ":latest"
    assert loaded_window_in({"models": []}, "llama3.2") is None  # not loaded yet
    assert loaded_window_in(running, "other") is None


@settings(max_examples=300, deadline=None)
@given(json_like("models", "name", "model", "context_length"))
def test_a_hostile_process_list_never_raises(payload: Any) -> None:
    found = loaded_window_in(payload, "qwen")
    assert found is None or (isinstance(found, int) and 1_024 <= found <= MAX_STATED_WINDOW_TOKENS)


@pytest.mark.parametrize(
    ("url", "root"),
    [
        ("http://127.0.0.1:8080/v1", "http://127.0.0.1:8080"),
        ("http://user:pw@10.0.0.5:8080/ollama/v1/", "http://10.0.0.5:8080/ollama"),
        ("http://localhost:11434", "http://localhost:11434"),
        ("ftp://127.0.0.1/v1", None),
        ("http:///v1", None),
    ],
)
def test_the_servers_own_api_sits_at_its_root_without_credentials(
    url: str, root: str | None
) -> None:
    assert api_root(url) == root


def test_llama_server_states_the_context_of_one_slot_in_props() -> None:
    props = {"default_generation_settings": {"n_ctx": 4096}, "total_slots": 4}
    assert props_window_in(props) == 4096
    for payload in (None, [], {"n_ctx": 4096}, {"default_generation_settings": {"n_ctx": "4k"}}):
        assert props_window_in(payload) is None


def test_ollama_names_compare_without_case_and_odd_names_are_no_match() -> None:
    running = {"models": [{"name": "Qwen2.5-Coder:7B", "context_length": 4096}]}
    assert loaded_window_in(running, "qwen2.5-coder:7b") == 4096
    odd = {"models": [{"name": ["qwen"], "model": {"x": 1}, "context_length": 4096}]}
    assert loaded_window_in(odd, "qwen") is None


def _lmstudio(*models: tuple[str, list[tuple[str, int]]]) -> dict[str, Any]:
    return {
        "models": [
            {
                "type": "llm",
                "key": key,
                "loaded_instances": [
                    {"id": i, "config": {"context_length": n, "parallel": 4}} for i, n in loaded
                ],
                "max_context_length": 32768,
            }
            for key, loaded in models
        ]
    }


def test_lm_studio_says_the_context_a_model_was_loaded_with() -> None:
    one = _lmstudio(("qwen2.5-coder-7b", [("qwen2.5-coder-7b", 4096)]), ("llama-3.2-3b", []))
    assert lmstudio_window_in(one, "qwen2.5-coder-7b") == 4096
    assert lmstudio_window_in(one, "Qwen2.5-Coder-7B") == 4096  # without case
    # A name it does not list is served by the only loaded model.
    assert lmstudio_window_in(one, "gpt-4o") == 4096
    two = _lmstudio(("qwen", [("qwen", 8192), ("qwen:2", 4096)]), ("llama", [("llama", 2048)]))
    assert lmstudio_window_in(two, "qwen") == 4096  # any instance may serve it: the least
    assert lmstudio_window_in(two, "qwen:2") == 4096  # an instance by its id
    assert lmstudio_window_in(two, "llama") == 2048
    assert lmstudio_window_in(two, "other") is None  # two loaded: which one is unknown
    assert lmstudio_window_in(_lmstudio(("qwen", [])), "qwen") is None  # not loaded yet
    # Listed but not loaded while another model is: it will load with its own context.
    evicted = _lmstudio(("b", []), ("a", [("a", 32768)]))
    assert lmstudio_window_in(evicted, "b") is None
    assert lmstudio_window_in({"object": "list", "data": []}, "qwen") is None  # OpenAI's list


@settings(max_examples=300, deadline=None)
@given(json_like("models", "key", "loaded_instances", "id", "config", "context_length"))
def test_a_hostile_lm_studio_list_never_raises(payload: Any) -> None:
    found = lmstudio_window_in(payload, "qwen")
    assert found is None or (isinstance(found, int) and 1_024 <= found <= MAX_STATED_WINDOW_TOKENS)
