"""The folder a shell command moves to before its work: ``cd src && sed -i … app.py``.

Models change directory first as often as they name paths from the workspace's root
(``cd /abs/workspace && cat src/app.py``, ``cd logs && cat part_017.txt``). Read as it
stands such a command is a list, and each parser of a command's files (read, written,
edited in place, removed: :mod:`agentgraph.context.shell_reads`,
:mod:`agentgraph.context.shell_writes`) took it for an opaque command: the progress
ledger lost its reads and changes, a compaction showed none of its files again, and a
summary that left them unsaid was not asked about them. :func:`cd_prefix` splits off the
leading ``cd FOLDER &&`` (repeated: ``cd a && cd b && …``), the parsers read the rest, and
:func:`under` names each path they find from where the command started.

Only ``&&`` counts: after ``;`` or a line break the rest runs even when ``cd`` failed, in
the folder the command started in, so which file it named is not certain. A folder the
shell would expand (``~``, ``$HOME``, a glob), that is no folder's name (``cd -``, an
option) or that goes up with ``..`` leaves the command as it is; so does a path the rest
names with ``..`` (:func:`under` names none): ``cd`` follows a link by its name, and a
``..`` after it leaves the folder the link points to, not the one it sits in.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable

__all__ = ["cd_prefix", "under", "under_each"]

# The parent folder's name in a path.
_UP = ".."

# ``cd FOLDER &&`` at the start of a command: the folder bare, or in quotes that hold
# nothing the shell would expand; blanks around.
_CD_RE = re.compile(
    r"[ \t]*cd[ \t]+(?:'(?P<single>[^'\n]+)'|\"(?P<double>[^\"$`\\!\n]+)\""
    r"|(?P<bare>[^\s'\"$`\\;&|<>()*?\[\]{}~#!=]+))[ \t]*&&[ \t]*"
)


def cd_prefix(command: str) -> tuple[str, str]:
    """The folder ``command``'s leading ``cd FOLDER &&`` moves to, and the rest of it.

    Args:
        command: A run_bash command line.

    Returns:
        ``(folder, rest)``: the folder normalized (absolute, or relative to where the
        command starts), ``""`` with ``command`` unchanged when it starts with no such
        ``cd``.
    """
    targets: list[str] = []
    at = 0
    while (found := _CD_RE.match(command, at)) is not None:
        target = found["single"] or found["double"] or found["bare"] or ""
        if target.startswith("-") or _UP in target.split("/"):
            break  # ``cd -`` (the previous folder), an option, or up through a link
        targets.append(target)
        at = found.end()
    if not targets:
        return "", command
    return posixpath.normpath(posixpath.join(*targets)), command[at:]


def under(folder: str, path: str) -> str | None:
    """``path``, which a command run in ``folder`` named, as named from where the
    command started (normalized); ``path`` itself when ``folder`` is ``""``; None when
    it goes up with ``..`` from ``folder`` (through a link, not certain)."""
    if not folder:
        return path
    if _UP in path.split("/"):
        return None
    return posixpath.normpath(posixpath.join(folder, path))


def under_each(folder: str, paths: Iterable[str]) -> tuple[str, ...]:
    """Each of ``paths`` :func:`under` ``folder``, once, in order; those it names none
    for left out."""
    return tuple(dict.fromkeys(p for p in (under(folder, path) for path in paths) if p))
