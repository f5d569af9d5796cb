"""Who may set what: the workspace's ``.env`` only what a project may decide."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentgraph.config import Settings
from agentgraph.errors import ConfigError
from agentgraph.security.settings_sources import (
    PROJECT_SETTINGS,
    allow,
    env_names,
    ignored_workspace_settings,
    project_config_values,
    split_workspace_values,
)

NAMES = env_names(Settings)
SETTING_KEYS = sorted(NAMES)


def test_project_settings_are_real_fields() -> None:
    assert set(Settings.model_fields) >= PROJECT_SETTINGS


@pytest.mark.parametrize(
    "field",
    [
        "base_url",
        "api_key",
        "home",
        "database_url",
        "sandbox",
        "bash_env_allow",
        "bash",
        "edits",
        "mcp",
        "mcp_tools",
        "mcp_trust_workspace",
        "bash_network",
        "bash_git_write",
        "user_id",
        "text_tool_calls",
        "memory",
        "debug",
        "server_workspace",
        "cleanup_days",
    ],
)
def test_what_only_the_user_decides_is_not_a_project_setting(field: str) -> None:
    assert field in Settings.model_fields
    assert field not in PROJECT_SETTINGS


@given(
    st.dictionaries(
        st.one_of(
            st.sampled_from(SETTING_KEYS).flatmap(
                lambda k: st.sampled_from([k, k.lower(), k.title()])
            ),
            st.from_regex(r"\A[A-Z][A-Z0-9_]{0,20}\Z"),
        ),
        st.text(max_size=8),
        max_size=12,
    )
)
def test_a_workspace_file_keeps_only_project_settings(values: dict[str, str]) -> None:
    kept, ignored = split_workspace_values(values, Settings)
    for key in kept:
        assert NAMES[key.upper()] in PROJECT_SETTINGS
    for name in ignored:
        assert NAMES[name] not in PROJECT_SETTINGS
    settings_in = {k.upper() for k in values if k.upper() in NAMES}
    assert {k.upper() for k in kept} | set(ignored) == settings_in
    assert not {k.upper() for k in kept} & set(ignored)


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_precedence_environment_then_workspace_then_user_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    _write(home / "config.toml", 'model = "user-model"\nbase_url = "http://user/v1"\n')
    env_file = _write(
        tmp_path / ".env", "AGENTGRAPH_MODEL=project-model\nOPENAI_BASE_URL=http://repo/v1\n"
    )
    monkeypatch.delenv("AGENTGRAPH_MODEL", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    settings = Settings(_env_file=env_file, AGENTGRAPH_HOME=str(home))  # type: ignore[call-arg]
    assert settings.model == "project-model"  # a project may pick the model
    assert settings.base_url == "http://user/v1"  # not the endpoint
    assert ignored_workspace_settings(env_file, home, Settings) == ["OPENAI_BASE_URL"]
    monkeypatch.setenv("AGENTGRAPH_MODEL", "env-model")
    settings = Settings(_env_file=env_file, AGENTGRAPH_HOME=str(home))  # type: ignore[call-arg]
    assert settings.model == "env-model"
    allow(env_file, home)
    settings = Settings(_env_file=env_file, AGENTGRAPH_HOME=str(home))  # type: ignore[call-arg]
    assert settings.base_url == "http://repo/v1"
    assert ignored_workspace_settings(env_file, home, Settings) == []
    _write(env_file, "OPENAI_BASE_URL=http://repo2/v1\n")
    settings = Settings(_env_file=env_file, AGENTGRAPH_HOME=str(home))  # type: ignore[call-arg]
    assert settings.base_url == "http://user/v1"


def test_home_cannot_be_set_from_the_file_in_home(tmp_path: Path) -> None:
    _write(tmp_path / "config.toml", 'home = "/elsewhere"\n')
    with pytest.raises(ConfigError, match="AGENTGRAPH_HOME"):
        Settings(_env_file=None, AGENTGRAPH_HOME=str(tmp_path))  # type: ignore[call-arg]


# The sources of a setting, highest first, as `agentgraph config` names them.
SOURCES = ("flag", "environment", "dotenv", "project_toml", "user")
ORIGIN_KIND = {
    "flag": "flag",
    "environment": "environment",
    "dotenv": "project",
    "project_toml": "project",
    "user": "user",
}
# Two settings a project may decide and two only the user may, with a value per source
# that tells the sources apart.
PRECEDENCE_FIELDS = {
    "model": lambda source: f"{source}-model",
    "max_loops": lambda source: 10 + SOURCES.index(source),
    "base_url": lambda source: f"http://{source.replace('_', '-')}.test/v1",
    "bash_env_allow": lambda source: f"{source.upper()}_VAR",
}


def _toml(values: dict[str, object]) -> str:
    return "".join(
        f"{k} = {v}\n" if isinstance(v, int) else f'{k} = "{v}"\n' for k, v in values.items()
    )


@given(
    assignment=st.fixed_dictionaries(
        {field: st.sets(st.sampled_from(SOURCES)) for field in PRECEDENCE_FIELDS}
    ),
    trusted=st.booleans(),
)
def test_the_highest_source_that_may_set_a_setting_gives_its_value(
    assignment: dict[str, set[str]], trusted: bool
) -> None:
    """flag > environment > project (.env, then .agentgraph/config.toml) > user > default,
    for any setting set in any subset of the sources; a project file never gives a
    setting only the user may set, unless the user allowed it with `agentgraph trust`."""
    import os
    import tempfile
    from unittest import mock

    from agentgraph.security.settings_sources import setting_origins

    names = {field: _field_env_name(field) for field in PRECEDENCE_FIELDS}
    per_source: dict[str, dict[str, object]] = {source: {} for source in SOURCES}
    for field, sources in assignment.items():
        for source in sources:
            per_source[source][field] = PRECEDENCE_FIELDS[field](source)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        home, project = root / "home", root / "project"
        (project / ".agentgraph").mkdir(parents=True)
        home.mkdir()
        env_file = _write(
            project / ".env",
            "".join(f"{names[f]}={v}\n" for f, v in per_source["dotenv"].items()),
        )
        toml_file = _write(
            project / ".agentgraph" / "config.toml", _toml(per_source["project_toml"])
        )
        _write(home / "config.toml", _toml(per_source["user"]))
        if trusted:
            allow(env_file, home)
            allow(toml_file, home)
        environ = {k: v for k, v in os.environ.items() if k.upper() not in NAMES}
        environ["AGENTGRAPH_HOME"] = str(home)
        environ.update({names[f]: str(v) for f, v in per_source["environment"].items()})
        flags = {names[f]: v for f, v in per_source["flag"].items()}
        with mock.patch.dict(os.environ, environ, clear=True):
            settings = Settings(_env_file=env_file, **flags)  # type: ignore[call-arg]
            origins = setting_origins(Settings, flags=flags, env_file=env_file, home=home)
    for field, sources in assignment.items():
        allowed = [
            s
            for s in SOURCES
            if s in sources
            and (trusted or field in PROJECT_SETTINGS or s not in ("dotenv", "project_toml"))
        ]
        expected = (
            PRECEDENCE_FIELDS[field](allowed[0])
            if allowed
            else Settings.model_fields[field].default
        )
        assert getattr(settings, field) == expected, (field, sources, trusted)
        assert origins[field].kind == (ORIGIN_KIND[allowed[0]] if allowed else "default")
        if field not in PROJECT_SETTINGS and not trusted:
            assert origins[field].kind != "project"


def _field_env_name(field: str) -> str:
    """The first environment name of ``field`` (NAMES keeps the declaration order)."""
    return next(name for name, f in NAMES.items() if f == field)


def test_a_project_config_file_keeps_its_known_keys_and_names_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('model = "m"\nno_such = 1\nhome = "/x"\n', encoding="utf-8")
    values, problems = project_config_values(path, Settings)
    assert values == {"AGENTGRAPH_MODEL": "m"}
    assert [p.split("'")[1] for p in problems] == ["no_such", "home"]
    path.write_text("model = [", encoding="utf-8")
    values, problems = project_config_values(path, Settings)
    assert values == {} and len(problems) == 1 and "not valid TOML" in problems[0]
    assert project_config_values(tmp_path / "absent.toml", Settings) == ({}, [])
