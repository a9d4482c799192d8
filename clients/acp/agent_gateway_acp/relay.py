"""The relay's effects: the editor's stdio, the WebSocket, reconnecting and stopping. What to
send where is ``core.RelayCore``'s decision; this moves the bytes.

The first connection is made when the editor sends its first line (so that a refused key
has a request to answer). A connection that drops is made again, backing off, as long as the
editor is there; one the gateway refuses (the key, the URL) ends the relay with status 2
after every waiting request of the editor is answered with the reason. The end of stdin,
SIGTERM or SIGINT close the connection cleanly and end the relay with status 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal

from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from agent_gateway_acp import connection
from agent_gateway_acp.connection import ConnectError, Refused, Unreachable
from agent_gateway_acp.core import Output, RelayCore, ToEditor
from agent_gateway_acp.messages import AUTH_REQUIRED, INTERNAL_ERROR
from agent_gateway_acp.stdio import EditorGone, EditorPipe

log = logging.getLogger(__name__)

FIRST_ATTEMPTS = 4
"""Attempts at the very first connection before the relay gives up (a wrong host or port
should show in the editor now, not after minutes); later drops are retried without end."""
RESTORE_TIMEOUT_S = 60.0
"""How long a new connection may take to reopen the editor's sessions before it is dropped
and made again."""
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class _Stop(Exception):
    """The relay ends with this exit status."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


class Relay:
    """One editor's relay to one gateway."""

    def __init__(
        self,
        *,
        url: str,
        token: str,
        editor: EditorPipe,
        core: RelayCore | None = None,
    ) -> None:
        self._url = url
        self._token = token
        self._editor = editor
        self._core = core or RelayCore()
        self._ws: ClientConnection | None = None
        self._wanted = asyncio.Event()
        self._stopping = asyncio.Event()

    async def run(self) -> int:
        """Relay until the editor leaves (0), a signal (0) or the gateway refuses us (2)."""
        loop = asyncio.get_running_loop()
        for signum in STOP_SIGNALS:
            with contextlib.suppress(NotImplementedError):  # not on Windows
                loop.add_signal_handler(signum, self._stopping.set)
        await self._editor.open()
        tasks = {
            asyncio.create_task(self._from_editor(), name="editor"),
            asyncio.create_task(self._to_gateway(), name="gateway"),
            asyncio.create_task(self._signalled(), name="signal"),
        }
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            return self._status(done)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._close()
            for signum in STOP_SIGNALS:
                with contextlib.suppress(NotImplementedError):
                    loop.remove_signal_handler(signum)
            self._editor.close()

    async def _signalled(self) -> None:
        await self._stopping.wait()

    def _status(self, done: set[asyncio.Task[None]]) -> int:
        """The exit status from the tasks that ended: a stop the relay decided first, then a
        failure, else 0 (the editor left, or a signal)."""
        errors = [task.exception() for task in done if task.exception() is not None]
        for error in errors:
            if isinstance(error, _Stop):
                return error.status
        for error in errors:
            if not isinstance(error, EditorGone):
                log.error("the relay failed", exc_info=error)
                return 1
        if errors:
            log.info("the editor closed the relay's output; stopping")
        elif any(task.get_name() == "signal" for task in done):
            log.info("stopping on a signal")
        return 0

    async def _close(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None:
            await ws.close(1000, "the editor is done")
            log.info("closed the connection to the gateway")
        if self._core.waiting:
            log.warning("%d message(s) of the editor never reached the gateway", self._core.waiting)

    async def _dispatch(self, outputs: list[Output]) -> None:
        for output in outputs:
            if isinstance(output, ToEditor):
                await self._editor.write_line(output.text)
            elif output.generation == self._core.generation and self._ws is not None:
                with contextlib.suppress(ConnectionClosed):
                    await self._ws.send(output.text)

    async def _from_editor(self) -> None:
        while (line := await self._editor.read_line()) is not None:
            self._wanted.set()
            await self._dispatch(self._core.from_editor(line))
        log.info("the editor closed the relay's input; stopping")

    async def _to_gateway(self) -> None:
        await self._wanted.wait()
        loop = asyncio.get_running_loop()
        delays = connection.backoff()
        attempt = 0
        ever = False
        while True:
            attempt += 1
            try:
                ws = await connection.open_connection(self._url, self._token)
            except Unreachable as exc:
                if not ever and attempt >= FIRST_ATTEMPTS:
                    reason = f"cannot reach the gateway at {self._url}: {exc}"
                    await self._fail(INTERNAL_ERROR, reason)
                    raise _Stop(1) from None
                delay = next(delays)
                log.warning(
                    "cannot reach the gateway at %s (%s); attempt %d in %.1f s",
                    self._url,
                    exc,
                    attempt + 1,
                    delay,
                )
                await asyncio.sleep(delay)
                continue
            except ConnectError as exc:
                code = AUTH_REQUIRED if isinstance(exc, Refused) else INTERNAL_ERROR
                status = getattr(exc, "status", None)
                await self._fail(code, str(exc), {"url": self._url, "status": status})
                raise _Stop(2) from None
            log.info("%s %s", "reconnected to" if ever else "connected to", self._url)
            ever, attempt = True, 0
            opened = loop.time()
            await self._serve(ws)
            if loop.time() - opened >= connection.STABLE_S:
                delays = connection.backoff()
            delay = next(delays)
            if delay:
                log.info("reconnecting in %.1f s", delay)
                await asyncio.sleep(delay)

    async def _fail(self, code: int, reason: str, data: object = None) -> None:
        log.error("%s", reason)
        await self._dispatch(self._core.fail(code, reason, data))

    async def _serve(self, ws: ClientConnection) -> None:
        """Relay one connection until it is lost."""
        self._ws = ws
        restoring = asyncio.get_running_loop().call_later(
            RESTORE_TIMEOUT_S, self._restore_overdue, ws
        )
        try:
            await self._dispatch(self._core.connected())
            async for frame in ws:
                if self._core.live:
                    restoring.cancel()
                text = frame if isinstance(frame, str) else frame.decode("utf-8", "replace")
                await self._dispatch(self._core.from_gateway(text))
        except ConnectionClosed:
            pass
        finally:
            restoring.cancel()
        self._ws = None
        log.warning(
            "the connection to the gateway was lost (code %s%s); reconnecting",
            ws.close_code,
            f", {ws.close_reason}" if ws.close_reason else "",
        )
        await self._dispatch(self._core.disconnected())

    def _restore_overdue(self, ws: ClientConnection) -> None:
        if ws is self._ws and not self._core.live:
            log.warning(
                "the gateway did not reopen the sessions in %.0f s; reconnecting", RESTORE_TIMEOUT_S
            )
            ws.transport.abort()
