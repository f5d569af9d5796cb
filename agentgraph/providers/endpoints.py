"""Whether an endpoint is on this machine or a private network.

A leaf module (it imports nothing of agentgraph), so the settings can ask it too: a
local server is asked the window it serves, gets text tool calls, and takes any key.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

__all__ = ["LOCAL_HOST_NAMES", "LOCAL_HOST_SUFFIXES", "is_local_endpoint"]

# Host names that stay on this machine or network.
LOCAL_HOST_NAMES = frozenset({"localhost", "host.docker.internal"})
LOCAL_HOST_SUFFIXES = (".localhost", ".local", ".internal", ".lan", ".home.arpa")


def is_local_endpoint(base_url: str | None) -> bool:
    """Whether ``base_url`` names a server on this machine or a private network.

    Args:
        base_url: The configured endpoint, or None (the provider's own).

    Returns:
        True for loopback, private and link-local addresses and local host names.
    """
    if not base_url:
        return False
    try:
        host = (urlsplit(base_url.strip()).hostname or "").lower()
    except ValueError:
        return False
    if host in LOCAL_HOST_NAMES or host.endswith(LOCAL_HOST_SUFFIXES):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local
