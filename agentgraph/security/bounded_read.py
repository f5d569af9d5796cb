"""Read a whole file from outside, refusing one larger than a limit.

Shared by image attachments and ``@file`` mentions: both read a user-named file
whole, and both must refuse a huge one before reading it, with a one-line reason.
"""

from __future__ import annotations

from pathlib import Path


class BoundedReadError(Exception):
    """The file is too large or cannot be read; the message is one line for the user."""


def read_bytes_bounded(path: Path, max_bytes: int, what: str) -> bytes:
    """The bytes of ``path``, at most ``max_bytes`` of them.

    Args:
        path: The file.
        max_bytes: The largest size accepted, in bytes.
        what: What the files are, plural, for the message (``"images"``).

    Returns:
        The file's content.

    Raises:
        BoundedReadError: the file is larger than ``max_bytes`` or unreadable.
    """
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise BoundedReadError(f"{size:,} bytes; {what} are limited to {max_bytes:,}")
        return path.read_bytes()
    except OSError as exc:
        raise BoundedReadError(exc.strerror or str(exc)) from None
