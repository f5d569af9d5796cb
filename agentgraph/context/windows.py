"""Context windows per model and the token budget derived from them.

The budget holds back a reserve for the reply: 1/16 of a window of at most 50k
tokens (plus a tenth for the estimate's error when there is no offline tokenizer for
the model), 50k of a larger one (but never so much that the prompt gets less room
than the largest small window gives it). The reserve is only the floor of a reply's room:
a request that sets ``max_tokens`` gets what its prompt leaves in the window
(``middleware/output_room.py``), and compaction keeps the prompt well under the
usable budget. The reserve never exceeds the reply's limit: the configured
``max_output_tokens``, else the model's own (its LangChain profile's
``max_output_tokens``): a 128k model that writes at most 16k (gpt-4o-mini) holds back
16k, not 50k.

One budget object is shared by every unit of the model-call pipeline, the compactor
and the tool node of a process; when an endpoint's overflow error names a smaller
window than the one assumed, :meth:`Budget.adopt_window` shrinks it in place so all
of them size what they send for the real window from then on.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from agentgraph.config import Settings
from agentgraph.context.tokens import get_counter

__all__ = [
    "DEFAULT_CONTEXT_WINDOW_TOKENS",
    "MAX_STATED_WINDOW_TOKENS",
    "MIN_ADOPTED_WINDOW_TOKENS",
    "PROMPT_COUNT_MARGIN_FRACTION",
    "Budget",
    "Level",
    "budget_for",
    "context_window_for",
    "default_max_tokens",
    "output_limit_for",
    "output_reserve",
    "output_room",
    "stated_window",
    "unlimited_output",
]

Level = Literal["ok", "notice", "warn", "compact"]

DEFAULT_CONTEXT_WINDOW_TOKENS = 32_768
ONE_MILLION_TOKENS = 1_000_000
SMALL_WINDOW_MAX_TOKENS = 50_000
# The reply's reserve in a window of at most SMALL_WINDOW_MAX_TOKENS (1,024 tokens of a
# 16k window). A fixed 20% share (Claude Code's rule) compacted a 16k-window session at
# 64% of its window; the reply's room is sized per request instead (output_room), and
# at the default compaction threshold a reply still has 15% of the window.
SMALL_WINDOW_OUTPUT_RESERVE_FRACTION = 1 / 16
# The most one reply may take when nothing states the model's output limit (a local
# server generates until its context is full when a request sets no limit).
SMALL_WINDOW_REPLY_CAP_FRACTION = 0.20
LARGE_WINDOW_OUTPUT_RESERVE_TOKENS = 50_000
# Share of a counted prompt left aside when sizing a reply's room: the provider may
# count more (the calibrated estimate is within about ±10% of a real tokenizer).
PROMPT_COUNT_MARGIN_FRACTION = 0.10
# A window an endpoint states below this is not adopted: no agent prompt (system
# prompt plus tool schemas) fits it, so the number is more likely misread than real.
MIN_ADOPTED_WINDOW_TOKENS = 1_024
# Above this a stated window is not a real one (a misread, edited or hostile number).
MAX_STATED_WINDOW_TOKENS = 100_000_000
# The notice, warn and compact thresholds as fractions of the usable budget.
_Thresholds = tuple[float, float, float]
# Serializes adopt_window: two calls failing at once (subagents) shrink the budget once.
_ADOPT_LOCK = threading.Lock()

# (pattern searched in the lower-cased name, window). The first match wins,
# so specific patterns come before general ones. Sources: the providers' model
# pages as of 2025 (OpenAI, Anthropic, DeepSeek API docs, Qwen/Alibaba Model
# Studio, Meta model cards, Moonshot, Zhipu, Google). Where a family ships
# several sizes the smaller native window is used: too small only compacts
# early; too large makes the provider reject the request.
_WINDOWS: tuple[tuple[str, int], ...] = (
    # OpenAI
    (r"gpt-4o-mini", 128_000),
    (r"(chatgpt-)?gpt-4o|chatgpt-4o", 128_000),
    (r"gpt-4\.1", 1_047_576),
    (r"gpt-4\.5", 128_000),
    (r"gpt-5", 400_000),
    (r"gpt-oss", 131_072),
    (r"\bo1-(mini|preview)", 128_000),
    (r"\b(o1|o3|o4-mini)", 200_000),
    (r"gpt-4-turbo|gpt-4-\d{4}-preview|gpt-4-vision", 128_000),
    (r"gpt-4-32k", 32_768),
    (r"gpt-4", 8_192),
    (r"gpt-3\.5-turbo|gpt-35-turbo", 16_385),
    # Anthropic: 200k; the 1M beta is requested with a "[1m]" suffix (below).
    (r"claude", 200_000),
    # DeepSeek API: deepseek-chat / deepseek-reasoner serve V3.x with 128K
    # (the original V3 API launched at 64K; api-docs.deepseek.com, 2025).
    (r"deepseek", 128_000),
    # Qwen: 2.5 and 3 open weights are 32K native (128K only with YaRN);
    # Qwen3 "2507" and Qwen3-Coder are 256K; hosted plus/turbo are 128K/1M.
    (r"qwen3.*2507|qwen3-coder", 262_144),
    (r"qwen-turbo", 1_000_000),
    (r"qwen-plus|qwen-long", 131_072),
    (r"qwen2\.5-coder|qwen2\.5|qwen3|qwen-max|qwen", 32_768),
    # Llama: 3.1+ (and 4, as commonly served) 128K; 3.0 8K; 2 4K.
    (r"llama-?3\.[1-9]|llama-?4", 131_072),
    (r"llama-?3", 8_192),
    (r"llama-?2", 4_096),
    # Moonshot Kimi: K2-0711 128K; K2-0905 / turbo / thinking 256K.
    (r"kimi-k2-(0905|turbo|thinking)", 262_144),
    (r"kimi", 131_072),
    # Zhipu GLM: 4.6 200K; 4 / 4.5 128K.
    (r"glm-4\.6", 200_000),
    (r"glm-4", 128_000),
    # Google Gemini: 1.5 Pro 2M; 1.0 Pro 32K; the rest 1M.
    (r"gemini-1\.5-pro", 2_097_152),
    (r"gemini-1\.0|gemini-pro$", 32_760),
    (r"gemini", 1_048_576),
)
_COMPILED = tuple((re.compile(pattern), window) for pattern, window in _WINDOWS)
_ONE_MILLION_SUFFIX = "[1m]"


def stated_window(value: object) -> int | None:
    """``value`` when it can be a window an endpoint, a file or a server states.

    Args:
        value: Anything read from outside (JSON, a file).

    Returns:
        An int within [:data:`MIN_ADOPTED_WINDOW_TOKENS`, :data:`MAX_STATED_WINDOW_TOKENS`]
        (not a bool), else None.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if MIN_ADOPTED_WINDOW_TOKENS <= value <= MAX_STATED_WINDOW_TOKENS else None


