"""The ``[telemetry]`` section of the configuration: OpenTelemetry traces sent over OTLP/HTTP
(docs/operations/observability.md, "Traces").

Tracing is off unless a collector is named, here (``otlp_endpoint``) or by the standard
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_ENDPOINT`` variables; off, the
OpenTelemetry SDK is not even imported. ``export_of`` decides, from these settings and the
environment, where spans go; app/observability/telemetry.py builds the exporter.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

DEFAULT_SERVICE_NAME = "agent-gateway"
TRACES_PATH = "/v1/traces"
PROTOCOL = "http/protobuf"
"""The one OTLP protocol the gateway speaks (a collector's port 4318)."""


class TelemetrySettings(BaseModel):
    """Where and how the gateway's traces are exported (unset: not at all)."""

    model_config = ConfigDict(extra="forbid")

    otlp_endpoint: str | None = None
    """The collector's OTLP/HTTP address, ``http://127.0.0.1:4318`` (``/v1/traces`` is added
    unless the path already ends with it). Unset: ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or
    ``OTEL_EXPORTER_OTLP_ENDPOINT``, else tracing is off."""
    service_name: str | None = None
    """``service.name`` of every span; default ``OTEL_SERVICE_NAME``, else agent-gateway
    (``service.instance.id`` is ``cluster.replica_id``)."""
    headers: dict[str, SecretStr] = {}
    """Headers sent with every export (a collector's API key, ``{ "x-api-key" = "…" }``); default
    ``OTEL_EXPORTER_OTLP_TRACES_HEADERS`` / ``OTEL_EXPORTER_OTLP_HEADERS``. Masked in logs."""
    timeout_s: float = Field(default=10.0, gt=0, le=120)
    """The longest one export may take (it runs on the exporter's own thread, never on a
    request's path); at shutdown, the most the last spans may hold up the exit."""

    @field_validator("otlp_endpoint")
    @classmethod
    def _http_url(cls, url: str | None) -> str | None:
        if url is not None and not _is_http_url(url):
            raise ValueError(
                f"{url!r} is not an http:// or https:// URL; name the collector's OTLP/HTTP "
                "address, e.g. http://127.0.0.1:4318"
            )
        return url

    def secrets(self) -> list[str]:
        """Header values the logs must never show."""
        return [value.get_secret_value() for value in self.headers.values()]


@dataclass(frozen=True, kw_only=True)
class Export:
    """Where the spans go and as what service."""

    endpoint: str
    """The full URL spans are POSTed to (``…/v1/traces``)."""
    service_name: str
    headers: dict[str, str] | None
    """None: the exporter reads the standard ``OTEL_EXPORTER_OTLP_*HEADERS`` variables."""
    timeout_s: float


class TelemetryRefused(ValueError):
    """The environment asks for an export the gateway cannot make; the message says why."""


def export_of(settings: TelemetrySettings, environ: Mapping[str, str]) -> Export | None:
    """Where these settings and the ``OTEL_*`` variables send spans; None: tracing is off.

    ``OTEL_SDK_DISABLED=true`` turns it off whatever else is set; ``OTEL_TRACES_EXPORTER=none``
    turns off an export named only by the variables. Raises ``TelemetryRefused`` for a
    protocol other than http/protobuf or a variable that is not an http(s) URL.
    """
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    endpoint = settings.otlp_endpoint and _traces_url(settings.otlp_endpoint)
    if endpoint is None:
        if environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() == "none":
            return None
        endpoint = _from_environment(environ)
        if endpoint is None:
            return None
    protocol = (
        environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or PROTOCOL
    ).strip()
    if protocol != PROTOCOL:
        raise TelemetryRefused(
            f"OTEL_EXPORTER_OTLP_PROTOCOL is {protocol!r}: the gateway exports traces over "
            f"OTLP/HTTP with protobuf only; set it to {PROTOCOL} and point the endpoint at the "
            "collector's HTTP port (4318)"
        )
    headers = {name: value.get_secret_value() for name, value in settings.headers.items()}
    return Export(
        endpoint=endpoint,
        service_name=settings.service_name
        or environ.get("OTEL_SERVICE_NAME", "").strip()
        or DEFAULT_SERVICE_NAME,
        headers=headers or None,
        timeout_s=settings.timeout_s,
    )


def _from_environment(environ: Mapping[str, str]) -> str | None:
    """The traces URL the standard variables name (the signal's own one as it is, the
    general one with ``/v1/traces`` added), or None."""
    for name, add_path in (
        ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", False),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", True),
    ):
        value = environ.get(name, "").strip()
        if not value:
            continue
        if not _is_http_url(value):
            raise TelemetryRefused(f"{name} is {value!r}, not an http:// or https:// URL")
        return _traces_url(value) if add_path else value
    return None


def shown(url: str) -> str:
    """``url`` as logs and ``doctor`` show it: without a user, password or query."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port is not None else ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


def _traces_url(base: str) -> str:
    trimmed = base.rstrip("/")
    return trimmed if trimmed.endswith(TRACES_PATH) else trimmed + TRACES_PATH


def _is_http_url(value: str) -> bool:
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)
