"""run_bash: a shell command in the workspace, bounded in time, memory and reach.

Reach: the command sees only an allowlisted part of the agent's environment
(:func:`tool_environment`) and, on Linux with bubblewrap, runs in a sandbox
(:mod:`agentgraph.capabilities.tools.sandbox`): own PID namespace and /proc, writes only in the
workspace and a private /tmp, no network by default.

The command runs as ``bash -c`` in its own session (so it has no controlling
terminal and its whole process group can be killed), with stdin closed and
stdout+stderr merged into one pipe. The pipe is read incrementally into a
head+tail buffer of :data:`BASH_OUTPUT_MAX_BYTES`, so a command printing
gigabytes costs a constant amount of memory. A background grandchild that
keeps the pipe open cannot make the tool hang: after the shell exits the pipe
is drained for at most :data:`BASH_DRAIN_S`, then the group is killed.
"""

import codecs
import contextlib
import hashlib
import os
import re
import secrets
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from langchain_core.tools import BaseTool, tool

from agentgraph.capabilities.tools.base import ToolError
from agentgraph.capabilities.tools.git_guard import (
    GitGuard,
    GitGuardRefused,
    git_guard,
    open_folders,
)
from agentgraph.capabilities.tools.sandbox import (
    SANDBOX_CACHE_DIR,
    SANDBOX_TMP_DIR,
    SandboxPlan,
    bind_fd_supported,
    plan_sandbox,
    protected_paths,
    require_runnable,
    sandbox_args,
)
from agentgraph.capabilities.tools.workspace import workspace_from_runtime, workspace_root
from agentgraph.config import BASH_TIMEOUT_S_DEFAULT, Settings
from agentgraph.process import pid_alive
from agentgraph.runtime.runctx import AgentToolRuntime
from agentgraph.security.redaction import redact_token_formats

BASH_TIMEOUT_S = BASH_TIMEOUT_S_DEFAULT
BASH_TIMEOUT_MAX_S = 600
BASH_KILL_GRACE_S = 2.0
BASH_DRAIN_S = 1.0
BASH_POLL_INTERVAL_S = 0.05
BASH_OUTPUT_MAX_BYTES = 1024 * 1024
BASH_READ_CHUNK_BYTES = 64 * 1024
BASH_EXECUTABLE = "bash"
# Told after a sandboxed command's output that names the read-only .git: the error itself names
# a lock file or a path, not why it cannot be written nor who can write it.
GIT_READ_ONLY_NOTE = (
    "[the repository's .git is read-only in the sandbox: git commands that change it "
    "(add, commit, stash, checkout, branch) cannot run here; ask the user to run them]"
)
# Told after a sandboxed command's output that says a move or removal found a folder busy
# where the folders down to a repository or submodule are bound onto themselves.
GIT_PINNED_NOTE = (
    "[the sandbox keeps folders holding a git repository or submodule in place: moving "
    "or removing them cannot run here, and no other process is using them; ask the user "
    "to run it]"
)
_BUSY = "Device or resource busy"
# A line saying a write under .git failed, whichever comes first (git's "Unable to create
# '/ws/.git/index.lock': Read-only file system", Python's "[Errno 30] Read-only file
# system: '.git/config'"); ``.git`` as a path's part, not ``repo.git`` or ``.git-credentials``.
_GIT_READ_ONLY_RE = re.compile(
    r"(?m)^(?=[^\n]*Read-only file system)[^\n]*(?:^|[\s'\"/=:])\.git(?:[/'\"\s:]|$)"
)
# Git commands that fail on a read-only .git naming no path of it: ``git stash`` says
# nothing (exit 1), ``git notes`` only "unable to create temporary file".
_GIT_QUIET_RE = re.compile(
    r"(?:^|[\s;&|(])git\s+(?:-[Cc]\s+\S+\s+)*(?:"
    r"stash(?:\s+(?:push|save|pop|apply|drop|clear|branch)\b|(?=\s*(?:$|[;&)\n]|-)))"
    r"|notes\s+(?:add|append|copy|edit|merge|remove|prune)\b)"
)
UTF8_MAX_CONTINUATION_BYTES = 3
# Every command's processes inherit this variable, so the ones that left the process
# group (setsid, daemonizing tools) are still found in /proc and killed.
COMMAND_MARKER_ENV = "AGENTGRAPH_COMMAND_ID"
MARKER_RANDOM_BYTES = 8
HOME_SCOPE_HEX_DIGITS = 16
PROC_DIR = "/proc"

