"""Text tool-call unit: calls a local model wrote as text become real tool calls.

When the request declared tools and the reply has no ``tool_calls`` but its text is a
call (or several) of declared tools — bare JSON, fenced JSON or ``<tool_call>`` tags —
the reply is rewritten into an ``AIMessage`` with those ``tool_calls`` and the prose
around them as content (see :mod:`agentgraph.runtime.text_tool_calls` for the rules), and marked
(``text_tool_calls`` in its agentgraph marker). The user is told once per unit; a text
call of an undeclared tool stays text and is reported. Calls are run only where it is
wanted (:func:`agentgraph.providers.model.text_tool_calls_on`: a local endpoint, or
``AGENTGRAPH_TEXT_TOOL_CALLS=on``); elsewhere, and when what looks like a call does not
parse as one, the text stays the answer and one notice says it was not run, so a call
printed as an answer is never taken for one that ran.

Hook: ``wrap_model_call`` (innermost: each attempt's reply is checked).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool

from agentgraph.middleware.events import Emit, emit
from agentgraph.runtime.history.kinds import with_marker
from agentgraph.runtime.text_tool_calls import call_lookalike, extract_text_tool_calls

__all__ = ["TEXT_TOOL_CALLS_KEY", "TextToolCallsMiddleware"]

# Set in a rewritten reply's marker: its calls were written as text (the transcript says
# so, as the notice told the user).
TEXT_TOOL_CALLS_KEY = "text_tool_calls"


def _tool_names(request: ModelRequest) -> set[str]:
    names: set[str] = set()
    for tool in request.tools:
        if isinstance(tool, BaseTool):
            names.add(tool.name)
        elif isinstance(tool, dict):
            inner = tool.get("function")
            fn: dict[str, object] = inner if isinstance(inner, dict) else tool
            name = fn.get("name")
            if isinstance(name, str):
                names.add(name)
    return names


class TextToolCallsMiddleware(AgentMiddleware):
    """Turns tool calls written as text into real tool calls.

    Args:
        emit: Told a ``notice`` the first time a reply is rewritten, whenever a reply
            tried to call an undeclared tool, and whenever an answer looks like a call
            that is not run.
        run_calls: Whether calls written as text are run; False: the unit only says
            when an answer looks like one.
    """

    def __init__(self, *, emit: Emit = emit, run_calls: bool = True) -> None:
        super().__init__()
        self.emit = emit
        self.run_calls = run_calls
        self.told = False

    def wrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], ModelResponse],
    ) -> ModelResponse | AIMessage:
        """Call the model; rewrite a text-only reply that is really a tool call."""
        return self._rewrite(request, handler(request))

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse | AIMessage:
        """Async :meth:`wrap_model_call`."""
        return self._rewrite(request, await handler(request))

    def _rewrite(self, request: ModelRequest, response: ModelResponse) -> ModelResponse:
        if not request.tools or request.tool_choice == "none":
            return response
        replies = [m for m in response.result if isinstance(m, AIMessage)]
        if len(replies) != 1 or replies[0].tool_calls or replies[0].invalid_tool_calls:
            return response
        ai = replies[0]
        names = _tool_names(request)
        if not self.run_calls:
            self._not_run(ai.text, names, "AGENTGRAPH_TEXT_TOOL_CALLS=on runs such calls")
            return response
        found = extract_text_tool_calls(ai.text, names)
        if not found.calls and not found.rejected:
            self._not_run(ai.text, names, "it is not a well-formed call of a declared tool")
        if found.rejected:
            self.emit(
                {
                    "type": "notice",
                    "text": "the model wrote a call of an undeclared tool as text ("
                    + ", ".join(found.rejected)
                    + "); left as text",
                }
            )
        if not found.calls:
            return response
        if not self.told:
            self.told = True
            self.emit(
                {
                    "type": "notice",
                    "text": "the model wrote its tool calls as text; agentgraph runs them as "
                    "tool calls",
                }
            )
        fixed = with_marker(
            ai.model_copy(update={"content": found.text, "tool_calls": found.calls}),
            **{TEXT_TOOL_CALLS_KEY: True},
        )
        result = [fixed if m is ai else m for m in response.result]
        return ModelResponse(result=result, structured_response=response.structured_response)

    def _not_run(self, text: str, names: set[str], why: str) -> None:
        """Say that an answer that looks like a tool call is shown as text, not run."""
        seen = call_lookalike(text, names)
        if seen is not None:
            self.emit(
                {
                    "type": "notice",
                    "text": f"the answer looks like a tool call written as text ({seen}); "
                    f"it was not run ({why})",
                }
            )