def _profile_tokens(profile: Mapping[str, Any] | None, key: str) -> int | None:
    """A positive token count the model's LangChain profile states under ``key``."""
    value = profile.get(key) if profile is not None else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _profile_window(profile: Mapping[str, Any] | None) -> int | None:
    return _profile_tokens(profile, "max_input_tokens")


def context_window_for(
    model: str,
    settings: Settings | None = None,
    *,
    profile: Mapping[str, Any] | None = None,
) -> tuple[int, str | None]:
    """The context window of ``model`` in tokens, and a notice if it is a guess.

    Order: the ``AGENTGRAPH_CONTEXT_WINDOW`` override, then the model's LangChain
    profile (``ChatOpenAI(...).profile["max_input_tokens"]``), then the table below.

    Args:
        model: Model name; a ``[1m]`` suffix means a 1,000,000-token window.
        settings: When ``settings.context_window`` is set it wins.
        profile: The chat model's ``profile``, when it has one.

    Returns:
        ``(window, notice)``; notice is one line for an unknown model, else None.
    """
    if settings is not None and settings.context_window is not None:
        return settings.context_window, None
    from_profile = _profile_window(profile)
    if from_profile is not None:
        return from_profile, None
    name = model.strip().lower()
    if name.endswith(_ONE_MILLION_SUFFIX):
        return ONE_MILLION_TOKENS, None
    for pattern, window in _COMPILED:
        if pattern.search(name):
            return window, None
    return DEFAULT_CONTEXT_WINDOW_TOKENS, (
        f"unknown context window for {model!r}: assuming {DEFAULT_CONTEXT_WINDOW_TOKENS:,} "
        "tokens (set AGENTGRAPH_CONTEXT_WINDOW)"
    )


