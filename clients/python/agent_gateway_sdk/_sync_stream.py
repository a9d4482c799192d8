"""A session's events as a blocking iterator over SSE that survives dropped connections and
gateway restarts (the rules are in ``_streaming``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterator
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
"""The request that continues a stream from its state's cursor."""


class EventStream(Iterator[Event]):
    """Events, each once, in ``seq`` order, until the stream ends (the session closed, or
    the condition it was opened with was met). Close it (or use ``with``) to stop early."""

    def __init__(
        self,
        http: httpx.Client,
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

    def __next__(self) -> Event:
        return next(self._events)

    def close(self) -> None:
        self._events.close()

    def __enter__(self) -> EventStream:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _run(self, request: httpx.Request) -> Generator[Event, None, None]:
        first = True
        while True:
            delay: float | None
            try:
                response = self._http.send(request, stream=True)
            except httpx.TransportError as exc:
                if first:
                    raise ConnectionFailed(f"could not reach the gateway: {exc!r}") from exc
                delay = self._backoff.next_delay()
            else:
                try:
                    if response.status_code == 204:  # a closed session, read to its end
                        return
                    if response.status_code >= 400:
                        response.read()
                        error = error_for(
                            response.status_code, response.content, dict(response.headers)
                        )
                        if first or response.status_code not in RETRYABLE_STATUSES:
                            raise error
                        delay = self._backoff.next_delay(error.retry_after or 0.0)
                    else:
                        first = False
                        delay = yield from self._read(response)
                        if self._state.ended:
                            return
                finally:
                    response.close()
            if delay is None:
                raise ConnectionFailed(
                    f"the event stream could not be resumed within {self._backoff.timeout_s} s "
                    f"(last seq {self._state.cursor})"
                )
            if delay > 0:
                time.sleep(delay)
            request = self._resume(self._state)

    def _read(self, response: httpx.Response) -> Generator[Event, None, float | None]:
        """Yield the events of one connection; the delay before the next one (``None``:
        give up), or returns once the stream's end condition was met."""
        decoder = SseDecoder()
        try:
            for chunk in response.iter_bytes():
                self._backoff.progress()  # the gateway is there: a later drop starts afresh
                for message in decoder.feed(chunk):
                    step = self._state.read(message)
                    if isinstance(step, Deliver):
                        yield step.event
                        if self._state.ended:
                            return 0.0
                    elif isinstance(step, Reconnect):
                        self._backoff.progress()
                        return step.delay_s
        except httpx.TransportError:
            pass  # dropped (or silent past the read timeout): resume from the cursor
        return self._backoff.next_delay()
