"""A JSON-RPC client over one ``codex app-server`` process, shared by many sessions.

One reader task owns the process's stdout. Responses complete the future of the request with
the same id; notifications and server requests that name a ``threadId`` are delivered to the
subscriber of that thread (one session); a server request nobody owns is refused at once, so
Codex never waits on an answer that will not come. When stdout ends, every pending request
fails with ``ConnectionLost`` and every subscriber receives a ``Disconnected``.

Errors::

    RpcFailure          root; ``method`` says which request
    ├── RpcError        the server answered with a JSON-RPC error (``code``, ``message``)
    ├── RpcTimeout      no answer within the request's bound
    └── ConnectionLost  the server's stdout ended (or broke) before the answer
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

from pydantic import JsonValue

from app.process.managed import LineTooLong, ManagedProcess, ProcessError
from app.providers.codex import protocol
from app.providers.codex.protocol import Notification, RequestId, Response, ServerRequest

__all__ = [
    "ConnectionLost",
    "Deliver",
    "Disconnected",
    "InboxItem",
    "JsonRpcClient",
    "RpcError",
    "RpcFailure",
    "RpcTimeout",
]

log = logging.getLogger(__name__)


class RpcFailure(Exception):
    def __init__(self, method: str, message: str) -> None:
        super().__init__(f"{method}: {message}")
        self.method = method


class RpcError(RpcFailure):
    def __init__(self, method: str, code: int, message: str) -> None:
        super().__init__(method, f"error {code}: {message}")
        self.code = code
        self.message = message


class RpcTimeout(RpcFailure):
    pass


class ConnectionLost(RpcFailure):
    pass


@dataclass(frozen=True, kw_only=True, slots=True)
class Disconnected:
    """The server is gone; ``reason`` says how (exit status, broken output)."""

    reason: str


InboxItem: TypeAlias = Notification | ServerRequest | Disconnected
Deliver: TypeAlias = Callable[[InboxItem], None]
"""Receives a thread's messages in order, from the reader task; must not block."""
Refuse: TypeAlias = Callable[[ServerRequest], "dict[str, JsonValue] | None"]


