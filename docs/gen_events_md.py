"""Rewrite the events table of docs/events.md from the event models (agentgraph/protocol).

Usage: ``python docs/gen_events_md.py`` (a test checks the committed file is current).
"""

from __future__ import annotations

from pathlib import Path

from agentgraph.protocol.docs import rewrite

DOC = Path(__file__).with_name("events.md")

if __name__ == "__main__":
    DOC.write_text(rewrite(DOC.read_text(encoding="utf-8")), encoding="utf-8")
