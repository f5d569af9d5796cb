"""Front ends: the terminal CLI and REPL, the web UI, the LangGraph server graph."""
