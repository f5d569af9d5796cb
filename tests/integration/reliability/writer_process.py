"""A writer process for the concurrency test: several threads run many turns on one store.

Usage:
``python -m tests.integration.reliability.writer_process HOME WORKSPACE PREFIX THREADS TURNS``.
Prints ``OK`` when every turn finished; any failure exits non-zero with its message.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from agentgraph.config import Settings
from agentgraph.persistence import open_store
from agentgraph.session.agent import Agent
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.scripts import ai_text, ai_tools


def main(argv: list[str]) -> int:
    home, workspace, prefix, threads, turns = argv
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        AGENTGRAPH_HOME=home,
        OPENAI_BASE_URL="http://127.0.0.1:9/v1",
        MAX_MESSAGE_HISTORY=100,
    )
    errors: list[str] = []
    start = threading.Barrier(int(threads))

    def work(n: int) -> None:
        try:
            # Each thread opens its own store, like another process would.
            with open_store(settings) as store:
                replies = []
                for i in range(int(turns)):
                    replies += [ai_tools(("now", {})), ai_text(f"{prefix}-{n}-{i}")]
                agent = Agent(settings, store, model=ScriptedChatModel(replies))
                start.wait()
                for i in range(int(turns)):
                    thread_id = f"{prefix}-{n}"
                    agent.run_turn(thread_id, f"turn {i}", Path(workspace))
                    stored = len(agent.messages(thread_id))
                    info = store.index.get(thread_id)
                    counted = info.message_count if info else -1
                    if not stored == counted == 4 * (i + 1):
                        errors.append(f"{thread_id} turn {i}: {stored} stored, {counted} indexed")
        except BaseException as exc:
            start.abort()
            import traceback

            errors.append(f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}")

    workers = [threading.Thread(target=work, args=(n,)) for n in range(int(threads))]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    if errors:
        print("\n".join(errors), file=sys.stderr)
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
