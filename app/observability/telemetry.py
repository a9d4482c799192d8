"""Tracing on or off, for one app: the OpenTelemetry SDK and its OTLP/HTTP exporter when a
collector is named (app/telemetry_settings.py), nothing at all when none is.

The SDK's modules are imported inside ``start_telemetry``, only when tracing is on, so a
gateway without a collector never loads them (tests/integration/test_tracing.py checks the
process's modules). On, spans are batched and exported by the SDK's own thread: a slow or
missing collector costs the event loop nothing, and spans it cannot take are dropped once the
batch queue is full. The app hands FastAPI the tracer provider, so every HTTP request and
WebSocket connection is a span (its parent the client's ``traceparent``), except the health
and metrics probes; and every log line written inside a span names its trace and span.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fastapi.telemetry import TelemetryConfig

from app import __version__
from app.observability.logs import TraceIds
from app.observability.tracing import OFF, Tracer
from app.redaction import Redactor, SecretMask
from app.settings import ConfigError, Settings
from app.telemetry_settings import Export, TelemetryRefused, export_of, shown

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

log = logging.getLogger(__name__)

UNTRACED_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
"""Probes a load balancer or Prometheus sends every few seconds: not worth a trace each."""
SHUTDOWN_GRACE_S = 1.0
"""Beyond ``telemetry.timeout_s``, how long the last export may hold up the exit."""
OFF_CONFIG: TelemetryConfig = {
    "tracing": False,
    "metrics": False,
    "logs": False,
    "auto_configure": False,
}
"""FastAPI's own telemetry when tracing is off: nothing, whatever another library or
``FASTAPI_OTEL_AUTO_CONFIGURE`` set up."""


@dataclass(frozen=True, kw_only=True)
class Telemetry:
    """What tracing gives an app: its tracer, FastAPI's telemetry configuration, and how to
    stop it."""

    tracer: Tracer
    fastapi: TelemetryConfig
    export: Export | None = None
    _stop: Callable[[], None] | None = None

    async def aclose(self) -> None:
        """Export what is left and stop the exporter; bounded by ``telemetry.timeout_s``."""
        if self._stop is None or self.export is None:
            return
        try:
            async with asyncio.timeout(self.export.timeout_s + SHUTDOWN_GRACE_S):
                await asyncio.to_thread(self._stop)
        except TimeoutError:
            log.warning("the last spans were not exported within telemetry.timeout_s")


TELEMETRY_OFF = Telemetry(tracer=OFF, fastapi=OFF_CONFIG)


def start_telemetry(
    settings: Settings, mask: SecretMask, environ: Mapping[str, str] | None = None
) -> Telemetry:
    """Tracing as ``settings`` and the ``OTEL_*`` variables of ``environ`` (default
    ``os.environ``) ask: off unless they name a collector. Raises ``ConfigError`` for an
    export the gateway cannot make."""
    try:
        export = export_of(settings.telemetry, os.environ if environ is None else environ)
    except TelemetryRefused as exc:
        raise ConfigError(f"telemetry: {exc}") from None
    if export is None:
        return TELEMETRY_OFF
    provider = _provider(export, replica_id=settings.cluster.replica_id, mask=mask)
    trace_ids = TraceIds()
    handlers = list(logging.getLogger().handlers)
    for handler in handlers:
        handler.addFilter(trace_ids)

    def stop() -> None:
        try:
            provider.shutdown()
        finally:
            for handler in handlers:
                handler.removeFilter(trace_ids)

    log.info(
        "tracing: spans go to %s as %s",
        shown(export.endpoint),
        export.service_name,
        extra={"event": "telemetry.started"},
    )
    return Telemetry(
        tracer=Tracer(provider.get_tracer("agent_gateway", __version__)),
        fastapi={
            "tracer_provider": provider,
            "tracing": True,
            "metrics": False,  # Prometheus has them (GET /metrics)
            "logs": False,
            "operation_spans": False,
            "auto_configure": False,
            "exclude": _untraced,
        },
        export=export,
        _stop=stop,
    )


def _untraced(scope: MutableMapping[str, Any]) -> bool:
    return scope.get("path") in UNTRACED_PATHS


def _provider(export: Export, *, replica_id: str, mask: SecretMask) -> TracerProvider:
    """The SDK's tracer provider, exporting in batches to ``export.endpoint``."""
    # Loaded here, and only here: a gateway that does not trace never imports the SDK.
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # noqa: PLC0415
        OTLPSpanExporter,
    )
    from opentelemetry.sdk.resources import Resource  # noqa: PLC0415
    from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
    from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: PLC0415

    from app.observability.spanfilter import query_redactor  # noqa: PLC0415

    resource = Resource.create(
        {
            "service.name": export.service_name,
            "service.version": __version__,
            "service.instance.id": replica_id,
        }
    )
    # The sampler is the SDK's (OTEL_TRACES_SAMPLER; by default every trace whose parent, if
    # any, was sampled).
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    provider.add_span_processor(query_redactor(Redactor(mask)))
    exporter = OTLPSpanExporter(
        endpoint=export.endpoint, headers=export.headers, timeout=export.timeout_s
    )
    provider.add_span_processor(
        BatchSpanProcessor(exporter, export_timeout_millis=export.timeout_s * 1000)
    )
    return provider
