"""Images attached to a turn: checked, sent as content blocks, refused for text-only models."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from agentgraph.session.images import (
    IMAGE_MAX_BYTES,
    ImageError,
    load_image,
    model_accepts_images,
    sniff_image,
    without_images,
)
from agentgraph.session.mentions import dropped_image_paths, resolve_mentions
from tests.cli_helpers import cli_env, run_cli
from tests.fakes.openai_server import fake_openai_server
from tests.fakes.scripts import reply_text


def png_bytes(width: int = 3, height: int = 2, *, pixels: bool = True) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = height if pixels else 1
    raw = b"".join(b"\x00" + b"\xff\x00\x00" * (width if pixels else 1) for _ in range(rows))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def test_formats_are_sniffed_from_bytes_with_their_size() -> None:
    assert sniff_image(png_bytes(640, 480)) is not None
    info = sniff_image(png_bytes(640, 480))
    assert info is not None and (info.mime_type, info.width, info.height) == ("image/png", 640, 480)
    gif = b"GIF89a" + struct.pack("<HH", 10, 20) + b"\x00" * 10
    assert sniff_image(gif) is not None and sniff_image(gif).width == 10  # type: ignore[union-attr]
    jpeg = (
        b"\xff\xd8\xff\xe0"
        + struct.pack(">H", 16)
        + b"JFIF\x00"
        + b"\x00" * 9
        + b"\xff\xc0"
        + struct.pack(">HBHH", 17, 8, 50, 70)
        + b"\x00" * 12
    )
    info = sniff_image(jpeg)
    assert info is not None and (info.mime_type, info.width, info.height) == ("image/jpeg", 70, 50)
    assert sniff_image(b"hello world") is None


def test_corrupt_huge_and_not_image_files_are_refused_with_one_line(tmp_path: Path) -> None:
    corrupt = tmp_path / "shot.png"
    corrupt.write_bytes(b"\x89PNG\r\n\x1a\n garbage")
    text = tmp_path / "notes.txt"
    text.write_text("just text")
    huge = tmp_path / "huge.png"
    huge.write_bytes(png_bytes() + b"\x00" * IMAGE_MAX_BYTES)
    giant = tmp_path / "giant.png"
    giant.write_bytes(png_bytes(100_000, 100_000, pixels=False))  # the header claims it
    for path, words in (
        (corrupt, "corrupt"),
        (text, "not an image"),
        (huge, "limited"),
        (giant, "pixels"),
        (tmp_path / "missing.png", "No such file"),
    ):
        with pytest.raises(ImageError) as info:
            load_image(path)
        assert words in str(info.value) and "\n" not in str(info.value)


def test_dropped_paths_quoted_escaped_and_plain() -> None:
    text = "compare '/tmp/a b.png' with /tmp/c\\ d.JPG and \"/x/y.webp\", not /tmp/notes.txt"
    assert dropped_image_paths(text) == ["/tmp/a b.png", "/tmp/c d.JPG", "/x/y.webp"]
    assert dropped_image_paths("mail me@host/a.png or see @/abs/x.png") == []


def test_mentions_attach_images_or_say_why_not(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "shot.png").write_bytes(png_bytes())
    (ws / "broken.png").write_bytes(b"nope")
    outside = tmp_path / "dropped.png"
    outside.write_bytes(png_bytes(5, 5))
    found = resolve_mentions(
        f"see @shot.png and @broken.png and {outside}", root=ws, skill_ids=[], count=len
    )
    assert [i.path for i in found.images] == ["shot.png", str(outside)]
    assert found.images[0].block["type"] == "image_url"
    assert any("@broken.png not attached" in p for p in found.problems)
    refused = resolve_mentions(
        "see @shot.png", root=ws, skill_ids=[], count=len, images_allowed=False
    )
    assert refused.images == [] and "does not accept images" in refused.problems[0]


def test_vision_decision_setting_then_profile_then_name() -> None:
    assert model_accepts_images("local", None, "on")
    assert not model_accepts_images("gpt-4o", {"image_inputs": True}, "off")
    assert not model_accepts_images("gpt-4o", {"image_inputs": False}, "auto")
    assert model_accepts_images("gpt-4o-mini", None, "auto")
    assert model_accepts_images("qwen2.5-vl-7b", None, "auto")
    assert not model_accepts_images("qwen2.5-coder-1.5b", None, "auto")


def test_without_images_keeps_text_and_names_the_image() -> None:
    msg = HumanMessage(
        content=[
            {"type": "text", "text": "what is this"},
            {"type": "image_url", "image_url": {"url": "data:x"}},
        ],
        additional_kwargs={"agentgraph": {"images": ["shot.png"]}},
    )
    view = without_images([msg, AIMessage(content="ok")])
    assert view[0].content[1] == {  # type: ignore[index]
        "type": "text",
        "text": "[image shot.png omitted: the model in use does not accept images]",
    }
    assert msg.content[1]["type"] == "image_url"  # type: ignore[index]  # history untouched


def test_cli_sends_the_image_to_a_vision_model_and_refuses_for_a_text_model(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "shot.png").write_bytes(png_bytes())
    with fake_openai_server([reply_text("a red square"), reply_text("no image seen")]) as server:
        env = cli_env(tmp_path / "home", OPENAI_BASE_URL=server.url, AGENTGRAPH_MODEL="gpt-4o")
        res = run_cli(["run", "what is in @shot.png", "--json"], cwd=ws, env=env)
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout)["answer"] == "a red square"
        assert "attached image shot.png (3x2)" in res.stderr
        user = server.requests[0]["messages"][-1]
        assert [p["type"] for p in user["content"]] == ["text", "image_url"]
        assert user["content"][1]["image_url"]["url"].startswith("data:image/png;base64,")

        env["AGENTGRAPH_VISION"] = "off"
        res = run_cli(["run", "what is in @shot.png"], cwd=ws, env=env)
        assert res.returncode == 0, res.stderr
        assert "@shot.png not attached: the model does not accept images" in res.stderr
        assert isinstance(server.requests[1]["messages"][-1]["content"], str)
        assert server.statuses == [200, 200]
