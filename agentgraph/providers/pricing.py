"""Token usage and its estimated cost: provider-reported cached tokens and a price table.

Each ``AIMessage`` keeps the provider's usage in ``usage_metadata`` (stored with the
message). LangChain normalizes the cache figures there: OpenAI's
``prompt_tokens_details.cached_tokens`` becomes ``input_token_details["cache_read"]``,
Anthropic's cache read / creation become ``cache_read`` / ``cache_creation``; in both,
``input_tokens`` already includes them. :class:`UsageTotals` adds calls up and prices
them with :data:`PRICES`; a model missing from the table has tokens but no cost
(``cost_usd`` is ``None``), never a guessed one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_core.messages import AIMessage

TOKENS_PER_PRICE_UNIT = 1_000_000  # prices are per 1M tokens
# JSON costs keep 1e-8 USD: one token of the cheapest model is 5e-9 USD.
COST_DECIMALS = 8
# A dated snapshot of a listed model: "-2024-07-18", "-20250929", "-latest".
SNAPSHOT_SUFFIX_RE = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8}|latest)")


@dataclass(frozen=True)
class ModelPrice:
    """USD per 1M tokens.

    Attributes:
        input: Uncached input tokens.
        cached_input: Input tokens served from the provider's prompt cache.
        output: Output tokens (reasoning tokens included, as providers bill them).
        cache_write: Input tokens written to the cache (Anthropic bills them above
            ``input``); None: billed as ``input`` (OpenAI caches for free).
    """

    input: float
    cached_input: float
    output: float
    cache_write: float | None = None


# List prices from the providers' pricing pages, checked 2025-11 (standard tier,
# USD per 1M tokens). Keys are model names without a provider prefix; dated snapshots
# ("gpt-4o-mini-2024-07-18", "claude-sonnet-4-5-20250929") match their base name.
PRICES: dict[str, ModelPrice] = {
    # OpenAI: cached input is billed at 50% (gpt-4o family), 25% (gpt-4.1, o-series)
    # or 10% (gpt-5 family) of input; cache writes cost nothing extra.
    "gpt-4o": ModelPrice(2.50, 1.25, 10.00),
    "gpt-4o-mini": ModelPrice(0.15, 0.075, 0.60),
    "gpt-4.1": ModelPrice(2.00, 0.50, 8.00),
    "gpt-4.1-mini": ModelPrice(0.40, 0.10, 1.60),
    "gpt-4.1-nano": ModelPrice(0.10, 0.025, 0.40),
    "gpt-5": ModelPrice(1.25, 0.125, 10.00),
    "gpt-5-mini": ModelPrice(0.25, 0.025, 2.00),
    "gpt-5-nano": ModelPrice(0.05, 0.005, 0.40),
    "o3": ModelPrice(2.00, 0.50, 8.00),
    "o4-mini": ModelPrice(1.10, 0.275, 4.40),
    # Anthropic: cache reads at 10% of input, 5-minute cache writes at 125%.
    "claude-opus-4-5": ModelPrice(5.00, 0.50, 25.00, cache_write=6.25),
    "claude-opus-4-1": ModelPrice(15.00, 1.50, 75.00, cache_write=18.75),
    "claude-opus-4": ModelPrice(15.00, 1.50, 75.00, cache_write=18.75),
    "claude-sonnet-4-5": ModelPrice(3.00, 0.30, 15.00, cache_write=3.75),
    "claude-sonnet-4": ModelPrice(3.00, 0.30, 15.00, cache_write=3.75),
    "claude-3-7-sonnet": ModelPrice(3.00, 0.30, 15.00, cache_write=3.75),
    "claude-haiku-4-5": ModelPrice(1.00, 0.10, 5.00, cache_write=1.25),
    "claude-3-5-haiku": ModelPrice(0.80, 0.08, 4.00, cache_write=1.00),
}


def price_for(model: str | None) -> ModelPrice | None:
    """The price of ``model``: its exact name, else a dated snapshot of a listed name.

    ``openai:gpt-4o`` and ``gpt-4o-2024-08-06`` both find ``gpt-4o``; other variants
    (``gpt-4o-audio-preview``) are priced differently and find nothing.

    Args:
        model: A model name as configured or as reported by the provider.

    Returns:
        The price, or None for a model missing from :data:`PRICES`.
    """
    if not model:
        return None
    name = model.strip().lower().rsplit(":", 1)[-1].rsplit("/", 1)[-1]
    if name in PRICES:
        return PRICES[name]
    for key in PRICES:
        if name.startswith(key) and SNAPSHOT_SUFFIX_RE.fullmatch(name[len(key) :]):
            return PRICES[key]
    return None


def _details(usage: Mapping[str, Any], suffix: str) -> int:
    """Sum of ``input_token_details`` entries ending in ``suffix`` (service tiers too)."""
    details = usage.get("input_token_details") or {}
    if not isinstance(details, Mapping):
        return 0
    return sum(int(v or 0) for k, v in details.items() if str(k).endswith(suffix))


def reported_model(message: AIMessage) -> str | None:
    """The model name the provider reported for this reply, if any."""
    meta = message.response_metadata or {}
    name = meta.get("model_name") or meta.get("model")
    return str(name) if name else None


@dataclass
class UsageTotals:
    """Usage of a run of model calls and its estimated cost.

    Attributes:
        input_tokens: Prompt tokens, cached ones included.
        output_tokens: Completion tokens.
        cached_input_tokens: Prompt tokens the provider served from its cache.
        cache_write_tokens: Prompt tokens written to the cache (Anthropic).
        cost_usd: Estimated cost; None once any call's model has no known price.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = 0.0

    def add_message(self, message: AIMessage, default_model: str | None = None) -> None:
        """Add one reply's reported usage, and its discarded attempts' (see
        :func:`reply_usages`; replies without usage add nothing).

        Args:
            message: A model reply.
            default_model: The configured model, priced when the reply names none or
                one missing from the table.
        """
        model = reported_model(message)
        for usage in reply_usages(message):
            self.add_usage(usage, model, default_model)

    def add_usage(
        self, usage: Mapping[str, Any], model: str | None, default_model: str | None = None
    ) -> None:
        """Add one call's ``usage_metadata``, priced for ``model`` (or ``default_model``)."""
        input_tokens = int(usage.get("input_tokens") or 0)
        output_tokens = int(usage.get("output_tokens") or 0)
        cached = min(_details(usage, "cache_read"), input_tokens)
        written = min(_details(usage, "cache_creation"), input_tokens - cached)
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        self.cached_input_tokens += cached
        self.cache_write_tokens += written
        price = price_for(model) or price_for(default_model)
        if price is None or self.cost_usd is None:
            self.cost_usd = None
            return
        uncached = input_tokens - cached - written
        write_price = price.cache_write if price.cache_write is not None else price.input
        self.cost_usd += (
            uncached * price.input
            + cached * price.cached_input
            + written * write_price
            + output_tokens * price.output
        ) / TOKENS_PER_PRICE_UNIT

    @property
    def cached_share(self) -> float | None:
        """Fraction of input tokens served from the cache (None before any input)."""
        return self.cached_input_tokens / self.input_tokens if self.input_tokens else None


