"""Chat-model construction: OpenAI-compatible endpoints, and other providers by name.

A model name is either a plain name (``gpt-4o-mini``, ``qwen2.5-coder:7b``) for the
OpenAI-compatible endpoint at ``OPENAI_BASE_URL``, or ``provider:model``:

- ``openai:`` — OpenAI, or the endpoint at ``OPENAI_BASE_URL``;
- ``ollama:``, ``vllm:``, ``llamacpp:``, ``lmstudio:`` — that local server at its usual
  port, whatever ``OPENAI_BASE_URL`` says (the prefix names the server: a plain name is
  what goes to ``OPENAI_BASE_URL``), and without ``OPENAI_API_KEY``;
- any other provider LangChain's ``init_chat_model`` knows (``anthropic:``,
  ``google_genai:``, ``mistralai:``, ``groq:``, ``bedrock_converse:`` …), with the
  provider's package installed (``agentgraph[anthropic]`` and the other extras).

Only a known provider prefix makes a ``provider:`` string: Ollama's own tags contain a
colon (``qwen2.5-coder:7b``) and are plain names.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel

from agentgraph.config import Settings
from agentgraph.errors import ConfigError

# Checking a model name against the endpoint's /models list must not hang /model.
MODEL_LIST_TIMEOUT_S = 5.0
MODELS_SHOWN_MAX = 8

# llama.cpp / Ollama / vLLM accept any key, but the OpenAI client insists on one.
LOCAL_ENDPOINT_PLACEHOLDER_KEY = "not-needed"

# Providers served through langchain-openai, with the base URL their servers use by
# default (None: OpenAI itself, or OPENAI_BASE_URL).
OPENAI_COMPATIBLE_PROVIDERS: dict[str, str | None] = {
    "openai": None,
    "ollama": "http://127.0.0.1:11434/v1",
    "vllm": "http://127.0.0.1:8000/v1",
    "llamacpp": "http://127.0.0.1:8080/v1",
    "lmstudio": "http://127.0.0.1:1234/v1",
}
# Providers of LangChain's init_chat_model → the package and agentgraph extra they need.
LANGCHAIN_PROVIDERS: dict[str, tuple[str, str | None]] = {
    "anthropic": ("langchain-anthropic", "anthropic"),
    "google_genai": ("langchain-google-genai", "google"),
    "google_vertexai": ("langchain-google-vertexai", None),
    "google_anthropic_vertex": ("langchain-google-vertexai", None),
    "mistralai": ("langchain-mistralai", "mistral"),
    "groq": ("langchain-groq", "groq"),
    "bedrock": ("langchain-aws", "aws"),
    "bedrock_converse": ("langchain-aws", "aws"),
    "azure_openai": ("langchain-openai", None),
    "azure_ai": ("langchain-azure-ai", None),
    "cohere": ("langchain-cohere", None),
    "fireworks": ("langchain-fireworks", None),
    "together": ("langchain-together", None),
    "huggingface": ("langchain-huggingface", None),
    "deepseek": ("langchain-deepseek", None),
    "xai": ("langchain-xai", None),
    "nvidia": ("langchain-nvidia-ai-endpoints", None),
    "ibm": ("langchain-ibm", None),
    "perplexity": ("langchain-perplexity", None),
}


def split_provider(name: str) -> tuple[str | None, str]:
    """``("anthropic", "claude-…")`` for a known provider prefix, else ``(None, name)``."""
    prefix, sep, rest = name.partition(":")
    key = prefix.lower()
    if sep and rest and (key in OPENAI_COMPATIBLE_PROVIDERS or key in LANGCHAIN_PROVIDERS):
        return key, rest
    return None, name


def check_priced(model: str, budget_usd: float) -> None:
    """Refuse a dollar budget for a model whose price is unknown: the budget could not
    be measured, and running without the limit the user asked for is worse than not
    running.

    Raises:
        ConfigError: ``budget_usd`` is set and ``model`` is missing from the price table.
    """
    from agentgraph.providers.pricing import price_for

    if budget_usd and price_for(model) is None:
        raise ConfigError(
            f"a dollar budget (AGENTGRAPH_TURN_BUDGET_USD, --budget $X) needs a known price, "
            f"and {model} has none: give the budget in tokens (--budget N, "
            "AGENTGRAPH_TURN_BUDGET_TOKENS) instead"
        )


def check_model_config(settings: Settings, model: str | None = None) -> None:
    """Fail early, with the variables to set, when no endpoint can be reached.

    Raises:
        ConfigError: neither an API key nor an endpoint is configured, or a dollar
            budget is set for a main model (``model`` None) without a known price.
    """
    if model is None:  # the main model: a summary or title model's calls are not budgeted
        check_priced(settings.model, settings.turn_budget_usd)
    provider, _ = split_provider(model or settings.model)
    if provider in LANGCHAIN_PROVIDERS:
        return  # that provider's package reads its own credentials
    if provider is not None and OPENAI_COMPATIBLE_PROVIDERS.get(provider):
        return  # a local server with a known default address
    if settings.api_key is None and not settings.base_url:
        raise ConfigError(
            "no model endpoint configured: set OPENAI_API_KEY (for OpenAI) or "
            "OPENAI_BASE_URL (for a local/compatible server) — see .env.example"
        )


def _langchain_model(provider: str, name: str, settings: Settings) -> BaseChatModel:
    package, extra = LANGCHAIN_PROVIDERS[provider]
    how = f"uv pip install 'agentgraph[{extra}]'" if extra else f"uv pip install {package}"
    try:
        from langchain.chat_models import init_chat_model
    except ImportError as exc:  # pragma: no cover - langchain is a dependency
        raise ConfigError(f"model {provider}:{name} needs the `langchain` package") from exc
    kwargs: dict[str, Any] = {"timeout": settings.request_timeout_s, "max_retries": 0}
    if settings.max_output_tokens is not None:
        kwargs["max_tokens"] = settings.max_output_tokens
    try:
        model: BaseChatModel = init_chat_model(name, model_provider=provider, **kwargs)
        return model
    except ImportError:
        raise ConfigError(f"model {provider}:{name} needs the {package} package: {how}") from None
    except Exception as exc:  # e.g. a missing API key, reported by the provider package
        text = " ".join(str(exc).split())[:300]
        raise ConfigError(f"model {provider}:{name} cannot be set up: {text}") from None


def endpoint_url(settings: Settings, model: str | None = None) -> str | None:
    """The base URL requests for ``model`` (default: ``settings.model``) go to.

    Returns:
        The local server a provider prefix names (``ollama:…``), else
        ``OPENAI_BASE_URL``, else None (the provider's own endpoint).
    """
    provider, _name = split_provider(model or settings.model)
    if provider is not None and provider in LANGCHAIN_PROVIDERS:
        return None
    return _openai_base_url(settings, provider)


def text_tool_calls_on(settings: Settings, model: str | None = None) -> bool:
    """Whether tool calls ``model`` writes as text are turned into real calls.

    ``AGENTGRAPH_TEXT_TOOL_CALLS=on`` or ``off`` decides. ``auto`` (the default) turns
    them on only for a local endpoint: the base URL requests go to (the local server a
    prefix such as ``ollama:`` names, else ``OPENAI_BASE_URL``) is on this machine or a
    private network (loopback, private and link-local addresses, ``localhost``,
    ``*.local`` …). Small local models need it; a hosted model has real tool calls, and
    its text (a fenced JSON block in an answer) is never run as a call. A port says
    nothing about who answers on it, so none counts.

    Args:
        settings: The settings.
        model: The model name (default: ``settings.model``).
    """
    if settings.text_tool_calls != "auto":
        return settings.text_tool_calls == "on"
    from agentgraph.providers.endpoints import is_local_endpoint

    return is_local_endpoint(endpoint_url(settings, model))


def _local_server(provider: str | None) -> str | None:
    """The address of the local server an explicit prefix names (``ollama:``…), or None."""
    return OPENAI_COMPATIBLE_PROVIDERS.get(provider) if provider is not None else None


def local_server_url(model: str) -> str | None:
    """The local server that serves ``model`` because of its prefix (``ollama:…``), or None."""
    return _local_server(split_provider(model)[0])


def _openai_base_url(settings: Settings, provider: str | None) -> str | None:
    """The local server an explicit prefix names, else ``OPENAI_BASE_URL`` (None: OpenAI).

    The prefix wins: ``/model ollama:qwen2.5-coder:7b`` means that Ollama even when
    ``OPENAI_BASE_URL`` points at another server for the configured model.
    """
    return _local_server(provider) or settings.base_url or None


def _api_key(settings: Settings, provider: str | None) -> str | None:
    """``OPENAI_API_KEY`` for OpenAI or ``OPENAI_BASE_URL``; never for a named local server,
    which needs none and is not where the user meant the key to go."""
    if _local_server(provider) is not None or settings.api_key is None:
        return None
    return settings.api_key.get_secret_value()


def build_chat_model(settings: Settings, model: str | None = None) -> BaseChatModel:
    """Build the chat model named by ``model`` (default: ``settings.model``).

    Raises:
        ConfigError: the configuration cannot produce a model.
    """
    provider, name = split_provider(model or settings.model)
    if provider is not None and provider in LANGCHAIN_PROVIDERS:
        if model is None:
            check_priced(settings.model, settings.turn_budget_usd)
        return _langchain_model(provider, name, settings)
    check_model_config(settings, model)
    from langchain_openai.chat_models.base import ChatOpenAI

    base_url = _openai_base_url(settings, provider)
    key = _api_key(settings, provider) or LOCAL_ENDPOINT_PLACEHOLDER_KEY
    kwargs: dict[str, object] = {}
    if settings.max_output_tokens is not None:
        kwargs["max_tokens"] = settings.max_output_tokens
    return ChatOpenAI(
        model=name,
        base_url=base_url,
        api_key=key,  # type: ignore[arg-type]
        timeout=settings.request_timeout_s,
        # Retries are ours (the retry middleware): they know overflow from rate limit.
        max_retries=0,
        stream_usage=True,
        **kwargs,  # type: ignore[arg-type]
    )


def check_model_available(settings: Settings, name: str) -> None:
    """Refuse a model the OpenAI-compatible endpoint does not list (``/model NAME``).

    Endpoints that cannot list their models (or cannot be reached now) are given the
    benefit of the doubt: the first call then reports the problem in one line.

    Raises:
        ConfigError: the endpoint lists its models and ``name`` is not among them.
    """
    provider, bare = split_provider(name)
    if provider is not None and provider in LANGCHAIN_PROVIDERS:
        return
    base = _openai_base_url(settings, provider) or "https://api.openai.com/v1"
    import httpx

    headers = {}
    key = _api_key(settings, provider)
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    try:
        response = httpx.get(
            base.rstrip("/") + "/models", headers=headers, timeout=MODEL_LIST_TIMEOUT_S
        )
        data = response.json().get("data") if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return
    if not isinstance(data, list):
        return
    ids = [str(item.get("id")) for item in data if isinstance(item, dict) and item.get("id")]
    if ids and bare not in ids:
        shown = ", ".join(ids[:MODELS_SHOWN_MAX]) + (" …" if len(ids) > MODELS_SHOWN_MAX else "")
        raise ConfigError(f"unknown model {name!r}: the endpoint offers {shown}")