def output_reserve(window: int, *, estimated: bool = False) -> int:
    """The tokens a budget for ``window`` holds back (module docstring).

    Monotone in the window: just above :data:`SMALL_WINDOW_MAX_TOKENS` a 50,000-token
    reserve would leave the prompt less room than a small window has (14k of a 64k
    window), so the prompt keeps at least the largest small window's room there.

    Args:
        window: The context window in tokens.
        estimated: Prompts are counted by an estimate (no offline tokenizer for the
            model): a small window also holds back :data:`PROMPT_COUNT_MARGIN_FRACTION`
            of itself, for the provider counting more than the estimate before its
            first usage report says by how much.
    """
    if window <= SMALL_WINDOW_MAX_TOKENS:
        margin = PROMPT_COUNT_MARGIN_FRACTION if estimated else 0.0
        return int(window * (SMALL_WINDOW_OUTPUT_RESERVE_FRACTION + margin))
    small = SMALL_WINDOW_MAX_TOKENS
    small_usable = small - output_reserve(small, estimated=estimated)
    return min(LARGE_WINDOW_OUTPUT_RESERVE_TOKENS, window - small_usable)


def output_room(
    budget: Budget, prompt_tokens: int, *, margin: float = PROMPT_COUNT_MARGIN_FRACTION
) -> int:
    """The reply tokens a prompt of ``prompt_tokens`` leaves in ``budget``'s window.

    Args:
        budget: The model's budget (its window, and the reserve every reply keeps).
        prompt_tokens: The prompt as we count it.
        margin: The share of the count left aside for the provider counting more.

    Returns:
        ``window - prompt × (1 + margin)``, never below the budget's reserve (nor 1):
        compaction keeps every prompt under the usable budget, so the reserve is there.
    """
    counted = prompt_tokens + int(prompt_tokens * margin)
    return max(budget.window - counted, budget.reserve, 1)


def _limits(
    window: int, max_output_tokens: int | None, thresholds: _Thresholds, *, estimated: bool
) -> dict[str, int]:
    """The token figures of a :class:`Budget` for ``window`` (see module docstring)."""
    reserve = output_reserve(window, estimated=estimated)
    if max_output_tokens is not None:
        # The cap bounds the reply's part; an estimate's margin stays.
        margin = reserve - output_reserve(window) if window <= SMALL_WINDOW_MAX_TOKENS else 0
        reserve = min(reserve, max_output_tokens + margin)
    usable = window - reserve
    notice, warn, compact = thresholds
    return {
        "window": window,
        "reserve": reserve,
        "usable": usable,
        "notice_at": int(usable * notice),
        "warn_at": int(usable * warn),
        "compact_at": int(usable * compact),
    }


