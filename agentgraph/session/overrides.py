"""The settings one invocation overrides (a front end's flags), keyed by environment name.

Only the standard library: the command-line parser converts ``--budget`` with it, and
``agentgraph --help`` must not load pydantic or the agent.
"""

from __future__ import annotations

from typing import NamedTuple

from agentgraph.runtime.spend import parse_budget_arg

__all__ = [
    "BUDGET_TOKENS_NAME",
    "BUDGET_USD_NAME",
    "MAX_LOOPS_NAME",
    "MAX_TURNS_MIN",
    "MODEL_NAME",
    "PERMISSION_MODE_NAME",
    "BudgetOverride",
    "budget_override",
]

MODEL_NAME = "AGENTGRAPH_MODEL"
MAX_LOOPS_NAME = "MAX_LOOPS"
BUDGET_TOKENS_NAME = "AGENTGRAPH_TURN_BUDGET_TOKENS"
BUDGET_USD_NAME = "AGENTGRAPH_TURN_BUDGET_USD"
PERMISSION_MODE_NAME = "AGENTGRAPH_PERMISSION_MODE"

# An override of MAX_LOOPS for one invocation: at least this many model calls. Lifting
# the cap is the setting's business (MAX_LOOPS=0), not a single invocation's.
MAX_TURNS_MIN = 1


class BudgetOverride(NamedTuple):
    """The setting a written budget sets, and its value.

    Attributes:
        name: ``AGENTGRAPH_TURN_BUDGET_TOKENS`` for ``N``, ``AGENTGRAPH_TURN_BUDGET_USD``
            for dollars (``$0`` lifts the dollar budget, ``0`` the token budget).
        value: Tokens (int) or dollars (float).
    """

    name: str
    value: int | float


def budget_override(text: str) -> BudgetOverride:
    """The setting a budget written for one invocation sets: ``N`` tokens or ``$X``.

    Args:
        text: The budget as written (see :func:`agentgraph.runtime.spend.parse_budget`).

    Raises:
        ValueError: Not a budget (the message says which forms are accepted).
    """
    arg = parse_budget_arg(text)
    if arg.dollars:
        return BudgetOverride(BUDGET_USD_NAME, arg.limit.usd)
    return BudgetOverride(BUDGET_TOKENS_NAME, arg.limit.tokens)
