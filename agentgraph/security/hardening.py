"""Keep the agent's own process out of reach of the commands it runs.

Without the bubblewrap sandbox a command runs as the agent's user and could read the
agent's environment (``/proc/$PPID/environ``: the API key it was started with) or its
memory, since the kernel lets a process inspect another of the same user. Marking the
agent not *dumpable* (``prctl(PR_SET_DUMPABLE, 0)``, as ssh-agent and gpg-agent do)
restricts that to processes holding ``CAP_SYS_PTRACE``; a command gets a normal,
dumpable process again when it is exec'd. Root with ``CAP_SYS_PTRACE`` (a plain root
shell, not a default container) is not stopped: see docs/security.md.
"""

from __future__ import annotations

import sys

# <linux/prctl.h>
PR_SET_DUMPABLE = 4
PR_GET_DUMPABLE = 3


def _libc() -> object | None:
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def forbid_inspection() -> bool:
    """Mark this process not dumpable (Linux); a no-op elsewhere.

    Also turns off core dumps of the agent, which would hold the same secrets, and
    keeps debuggers (``py-spy``, ``gdb -p``) out unless run as root.

    Returns:
        Whether the process is now not dumpable.
    """
    libc = _libc()
    if libc is None:
        return False
    try:
        return int(libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0  # type: ignore[attr-defined]
    except AttributeError:  # a libc without prctl
        return False


def is_dumpable() -> bool | None:
    """Whether this process may be inspected by others of its user; None off Linux."""
    libc = _libc()
    if libc is None:
        return None
    try:
        return int(libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0)) == 1  # type: ignore[attr-defined]
    except AttributeError:
        return None
