"""The agent's loop: the graph, its state, nodes and history invariants."""
