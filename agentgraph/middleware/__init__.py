"""agentgraph's context management as LangChain v1 middleware.

Each context concern is one unit, one module, one ``wrap_model_call`` hook; in order,
outermost first (:data:`PIPELINE_UNITS` is this order as data):

=========================  ===============================  ===================================
unit                       module                           what it does
=========================  ===============================  ===================================
observation masking        ``middleware/masking.py``        old tool outputs → one-line pointers,
                                                            then the prompt view of the result
prompt view                ``middleware/prompt_view.py``    valid view of the history, in budget
                                                            (its own unit only without masking)
compaction                 ``middleware/compaction.py``     summary at threshold/overflow/manual
output room                ``middleware/output_room.py``    max_tokens ≤ what the prompt leaves
overflow recovery          ``middleware/overflow.py``       cut tool outputs, shrink max_tokens
served window              ``middleware/served_window.py``  after the 1st reply, Ollama's window
empty reply                ``middleware/empty_reply.py``    an empty reply asked for again, once
retry                      ``middleware/retry.py``          429/5xx/dropped connections again
text tool calls            ``middleware/text_tool_calls.py`` calls written as text made real
prompt caching             ``middleware/prompt_caching.py`` Anthropic ``cache_control`` marks
=========================  ===============================  ===================================

The same objects serve agentgraph's own graph (the planner node composes them with
:func:`compose`) and any LangChain agent::

    from langchain.agents import create_agent
    from agentgraph.middleware import context_middleware

    agent = create_agent(llm, tools, middleware=context_middleware(llm, summarizer=llm))

Provider failures come out as langchain-core's exception types (``ContextOverflowError``,
``ModelRateLimitError`` …; see :mod:`agentgraph.providers.model_errors`).
"""

from agentgraph.middleware.compaction import CompactionMiddleware
from agentgraph.middleware.empty_reply import EmptyReplyMiddleware
from agentgraph.middleware.masking import ObservationMaskingMiddleware
from agentgraph.middleware.output_room import OutputRoomMiddleware
from agentgraph.middleware.overflow import OverflowRecoveryMiddleware
from agentgraph.middleware.pipeline import (
    PIPELINE_UNITS,
    ContextPipeline,
    PipelineResult,
    PipelineUnit,
    compose,
    context_middleware,
    context_pipeline,
)
from agentgraph.middleware.prompt_caching import PromptCachingMiddleware
from agentgraph.middleware.prompt_view import PromptView, PromptViewMiddleware
from agentgraph.middleware.retry import RetryMiddleware
from agentgraph.middleware.served_window import ServedWindowMiddleware
from agentgraph.middleware.text_tool_calls import TextToolCallsMiddleware
from agentgraph.providers.model_errors import (
    EndpointUnreachableError,
    OutputOverflowError,
    provider_error_of,
    to_model_error,
)

__all__ = [
    "PIPELINE_UNITS",
    "CompactionMiddleware",
    "ContextPipeline",
    "EmptyReplyMiddleware",
    "EndpointUnreachableError",
    "ObservationMaskingMiddleware",
    "OutputOverflowError",
    "OutputRoomMiddleware",
    "OverflowRecoveryMiddleware",
    "PipelineResult",
    "PipelineUnit",
    "PromptCachingMiddleware",
    "PromptView",
    "PromptViewMiddleware",
    "RetryMiddleware",
    "ServedWindowMiddleware",
    "TextToolCallsMiddleware",
    "compose",
    "context_middleware",
    "context_pipeline",
    "provider_error_of",
    "to_model_error",
]
