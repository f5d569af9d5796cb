"""Model names: plain names, OpenAI-compatible provider prefixes, LangChain providers."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from langchain_openai import ChatOpenAI

from agentgraph.config import Settings
from agentgraph.context.tokens import encoding_for_model
from agentgraph.errors import ConfigError
from agentgraph.providers.model import build_chat_model, check_model_config, split_provider


def test_only_known_prefixes_are_providers() -> None:
    assert split_provider("anthropic:claude-sonnet-4-5") == ("anthropic", "claude-sonnet-4-5")
    assert split_provider("ollama:qwen2.5-coder:7b") == ("ollama", "qwen2.5-coder:7b")
    # Ollama tags carry a colon: a plain name for the configured endpoint.
    assert split_provider("qwen2.5-coder:7b") == (None, "qwen2.5-coder:7b")
    assert split_provider("ft:gpt-4o-mini:org::id") == (None, "ft:gpt-4o-mini:org::id")


def test_ollama_tag_goes_to_the_configured_endpoint(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings(AGENTGRAPH_MODEL="qwen2.5-coder:7b")
    model = build_chat_model(settings)
    assert isinstance(model, ChatOpenAI)
    assert model.model_name == "qwen2.5-coder:7b"
    assert model.openai_api_base == "http://127.0.0.1:9/v1"


def test_local_provider_prefix_works_without_any_setting(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings(OPENAI_BASE_URL="", AGENTGRAPH_MODEL="ollama:llama3.2")
    check_model_config(settings)  # no key, no URL: the prefix names the server
    model = build_chat_model(settings)
    assert isinstance(model, ChatOpenAI)
    assert model.model_name == "llama3.2"
    assert model.openai_api_base == "http://127.0.0.1:11434/v1"


def test_openai_prefix_counts_exactly() -> None:
    assert encoding_for_model("openai:gpt-4o-mini") == "o200k_base"
    assert encoding_for_model("qwen2.5-coder:7b") is None


def test_missing_provider_package_is_one_line_naming_the_extra(
    make_settings: Callable[..., Settings],
) -> None:
    # langchain-groq is an optional extra, not installed by `uv sync`.
    settings = make_settings(AGENTGRAPH_MODEL="groq:llama-3.3-70b")
    with pytest.raises(ConfigError) as info:
        build_chat_model(settings)
    assert "agentgraph[groq]" in str(info.value) and "\n" not in str(info.value)


def test_a_base_url_without_a_scheme_is_a_settings_error(
    make_settings: Callable[..., Settings],
) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="http:// or https://"):
        make_settings(OPENAI_BASE_URL="notaurl")


@pytest.mark.parametrize(
    ("env", "on"),
    [
        ({"OPENAI_BASE_URL": "http://127.0.0.1:8080/v1"}, True),
        ({"OPENAI_BASE_URL": "http://localhost:11434/v1"}, True),
        ({"OPENAI_BASE_URL": "http://192.168.1.20:8000/v1"}, True),
        ({"OPENAI_BASE_URL": "http://gpu-box.lan:8080/v1"}, True),
        ({"OPENAI_BASE_URL": "https://api.openai.com/v1"}, False),
        ({"OPENAI_BASE_URL": "https://llm.example.com:11434/v1"}, False),  # a port is no rule
        ({"OPENAI_BASE_URL": None, "AGENTGRAPH_MODEL": "gpt-4o-mini"}, False),
        ({"OPENAI_BASE_URL": None, "AGENTGRAPH_MODEL": "ollama:qwen2.5-coder:7b"}, True),
        ({"OPENAI_BASE_URL": None, "AGENTGRAPH_MODEL": "anthropic:claude-sonnet-4-5"}, False),
        (
            {"OPENAI_BASE_URL": "https://api.openai.com/v1", "AGENTGRAPH_TEXT_TOOL_CALLS": "on"},
            True,
        ),
        (
            {"OPENAI_BASE_URL": "http://127.0.0.1:8080/v1", "AGENTGRAPH_TEXT_TOOL_CALLS": "off"},
            False,
        ),
        # The setting was a boolean: its old values keep their meaning.
        (
            {"OPENAI_BASE_URL": "https://api.openai.com/v1", "AGENTGRAPH_TEXT_TOOL_CALLS": "true"},
            True,
        ),
        ({"OPENAI_BASE_URL": "http://127.0.0.1:8080/v1", "AGENTGRAPH_TEXT_TOOL_CALLS": "0"}, False),
    ],
)
def test_text_tool_calls_are_understood_for_local_endpoints_or_by_setting(
    make_settings: Callable[..., Settings], env: dict[str, str | None], on: bool
) -> None:
    from agentgraph.providers.model import text_tool_calls_on

    assert text_tool_calls_on(make_settings(**env)) is on


def test_text_tool_calls_setting_refuses_other_values(
    make_settings: Callable[..., Settings],
) -> None:
    assert make_settings().text_tool_calls == "auto"
    with pytest.raises(ValueError, match="AGENTGRAPH_TEXT_TOOL_CALLS"):
        make_settings(AGENTGRAPH_TEXT_TOOL_CALLS="sometimes")
