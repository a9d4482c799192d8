"""JSON-RPC messages over the ``/v1/acp`` WebSocket: one message per text frame.

The ACP SDK's connection moves decoded messages through a ``Transport``; this one reads
them off the socket and answers what is not a message at all itself, as JSON-RPC 2.0 says:

    a frame that is not JSON                 ─► -32700 Parse error (id null)
    JSON that is not one request, notification or response object (a batch, a number, an
    object without ``jsonrpc: "2.0"``, a method that is not a string, an id of another
    type)                                    ─► -32600 Invalid Request (its id when it had one)
    a frame over ``server.ws_max_message_bytes``  ─► -32600 (id null)
    a binary frame                           ─► the socket is closed (1003)

Each request is checked against the key the socket was opened with: one rotated away closes
the socket (1008) and the request is not run.
"""

from __future__ import annotations

import contextlib
import json
import logging
from typing import Any

from fastapi import WebSocket, WebSocketDisconnect

from app.api.events import RETIRED_REASON, WS_POLICY, WS_UNSUPPORTED_DATA
from app.api.security import key_still_valid

log = logging.getLogger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600


def error_message(code: int, message: str, request_id: Any = None) -> dict[str, Any]:
    """A JSON-RPC error response."""
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def _invalid(message: Any) -> str | None:
    """Why ``message`` is not a JSON-RPC 2.0 request, notification or response, or None."""
    if not isinstance(message, dict):
        kind = "a batch" if isinstance(message, list) else type(message).__name__
        return f"expected one JSON-RPC message (an object), got {kind}"
    if message.get("jsonrpc") != "2.0":
        return 'the message must have "jsonrpc": "2.0"'
    request_id = message.get("id")
    if "id" in message and not (
        request_id is None
        or (isinstance(request_id, str | int) and not isinstance(request_id, bool))
    ):
        return "the id must be a string, a number or null"
    if "method" in message:
        if not isinstance(message["method"], str) or not message["method"]:
            return "the method must be a non-empty string"
        params = message.get("params")
        if params is not None and not isinstance(params, dict | list):
            return "the params must be an object"
        return None
    if "id" not in message or ("result" not in message and "error" not in message):
        return "a message needs a method (a request or notification) or an id and a result"
    return None


def _valid_id(request_id: Any) -> bool:
    return request_id is None or (
        isinstance(request_id, str | int) and not isinstance(request_id, bool)
    )


class WebSocketTransport:
    """The ACP SDK's ``Transport`` over an accepted WebSocket."""

    def __init__(self, websocket: WebSocket, *, max_bytes: int) -> None:
        self._websocket = websocket
        self._max_bytes = max_bytes
        self._closed = False

    async def send(self, message: dict[str, Any]) -> None:
        """Send ``message``; ``ConnectionError`` once the client has gone, except for an
        answer: the answer to a request of a client that has gone is dropped (the client
        left; a reconnecting one learns the outcome from the session)."""
        try:
            await self._send(message)
        except ConnectionError:
            if "method" in message:
                raise
            request_id = str(message.get("id"))[:64]
            log.info("an ACP client left before its request %s was answered", request_id)

    async def _send(self, message: dict[str, Any]) -> None:
        if self._closed:
            raise ConnectionError("the client's connection is closed")
        text = json.dumps(message, ensure_ascii=False, separators=(",", ":"))
        try:
            await self._websocket.send_text(text)
        except (WebSocketDisconnect, RuntimeError) as exc:
            self._closed = True
            raise ConnectionError("the client's connection is closed") from exc

    async def receive(self) -> dict[str, Any] | None:
        while not self._closed:
            frame = await self._websocket.receive()
            if frame["type"] == "websocket.disconnect":
                self._closed = True
                return None
            text = frame.get("text")
            if text is None:
                await self._close(WS_UNSUPPORTED_DATA, "send JSON-RPC messages in text frames")
                return None
            message = await self._decode(text)
            if message is None:
                continue
            if "method" in message and "id" in message and not key_still_valid(self._websocket):
                log.info("closing an ACP connection: its key was rotated away")
                await self._close(WS_POLICY, RETIRED_REASON)
                return None
            return message
        return None

    async def _decode(self, text: str) -> dict[str, Any] | None:
        """The message in ``text``, or None after answering why it is not one."""
        if len(text) > self._max_bytes:
            await self.send(
                error_message(INVALID_REQUEST, f"messages are limited to {self._max_bytes} bytes")
            )
            return None
        try:
            message = json.loads(text)
        except (ValueError, RecursionError) as exc:
            why = "nests too deeply" if isinstance(exc, RecursionError) else f"is not JSON ({exc})"
            await self.send(error_message(PARSE_ERROR, f"Parse error: the message {why}"))
            return None
        problem = _invalid(message)
        if problem is not None:
            request_id = message.get("id") if isinstance(message, dict) else None
            if not (request_id is None or isinstance(request_id, str | int)):
                request_id = None
            await self.send(
                error_message(INVALID_REQUEST, f"Invalid Request: {problem}", request_id)
            )
            return None
        return message  # type: ignore[no-any-return]

    async def _close(self, code: int, reason: str) -> None:
        self._closed = True
        with contextlib.suppress(RuntimeError):  # already closed
            await self._websocket.close(code=code, reason=reason)

    async def close(self) -> None:
        if not self._closed:
            await self._close(1000, "closed")