class JsonRpcClient:
    """Requests, notifications and routing over one live app-server process.

    ``refuse`` decides the answer to a server request that nobody serves (no subscriber, or
    one that turns it down): a result to send, or ``None`` for a "method not found" error.
    """

    def __init__(self, process: ManagedProcess, *, refuse: Refuse) -> None:
        self.process = process
        self._refuse = refuse
        self._ids = itertools.count(1)
        self._pending: dict[RequestId, tuple[str, asyncio.Future[dict[str, Any]]]] = {}
        self._subscribers: dict[str, Deliver] = {}
        self._closed_reason: str | None = None
        self.closed = asyncio.Event()
        self._answering: set[asyncio.Task[None]] = set()
        self.rate_limits: object = None
        """The last ``account/rateLimits/updated`` snapshot (``rateLimits``), if any."""
        self._reader = asyncio.create_task(self._read(), name=f"codex-rpc:{process.pid}")

    @property
    def is_closed(self) -> bool:
        return self.closed.is_set()

    @property
    def closed_reason(self) -> str | None:
        return self._closed_reason

    # --- routing --------------------------------------------------------------------------

    def subscribe(self, thread_id: str, deliver: Deliver) -> None:
        """Hand the thread's notifications and server requests to ``deliver`` from now on.

        Subscribing to a client whose server is already gone delivers ``Disconnected`` at once.
        """
        self._subscribers[thread_id] = deliver
        if self._closed_reason is not None:
            deliver(Disconnected(reason=self._closed_reason))

    def unsubscribe(self, thread_id: str, deliver: Deliver) -> None:
        if self._subscribers.get(thread_id) == deliver:  # bound methods compare by ==
            del self._subscribers[thread_id]

    # --- outgoing -------------------------------------------------------------------------

    async def request(
        self, method: str, params: dict[str, JsonValue], *, timeout_s: float
    ) -> dict[str, Any]:
        """Send a request and return its ``result``; raise an ``RpcFailure`` otherwise."""
        if self._closed_reason is not None:
            raise ConnectionLost(method, self._closed_reason)
        request_id = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = (method, future)
        try:
            await self._write(protocol.encode_request(request_id, method, params), method)
            async with asyncio.timeout(timeout_s):
                return await future
        except TimeoutError:
            raise RpcTimeout(method, f"no answer within {timeout_s:g} s") from None
        finally:
            self._pending.pop(request_id, None)

    async def notify(self, method: str, params: dict[str, JsonValue] | None = None) -> None:
        await self._write(protocol.encode_notification(method, params), method)

    async def respond(self, request_id: RequestId, result: dict[str, JsonValue]) -> None:
        """Answer a server request; a server that is gone is not an error here."""
        with contextlib.suppress(ConnectionLost):
            await self._write(protocol.encode_result(request_id, result), "response")

    async def respond_error(self, request_id: RequestId, code: int, message: str) -> None:
        with contextlib.suppress(ConnectionLost):
            await self._write(protocol.encode_error(request_id, code, message), "response")

    async def _write(self, line: bytes, what: str) -> None:
        try:
            await self.process.write_line(line)
        except ProcessError as exc:
            raise ConnectionLost(what, str(exc)) from exc

    # --- incoming -------------------------------------------------------------------------

    async def _read(self) -> None:
        reason = "the app-server closed its output"
        try:
            while True:
                line = await self.process.read_line()
                if line is None:
                    break
                message = protocol.parse_line(line)
                if message is not None:
                    self._dispatch(message)
        except LineTooLong as exc:
            reason = f"the app-server printed a line over {exc.limit} bytes"
        except ProcessError as exc:
            reason = f"lost the app-server's output: {exc}"
        finally:
            self._close(reason)

    def _dispatch(self, message: protocol.Incoming) -> None:
        if isinstance(message, Response):
            entry = self._pending.get(message.id)
            if entry is None:
                log.debug("codex: response to unknown request id %r", message.id)
                return
            method, future = entry
            if future.done():
                return
            if message.error_code is not None:
                error = RpcError(method, message.error_code, message.error_message or "")
                future.set_exception(error)
            else:
                future.set_result(message.result or {})
            return
        if message.method == protocol.RATE_LIMITS_UPDATED and isinstance(message, Notification):
            # The account's limits (no thread): a turn that fails on a usage limit reads
            # when it resets from the last snapshot, sent just before the failure.
            self.rate_limits = message.params.get("rateLimits")
            return
        deliver = self._subscribers.get(message.thread_id or "")
        if deliver is not None:
            deliver(message)
        elif isinstance(message, ServerRequest):
            # Nobody will answer it (no thread, or a thread no session follows any more).
            task = asyncio.create_task(self.refuse(message))
            self._answering.add(task)
            task.add_done_callback(self._answering.discard)
        else:
            log.debug("codex: notification %s for no session", message.method)

    async def refuse(self, request: ServerRequest) -> None:
        """Turn ``request`` down with the answer ``refuse`` picks (or a JSON-RPC error)."""
        result = self._refuse(request)
        if result is None:
            await self.respond_error(
                request.id,
                protocol.ERROR_METHOD_NOT_FOUND,
                f"{request.method} is not supported by Agent Gateway",
            )
        else:
            await self.respond(request.id, result)

    def _close(self, reason: str) -> None:
        if self._closed_reason is not None:
            return
        self._closed_reason = reason
        for method, future in self._pending.values():
            if not future.done():
                future.set_exception(ConnectionLost(method, reason))
        for deliver in list(self._subscribers.values()):
            deliver(Disconnected(reason=reason))
        self.closed.set()

    async def aclose(self) -> None:
        """Stop reading (the process itself belongs to the caller)."""
        tasks = [self._reader, *self._answering]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._close("the client was closed")
