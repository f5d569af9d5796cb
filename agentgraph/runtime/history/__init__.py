"""History that no provider can reject.

The state keeps the full history; :func:`build_prompt_view` derives the list the
model sees. The package is split by concern:

* :mod:`~agentgraph.history.kinds`: the ``additional_kwargs["agentgraph"]``
  message-kind convention and the user's latest request;
* :mod:`~agentgraph.history.calls`: the tool calls of a message and the groups
  a cut keeps whole;
* :mod:`~agentgraph.history.invariants`: :func:`validate_history`, the rule as
  a check;
* :mod:`~agentgraph.history.repair`: unanswered calls, orphans, duplicates;
* :mod:`~agentgraph.history.trim`: the pair-safe count window and token trim;
* :mod:`~agentgraph.history.view`: :func:`build_prompt_view`.

Every function is pure: inputs are never mutated (changed messages are
``model_copy`` copies) and untouched messages are passed through as the same
objects.
"""

from __future__ import annotations

from agentgraph.runtime.history.calls import group_messages
from agentgraph.runtime.history.invariants import validate_history
from agentgraph.runtime.history.kinds import (
    AGENTGRAPH_KEY,
    INTERNAL_KINDS,
    agentgraph_kind,
    is_user_request,
    latest_user_request_index,
)
from agentgraph.runtime.history.view import PromptView, build_prompt_view, extends

# What the rest of agentgraph uses; the repair and trim steps are reached
# through build_prompt_view (import them from their modules to test them alone).
__all__ = [
    "AGENTGRAPH_KEY",
    "INTERNAL_KINDS",
    "PromptView",
    "agentgraph_kind",
    "build_prompt_view",
    "extends",
    "group_messages",
    "is_user_request",
    "latest_user_request_index",
    "validate_history",
]