# The variables a command inherits from the agent's environment: what a shell and
# ordinary tools need to behave (locale, terminal, user, temp dir), nothing that
# carries a credential. More names: AGENTGRAPH_BASH_ENV_ALLOW.
ENV_ALLOWLIST = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TERM",
        "COLORTERM",
        "NO_COLOR",
        "TMPDIR",
        "TZ",
        "PWD",
        "EDITOR",
        "PAGER",
    }
)
ENV_ALLOWLIST_PREFIXES = ("LC_",)


def is_allowed_env_name(name: str, extra: Iterable[str] = ()) -> bool:
    """Whether a variable of the agent's environment is passed to commands.

    Args:
        name: The variable name (exact case).
        extra: More allowed names (``AGENTGRAPH_BASH_ENV_ALLOW``).

    Returns:
        True for :data:`ENV_ALLOWLIST`, ``LC_*`` and the extra names.
    """
    return name in ENV_ALLOWLIST or name.startswith(ENV_ALLOWLIST_PREFIXES) or name in extra


def tool_environment(env: Mapping[str, str], extra_allowed: Iterable[str] = ()) -> dict[str, str]:
    """The environment a command runs with: an allowlisted copy of ``env``.

    Anything not allowed is left out whatever its name: a credential never has to
    be recognised to be kept from the command. An allowlisted (not extra) variable
    whose value holds a credential format (a URL with a password…) is left out too.

    Args:
        env: The agent's environment; not modified.
        extra_allowed: Names the user allowed too (passed as they are).

    Returns:
        A new dict, with ``PATH`` always set.
    """
    extra = frozenset(extra_allowed)
    kept = {
        name: value
        for name, value in env.items()
        if name in extra or (is_allowed_env_name(name) and redact_token_formats(value) == value)
    }
    kept.setdefault("PATH", os.defpath)
    return kept


def minimal_environment(workspace: str) -> dict[str, str]:
    """The environment used when the CLI passes none: a PATH, HOME and a UTF-8 locale.

    Args:
        workspace: The workspace directory, used as HOME.

    Returns:
        A new environment dict.
    """
    return {"PATH": os.defpath, "HOME": workspace, "LANG": "C.UTF-8"}


class HeadTailBuffer:
    """Keeps the first and last bytes of a stream, counting what falls in between.

    Args:
        max_bytes: Total bytes kept: half for the head, the rest for the tail.
    """

    def __init__(self, max_bytes: int) -> None:
        self._head_cap = max_bytes // 2
        self._tail_cap = max_bytes - self._head_cap
        self._head = bytearray()
        self._tail = bytearray()
        self.total_bytes = 0

    def feed(self, data: bytes) -> None:
        """Append a chunk of the stream.

        Args:
            data: The next bytes read.
        """
        self.total_bytes += len(data)
        room = self._head_cap - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if data:
            self._tail += data
            # Trim lazily (at twice the cap) so trimming stays amortized O(1) per byte.
            if len(self._tail) > 2 * self._tail_cap:
                del self._tail[: len(self._tail) - self._tail_cap]

    def render(self) -> tuple[str, int]:
        """Decode what was kept.

        Returns:
            The text (UTF-8, undecodable bytes replaced; a
            ``…N bytes truncated…`` line marks a cut, made on character
            boundaries) and the number of bytes dropped.
        """
        tail = bytes(self._tail[-self._tail_cap :]) if self._tail_cap else b""
        dropped = self.total_bytes - len(self._head) - len(tail)
        if dropped == 0:
            return (bytes(self._head) + tail).decode("utf-8", errors="replace"), 0
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        head_text = decoder.decode(bytes(self._head), final=False)
        withheld = len(decoder.getstate()[0])
        skip = 0
        while skip < min(len(tail), UTF8_MAX_CONTINUATION_BYTES) and 0x80 <= tail[skip] <= 0xBF:
            skip += 1
        dropped += withheld + skip
        tail_text = tail[skip:].decode("utf-8", errors="replace")
        return f"{head_text}\n…{dropped} bytes truncated…\n{tail_text}", dropped


