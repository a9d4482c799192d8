"""No problem document shows a secret: ``application/problem+json`` bodies pass the mask.

An error may quote what a caller or an agent sent (a path segment, a cursor, a provider's
message), and that may be a key. ``ProblemMaskMiddleware`` runs the gateway's ``SecretMask``
over every ``application/problem+json`` body before it is sent, for HTTP answers and for the
HTTP answer that refuses a WebSocket upgrade alike, and sets ``Content-Length`` to the masked
body's. Other responses pass untouched (events are masked when they are stored). Problem
bodies are small and sent whole, so holding one until its end costs nothing.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.masking import SecretMask

PROBLEM = b"application/problem+json"
_STARTS = frozenset({"http.response.start", "websocket.http.response.start"})
_BODIES = frozenset({"http.response.body", "websocket.http.response.body"})


class ProblemMaskMiddleware:
    """Mask secrets in every problem document the app sends."""

    def __init__(self, app: ASGIApp, *, mask: SecretMask) -> None:
        self.app = app
        self.mask = mask

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        held: Message | None = None
        chunks: list[bytes] = []

        async def masked(message: Message) -> None:
            nonlocal held
            kind = message["type"]
            if kind in _STARTS and _is_problem(message):
                held = message
                return
            if kind not in _BODIES or held is None:
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            body = self.mask.json(b"".join(chunks).decode("utf-8", "replace")).encode()
            headers = [(k, v) for k, v in held.get("headers", []) if k.lower() != b"content-length"]
            headers.append((b"content-length", str(len(body)).encode()))
            start, held = {**held, "headers": headers}, None
            chunks.clear()
            await send(start)
            await send({"type": kind, "body": body, "more_body": False})

        await self.app(scope, receive, masked)


def _is_problem(message: Message) -> bool:
    return any(
        name.lower() == b"content-type" and value.startswith(PROBLEM)
        for name, value in message.get("headers", [])
    )
