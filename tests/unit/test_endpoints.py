"""Whether an endpoint is on this machine or a private network (agentgraph.providers.endpoints)."""

from __future__ import annotations

import pytest

from agentgraph.providers.endpoints import is_local_endpoint


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://127.0.0.1:8089/v1", True),
        ("http://localhost:11434/v1", True),
        ("http://[::1]:8000/v1", True),
        ("http://192.168.1.20:8000/v1", True),
        ("http://10.0.0.5/v1", True),
        ("http://gpu-box.local:8000/v1", True),
        ("http://user:secret@127.0.0.1:8000/v1", True),
        ("https://api.openai.com/v1", False),
        ("https://openrouter.ai/api/v1", False),
        ("http://8.8.8.8/v1", False),
        ("http://[::1/v1", False),  # unparsable
        ("", False),
        (None, False),
    ],
)
def test_only_servers_on_this_machine_or_network_are_asked(url: str | None, local: bool) -> None:
    assert is_local_endpoint(url) is local


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1.evil.com/v1",
        "http://evil.com#@127.0.0.1/v1",
        "http://evil.com/v1?host=127.0.0.1",
        "http://2130706433/v1",  # a decimal loopback address: not asked (only a lost probe)
    ],
)
def test_a_url_that_only_looks_local_is_not_asked(url: str) -> None:
    assert is_local_endpoint(url) is False
