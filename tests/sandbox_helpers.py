"""The shell sandbox in tests: run a test in both modes, fail (not skip) in CI without it.

When ``bwrap`` is missing or cannot start, sandboxed tests skip with the reason, unless
``AGENTGRAPH_REQUIRE_SANDBOX=1`` (set by ``.ci/run``, which installs bubblewrap) turns
that into a failure.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from agentgraph.capabilities.tools.sandbox import BWRAP_EXECUTABLE, plan_sandbox

# Programs the no-bubblewrap PATH of the sandbox tests keeps.
MINIMAL_TOOLS = ("bash", "printenv", "touch", "cat", "tr")

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


def bin_without_bwrap(folder: Path, names: tuple[str, ...] = MINIMAL_TOOLS) -> str:
    """A PATH directory with ``names`` linked from this PATH, and no bwrap.

    Args:
        folder: A directory to create.
        names: The programs to link (all of PATH's when empty).

    Returns:
        The directory, to use as PATH.
    """
    folder.mkdir(parents=True)
    if not names:
        found: dict[str, str] = {}
        for directory in os.environ.get("PATH", os.defpath).split(os.pathsep):
            try:
                entries = sorted(os.listdir(directory))
            except OSError:
                continue
            for name in entries:
                found.setdefault(name, os.path.join(directory, name))
        links = found
    else:
        links = {name: shutil.which(name) or "" for name in names}
    for name, target in links.items():
        if name != BWRAP_EXECUTABLE and target:
            (folder / name).symlink_to(target)
    assert not (folder / BWRAP_EXECUTABLE).exists()
    return str(folder)