@dataclass
class Budget:
    """How many prompt tokens fit, and where the warnings start.

    Shared, not copied: the units of a process hold the same object, which
    :meth:`adopt_window` may shrink once the endpoint names its real window. It is
    therefore not frozen (nor hashable); nothing else assigns its fields.

    Attributes:
        window: The model's context window (tokens).
        reserve: Tokens kept free for the model's output.
        usable: ``window - reserve``: the most the prompt may hold.
        notice_at: Prompt size from which the user is told (absolute tokens).
        warn_at: Prompt size from which the user is warned.
        compact_at: Prompt size from which the history is compacted.
        source_notice: Why the window is a guess, or where it was learned; else None.
        max_output_tokens: The reply's limit the reserve honours: the configured one,
            else the model profile's (None: none known).
        thresholds: The notice, warn and compact fractions of ``usable``; None for a
            budget built by hand (they are then read off its figures).
        estimated: Prompts are counted by an estimate: a small window's reserve also
            holds the estimate's margin (:func:`output_reserve`).
        guessed: Whether the window is the default for a model nobody knows (not
            configured, profiled, in the table or learned).
    """

    window: int
    reserve: int
    usable: int
    notice_at: int
    warn_at: int
    compact_at: int
    source_notice: str | None = None
    max_output_tokens: int | None = field(default=None, repr=False)
    thresholds: _Thresholds | None = field(default=None, repr=False)
    guessed: bool = False
    estimated: bool = field(default=False, repr=False)

    def adopt_window(self, window: int, notice: str | None = None) -> bool:
        """Shrink this budget, in place, to the window the endpoint says it has.

        Only ever shrinks: a larger number (or one below
        :data:`MIN_ADOPTED_WINDOW_TOKENS`) changes nothing, so an error can never make
        agentgraph send more than it did. The reserve and thresholds follow the same
        rules as :func:`budget_for`. All fields change in one ``__dict__.update`` so a
        concurrent reader never sees the new window with the old usable size.

        Args:
            window: The endpoint's context window in tokens (from its overflow error).
            notice: The new :attr:`source_notice` (e.g. where an earlier process
                learned the window); None: the endpoint stated it, nothing to say.

        Returns:
            Whether the budget changed.
        """
        with _ADOPT_LOCK:
            if window >= self.window or window < MIN_ADOPTED_WINDOW_TOKENS:
                return False
            thresholds = self.thresholds
            if thresholds is None and self.usable > 0:
                thresholds = (
                    self.notice_at / self.usable,
                    self.warn_at / self.usable,
                    self.compact_at / self.usable,
                )
            limits = _limits(
                window,
                self.max_output_tokens,
                thresholds or (1.0, 1.0, 1.0),
                estimated=self.estimated,
            )
            # The window is no longer a guess: the endpoint stated it.
            self.__dict__.update({**limits, "source_notice": notice, "guessed": False})
            return True

    def level(self, tokens: int) -> Level:
        """Severity of a prompt size.

        Compaction wins whenever its threshold is reached, so a caller that
        compacts on ``"compact"`` never misses it; with the default thresholds
        (notice 75%, compact 80%, warn 85%) ``"warn"`` appears only when
        compact_threshold is configured above warn_threshold.

        Args:
            tokens: Prompt size in tokens.

        Returns:
            ``"compact"``, ``"warn"``, ``"notice"`` or ``"ok"``.
        """
        if tokens >= self.compact_at:
            return "compact"
        if tokens >= self.warn_at:
            return "warn"
        if tokens >= self.notice_at:
            return "notice"
        return "ok"

    def percent(self, tokens: int) -> float:
        """``tokens`` as a percentage (0-100+) of :attr:`usable`."""
        return 100.0 * tokens / self.usable if self.usable > 0 else 100.0


def _profile_output_limit(profile: Mapping[str, Any] | None) -> int | None:
    """The most tokens one reply of the model may hold, as its profile states it."""
    return _profile_tokens(profile, "max_output_tokens")


def budget_for(
    settings: Settings,
    model: str | None = None,
    *,
    profile: Mapping[str, Any] | None = None,
) -> Budget:
    """The prompt budget for a model under the given settings.

    Args:
        settings: Supplies ``context_window`` (override), ``max_output_tokens``
            (caps the output reserve) and the notice/warn/compact thresholds.
        model: Model name; defaults to ``settings.model``. Its token counter says
            whether prompts are counted exactly or estimated (:func:`output_reserve`).
        profile: The chat model's LangChain ``profile`` (its ``max_input_tokens``
            is the window unless the override is set; its ``max_output_tokens`` caps
            the reserve unless ``max_output_tokens`` is configured).

    Returns:
        A :class:`Budget`.
    """
    name = model or settings.model
    window, notice = context_window_for(name, settings, profile=profile)
    thresholds = (settings.notice_threshold, settings.warn_threshold, settings.compact_threshold)
    estimated = get_counter(name).source == "estimate"
    reply_limit = settings.max_output_tokens or _profile_output_limit(profile)
    return Budget(
        **_limits(window, reply_limit, thresholds, estimated=estimated),
        source_notice=notice,
        max_output_tokens=reply_limit,
        thresholds=thresholds,
        guessed=notice is not None,
        estimated=estimated,
    )


