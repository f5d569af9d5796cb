"""Images attached to a user turn: checked, encoded as content blocks, or refused.

``@shot.png`` or an image path dropped into the prompt (terminals paste the absolute
path, sometimes quoted or with ``\\ `` escapes) attaches the image as an OpenAI-style
``image_url`` block with a ``data:`` URL, which ``langchain-openai`` and every
OpenAI-compatible vision server accept. The bytes are checked here: the format is
sniffed from the magic number (not the file name), the dimensions are read from the
header, and a file that is corrupt, too large or not an image is refused with one line.
No image library is needed: the four formats providers accept (PNG, JPEG, GIF, WebP)
carry their size in a few header bytes.

Whether the model accepts images is decided before sending (a text-only model would
answer with a 400 that every later request repeats): ``AGENTGRAPH_VISION=on|off``, else
the model's LangChain profile (``image_inputs``), else known model-name families.
"""

from __future__ import annotations

import base64
import re
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage

from agentgraph.security.bounded_read import BoundedReadError, read_bytes_bounded

# OpenAI accepts up to 20 MB per image, Anthropic 5 MB: the smaller keeps both working.
IMAGE_MAX_BYTES = 5 * 1024 * 1024
# Past this, providers downscale anyway; such a "image" is more likely a hostile header.
IMAGE_MAX_SIDE_PX = 16_384
IMAGES_PER_TURN_MAX = 10
IMAGE_EXTENSIONS = frozenset({".png", ".jpg", ".jpeg", ".gif", ".webp"})
# Model-name families that accept images when the profile does not say.
_VISION_NAME = re.compile(
    r"(gpt-4o|gpt-4\.1|gpt-4-turbo|gpt-5|o[134]\b|o[34]-|claude|gemini|pixtral|llava|"
    r"vision|[-_]vl\b|[-_]vl[-_:]|qwen2\.5-vl|minicpm-v|llama-?3\.2-.*vision|gemma-?3)",
    re.IGNORECASE,
)
IMAGE_OMITTED_TEMPLATE = "[image {name} omitted: the model in use does not accept images]"


class ImageError(ValueError):
    """A file that cannot be attached as an image (the message is one line)."""


@dataclass(frozen=True)
class ImageInfo:
    """A checked image."""

    mime_type: str
    width: int
    height: int


def _png(data: bytes) -> tuple[int, int] | None:
    if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR" and len(data) >= 24:
        w, h = struct.unpack(">II", data[16:24])
        return int(w), int(h)
    return None


def _gif(data: bytes) -> tuple[int, int] | None:
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        w, h = struct.unpack("<HH", data[6:10])
        return int(w), int(h)
    return None


def _webp(data: bytes) -> tuple[int, int] | None:
    if data[:4] != b"RIFF" or data[8:12] != b"WEBP" or len(data) < 30:
        return None
    chunk = data[12:16]
    if chunk == b"VP8 " and data[23:26] == b"\x9d\x01\x2a":
        w, h = struct.unpack("<HH", data[26:30])
        return int(w) & 0x3FFF, int(h) & 0x3FFF
    if chunk == b"VP8L" and data[20] == 0x2F:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X":
        w = int.from_bytes(data[24:27], "little") + 1
        h = int.from_bytes(data[27:30], "little") + 1
        return w, h
    return None


_JPEG_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _jpeg(data: bytes) -> tuple[int, int] | None:
    if data[:3] != b"\xff\xd8\xff":
        return None
    i = 2
    while i + 9 < len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:
            i += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            i += 2
            continue
        (length,) = struct.unpack(">H", data[i + 2 : i + 4])
        if length < 2:
            return None
        if marker in _JPEG_SOF:
            h, w = struct.unpack(">HH", data[i + 5 : i + 9])
            return int(w), int(h)
        i += 2 + length
    return None


_SNIFFERS = (("image/png", _png), ("image/jpeg", _jpeg), ("image/gif", _gif), ("image/webp", _webp))


def sniff_image(data: bytes) -> ImageInfo | None:
    """Format and size of image bytes, or None when they are not a supported image."""
    for mime, sniff in _SNIFFERS:
        size = sniff(data)
        if size is not None:
            return ImageInfo(mime, size[0], size[1])
    return None


def looks_like_image_path(path: str) -> bool:
    """Whether ``path`` names an image by its extension (what a dropped file looks like)."""
    return Path(path).suffix.lower() in IMAGE_EXTENSIONS


def load_image(path: Path) -> tuple[ImageInfo, bytes]:
    """Read and check an image file.

    Raises:
        ImageError: unreadable, too large, not a supported image, or corrupt.
    """
    try:
        data = read_bytes_bounded(path, IMAGE_MAX_BYTES, "images")
    except BoundedReadError as exc:
        raise ImageError(str(exc)) from None
    info = sniff_image(data)
    if info is None:
        if looks_like_image_path(path.name):
            raise ImageError("not a valid PNG, JPEG, GIF or WebP image (corrupt or mislabelled)")
        raise ImageError("not an image")
    if not (0 < info.width <= IMAGE_MAX_SIDE_PX and 0 < info.height <= IMAGE_MAX_SIDE_PX):
        raise ImageError(f"{info.width}x{info.height} pixels is not a usable image size")
    return info, data


def image_block(info: ImageInfo, data: bytes) -> dict[str, Any]:
    """An OpenAI-style ``image_url`` content block holding the image as a data URL."""
    encoded = base64.b64encode(data).decode("ascii")
    return {"type": "image_url", "image_url": {"url": f"data:{info.mime_type};base64,{encoded}"}}


def model_accepts_images(model_name: str, profile: Mapping[str, Any] | None, setting: str) -> bool:
    """Whether to send images to this model.

    Args:
        model_name: The model's name.
        profile: The chat model's LangChain profile, if it has one.
        setting: ``AGENTGRAPH_VISION``: ``on``, ``off`` or ``auto``.
    """
    if setting in ("on", "off"):
        return setting == "on"
    if profile and isinstance(profile.get("image_inputs"), bool):
        return bool(profile["image_inputs"])
    return bool(_VISION_NAME.search(model_name))


def _is_image_block(block: Any) -> bool:
    return isinstance(block, Mapping) and block.get("type") in ("image", "image_url")


def has_images(message: BaseMessage) -> bool:
    """Whether a message carries image content blocks."""
    return isinstance(message.content, list) and any(map(_is_image_block, message.content))


def without_images(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """``messages`` with image blocks replaced by a one-line text note (a prompt view).

    Used when the model in use does not accept images (``/model`` switched to a
    text-only one): the history keeps the images, the request does not carry them.
    """
    out: list[BaseMessage] = []
    for msg in messages:
        if not has_images(msg):
            out.append(msg)
            continue
        meta = msg.additional_kwargs.get("agentgraph")
        names = list(meta.get("images") or []) if isinstance(meta, Mapping) else []
        blocks: list[str | dict[Any, Any]] = []
        for block in msg.content:
            if _is_image_block(block):
                name = names.pop(0) if names else "attachment"
                blocks.append({"type": "text", "text": IMAGE_OMITTED_TEMPLATE.format(name=name)})
            else:
                blocks.append(block)
        out.append(msg.model_copy(update={"content": blocks}))
    return out
