"""uvicorn's connection protocols, with what a gateway open to callers without a key needs.

``DeadlineH11Protocol`` (HTTP/1.1, h11) gives every request a deadline for its head and a
minimum rate for its body, on new and kept-alive connections alike, so a socket that sends
nothing, or trickles a header line or a body byte now and then, cannot hold a connection slot
(``server.limit_concurrency``) for longer than that:

    connection made / first byte of the next request ── head deadline ──► head complete
        (``server.request_head_timeout_s``; missed: 408, closed)
    head complete ── body due by start + grace + received / rate ──► body complete
        (``server.request_body_min_rate_bytes_s``, grace = the head timeout; missed: 408
        when no response has started, then closed)

A connection closed for a missed deadline lingers: its 408 is followed by a FIN, whatever the
client still sends is read and dropped for ``LINGER_S``, then the socket is closed, so the
client reads the 408 instead of a connection reset.

Idle kept-alive connections are closed by uvicorn's own keep-alive timeout. Upgraded
WebSocket connections leave both deadlines behind.

Both offer the app a writer for their connection (``ChunkedBodyWriter``,
``WebSocketTextWriter``, under the scope extension ``DIRECT_WRITER``): the event log writes a
live batch to every subscriber's socket from the task that publishes it, framed once, as a
plain relay would, instead of waking one task per subscriber (app/runtime/subscription.py).

``GatewayWebSocketProtocol`` marks an upgrade refused with an HTTP answer (401, 403, 404,
429) as handled, which uvicorn otherwise logs at ERROR as "returned without completing
handshake" for every refusal: a log flood any caller could cause.
"""

from __future__ import annotations

import json
import logging
import struct
import time
from typing import Any, ClassVar

import h11
from h11._writers import ChunkedWriter
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from websockets.protocol import State

from app.errors import problem
from app.runtime.subscription import DIRECT_WRITER

log = logging.getLogger(__name__)

LINGER_S = 2.0
"""How long a connection closed for being slow keeps reading (and dropping) after its 408."""


