"""Subagents as runs of agentgraph's graph on a LangGraph server.

With ``AGENTGRAPH_SUBAGENT_SERVER=URL`` (and ``AGENTGRAPH_SUBAGENT_SERVER_API_KEY`` when
the deployment wants one) every subagent — foreground or background — runs as a run of
the ``agent`` graph that this repository's ``langgraph.json`` declares
(``agentgraph/frontends/server.py``), through ``langgraph_sdk``: ``threads.create`` (the remote
thread's id is the subagent's own thread id, as a UUID), ``runs.create`` with the same
input a local subagent gets (its task, its allowed and denied tools, its context id)
and a context that caps its loops and says it cannot ask for approvals, then
``runs.get`` polled until it ends, and ``threads.get_state`` for its answer. The run
and the task id map one to one: cancelling the task (or the caller's turn) calls
``runs.cancel``. On a Postgres-backed deployment the server's task queue spreads the
runs over its worker machines.

The interface and the caller's context cost are the local ones: the same status line
and result text, the same ``subagent_started`` / ``subagent_tool`` / ``subagent_done``
events (tool calls are read from the remote thread's state as it is polled). A server
that is down, answers an error (5xx) or is slower than :data:`REMOTE_HTTP_TIMEOUT_S` per
request gives one ``failed`` result naming the server; the subagent is never run
locally instead. The subagent works in the *server's* workspace
(``AGENTGRAPH_SERVER_WORKSPACE``), so ``writes=true`` (an isolated tree merged back
here) is refused.

The API key is a secret: it is sent only as the SDK's ``x-api-key`` header, and is in
``Settings.secret_values`` (redacted from tool output, logs and exports).
"""

from __future__ import annotations

import threading
import uuid
from typing import Any
from urllib.parse import urlsplit

import httpx
from langchain_core.messages import BaseMessage, messages_from_dict

# The graph langgraph.json declares.
REMOTE_ASSISTANT_ID = "agent"
# Each HTTP request to the server: a server slower than this is reported as down.
REMOTE_HTTP_TIMEOUT_S = 30.0
REMOTE_CONNECT_TIMEOUT_S = 5.0
# How often a running remote subagent's status (and progress) is read.
REMOTE_POLL_S = 0.5
RUNNING_STATUSES = frozenset({"pending", "running"})
REMOTE_ERROR_MAX_CHARS = 300


class RemoteError(Exception):
    """The subagent server could not be used (down, an error status, too slow)."""


def remote_thread_id(thread_id: str) -> str:
    """The server's thread id for subagent thread ``thread_id`` (a UUID, as it wants)."""
    try:
        return str(uuid.UUID(thread_id))
    except ValueError:
        return str(uuid.uuid5(uuid.NAMESPACE_URL, thread_id))


def shown_url(url: str) -> str:
    """``scheme://host:port/path`` without any user or password in it."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path.rstrip('/')}"


def _describe(exc: BaseException) -> str:
    if isinstance(exc, httpx.HTTPStatusError):
        return f"it answered HTTP {exc.response.status_code} {exc.response.reason_phrase}"
    if isinstance(exc, httpx.TimeoutException):
        return f"it did not answer within {REMOTE_HTTP_TIMEOUT_S:g}s"
    if isinstance(exc, httpx.TransportError):
        return f"it is unreachable ({type(exc).__name__})"
    text = " ".join(str(exc).split())[:REMOTE_ERROR_MAX_CHARS]
    return f"{type(exc).__name__}: {text}"


def _to_messages(raw: Any) -> list[BaseMessage]:
    """The server's JSON messages as LangChain messages (usage metadata kept)."""
    found: list[BaseMessage] = []
    for item in raw if isinstance(raw, list) else []:
        if isinstance(item, dict) and isinstance(item.get("type"), str):
            try:
                found.extend(messages_from_dict([{"type": item["type"], "data": item}]))
            except (ValueError, TypeError, KeyError):
                continue
    return found


