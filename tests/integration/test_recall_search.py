"""search_history / read_history / /search: the whole transcript stays findable."""

from __future__ import annotations

import gzip
import json
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

import agentgraph.frontends.cli.slash_recall  # noqa: F401  (registers /search)
from agentgraph.capabilities.recall.search import (
    SEARCH_QUERY_MAX_CHARS,
    SearchError,
    format_results,
    read_message,
    search_transcript,
)
from agentgraph.config import Settings
from agentgraph.context.artifacts import was_cut
from agentgraph.context.ledger import ledger_message
from agentgraph.frontends.cli.slash import dispatch
from agentgraph.persistence import Store, open_store
from agentgraph.session.agent import Agent
from tests.fakes.openai_server import FakeOpenAIServer
from tests.scenarios.long_task import note_of
from tests.slash_helpers import slash_context

FACT = "ZEBRA-QUASAR-77"
CJK_FACT = "数据库连接池的上限是六十四"
LOG_DETAILS = " ".join(f"Rotation step {n} compresses and keeps the old file." for n in range(40))


def _tool_texts(request: dict[str, Any]) -> list[str]:
    return [str(m.get("content")) for m in request["messages"] if m.get("role") == "tool"]


def _read_ref(request: dict[str, Any]) -> dict[str, Any]:
    """Reply: read the reference of the search hit that shows the fact."""
    found = re.search(rf"(msg:\d+) [^\n]*{FACT}", _tool_texts(request)[-1])
    assert found is not None, _tool_texts(request)
    return {"tool_calls": [{"name": "read_history", "arguments": {"ref": found.group(1)}}]}


def _answer_from_tool(request: dict[str, Any]) -> dict[str, Any]:
    text = _tool_texts(request)[-1]
    return {"content": f"The codename is {FACT}." if FACT in text else "I could not find it."}


def test_search_finds_a_fact_that_was_summarized_away(
    make_backend_settings: Callable[..., Settings], workspace: Path
) -> None:
    script: list[Any] = [
        {"content": "Noted."},
        # Long enough that a summary makes the prompt smaller (else /compact skips it).
        {"content": "Sure, the logs are rotated daily. " + LOG_DETAILS},
        {"content": "## Summary\nThe user chatted about logs."},  # drops the fact
        {"tool_calls": [{"name": "search_history", "arguments": {"query": "codename"}}]},
        _read_ref,
        _answer_from_tool,
    ]
    with FakeOpenAIServer(script, on_exhausted="raise") as server:
        settings = make_backend_settings(
            OPENAI_BASE_URL=server.url,
            OPENAI_API_KEY="sk-test",
            AGENTGRAPH_PROVIDER_MAX_RETRIES="0",
        )
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            agent.run_turn("t1", f"Remember: the project codename is {FACT}.", workspace)
            agent.run_turn("t1", "How are logs kept?", workspace)
            record = agent.compact("t1")
            assert record is not None and not record["fallback"]
            result = agent.run_turn("t1", "What was the project codename?", workspace)
            stored = agent.messages("t1")
        requests = server.requests
    assert server.violations == []
    assert result.answer == f"The codename is {FACT}."
    # The model's view no longer had the fact when it decided to search …
    assert FACT not in json.dumps(requests[3]["messages"])
    # … the search found it (with a reference), read_history showed it in full.
    search_result, read_result = _tool_texts(requests[5])[-2:]
    assert FACT in search_result and "msg:" in search_result
    assert read_result.startswith("msg:") and f"the project codename is {FACT}" in read_result
    # The tools and the summary tell the model the transcript is searchable.
    tool_names = [t["function"]["name"] for t in requests[3]["tools"]]
    assert {"search_history", "read_history"} <= set(tool_names)
    assert "search_history" in json.dumps(requests[3]["messages"][:2])
    assert sum(1 for m in stored if isinstance(m, HumanMessage) and FACT in str(m.content)) == 1


def _transcript() -> list[Any]:
    call = {"name": "read_file", "args": {"path": "notes/设计.md"}, "id": "c1"}
    return [
        HumanMessage(f"Note: {CJK_FACT}; also check config.yaml", id="u1"),
        AIMessage("", tool_calls=[call], id="a1"),
        ToolMessage(
            'He said "NEAR" (a AND b) OR c* -- select * from t; 100% done_ok',
            tool_call_id="c1",
            name="read_file",
            id="t1",
        ),
        AIMessage("The pool limit is documented in Chinese.", id="a2"),
    ]


