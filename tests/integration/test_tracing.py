"""OpenTelemetry traces of a real gateway (the fake ``claude``), sent over OTLP/HTTP to a
receiver on 127.0.0.1 (tests/otlp.py): a turn's request → turn → attempt under the client's
``traceparent``, its approval wait and retry, its store writes, the trace ids in the log, a
command forwarded between two replicas; and, tracing off, nothing exported and no SDK loaded.
"""

from __future__ import annotations

import json
import secrets
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect as ws_connect

from tests.dbservers import PostgresServer, RedisServer
from tests.fakes.gateway import FakeGateway, fake_gateway_at
from tests.gateway import TOKEN, SseReader, log_lines
from tests.integration.callers import create
from tests.integration.replicas import first_turn_on, two_replicas
from tests.integration.streams import (
    AUTH,
    envelopes,
    is_end,
    read_frames,
    sse_headers,
    turn_events,
    ws_frames,
    ws_url,
)
from tests.otlp import OtlpReceiver, ReceivedSpan, by_name

PROBE = (
    "import json, sys\n"
    "from app.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "names = ('opentelemetry', 'google.protobuf', 'app.observability')\n"
    "loaded = sorted(m for m in sys.modules if m.startswith(names))\n"
    "print(json.dumps({'event': 'probe.modules', 'modules': loaded}), flush=True)\n"
    "sys.exit(code)\n"
)
"""The gateway (``-c PROBE serve``) that, once stopped, logs the OpenTelemetry, protobuf and
observability modules it had loaded."""
FAST_EXPORT = {"OTEL_BSP_SCHEDULE_DELAY": "100"}
"""Spans go out a tenth of a second after they end (the SDK's default waits 5 s)."""
PROMPT = "a-prompt-no-collector-may-see"
REQUEST = "POST /v1/sessions/{session_id}/turns"
TRACING_MODULES = (
    "opentelemetry.sdk.trace",
    "opentelemetry.exporter",
    "opentelemetry.proto",
    "google.protobuf",
    "app.observability.spanfilter",
)
"""What only tracing loads: the SDK's tracing, the exporter, protobuf. (redis-py imports the
SDK's metrics package itself whenever the SDK is installed, to offer metrics of its own.)"""


def client_span() -> tuple[str, str, dict[str, str]]:
    """A client's trace id and span id, and the ``traceparent`` header naming them."""
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return trace_id, span_id, {"traceparent": f"00-{trace_id}-{span_id}-01"}


def probed(gateway: FakeGateway) -> FakeGateway:
    gateway.entry = ("-c", PROBE)
    return gateway


def loaded_modules(gateway: FakeGateway) -> list[str]:
    """The OpenTelemetry modules the stopped gateway had loaded."""
    line = next(entry for entry in log_lines(gateway) if entry.get("event") == "probe.modules")
    modules: list[str] = line["modules"]
    return modules


def one(spans: list[ReceivedSpan], name: str, **attributes: Any) -> ReceivedSpan:
    found = [
        span
        for span in by_name(spans, name)
        if all(span.attributes.get(k) == v for k, v in attributes.items())
    ]
    assert len(found) == 1, (name, attributes, spans)
    return found[0]


def spans_of(receiver: OtlpReceiver, trace_id: str, *names: str) -> list[ReceivedSpan]:
    """The trace's spans once every name in ``names`` has arrived (spans arrive as they end)."""

    def complete(spans: list[ReceivedSpan]) -> list[ReceivedSpan] | None:
        mine = [span for span in spans if span.trace_id == trace_id]
        return mine if set(names) <= {span.name for span in mine} else None

    return receiver.wait_for(complete, what=f"spans {names} of trace {trace_id}")


def run_turn(
    client: httpx.Client, sid: str, prompt: str, headers: dict[str, str]
) -> tuple[str, list[dict[str, Any]]]:
    """Start a turn with ``headers``; its id and its events up to its end."""
    after = client.get(f"/v1/sessions/{sid}").json()["last_seq"]
    response = client.post(f"/v1/sessions/{sid}/turns", json={"prompt": prompt}, headers=headers)
    assert response.status_code == 202, response.text
    return response.json()["id"], turn_events(client, sid, after)


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as receiver:
        yield receiver


