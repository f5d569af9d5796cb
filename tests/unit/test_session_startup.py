"""Start-up in the session layer: settings and their sources, trust, logs, the session.

Real files under tmp_path (the folder's ``.env`` and ``.agentgraph/config.toml``, the
user's home), real Settings, a real SQLite store and a real Agent.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentgraph.config import Settings
from agentgraph.errors import ConfigError
from agentgraph.session.overrides import (
    BUDGET_TOKENS_NAME,
    BUDGET_USD_NAME,
    MAX_LOOPS_NAME,
    MODEL_NAME,
    PERMISSION_MODE_NAME,
    BudgetOverride,
    budget_override,
)
from agentgraph.session.startup import (
    HIDDEN,
    HOOKS_NOTE,
    LOG_FILE_NAME,
    IgnoredFile,
    ignored_settings_files,
    load_settings,
    route_logs,
    setting_rows,
    start_session,
    trust_settings_files,
)

HOOK_TOML = '[[hooks.PreToolUse]]\n[[hooks.PreToolUse.hooks]]\ntype = "command"\ncommand = "true"\n'


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The current folder (empty), with AGENTGRAPH_HOME beside it."""
    here = tmp_path / "project"
    here.mkdir()
    monkeypatch.chdir(here)
    monkeypatch.setenv("AGENTGRAPH_HOME", str(tmp_path / "home"))
    for name in (MODEL_NAME, MAX_LOOPS_NAME, PERMISSION_MODE_NAME, "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    return here


def test_a_budget_sets_tokens_or_dollars() -> None:
    assert budget_override("1200") == BudgetOverride(BUDGET_TOKENS_NAME, 1200)
    assert budget_override("$0.50") == BudgetOverride(BUDGET_USD_NAME, 0.5)
    assert budget_override("0") == BudgetOverride(BUDGET_TOKENS_NAME, 0)
    with pytest.raises(ValueError, match="not a budget"):
        budget_override("lots")


def test_overrides_beat_the_folder_and_a_bad_one_is_named_as_the_front_end_names_it(
    folder: Path,
) -> None:
    (folder / ".env").write_text("AGENTGRAPH_MODEL=from-the-folder\n", encoding="utf-8")
    assert load_settings().model == "from-the-folder"
    assert load_settings(flags={MODEL_NAME: "from-a-flag"}).model == "from-a-flag"
    names = {PERMISSION_MODE_NAME: "--permission-mode", MAX_LOOPS_NAME: "--max-turns"}
    with pytest.raises(ConfigError, match=r"^invalid --permission-mode bogus: "):
        load_settings(flags={PERMISSION_MODE_NAME: "bogus"}, flag_names=names)
    with pytest.raises(ConfigError, match=r"^invalid --max-turns 0: must be at least 1"):
        load_settings(flags={MAX_LOOPS_NAME: 0}, flag_names=names)
    # A front end without flags (the server) gets the setting's own name.
    with pytest.raises(ConfigError, match=r"^invalid setting AGENTGRAPH_PERMISSION_MODE: "):
        load_settings(flags={PERMISSION_MODE_NAME: "bogus"})
    with pytest.raises(ConfigError, match=r"^invalid MAX_LOOPS 0: must be at least 1"):
        load_settings(flags={MAX_LOOPS_NAME: 0})


def test_a_bad_project_value_is_skipped_and_said(folder: Path) -> None:
    (folder / ".env").write_text("MAX_LOOPS=many\nAGENTGRAPH_MODEL=kept\n", encoding="utf-8")
    problems: list[str] = []
    settings = load_settings(problems=problems)
    assert settings.model == "kept"
    assert settings.max_loops == Settings.model_fields["max_loops"].default
    assert len(problems) == 1 and problems[0].startswith("ignored MAX_LOOPS from .env: ")
    assert "MAX_LOOPS" in settings.skipped_project_names


def test_what_a_folder_may_not_set_is_listed_by_file(folder: Path) -> None:
    (folder / ".env").write_text(
        "OPENAI_BASE_URL=http://evil.invalid/v1\nAGENTGRAPH_MODEL=ok\n", encoding="utf-8"
    )
    settings = load_settings()
    assert settings.base_url != "http://evil.invalid/v1"
    assert ignored_settings_files(settings) == [IgnoredFile(Path(".env"), ["OPENAI_BASE_URL"])]


def test_trust_allows_the_folders_files_as_they_are(folder: Path) -> None:
    home = Path(load_settings().home)
    assert trust_settings_files(home) == []
    (folder / ".env").write_text("OPENAI_BASE_URL=http://127.0.0.1:9/v1\n", encoding="utf-8")
    (folder / ".agentgraph").mkdir()
    (folder / ".agentgraph" / "config.toml").write_text(HOOK_TOML, encoding="utf-8")
    first = trust_settings_files(home)
    assert [(f.path.as_posix(), f.already) for f in first] == [
        (".env", False),
        (".agentgraph/config.toml", False),
    ]
    assert first[0].names == ["OPENAI_BASE_URL"]
    assert first[1].names == [HOOKS_NOTE]
    # Allowed: the folder's endpoint now counts, and nothing is reported as ignored.
    settings = load_settings()
    assert settings.base_url == "http://127.0.0.1:9/v1"
    assert ignored_settings_files(settings) == []
    assert [f.already for f in trust_settings_files(home)] == [True, True]


def test_setting_rows_say_where_each_value_came_from_and_hide_secrets(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-live-0123456789abcdef")
    (folder / ".env").write_text("MAX_LOOPS=7\n", encoding="utf-8")
    flags = {MODEL_NAME: "flagged"}
    settings = load_settings(flags=flags)
    rows = {row.field: row for row in setting_rows(settings, flags, Path(".env"))}
    assert list(rows) == list(Settings.model_fields)
    assert (rows["model"].value, rows["model"].origin.split()[0]) == ("flagged", "flag")
    assert (rows["max_loops"].value, rows["max_loops"].origin) == ("7", "project (.env)")
    assert rows["api_key"].value == HIDDEN
    assert rows["api_key"].origin.startswith("environment")
    assert rows["max_loops"].env_name == MAX_LOOPS_NAME


@pytest.fixture
def root_handlers() -> Iterator[None]:
    """Restore the root logger's handlers and level after the test."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in root.handlers:
        if handler not in handlers:
            handler.close()
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.mark.usefixtures("root_handlers")
def test_logs_go_to_the_home_file_with_credentials_redacted(tmp_path: Path) -> None:
    token = "ghp_" + "a1B2" * 9
    route_logs(tmp_path / "home", debug=False)
    logging.getLogger("agentgraph.test").warning("calling with %s", token)
    logging.getLogger("agentgraph.test").info("below the level")
    for handler in logging.getLogger().handlers:
        handler.flush()
    text = (tmp_path / "home" / LOG_FILE_NAME).read_text(encoding="utf-8")
    assert "calling with" in text and token not in text
    assert "below the level" not in text


def test_start_session_opens_the_store_and_builds_the_agent(
    tmp_path: Path, workspace: Path
) -> None:
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        AGENTGRAPH_HOME=str(tmp_path / "home"),
        OPENAI_BASE_URL="http://127.0.0.1:9/v1",
        OPENAI_API_KEY="sk-test-fake-key",
        AGENTGRAPH_MODEL="gpt-4o-mini",
        AGENTGRAPH_MCP="off",
    )
    built: list[str] = []

    class Building:
        def __enter__(self) -> None:
            built.append("enter")

        def __exit__(self, *exc: object) -> None:
            built.append("exit")

    with start_session(settings, workspace, {}, building=Building) as started:
        assert started.agent.settings is settings
        assert started.agent.messages("none-yet") == []
        assert started.store.index.get("none-yet") is None
    assert built == ["enter", "exit"]


def test_start_session_refuses_a_model_config_before_opening_anything(
    tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None, AGENTGRAPH_HOME=str(tmp_path / "home"), AGENTGRAPH_MODEL="gpt-4o-mini"
    )
    with (
        pytest.raises(ConfigError, match="no model endpoint configured"),
        start_session(settings, workspace, {}),
    ):
        pass
    assert not (tmp_path / "home").exists()
