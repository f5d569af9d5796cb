"""``@mentions`` in a user message: attach files, load skills, name agents.

``@path/to/file`` attaches the file's text to the user turn (bounded per file and in
total, in tokens); ``@skill-id`` loads a skill; ``@subagent`` / ``@agent`` are
recorded. Parsing and classification are plain functions over the text and the
filesystem; :mod:`agentgraph.session.agent` applies them when it builds a turn.

Paths are resolved with :func:`agentgraph.capabilities.tools.workspace.resolve_in_workspace`, so a
mention can never attach a file outside the folder it is resolved against.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from agentgraph.capabilities.tools.base import ToolError
from agentgraph.capabilities.tools.files import BINARY_SNIFF_BYTES, binary_kind
from agentgraph.capabilities.tools.workspace import display_path, resolve_in_workspace
from agentgraph.context.truncation import truncate_text
from agentgraph.security.bounded_read import BoundedReadError, read_bytes_bounded
from agentgraph.session.images import (
    IMAGES_PER_TURN_MAX,
    ImageError,
    ImageInfo,
    image_block,
    load_image,
    looks_like_image_path,
    sniff_image,
)

# Bounds on what @file mentions add to one user turn.
MENTION_FILE_MAX_TOKENS = 8_000
MENTION_TOTAL_MAX_TOKENS = 24_000
MENTION_FILE_MAX_BYTES = 4 * 1024 * 1024
MENTIONS_MAX = 20
KNOWN_AGENT_MENTIONS = frozenset({"subagent", "agent"})
UPLOADS_DIR_NAME = "uploads"
ATTACHMENT_TEMPLATE = '<attached_file path="{path}">\n{content}\n</attached_file>'
_TRAILING_PUNCTUATION = ".,;:!?)]}'\""
# "@" at the start or after whitespace/an opening bracket, so e-mail addresses
# (user@host) are not mentions; @"quoted path" allows spaces.
_MENTION_RE = re.compile(r'(?:^|(?<=[\s(\[{]))@(?:"([^"\n]+)"|([^\s"]+))')
# A file dropped into a terminal is pasted as its path: absolute, maybe quoted, spaces
# escaped with a backslash. Only image paths are picked up this way.
_DROPPED_IMAGE_RE = re.compile(
    r"""(?:^|(?<=\s))(?:'(/[^'\n]+)'|"(/[^"\n]+)"|(/(?:\\ |[^\s'"])+))""", re.IGNORECASE
)


@dataclass(frozen=True)
class Attachment:
    """A file attached by an ``@path`` mention.

    Attributes:
        mention: The mention as typed (without ``@``).
        path: The path recorded in ``uploaded_files`` (relative to the workspace).
        content: The text added to the turn (possibly truncated).
        truncated: Whether the content was cut.
    """

    mention: str
    path: str
    content: str
    truncated: bool


@dataclass(frozen=True)
class ImageAttachment:
    """An image attached by ``@shot.png`` or by dropping its path into the prompt.

    Attributes:
        path: The path recorded in ``images`` (workspace-relative when inside it).
        info: Format and size.
        block: The content block sent to the model.
    """

    path: str
    info: ImageInfo
    block: dict[str, object]


@dataclass
class MentionResult:
    """Everything the mentions of one message amount to."""

    attachments: list[Attachment] = field(default_factory=list)
    images: list[ImageAttachment] = field(default_factory=list)
    skills: list[str] = field(default_factory=list)
    agents: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def mentioned(self) -> list[str]:
        """Skill and agent names, for ``mentioned_agents``."""
        return list(dict.fromkeys([*self.skills, *self.agents]))


def parse_mentions(text: str) -> list[str]:
    """The ``@mentions`` of ``text``, in order, without duplicates or the ``@``.

    Args:
        text: A user message.

    Returns:
        Mention targets, trailing punctuation removed; at most :data:`MENTIONS_MAX`.
    """
    found: list[str] = []
    for match in _MENTION_RE.finditer(text):
        target = match.group(1) or (match.group(2) or "").rstrip(_TRAILING_PUNCTUATION)
        if target and target not in found:
            found.append(target)
        if len(found) >= MENTIONS_MAX:
            break
    return found


def dropped_image_paths(text: str) -> list[str]:
    """Absolute image paths pasted into ``text`` (a file dropped into the terminal)."""
    found: list[str] = []
    for match in _DROPPED_IMAGE_RE.finditer(text):
        raw = match.group(1) or match.group(2) or (match.group(3) or "").replace("\\ ", " ")
        raw = raw.rstrip(_TRAILING_PUNCTUATION) if not (match.group(1) or match.group(2)) else raw
        if looks_like_image_path(raw) and raw not in found:
            found.append(raw)
    return found[:IMAGES_PER_TURN_MAX]


def _image_attachment(real: Path, shown: str) -> ImageAttachment:
    info, data = load_image(real)
    return ImageAttachment(path=shown, info=info, block=image_block(info, data))


