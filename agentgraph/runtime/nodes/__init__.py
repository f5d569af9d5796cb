"""Graph nodes: model turn (graph node "planner"), tools (execution), finalize (answer)."""