@pytest.fixture(scope="module")
def traced(
    tmp_path_factory: pytest.TempPathFactory, receiver: OtlpReceiver
) -> Iterator[FakeGateway]:
    """A gateway tracing to ``receiver`` as ``gw-under-test``, retrying after 0.2 s."""
    gateway = fake_gateway_at(
        tmp_path_factory.mktemp("traced"),
        telemetry={"otlp_endpoint": receiver.endpoint, "service_name": "gw-under-test"},
        retry={"strategies": {"default": {"delays_s": [0.2]}}},
    )
    gateway.extra_env = dict(FAST_EXPORT)
    gateway.start()
    yield gateway
    gateway.stop()


def test_a_turn_is_traced_from_the_clients_traceparent_through_request_turn_and_attempt(
    traced: FakeGateway, receiver: OtlpReceiver
) -> None:
    trace_id, parent, headers = client_span()
    with traced.client() as client:
        sid = create(client, traced)
        tid, events = run_turn(client, sid, PROMPT, headers)
    assert events[-1]["type"] == "turn.completed"
    spans = spans_of(receiver, trace_id, REQUEST, "turn", "attempt", "store.insert_events")

    request = one(spans, REQUEST)
    assert (request.kind, request.parent_id) == ("server", parent)
    assert request.attributes["http.response.status_code"] == 202
    assert request.resource["service.name"] == "gw-under-test"
    turn = one(spans, "turn")
    assert turn.parent_id == request.span_id
    assert turn.attributes["gateway.turn_id"] == tid
    assert turn.attributes["gateway.session_id"] == sid
    assert turn.attributes["gateway.status"] == "completed"
    assert turn.attributes["gen_ai.usage.output_tokens"] == 2
    attempt = one(spans, "attempt")
    assert attempt.parent_id == turn.span_id
    assert attempt.attributes["gateway.attempt"] == 1
    assert attempt.attributes["gateway.provider"] == "claude_code"
    assert "first_text" in attempt.events
    assert turn.start_ns <= attempt.start_ns <= attempt.end_ns <= turn.end_ns

    # Store writes: the turn's row under the request, its events under the turn's spans.
    ids = {span.span_id for span in spans}
    assert one(spans, "store.add_turn").parent_id == request.span_id
    writes = list(by_name(spans, "store.insert_events"))
    assert all(write.parent_id in ids for write in writes)
    assert {write.parent_id for write in writes} >= {attempt.span_id, turn.span_id}
    assert any(span.name.startswith("store.") and span.parent_id == turn.span_id for span in spans)
    # Ids, kinds and counts only: the prompt (and the agent's reply) never leave.
    exported = json.dumps([span.attributes for span in receiver.spans])
    assert PROMPT not in exported
    assert "fake reply" not in exported

    # The log lines written inside the turn name its trace.
    lines = [entry for entry in log_lines(traced) if entry.get("turn_id") == tid]
    assert lines
    assert {entry.get("trace_id") for entry in lines} == {trace_id}
    assert all(len(entry["span_id"]) == 16 for entry in lines)


def test_a_stream_opened_with_the_key_in_its_query_is_traced_without_it(
    traced: FakeGateway, receiver: OtlpReceiver
) -> None:
    trace_id, _, headers = client_span()
    with traced.client() as client:
        sid = create(client, traced)
    with (
        httpx.Client(base_url=traced.base_url, timeout=30.0) as anonymous,
        anonymous.stream(
            "GET",
            f"/v1/sessions/{sid}/events",
            params={"access_token": TOKEN},
            headers={**sse_headers(0), **headers},
        ) as response,
    ):
        assert response.status_code == 200
        next(iter(SseReader(response)))  # session.created: the stream is served
    stream = one(
        spans_of(receiver, trace_id, "GET /v1/sessions/{session_id}/events"),
        "GET /v1/sessions/{session_id}/events",
    )
    assert "access_token=" in stream.attributes["url.query"]
    assert TOKEN not in json.dumps(stream.attributes)


def test_a_turn_started_over_the_websocket_is_under_the_connections_span(
    traced: FakeGateway, receiver: OtlpReceiver
) -> None:
    trace_id, parent, headers = client_span()
    with traced.client() as client:
        sid = create(client, traced)
    with ws_connect(ws_url(traced, sid), additional_headers={**AUTH, **headers}) as ws:
        ws.send(json.dumps({"type": "turn.start", "prompt": "hi"}))
        done = ws_frames(ws, lambda f: f.get("type") == "turn.completed")
    connection_name = "WS /v1/sessions/{session_id}/ws"
    spans = spans_of(receiver, trace_id, connection_name, "turn", "attempt")
    connection = one(spans, connection_name)
    assert (connection.kind, connection.parent_id) == ("server", parent)
    turn = one(spans, "turn")
    assert turn.parent_id == connection.span_id
    assert turn.attributes["gateway.turn_id"] == done[-1]["turn_id"]


