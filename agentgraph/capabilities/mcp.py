"""MCP servers as tools, through ``langchain-mcp-adapters``.

Configuration uses the ``mcpServers`` schema of Claude Code's ``.mcp.json``, read from
``$AGENTGRAPH_HOME/mcp.json`` and then the workspace's ``.agentgraph/mcp.json`` (a server
named in both takes the workspace's entry)::

    {"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "some-server"], "env": {"KEY": "${KEY}"}},
        "docs":  {"type": "http", "url": "http://127.0.0.1:8000/mcp", "headers": {}}
    }}

Each server is connected once per process on a background event loop and its session is
kept open, so a stdio server is not restarted per call. Servers connect in the background:
:meth:`McpManager.start` returns at once, the REPL's prompt does not wait for them, and
the agent adds a server's tools between turns (see ``Agent.sync_mcp_tools``). Tools are exposed as
``mcp__<server>__<tool>`` (Claude Code's naming: no clash with built-in tools). A server
that fails — bad config, unknown command, hang at start, hostile schema — is one status
line in ``/mcp`` and a notice; the session goes on without it.

Why not the adapters' tools as they are: they are async-only and open a new session per
call unless a session is held; agentgraph's tools node runs tools synchronously in worker
threads. :class:`McpManager` holds the sessions on one loop thread and gives each tool a
synchronous entry point with a time limit.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import hashlib
import json
import os
import re
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from langchain_core.tools import BaseTool, StructuredTool

from agentgraph.capabilities.tools.spec import DECLARED_READ_ONLY_KEY
from agentgraph.config import MCP_START_TIMEOUT_S_DEFAULT, MCP_TOOL_TIMEOUT_S_DEFAULT
from agentgraph.security.allowed_files import allow, is_allowed
from agentgraph.security.redaction import (
    Redactor,
    is_secret_env_name,
    redact_in_logs,
    secret_env_values,
    stop_redacting_in_logs,
)

MCP_CONFIG_NAME = "mcp.json"
# sha256 of each workspace config the user allowed to start, under AGENTGRAPH_HOME.
MCP_TRUST_FILE = "mcp-trusted.json"
# A server that has not answered initialize + tools/list by then is reported as hung
# (AGENTGRAPH_MCP_START_TIMEOUT_S).
MCP_START_TIMEOUT_S = MCP_START_TIMEOUT_S_DEFAULT
# A turn that starts while servers are still connecting waits this long for them before
# its first model request, then goes on without them (they join a later turn).
MCP_TURN_WAIT_S = 3.0
# Waiting for every server (agentgraph run) is bounded by the per-server start limit plus
# this margin for the loop thread's own work.
MCP_WAIT_SLACK_S = 5.0
# How often a wait for servers checks for Ctrl-C.
MCP_WAIT_POLL_S = 0.1
# close(): how long connected sessions get to end cleanly before they are cancelled.
MCP_CLOSE_GRACE_S = 5.0
# One tool call (AGENTGRAPH_MCP_TOOL_TIMEOUT_S); the model gets an error naming the limit
# past it and the run goes on.
MCP_TOOL_TIMEOUT_S = MCP_TOOL_TIMEOUT_S_DEFAULT
# A result larger than this is cut before it reaches the truncation layer (which then
# keeps head+tail and an artifact): a server can send anything.
MCP_RESULT_MAX_CHARS = 2_000_000
# Schemas or descriptions past these sizes are hostile or broken: the tool is skipped.
MCP_SCHEMA_MAX_CHARS = 50_000
MCP_DESCRIPTION_MAX_CHARS = 4_000
MCP_TOOLS_PER_SERVER_MAX = 100
# OpenAI's limit for function names.
TOOL_NAME_MAX_CHARS = 64
# A name cut to fit ends with "_" and this many hex digits of a hash of the server's and
# the tool's own names: two tools whose names share a long prefix stay two names, and the
# name is the same in every process whatever order the servers start in.
TOOL_NAME_HASH_CHARS = 8
# A stdio server's stderr is passed on line by line (secrets redacted); a longer line is
# passed on in pieces of this many bytes.
MCP_STDERR_LINE_MAX_BYTES = 64 * 1024

# The agent's stderr, written to as the server did before (not through sys.stderr, which
# the terminal UI may have replaced).
_STDERR_FD = 2
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")


class McpConfigError(ValueError):
    """An MCP configuration file or entry that cannot be used."""


@dataclass
class ServerStatus:
    """What ``/mcp`` shows for one server."""

    name: str
    source: str
    transport: str
    state: str = "connecting"  # connecting | connected | failed
    error: str | None = None
    tools: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    # Why a skipped tool was skipped, when not for its schema.
    skip_reasons: dict[str, str] = field(default_factory=dict)
    # time.monotonic() when connecting began (/mcp shows how long it has been).
    since: float = field(default_factory=time.monotonic)


# (variable name, value) of each ``${VAR}`` a config expanded from the environment.
Expanded = list[tuple[str, str]]


def _expand(value: str, env: Mapping[str, str], expanded: Expanded | None = None) -> str:
    """``${VAR}`` and ``${VAR:-default}`` from ``env`` (Claude Code's expansion).

    Each value taken from ``env`` is added to ``expanded``: it may be a secret, and it is
    redacted wherever MCP text is shown.
    """

    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in env:
            if expanded is not None and env[name]:
                expanded.append((name, env[name]))
            return env[name]
        return match.group(2) or ""

    return _ENV_REF.sub(sub, value)


def _str_map(
    raw: Any, what: str, env: Mapping[str, str], expanded: Expanded | None = None
) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(isinstance(k, str) for k in raw):
        raise McpConfigError(f"{what} must be an object of strings")
    return {k: _expand(str(v), env, expanded) for k, v in raw.items()}


def connection_for(
    name: str,
    entry: Any,
    *,
    env: Mapping[str, str],
    base_env: Mapping[str, str],
    cwd: Path,
    expanded: Expanded | None = None,
) -> dict[str, Any]:
    """The adapters' connection dict for one ``mcpServers`` entry.

    Args:
        name: Server name (for messages).
        entry: The entry as parsed from JSON.
        env: Variables ``${VAR}`` references may read (the agent's environment).
        base_env: Environment a stdio server starts with (secrets already removed); the
            entry's own ``env`` is added on top.
        cwd: Folder a stdio server starts in (the workspace).
        expanded: Receives ``(name, value)`` of every variable the entry expanded.

    Raises:
        McpConfigError: the entry is not a usable server definition.
    """
    if not isinstance(entry, dict):
        raise McpConfigError(f"server {name!r}: entry must be an object")
    kind = str(entry.get("type") or entry.get("transport") or "").lower()
    if "url" in entry or kind in ("http", "streamable-http", "streamable_http", "sse"):
        url = entry.get("url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise McpConfigError(f"server {name!r}: url must be an http(s) URL")
        transport = "sse" if kind == "sse" else "streamable_http"
        return {
            "transport": transport,
            "url": _expand(url, env, expanded),
            "headers": _str_map(entry.get("headers"), f"server {name!r}: headers", env, expanded),
        }
    command = entry.get("command")
    if not isinstance(command, str) or not command.strip():
        raise McpConfigError(f"server {name!r}: needs a command or a url")
    args = entry.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, (str, int, float)) for a in args):
        raise McpConfigError(f"server {name!r}: args must be a list of strings")
    own_env = _str_map(entry.get("env"), f"server {name!r}: env", env, expanded)
    server_env = {**base_env, **own_env}
    return {
        "transport": "stdio",
        "command": _expand(command, env, expanded),
        "args": [_expand(str(a), env, expanded) for a in args],
        "env": server_env,
        "cwd": str(cwd),
    }


def config_paths(workspace: Path, home: Path) -> list[Path]:
    """The config files read, general first."""
    return [home / MCP_CONFIG_NAME, workspace_config(workspace)]


def workspace_config(workspace: Path) -> Path:
    """The workspace's MCP config file (it may not exist)."""
    return workspace / ".agentgraph" / MCP_CONFIG_NAME


def is_trusted(workspace: Path, home: Path) -> bool:
    """Whether the workspace's MCP config, as it is now, was allowed by the user.

    A repository can ship ``.agentgraph/mcp.json``: starting its servers runs its
    commands, so they start only once the user has allowed that exact file content
    (see :mod:`agentgraph.security.allowed_files`).
    """
    path = workspace_config(workspace)
    return is_allowed(path, home / MCP_TRUST_FILE, str(path))


def trust(workspace: Path, home: Path) -> None:
    """Record the workspace's MCP config, as it is now, as allowed."""
    path = workspace_config(workspace)
    allow(path, home / MCP_TRUST_FILE, str(path))


def untrusted_servers(workspace: Path, home: Path) -> list[str]:
    """Names of the workspace config's servers when that config is not yet allowed."""
    path = workspace_config(workspace)
    if not path.is_file() or is_trusted(workspace, home):
        return []
    try:
        return sorted(read_config(path))
    except McpConfigError:
        return []


def read_config(path: Path) -> dict[str, Any]:
    """The ``mcpServers`` object of one file ({} when the file does not exist).

    Raises:
        McpConfigError: the file is unreadable, not JSON, or has no ``mcpServers`` object.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise McpConfigError(f"{path}: cannot read ({exc})") from exc
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise McpConfigError(f"{path}: not valid JSON ({exc})") from exc
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise McpConfigError(f'{path}: expected {{"mcpServers": {{...}}}}')
    return servers


def tool_name(server: str, tool: str) -> str:
    """``mcp__server__tool`` with characters providers accept, at most 64 long.

    A longer name is cut and ends with ``_`` and :data:`TOOL_NAME_HASH_CHARS` hex digits
    of a SHA-256 of the server's and the tool's names: names that share their first
    characters stay distinct (providers reject a request declaring one name twice), and
    a name depends on nothing else, so it is the same in every process (the prompt
    prefix stays cacheable and a resumed session's calls still resolve).
    """
    name = f"mcp__{_NAME_CHARS.sub('_', server)}__{_NAME_CHARS.sub('_', tool)}"
    if len(name) <= TOOL_NAME_MAX_CHARS:
        return name
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:TOOL_NAME_HASH_CHARS]
    return f"{name[: TOOL_NAME_MAX_CHARS - TOOL_NAME_HASH_CHARS - 1]}_{digest}"


def mcp_redactor(
    expanded: Expanded, env: Mapping[str, str], secrets: Iterable[str] = ()
) -> Redactor:
    """The redactor of every MCP text shown: notices, ``/mcp``, errors, tool results.

    Args:
        expanded: Variables the configs expanded (:func:`connection_for`): their values
            are replaced wherever they appear (a secret-named variable's whatever its
            length, any other's from :data:`~agentgraph.redaction.SECRET_VALUE_MIN_CHARS`
            characters on).
        env: The agent's environment (its secret-named values).
        secrets: The settings' secret values (API key, database URL).
    """
    named = [value for name, value in expanded if is_secret_env_name(name)]
    values = [value for _name, value in expanded] + secret_env_values(env)
    return Redactor(values, exact_values=[*secrets, *named])


def result_text(content: Any) -> str:
    """Plain text of an MCP tool result (content blocks joined; media named, not inlined)."""
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        parts: list[str] = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
            elif isinstance(block, dict):
                kind = block.get("type", "content")
                mime = block.get("mime_type") or block.get("mimeType") or ""
                parts.append(f"[{kind} {mime}]".replace(" ]", "]"))
            else:
                parts.append(str(block))
        text = "\n".join(parts)
    else:
        text = str(content)
    if len(text) > MCP_RESULT_MAX_CHARS:
        cut = len(text) - MCP_RESULT_MAX_CHARS
        text = text[:MCP_RESULT_MAX_CHARS] + f"\n…[{cut:,} more characters cut by agentgraph]"
    return text


class McpManager:
    """Connects the configured MCP servers and exposes their tools synchronously.

    Args:
        workspace: The session workspace (its ``.agentgraph/mcp.json``; stdio cwd).
        home: ``AGENTGRAPH_HOME`` (its ``mcp.json``).
        base_env: Environment stdio servers start with (secrets removed by the caller).
        env: Variables that ``${VAR}`` in the config may read.
        start_timeout_s: Per-server limit for connecting and listing tools.
        tool_timeout_s: Per-call limit.
        workspace_trusted: Whether the workspace's config may start its servers.
        turn_wait_s: How long a turn waits for servers still connecting (see
            :meth:`wait`; the agent uses it).
        secrets: The settings' secret values: with the values the configs expanded and
            the secret-named variables of ``env``, redacted from every text shown.
    """

    def __init__(
        self,
        workspace: Path,
        home: Path,
        *,
        base_env: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        start_timeout_s: float = MCP_START_TIMEOUT_S,
        tool_timeout_s: float = MCP_TOOL_TIMEOUT_S,
        workspace_trusted: bool = True,
        turn_wait_s: float = MCP_TURN_WAIT_S,
        secrets: Iterable[str] = (),
    ) -> None:
        self.workspace = workspace
        self.home = home
        self.base_env = dict(base_env or {})
        self.env = dict(env if env is not None else os.environ)
        self.start_timeout_s = start_timeout_s
        self.tool_timeout_s = tool_timeout_s
        self.workspace_trusted = workspace_trusted
        self.turn_wait_s = turn_wait_s
        self._secrets = list(secrets)
        # Rebuilt once the configs are read (their expanded values join it).
        self._redactor = mcp_redactor([], self.env, self._secrets)
        # In config order (home file first; a name in both keeps its first position).
        self.servers: dict[str, ServerStatus] = {}
        self.problems: list[str] = []
        self._problems_shown = 0
        # Wrapped tools of each server that connected; kept if it disconnects later (its
        # calls then answer with an error) so the tool list never shrinks mid-session.
        self._tools: dict[str, list[BaseTool]] = {}
        # Notified on every state change (waiters live in other threads).
        self._changed = threading.Condition()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None
        self._holders: list[asyncio.Task[None]] = []
        self._holder_of: dict[str, asyncio.Task[None]] = {}

    # -- configuration ---------------------------------------------------------------
    def _problem(self, text: str) -> None:
        self.problems.append(self._redactor.redact(text))

    def redact(self, text: str) -> str:
        """``text`` with the configs' expanded values and the agent's secrets replaced."""
        return self._redactor.redact(text)

    def _connections(self) -> dict[str, tuple[str, dict[str, Any]]]:
        merged: dict[str, tuple[str, Any]] = {}
        for path in config_paths(self.workspace, self.home):
            try:
                servers = read_config(path)
            except McpConfigError as exc:  # broken: say so, allowed or not
                self._problem(f"MCP config ignored: {exc}")
                continue
            if path == workspace_config(self.workspace) and not self.workspace_trusted:
                if servers:
                    self._problem(
                        f"MCP servers of {path} not started ({', '.join(sorted(servers))}): "
                        "not yet allowed; start the REPL here to allow them, or set "
                        "AGENTGRAPH_MCP_TRUST_WORKSPACE=1"
                    )
                continue
            for name, entry in servers.items():
                merged[str(name)] = (str(path), entry)
        out: dict[str, tuple[str, dict[str, Any]]] = {}
        failed: list[tuple[str, str, str]] = []
        expanded: Expanded = []
        for name, (source, entry) in merged.items():
            try:
                conn = connection_for(
                    name,
                    entry,
                    env=self.env,
                    base_env=self.base_env,
                    cwd=self.workspace,
                    expanded=expanded,
                )
            except McpConfigError as exc:
                failed.append((name, source, str(exc)))
                self.servers[name] = ServerStatus(name, source, "?", state="failed")
                continue
            self.servers[name] = ServerStatus(name, source, conn["transport"])
            out[name] = (source, conn)
        # Before any server-related text is kept or logged: every text shown, and every
        # log record (the transports log the URLs they connect to), is redacted with it.
        self._redactor = mcp_redactor(expanded, self.env, self._secrets)
        if out:
            redact_in_logs(self._redactor)
        for name, _source, error in failed:
            self.servers[name].error = self.redact(error)
            self._problem(f"MCP server {name!r} not started: {error}")
        return out

    # -- state seen from other threads -----------------------------------------------
    @property
    def tools(self) -> list[BaseTool]:
        """Tools of the servers that connected, in config order (not connection order).

        A name already given by a tool before it (two servers' names that read the same
        once sanitized) is left out: providers reject a name declared twice.
        """
        seen: set[str] = set()
        out: list[BaseTool] = []
        for name in self.servers:
            for tool in self._tools.get(name, []):
                if tool.name not in seen:
                    seen.add(tool.name)
                    out.append(tool)
        return out

    def tools_of(self, server: str) -> list[BaseTool]:
        """The tools ``server`` gave (empty while it connects or when it failed)."""
        return list(self._tools.get(server, []))

    def pending(self) -> list[str]:
        """Names of the servers still connecting, in config order."""
        return [s.name for s in self.servers.values() if s.state == "connecting"]

    def new_problems(self) -> list[str]:
        """Problems not returned by an earlier call (config errors, failed servers)."""
        fresh = self.problems[self._problems_shown :]
        self._problems_shown += len(fresh)
        return fresh

    def wait(self, timeout_s: float | None, cancelled: threading.Event | None = None) -> bool:
        """Wait until no server is connecting, at most ``timeout_s`` (None: until then;
        each server's own start limit bounds it) or until ``cancelled`` is set.

        Returns:
            True when no server is connecting any more.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._changed:
            while self.pending():
                if cancelled is not None and cancelled.is_set():
                    return False
                left = MCP_WAIT_POLL_S if deadline is None else deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(min(left, MCP_WAIT_POLL_S))
        return True

    def _notify(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def _fail(self, status: ServerStatus, error: str) -> None:
        if status.state == "failed":  # e.g. closed while connecting: the first reason stays
            return
        status.state, status.error = "failed", self.redact(error)
        self._problem(f"MCP server {status.name!r} failed: {error}")
        self._notify()

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        """Start connecting every configured server in the background; return at once.

        Config problems are in :attr:`problems` when this returns; each server's state
        moves from ``connecting`` to ``connected`` or ``failed`` (within
        ``start_timeout_s``) on the loop thread. :meth:`wait` waits for them.
        """
        connections = self._connections()
        if not connections:
            return
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._stop = asyncio.Event()  # bound to its loop when first awaited (there)
        self._thread = threading.Thread(target=loop.run_forever, name="mcp-loop", daemon=True)
        self._thread.start()
        for name, (_src, conn) in connections.items():
            future = asyncio.run_coroutine_threadsafe(self._connect(name, conn), loop)
            future.add_done_callback(functools.partial(self._connect_done, name))

    def _connect_done(self, name: str, future: concurrent.futures.Future[None]) -> None:
        """A bug in one server's start-up must not stop the CLI: it fails that server."""
        status = self.servers[name]
        if status.state != "connecting":
            return
        exc = None if future.cancelled() else future.exception()
        self._fail(status, f"start-up failed: {_one_line(exc)}" if exc else "start-up cancelled")

    async def _connect(self, name: str, conn: dict[str, Any]) -> None:
        status = self.servers[name]
        ready: asyncio.Future[list[BaseTool]] = asyncio.get_running_loop().create_future()
        holder = asyncio.create_task(self._hold(name, conn, ready))
        self._holders.append(holder)
        self._holder_of[name] = holder
        try:
            raw_tools = await asyncio.wait_for(asyncio.shield(ready), self.start_timeout_s)
        except TimeoutError:
            holder.cancel()
            self._fail(status, f"no answer within {self.start_timeout_s:g}s")
        except Exception as exc:
            self._fail(status, _one_line(exc))
        else:
            wrapped_tools: list[BaseTool] = []
            names: set[str] = set()
            for tool in raw_tools[:MCP_TOOLS_PER_SERVER_MAX]:
                wrapped = self._wrap(name, tool)
                # A name given twice (two tool names that read the same once sanitized)
                # would make providers reject every request: the later tool is skipped.
                if wrapped is None or wrapped.name in names:
                    status.skipped.append(tool.name)
                    if wrapped is not None:
                        status.skip_reasons[tool.name] = f"its name {wrapped.name} is taken"
                    continue
                names.add(wrapped.name)
                status.tools.append(wrapped.name)
                wrapped_tools.append(wrapped)
            # Tools first, then the state: a reader that sees "connected" sees its tools.
            self._tools[name] = wrapped_tools
            status.state = "connected"
            self._notify()

    async def _hold(
        self, name: str, conn: dict[str, Any], ready: asyncio.Future[list[BaseTool]]
    ) -> None:
        """Keep one server's session open until :meth:`close`."""
        from langchain_mcp_adapters.sessions import create_session
        from langchain_mcp_adapters.tools import load_mcp_tools

        try:
            opened = (
                self._stdio_session(conn) if conn["transport"] == "stdio" else create_session(conn)  # type: ignore[arg-type]
            )
            async with opened as session:
                await session.initialize()
                tools = await load_mcp_tools(session, server_name=name)
                ready.set_result(tools)
                assert self._stop is not None
                await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(exc))
            elif not isinstance(exc, (asyncio.CancelledError, GeneratorExit)):
                self._fail(self.servers[name], f"disconnected: {_one_line(exc)}")
            if isinstance(exc, asyncio.CancelledError):
                raise

    @contextlib.asynccontextmanager
    async def _stdio_session(self, conn: dict[str, Any]) -> AsyncIterator[Any]:
        """A stdio server's session, its stderr passed on with secrets redacted.

        The adapters' stdio session hands the server the agent's own stderr, where a
        failing server prints its command line or environment unredacted.
        """
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client

        params = StdioServerParameters(
            command=conn["command"], args=conn["args"], env=conn["env"], cwd=conn["cwd"]
        )
        relay = _StderrRelay(self.redact)
        try:
            async with stdio_client(params, errlog=relay.writer) as (read, write):
                # The server holds its own copy: the relay ends when the server exits.
                relay.close_writer()
                async with ClientSession(read, write) as session:
                    yield session
        finally:
            relay.close_writer()

    def _wrap(self, server: str, tool: BaseTool) -> BaseTool | None:
        schema = tool.args_schema if isinstance(tool.args_schema, dict) else None
        if schema is None and tool.args_schema is not None:
            try:
                schema = tool.args_schema.model_json_schema()  # type: ignore[union-attr]
            except Exception:
                return None
        schema = schema or {"type": "object", "properties": {}}
        try:
            schema_text = json.dumps(schema)
        except (TypeError, ValueError, RecursionError):
            return None
        if len(schema_text) > MCP_SCHEMA_MAX_CHARS or schema.get("type", "object") != "object":
            return None
        description = (tool.description or f"MCP tool {tool.name} of server {server}")[
            :MCP_DESCRIPTION_MAX_CHARS
        ]
        call = self._caller(server, tool)
        hints = tool.metadata if isinstance(tool.metadata, Mapping) else {}
        return StructuredTool.from_function(
            func=call,
            name=tool_name(server, tool.name),
            description=description,
            args_schema=schema,
            metadata={
                "mcp_server": server,
                "mcp_tool": tool.name,
                # The server's word that the tool changes nothing (MCP's readOnlyHint):
                # its steps are not scanned for the files they changed.
                DECLARED_READ_ONLY_KEY: hints.get("readOnlyHint") is True,
            },
        )

    def _caller(self, server: str, tool: BaseTool) -> Callable[..., str]:
        def call(**kwargs: Any) -> str:
            loop = self._loop
            status = self.servers.get(server)
            if loop is None or status is None or status.state != "connected":
                error = status.error if status is not None else "not connected"
                return f"error: MCP server {server!r} is not available ({error})"
            future = asyncio.run_coroutine_threadsafe(tool.ainvoke(kwargs), loop)
            try:
                content = future.result(timeout=self.tool_timeout_s)
            except TimeoutError:
                future.cancel()
                return (
                    f"error: MCP tool timed out after {self.tool_timeout_s:g}s "
                    "(AGENTGRAPH_MCP_TOOL_TIMEOUT_S); it was stopped"
                )
            except Exception as exc:
                return self.redact(f"error: MCP tool failed: {_one_line(exc)}")
            return self.redact(result_text(content))

        return call

    def close(self) -> None:
        """Close every session and stop the loop thread (servers exit with their stdin)."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        stop = self._stop

        async def shutdown() -> None:
            if stop is not None:
                stop.set()
            # A server still connecting is not waited for: quitting stays immediate.
            for name, status in self.servers.items():
                if status.state == "connecting":
                    status.state, status.error = "failed", "closed while connecting"
                    holder = self._holder_of.get(name)
                    if holder is not None:
                        holder.cancel()
            if self._holders:
                _done, pending = await asyncio.wait(self._holders, timeout=MCP_CLOSE_GRACE_S)
                for task in pending:
                    task.cancel()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        self._loop = self._thread = None
        stop_redacting_in_logs(self._redactor)


@contextlib.contextmanager
def open_mcp(
    workspace: Path,
    home: Path,
    *,
    enabled: bool,
    base_env: Mapping[str, str],
    workspace_trusted: bool,
    start_timeout_s: float = MCP_START_TIMEOUT_S,
    tool_timeout_s: float = MCP_TOOL_TIMEOUT_S,
    secrets: Iterable[str] = (),
) -> Iterator[McpManager]:
    """Start the configured MCP servers for a CLI run and close them after it.

    Args:
        workspace: The session workspace.
        home: ``AGENTGRAPH_HOME``.
        enabled: ``AGENTGRAPH_MCP`` is on (off: no server is started).
        base_env: Environment for stdio servers (the tools' environment: no secrets).
        workspace_trusted: Whether the workspace's config may start its servers.
        start_timeout_s: ``AGENTGRAPH_MCP_START_TIMEOUT_S``.
        tool_timeout_s: ``AGENTGRAPH_MCP_TOOL_TIMEOUT_S``.
        secrets: The settings' secret values, redacted from every MCP text shown.
    """
    manager = McpManager(
        workspace,
        home,
        base_env=base_env,
        workspace_trusted=workspace_trusted,
        start_timeout_s=start_timeout_s,
        tool_timeout_s=tool_timeout_s,
        secrets=secrets,
    )
    try:
        if enabled:
            manager.start()
        yield manager
    finally:
        manager.close()


class _StderrRelay:
    """A pipe a stdio server writes its stderr to; a thread passes each line on to the
    agent's stderr (file descriptor 2, where the server wrote before) with secrets
    redacted.

    Args:
        redact: Applied to each line.
    """

    def __init__(self, redact: Callable[[str], str]) -> None:
        self._redact = redact
        read_fd, write_fd = os.pipe()
        # Handed to the server as its stderr (it needs a real file descriptor).
        self.writer: TextIO = os.fdopen(write_fd, "w")
        self._reader = os.fdopen(read_fd, "rb")
        threading.Thread(target=self._pump, name="mcp-stderr", daemon=True).start()

    def close_writer(self) -> None:
        """Close this process's end; the relay ends once the server's copy closes too."""
        self.writer.close()

    def _pump(self) -> None:
        with self._reader:
            while line := self._reader.readline(MCP_STDERR_LINE_MAX_BYTES):
                text = self._redact(line.decode("utf-8", "replace"))
                with contextlib.suppress(OSError):
                    os.write(_STDERR_FD, text.encode("utf-8", "replace"))


def _one_line(exc: BaseException) -> str:
    """A short one-line description, including the first cause of an exception group."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300]