@pytest.fixture
def backend_store(make_backend_settings: Callable[..., Settings]) -> Any:
    with open_store(make_backend_settings()) as store:
        yield store


@pytest.mark.parametrize(
    "query",
    [
        '"',
        '""',
        "*",
        "NEAR",
        "AND",
        "OR",
        "(",
        ")",
        "a AND (b",
        '"unbalanced',
        "col:val",
        "^start",
        "-foo",
        "100%",
        "done_ok",
        "select * from",
        "NEAR(a b)",
        "\\",
        "'; DROP TABLE agentgraph_history; --",
        "\x00nul",
    ],
)
def test_fts_syntax_characters_are_literal_text(backend_store: Store, query: str) -> None:
    messages = _transcript()
    result = search_transcript(backend_store.history, "bad", messages, query, 5)
    for hit in result.hits:
        assert hit.ref.startswith("msg:")
    again = search_transcript(backend_store.history, "bad", messages, "Chinese", 5)
    assert [h.position for h in again.hits] == [3]  # the table is still there


def test_search_ranks_literal_operators_cjk_and_short_terms(backend_store: Store) -> None:
    messages = _transcript()

    def positions(query: str) -> list[int]:
        result = search_transcript(backend_store.history, "s", messages, query, 5)
        return [h.position for h in result.hits]

    assert positions('"NEAR" (a AND b)')[0] == 2
    assert positions("c*") == [2]
    assert positions("100%") == [2]
    assert positions("数据库连接池") == [0]  # CJK, trigram-length and longer
    assert positions("上限") == [0]  # two characters: below a trigram
    assert positions("设计.md") == [1]  # in a tool call's arguments
    assert sorted(positions("config.yaml pool")) == [0, 3]  # one term each
    assert positions("pool limit Chinese") == [3]
    assert positions("nothing-like-this") == []


@pytest.mark.parametrize("query", ["", "   ", "\n\t"])
def test_empty_queries_are_refused_clearly(backend_store: Store, query: str) -> None:
    with pytest.raises(SearchError, match="empty"):
        search_transcript(backend_store.history, "s", _transcript(), query, 5)


def test_huge_query_and_bad_limit_are_refused_with_the_limit_named(backend_store: Store) -> None:
    with pytest.raises(SearchError, match=str(SEARCH_QUERY_MAX_CHARS)):
        search_transcript(backend_store.history, "s", _transcript(), "x" * 10_000, 5)
    with pytest.raises(SearchError, match="limit"):
        search_transcript(backend_store.history, "s", _transcript(), "pool", 0)
    with pytest.raises(SearchError, match="msg:12"):
        read_message(_transcript(), "the first one")
    with pytest.raises(SearchError, match="no message msg:99"):
        read_message(_transcript(), "msg:99")
    # A masked output's placeholder names its tool call id: that reads it too.
    assert read_message(_transcript(), "c1").startswith("msg:2 [tool read_file]\nHe said")


def _compacted_reads(compactions: int) -> list[Any]:
    """Three files read, then ``compactions`` compactions' summaries and ledgers."""
    messages: list[Any] = [HumanMessage("Fix the timeout in the app", id="u1")]
    for i, path in enumerate(["src/app.py", "src/config.py", "src/util.py"]):
        call = {"name": "read_file", "args": {"path": path}, "id": f"c{i}"}
        messages.append(AIMessage("", tool_calls=[call], id=f"a{i}"))
        body = f"1\timport os\n2\tTIMEOUT_{i} = {17 + i}"
        messages.append(ToolMessage(body, tool_call_id=f"c{i}", name="read_file", id=f"t{i}"))
    for k in range(compactions):
        kind = {"agentgraph": {"kind": "summary"}}
        messages.append(HumanMessage(f"Summary {k}: fixing the timeout.", id=f"s{k}"))
        messages[-1].additional_kwargs.update(kind)
        ledger = "[Progress ledger]\nFiles read:\n- src/ app.py, config.py, util.py"
        messages.append(ledger_message(ledger, f"l{k}"))
        messages.append(AIMessage(f"step {k}", id=f"x{k}"))
    return messages


def test_a_file_name_finds_the_call_that_read_it_and_where_its_result_is(
    backend_store: Store,
) -> None:
    """Every compaction writes the progress ledger anew, listing every file read: its
    copies took four of a file name's five hits after eight compactions, and the call
    that read the file named it while its result, which does not, was not found."""
    messages = _compacted_reads(8)
    result = search_transcript(backend_store.history, "f", messages, "config.py", 5)
    assert [(h.position, h.results) for h in result.hits] == [(3, (4,))]
    assert format_results(result).endswith('read_file {"path": "src/config.py"} → result msg:4')
    assert "TIMEOUT_1 = 18" in read_message(messages, "msg:4")
    # A ledger is still read by its reference (an earlier search may have named one).
    assert read_message(messages, "msg:8").startswith("msg:8 [ledger]\n[Progress ledger]")