def test_an_approval_wait_and_a_retry_are_spans_of_their_turn(
    traced: FakeGateway, receiver: OtlpReceiver
) -> None:
    asked_trace, _, asked_headers = client_span()
    retried_trace, _, retried_headers = client_span()
    with traced.client() as client:
        sid = create(client, traced)
        after = client.get(f"/v1/sessions/{sid}").json()["last_seq"]
        started = client.post(
            f"/v1/sessions/{sid}/turns", json={"prompt": "ask:true"}, headers=asked_headers
        )
        assert started.status_code == 202, started.text
        with client.stream("GET", f"/v1/sessions/{sid}/events", headers=sse_headers(after)) as r:
            reader = SseReader(r)
            asked = envelopes(
                read_frames(
                    reader, lambda f: f.event is None and f.json()["type"] == "approval.requested"
                )
            )
            approval_id = asked[-1]["data"]["approval_id"]
            answer = client.post(
                f"/v1/sessions/{sid}/approvals/{approval_id}", json={"decision": "allow"}
            )
            assert answer.status_code == 200, answer.text
            assert envelopes(read_frames(reader, is_end))[-1]["type"] == "turn.completed"
        _, events = run_turn(client, sid, "flaky:1", retried_headers)
    assert [e["type"] for e in events].count("retry.scheduled") == 1
    assert events[-1]["type"] == "turn.completed"

    spans = spans_of(receiver, asked_trace, "turn", "attempt", "approval")
    approval = one(spans, "approval")
    assert approval.parent_id == one(spans, "attempt").span_id
    assert approval.attributes["gateway.decision"] == "allow"
    assert approval.attributes["gen_ai.tool.name"] == "Bash"
    # The wait is the time between the agent asking and the client answering.
    assert approval.end_ns - approval.start_ns > 0

    spans = spans_of(receiver, retried_trace, "turn", "retry.wait")
    turn = one(spans, "turn")
    assert turn.attributes["gateway.status"] == "completed"
    first = one(spans, "attempt", **{"gateway.attempt": 1})
    second = one(spans, "attempt", **{"gateway.attempt": 2})
    assert first.failed
    assert first.attributes["error.type"] == "overloaded"
    assert first.attributes["gateway.error.retryable"] is True
    assert not second.failed
    assert second.attributes["gateway.status"] == "completed"
    wait = one(spans, "retry.wait")
    assert {first.parent_id, second.parent_id, wait.parent_id} == {turn.span_id}
    assert wait.attributes["gateway.retry.delay_s"] == 0.2
    assert wait.attributes["gateway.retry.kind"] == "overloaded"
    assert first.end_ns <= wait.start_ns <= wait.end_ns <= second.start_ns


def test_with_tracing_off_nothing_is_exported_and_the_sdk_is_never_loaded(
    tmp_path: Path,
) -> None:
    with OtlpReceiver() as receiver:
        gateway = probed(fake_gateway_at(tmp_path))
        # A collector listens on loopback, but nothing names it: nothing may reach it.
        gateway.extra_env = dict(FAST_EXPORT)
        gateway.start()
        _, _, headers = client_span()
        try:
            with gateway.client() as client:
                sid = create(client, gateway)
                _, events = run_turn(client, sid, "hi", headers)
                assert events[-1]["type"] == "turn.completed"
        finally:
            assert gateway.stop() == 0
        assert receiver.requests == 0
    modules = loaded_modules(gateway)
    assert not [m for m in modules if m.startswith(TRACING_MODULES)], modules
    assert "opentelemetry.trace" in modules  # the API only (FastAPI imports it)
    assert not any("trace_id" in entry for entry in log_lines(gateway))