class DeadlineH11Protocol(H11Protocol):
    """HTTP/1.1 with a deadline for each request head and a minimum rate for each body."""

    head_timeout_s: ClassVar[float] = 10.0
    min_body_rate: ClassVar[float] = 1024.0
    """Bytes per second a request body must average, after a grace of ``head_timeout_s``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._timer: Any = None
        self._body_started: float | None = None
        self._body_received = 0
        self._upgraded = False
        self._lingering = False
        self._offered: Any = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._arm(self.head_timeout_s, self._head_missed)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._lingering:
            return  # what a client sends after its 408 is read and dropped (see _close_late)
        super().data_received(data)
        if self._upgraded or self.transport.is_closing():
            self._disarm()
            return
        state = self.conn.their_state
        if state is h11.IDLE:
            if self._timer is None:  # the first bytes of the next request on this connection
                self._arm(self.head_timeout_s, self._head_missed)
        elif state is h11.SEND_BODY:
            now = time.monotonic()
            if self._body_started is None:
                self._body_started, self._body_received = now, 0
            self._body_received += len(data)
            due = (
                self._body_started + self.head_timeout_s + self._body_received / self.min_body_rate
            )
            self._arm(max(0.0, due - now), self._body_missed)
        else:
            self._disarm()

    def handle_events(self) -> None:
        super().handle_events()
        cycle = self.cycle
        if cycle is not None and cycle is not self._offered:  # a new request's cycle
            self._offered = cycle
            extensions: dict[str, Any] = cycle.scope.setdefault("extensions", {})
            extensions[DIRECT_WRITER] = ChunkedBodyWriter(cycle)

    def handle_websocket_upgrade(self, event: h11.Request) -> None:
        self._upgraded = True
        self._disarm()
        super().handle_websocket_upgrade(event)

    def _arm(self, delay_s: float, callback: Any) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self.loop.call_later(delay_s, callback)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._body_started = None

    def _head_missed(self) -> None:
        self._timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self._close_late(
                "the request head did not arrive within server.request_head_timeout_s "
                f"({self.head_timeout_s:g} s)"
            )

    def _body_missed(self) -> None:
        self._timer = None
        if self.conn.their_state is h11.SEND_BODY and not self.transport.is_closing():
            self._close_late(
                "the request body arrived slower than server.request_body_min_rate_bytes_s "
                f"({self.min_body_rate:g} bytes/s)"
            )

    def _close_late(self, detail: str) -> None:
        """Answer 408 when no response has begun on this connection, then close it."""
        client = f"{self.client[0]}:{self.client[1]}" if self.client else "unknown"
        log.info("closing a slow connection from %s: %s", client, detail)
        if self.cycle is None or self.cycle.response_complete or not self.cycle.response_started:
            body = json.dumps(
                problem(status=408, type_="request_timeout", title="Request timeout", detail=detail)
            ).encode()
            self.transport.write(
                b"HTTP/1.1 408 Request Timeout\r\n"
                b"content-type: application/problem+json\r\n"
                b"content-length: " + str(len(body)).encode() + b"\r\n"
                b"connection: close\r\n\r\n" + body
            )
        # A lingering close: closing a socket with unread input makes the kernel answer with a
        # reset, which can destroy the 408 before the client reads it (a trickling client
        # always has a byte in flight). So stop writing (FIN after the answer), read and drop
        # what still arrives, and close for good after LINGER_S.
        if self.transport.can_write_eof():
            self._lingering = True
            self.transport.write_eof()
            self.loop.call_later(LINGER_S, self.transport.close)
        else:
            self.transport.close()


def deadline_protocol(*, head_timeout_s: float, min_body_rate: float) -> type[H11Protocol]:
    """``DeadlineH11Protocol`` with these limits, for ``uvicorn.Config(http=…)``."""
    return type(
        "DeadlineH11Protocol",
        (DeadlineH11Protocol,),
        {"head_timeout_s": head_timeout_s, "min_body_rate": min_body_rate},
    )


class ChunkedBodyWriter:
    """Writes chunks of a started ``Transfer-Encoding: chunked`` response straight to its
    socket (``RawWriter``), between the chunks h11 writes for the response itself.

    Chunks carry no state, so they interleave with h11's own; the final chunk is still h11's
    (the response's end). Any other framing (an HTTP/1.0 client, a HEAD request), a full
    buffer (uvicorn's flow control) or a connection going away refuses the write, and the
    response's task sends instead. The bytes bypass the app's middleware, so nothing may
    transform a stream's body (no compression middleware; none is installed).
    """

    kind = "http.chunked"

    def __init__(self, cycle: Any) -> None:
        self._cycle = cycle
        self._chunked: bool | None = None

    def frame(self, payload: bytes) -> bytes:
        return b"%x\r\n%s\r\n" % (len(payload), payload)

    def write(self, data: bytes) -> bool:
        cycle = self._cycle
        if (
            cycle.flow.write_paused
            or cycle.disconnected
            or cycle.response_complete
            or not cycle.response_started
            or cycle.transport.is_closing()
        ):
            return False
        if self._chunked is None:  # known once the response has started
            # h11 keeps its framing private; should that name change, nothing is written
            # here and every batch goes through the response's task as before.
            self._chunked = isinstance(getattr(cycle.conn, "_writer", None), ChunkedWriter)
        if not self._chunked:
            return False
        cycle.transport.write(data)
        return True


class WebSocketTextWriter:
    """Writes whole text messages straight to an open WebSocket (``RawWriter``).

    A server's frames are unmasked and these are never compressed (a message without the
    RSV1 bit is valid with permessage-deflate, whose context only covers compressed ones), so
    a frame made once is right for every connection. Refused while the socket's buffer is
    full (uvicorn pauses writing) or once the connection is closing.
    """

    kind = "websocket.text"

    def __init__(self, protocol: WebSocketsSansIOProtocol) -> None:
        self._protocol = protocol

    def frame(self, payload: bytes) -> bytes:
        size = len(payload)
        if size < 126:
            head = bytes((0x81, size))
        elif size < 1 << 16:
            head = struct.pack("!BBH", 0x81, 126, size)
        else:
            head = struct.pack("!BBQ", 0x81, 127, size)
        return head + payload

    def write(self, data: bytes) -> bool:
        protocol = self._protocol
        if (
            protocol.close_sent
            or not protocol.handshake_complete
            or not protocol.writable.is_set()
            or protocol.conn.state is not State.OPEN
            or protocol.transport.is_closing()
        ):
            return False
        protocol.transport.write(data)
        return True


class GatewayWebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's WebSocket protocol; an upgrade answered with an HTTP refusal is complete,
    and the connection offers its ``WebSocketTextWriter`` to the app."""

    def handle_connect(self, event: Any) -> None:
        super().handle_connect(event)
        scope = getattr(self, "scope", None)
        if scope is not None:
            scope["extensions"][DIRECT_WRITER] = WebSocketTextWriter(self)

    async def send(self, message: Any) -> None:
        await super().send(message)
        if (
            message["type"] == "websocket.http.response.body"
            and not message.get("more_body", False)
            and self.initial_response is not None
        ):
            self.handshake_complete = True  # answered (refused): nothing is missing