class RemoteSubagents:
    """The client side of subagents that run on a LangGraph server.

    Args:
        url: ``AGENTGRAPH_SUBAGENT_SERVER``.
        api_key: ``AGENTGRAPH_SUBAGENT_SERVER_API_KEY`` (None: none is sent, not even
            one from the environment).
    """

    def __init__(self, url: str, api_key: str | None) -> None:
        self.url = url
        self._api_key = api_key
        self._client: Any = None
        self._lock = threading.Lock()

    @property
    def where(self) -> str:
        """The server, as results name it."""
        return f"the subagent server {shown_url(self.url)} (AGENTGRAPH_SUBAGENT_SERVER)"

    def failure(self, exc: BaseException) -> str:
        """The one line a failed request gives."""
        return f"{self.where}: {_describe(exc)}; the subagent was not run here"

    def client(self) -> Any:
        """The SDK's sync client, made at first use."""
        with self._lock:
            if self._client is None:
                from langgraph_sdk import get_sync_client

                self._client = get_sync_client(
                    url=self.url,
                    api_key=self._api_key,
                    # (connect, read, write, pool)
                    timeout=(
                        REMOTE_CONNECT_TIMEOUT_S,
                        REMOTE_HTTP_TIMEOUT_S,
                        REMOTE_HTTP_TIMEOUT_S,
                        REMOTE_CONNECT_TIMEOUT_S,
                    ),
                )
            return self._client

    def start(self, thread_id: str, inputs: dict[str, Any], context: dict[str, Any]) -> str:
        """Create the remote thread and start the run; its run id.

        Raises:
            RemoteError: The server could not be used.
        """
        wire = dict(inputs)
        wire["messages"] = [
            {"type": m.type, "content": m.content, "id": m.id}
            for m in inputs.get("messages") or []
            if isinstance(m, BaseMessage)
        ]
        remote = remote_thread_id(thread_id)
        try:
            client = self.client()
            client.threads.create(
                thread_id=remote,
                if_exists="do_nothing",
                metadata={"agentgraph_subagent": str(inputs.get("context_id") or "")},
            )
            run = client.runs.create(remote, REMOTE_ASSISTANT_ID, input=wire, context=context)
        except Exception as exc:
            raise RemoteError(self.failure(exc)) from exc
        return str(run["run_id"])

    def status(self, thread_id: str, run_id: str) -> str:
        """The run's status (``pending``, ``running``, ``success``, ``error``…)."""
        try:
            run = self.client().runs.get(remote_thread_id(thread_id), run_id)
        except Exception as exc:
            raise RemoteError(self.failure(exc)) from exc
        return str(run.get("status") or "")

    def latest_status(self, thread_id: str) -> str | None:
        """The status of the thread's latest run; None when it has none (or is unknown)."""
        try:
            runs = self.client().runs.list(remote_thread_id(thread_id), limit=1)
        except Exception as exc:
            raise RemoteError(self.failure(exc)) from exc
        return str(runs[0].get("status") or "") if runs else None

    def error_of(self, thread_id: str, run_id: str) -> str:
        """Why a run ended in ``error`` (its error's message), best effort."""
        try:
            joined = self.client().runs.join(remote_thread_id(thread_id), run_id)
        except Exception as exc:
            return _describe(exc)
        error = joined.get("__error__") if isinstance(joined, dict) else None
        if isinstance(error, dict):
            text = f"{error.get('error', 'Error')}: {error.get('message', '')}"
            return " ".join(text.split())[:REMOTE_ERROR_MAX_CHARS]
        return "the run failed"

    def values(self, thread_id: str) -> dict[str, Any]:
        """The remote thread's state values, its messages as LangChain messages."""
        try:
            state = self.client().threads.get_state(remote_thread_id(thread_id))
        except Exception as exc:
            raise RemoteError(self.failure(exc)) from exc
        values = dict(state.get("values") or {}) if isinstance(state, dict) else {}
        values["messages"] = _to_messages(values.get("messages"))
        return values

    def cancel(self, thread_id: str, run_id: str) -> None:
        """Ask the server to stop the run (best effort: the caller has given up on it)."""
        try:
            self.client().runs.cancel(remote_thread_id(thread_id), run_id)
        except Exception:  # the result already says why it stopped
            return
