"""Start-up helpers: the collector pause around start-up, patterns compiled at first use."""

from __future__ import annotations

import gc
import re

from agentgraph.frontends.cli import collector_paused
from agentgraph.lazy_re import LazyPattern


def test_collector_paused_nests_and_turns_the_collector_back_on() -> None:
    was_enabled = gc.isenabled()
    gc.enable()
    try:
        with collector_paused():
            assert not gc.isenabled()
            with collector_paused():
                assert not gc.isenabled()
            assert not gc.isenabled()  # only the outermost pause turns it back on
        assert gc.isenabled()
        gc.disable()
        with collector_paused():
            pass
        assert not gc.isenabled()  # a collector that was off stays off
    finally:
        gc.unfreeze()  # the pause froze the test process's objects
        if was_enabled:
            gc.enable()
        else:
            gc.disable()


def test_collector_paused_restores_the_collector_when_the_body_raises() -> None:
    gc.enable()
    try:
        try:
            with collector_paused():
                raise ValueError("boom")
        except ValueError:
            pass
        assert gc.isenabled()
    finally:
        gc.unfreeze()


def test_lazy_pattern_compiles_at_first_use_and_matches_like_re() -> None:
    source, flags = r"(\d+)\s*(ms|s)", re.IGNORECASE
    lazy, eager = LazyPattern(source, flags), re.compile(source, flags)
    assert lazy._compiled is None
    text = "retry in 20 MS or 3 s"
    assert lazy.findall(text) == eager.findall(text)
    assert lazy._compiled is not None
    first = lazy.compiled
    found, expected = lazy.search(text), eager.search(text)
    assert found is not None and expected is not None and found.group(0) == expected.group(0)
    assert lazy.match(text) is None and eager.match(text) is None
    assert [m.span() for m in lazy.finditer(text)] == [m.span() for m in eager.finditer(text)]
    assert lazy.sub(r"<\1>", text) == eager.sub(r"<\1>", text)
    assert lazy.compiled is first  # compiled once
