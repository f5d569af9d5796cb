"""Context-window table, overrides and the budget derived from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentgraph.config import Settings
from agentgraph.context.windows import (
    DEFAULT_CONTEXT_WINDOW_TOKENS,
    MIN_ADOPTED_WINDOW_TOKENS,
    Budget,
    budget_for,
    context_window_for,
    default_max_tokens,
    output_reserve,
)


def _settings(tmp_path: Path, **env: object) -> Settings:
    return Settings(AGENTGRAPH_HOME=str(tmp_path), _env_file=None, **env)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("gpt-4o", 128_000),
        ("gpt-4o-mini", 128_000),
        ("gpt-4.1", 1_047_576),
        ("gpt-4.1-mini", 1_047_576),
        ("gpt-5", 400_000),
        ("gpt-5-mini", 400_000),
        ("o1", 200_000),
        ("o3", 200_000),
        ("o4-mini", 200_000),
        ("gpt-4", 8_192),
        ("gpt-4-turbo", 128_000),
        ("gpt-3.5-turbo", 16_385),
        ("claude-3-5-sonnet-20241022", 200_000),
        ("claude-sonnet-4-5", 200_000),
        ("claude-sonnet-4-5[1m]", 1_000_000),
        ("anthropic/claude-sonnet-4[1m]", 1_000_000),
        ("deepseek-chat", 128_000),
        ("deepseek-reasoner", 128_000),
        ("qwen2.5-coder-32b-instruct", 32_768),
        ("Qwen/Qwen2.5-72B-Instruct", 32_768),
        ("qwen3-coder-plus", 262_144),
        ("qwen-plus", 131_072),
        ("meta-llama/llama-3.1-70b-instruct", 131_072),
        ("llama3.3:70b", 131_072),
        ("llama3:8b", 8_192),
        ("kimi-k2-0711-preview", 131_072),
        ("kimi-k2-0905-preview", 262_144),
        ("glm-4-plus", 128_000),
        ("gemini-1.5-pro", 2_097_152),
        ("gemini-2.5-flash", 1_048_576),
    ],
)
def test_window_table(model: str, window: int) -> None:
    assert context_window_for(model) == (window, None)


def test_unknown_model_gets_default_with_notice() -> None:
    window, notice = context_window_for("my-local-model")
    assert window == DEFAULT_CONTEXT_WINDOW_TOKENS
    assert notice is not None and "my-local-model" in notice


def test_settings_override_wins(tmp_path: Path) -> None:
    settings = _settings(tmp_path, AGENTGRAPH_CONTEXT_WINDOW=64_000)
    assert context_window_for("gpt-4o", settings) == (64_000, None)
    assert budget_for(settings, "unknown-model").source_notice is None


def test_env_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTGRAPH_CONTEXT_WINDOW", "300000")
    settings = Settings(AGENTGRAPH_HOME=str(tmp_path), _env_file=None)  # type: ignore[call-arg]
    assert budget_for(settings, "gpt-4o").window == 300_000


def test_large_window_reserves_50k(tmp_path: Path) -> None:
    budget = budget_for(_settings(tmp_path), "claude-sonnet-4-5")
    assert (budget.window, budget.reserve, budget.usable) == (200_000, 50_000, 150_000)
    assert budget.compact_at == 135_000
    assert budget.notice_at == 112_500
    assert budget.warn_at == 127_500


def test_small_window_reserves_a_sixteenth(tmp_path: Path) -> None:
    budget = budget_for(_settings(tmp_path), "gpt-4")
    assert (budget.window, budget.reserve, budget.usable) == (8_192, 512, 7_680)
    at_limit = budget_for(_settings(tmp_path, AGENTGRAPH_CONTEXT_WINDOW=50_000))
    assert (at_limit.reserve, at_limit.usable) == (3_125, 46_875)


def test_the_prompt_never_gets_less_room_in_a_larger_window(tmp_path: Path) -> None:
    """Just above the small windows a flat 50,000-token reserve left a 64k window 14k
    for the prompt, less than a 20k window has."""
    usable = [output_reserve(w) for w in range(1_024, 400_000, 512)]
    rooms = [w - r for w, r in zip(range(1_024, 400_000, 512), usable, strict=True)]
    assert rooms == sorted(rooms)
    budget = budget_for(_settings(tmp_path, AGENTGRAPH_CONTEXT_WINDOW=65_536))
    assert budget.usable == 46_875
    assert budget_for(_settings(tmp_path, AGENTGRAPH_CONTEXT_WINDOW=131_072)).usable == 81_072


def test_max_output_tokens_caps_reserve(tmp_path: Path) -> None:
    budget = budget_for(_settings(tmp_path, AGENTGRAPH_MAX_OUTPUT_TOKENS=8_000), "gpt-4o")
    assert (budget.reserve, budget.usable) == (8_000, 120_000)
    # A cap larger than the default reserve changes nothing.
    loose = budget_for(_settings(tmp_path, AGENTGRAPH_MAX_OUTPUT_TOKENS=100_000), "gpt-4o")
    assert loose.reserve == 50_000


def test_the_models_own_reply_limit_caps_the_reserve(tmp_path: Path) -> None:
    """A 128k model that writes at most 16,384 tokens per reply holds back that much,
    not 50,000: the prompt gets 111,616 tokens instead of 78,000. A configured limit
    wins over the profile's; a profile that states none keeps the window's reserve, and
    a small window's sixteenth is already below most models' limits."""
    profile = {"max_input_tokens": 128_000, "max_output_tokens": 16_384}
    budget = budget_for(_settings(tmp_path), "gpt-4o-mini", profile=profile)
    assert (budget.window, budget.reserve, budget.usable) == (128_000, 16_384, 111_616)
    configured = _settings(tmp_path, AGENTGRAPH_MAX_OUTPUT_TOKENS=8_000)
    assert budget_for(configured, "gpt-4o-mini", profile=profile).reserve == 8_000
    silent = budget_for(_settings(tmp_path), "gpt-4o-mini", profile={"max_input_tokens": 128_000})
    assert silent.reserve == 50_000
    small = budget_for(_settings(tmp_path, AGENTGRAPH_CONTEXT_WINDOW=16_000), profile=profile)
    assert small.reserve == 1_000
    # A window learned from an overflow keeps the model's limit.
    assert budget.adopt_window(100_000)
    assert (budget.reserve, budget.usable) == (16_384, 83_616)
    for bad in (0, -5, True, "16384", None):
        odd = budget_for(_settings(tmp_path), "gpt-4o-mini", profile={"max_output_tokens": bad})
        assert odd.reserve == 50_000


def test_model_defaults_to_settings_model(tmp_path: Path) -> None:
    settings = _settings(tmp_path, AGENTGRAPH_MODEL="gpt-5")
    assert budget_for(settings).window == 400_000


def test_levels_and_percent() -> None:
    budget = Budget(window=200, reserve=100, usable=100, notice_at=75, warn_at=90, compact_at=95)
    assert [budget.level(t) for t in (0, 74, 75, 89, 90, 94, 95, 500)] == [
        "ok",
        "ok",
        "notice",
        "notice",
        "warn",
        "warn",
        "compact",
        "compact",
    ]
    assert budget.percent(25) == 25.0
    assert budget.percent(150) == 150.0


def test_default_thresholds_warn_before_compacting(tmp_path: Path) -> None:
    budget = budget_for(_settings(tmp_path), "gpt-4o")
    assert budget.notice_at < budget.warn_at < budget.compact_at
    assert budget.level(budget.compact_at) == "compact"
    assert budget.level(budget.compact_at - 1) == "warn"
    assert budget.level(budget.warn_at - 1) == "notice"


def test_the_model_profile_window_comes_before_the_table_and_after_the_override(
    tmp_path: Path,
) -> None:
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(model="gpt-5", api_key="sk-test", base_url="http://127.0.0.1:9/v1")  # type: ignore[arg-type]
    assert llm.profile is not None
    profile_window = llm.profile["max_input_tokens"]
    assert profile_window != context_window_for("gpt-5")[0]  # the profile is what decides
    assert context_window_for("gpt-5", profile=llm.profile) == (profile_window, None)
    settings = _settings(tmp_path, AGENTGRAPH_MODEL="gpt-5")
    assert budget_for(settings, profile=llm.profile).window == profile_window
    override = _settings(tmp_path, AGENTGRAPH_MODEL="gpt-5", AGENTGRAPH_CONTEXT_WINDOW="50000")
    assert budget_for(override, profile=llm.profile).window == 50_000
    # No profile (a local model): the table, then the default with a notice.
    assert context_window_for("qwen3-coder-30b", profile=None)[0] == 262_144
    window, notice = context_window_for("my-local-model", profile={"max_input_tokens": None})
    assert window == DEFAULT_CONTEXT_WINDOW_TOKENS and notice is not None


def test_adopt_window_shrinks_in_place_with_the_same_rules(tmp_path: Path) -> None:
    settings = _settings(tmp_path, AGENTGRAPH_MODEL="qwen2.5-coder-1.5b")
    budget = budget_for(settings)
    assert budget.window == 32_768
    shared = budget  # the units hold this very object
    assert budget.adopt_window(4_096)
    fresh = budget_for(
        _settings(tmp_path, AGENTGRAPH_MODEL="qwen2.5-coder-1.5b", AGENTGRAPH_CONTEXT_WINDOW="4096")
    )
    for name in ("window", "reserve", "usable", "notice_at", "warn_at", "compact_at"):
        assert getattr(shared, name) == getattr(fresh, name), name
    # 1/16 for the reply and a tenth for the estimate's error (no offline tokenizer).
    assert (shared.window, shared.reserve, shared.usable) == (4_096, 665, 3_431)


def test_adopt_window_never_grows_and_ignores_absurd_numbers(tmp_path: Path) -> None:
    budget = budget_for(_settings(tmp_path, AGENTGRAPH_CONTEXT_WINDOW="8192"))
    before = (budget.window, budget.usable, budget.compact_at)
    assert not budget.adopt_window(8_192)
    assert not budget.adopt_window(200_000)
    assert not budget.adopt_window(MIN_ADOPTED_WINDOW_TOKENS - 1)
    assert not budget.adopt_window(0)
    assert (budget.window, budget.usable, budget.compact_at) == before
    assert budget.adopt_window(MIN_ADOPTED_WINDOW_TOKENS)


def test_adopt_window_keeps_the_output_cap_and_clears_the_guess(tmp_path: Path) -> None:
    settings = _settings(
        tmp_path, AGENTGRAPH_MODEL="my-local-model", AGENTGRAPH_MAX_OUTPUT_TOKENS="300"
    )
    budget = budget_for(settings)
    assert budget.source_notice is not None  # an unknown model: the window is a guess
    assert budget.adopt_window(8_192)
    # The configured output cap still bounds the reply's part of the reserve; the
    # estimate's margin (a tenth of the window: no offline tokenizer) stays.
    assert budget.reserve == 300 + int(8_192 * 0.1)
    assert budget.usable == 8_192 - 300 - 819
    assert budget.source_notice is None  # the endpoint stated it


def test_adopt_window_on_a_hand_built_budget_keeps_its_thresholds() -> None:
    budget = Budget(
        window=100_000,
        reserve=50_000,
        usable=50_000,
        notice_at=25_000,
        warn_at=40_000,
        compact_at=30_000,
    )
    assert budget.adopt_window(10_000)
    assert (budget.usable, budget.notice_at, budget.warn_at, budget.compact_at) == (
        9_375,
        4_687,
        7_500,
        5_625,
    )


def test_default_max_tokens_only_where_nothing_states_an_output_limit(tmp_path: Path) -> None:
    local = budget_for(_settings(tmp_path), "qwen2.5-coder-1.5b")  # 32,768: a 20% cap
    assert default_max_tokens(local, None) == 6_553
    assert default_max_tokens(local, {"max_output_tokens": 8_192}) is None
    assert default_max_tokens(local, {"max_output_tokens": True}) == 6_553
    assert local.adopt_window(4_096) and default_max_tokens(local, {}) == 819
    hosted = budget_for(_settings(tmp_path), "deepseek-chat")  # 128k: a 50k reserve
    assert default_max_tokens(hosted, None) is None


def test_only_models_with_an_unset_max_tokens_field_get_the_default() -> None:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_openai import ChatOpenAI

    from agentgraph.context.windows import unlimited_output

    assert unlimited_output(ChatOpenAI(model="qwen2.5-coder", api_key="x"))  # type: ignore[arg-type]
    assert not unlimited_output(ChatOpenAI(model="qwen2.5-coder", api_key="x", max_tokens=300))  # type: ignore[arg-type]
    assert not unlimited_output(FakeListChatModel(responses=["x"]))  # no such field


def test_a_bound_model_is_looked_through() -> None:
    from langchain_openai import ChatOpenAI

    from agentgraph.context.windows import unlimited_output

    model = ChatOpenAI(model="qwen2.5-coder", api_key="x")  # type: ignore[arg-type]
    assert unlimited_output(model.with_config(tags=["nostream"]))
    assert not unlimited_output(model.bind(max_tokens=5))


def test_the_configured_output_limit_is_read_through_bindings() -> None:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_openai import ChatOpenAI

    from agentgraph.context.windows import configured_output_limit

    model = ChatOpenAI(model="qwen2.5-coder", api_key="x")  # type: ignore[arg-type]
    assert configured_output_limit(model) is None
    assert configured_output_limit(model.with_config(tags=["t"]).bind(max_tokens=7)) == 7
    capped = ChatOpenAI(model="qwen2.5-coder", api_key="x", max_tokens=300)  # type: ignore[arg-type]
    assert configured_output_limit(capped.with_config(tags=["t"])) == 300
    assert configured_output_limit(FakeListChatModel(responses=["x"])) is None
