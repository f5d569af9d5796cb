"""Retry model calls on rate limits and transient failures, never on anything else.

Overflows, auth failures, unknown models and bad requests are re-raised at once: the
caller (the overflow guard) handles them, and retrying them only wastes time and
money. A provider's Retry-After is honoured as given; when it asks for more than
``RETRY_AFTER_MAX_S`` the call gives up rather than hang the session.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from langchain_core.exceptions import ModelError

from agentgraph.providers.model_errors import provider_error_of, to_model_error
from agentgraph.providers.provider_errors import ProviderError

T = TypeVar("T")

RETRY_AFTER_MAX_S = 120.0
# 2 ** this is the largest backoff multiplier computed (the cap applies long before).
BACKOFF_MAX_EXPONENT = 30

OnRetry = Callable[[int, ProviderError, float], None]


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to wait between attempts.

    Attributes:
        max_retries: Retries after the first attempt (0 = no retry).
        base_delay_s: Delay before the first retry; doubles on each further one.
        max_delay_s: Cap on a backoff delay (not on a provider's Retry-After).
        jitter: Relative spread applied to backoff delays, e.g. 0.2 = ±20%.
    """

    max_retries: int = 4
    base_delay_s: float = 1.0
    max_delay_s: float = 30.0
    jitter: float = 0.2

    def should_retry(self, attempt: int, err: ProviderError) -> bool:
        """Whether retry number ``attempt`` (1-based) should happen after ``err``.

        Args:
            attempt: The retry about to be made, starting at 1.
            err: The classified failure of the previous attempt.

        Returns:
            True for a retryable kind within ``max_retries`` whose Retry-After (if
            any) is at most ``RETRY_AFTER_MAX_S``.
        """
        if not err.retryable or attempt > self.max_retries:
            return False
        return err.retry_after_s is None or err.retry_after_s <= RETRY_AFTER_MAX_S

    def delay_for(
        self, attempt: int, err: ProviderError, *, rng: random.Random | None = None
    ) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based).

        A provider's Retry-After wins (waiting less than asked just fails again), up
        to ``RETRY_AFTER_MAX_S``; otherwise exponential backoff with jitter, capped
        at ``max_delay_s``.

        Args:
            attempt: The retry about to be made, starting at 1.
            err: The classified failure of the previous attempt.
            rng: Source of jitter; the module's random generator by default.

        Returns:
            A delay in seconds, >= 0.
        """
        if err.retry_after_s is not None:
            return max(0.0, min(err.retry_after_s, RETRY_AFTER_MAX_S))
        exponent = min(max(attempt - 1, 0), BACKOFF_MAX_EXPONENT)
        base = min(self.max_delay_s, self.base_delay_s * 2.0**exponent)
        spread = base * self.jitter
        offset = (rng or random).uniform(-spread, spread) if spread > 0 else 0.0
        return max(0.0, min(self.max_delay_s, base + offset))


def _retryable(exc: BaseException, attempt: int, policy: RetryPolicy) -> ProviderError | None:
    """The classification of ``exc`` when retry number ``attempt`` should happen, else None."""
    typed = to_model_error(exc)
    err = provider_error_of(typed)
    if not isinstance(typed, ModelError) or not typed.is_retryable or err is None:
        return None
    return err if policy.should_retry(attempt, err) else None


def _delay_before_retry(
    exc: BaseException,
    attempt: int,
    policy: RetryPolicy,
    on_retry: OnRetry | None,
    rng: random.Random | None,
) -> float | None:
    """Seconds to wait before retry ``attempt`` (``on_retry`` told), or None to give up.

    The one decision shared by the sync and async loops, which differ only in how
    they call and wait.
    """
    err = _retryable(exc, attempt, policy)
    if err is None:
        return None
    delay = policy.delay_for(attempt, err, rng=rng)
    if on_retry is not None:
        on_retry(attempt, err, delay)
    return delay


def call_with_retries(
    fn: Callable[[], T],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], None] = time.sleep,
    on_retry: OnRetry | None = None,
    rng: random.Random | None = None,
) -> T:
    """Call ``fn``, retrying rate limits and transient failures per ``policy``.

    Args:
        fn: The model call.
        policy: Retry limits and delays.
        sleep: Waits between attempts; ``time.sleep`` by default (tests pass a fake).
        on_retry: Told ``(attempt, error, delay_s)`` before each wait.
        rng: Source of jitter.

    Returns:
        What ``fn`` returned.

    Raises:
        Exception: The last failure, unchanged, once it is not retryable or the
            retries are used up.
    """
    attempt = 0
    while True:
        try:
            return fn()
        except Exception as exc:
            attempt += 1
            delay = _delay_before_retry(exc, attempt, policy, on_retry, rng)
            if delay is None:
                raise
            sleep(delay)


async def acall_with_retries(
    fn: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    on_retry: OnRetry | None = None,
    rng: random.Random | None = None,
) -> T:
    """Async :func:`call_with_retries`: awaits ``fn()`` and ``sleep(delay)``.

    Args:
        fn: Returns the awaitable model call (called anew for each attempt).
        policy: Retry limits and delays.
        sleep: Awaitable wait; ``asyncio.sleep`` by default.
        on_retry: Told ``(attempt, error, delay_s)`` before each wait.
        rng: Source of jitter.

    Returns:
        What ``fn()`` resolved to.

    Raises:
        Exception: The last failure, unchanged, once it is not retryable or the
            retries are used up.
    """
    attempt = 0
    while True:
        try:
            return await fn()
        except Exception as exc:
            attempt += 1
            delay = _delay_before_retry(exc, attempt, policy, on_retry, rng)
            if delay is None:
                raise
            await sleep(delay)
