"""Recall beyond the prompt: full-text search over a session's whole transcript and
long-term memory across sessions (see docs/context-management.md)."""
