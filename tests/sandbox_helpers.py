"""The shell sandbox in tests: run a test in both modes, fail (not skip) in CI without it.

When ``bwrap`` is missing or cannot start, sandboxed tests skip with the reason, unless
``AGENTGRAPH_REQUIRE_SANDBOX=1`` (set by ``.ci/run``, which installs bubblewrap) turns
that into a failure.
"""

from __future__ import annotations

import os

import pytest

from agentgraph.tools.sandbox import plan_sandbox

REQUIRE_ENV = "AGENTGRAPH_REQUIRE_SANDBOX"


def require_sandbox() -> None:
    """Skip (or fail under ``AGENTGRAPH_REQUIRE_SANDBOX=1``) when the sandbox cannot start."""
    plan = plan_sandbox("on", network=False, env={"PATH": os.environ.get("PATH", os.defpath)})
    if plan.refusal is not None:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(plan.refusal)
        pytest.skip(plan.refusal)


@pytest.fixture(params=["off", "on"])
def sandbox_mode(request: pytest.FixtureRequest) -> str:
    """``AGENTGRAPH_SANDBOX`` for a test that must hold with and without the sandbox."""
    if request.param == "on":
        require_sandbox()
    mode: str = request.param
    return mode
