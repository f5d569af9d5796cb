"""The public API re-exported from ``agentgraph``: every name resolves, and lazily."""

from __future__ import annotations

import subprocess
import sys

import agentgraph


def test_every_public_name_resolves_to_its_definition() -> None:
    for name in agentgraph.__all__:
        value = getattr(agentgraph, name)
        assert value is not None, name
    assert agentgraph.Agent.__module__ == "agentgraph.session.agent"
    assert agentgraph.Settings.__name__ == "Settings"


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        agentgraph.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("an unknown name resolved")


def test_importing_the_package_loads_no_langgraph() -> None:
    code = "import sys, agentgraph\nprint(any(m.startswith('langgraph') for m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert out.strip() == "False"