@dataclass(frozen=True)
class BashResult:
    """What a finished command produced.

    Attributes:
        output: Merged stdout+stderr, possibly cut in the middle.
        exit_code: The shell's exit status (negative: killed by that signal).
        timed_out: The command hit its timeout and its group was killed.
        timeout_s: The timeout that applied.
        dropped_bytes: Output bytes left out of ``output``.
    """

    output: str
    exit_code: int | None
    timed_out: bool
    timeout_s: float
    dropped_bytes: int


# Process groups of commands running right now (with their marker), so a cancelled
# run (Ctrl-C in the REPL) can stop them instead of waiting for their timeout.
_RUNNING_GROUPS: dict[int, str] = {}
_RUNNING_LOCK = threading.Lock()


def kill_running_commands() -> int:
    """SIGKILL every command group ``run_bash`` is running; returns how many."""
    with _RUNNING_LOCK:
        groups = list(_RUNNING_GROUPS.items())
    for pgid, marker in groups:
        _signal_group(pgid, signal.SIGKILL)
        kill_marked_processes(marker)
    return len(groups)


def _marked_processes() -> Iterator[tuple[int, str]]:
    """``(pid, marker)`` of this user's processes started by some ``run_bash``."""
    prefix = f"{COMMAND_MARKER_ENV}=".encode()
    try:
        entries = os.listdir(PROC_DIR)
    except OSError:
        return
    me = os.getpid()
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"{PROC_DIR}/{entry}/environ", "rb") as handle:
                environ = handle.read()
        except OSError:  # gone, or another user's process
            continue
        for item in environ.split(b"\x00"):
            if item.startswith(prefix):
                yield int(entry), item[len(prefix) :].decode("ascii", "replace")
                break


def home_scope(home: Path) -> str:
    """The tag that ties a command's marker to one ``AGENTGRAPH_HOME``.

    Args:
        home: The home whose sessions start the commands.

    Returns:
        Hex digits derived from the home's absolute path (no path is put into a
        command's environment).
    """
    # realpath: two spellings of one home are one scope; it never raises on a loop.
    absolute = os.path.realpath(home.expanduser())
    digest = hashlib.sha256(absolute.encode("utf-8", "surrogateescape"))
    return digest.hexdigest()[:HOME_SCOPE_HEX_DIGITS]


def kill_orphaned_commands(scope: str) -> int:
    """SIGKILL commands of one home left running by an agentgraph that no longer exists.

    A SIGKILLed CLI cannot stop the command it was running (it has its own process
    group, so the kill does not reach it); the next agentgraph start of the same home
    does. Other homes' commands are theirs to clean up: a start never reaches past its
    own home (a second installation, or a test's CLI beside another's).

    Args:
        scope: :func:`home_scope` of the starting agentgraph's home.

    Returns:
        How many processes were signalled.
    """
    killed = 0
    for pid, marker in _marked_processes():
        owner, _, rest = marker.partition("-")
        owner_scope, _, _ = rest.partition("-")
        if owner_scope != scope:
            continue
        if owner.isdigit() and int(owner) != os.getpid() and not pid_alive(int(owner)):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
    return killed


def kill_marked_processes(marker: str) -> int:
    """SIGKILL this user's processes whose environment carries ``marker`` (Linux /proc).

    Catches what a process-group kill misses: children that called ``setsid``.

    Args:
        marker: The value of :data:`COMMAND_MARKER_ENV` given to one command.

    Returns:
        How many processes were signalled (0 without /proc).
    """
    killed = 0
    for pid, found in _marked_processes():
        if found == marker:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
    return killed


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    # The group may be gone already; that is the goal, not an error.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _pump(
    selector: selectors.BaseSelector,
    fd: int,
    sink: HeadTailBuffer,
    deadline: float,
    stop: Callable[[], bool],
) -> bool:
    """Read the pipe until EOF (returns True), the deadline, or ``stop()`` (False)."""
    while not stop():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        if not selector.select(min(remaining, BASH_POLL_INTERVAL_S)):
            continue
        while True:
            try:
                data = os.read(fd, BASH_READ_CHUNK_BYTES)
            except BlockingIOError:
                break
            if not data:
                return True
            sink.feed(data)
    return False


