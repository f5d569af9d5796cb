"""Spending limits: what a request (or a goal's work) may spend, in tokens, dollars or both.

A budget is written ``N`` (prompt + completion tokens, as the provider reports them) or
in dollars: ``$0.50``, ``0.50$``, ``USD0.5`` (case and spaces do not matter). Dollars are
the estimate :mod:`agentgraph.providers.pricing` makes from the provider's usage, so a
dollar budget needs a model with a known price: one without is refused where the budget
is set, never run without a limit.

No dependency beyond the standard library: the command-line parser uses it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import NamedTuple

__all__ = ["BudgetArg", "SpendLimit", "parse_budget", "parse_budget_arg", "usd_text"]

# Dollar amounts are shown to the cent, or to 1/10,000 of a dollar below a dollar:
# a small model spends fractions of a cent per call.
USD_SHOWN_DECIMALS_SMALL = 4
USD_SHOWN_DECIMALS = 2

_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)"
_USD_RE = re.compile(
    rf"^\s*(?:\$\s*(?P<a>{_NUMBER})|(?P<b>{_NUMBER})\s*\$|usd\s*(?P<c>{_NUMBER})"
    rf"|(?P<d>{_NUMBER})\s*usd)\s*$",
    re.IGNORECASE,
)


def usd_text(amount: float) -> str:
    """``amount`` dollars as a user reads them: ``$0.50``, ``$0.0123``, ``$12.00``."""
    decimals = USD_SHOWN_DECIMALS if amount >= 1 else USD_SHOWN_DECIMALS_SMALL
    text = f"{amount:,.{decimals}f}"
    if decimals > USD_SHOWN_DECIMALS:  # $0.5000 reads as $0.50
        head, _, tail = text.partition(".")
        text = f"{head}.{tail.rstrip('0').ljust(USD_SHOWN_DECIMALS, '0')}"
    return f"${text}"


@dataclass(frozen=True)
class SpendLimit:
    """A budget: tokens, dollars, or both (0: no limit of that kind).

    Attributes:
        tokens: Prompt + completion tokens.
        usd: Estimated cost in US dollars.
    """

    tokens: int = 0
    usd: float = 0.0

    def __bool__(self) -> bool:
        return bool(self.tokens or self.usd)

    def reached(self, tokens: int, usd: float) -> bool:
        """Whether ``tokens`` / ``usd`` spent reach the limit (either kind)."""
        return bool(self.tokens and tokens >= self.tokens) or bool(self.usd and usd >= self.usd)

    def describe(self, tokens: int, usd: float) -> str:
        """What was spent of the limit: ``1,200 of 1,000 tokens``, ``$0.52 of $0.50``."""
        parts = []
        if self.tokens:
            parts.append(f"{tokens:,} of {self.tokens:,} tokens")
        if self.usd:
            parts.append(f"{usd_text(usd)} of {usd_text(self.usd)}")
        return ", ".join(parts) or f"{tokens:,} tokens"

    def text(self) -> str:
        """The limit as the user writes it: ``20000 tokens``, ``$0.50``."""
        parts = []
        if self.tokens:
            parts.append(f"{self.tokens:,} tokens")
        if self.usd:
            parts.append(usd_text(self.usd))
        return " / ".join(parts) or "none"


def parse_budget(text: str) -> SpendLimit:
    """A budget as written on the command line or after ``/goal … --budget``.

    Args:
        text: ``N`` (tokens) or ``$X`` / ``X$`` / ``USDX`` / ``X USD`` (dollars).

    Returns:
        The limit (``0`` / ``$0``: no limit).

    Raises:
        ValueError: Neither form, or a negative or infinite amount (the message says
            which forms are accepted).
    """
    found = _USD_RE.match(text)
    if found is not None:
        amount = float(next(v for v in found.groupdict().values() if v is not None))
        if not math.isfinite(amount):
            raise ValueError(f"not a dollar amount: {text!r}")
        return SpendLimit(usd=amount)
    stripped = text.strip()
    if stripped.isdigit():
        return SpendLimit(tokens=int(stripped))
    raise ValueError(
        f"not a budget: {text!r} (a whole number of tokens, or dollars: $0.50, 0.50$, USD0.5)"
    )


class BudgetArg(NamedTuple):
    """A budget as written on the command line.

    Attributes:
        limit: The limit.
        dollars: Whether it was written in dollars (``$0`` lifts the dollar budget,
            ``0`` the token budget).
    """

    limit: SpendLimit
    dollars: bool


def parse_budget_arg(text: str) -> BudgetArg:
    """``--budget``'s value: :func:`parse_budget`, keeping which unit was written.

    Raises:
        ValueError: As :func:`parse_budget`.
    """
    return BudgetArg(parse_budget(text), _USD_RE.match(text) is not None)
