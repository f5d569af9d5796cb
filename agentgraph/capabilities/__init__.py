"""What the agent can do: tools, recall, skills, MCP servers, hooks, subagents."""