def add_cost(total: float | None, more: float | None) -> float | None:
    """Sum of two estimated costs; unknown (None) when either is unknown."""
    if total is None or more is None:
        return None
    return total + more


def usage_json(
    input_tokens: int, output_tokens: int, cached_input_tokens: int, cost_usd: float | None
) -> dict[str, Any]:
    """The ``usage`` object of ``run --json`` and ``sessions show --json``."""
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cached_input_tokens": cached_input_tokens,
        "cost_usd": round(cost_usd, COST_DECIMALS) if cost_usd is not None else None,
    }


def format_cost(cost_usd: float | None) -> str | None:
    """``$0.0123`` (four decimals under a dollar, cents above), None when unknown."""
    if cost_usd is None:
        return None
    return f"${cost_usd:.4f}" if cost_usd < 1 else f"${cost_usd:,.2f}"


def usage_line(
    input_tokens: int, output_tokens: int, cached_input_tokens: int, cost_usd: float | None
) -> str:
    """One line for the status line and ``/context``: tokens, cached share, cost."""
    from agentgraph.context.report import format_tokens

    text = f"{format_tokens(input_tokens)} in / {format_tokens(output_tokens)} out"
    if input_tokens:
        text += f", {100 * cached_input_tokens / input_tokens:.0f}% cached"
    cost = format_cost(cost_usd)
    return f"{text} · ~{cost}" if cost is not None else text


DISCARDED_USAGE_KEY = "discarded_usage"
"""Marker key (``additional_kwargs["agentgraph"]``) of a reply: the reported usage of
attempts that were asked again and not kept (an empty reply), still paid for."""


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _discarded(record: object) -> dict[str, Any] | None:
    """A discarded attempt's usage as stored in a marker, or None when it is not one.

    The marker comes back from imports too: only token counts are kept.
    """
    if not isinstance(record, Mapping):
        return None
    counts = {k: record.get(k, 0) for k in ("input_tokens", "output_tokens")}
    if not all(_is_count(v) for v in counts.values()):
        return None
    details = record.get("input_token_details")
    if isinstance(details, Mapping):
        kept = {str(k): v for k, v in details.items() if _is_count(v)}
        counts["input_token_details"] = kept
    return counts


def reply_usages(message: AIMessage) -> list[Mapping[str, Any]]:
    """The usage of every model call behind ``message``: its own, then discarded ones."""
    out: list[Mapping[str, Any]] = [message.usage_metadata] if message.usage_metadata else []
    # runtime.history.kinds.AGENTGRAPH_KEY, spelled out: this module stays light to import.
    meta = message.additional_kwargs.get("agentgraph")
    extra = meta.get(DISCARDED_USAGE_KEY) if isinstance(meta, Mapping) else None
    if isinstance(extra, list):
        out.extend(u for u in map(_discarded, extra) if u is not None)
    return out
