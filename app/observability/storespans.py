"""Store calls as spans: ``traced_storage`` wraps the ``Storage`` the runtime is given.

Each call made inside a trace (a request's, a turn's) is a ``store.<method>`` span under the
span that made it; a call made outside one (a heartbeat, retention, a metrics scrape) makes
none, so background work never starts traces of its own. The event log's batched writes are
traced by the event log itself (``store.insert_events`` under the first appender's span,
app/runtime/eventlog.py). With tracing off the store is handed over as it is.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, cast

from app.observability.tracing import Tracer
from app.store.interface import Storage

TRACED_ELSEWHERE = frozenset({"insert_events"})
"""Calls whose spans their caller makes, with what only it knows."""


def traced_storage(store: Storage, tracer: Tracer, *, system: str) -> Storage:
    """``store`` whose calls are spans (``system``: ``sqlite`` or ``postgresql``); ``store``
    itself when tracing is off."""
    if not tracer.on:
        return store
    return cast(Storage, _TracedStorage(store, tracer, system))


class _TracedStorage:
    """Every coroutine method of the wrapped store, as a span; the rest as they are."""

    def __init__(self, store: Storage, tracer: Tracer, system: str) -> None:
        self._store = store
        self._tracer = tracer
        self._system = system

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._store, name)
        if name in TRACED_ELSEWHERE or not inspect.iscoroutinefunction(value):
            return value
        traced = self._traced(name, value)
        setattr(self, name, traced)  # looked up once per method
        return traced

    def _traced(
        self, name: str, call: Callable[..., Awaitable[Any]]
    ) -> Callable[..., Awaitable[Any]]:
        tracer = self._tracer
        attributes = {"db.system.name": self._system, "db.operation.name": name}

        @functools.wraps(call)
        async def traced(*args: Any, **kwargs: Any) -> Any:
            with tracer.inside(f"store.{name}", attributes):
                return await call(*args, **kwargs)

        return traced