def test_index_follows_compaction_moves_and_deletes(backend_store: Store) -> None:
    messages = _transcript()
    assert backend_store.history is not None
    search_transcript(backend_store.history, "m", messages, "pool", 5)
    # A compaction removes the kept tail and re-adds copies under new ids.
    moved = AIMessage("The pool limit is documented in Chinese.", id="a2~1234")
    after = [*messages[:3], moved]
    hits = search_transcript(backend_store.history, "m", after, "Chinese", 5).hits
    assert [h.position for h in hits] == [3]
    backend_store.delete_thread("m")
    assert search_transcript(backend_store.history, "m", [], "Chinese", 5).hits == []


def test_corrupt_fts_index_is_rebuilt_from_the_transcript(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    script = [{"content": f"Stored: {FACT}."}]
    with FakeOpenAIServer(script) as server:
        settings = make_settings(OPENAI_BASE_URL=server.url, OPENAI_API_KEY="sk-test")
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            agent.run_turn("c1", f"keep {FACT} in mind", workspace)
            before = agent.messages("c1")
            assert sorted(h.position for h in agent.search_history("c1", FACT).hits) == [0, 1]
    raw = sqlite3.connect(settings.db_path)
    with raw:
        raw.execute("UPDATE agentgraph_search_fts_data SET block = x'0102030405060708'")
    raw.close()
    with open_store(settings) as store:
        agent = Agent(settings, store, sleep=lambda _s: None)
        result = agent.search_history("c1", FACT)
        assert result.rebuilt
        assert sorted(h.position for h in result.hits) == [0, 1]
        assert agent.messages("c1") == before  # the session itself is untouched
        again = agent.search_history("c1", FACT)
        assert not again.rebuilt and len(again.hits) == 2


def test_slash_search_lists_hits_and_shows_a_message(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    script = [{"content": "Noted the port."}]
    with FakeOpenAIServer(script) as server:
        settings = make_settings(OPENAI_BASE_URL=server.url, OPENAI_API_KEY="sk-test")
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            agent.run_turn("r1", "the staging port is 6543", workspace)
            ctx, out = slash_context(agent, "r1", workspace)
            dispatch(ctx, "/search staging port")
            dispatch(ctx, "/search msg:0")
            dispatch(ctx, "/search")
            dispatch(ctx, '/search "')
    text = out.getvalue()
    assert "msg:0 [user] the staging port is 6543" in text
    assert "msg:0 [user]\nthe staging port is 6543" in text
    assert "usage: /search" in text
    assert "no messages match" in text


MASK_WINDOW_TOKENS = 16_000
MASK_READS_MAX = 20  # the driver gives up (and the test fails) if nothing is masked by then
FILLER_LINE = "log line {n:04d}: the nightly job finished with status ok and no warnings\n"


class _MaskedFactDriver:
    """Reads logs until the first one (with the fact) is masked, then searches for it."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths
        self.reads = 0
        self.searched_request: dict[str, Any] | None = None

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        texts = _tool_texts(request)
        if self.searched_request is not None:
            found = FACT in texts[-1]
            return {"content": f"The codename is {FACT}." if found else "I could not find it."}
        masked = bool(texts) and texts[0].startswith("[tool output masked")
        if masked or self.reads >= MASK_READS_MAX:
            self.searched_request = request
            query = {"query": "codename", "limit": 3}
            return {"tool_calls": [{"name": "search_history", "arguments": query}]}
        path = self.paths[self.reads]
        self.reads += 1
        # It notes what it read (masking hides only what the model restated).
        reply = {"tool_calls": [{"name": "read_file", "arguments": {"path": path}}]}
        return {**reply, "content": note_of(request)}


def test_search_finds_a_fact_whose_tool_output_was_masked(
    make_backend_settings: Callable[..., Settings], workspace: Path
) -> None:
    paths = []
    for i in range(MASK_READS_MAX):
        head = f"project codename: {FACT}\n" if i == 0 else ""
        body = "".join(FILLER_LINE.format(n=n) for n in range(50))
        (workspace / f"log_{i:02d}.txt").write_text(head + body)
        paths.append(f"log_{i:02d}.txt")
    driver = _MaskedFactDriver(paths)
    events: list[dict[str, Any]] = []
    with FakeOpenAIServer(
        [driver], on_exhausted="repeat_last", window=MASK_WINDOW_TOKENS
    ) as server:
        settings = make_backend_settings(
            OPENAI_BASE_URL=server.url,
            OPENAI_API_KEY="sk-test",
            AGENTGRAPH_PROVIDER_MAX_RETRIES="0",
            AGENTGRAPH_CONTEXT_WINDOW=str(MASK_WINDOW_TOKENS),
            # Masking alone: search must find what it hid before any summary has it.
            AGENTGRAPH_DISTIL_THRESHOLD="10",
        )
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            result = agent.run_turn(
                "m1",
                "Read the logs one by one; then tell me the codename.",
                workspace,
                events.append,
            )
            api = agent.search_history("m1", FACT)
            ctx, out = slash_context(agent, "m1", workspace, width=300)
            dispatch(ctx, f"/search {FACT}")
            stored = agent.messages("m1")
        requests = server.requests
    assert server.violations == []
    # Masked (tier 1), never summarized: the output left the prompt, the state kept it.
    assert [e for e in events if e["type"] == "masking"]
    assert [e for e in events if e["type"] == "compaction"] == []
    assert driver.searched_request is not None and driver.reads < MASK_READS_MAX
    assert FACT not in json.dumps(driver.searched_request["messages"])
    fact_outputs = [
        m
        for m in stored
        if isinstance(m, ToolMessage) and m.name == "read_file" and FACT in str(m.content)
    ]
    assert len(fact_outputs) == 1
    # search_history (the tool the model called) found it, with a reference …
    search_output = _tool_texts(requests[-1])[-1]
    assert FACT in search_output and "msg:" in search_output
    assert result.answer == f"The codename is {FACT}."
    # … and so do the API behind /search and /search itself.
    position = stored.index(fact_outputs[0])
    assert position in [h.position for h in api.hits]
    assert f"msg:{position} [tool read_file]" in out.getvalue()
    assert FACT in out.getvalue()


def _words_transcript() -> list[Any]:
    return [
        HumanMessage("Kernel panic in parse_config_file at line 3", id="w0"),
        AIMessage("Call parseConfigFile() and then HTTPServer.start", id="w1"),
        ToolMessage(
            "設定ファイルを読み込みました / 설정 파일을 읽었습니다",
            tool_call_id="c9",
            name="read_file",
            id="w2",
        ),
        HumanMessage("We met at the café near the station", id="w3"),
    ]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("Kerne", [0]),  # a word's beginning
        ("parse_config_file", [0]),  # an identifier, whole
        ("config_file", [0]),  # the end of one
        ("parseConfigFile", [1]),  # camelCase, whole
        ("ConfigFile", [1]),
        ("Server", [1]),  # HTTPServer
        ("()", [1]),  # no letters at all: scanned for
        ("ファイル", [2]),  # Katakana inside a run of Han and Hiragana
        ("読み込", [2]),  # a piece of a CJK run
        ("設", [2]),  # one character
        ("파일을", [2]),  # Hangul
        ("cafe", [3]),  # diacritics ignored
        ("CAFÉ", [3]),
        ("station café", [3]),
        ('"parse config"', []),  # the words, but not this phrase
        ("数据" * 250, []),  # the longest query: a 500-character phrase
        ("x_" * 250, []),
        ("* " * 250, []),  # twelve terms of no word at all
    ],
)
def test_word_index_finds_identifiers_prefixes_and_cjk(
    make_settings: Callable[..., Settings], query: str, expected: list[int]
) -> None:
    with open_store(make_settings()) as store:
        result = search_transcript(store.history, "w", _words_transcript(), query, 5)
    assert [h.position for h in result.hits] == expected
    for hit in result.hits:
        assert query.casefold()[:2] in hit.snippet.casefold() or query in ("cafe", "CAFÉ")


def test_damaged_stored_text_is_rebuilt_from_the_transcript(
    make_settings: Callable[..., Settings],
) -> None:
    settings = make_settings()
    messages = _words_transcript()
    with open_store(settings) as store:
        assert search_transcript(store.history, "d", messages, "Kernel", 5).hits
    raw = sqlite3.connect(settings.db_path)
    with raw:
        raw.execute("UPDATE agentgraph_search_texts SET body = x'0102030405060708'")
    raw.close()
    with open_store(settings) as store:
        result = search_transcript(store.history, "d", messages, "Kernel", 5)
        assert result.rebuilt and [h.position for h in result.hits] == [0]
        assert not search_transcript(store.history, "d", messages, "Kernel", 5).rebuilt


LEGACY_FIXTURE = Path(__file__).parent.parent / "fixtures" / "trigram_index_sessions.db.gz"
"""A session database written by agentgraph at commit 628db65, whose transcript index was
an FTS5 trigram index (``agentgraph_history`` + ``agentgraph_history_fts``): thread
``legacy``, two turns (user: a codename, Chinese, ``parseConfigFile``; then Korean)."""


def test_database_with_the_trigram_index_is_migrated(
    make_settings: Callable[..., Settings], workspace: Path
) -> None:
    script = [{"content": "Done: the staging port is 6543."}]
    with FakeOpenAIServer(script) as server:
        settings = make_settings(OPENAI_BASE_URL=server.url, OPENAI_API_KEY="sk-test")
        settings.db_path.parent.mkdir(parents=True, exist_ok=True)
        settings.db_path.write_bytes(gzip.decompress(LEGACY_FIXTURE.read_bytes()))

        def tables() -> set[str]:
            raw = sqlite3.connect(settings.db_path)
            try:
                rows = raw.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                return {name for (name,) in rows if name.startswith("agentgraph_")}
            finally:
                raw.close()

        assert {"agentgraph_history", "agentgraph_history_fts"} <= tables()
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            before = agent.messages("legacy")
            assert len(before) == 4

            def positions(query: str) -> list[int]:
                result = agent.search_history("legacy", query)
                assert not result.rebuilt  # a migration, not damage
                return [h.position for h in result.hits]

            assert positions("ZEBRA-QUASAR-77") == [0]
            assert positions("上限") == [0]
            assert positions("Config") == [0]
            assert positions("로그") == [2]
            assert positions("ローテーション") == [3]
            agent.run_turn("legacy", "what is the staging port?", workspace)
            assert positions("6543") == [5]
            assert agent.messages("legacy")[:4] == before  # the session itself is untouched
    left = tables()
    assert not {"agentgraph_history", "agentgraph_history_fts"} & left
    assert {"agentgraph_search_texts", "agentgraph_search_fts"} <= left


def _cut_output_driver(request: dict[str, Any]) -> dict[str, Any]:
    """A stateless model: print the log; not seeing the codename, search for it; answer
    with what the search showed."""
    tools = _tool_texts(request)
    if not tools:
        return {"tool_calls": [{"name": "run_bash", "arguments": {"command": "cat big.log"}}]}
    if "search_history" not in json.dumps(request["messages"][-2:]):
        return {"tool_calls": [{"name": "search_history", "arguments": {"query": "codename"}}]}
    found = re.search(r"codename: (\S+)", tools[-1])
    return {"content": f"The codename is {found.group(1)}." if found else "Not found."}


def test_what_a_cut_took_from_an_output_is_found_and_read_by_reference(
    make_backend_settings: Callable[..., Settings], workspace: Path
) -> None:
    """A command's output over its cap keeps its head and tail in the history and goes
    whole to the session's artifacts; the index held the cut, so what the cut took (here
    the codename, mid-log) was found by no search and shown by no ``read_history``, though
    the product says everything elided stays searchable. Both now use the saved copy (its
    digest checked), through the tool the model calls and the API behind ``/search``."""
    lines = [FILLER_LINE.format(n=n) for n in range(1_000)]
    lines.insert(500, f"project codename: {FACT}\n")
    (workspace / "big.log").write_text("".join(lines))
    with FakeOpenAIServer(
        [_cut_output_driver], on_exhausted="repeat_last", window=MASK_WINDOW_TOKENS
    ) as server:
        settings = make_backend_settings(
            OPENAI_BASE_URL=server.url,
            OPENAI_API_KEY="sk-test",
            AGENTGRAPH_PROVIDER_MAX_RETRIES="0",
            AGENTGRAPH_CONTEXT_WINDOW=str(MASK_WINDOW_TOKENS),
        )
        with open_store(settings) as store:
            agent = Agent(settings, store, sleep=lambda _s: None)
            result = agent.run_turn("cut1", "What is the project codename?", workspace)
            stored = agent.messages("cut1")
            api = agent.search_history("cut1", FACT)
            cut = next(m for m in stored if isinstance(m, ToolMessage) and m.name == "run_bash")
            shown = agent.read_history("cut1", f"msg:{stored.index(cut)}")
    assert server.violations == []
    assert was_cut(cut) and FACT not in str(cut.content)
    assert result.answer == f"The codename is {FACT}."
    assert stored.index(cut) in [h.position for h in api.hits]
    assert FACT in shown