def _under_bindings(model: Any) -> tuple[Any, list[Mapping[str, Any]]]:
    """``model`` under its bindings (``with_config(tags=…)``, ``bind(…)``), and the
    arguments they bind, outermost first."""
    from langchain_core.runnables import RunnableBinding

    bound: list[Mapping[str, Any]] = []
    while isinstance(model, RunnableBinding):
        bound.append(model.kwargs)
        model = model.bound
    return model, bound


def unlimited_output(model: Any) -> bool:
    """Whether ``model`` has a ``max_tokens`` field left unset (ChatOpenAI and the like).

    Only such models get :func:`default_max_tokens`: a provider whose field has another
    name (Gemini's ``max_output_tokens``) would reject the argument, and one whose limit
    is always set (Anthropic's) needs none.
    """
    model, bound = _under_bindings(model)
    if any("max_tokens" in kwargs for kwargs in bound):
        return False
    fields = getattr(type(model), "model_fields", None)
    return isinstance(fields, dict) and "max_tokens" in fields and model.max_tokens is None


def configured_output_limit(model: Any) -> int | None:
    """The ``max_tokens`` ``model`` (or a binding of it) is set to send; None if unset."""
    model, bound = _under_bindings(model)
    value = next(
        (kwargs["max_tokens"] for kwargs in bound if kwargs.get("max_tokens") is not None),
        getattr(model, "max_tokens", None),
    )
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def default_max_tokens(budget: Budget, profile: Mapping[str, Any] | None) -> int | None:
    """The ``max_tokens`` to send when ``AGENTGRAPH_MAX_OUTPUT_TOKENS`` is not set.

    A local server (llama.cpp, Ollama) generates until the context is full when a
    request sets no limit, so a reply stuck in a loop holds it for minutes. For a model
    whose output limit nothing states (no ``max_output_tokens`` in its LangChain
    profile) and whose known window is at most ``SMALL_WINDOW_MAX_TOKENS``, the limit is
    :data:`SMALL_WINDOW_REPLY_CAP_FRACTION` of the window; each request lowers it to the
    room its prompt leaves (``middleware/output_room.py``). Hosted models with a
    profile, larger windows (whose 50,000-token reserve may exceed a provider's own
    output cap) and guessed windows (an unknown name may be an alias of a hosted model)
    keep the provider's default.

    Args:
        budget: The model's budget (read at each call: it shrinks to a learned window).
        profile: The chat model's LangChain ``profile``, when it has one.

    Returns:
        The limit in tokens, or None to send none.
    """
    if _profile_output_limit(profile) is not None:
        return None
    if budget.guessed or budget.window > SMALL_WINDOW_MAX_TOKENS or budget.reserve <= 0:
        return None
    return int(budget.window * SMALL_WINDOW_REPLY_CAP_FRACTION)


def output_limit_for(model: Any, budget: Budget) -> int | None:
    """The ``max_tokens`` to give ``model``'s requests when none is configured.

    Args:
        model: A chat model (or a binding of one): its ``max_tokens`` field and profile.
        budget: Its budget, read now (it shrinks to a learned window).

    Returns:
        :func:`default_max_tokens` for a model whose ``max_tokens`` field is unset
        (:func:`unlimited_output`), else None.
    """
    if not unlimited_output(model):
        return None
    profile = getattr(model, "profile", None)
    return default_max_tokens(budget, profile if isinstance(profile, dict) else None)