def run_command(
    command: str,
    *,
    cwd: str,
    env: Mapping[str, str],
    timeout_s: float,
    max_output_bytes: int = BASH_OUTPUT_MAX_BYTES,
    sandbox: Sequence[str] = (),
    scope: str = "",
    pass_fds: Sequence[int] = (),
) -> BashResult:
    """Run ``bash -c command`` and collect its bounded output.

    Args:
        command: The shell command.
        cwd: Working directory.
        env: The complete environment of the command.
        timeout_s: Seconds before the process group is terminated.
        max_output_bytes: Output bytes kept (head and tail halves).
        sandbox: A launcher command line to run the shell in (the ``bwrap`` prefix
            from :func:`agentgraph.capabilities.tools.sandbox.sandbox_args`); empty: run directly.
            The launcher stays in the command's process group and takes its
            children down with it, so the group kill below works the same.
        scope: :func:`home_scope` of the session's home: a later start of that home
            stops the command if this process is killed before it can.
        pass_fds: Descriptors the launcher gets (the folders ``--bind-fd`` names), closed
            here once it started: it holds its own copies.

    Returns:
        The result; a non-zero exit or a timeout is data, not an exception.

    Raises:
        ToolError: The shell could not be started.
    """
    sink = HeadTailBuffer(max_output_bytes)
    # "<our pid>-<home scope>-<random>": a later agentgraph of the same home can tell a
    # command whose agentgraph was killed (SIGKILL leaves no chance to clean up) and stop it.
    marker = f"{os.getpid()}-{scope}-{secrets.token_hex(MARKER_RANDOM_BYTES)}"
    try:
        proc = subprocess.Popen(
            [*sandbox, BASH_EXECUTABLE, "-c", command],
            cwd=cwd,
            env={**env, COMMAND_MARKER_ENV: marker},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
            pass_fds=tuple(pass_fds),
        )
    except OSError as exc:
        launcher = sandbox[0] if sandbox else BASH_EXECUTABLE
        raise ToolError(f"could not start {launcher}: {exc.strerror or exc}") from exc
    finally:
        for passed in pass_fds:
            with contextlib.suppress(OSError):
                os.close(passed)
    pgid = proc.pid  # a new session makes the shell its group leader
    with _RUNNING_LOCK:
        _RUNNING_GROUPS[pgid] = marker
    assert proc.stdout is not None
    pipe = proc.stdout
    fd = pipe.fileno()
    os.set_blocking(fd, False)
    timed_out = False

    def exited() -> bool:
        return proc.poll() is not None

    try:
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            deadline = time.monotonic() + timeout_s
            eof = _pump(selector, fd, sink, deadline, exited)
            if eof and not exited():
                # The shell closed its output but is still running.
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            if not exited():
                timed_out = True
                _signal_group(pgid, signal.SIGTERM)
                grace_end = time.monotonic() + BASH_KILL_GRACE_S
                if eof:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(timeout=BASH_KILL_GRACE_S)
                else:
                    eof = _pump(selector, fd, sink, grace_end, exited)
                if not exited():
                    _signal_group(pgid, signal.SIGKILL)
                    proc.wait()
            if not eof:
                # Background children may still hold the pipe: take what they
                # write for a moment, then stop waiting for them.
                _pump(selector, fd, sink, time.monotonic() + BASH_DRAIN_S, lambda: False)
    finally:
        # Whatever is left of the group (background jobs, stragglers) goes too.
        _signal_group(pgid, signal.SIGKILL)
        kill_marked_processes(marker)  # and those that left the group with setsid
        with _RUNNING_LOCK:
            _RUNNING_GROUPS.pop(pgid, None)
        if proc.poll() is None:
            proc.wait()
        pipe.close()
    output, dropped = sink.render()
    return BashResult(
        output=output,
        exit_code=proc.returncode,
        timed_out=timed_out,
        timeout_s=timeout_s,
        dropped_bytes=dropped,
    )


# The status line :func:`format_bash_result` ends every answer with, on a line of its own.
_STATUS_LINE_RE = re.compile(
    r"(?:(?<=\n)|\A)\[(?:exit code (?P<code>-?\d+)[^\]\n]*|timed out after [^\]\n]*)\]\s*\Z"
)


@dataclass(frozen=True)
class BashStatus:
    """How a command ended, as the status line of its answer says.

    Attributes:
        exit_code: Its exit code (negative: killed by that signal); None when it
            timed out.
        start: Where the status line begins in the answer: the output is what comes
            before it.
    """

    exit_code: int | None
    start: int


