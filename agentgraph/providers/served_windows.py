"""The context window a self-hosted OpenAI-compatible server says it serves.

A local server often runs a model with a smaller window than the model has
(llama-server's ``--ctx-size``, vLLM's ``--max-model-len``, Ollama's default 4,096
tokens), and agentgraph's table or the model's profile knows only the model's. Its first
oversized request would fail (an earlier process's error may not have taught the window
yet, see :mod:`agentgraph.providers.learned_windows`) — or, with Ollama, be cut from the
beginning without an error, so that nothing would ever teach it.

Only a server on this machine or a private network is asked (a hosted endpoint states
nothing of the kind, and a slow one would delay the start), each question once, with a
short timeout and no retry, with the chat model's own key:

* when the agent is built, its model list (``GET /v1/models``): vLLM states
  ``max_model_len``, some llama.cpp builds ``meta.n_ctx``; else llama-server's
  ``GET /props`` (``default_generation_settings.n_ctx``, the context of one request slot);
  then LM Studio's ``GET /api/v1/models`` (``loaded_instances[].config.context_length``
  of a model already loaded);
* when none stated a window, after the first reply, Ollama's ``GET /api/ps``
  (``context_length`` of the model, which Ollama loads at its first request), then LM
  Studio's list again (it loads a model at its first request too, 4,096 tokens by
  default).

A smaller window than the budget's is adopted and said; never a larger one.
``AGENTGRAPH_CONTEXT_WINDOW`` wins: nothing is asked.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar
from urllib.parse import urlsplit

from agentgraph.config import Settings
from agentgraph.context.windows import Budget, stated_window
from agentgraph.providers.endpoints import is_local_endpoint
from agentgraph.providers.learned_windows import endpoint_label

__all__ = [
    "SERVED_WINDOW_TIMEOUT_S",
    "SERVED_WINDOW_TOTAL_S",
    "AskOnce",
    "api_root",
    "apply_loaded_window",
    "apply_served_window",
    "lmstudio_window_in",
    "loaded_window_in",
    "props_window_in",
    "served_window_in",
]

_T = TypeVar("_T")

# The model list is on the same machine or network: it answers in milliseconds, or the
# chat requests would not work either.
SERVED_WINDOW_TIMEOUT_S = 2.0
# All the questions of one moment together: the timeout above bounds each read, so a
# server that trickles its answer a byte at a time would otherwise hold the start forever.
SERVED_WINDOW_TOTAL_S = 5.0


def _entry_window(entry: Mapping[str, Any]) -> int | None:
    meta = entry.get("meta")
    if isinstance(meta, Mapping):  # llama.cpp
        found = stated_window(meta.get("n_ctx"))
        if found is not None:
            return found
    return stated_window(entry.get("max_model_len"))  # vLLM


def served_window_in(entries: Iterable[Any], model: str) -> int | None:
    """The window a model list states for ``model``.

    The entry whose ``id`` is ``model``; a list of one model (llama-server serves one,
    under whatever name it was started with) stands for it too.

    Args:
        entries: The ``data`` items of a ``GET /v1/models`` answer (anything).
        model: The model name requests carry.

    Returns:
        The window in tokens, or None when the list states none.
    """
    listed = [e for e in entries if isinstance(e, Mapping)]
    named = [e for e in listed if e.get("id") == model]
    if not named and len(listed) == 1:
        named = listed
    windows = {w for w in map(_entry_window, named) if w is not None}
    return windows.pop() if len(windows) == 1 else None


def _client(chat_model: Any) -> Any:
    """The OpenAI client of an OpenAI-compatible chat model (None for others)."""
    return getattr(chat_model, "root_client", None)


def _listed_models(chat_model: Any) -> list[Any] | None:
    """The endpoint's model list through the chat model's own client (its key, headers).

    Returns:
        The list's entries (none when the server has no usable list); None when the
        server could not be reached (nothing else is worth asking it now).
    """
    client = _client(chat_model)
    if client is None:  # not an OpenAI-compatible chat model
        return []
    try:
        quick = client.with_options(timeout=SERVED_WINDOW_TIMEOUT_S, max_retries=0)
        page = quick.models.list()
        return [item.model_dump() for item in page.data]
    except Exception as exc:  # a server without a usable list (any failure): nothing learned
        import openai  # loaded already: the client is its own

        return None if isinstance(exc, openai.APIConnectionError) else []


def api_root(base_url: str) -> str | None:
    """The server's own API root: ``base_url`` without credentials and its ``/v1``.

    Args:
        base_url: The configured endpoint.

    Returns:
        ``http://10.0.0.5:8080/ollama`` for ``http://u:p@10.0.0.5:8080/ollama/v1/``;
        None for anything but an http(s) URL with a host.
    """
    try:
        parts = urlsplit(base_url.strip())
    except ValueError:
        return None
    netloc = parts.netloc.rpartition("@")[2]
    if parts.scheme not in ("http", "https") or not netloc:
        return None
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return f"{parts.scheme}://{netloc}{path}"


def _get_json(chat_model: Any, root: str, path: str) -> Any:
    """``GET root + path`` through the chat model's own client; the decoded body, or None.

    The client's key, headers and connection pool serve it as they serve the chat
    requests to the same server (a client of its own would cost ~20 ms of start-up CPU
    building its TLS context, even for plain http).
    """
    client = _client(chat_model)
    if client is None:
        return None
    import httpx  # loaded already: the OpenAI client is built on it

    try:
        quick = client.with_options(timeout=SERVED_WINDOW_TIMEOUT_S, max_retries=0)
        answer = quick.get(f"{root}{path}", cast_to=httpx.Response)
        return answer.json() if answer.status_code == 200 else None
    except Exception:  # a server without that API (any failure): nothing learned
        return None


def props_window_in(payload: Any) -> int | None:
    """The context of one request slot, from llama-server's ``GET /props``.

    Args:
        payload: The decoded answer (anything).

    Returns:
        ``default_generation_settings.n_ctx`` (the per-slot context), or None.
    """
    if not isinstance(payload, Mapping):
        return None
    settings = payload.get("default_generation_settings")
    return stated_window(settings.get("n_ctx")) if isinstance(settings, Mapping) else None


def loaded_window_in(payload: Any, model: str) -> int | None:
    """The context Ollama's ``GET /api/ps`` says it allocated for ``model``.

    Args:
        payload: The decoded answer (anything).
        model: The model name requests carry (``qwen2.5-coder:7b``; a name without a tag
            is Ollama's ``:latest``); compared without case.

    Returns:
        The window in tokens, or None when the model is not listed with one.
    """
    models = payload.get("models") if isinstance(payload, Mapping) else None
    if not isinstance(models, list):
        return None
    names = {model.lower(), f"{model.lower()}:latest"}

    def named(entry: Mapping[str, Any]) -> bool:
        found = (entry.get("name"), entry.get("model"))
        return any(isinstance(n, str) and n.lower() in names for n in found)

    listed = [e for e in models if isinstance(e, Mapping) and named(e)]
    windows = {w for w in (stated_window(e.get("context_length")) for e in listed) if w is not None}
    return windows.pop() if len(windows) == 1 else None


LMSTUDIO_MODELS_PATH = "/api/v1/models"


def lmstudio_window_in(payload: Any, model: str) -> int | None:
    """The context LM Studio loaded ``model`` with, from its ``GET /api/v1/models``.

    Args:
        payload: The decoded answer (anything).
        model: The model name requests carry: a model's ``key`` or one loaded
            instance's ``id``; compared without case.

    Returns:
        The smallest context of the model's loaded instances (a request may reach any
        of them) — of the only loaded model when none is named so —, or None when it is
        not loaded.
    """
    models = payload.get("models") if isinstance(payload, Mapping) else None
    if not isinstance(models, list):
        return None
    wanted = model.lower()
    named: set[int] = set()
    loaded: set[int] = set()
    listed = False  # some entry's key is the wanted model
    models_loaded = 0
    for entry in models:
        if not isinstance(entry, Mapping):
            continue
        key = entry.get("key")
        whole_model = isinstance(key, str) and key.lower() == wanted
        listed = listed or whole_model
        instances = entry.get("loaded_instances")
        if not isinstance(instances, list):
            continue
        models_loaded += bool(instances)
        for instance in instances:
            config = instance.get("config") if isinstance(instance, Mapping) else None
            window = (
                stated_window(config.get("context_length")) if isinstance(config, Mapping) else None
            )
            if window is None:
                continue
            loaded.add(window)
            name = instance.get("id")
            if whole_model or (isinstance(name, str) and name.lower() == wanted):
                named.add(window)
    # A name LM Studio does not list is served by the model it has loaded, if only one;
    # a listed model that is not loaded yet gets its own context when it loads.
    windows = named or (loaded if not listed and models_loaded == 1 else set())
    return min(windows) if windows else None


def _local_root(settings: Settings) -> str | None:
    """The API root of the configured endpoint when it is local and no window is set."""
    from agentgraph.providers.model import endpoint_url  # the model module imports this one's users

    if settings.context_window is not None:
        return None
    url = endpoint_url(settings, settings.model)
    return api_root(url) if url is not None and is_local_endpoint(url) else None


def _notice(settings: Settings, window: int, how: str) -> str:
    return (
        f"context window {window:,} tokens for {settings.model!r}, as "
        f"{endpoint_label(settings, settings.model)} {how} — AGENTGRAPH_CONTEXT_WINDOW "
        "overrides it"
    )


def apply_loaded_window(budget: Budget, settings: Settings, chat_model: Any) -> str | None:
    """Shrink ``budget`` to the context a local server loaded the model with.

    Asked after the first reply (Ollama and LM Studio load a model at its first request):
    Ollama's ``GET /api/ps``, then LM Studio's ``GET /api/v1/models``; other servers
    answer 404 and nothing changes.

    Args:
        budget: The model's budget.
        settings: Supplies the endpoint and ``context_window``.
        chat_model: The chat model (its name, its key).

    Returns:
        The notice to show when the budget shrank, else None.
    """
    root = _local_root(settings)
    if root is None:
        return None
    model_name = str(getattr(chat_model, "model_name", "") or "")

    def ask() -> tuple[int | None, str]:
        ollama = loaded_window_in(_get_json(chat_model, root, "/api/ps"), model_name)
        if ollama is not None:
            return ollama, "allocated it (Ollama drops what does not fit without an error)"
        answer = _get_json(chat_model, root, LMSTUDIO_MODELS_PATH)
        return lmstudio_window_in(answer, model_name), "loaded the model with it"

    _answered, answer = _within_deadline(ask)
    window, how = answer if answer is not None else (None, "")
    if window is None:
        return None
    notice = _notice(settings, window, how)
    return notice if budget.adopt_window(window, notice) else None


def apply_served_window(budget: Budget, settings: Settings, chat_model: Any) -> bool:
    """Shrink ``budget`` to the window a local server states for the model, saying so.

    The model list first (llama.cpp builds that state ``meta.n_ctx``, vLLM), then
    llama-server's ``GET /props`` (the context of one request slot), then LM Studio's
    own list (a model already loaded).

    Args:
        budget: The model's budget.
        settings: Supplies the endpoint, the model name and ``context_window``.
        chat_model: The chat model (its client asks the endpoint).

    Returns:
        Whether a local server was asked and stated no window (then Ollama's loaded
        context is worth asking for after the first reply, see
        :func:`apply_loaded_window`).
    """
    root = _local_root(settings)
    if root is None:
        return False
    model_name = str(getattr(chat_model, "model_name", "") or "")

    def ask() -> int | None:
        listed = _listed_models(chat_model)
        if listed is None:
            return None  # not reachable now (a timeout each would delay the start again)
        window = served_window_in(listed, model_name)
        if window is None:
            window = props_window_in(_get_json(chat_model, root, "/props"))
        if window is None:
            window = lmstudio_window_in(
                _get_json(chat_model, root, LMSTUDIO_MODELS_PATH), model_name
            )
        return window

    answered, window = _within_deadline(ask)
    if not answered:
        return False  # a server that stalls its answers is not asked again
    if window is None:
        return True
    budget.adopt_window(window, _notice(settings, window, "reports it"))
    return False


def _within_deadline(ask: Callable[[], _T]) -> tuple[bool, _T | None]:
    """``ask()`` in a thread, waited for at most ``SERVED_WINDOW_TOTAL_S``.

    Returns:
        (True, its answer), or (False, None) when it took longer (the thread is left to
        its own read timeouts, holding nothing of the caller's).
    """
    box: list[_T] = []
    worker = threading.Thread(target=lambda: box.append(ask()), name="served-window", daemon=True)
    worker.start()
    worker.join(SERVED_WINDOW_TOTAL_S)
    return (True, box[0]) if box else (False, None)


class AskOnce:
    """A question asked once per process, however many pipelines share it.

    Args:
        ask: Asks the server; returns the notice to show when the budget shrank.
    """

    def __init__(self, ask: Callable[[], str | None]) -> None:
        self._ask: Callable[[], str | None] | None = ask
        self._lock = threading.Lock()

    def __call__(self) -> str | None:
        """The notice of the first call; None on every later one (nothing is asked)."""
        with self._lock:
            ask, self._ask = self._ask, None
        return ask() if ask is not None else None
