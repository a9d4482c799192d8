"""Tracing's pure parts: where ``[telemetry]`` and the ``OTEL_*`` variables send spans, the
span seam (app/observability/tracing.py) recorded by the real SDK into memory, and the trace
context a forwarded command carries."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import SecretStr

from app.cluster.commands import Command, Inbox, Issuer, Signer, encode_command
from app.observability.telemetry import TELEMETRY_OFF, start_telemetry
from app.observability.tracing import NO_SPAN, OFF, Tracer
from app.redaction import SecretMask, secrets_of
from app.settings import ConfigError, Settings
from app.telemetry_settings import TelemetryRefused, TelemetrySettings, export_of, shown

COLLECTOR = "http://127.0.0.1:4318"


# --- where spans go ----------------------------------------------------------------------------


def test_nothing_named_means_no_export() -> None:
    assert export_of(TelemetrySettings(), {}) is None
    assert start_telemetry(Settings(), SecretMask(), environ={}) is TELEMETRY_OFF


def test_the_setting_names_the_collector_and_the_traces_path_is_added_once() -> None:
    for given in (COLLECTOR, COLLECTOR + "/", COLLECTOR + "/v1/traces"):
        export = export_of(TelemetrySettings(otlp_endpoint=given), {})
        assert export is not None
        assert export.endpoint == COLLECTOR + "/v1/traces"
        assert export.service_name == "agent-gateway"
        assert export.headers is None


def test_the_standard_variables_name_the_collector_and_the_service() -> None:
    general = {"OTEL_EXPORTER_OTLP_ENDPOINT": COLLECTOR, "OTEL_SERVICE_NAME": "gw-east"}
    export = export_of(TelemetrySettings(), general)
    assert export is not None
    assert (export.endpoint, export.service_name) == (COLLECTOR + "/v1/traces", "gw-east")
    own = {**general, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:9999/traces"}
    export = export_of(TelemetrySettings(), own)
    assert export is not None
    assert export.endpoint == "http://127.0.0.1:9999/traces"  # the signal's own: as it is
    configured = TelemetrySettings(otlp_endpoint="http://127.0.0.1:4000", service_name="mine")
    export = export_of(configured, own)
    assert export is not None
    assert (export.endpoint, export.service_name) == ("http://127.0.0.1:4000/v1/traces", "mine")


def test_the_sdk_switches_turn_tracing_off() -> None:
    configured = TelemetrySettings(otlp_endpoint=COLLECTOR)
    assert export_of(configured, {"OTEL_SDK_DISABLED": "true"}) is None
    named = {"OTEL_EXPORTER_OTLP_ENDPOINT": COLLECTOR, "OTEL_TRACES_EXPORTER": "none"}
    assert export_of(TelemetrySettings(), named) is None
    assert export_of(configured, named) is not None  # the gateway's own setting says on


def test_an_export_the_gateway_cannot_make_stops_the_start_saying_why() -> None:
    grpc = {"OTEL_EXPORTER_OTLP_ENDPOINT": COLLECTOR, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
    with pytest.raises(TelemetryRefused, match="http/protobuf"):
        export_of(TelemetrySettings(), grpc)
    with pytest.raises(ConfigError, match=r"telemetry: .*4318"):
        start_telemetry(Settings(), SecretMask(), environ=grpc)
    with pytest.raises(TelemetryRefused, match="OTEL_EXPORTER_OTLP_ENDPOINT"):
        export_of(TelemetrySettings(), {"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"})
    with pytest.raises(ValueError, match="not an http"):
        TelemetrySettings(otlp_endpoint="grpc://collector:4317")


def test_a_collector_url_is_shown_without_its_credentials() -> None:
    assert shown("https://user:pa55@collector:4318/v1/traces?k=v") == (
        "https://collector:4318/v1/traces"
    )
    assert shown("http://[::1]:4318/v1/traces") == "http://[::1]:4318/v1/traces"


def test_export_headers_are_secrets_of_the_gateway() -> None:
    settings = Settings(
        telemetry=TelemetrySettings(
            otlp_endpoint=COLLECTOR, headers={"x-api-key": SecretStr("collector-key-0123456789")}
        )
    )
    export = export_of(settings.telemetry, {})
    assert export is not None
    assert export.headers == {"x-api-key": "collector-key-0123456789"}
    assert "collector-key-0123456789" in secrets_of(settings, "admin-token")


# --- the span seam -------------------------------------------------------------------------------


@pytest.fixture
def recorded() -> Iterator[tuple[Tracer, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield Tracer(provider.get_tracer("test")), exporter
    provider.shutdown()


def named(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    (span,) = [s for s in exporter.get_finished_spans() if s.name == name]
    return span


def parent_of(span: ReadableSpan) -> int:
    assert span.parent is not None, span.name
    return span.parent.span_id


def attributes(span: ReadableSpan) -> Mapping[str, Any]:
    return span.attributes or {}


def test_off_makes_nothing_and_costs_a_constant() -> None:
    with OFF.span("turn", {"gateway.turn_id": "trn_1"}) as span:
        assert span is NO_SPAN
        assert span.child("approval") is NO_SPAN
        assert OFF.inside("store.get_session") is NO_SPAN
        assert OFF.current() is NO_SPAN
    assert OFF.inject() == {}
    assert OFF.context() is None


def test_spans_nest_and_a_child_is_under_its_span_in_any_task(
    recorded: tuple[Tracer, InMemorySpanExporter],
) -> None:
    tracer, exporter = recorded

    async def scenario() -> None:
        with tracer.span("turn", {"gateway.model": None}):
            with tracer.span("attempt") as attempt:
                assert tracer.current() is attempt
                captured = tracer.current()
            # Another task, in a context where the attempt is no longer current.
            await asyncio.create_task(asyncio.to_thread(captured.child("approval").end))
            with tracer.inside("store.update_turn"):
                pass
        with tracer.inside("store.heartbeat"):  # outside any trace: no span
            pass

    asyncio.run(scenario())
    turn, attempt = named(exporter, "turn"), named(exporter, "attempt")
    assert "gateway.model" not in (turn.attributes or {})  # None values are left out
    assert parent_of(attempt) == turn.context.span_id
    assert parent_of(named(exporter, "approval")) == attempt.context.span_id
    assert parent_of(named(exporter, "store.update_turn")) == turn.context.span_id
    assert not [s for s in exporter.get_finished_spans() if s.name == "store.heartbeat"]


def test_a_tool_span_left_open_ends_with_its_attempt_and_a_failure_is_its_kind(
    recorded: tuple[Tracer, InMemorySpanExporter],
) -> None:
    tracer, exporter = recorded
    with tracer.span("attempt") as attempt:
        attempt.open_child("toolu_1", "tool", {"gen_ai.tool.name": "Bash"})
        attempt.open_child("toolu_2", "tool", {"gen_ai.tool.name": "Edit"})
        attempt.close_child("toolu_1", {"gateway.tool.status": "completed"})
        attempt.fail("overloaded")
    tools = {
        attributes(s)["gen_ai.tool.name"]: s
        for s in exporter.get_finished_spans()
        if s.name == "tool"
    }
    assert attributes(tools["Bash"])["gateway.tool.status"] == "completed"
    assert attributes(tools["Edit"])["gateway.unfinished"] is True
    ended = named(exporter, "attempt")
    assert attributes(ended)["error.type"] == "overloaded"
    assert ended.status.is_ok is False


def test_the_context_travels_as_w3c_headers_and_a_batch_links_its_appenders(
    recorded: tuple[Tracer, InMemorySpanExporter],
) -> None:
    tracer, exporter = recorded
    with tracer.span("forward start_turn", kind="client"):
        carrier = tracer.inject()
        first = tracer.context()
    with tracer.span("turn"):
        second = tracer.context()
    assert set(carrier) == {"traceparent"}
    with tracer.span("command start_turn", kind="server", carrier=carrier):
        pass
    with tracer.span("store.insert_events", context=first, links=[second, second]):
        pass
    forward, command = named(exporter, "forward start_turn"), named(exporter, "command start_turn")
    assert command.context.trace_id == forward.context.trace_id
    assert parent_of(command) == forward.context.span_id
    batch = named(exporter, "store.insert_events")
    assert parent_of(batch) == forward.context.span_id
    assert [link.context.span_id for link in batch.links] == [
        named(exporter, "turn").context.span_id
    ]


# --- a forwarded command's trace context -------------------------------------------------------


def _accepted(trace: object) -> Command:
    signer = Signer([b"s" * 32])
    command = Command(
        id="c1",
        op="start_turn",
        args={},
        issuer=Issuer(name="admin", admin=True),
        to="gw-b",
        issued_at=0.0,
        deadline=10.0,
    )
    body = json.loads(encode_command(command, str))
    if trace is None:
        del body["trace"]  # a replica of a version before traces
    else:
        body["trace"] = trace
    times = iter([0.0, 1.0])  # the replica starts as the command is signed; it arrives 1 s on
    inbox = Inbox(signer, replica_id="gw-b", window_s=30, clock=lambda: next(times))
    return inbox.accept(signer.seal("command", json.dumps(body).encode()))


def test_a_forwarded_command_carries_its_trace_headers_and_nothing_else() -> None:
    parent = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
    assert _accepted({"traceparent": parent}).trace == {"traceparent": parent}
    kept = _accepted({"traceparent": parent, "x-other": "1", "tracestate": 7})
    assert kept.trace == {"traceparent": parent}
    assert _accepted(["traceparent", parent]).trace == {}
    assert _accepted({"tracestate": "x" * 600}).trace == {}
    assert _accepted(None).trace == {}
