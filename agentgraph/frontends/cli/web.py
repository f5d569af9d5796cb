"""``agentgraph web [--port N]``: serve the web UI on loopback until Ctrl-C."""

from __future__ import annotations

import argparse
import secrets
import socket
import sys

from rich.markup import escape

from agentgraph.config import Settings
from agentgraph.errors import EXIT_USAGE, AgentGraphError
from agentgraph.frontends.cli import collector_paused
from agentgraph.frontends.cli.common import process_environment, resolve_workspace, start_mcp
from agentgraph.frontends.cli.consoles import make_console

WEB_HOST = "127.0.0.1"
# Bytes of randomness in the access token (token_urlsafe: ~1.3 characters a byte).
WEB_TOKEN_BYTES = 32
# On Ctrl-C, how long open event streams may take to close before the server stops.
WEB_SHUTDOWN_GRACE_S = 1


def listening_socket(port: int) -> socket.socket:
    """A socket listening on loopback at ``port`` (0: any free port).

    Raises:
        AgentGraphError: the port cannot be used (one line, exit 2).
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((WEB_HOST, port))
    except (OSError, OverflowError) as exc:
        sock.close()
        why = getattr(exc, "strerror", None) or str(exc)
        raise AgentGraphError(f"cannot listen on {WEB_HOST}:{port}: {why}", EXIT_USAGE) from None
    sock.listen()
    return sock


def cmd_web(args: argparse.Namespace, settings: Settings) -> int:
    """Serve the web UI; the first line of stdout is its address with the access token."""
    import uvicorn

    from agentgraph.frontends.web.app import make_app
    from agentgraph.session.web_support import web_service

    workspace = resolve_workspace(getattr(args, "workspace", None))
    opening = web_service(
        settings,
        workspace,
        base_env=process_environment(),
        start_mcp=lambda: start_mcp(settings, workspace),
        building=collector_paused,
    )
    err = make_console(stderr=True)
    sock = listening_socket(int(args.port))
    port = int(sock.getsockname()[1])
    token = secrets.token_urlsafe(WEB_TOKEN_BYTES)
    try:
        with opening as service:
            sys.stdout.write(f"http://{WEB_HOST}:{port}/?token={token}\n")
            sys.stdout.flush()
            for notice in service.agent.notices():
                err.print(f"[yellow]{escape(notice)}[/]")
            err.print(f"[dim]agentgraph web: serving {workspace} — Ctrl-C stops[/]")
            config = uvicorn.Config(
                make_app(service, token, port),
                log_level="warning",
                access_log=False,
                lifespan="off",
                timeout_graceful_shutdown=WEB_SHUTDOWN_GRACE_S,
            )
            uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
    return 0
