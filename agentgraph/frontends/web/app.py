"""The web UI's HTTP side: a Starlette app over :class:`SessionService`.

Every request must carry the access token the server printed (the ``token`` query of
the first page load, which sets an HttpOnly cookie, or an ``Authorization: Bearer``
header); without it the answer is an empty 401. Requests whose ``Origin`` is not the
page's own are refused, and no CORS header is ever sent, so a page on another origin
cannot drive the agent. Events reach the page over server-sent events.
"""

from __future__ import annotations

import asyncio
import hmac
import json
from collections.abc import AsyncIterator
from importlib import resources
from typing import Any

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocketClose

from agentgraph.protocol.events import BaseEvent, dump_event
from agentgraph.protocol.ops import parse_op
from agentgraph.session import (
    AgentGraphError,
    SessionInUse,
    SessionService,
    TurnRefused,
    failure_line,
)

TOKEN_COOKIE = "agentgraph_token"
TOKEN_QUERY = "token"
# The page's assets: one HTML, one script, one style sheet (package data).
ASSETS = {
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
}
# An idle event stream sends a comment this often, so proxies and the browser keep it.
SSE_KEEPALIVE_S = 15.0
# Events a slow tab may have queued before it is dropped (it reloads the session).
SSE_QUEUE_MAX_EVENTS = 10_000
# The largest operation body accepted, in bytes.
OP_BODY_MAX_BYTES = 1_000_000
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
SECURITY_HEADERS = {
    "content-security-policy": "default-src 'self'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; "
    "form-action 'self'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


def _asset(name: str) -> bytes:
    return resources.files("agentgraph.frontends.web").joinpath("static", name).read_bytes()


class TokenGate:
    """ASGI middleware: the token check, the origin check and the security headers.

    Args:
        app: The wrapped app.
        token: The access token.
        port: The port the server listens on (its own origins are loopback on it).
    """

    def __init__(self, app: ASGIApp, token: str, port: int) -> None:
        self.app = app
        self.token = token
        self.origins = {f"http://{host}:{port}" for host in LOOPBACK_HOSTS}

    def _authorized(self, request: Request) -> bool:
        offered = [request.cookies.get(TOKEN_COOKIE, "")]
        header = request.headers.get("authorization", "")
        if header.lower().startswith("bearer "):
            offered.append(header[len("bearer ") :].strip())
        if request.url.path == "/":
            offered.append(request.query_params.get(TOKEN_QUERY, ""))
        wanted = self.token.encode()
        return any(hmac.compare_digest(o.encode(), wanted) for o in offered if o)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # no WebSocket is served: none passes the gate
            await WebSocketClose()(scope, receive, send)
            return
        request = Request(scope)
        if not self._authorized(request):
            await Response(status_code=401)(scope, receive, send)
            return
        origin = request.headers.get("origin")
        host = request.headers.get("host", "")
        if (origin is not None and origin not in self.origins) or (
            f"http://{host}" not in self.origins
        ):
            await Response(status_code=403)(scope, receive, send)
            return

        async def send_secured(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers") or [])
                headers += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_secured)


def make_app(service: SessionService, token: str, port: int) -> ASGIApp:
    """The web UI's ASGI app (token-gated).

    Args:
        service: The session service the page drives.
        token: The access token every request must carry.
        port: The port it is served on.
    """

    async def index(request: Request) -> Response:
        if request.query_params.get(TOKEN_QUERY):
            # The token leaves the address bar (and the history) for an HttpOnly cookie.
            response: Response = RedirectResponse("/", status_code=303)
            response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict", path="/")
            return response
        return Response(_asset("index.html"), media_type="text/html; charset=utf-8")

    async def asset(request: Request) -> Response:
        name = str(request.path_params["name"])
        if name not in ASSETS:
            return Response(status_code=404)
        return Response(_asset(name), media_type=ASSETS[name])

    async def sessions(request: Request) -> Response:
        query = request.query_params.get("q", "")
        return await _answer({"op": "list_sessions", "query": query})

    async def session(request: Request) -> Response:
        thread_id = str(request.path_params["thread_id"])
        return await _answer({"op": "resume_session", "thread_id": thread_id})

    async def context(request: Request) -> Response:
        thread_id = str(request.path_params["thread_id"])
        try:
            data = await asyncio.to_thread(service.context, thread_id)
        except Exception as exc:
            return _failure(exc)
        return JSONResponse(data)

    async def events(request: Request) -> Response:
        thread_id = str(request.path_params["thread_id"])
        loop = asyncio.get_running_loop()
        inbox: asyncio.Queue[BaseEvent | None] = asyncio.Queue(SSE_QUEUE_MAX_EVENTS)

        def deliver(event: BaseEvent) -> None:  # in the turn's thread
            loop.call_soon_threadsafe(_offer, inbox, event)

        # Subscribed before the response starts: the page submits once the stream is
        # open, and sees every event of its turn.
        unsubscribe = service.subscribe(thread_id, deliver)

        async def stream() -> AsyncIterator[str]:
            try:
                yield ": open\n\n"
                while True:
                    try:
                        event = await asyncio.wait_for(inbox.get(), SSE_KEEPALIVE_S)
                    except TimeoutError:
                        yield ": keepalive\n\n"
                        continue
                    if event is None:  # the tab fell too far behind: it reloads
                        yield "event: overflow\ndata: {}\n\n"
                        return
                    data = json.dumps(dump_event(event), ensure_ascii=False, default=str)
                    yield f"data: {data}\n\n"
            finally:
                unsubscribe()

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def operation(request: Request) -> Response:
        body = await request.body()
        if len(body) > OP_BODY_MAX_BYTES:
            return JSONResponse({"error": "operation too large"}, status_code=413)
        try:
            data = json.loads(body)
        except ValueError:
            return JSONResponse({"error": "the body is not JSON"}, status_code=400)
        return await _answer(data)

    async def _answer(data: object) -> Response:
        try:
            op = parse_op(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ()))
            return JSONResponse({"error": f"bad operation: {where}: {first['msg']}"}, 400)
        try:
            return JSONResponse(await asyncio.to_thread(service.handle, op))
        except Exception as exc:
            return _failure(exc)

    routes = [
        Route("/", index),
        Route("/static/{name}", asset),
        Route("/api/sessions", sessions),
        Route("/api/sessions/{thread_id}", session),
        Route("/api/sessions/{thread_id}/context", context),
        Route("/api/sessions/{thread_id}/events", events),
        Route("/api/op", operation, methods=["POST"]),
    ]
    return TokenGate(Starlette(routes=routes), token, port)


def _offer(inbox: asyncio.Queue[BaseEvent | None], event: BaseEvent) -> None:
    """Queue ``event``; a full queue gets the overflow mark instead (the tab reloads)."""
    try:
        inbox.put_nowait(event)
    except asyncio.QueueFull:
        while not inbox.empty():
            inbox.get_nowait()
        inbox.put_nowait(None)


def _failure(exc: Exception) -> Response:
    """A failed operation: its one line (the CLI's), 409 for a refusal, 400 otherwise."""
    message, _ = failure_line(exc) or (str(exc), 1)
    if isinstance(exc, TurnRefused | SessionInUse):
        status = 409
    else:
        status = 400 if isinstance(exc, AgentGraphError) else 500
    return JSONResponse({"error": message}, status_code=status)