def bash_status(answer: str) -> BashStatus | None:
    """The status line of a run_bash ``answer`` (:func:`format_bash_result`), or None
    when it has none (the tool failed before running, or the text is not its answer)."""
    found = _STATUS_LINE_RE.search(answer)
    if found is None:
        return None
    code = found.group("code")
    return BashStatus(None if code is None else int(code), found.start())


def git_read_only(command: str, result: BashResult) -> bool:
    """Whether a sandboxed ``command`` failed on the workspace's read-only ``.git``: its
    output says a write under ``.git`` failed, or it is a git command that fails there
    without naming it (``git stash``, ``git notes``).

    Args:
        command: The command line.
        result: How it ended.

    Returns:
        Whether to tell the model why (:data:`GIT_READ_ONLY_NOTE`).
    """
    if _GIT_READ_ONLY_RE.search(result.output):
        return True
    quiet = not result.output.strip() or "Read-only file system" in result.output
    failed = result.exit_code not in (0, None)
    return failed and quiet and _GIT_QUIET_RE.search(command) is not None


def format_bash_result(result: BashResult) -> str:
    """The tool's answer: the output, then a status line.

    Args:
        result: A finished command.

    Returns:
        Output followed by ``[exit code N]`` or
        ``[timed out after Ns; process group killed]``.
    """
    if result.timed_out:
        status = f"[timed out after {result.timeout_s:g}s; process group killed]"
    elif result.exit_code is not None and result.exit_code < 0:
        try:
            name = signal.Signals(-result.exit_code).name
        except ValueError:
            name = f"signal {-result.exit_code}"
        status = f"[exit code {result.exit_code} (killed by {name})]"
    else:
        status = f"[exit code {result.exit_code}]"
    output = result.output
    if output and not output.endswith("\n"):
        output += "\n"
    return f"{output}{status}"


@dataclass
class Launch:
    """How one command starts: the ``bwrap`` command line, the descriptors it names.

    Attributes:
        args: The launcher's arguments (empty: the shell runs directly).
        fds: Open folders the launcher binds (``--bind-fd``), closed by :meth:`close`.
        git: Whether the workspace's ``.git`` entries are bound read-only.
        pinned: Whether folders down to a ``.git`` are bound onto themselves.
    """

    args: list[str] = field(default_factory=list)
    fds: list[int] = field(default_factory=list)
    git: bool = False
    pinned: bool = False

    def take_fds(self) -> list[int]:
        """The descriptors, now the taker's to close."""
        fds, self.fds = self.fds, []
        return fds

    def close(self) -> None:
        """Close the descriptors not taken."""
        for fd in self.take_fds():
            with contextlib.suppress(OSError):
                os.close(fd)


def sandbox_launch(bwrap: str, workspace: str, *, network: bool, git: bool) -> Launch:
    """The sandbox a command starts in, with the workspace's ``.git`` entries kept as
    they are unless ``git`` is False (``AGENTGRAPH_BASH_GIT_WRITE=on``).

    The folders down to each ``.git`` are bound from descriptors opened without following
    a link (:func:`~agentgraph.capabilities.tools.git_guard.open_folders`): bound by path,
    a folder a concurrent command swapped for a link to a folder outside the workspace
    after the guard looked was bound writable there.

    Args:
        bwrap: The bwrap executable.
        workspace: The workspace (a real path).
        network: Keep the host's network.
        git: Keep the ``.git`` entries read-only.

    Returns:
        The launch: hand its descriptors to :func:`run_command` (:meth:`Launch.take_fds`)
        and :meth:`Launch.close` it.

    Raises:
        ToolError: The ``.git`` entries cannot be kept for this command: more than bwrap
            can bind, or the workspace or a folder in it cannot be searched now.
    """
    guard = GitGuard()
    try:
        if git:
            guard = git_guard(workspace)
            read_only = [*protected_paths(workspace), *guard.read_only]
        else:
            read_only = []
        pins = open_folders(workspace, guard.pinned)
    except (GitGuardRefused, OSError) as exc:
        raise ToolError(
            f"cannot keep the workspace's git repositories safe in the sandbox: {exc}; "
            "run it again, or let the user set AGENTGRAPH_BASH_GIT_WRITE=on"
        ) from None
    if bind_fd_supported(bwrap):
        args = sandbox_args(bwrap, workspace, network=network, pinned=pins, read_only=read_only)
        return Launch(args, [fd for fd, _ in pins], git=bool(read_only), pinned=bool(pins))
    # An older bwrap binds by path only: a folder swapped for a link in between is not
    # told from the folder it was.
    for fd, _ in pins:
        os.close(fd)
    paths = [path for _, path in pins]
    args = sandbox_args(bwrap, workspace, network=network, writable=paths, read_only=read_only)
    return Launch(args, [], git=bool(read_only), pinned=bool(pins))


