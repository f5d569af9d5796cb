"""Session titles: 5-10 words by the model after the first exchange, off the critical path.

Until the model's title arrives (and whenever it fails) the title is the first user
message, shortened (``title_source = "first_message"``). The model is asked once, in
a daemon thread with a time bound, with the ``nostream`` tag so its tokens never
reach the REPL; the result is written with ``title_source = "model"``. A title the
user set with ``/title`` (``"user"``) is never overwritten.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from agentgraph.config import Settings
from agentgraph.persistence.index import SessionIndex, shorten_title
from agentgraph.runtime.history import is_user_request

TITLE_TIMEOUT_S = 20.0
TITLE_MIN_WORDS = 2
TITLE_MAX_WORDS = 12
TITLE_INPUT_MAX_CHARS = 4_000
NOSTREAM_TAG = "nostream"
SOURCE_FIRST_MESSAGE = "first_message"
SOURCE_MODEL = "model"
SOURCE_USER = "user"

TITLE_SYSTEM = "You write short, specific titles for coding-assistant conversations."
TITLE_PROMPT = (
    "Please write a 5-10 word title for the following conversation:\n{conversation}\n"
    "Respond with the title for the conversation and nothing else."
)


def title_prompt(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The title request for a conversation (user requests and answers only)."""
    lines = []
    for msg in messages:
        if is_user_request(msg):
            lines.append(f"User: {msg.text}")
        elif isinstance(msg, AIMessage) and not msg.tool_calls and msg.text.strip():
            lines.append(f"Assistant: {msg.text}")
    conversation = "\n".join(lines)[:TITLE_INPUT_MAX_CHARS]
    return [
        SystemMessage(content=TITLE_SYSTEM),
        HumanMessage(content=TITLE_PROMPT.format(conversation=conversation)),
    ]


def clean_title(raw: str) -> str | None:
    """The model's answer as a title, or None when it is not a usable one."""
    line = next((ln.strip() for ln in raw.splitlines() if ln.strip()), "")
    line = line.strip().strip("\"'`*#").strip()
    if line.lower().startswith("title:"):
        line = line[len("title:") :].strip()
    words = line.split()
    if not (TITLE_MIN_WORDS <= len(words) <= TITLE_MAX_WORDS):
        return None
    return shorten_title(line.rstrip("."))


def generate_title(model: BaseChatModel, messages: Sequence[BaseMessage]) -> str | None:
    """Ask ``model`` for a title (blocking); None on any failure."""
    try:
        reply = model.invoke(title_prompt(messages), config={"tags": [NOSTREAM_TAG]})
    except Exception:
        return None
    return clean_title(reply.text)


def build_titler(settings: Settings, interactive: bool) -> BaseChatModel | None:
    """The model that writes session titles, or None (first-message titles only).

    Only for interactive sessions: a scripted (piped) REPL keeps first-message titles,
    so a background title request never competes with the conversation's own calls.
    """
    if settings.titles != "model" or not interactive:
        return None
    from agentgraph.providers.model import build_chat_model

    try:
        return build_chat_model(settings, settings.summary_model or settings.model)
    except Exception:
        return None


class TitleWriter:
    """Writes model titles into the session index in the background.

    Args:
        model: The chat model that writes titles.
        index: The session index to update.
        timeout_s: After this long the title is abandoned (the fallback stays).
    """

    def __init__(
        self, model: BaseChatModel, index: SessionIndex, timeout_s: float = TITLE_TIMEOUT_S
    ) -> None:
        self.model = model
        self.index = index
        self.timeout_s = timeout_s
        self._started: set[str] = set()
        self._threads: list[threading.Thread] = []

    def maybe_start(self, thread_id: str, messages: Sequence[BaseMessage]) -> bool:
        """Start the title request once per session, after its first exchange."""
        info = self.index.get(thread_id)
        if info is None or info.title_source != SOURCE_FIRST_MESSAGE:
            return False
        if thread_id in self._started:
            return False
        if not any(isinstance(m, AIMessage) and not m.tool_calls for m in messages):
            return False
        self._started.add(thread_id)
        worker = threading.Thread(
            target=self._run, args=(thread_id, list(messages)), daemon=True, name="title"
        )
        self._threads.append(worker)
        worker.start()
        return True

    def _run(self, thread_id: str, messages: list[BaseMessage]) -> None:
        result: list[str | None] = [None]

        def ask() -> None:
            result[0] = generate_title(self.model, messages)

        asker = threading.Thread(target=ask, daemon=True, name="title-request")
        asker.start()
        asker.join(self.timeout_s)
        title = result[0]
        if title is None:
            return
        info = self.index.get(thread_id)
        if info is None or info.title_source != SOURCE_FIRST_MESSAGE:
            return  # deleted, or the user set a title meanwhile
        info.title = title
        info.title_source = SOURCE_MODEL
        self.index.upsert(info)

    def wait(self, timeout_s: float | None = None) -> None:
        """Wait for started title requests (tests; the REPL never waits)."""
        for worker in self._threads:
            worker.join(timeout_s if timeout_s is not None else self.timeout_s)