def read_attachment(real: Path) -> str:
    """The text of a file to attach.

    Raises:
        ToolError: The file is a directory, too large, binary or unreadable.
    """
    if real.is_dir():
        raise ToolError("is a directory")
    try:
        data = read_bytes_bounded(real, MENTION_FILE_MAX_BYTES, "attachments")
    except BoundedReadError as exc:
        raise ToolError(str(exc)) from None
    kind = binary_kind(data[:BINARY_SNIFF_BYTES], real.name)
    if kind is not None:
        raise ToolError(f"not attached as text ({kind})")
    return data.decode("utf-8", errors="replace")


def resolve_mentions(
    text: str,
    *,
    root: Path,
    skill_ids: Iterable[str],
    count: Callable[[str], int],
    copy_to: Path | None = None,
    images_allowed: bool = True,
    file_max_tokens: int = MENTION_FILE_MAX_TOKENS,
    total_max_tokens: int = MENTION_TOTAL_MAX_TOKENS,
) -> MentionResult:
    """Classify and resolve the mentions of a user message.

    A mention naming a skill or a known agent is that; otherwise it is a path resolved
    inside ``root``. Mentions that are none of these (``@decorator`` in prose, a
    missing file) are reported in ``problems`` only when they look like paths.

    Args:
        text: The user message.
        root: Folder that ``@path`` mentions are resolved in (the workspace, or the
            launch directory of an isolated session).
        skill_ids: Known skill ids.
        count: Token counter for the caps.
        copy_to: Workspace of an isolated session: attached files are copied to its
            ``uploads/`` folder and recorded by that path.
        images_allowed: Whether the model accepts images; when not, image mentions
            are refused with a problem line instead of attached.
        file_max_tokens: Cap per attached file.
        total_max_tokens: Cap on all attachments of the message.

    Returns:
        The attachments, skills, agents and problems.
    """
    skills = {s.lower() for s in skill_ids}
    result = MentionResult()
    remaining = total_max_tokens
    for target in parse_mentions(text):
        lowered = target.lower()
        if lowered in skills:
            result.skills.append(lowered)
            continue
        if lowered in KNOWN_AGENT_MENTIONS:
            result.agents.append(lowered)
            continue
        looks_like_path = "/" in target or "." in target
        try:
            real = resolve_in_workspace(root, target, must_exist=True)
            if looks_like_image_path(real.name) or _sniff_file(real) is not None:
                shown = display_path(root, real)
                _add_image(result, real, shown, images_allowed, label=f"@{target}")
                continue
            content = read_attachment(real)
        except ToolError as exc:
            if looks_like_path:
                result.problems.append(f"@{target} not attached: {exc}")
            continue
        if remaining <= 0:
            result.problems.append(f"@{target} not attached: attachment budget used up")
            continue
        shown = display_path(root, real)
        if copy_to is not None:
            try:
                uploads = copy_to / UPLOADS_DIR_NAME
                uploads.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(real, uploads / real.name)
            except OSError as exc:
                result.problems.append(f"@{target} not copied to uploads/: {exc.strerror}")
                continue
            shown = f"{UPLOADS_DIR_NAME}/{real.name}"
        cut = truncate_text(content, min(file_max_tokens, remaining), count=count)
        remaining -= count(cut.text)
        result.attachments.append(Attachment(target, shown, cut.text, cut.truncated))
    for dropped in dropped_image_paths(text):
        _add_image(result, Path(dropped), dropped, images_allowed)
    return result


def _sniff_file(real: Path) -> ImageInfo | None:
    try:
        with real.open("rb") as fh:
            return sniff_image(fh.read(BINARY_SNIFF_BYTES))
    except OSError:
        return None


def _add_image(
    result: MentionResult, real: Path, shown: str, allowed: bool, *, label: str | None = None
) -> None:
    """Attach one image to ``result``, or record why not (one line, naming ``label``)."""
    label = label or shown
    if any(img.path == shown for img in result.images):
        return
    if not allowed:
        result.problems.append(
            f"{label} not attached: the model does not accept images "
            "(set AGENTGRAPH_VISION=on if it does)"
        )
        return
    if len(result.images) >= IMAGES_PER_TURN_MAX:
        result.problems.append(f"{label} not attached: at most {IMAGES_PER_TURN_MAX} images a turn")
        return
    try:
        result.images.append(_image_attachment(real, shown))
    except ImageError as exc:
        result.problems.append(f"{label} not attached: {exc}")


def user_content(
    text: str, attachments: Iterable[Attachment], images: Iterable[ImageAttachment]
) -> str | list[str | dict[str, object]]:
    """Content of the user message: text with file blocks, then image blocks if any."""
    body = attach_to_text(text, attachments)
    blocks = [img.block for img in images]
    if not blocks:
        return body
    return [{"type": "text", "text": body}, *blocks]


def attach_to_text(text: str, attachments: Iterable[Attachment]) -> str:
    """The user's text followed by one ``<attached_file>`` block per attachment."""
    blocks = [ATTACHMENT_TEMPLATE.format(path=a.path, content=a.content) for a in attachments]
    return "\n\n".join([text, *blocks]) if blocks else text