def make_bash_tool(
    settings: Settings,
    base_env: Mapping[str, str] | None = None,
    sandbox: SandboxPlan | None = None,
) -> BaseTool:
    """Build the run_bash tool.

    Args:
        settings: Supplies the default timeout, the extra allowed variables and the
            sandbox settings.
        base_env: The agent's environment; commands get its allowlisted part
            (:func:`tool_environment`). None means :func:`minimal_environment`.
        sandbox: How commands run (see :func:`sandbox_plan_for`); None decides it
            from the settings.

    With ``settings.bash == "ask"`` the tools node asks the user before the tool runs
    (a LangGraph interrupt, see ``agentgraph/security/approvals.py``).

    Returns:
        The run_bash tool.
    """
    allowed_env = (
        None if base_env is None else tool_environment(base_env, settings.bash_env_allow_names)
    )
    plan = sandbox if sandbox is not None else sandbox_plan_for(settings, base_env)
    default_timeout_s = min(settings.bash_timeout_s, BASH_TIMEOUT_MAX_S)
    scope = home_scope(settings.home)
    protect_git = settings.bash_git_write != "on"

    @tool("run_bash", parse_docstring=True)
    def run_bash(command: str, runtime: AgentToolRuntime, timeout_s: int | None = None) -> str:
        """Run a bash command in the workspace: stdout+stderr, then the exit code.

        No stdin; background processes are killed at the end.

        Args:
            command: The command line.
            timeout_s: Seconds before it is killed (max 600).
        """
        workspace = workspace_root(workspace_from_runtime(runtime))
        if not command.strip():
            raise ToolError("command is empty")
        if "\x00" in command:
            raise ToolError("command contains a NUL byte")
        timeout = default_timeout_s if timeout_s is None else timeout_s
        if not 1 <= timeout <= BASH_TIMEOUT_MAX_S:
            raise ToolError(f"timeout_s must be between 1 and {BASH_TIMEOUT_MAX_S}, got {timeout}")
        require_runnable(plan)  # AGENTGRAPH_SANDBOX=on without a sandbox: refused
        env = dict(allowed_env) if allowed_env is not None else minimal_environment(workspace)
        launch = Launch()
        if plan.bwrap is not None:
            launch = sandbox_launch(plan.bwrap, workspace, network=plan.network, git=protect_git)
            env["TMPDIR"] = SANDBOX_TMP_DIR  # the only writable temp dir in there
            env["XDG_CACHE_HOME"] = SANDBOX_CACHE_DIR  # ~/.cache is read-only in there
        try:
            result = run_command(
                command,
                cwd=workspace,
                env=env,
                timeout_s=timeout,
                sandbox=launch.args,
                scope=scope,
                pass_fds=launch.take_fds(),
            )
        finally:
            launch.close()
        notes = [GIT_READ_ONLY_NOTE] if launch.git and git_read_only(command, result) else []
        if launch.pinned and _BUSY in result.output:
            notes.append(GIT_PINNED_NOTE)
        if notes:
            output = result.output if result.output.endswith("\n") else result.output + "\n"
            result = replace(result, output=output + "".join(f"{n}\n" for n in notes))
        return format_bash_result(result)

    run_bash.description += f" Timeout {default_timeout_s}s."
    if plan.bwrap is not None:
        run_bash.description += " Sandboxed: only the workspace and a private /tmp are writable" + (
            "." if plan.network else "; no network."
        )
    return run_bash


def sandbox_plan_for(settings: Settings, base_env: Mapping[str, str] | None) -> SandboxPlan:
    """The sandbox plan for ``settings`` (probing ``bwrap`` once per process).

    Args:
        settings: ``AGENTGRAPH_SANDBOX`` and ``AGENTGRAPH_BASH_NETWORK``.
        base_env: The agent's environment, whose PATH is searched for ``bwrap``.

    Returns:
        The plan.
    """
    return plan_sandbox(settings.sandbox, network=settings.bash_network == "on", env=base_env or {})
