"""Running the app under uvicorn with a graceful stop the app takes part in.

The app is served on sockets bound beforehand (app/listening.py); uvicorn listens on them once
the app has started, then ``run`` calls ``on_started``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import socket
from collections.abc import Awaitable, Callable
from types import FrameType

import uvicorn
from fastapi import FastAPI

from app.connections import GatewayWebSocketProtocol, deadline_protocol
from app.main import begin_shutdown
from app.settings import Settings

log = logging.getLogger(__name__)


class GatewayServer(uvicorn.Server):
    """uvicorn's server, telling the app at once that a signal asked it to stop.

    Without this, open SSE and WebSocket streams would hold the stop for the whole graceful
    timeout, since the app would not know it began: here the app ends them (after a
    ``shutdown`` frame / a 1012 close) as soon as SIGTERM or SIGINT arrives. A graceful stop
    exits with status 0 rather than by re-raising the signal.
    """

    def __init__(
        self,
        config: uvicorn.Config,
        *,
        on_exit: Callable[[], None],
        on_started: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        super().__init__(config)
        self._on_exit = on_exit
        self._on_started = on_started
        self._started_task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and self._on_started is not None:
            self._started_task = asyncio.create_task(self._after_start(), name="on-started")

    async def _after_start(self) -> None:
        assert self._on_started is not None
        try:
            await self._on_started()
        except Exception:
            log.exception("the start-up message could not be written")

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self._started_task is not None:
            self._started_task.cancel()
            await asyncio.gather(self._started_task, return_exceptions=True)
        await super().shutdown(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        self._captured_signals.clear()  # stopped gracefully: exit 0, do not re-raise
        loop = self._loop
        if loop is not None and not loop.is_closed():
            # This runs inside a signal handler, between any two bytecodes of the loop's
            # thread: hand the work to the loop instead of touching its state here.
            loop.call_soon_threadsafe(self._on_exit)


def run(
    app: FastAPI,
    settings: Settings,
    *,
    sockets: list[socket.socket],
    on_started: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Serve ``app`` on ``sockets`` (``bind``) until a signal stops it; ``on_started`` runs
    once the app has started and the sockets listen (cancelled if the stop comes first)."""
    config = uvicorn.Config(
        app,
        host=settings.server.host,
        port=settings.server.port,
        log_level=settings.log_level,
        # The root logger's handler (app.observability.logs) formats uvicorn's lines too.
        log_config=None,
        ws_max_size=settings.server.ws_max_message_bytes,
        timeout_graceful_shutdown=math.ceil(settings.server.shutdown_grace_s),
        limit_concurrency=settings.server.limit_concurrency,
        # h11 keeps an absolute-form target visible to the Host gate, refuses two Host
        # headers and caps the request head (httptools does none of these); the deadlines
        # close connections that send their request too slowly (app/connections.py).
        http=deadline_protocol(
            head_timeout_s=settings.server.request_head_timeout_s,
            min_body_rate=settings.server.request_body_min_rate_bytes_s,
        ),
        ws=GatewayWebSocketProtocol,
    )
    server = GatewayServer(config, on_exit=lambda: begin_shutdown(app), on_started=on_started)
    server.run(sockets=sockets)
