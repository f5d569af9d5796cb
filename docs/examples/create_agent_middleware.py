"""agentgraph's context management in a plain LangChain agent.

``create_agent`` gets agentgraph's model-call pipeline as middleware: the prompt view
(valid history within budget), compaction (handoff summary at the threshold or on
overflow), overflow recovery (cut tool outputs, shrink ``max_tokens``) and retry.

Run against any OpenAI-compatible endpoint::

    OPENAI_BASE_URL=http://localhost:8080/v1 OPENAI_API_KEY=... \\
    AGENTGRAPH_MODEL=gpt-4o-mini python docs/examples/create_agent_middleware.py

The tool returns a log far larger than a small model's window: the first call with
it overflows, and the overflow-recovery unit cuts the tool output in the prompt (the
agent's state keeps it whole) so the agent still answers.
"""

from __future__ import annotations

import os

from langchain.agents import create_agent
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from agentgraph.config import Settings
from agentgraph.middleware import context_middleware

LOG_LINES = 4_000


@tool
def read_log() -> str:
    """Read the service log."""
    lines = [f"{n:05d} INFO request served in {n % 97} ms" for n in range(LOG_LINES)]
    lines[LOG_LINES // 2] = "02000 ERROR disk full on /var/data"
    return "\n".join(lines)


def main() -> None:
    """Ask one question that needs the (too large) log."""
    settings = Settings()  # type: ignore[call-arg]  # AGENTGRAPH_* and OPENAI_* from the environment
    llm = ChatOpenAI(
        model=settings.model,
        base_url=os.environ.get("OPENAI_BASE_URL"),
        api_key=os.environ.get("OPENAI_API_KEY", "not-needed"),  # type: ignore[arg-type]
        max_retries=0,  # the retry unit retries, and knows an overflow from a rate limit
    )
    agent = create_agent(
        llm,
        [read_log],
        system_prompt="You are an operations assistant. Use the tools.",
        middleware=context_middleware(llm, summarizer=llm, settings=settings),
    )
    result = agent.invoke({"messages": [{"role": "user", "content": "What is wrong per the log?"}]})
    print(result["messages"][-1].text)


if __name__ == "__main__":
    main()