def test_the_standard_variables_turn_tracing_on_and_then_the_sdk_is_loaded(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    gateway = probed(fake_gateway_at(tmp_path))
    gateway.extra_env = {
        **FAST_EXPORT,
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_SERVICE_NAME": "from-the-environment",
    }
    gateway.start()
    trace_id, parent, headers = client_span()
    try:
        with gateway.client() as client:
            sid = create(client, gateway)
            run_turn(client, sid, "hi", headers)
    finally:
        assert gateway.stop() == 0
    spans = receiver.trace(trace_id)  # the last spans are exported before the exit
    assert one(spans, REQUEST).parent_id == parent
    assert {span.resource["service.name"] for span in spans} == {"from-the-environment"}
    modules = loaded_modules(gateway)
    assert {"opentelemetry.sdk.trace", "opentelemetry.exporter.otlp.proto.http"} <= set(modules)


def test_a_collector_that_never_answers_holds_up_neither_the_turns_nor_the_stop(
    tmp_path: Path,
) -> None:
    with socket.socket() as silent:  # it listens and never reads: every export waits it out
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        endpoint = f"http://127.0.0.1:{silent.getsockname()[1]}"
        gateway = fake_gateway_at(tmp_path, telemetry={"otlp_endpoint": endpoint, "timeout_s": 1})
        gateway.extra_env = dict(FAST_EXPORT)
        gateway.start()
        try:
            with gateway.client() as client:
                sid = create(client, gateway)
                for _ in range(3):  # exports time out behind them, one after the other
                    _, events = run_turn(client, sid, "hi", client_span()[2])
                    assert events[-1]["type"] == "turn.completed"
        finally:
            began = time.monotonic()
            assert gateway.stop() == 0
        # The last spans get telemetry.timeout_s (and a second) at the exit, not more.
        assert time.monotonic() - began < 8, gateway.log()[-3000:]


def test_doctor_says_where_spans_go_and_an_export_the_gateway_cannot_make_stops_the_start(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    def tracing_row(doctor: str) -> list[str]:
        return next(
            x.split() for x in doctor.splitlines() if x.split()[:2] == ["gateway", "tracing"]
        )

    gateway = fake_gateway_at(tmp_path, telemetry={"otlp_endpoint": receiver.endpoint})
    gateway.data_dir.mkdir(parents=True)
    doctor = gateway.command("doctor", check=False)
    assert tracing_row(doctor.stdout)[2:5] == ["ok", "spans", "to"], doctor.stdout
    assert f"{receiver.endpoint}/v1/traces" in doctor.stdout
    gateway.extra_env = {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
    doctor = gateway.command("doctor", check=False)
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr
    assert tracing_row(doctor.stdout)[2] == "FAIL"
    with pytest.raises(RuntimeError, match="http/protobuf"):
        gateway.start()


def test_a_turn_forwarded_to_the_replica_holding_its_session_stays_in_the_clients_trace(
    tmp_path: Path, postgres: PostgresServer, redis_server: RedisServer, receiver: OtlpReceiver
) -> None:
    with two_replicas(
        tmp_path, postgres, redis_server, telemetry={"otlp_endpoint": receiver.endpoint}
    ) as made:
        for gateway in made.values():
            gateway.extra_env = dict(FAST_EXPORT)
        a, b = made["gw-a"].start(), made["gw-b"].start()
        trace_id, parent, headers = client_span()
        with a.client() as on_a, b.client() as on_b:
            sid = create(on_b, b)
            first_turn_on(on_b, sid)  # B holds the session from now on
            tid, events = run_turn(on_a, sid, "hi", headers)  # asked of A, run by B
        assert events[-1]["type"] == "turn.completed"
        spans = spans_of(
            receiver,
            trace_id,
            REQUEST,
            "forward start_turn",
            "command start_turn",
            "turn",
            "attempt",
        )

    def on(span: ReceivedSpan) -> str:
        replica: str = span.resource["service.instance.id"]
        return replica

    request = one(spans, REQUEST)
    assert (on(request), request.parent_id) == ("gw-a", parent)
    forward = one(spans, "forward start_turn")
    assert (on(forward), forward.kind, forward.parent_id) == ("gw-a", "client", request.span_id)
    assert forward.attributes["gateway.replica"] == "gw-b"
    command = one(spans, "command start_turn")
    assert (on(command), command.kind, command.parent_id) == ("gw-b", "server", forward.span_id)
    turn = one(spans, "turn")
    assert (on(turn), turn.parent_id) == ("gw-b", command.span_id)
    assert turn.attributes["gateway.turn_id"] == tid
    attempt = one(spans, "attempt")
    assert (on(attempt), attempt.parent_id) == ("gw-b", turn.span_id)
