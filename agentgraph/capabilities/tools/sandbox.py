"""The shell sandbox: ``run_bash`` commands inside bubblewrap on Linux.

A command the model writes runs with the agent's rights. Without a sandbox it can
read the agent's own environment (``cat /proc/$PPID/environ``: every API key the
agent was started with), write anywhere the user can, and reach any host. Inside
``bwrap`` (Debian package ``bubblewrap``) it gets:

- its own PID namespace and ``/proc``: the agent and every other process of the
  user are invisible, so their environments are out of reach;
- the whole filesystem read-only, except the workspace (read-write) and a private
  ``/tmp`` (a fresh tmpfs per command); the workspace's ``.git`` stays read-only
  (:func:`protected_paths`), and so does each ``.git`` inside it — a submodule's, a
  repository's of its own — in folders that cannot be moved
  (:mod:`agentgraph.capabilities.tools.git_guard`), unless the user's
  ``AGENTGRAPH_BASH_GIT_WRITE=on`` says otherwise;
- no network (its own network namespace with only a loopback of its own) unless
  ``AGENTGRAPH_BASH_NETWORK=on``;
- its own IPC and UTS namespaces, and ``--die-with-parent``: if the agent dies
  (even SIGKILL), the kernel kills every process of the sandbox.

``AGENTGRAPH_SANDBOX`` chooses: ``auto`` (default) uses the sandbox when it can
start and otherwise fails closed: each command then needs the user's approval (the
REPL asks; ``agentgraph run`` and subagents, which cannot ask, refuse it); ``on``
refuses to run commands without it; ``off`` never uses it (the user's own choice: a
workspace's files cannot set it, see :mod:`agentgraph.security.settings_sources`). Whether
it can start is probed once per process by running ``true`` in it (no ``bwrap``, or
user namespaces disabled, are the usual reasons it cannot).
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from agentgraph.capabilities.tools.base import ToolError

BWRAP_EXECUTABLE = "bwrap"
SANDBOX_PROBE_TIMEOUT_S = 10.0
SANDBOX_PROBE_ERROR_MAX_CHARS = 300
SANDBOX_TMP_DIR = "/tmp"
# The home directory is read-only in the sandbox, so tools that keep a cache there
# (uv, pip, most XDG programs) get one in the private /tmp instead: writable, and gone
# after the command, so a command cannot poison a cache that later runs outside trust.
SANDBOX_CACHE_DIR = f"{SANDBOX_TMP_DIR}/.cache"

SandboxMode = Literal["auto", "on", "off"]

# Entries of the workspace that stay read-only inside it. Git runs programs its own files
# name — ``core.fsmonitor`` or a filter in ``.git/config``, a hook, the config of a
# ``commondir``, a ``.git`` file naming another git dir — with the rights of whoever runs
# git next: the user in their own shell, or the agent outside the sandbox (a subagent's
# snapshot, a commit). A command that could write them would leave such a program behind.
PROTECTED_NAMES = (".git",)


@dataclass(frozen=True)
class SandboxPlan:
    """How commands will run, decided once per tool.

    Attributes:
        bwrap: Path of the ``bwrap`` executable, or None to run unsandboxed.
        network: Whether sandboxed commands keep the network.
        notice: A one-line message for the user (why there is no sandbox), or None.
        refusal: Set when ``AGENTGRAPH_SANDBOX=on`` and the sandbox cannot start:
            every command is refused with this message.
        approval: Set when ``AGENTGRAPH_SANDBOX=auto`` and the sandbox cannot start:
            why each command needs the user's approval before it runs unsandboxed.
    """

    bwrap: str | None
    network: bool
    notice: str | None = None
    refusal: str | None = None
    approval: str | None = None


def protected_paths(workspace: str) -> list[str]:
    """The entries :data:`PROTECTED_NAMES` names in ``workspace`` as they are now: a
    folder or a file, not a link (a bind follows it).

    Args:
        workspace: The writable workspace.

    Returns:
        Their paths, to bind read-only over the workspace.

    Raises:
        OSError: The workspace cannot be searched now (``PermissionError``).
    """
    found: list[str] = []
    for path in (os.path.join(workspace, name) for name in PROTECTED_NAMES):
        try:  # a workspace that cannot be searched raises: nothing here is to be missed
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            continue
        if not stat.S_ISLNK(mode):
            found.append(path)
    return found


def sandbox_args(
    bwrap: str,
    workspace: str,
    *,
    network: bool,
    writable: Sequence[str] = (),
    pinned: Sequence[tuple[int, str]] = (),
    read_only: Sequence[str] = (),
) -> list[str]:
    """The ``bwrap`` command line that runs a program confined to ``workspace``.

    Args:
        bwrap: The bwrap executable.
        workspace: The directory the command may write (and its working directory).
        network: Keep the host's network (``--share-net``).
        writable: More directories bound read-write (after the workspace).
        pinned: Folders of the workspace, each an open descriptor and its path, bound
            read-write onto themselves (``--bind-fd``, :func:`bind_fd_supported`): a
            command can then neither move nor remove them
            (:func:`~agentgraph.capabilities.tools.bash.sandbox_launch`).
        read_only: Paths inside those bound read-only over them (:func:`protected_paths`):
            a mount point cannot be renamed or removed either.

    Returns:
        The argument list; append the program and its arguments.
    """
    args = [
        bwrap,
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        SANDBOX_TMP_DIR,
        "--bind",
        workspace,
        workspace,
    ]
    for path in writable:
        args += ["--bind", path, path]
    for fd, path in pinned:
        args += ["--bind-fd", str(fd), path]
    for path in read_only:
        args += ["--ro-bind", path, path]
    args += ["--chdir", workspace, "--unshare-all", "--die-with-parent"]
    if network:
        args.append("--share-net")
    args.append("--")
    return args


@functools.cache
def bind_fd_supported(bwrap: str) -> bool:
    """Whether ``bwrap`` binds an open descriptor (``--bind-fd``: bubblewrap 0.10, or a
    distribution's backport), as its ``--help`` lists. Cached per process.

    Args:
        bwrap: The bwrap executable.

    Returns:
        Whether it does.
    """
    try:
        done = subprocess.run(
            [bwrap, "--help"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=SANDBOX_PROBE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return b"--bind-fd" in done.stdout + done.stderr


@functools.cache
def probe_sandbox(bwrap: str, network: bool) -> str | None:
    """Start the sandbox once with ``true``; the reason it cannot start, or None.

    Cached per process: the answer does not change while the agent runs.

    Args:
        bwrap: The bwrap executable.
        network: Probe with the network kept (``--share-net``) or not.

    Returns:
        None when the sandbox works, else a short reason.
    """
    args = [*sandbox_args(bwrap, SANDBOX_TMP_DIR, network=network), "true"]
    try:
        done = subprocess.run(
            args,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=SANDBOX_PROBE_TIMEOUT_S,
            env={"PATH": os.defpath},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{bwrap} could not run: {exc}"
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip().splitlines()
        reason = detail[-1] if detail else f"exit code {done.returncode}"
        return f"{BWRAP_EXECUTABLE} failed: {reason[:SANDBOX_PROBE_ERROR_MAX_CHARS]}"
    return None


def plan_sandbox(mode: SandboxMode, *, network: bool, env: Mapping[str, str]) -> SandboxPlan:
    """Decide whether ``run_bash`` commands run in the sandbox.

    Args:
        mode: ``AGENTGRAPH_SANDBOX``: ``auto``, ``on`` or ``off``.
        network: ``AGENTGRAPH_BASH_NETWORK=on``.
        env: The environment whose ``PATH`` is searched for ``bwrap``.

    Returns:
        The plan: sandboxed, unsandboxed (mode ``off``), unsandboxed with approval of
        each command (mode ``auto``), or refused (mode ``on``).
    """
    if mode == "off":
        return SandboxPlan(bwrap=None, network=True)
    found = shutil.which(BWRAP_EXECUTABLE, path=env.get("PATH") or os.defpath)
    if not sys.platform.startswith("linux"):
        reason = f"the shell sandbox needs Linux (this is {sys.platform})"
    elif found is None:
        reason = f"{BWRAP_EXECUTABLE} is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    else:
        reason = probe_sandbox(found, network) or ""
        if not reason:
            return SandboxPlan(bwrap=found, network=network)
    if mode == "on":
        return SandboxPlan(
            bwrap=None,
            network=True,
            refusal=f"the shell sandbox is required (AGENTGRAPH_SANDBOX=on) but cannot "
            f"start: {reason}",
        )
    return SandboxPlan(
        bwrap=None,
        network=True,
        notice=f"run_bash has no sandbox ({reason}): each command asks for your approval, "
        "and `agentgraph run` refuses them (AGENTGRAPH_SANDBOX=off in your environment "
        "runs them unsandboxed)",
        approval=reason,
    )


def require_runnable(plan: SandboxPlan) -> None:
    """Raise the refusal of a plan that must not run commands.

    Args:
        plan: The plan from :func:`plan_sandbox`.

    Raises:
        ToolError: ``AGENTGRAPH_SANDBOX=on`` and the sandbox cannot start.
    """
    if plan.refusal is not None:
        raise ToolError(plan.refusal)
