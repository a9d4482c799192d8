"""Who may talk to the gateway: the Host/Origin gate, the body limit and the bearer token.

The Host allow-list (DNS rebinding) and the WebSocket Origin check run first, as ASGI
middleware that sees every HTTP request and WebSocket upgrade. Authentication is a route
dependency (``require_token``) on every route but ``/healthz``; it accepts the token as
``Authorization: Bearer``, and for browsers' EventSource/WebSocket, which cannot set
headers, as the ``access_token`` query parameter or the ``agw_token`` cookie. The query
parameter is redacted from access logs.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import re
import secrets
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import Depends, Request, WebSocket
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.errors import Unauthorized, problem

log = logging.getLogger(__name__)

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
TOKEN_QUERY = "access_token"  # noqa: S105 - a parameter name, not a secret
TOKEN_COOKIE = "agw_token"  # noqa: S105 - a cookie name, not a secret


def load_or_create_token(configured: str | None, data_dir: Path) -> tuple[str, bool]:
    """The configured token, else the one in ``<data_dir>/token`` (created with mode 600).

    Returns the token and whether it was generated just now.
    """
    if configured:
        return configured, False
    path = data_dir / "token"
    if path.exists():
        token = path.read_text().strip()
        if len(token) >= 32:
            return token, False
    data_dir.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
    os.chmod(path, 0o600)
    return token, True


def _host_name(value: str) -> str | None:
    """The host part of a Host header, or None when it is not a plain authority."""
    if not value or "/" in value or "@" in value or "," in value:
        return None
    try:
        parts = urlsplit("//" + value)
        host = parts.hostname
        _ = parts.port  # raises on a bad port
    except ValueError:
        return None
    return host


class GateMiddleware:
    """Refuse requests whose Host is not allowed, WebSockets from foreign origins, big bodies."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        allowed_hosts: list[str],
        allowed_origins: list[str],
        max_body_bytes: int,
    ) -> None:
        self.app = app
        self.hosts = LOOPBACK_HOSTS | {h.lower() for h in allowed_hosts}
        self.origins = frozenset(allowed_origins)
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        host_header = headers.get("host", "")
        host = _host_name(host_header)
        if host is None or host.lower() not in self.hosts:
            await self._refuse(
                scope,
                receive,
                send,
                403,
                "host_not_allowed",
                "the Host header names a host this gateway does not serve; "
                "add it to server.allowed_hosts",
            )
            return
        origin = headers.get("origin")
        if (
            scope["type"] == "websocket"
            and origin is not None
            and not self._origin_ok(origin, host_header)
        ):
            await self._refuse(
                scope,
                receive,
                send,
                403,
                "origin_not_allowed",
                "WebSocket connections from this Origin are not allowed; "
                "add it to server.allowed_origins",
            )
            return
        if scope["type"] == "http":
            length = headers.get("content-length")
            if length is not None and (not length.isdigit() or int(length) > self.max_body_bytes):
                await self._too_large(scope, receive, send)
                return
            if length is None and scope["method"] in ("POST", "PUT", "PATCH"):
                buffered = await self._read_limited(receive)
                if buffered is None:
                    await self._too_large(scope, receive, send)
                    return
                receive = buffered
        await self.app(scope, receive, send)

    def _origin_ok(self, origin: str, host_header: str) -> bool:
        if origin in self.origins:
            return True
        parts = urlsplit(origin)
        # Same origin: the page was served by this gateway under an allowed Host.
        return parts.scheme in ("http", "https") and parts.netloc == host_header and not parts.path

    async def _read_limited(self, receive: Receive) -> Receive | None:
        """Read a body of unknown length up to the limit; None when it goes past it."""
        parts: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            parts.append(message.get("body", b""))
            size += len(parts[-1])
            if size > self.max_body_bytes:
                return None
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": b"".join(parts), "more_body": False}

        return replay

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._refuse(
            scope,
            receive,
            send,
            413,
            "payload_too_large",
            f"request bodies are limited to {self.max_body_bytes} bytes",
        )

    async def _refuse(
        self, scope: Scope, receive: Receive, send: Send, status: int, type_: str, detail: str
    ) -> None:
        log.warning("refused %s %s: %s", scope["type"], scope.get("path"), type_)
        if scope["type"] == "websocket":
            await receive()  # websocket.connect
            await send({"type": "websocket.close", "code": 1008})
            return
        body = json.dumps(
            problem(status=status, type_=type_, title="Request refused", detail=detail)
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/problem+json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def _presented_token(authorization: str | None, query: str | None, cookie: str | None) -> str:
    if authorization:
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() == "bearer" and value:
            return value.strip()
    return query or cookie or ""


def check_token(expected: str, presented: str) -> None:
    if not presented or not hmac.compare_digest(presented.encode(), expected.encode()):
        raise Unauthorized(
            "send the gateway token as 'Authorization: Bearer <token>' "
            f"(browsers: ?{TOKEN_QUERY}=<token> on SSE and WebSocket URLs)"
        )


async def require_token(request: Request) -> None:
    """Route dependency: the request carries the gateway's token."""
    check_token(
        request.app.state.token,
        _presented_token(
            request.headers.get("authorization"),
            request.query_params.get(TOKEN_QUERY),
            request.cookies.get(TOKEN_COOKIE),
        ),
    )


async def require_ws_token(websocket: WebSocket) -> None:
    """WebSocket dependency: same token rules; a failure closes the upgrade with 403."""
    check_token(
        websocket.app.state.token,
        _presented_token(
            websocket.headers.get("authorization"),
            websocket.query_params.get(TOKEN_QUERY),
            websocket.cookies.get(TOKEN_COOKIE),
        ),
    )


Authenticated = Annotated[None, Depends(require_token)]

_TOKEN_IN_QUERY = re.compile(rf"({TOKEN_QUERY}=)[^&\s\"]+")


class RedactTokenFilter(logging.Filter):
    """Masks ``access_token=…`` in access-log lines."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.args and isinstance(record.args, tuple):
            record.args = tuple(
                _TOKEN_IN_QUERY.sub(r"\1[redacted]", a) if isinstance(a, str) else a
                for a in record.args
            )
        elif isinstance(record.msg, str):
            record.msg = _TOKEN_IN_QUERY.sub(r"\1[redacted]", record.msg)
        return True
