"""The submodule paths a git index holds, read from the file without running git.

Git run on a repository runs what its config names, and listing an index with ``git
ls-files`` is no exception: in a repository a sandboxed command made (a sparse index
missing a tree, a promisor remote whose ``uploadpack`` is a program of its own), git
fetched the missing tree and ran that program in the agent's own process, outside the
sandbox. So :mod:`~agentgraph.capabilities.tools.git_guard` reads the index itself: the
format of ``gitformat-index(5)``, versions 2 to 4, with SHA-1 or SHA-256 object names,
and a split index's shared part beside it (``sharedindex.<hash>``), whose submodules
are counted too (one the split part deleted is guarded once more, never one less).
"""

from __future__ import annotations

import struct
from pathlib import Path

from agentgraph.capabilities.tools.workspace import read_regular

__all__ = ["INDEX_MAX_BYTES", "INDEX_NAME_MAX_BYTES", "index_gitlinks"]

# Indexes read at most (bytes): one of a million files is about 100 MB.
INDEX_MAX_BYTES = 256 * 1024 * 1024
# A path longer is no index git wrote (bytes): a version 4 name grown entry by entry, or a
# long varint, would otherwise cost time growing with the square of the file's size.
INDEX_NAME_MAX_BYTES = 64 * 1024
_VARINT_MAX_BYTES = 10  # a 64-bit value

_SIGNATURE = b"DIRC"
_HEADER = struct.Struct(">4sLL")
_MODE_OFFSET = 24  # ctime, mtime (8 bytes each), dev, ino: then the mode
_STAT_BYTES = 40
_GITLINK = 0o160000
_EXTENDED_FLAG = 0x4000
_NAME_MASK = 0x0FFF
_HASH_SIZES = (20, 32)  # SHA-1, SHA-256: the index does not say which
_LINK = b"link"


def index_gitlinks(gitdir: str) -> tuple[str, ...]:
    """The paths of the submodules (mode 160000) the index of ``gitdir`` holds.

    Args:
        gitdir: A git dir.

    Returns:
        Their paths (relative to the work tree, ``/``-separated); empty where there is
        no index, or one that is no regular file, is too big, or does not parse.
    """
    data = read_regular(Path(gitdir) / "index", INDEX_MAX_BYTES)
    if data is None:
        return ()
    for hash_size in _HASH_SIZES:
        parsed = _parse(data, hash_size)
        if parsed is None:
            continue
        links, shared = parsed
        if shared is not None:
            base = read_regular(Path(gitdir) / f"sharedindex.{shared}", INDEX_MAX_BYTES)
            base_parsed = _parse(base, hash_size) if base is not None else None
            if base_parsed is not None:
                links = links + base_parsed[0]
        return tuple(dict.fromkeys(links))
    return ()


def _parse(data: bytes, hash_size: int) -> tuple[list[str], str | None] | None:
    """The submodule paths of an index and the hash naming its shared part (a split
    index), or None where ``data`` is not an index with ``hash_size``-byte names."""
    if len(data) < _HEADER.size + hash_size:
        return None
    signature, version, count = _HEADER.unpack_from(data)
    if signature != _SIGNATURE or version not in (2, 3, 4):
        return None
    end = len(data) - hash_size  # the checksum closes the file
    fixed = _STAT_BYTES + hash_size + 2
    offset = _HEADER.size
    links: list[str] = []
    name = b""
    try:
        for _ in range(count):
            entry = offset
            (mode,) = struct.unpack_from(">L", data, entry + _MODE_OFFSET)
            (flags,) = struct.unpack_from(">H", data, entry + fixed - 2)
            offset = entry + fixed
            if flags & _EXTENDED_FLAG:
                if version < 3:
                    return None
                offset += 2
            if version == 4:
                strip, offset = _varint(data, offset)
                if strip > len(name):
                    return None
                stop = data.find(b"\0", offset, min(end, offset + INDEX_NAME_MAX_BYTES))
                if stop < 0 or len(name) - strip + stop - offset > INDEX_NAME_MAX_BYTES:
                    return None
                name = name[: len(name) - strip] + data[offset:stop]
                offset = stop + 1
            else:
                length = flags & _NAME_MASK
                if length < _NAME_MASK:  # the length field holds it: no search
                    stop = offset + length
                    if stop >= end or data[stop] != 0:
                        return None
                else:
                    stop = data.find(b"\0", offset, min(end, offset + INDEX_NAME_MAX_BYTES))
                    if stop < 0:
                        return None
                if mode == _GITLINK:
                    name = data[offset:stop]
                offset = entry + ((stop - entry) // 8 + 1) * 8  # NUL-padded to 8 bytes
            if offset > end:
                return None
            if mode == _GITLINK:
                if not name or b"\0" in name:  # no path git would write
                    return None
                links.append(name.decode("utf-8", "surrogateescape"))
    except (struct.error, ValueError, IndexError):
        return None
    shared: str | None = None
    while offset < end:  # extensions: a signature, a size, the data
        if offset + 8 > end:
            return None
        signature = data[offset : offset + 4]
        (size,) = struct.unpack_from(">L", data, offset + 4)
        if signature == _LINK and size >= hash_size:
            named = data[offset + 8 : offset + 8 + hash_size]
            shared = named.hex() if any(named) else None
        offset += 8 + size
    if offset != end:
        return None
    return links, shared


def _varint(data: bytes, offset: int) -> tuple[int, int]:
    """Git's offset varint (``decode_varint``): the value and the offset after it."""
    start = offset
    byte = data[offset]
    offset += 1
    value = byte & 0x7F
    while byte & 0x80:
        if offset - start >= _VARINT_MAX_BYTES:
            raise ValueError("varint too long")
        byte = data[offset]
        offset += 1
        value = ((value + 1) << 7) | (byte & 0x7F)
    return value, offset
