"""The gate every HTTP request and WebSocket upgrade passes before routing.

In order: the request target must be origin-form (``/path``; an absolute-form target naming
a host is refused), there must be exactly one ``Host`` header and it must name an allowed
host (DNS rebinding), an ``Origin`` header, when sent, must be this gateway's own origin or
one of ``server.allowed_origins`` by exact (scheme, host, port) match (cross-site requests
and WebSocket hijacking), and a request body must fit ``server.max_body_bytes``. Refusals
are ``application/problem+json``; a refused WebSocket upgrade gets the same HTTP answer.
"""

from __future__ import annotations

import json
import logging
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.errors import problem

log = logging.getLogger(__name__)

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
MAX_HEADER_BYTES = 32 * 1024
MAX_HEADERS = 100
"""A request head (target and header fields) past either is refused with 431 (uvicorn's parser
itself only bounds a head that arrives slowly, at 16 KiB)."""
MAX_TARGET_BYTES = 8 * 1024
"""A request target (path and query) past this is refused with 414."""
DEFAULT_PORTS = {"http": 80, "https": 443}

Origin = tuple[str, str, int]
"""An origin as compared: (scheme, host, port), the port made explicit."""


def parse_origin(value: str) -> Origin | None:
    """``scheme://host[:port]`` exactly (http or https), else None (``null``, paths, userinfo)."""
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    if value != f"{parts.scheme}://{parts.netloc}" or "@" in parts.netloc:
        return None  # a path, query, fragment, userinfo or odd spelling
    return parts.scheme, parts.hostname, port if port is not None else DEFAULT_PORTS[parts.scheme]


def parse_host(value: str) -> tuple[str, int | None] | None:
    """The (host, port) of a ``Host`` header, or None when it is not a plain authority."""
    if not value or any(c in value for c in "/\\@,?# \t"):
        return None
    try:
        parts = urlsplit("//" + value)
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not host:
        return None
    return host, port


class GateMiddleware:
    """Refuse foreign request targets, hosts and origins, and bodies over the limit."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        allowed_hosts: list[str],
        allowed_origins: list[str],
        max_body_bytes: int,
    ) -> None:
        self.app = app
        self.hosts = LOOPBACK_HOSTS | {h.lower().strip("[]") for h in allowed_hosts}
        self.origins = frozenset(o for o in map(parse_origin, allowed_origins) if o is not None)
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(scope)
        if refusal is not None:
            await self._refuse(scope, receive, send, *refusal)
            return
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            length = headers.get(b"content-length")
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

    def _refusal(self, scope: Scope) -> tuple[int, str, str] | None:
        """(status, problem type, detail) when the target, Host or Origin is not acceptable."""
        headers = scope["headers"]
        target = scope.get("raw_path") or scope["path"].encode()
        target_bytes = len(target) + 1 + len(scope.get("query_string", b""))
        if target_bytes > MAX_TARGET_BYTES:
            return (
                414,
                "target_too_long",
                f"request targets (path and query) are limited to {MAX_TARGET_BYTES} bytes",
            )
        if (
            len(headers) > MAX_HEADERS
            or target_bytes + sum(len(k) + len(v) for k, v in headers) > MAX_HEADER_BYTES
        ):
            return (
                431,
                "headers_too_large",
                f"request heads are limited to {MAX_HEADERS} header fields and "
                f"{MAX_HEADER_BYTES} bytes, the target included",
            )
        if not target.startswith(b"/"):
            return (
                400,
                "bad_request_target",
                "request targets must be a path (origin-form); this gateway is not a proxy",
            )
        hosts = [v.decode("latin-1") for k, v in scope["headers"] if k == b"host"]
        if len(hosts) != 1:
            return 400, "host_not_allowed", "send exactly one Host header"
        authority = parse_host(hosts[0])
        if authority is None or authority[0].lower() not in self.hosts:
            return (
                403,
                "host_not_allowed",
                "the Host header names a host this gateway does not serve; "
                "add it to server.allowed_hosts",
            )
        origins = [v.decode("latin-1") for k, v in scope["headers"] if k == b"origin"]
        if origins and not self._origin_ok(origins, scope, authority):
            return (
                403,
                "origin_not_allowed",
                "requests from this Origin are not allowed; add the exact origin "
                "(scheme://host[:port]) to server.allowed_origins",
            )
        return None

    def _origin_ok(
        self, origins: list[str], scope: Scope, authority: tuple[str, int | None]
    ) -> bool:
        if len(origins) != 1:
            return False
        origin = parse_origin(origins[0])
        if origin is None:
            return False
        if origin in self.origins:
            return True
        # Same origin: a page this gateway served under the Host the request names.
        scheme = "https" if scope.get("scheme") in ("https", "wss") else "http"
        host, port = authority
        own = (scheme, host.lower(), port if port is not None else DEFAULT_PORTS[scheme])
        return origin == own

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
        # A client's mistake, at INFO: a caller without a key cannot flood the log with errors.
        log.info(
            "refused %s %s: %s (%d)", scope["type"], scope.get("path", "")[:200], type_, status
        )
        body = json.dumps(
            problem(status=status, type_=type_, title="Request refused", detail=detail)
        ).encode()
        headers = [
            (b"content-type", b"application/problem+json"),
            (b"content-length", str(len(body)).encode()),
        ]
        if scope["type"] == "websocket":
            await receive()  # websocket.connect
            if "websocket.http.response" not in scope.get("extensions", {}):
                await send({"type": "websocket.close", "code": 1008})  # the server answers 403
                return
            start = "websocket.http.response.start"
            body_type = "websocket.http.response.body"
        else:
            start, body_type = "http.response.start", "http.response.body"
        await send({"type": start, "status": status, "headers": headers})
        await send({"type": body_type, "body": body})
