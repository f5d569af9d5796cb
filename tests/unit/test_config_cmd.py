"""``agentgraph config``'s shown values: no credential a value holds is printed."""

from __future__ import annotations

from pathlib import Path

from pydantic import SecretStr

from agentgraph.session.startup import HIDDEN, UNSET, shown_value


def test_secrets_and_credentials_inside_values_are_never_shown() -> None:
    assert shown_value(SecretStr("sk-live-0123456789")) == HIDDEN
    assert shown_value(None) == UNSET
    assert shown_value(True) == "true"
    shown = shown_value("http://me:pa55word@10.0.0.1:8000/v1")
    assert "pa55word" not in shown and shown.startswith("http://me:") and "@10.0.0.1" in shown
    token = "ghp_" + "a1B2" * 9
    assert token not in shown_value(f"https://example.invalid/?token={token}")
    assert shown_value(Path("/home/me/.agentgraph")) == "/home/me/.agentgraph"
