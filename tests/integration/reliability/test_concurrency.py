"""Two processes (two threads each) write many turns into one SQLite file at once (4)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage

from agentgraph.config import Settings
from agentgraph.persistence import open_store
from agentgraph.persistence.index import SessionInfo
from agentgraph.runtime.history import validate_history
from agentgraph.session.agent import Agent
from tests.fakes.chat_model import ScriptedChatModel

PROCESSES = 2
THREADS_PER_PROCESS = 2
TURNS = 12
WRITER_TIMEOUT_S = 300


def test_two_processes_write_one_sqlite_file(tmp_path: Path, workspace: Path) -> None:
    home = tmp_path / "store"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.integration.reliability.writer_process",
                str(home),
                str(workspace),
                f"p{n}",
                str(THREADS_PER_PROCESS),
                str(TURNS),
            ],
            cwd=Path(__file__).resolve().parents[3],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(PROCESSES)
    ]
    outputs = [proc.communicate(timeout=WRITER_TIMEOUT_S) for proc in procs]
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
        assert out.strip() == "OK" and "locked" not in err

    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        AGENTGRAPH_HOME=str(home),
        OPENAI_BASE_URL="http://127.0.0.1:9/v1",
        MAX_MESSAGE_HISTORY=100,
    )
    with open_store(settings) as store:
        threads = [f"p{p}-{t}" for p in range(PROCESSES) for t in range(THREADS_PER_PROCESS)]
        answers = [AIMessage(content="ok", id=f"reader-{n}") for n in range(len(threads))]
        agent = Agent(settings, store, model=ScriptedChatModel(answers))
        listed = {s.thread_id for s in store.index.list_sessions()}
        assert listed == set(threads)
        for thread_id in threads:
            history = agent.messages(thread_id)
            assert validate_history(history) == []
            humans = [m.content for m in history if isinstance(m, HumanMessage)]
            assert humans == [f"turn {i}" for i in range(TURNS)]
            assert len(history) == TURNS * 4  # human, call, result, answer
            info = store.index.get(thread_id)
            assert info is not None and info.message_count == len(history)
            agent.run_turn(thread_id, "still resumable?", workspace)  # both resumable
            after = agent.messages(thread_id)
            assert len(after) == TURNS * 4 + 2, [
                (type(m).__name__, str(m.content)[:20], m.id) for m in after[-6:]
            ]


# Another process that commits and waits to be told to close.
_OTHER_WRITER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], timeout=10)
conn.execute(
    "INSERT INTO agentgraph_sessions (thread_id, created_at, updated_at) VALUES ('other', 3, 3)"
)
conn.commit()
print("committed", flush=True)
sys.stdin.readline()
conn.close()
"""


def test_a_second_store_in_a_process_keeps_its_wal_locks(settings: Settings) -> None:
    """Opening a second store where one is open must not drop this process's locks on the
    file: another process closing its last connection would delete the WAL under ours,
    and a third process's commit was lost."""
    with open_store(settings) as first:
        first.index.upsert(SessionInfo(thread_id="before", created_at=1.0, updated_at=1.0))
        with open_store(settings):
            peek = (
                "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
                "c.execute('SELECT count(*) FROM sqlite_master').fetchone(); c.close()"
            )
            subprocess.run([sys.executable, "-c", peek, str(first.path)], check=True)
            other = subprocess.Popen(
                [sys.executable, "-c", _OTHER_WRITER, str(first.path)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            assert other.stdout is not None and other.stdin is not None
            assert other.stdout.readline().strip() == "committed"
            first.index.upsert(SessionInfo(thread_id="after", created_at=2.0, updated_at=2.0))
            other.stdin.write("\n")
            other.stdin.flush()
            assert other.wait(timeout=WRITER_TIMEOUT_S) == 0
    with open_store(settings) as again:
        stored = {s.thread_id for s in again.index.list_sessions(include_subagents=True)}
    assert stored == {"before", "after", "other"}
