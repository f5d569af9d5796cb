"""``.env.example`` documents every setting under a name the settings read."""

from __future__ import annotations

import re
from pathlib import Path

from agentgraph.config import Settings
from agentgraph.security.settings_sources import env_names

ENV_EXAMPLE = Path(__file__).resolve().parents[2] / ".env.example"
# A variable line, set or commented out: ``NAME=value`` or ``# NAME=value``.
VARIABLE_LINE = re.compile(r"^#?\s*([A-Z][A-Z0-9_]*)=", re.MULTILINE)


def test_every_setting_has_a_line_in_env_example() -> None:
    listed = set(VARIABLE_LINE.findall(ENV_EXAMPLE.read_text(encoding="utf-8")))
    documented = {field for name, field in env_names(Settings).items() if name in listed}
    assert sorted(set(Settings.model_fields) - documented) == []
