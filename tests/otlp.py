"""A collector for the tests: OTLP/HTTP traces received on 127.0.0.1 and decoded.

``OtlpReceiver`` serves ``POST /v1/traces`` (protobuf ``ExportTraceServiceRequest``, gzip or
not) on a free loopback port from a thread of its own and keeps every span it gets as a
``ReceivedSpan``; ``wait_for`` blocks until the spans received satisfy a test (woken by each
export, bounded by a timeout). The benchmarks use it as the collector they export to.
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

T = TypeVar("T")
KINDS = {0: "unspecified", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}


@dataclass(frozen=True)
class ReceivedSpan:
    trace_id: str
    span_id: str
    parent_id: str
    """Empty for a root span."""
    name: str
    kind: str
    attributes: dict[str, Any]
    resource: dict[str, Any]
    events: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    """The span ids it links to."""
    failed: bool = False
    start_ns: int = 0
    end_ns: int = 0


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


def _attributes(pairs: Sequence[KeyValue]) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


def decode(body: bytes) -> list[ReceivedSpan]:
    """The spans of one ``ExportTraceServiceRequest``."""
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope in resource_spans.scope_spans:
            for span in scope.spans:
                spans.append(
                    ReceivedSpan(
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_id=span.parent_span_id.hex(),
                        name=span.name,
                        kind=KINDS.get(span.kind, str(span.kind)),
                        attributes=_attributes(span.attributes),
                        resource=resource,
                        events=[event.name for event in span.events],
                        links=[link.span_id.hex() for link in span.links],
                        failed=span.status.code == 2,  # STATUS_CODE_ERROR
                        start_ns=span.start_time_unix_nano,
                        end_ns=span.end_time_unix_nano,
                    )
                )
    return spans


class OtlpReceiver:
    """An OTLP/HTTP trace receiver on 127.0.0.1 (``endpoint``: its base URL)."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.requests = 0
        self._changed = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path != "/v1/traces":
                    self.send_error(404)
                    return
                receiver._received(decode(body))
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def _received(self, spans: list[ReceivedSpan]) -> None:
        with self._changed:
            self.requests += 1
            self.spans.extend(spans)
            self._changed.notify_all()

    def wait_for(
        self, found: Callable[[list[ReceivedSpan]], T | None], *, timeout: float = 20.0, what: str
    ) -> T:
        """``found(spans received so far)`` once it is not None (or False), re-checked at each
        export; AssertionError naming ``what`` and the spans received after ``timeout``."""
        with self._changed:
            result = self._changed.wait_for(lambda: found(list(self.spans)), timeout=timeout)
            if not result:
                names = sorted({(s.name, s.trace_id[:8]) for s in self.spans})
                raise AssertionError(f"no {what} within {timeout} s; received {names}")
            return result

    def trace(self, trace_id: str) -> list[ReceivedSpan]:
        with self._changed:
            return [span for span in self.spans if span.trace_id == trace_id]

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


def by_name(spans: Sequence[ReceivedSpan], name: str) -> Iterator[ReceivedSpan]:
    return (span for span in spans if span.name == name)
