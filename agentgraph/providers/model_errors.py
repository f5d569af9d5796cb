"""Provider failures as langchain-core's exception types.

Every SDK, gateway and local server words its failures differently; the classifier in
:mod:`agentgraph.providers.provider_errors` knows their phrasings (28 real texts are in
``tests/fixtures/provider_errors.json``). :func:`to_model_error` turns whatever a
model call raised into the matching ``langchain_core.exceptions`` type, so the
pipeline (and any LangChain code) decides with ``isinstance``:

============================  ===========================================
kind                          type
============================  ===========================================
overflow                      ``ContextOverflowError``
output_overflow               :class:`OutputOverflowError` (a ``ContextOverflowError``)
rate_limit                    ``ModelRateLimitError``
transient (timeout)           ``ModelTimeoutError``
transient (no HTTP status)    ``ModelConnectionError``
transient (5xx, 408, 409...)  ``ModelAPIError``
unreachable                   :class:`EndpointUnreachableError` (not retryable)
auth (403)                    ``ModelPermissionDeniedError``
auth                          ``ModelAuthenticationError``
not_found                     ``ModelNotFoundError``
bad_request                   ``ModelInvalidRequestError``
============================  ===========================================

Each translated error carries the classification as ``provider_error`` (numbers for
the ``max_tokens`` shrink, Retry-After) and ``is_retryable`` per instance (a request
larger than a per-minute limit is a rate limit that never passes).
"""

from __future__ import annotations

from langchain_core.exceptions import (
    ContextOverflowError,
    ModelAPIError,
    ModelAuthenticationError,
    ModelConnectionError,
    ModelError,
    ModelInvalidRequestError,
    ModelNotFoundError,
    ModelPermissionDeniedError,
    ModelRateLimitError,
    ModelTimeoutError,
)

from agentgraph.providers.provider_errors import (
    ProviderError,
    classify_provider_error,
    stated_context_window,
)

__all__ = [
    "EndpointUnreachableError",
    "OutputOverflowError",
    "context_window_from_error",
    "provider_error_of",
    "to_model_error",
]

_ATTR = "provider_error"
HTTP_FORBIDDEN = 403


class OutputOverflowError(ContextOverflowError):
    """The prompt fits the window but the prompt plus ``max_tokens`` does not.

    A smaller ``max_tokens`` fixes it (see ``shrink_max_tokens``); shrinking the
    prompt also does, so it is a :class:`ContextOverflowError` too.
    """


class EndpointUnreachableError(ModelConnectionError):
    """Nothing answers at the model endpoint (connection refused, unknown host).

    Unlike a dropped connection this is not retried: waiting does not start a server.
    """

    is_retryable = False


def _type_for(err: ProviderError) -> type[ModelError] | None:
    if err.kind == "overflow":
        return ContextOverflowError
    if err.kind == "output_overflow":
        return OutputOverflowError
    if err.kind == "rate_limit":
        return ModelRateLimitError
    if err.kind == "unreachable":
        return EndpointUnreachableError
    if err.kind == "transient":
        if err.timed_out:
            return ModelTimeoutError
        return ModelConnectionError if err.status is None else ModelAPIError
    if err.kind == "auth":
        return (
            ModelPermissionDeniedError if err.status == HTTP_FORBIDDEN else ModelAuthenticationError
        )
    if err.kind == "not_found":
        return ModelNotFoundError
    if err.kind == "bad_request":
        return ModelInvalidRequestError
    return None


def provider_error_of(exc: BaseException) -> ProviderError | None:
    """The classification a translated error carries (None for any other exception)."""
    value = getattr(exc, _ATTR, None)
    return value if isinstance(value, ProviderError) else None


def to_model_error(exc: BaseException) -> BaseException:
    """The langchain-core typed error for ``exc``, or ``exc`` itself if not a provider failure.

    Idempotent: an already translated error is returned as is. The original is kept
    as ``__cause__`` of the new one.

    Args:
        exc: Whatever a model call raised.

    Returns:
        A ``ModelError`` subclass instance with ``provider_error`` set, or ``exc``
        unchanged when it is not a provider failure (a bug must surface as itself).
    """
    if provider_error_of(exc) is not None:
        return exc
    err = classify_provider_error(exc)
    cls = _type_for(err)
    if cls is None:
        return exc
    typed = cls(err.message)
    setattr(typed, _ATTR, err)
    typed.is_retryable = err.retryable
    typed.__cause__ = exc
    return typed


def context_window_from_error(exc: BaseException) -> int | None:
    """The context window the endpoint states in the overflow error ``exc``, or None.

    Args:
        exc: Whatever a model call raised (translated or not).

    Returns:
        The window in tokens when ``exc`` is a context overflow whose text (or, for
        llama.cpp, its ``n_ctx`` field) names it; else None.
    """
    detail = provider_error_of(to_model_error(exc))
    return stated_context_window(detail) if detail is not None else None
