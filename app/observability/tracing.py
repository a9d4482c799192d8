"""Traces: the spans of requests, turns, attempts and what they wait on, through one seam.

Only OpenTelemetry's API is used here (FastAPI imports it anyway); the SDK that records and
exports spans is built by app/observability/telemetry.py, and only when a collector is named.
With tracing off every call returns ``NO_SPAN``, which does nothing: an instrumented path
costs a method call that returns a constant.

    HTTP request (FastAPI, SERVER; its parent: the client's ``traceparent``)
    └ turn ─┬ attempt ─┬ tool · approval · question · event.append
            │          └ events: first_text, retry.scheduled (the CLI's own retry)
            ├ retry.wait · usage_limit.wait · failover
            └ store.<call> · store.insert_events      (store calls only inside a trace)
    forward <op> (CLIENT) ── traceparent in the signed command ──► command <op> (SERVER)

Spans carry ids, kinds, counts and timings, never text a user or an agent wrote (prompts,
outputs, tool input, error messages): a collector is another system, and nothing secret or
private goes there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager
from contextvars import Token
from types import TracebackType
from typing import Literal, Self

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

Attributes = Mapping[str, AttributeValue | None]
"""A span's attributes; those None are left out."""
Kind = Literal["internal", "client", "server"]

_KINDS = {
    "internal": trace.SpanKind.INTERNAL,
    "client": trace.SpanKind.CLIENT,
    "server": trace.SpanKind.SERVER,
}
_OURS = otel_context.create_key("agent_gateway.span")
"""Where an entered span keeps itself in the context, for ``Tracer.current``."""
_W3C = TraceContextTextMapPropagator()
MAX_LINKS = 32


class Span:
    """A span of the gateway's, used as a context manager (current inside, ended on exit) or
    ended with ``end``. This base is ``NO_SPAN``: tracing is off, or nothing is traced here."""

    recording = False

    def set(self, attributes: Attributes) -> None:
        """Add attributes (None values are left out)."""

    def event(self, name: str, attributes: Attributes | None = None) -> None:
        """Note a moment of the span (``first_text``)."""

    def fail(self, kind: str) -> None:
        """Mark the span failed, with the failure's kind as ``error.type`` (no message: it
        may quote what a collector must not see)."""

    def child(self, name: str, attributes: Attributes | None = None) -> Span:
        """A span under this one (whatever task is running), started now."""
        return self

    def open_child(self, key: str, name: str, attributes: Attributes | None = None) -> None:
        """Start a child that ``close_child(key)`` ends (a tool call told by two events); one
        still open when this span ends is ended with it."""

    def close_child(self, key: str, attributes: Attributes | None = None) -> None:
        """End the child ``open_child`` started under ``key`` (nothing if there is none)."""

    def end(self) -> None:
        """End the span (it is exported from then on)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        return None


NO_SPAN = Span()


class _Live(Span):
    """A recording span of the SDK's."""

    recording = True

    def __init__(self, tracer: trace.Tracer, span: trace.Span) -> None:
        self._tracer = tracer
        self._span = span
        self._children: dict[str, trace.Span] = {}
        self._token: Token[Context] | None = None

    def set(self, attributes: Attributes) -> None:
        self._span.set_attributes({k: v for k, v in attributes.items() if v is not None})

    def event(self, name: str, attributes: Attributes | None = None) -> None:
        self._span.add_event(name, attributes or {})

    def fail(self, kind: str) -> None:
        self._span.set_attribute("error.type", kind)
        self._span.set_status(trace.StatusCode.ERROR)

    def child(self, name: str, attributes: Attributes | None = None) -> Span:
        return _Live(self._tracer, self._start(name, attributes))

    def open_child(self, key: str, name: str, attributes: Attributes | None = None) -> None:
        self.close_child(key)
        self._children[key] = self._start(name, attributes)

    def close_child(self, key: str, attributes: Attributes | None = None) -> None:
        child = self._children.pop(key, None)
        if child is not None:
            if attributes:
                child.set_attributes({k: v for k, v in attributes.items() if v is not None})
            child.end()

    def _start(self, name: str, attributes: Attributes | None) -> trace.Span:
        parent = trace.set_span_in_context(self._span, Context())
        return self._tracer.start_span(name, parent, attributes=_kept(attributes))

    def end(self) -> None:
        for key in list(self._children):
            self.close_child(key, {"gateway.unfinished": True})
        self._span.end()

    def __enter__(self) -> Self:
        context = trace.set_span_in_context(self._span)
        self._token = otel_context.attach(otel_context.set_value(_OURS, self, context))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if isinstance(exc, asyncio.CancelledError):
            self._span.set_attribute("gateway.cancelled", True)
        elif exc is not None:
            self.fail(type(exc).__name__)
        if self._token is not None:
            otel_context.detach(self._token)
            self._token = None
        self.end()


