"""``agentgraph web``: a local web page over the session service (a second front end)."""
