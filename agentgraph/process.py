"""Process helpers shared by the thread leases and the shell tool.

A pid alone does not say a process is alive: a killed process stays in the table as a
zombie (state ``Z``) until its parent reaps it, which container inits may do late, and
a reaped pid can be given to an unrelated program. On Linux ``/proc/<pid>/stat`` tells
both apart: its state field and its start time (field 22, clock ticks since boot).
"""

from __future__ import annotations

import functools
import os
import socket

PROC = "/proc"
# /proc/<pid>/stat fields after "pid (comm) ": state is field 3, starttime field 22.
_STAT_STATE_INDEX = 0
_STAT_STARTTIME_INDEX = 19
# States of a process that has exited (zombie, dead): it holds nothing any more.
_EXITED_STATES = frozenset({"Z", "X", "x"})


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """``(state, start time)`` from ``/proc/<pid>/stat``, or None when unreadable."""
    try:
        with open(f"{PROC}/{pid}/stat", "rb") as fh:
            raw = fh.read().decode("ascii", "replace")
    except OSError:
        return None
    # comm (field 2) may hold spaces and parentheses: the fields follow the last ")".
    fields = raw[raw.rfind(")") + 2 :].split()
    try:
        return fields[_STAT_STATE_INDEX], int(fields[_STAT_STARTTIME_INDEX])
    except (IndexError, ValueError):
        return None


def _kill_probe(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def process_start_time(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot (Linux), else None."""
    stat = _proc_stat(pid)
    return stat[1] if stat is not None else None


def pid_alive(pid: int, start_time: int | None = None) -> bool:
    """Whether ``pid`` is a running process (and the same one, given its start time).

    A zombie (killed, not yet reaped) is not alive. When ``start_time`` is given, a
    process with that pid but another start time (the pid was reused) is not alive.
    Without ``/proc`` (or with it hiding other users' processes) the answer falls back
    to ``kill(pid, 0)``, where another user's process counts as alive.
    """
    if pid <= 0:
        return False
    stat = _proc_stat(pid)
    if stat is None:
        return _kill_probe(pid)
    state, started = stat
    if state in _EXITED_STATES:
        return False
    return start_time is None or started == start_time


@functools.cache
def pid_space() -> str:
    """Identifies where this process's pids mean something: boot id + pid namespace.

    Two processes with the same value can check each other's pids; others (another
    container, another machine sharing the home) cannot.
    """
    try:
        with open(f"{PROC}/sys/kernel/random/boot_id", encoding="ascii") as fh:
            boot = fh.read().strip()
        return f"{boot}/{os.readlink(f'{PROC}/self/ns/pid')}"
    except OSError:
        return f"host:{socket.gethostname()}"