class Tracer:
    """Makes the gateway's spans; ``OFF`` (no SDK tracer) makes only ``NO_SPAN``."""

    def __init__(self, tracer: trace.Tracer | None = None) -> None:
        self._tracer = tracer
        self.on = tracer is not None

    def span(
        self,
        name: str,
        attributes: Attributes | None = None,
        *,
        kind: Kind = "internal",
        carrier: Mapping[str, str] | None = None,
        context: object | None = None,
        links: Iterable[object] = (),
    ) -> Span:
        """A span started now: under the current span, or the one ``carrier`` (W3C headers)
        or ``context`` (from ``context()``) names; ``links`` are other contexts it serves."""
        if self._tracer is None:
            return NO_SPAN
        parent = _W3C.extract(carrier) if carrier is not None else _context(context)
        span = self._tracer.start_span(
            name, parent, kind=_KINDS[kind], attributes=_kept(attributes), links=_links(links)
        )
        return _Live(self._tracer, span)

    def inside(self, name: str, attributes: Attributes | None = None) -> Span:
        """A span under the current one only when a span is being recorded here (a store
        call inside a request or a turn); never a trace of its own (a heartbeat)."""
        if self._tracer is None or not trace.get_current_span().is_recording():
            return NO_SPAN
        return _Live(self._tracer, self._tracer.start_span(name, attributes=_kept(attributes)))

    def current(self) -> Span:
        """The gateway's span entered here (as ``with``) and still recording, else NO_SPAN."""
        if self._tracer is None:
            return NO_SPAN
        span = otel_context.get_value(_OURS)
        return span if isinstance(span, _Live) else NO_SPAN

    def context(self) -> object | None:
        """The current context when a span is being recorded in it (to parent work another
        task does for it), else None."""
        if self._tracer is None or not trace.get_current_span().is_recording():
            return None
        return otel_context.get_current()

    def within(self, context: object | None) -> AbstractContextManager[object]:
        """Run a block in ``context`` (from ``context()``; None: outside any trace), whatever
        context the task inherited: its log lines and spans belong there."""
        if self._tracer is None:
            return NO_SPAN
        return _Within(_context(context) or Context())

    def inject(self) -> dict[str, str]:
        """The current span as W3C ``traceparent`` (and ``tracestate``) headers; {} when off."""
        carrier: dict[str, str] = {}
        if self._tracer is not None:
            _W3C.inject(carrier)
        return carrier


class _Within:
    def __init__(self, context: Context) -> None:
        self._context = context
        self._token: Token[Context] | None = None

    def __enter__(self) -> object:
        self._token = otel_context.attach(self._context)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            otel_context.detach(self._token)


OFF = Tracer()
"""The tracer when tracing is off."""


def _context(value: object | None) -> Context | None:
    return value if isinstance(value, Context) else None


def _links(contexts: Iterable[object]) -> list[trace.Link]:
    """Links to the spans of ``contexts`` (``Tracer.context`` values), each span once."""
    seen: dict[int, trace.Link] = {}
    for value in contexts:
        linked = trace.get_current_span(_context(value)).get_span_context()
        if linked.is_valid and len(seen) < MAX_LINKS:
            seen.setdefault(linked.span_id, trace.Link(linked))
    return list(seen.values())


def _kept(attributes: Attributes | None) -> dict[str, AttributeValue] | None:
    if not attributes:
        return None
    return {k: v for k, v in attributes.items() if v is not None}
