"""A session's events as an async iterator over SSE that survives dropped connections and
gateway restarts (the rules are in ``_streaming``; ``_sync_stream`` is its blocking twin)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from types import TracebackType

import httpx

from agent_gateway_sdk._sse import SseDecoder
from agent_gateway_sdk._streaming import (
    RETRYABLE_STATUSES,
    Backoff,
    Deliver,
    Reconnect,
    StreamState,
)
from agent_gateway_sdk.errors import ConnectionFailed, error_for
from agent_gateway_sdk.events import Event

Resume = Callable[[StreamState], httpx.Request]


class AsyncEventStream(AsyncIterator[Event]):
    """Events, each once, in ``seq`` order, until the stream ends (the session closed, or
    the condition it was opened with was met). ``aclose()`` it (or ``async with``) to stop
    early."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        first: httpx.Request,
        resume: Resume,
        state: StreamState,
        backoff: Backoff,
    ) -> None:
        self._http = http
        self._resume = resume
        self._state = state
        self._backoff = backoff
        self._events = self._run(first)

    @property
    def cursor(self) -> int | None:
        """The seq of the last event yielded: where a new stream would continue."""
        return self._state.cursor

    @property
    def degraded(self) -> bool:
        """Events come late (from the store) until the gateway says ``recovered``."""
        return self._state.degraded

    async def __anext__(self) -> Event:
        return await self._events.__anext__()

    async def aclose(self) -> None:
        await self._events.aclose()

    async def __aenter__(self) -> AsyncEventStream:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def _run(self, request: httpx.Request) -> AsyncGenerator[Event, None]:
        first = True
        while True:
            delay: float | None
            try:
                response = await self._http.send(request, stream=True)
            except httpx.TransportError as exc:
                if first:
                    raise ConnectionFailed(f"could not reach the gateway: {exc!r}") from exc
                delay = self._backoff.next_delay()
            else:
                try:
                    if response.status_code == 204:  # a closed session, read to its end
                        return
                    if response.status_code >= 400:
                        await response.aread()
                        error = error_for(
                            response.status_code, response.content, dict(response.headers)
                        )
                        if first or response.status_code not in RETRYABLE_STATUSES:
                            raise error
                        delay = self._backoff.next_delay(error.retry_after or 0.0)
                    else:
                        first = False
                        delay = None
                        async for item in self._read(response):
                            if isinstance(item, Reconnect):
                                delay = item.delay_s
                            else:
                                yield item
                                if self._state.ended:
                                    return
                        if delay is None:
                            delay = self._backoff.next_delay()
                finally:
                    await response.aclose()
            if delay is None:
                raise ConnectionFailed(
                    f"the event stream could not be resumed within {self._backoff.timeout_s} s "
                    f"(last seq {self._state.cursor})"
                )
            if delay > 0:
                await asyncio.sleep(delay)
            request = self._resume(self._state)

    async def _read(self, response: httpx.Response) -> AsyncGenerator[Event | Reconnect, None]:
        """The events of one connection, then a ``Reconnect`` if the gateway asked for one
        (an async generator cannot return a value, unlike the sync one)."""
        decoder = SseDecoder()
        try:
            async for chunk in response.aiter_bytes():
                self._backoff.progress()  # the gateway is there: a later drop starts afresh
                for message in decoder.feed(chunk):
                    step = self._state.read(message)
                    if isinstance(step, Deliver):
                        yield step.event
                        if self._state.ended:
                            return
                    elif isinstance(step, Reconnect):
                        self._backoff.progress()
                        yield step
                        return
        except httpx.TransportError:
            pass  # dropped (or silent past the read timeout): resume from the cursor
