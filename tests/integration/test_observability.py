"""Structured logs and /metrics of a running gateway (the fake ``claude``; the real CLIs'
turn metrics are checked in tests/e2e/test_claude_e2e.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.gateway import FakeGateway, fake_gateway_at
from tests.gateway import TOKEN, SseReader, is_turn_end, log_lines, metric, scrape, wait_until

PROVIDER_KEY = "sk-ant-api03-OBSERVEobserve0123456789-abcdefABCDEF"
ALICE = "alice-key-0123456789abcdefghijklmnopqrstuvwxyz"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeGateway]:
    base = tmp_path_factory.mktemp("observability")
    gateway = fake_gateway_at(
        base,
        server={"api_keys": [{"name": "alice", "token": ALICE}], "loop_lag_probe_s": 0.01},
        claude_code={
            "env": {
                "FAKE_CLAUDE_LOG": str(base / "spawns.jsonl"),
                "ANTHROPIC_API_KEY": PROVIDER_KEY,
            }
        },
    )
    gateway.start()
    yield gateway
    gateway.stop()


def run_turn(client: httpx.Client, workspace: Path, prompt: str) -> tuple[str, str, dict[str, Any]]:
    """Create a session, then run one turn followed live over SSE; the ids and the last event."""
    created = client.post(
        "/v1/sessions", json={"provider": "claude_code", "workspace": str(workspace)}
    )
    assert created.status_code == 201, created.text
    session = created.json()
    sid = session["id"]
    headers = {"Accept": "text/event-stream", "Last-Event-ID": str(session["last_seq"])}
    with client.stream("GET", f"/v1/sessions/{sid}/events", headers=headers) as response:
        assert response.status_code == 200
        turn = client.post(f"/v1/sessions/{sid}/turns", json={"prompt": prompt})
        assert turn.status_code == 202, turn.text
        end = SseReader(response).until(is_turn_end)[-1]
    return sid, turn.json()["id"], end


def test_a_failed_provider_is_logged_with_its_ids_and_without_the_secret(
    gateway: FakeGateway,
) -> None:
    with gateway.client() as client:
        sid, tid, end = run_turn(client, gateway.workspace, "fail-auth-echo")
        assert end["type"] == "turn.failed"
        assert end["data"]["error"]["kind"] == "auth"
        assert client.delete(f"/v1/sessions/{sid}").status_code == 200

        def line(event: str) -> dict[str, Any] | None:
            return next(
                (
                    entry
                    for entry in log_lines(gateway)
                    if entry.get("event") == event and entry.get("session_id") == sid
                ),
                None,
            )

        failed = wait_until(lambda: line("provider.failed"), what="the provider.failed line")
        assert failed["turn_id"] == tid
        assert failed["provider"] == "claude_code"
        assert failed["kind"] == "auth"
        assert failed["level"] == "warning"
        assert "401" in failed["msg"]
        assert "[redacted]" in failed["msg"]  # the CLI quoted the key; the log does not
        assert PROVIDER_KEY not in gateway.log()

        started = wait_until(lambda: line("process.started"), what="the process.started line")
        assert started["turn_id"] == tid  # logged inside the turn: the ids come from context
        assert started["pid"] > 0
        exited = wait_until(lambda: line("process.exited"), what="the process.exited line")
        assert exited["pid"] == started["pid"]
        assert exited["outcome"] in {"exited", "failed", "signalled"}
        assert "exit_code" in exited or "signal" in exited
        assert "peak_rss_bytes" in exited
        assert exited["lifetime_s"] >= 0
        turn_started = line("turn.started")
        assert turn_started is not None
        assert turn_started["turn_id"] == tid


def test_metrics_count_turns_failures_processes_and_sessions(gateway: FakeGateway) -> None:
    with gateway.client() as client:
        before = scrape(client)
        _, _, end = run_turn(client, gateway.workspace, "fail-auth")
        assert end["type"] == "turn.failed"
        _, _, done = run_turn(client, gateway.workspace, "hello")
        assert done["type"] == "turn.completed"
        after = scrape(client)

    def grew(name: str, **labels: str) -> float:
        return metric(after, name, **labels) - metric(before, name, **labels)

    assert grew("agent_gateway_turns_total", provider="claude_code", outcome="failed") == 1
    assert grew("agent_gateway_turns_total", provider="claude_code", outcome="completed") == 1
    assert grew("agent_gateway_turn_failures_total", provider="claude_code", kind="auth") == 1
    assert (
        grew(
            "agent_gateway_turn_duration_seconds_count", provider="claude_code", outcome="completed"
        )
        == 1
    )
    assert grew("agent_gateway_events_total", type="turn.started") == 2
    assert grew("agent_gateway_process_starts_total", provider="claude_code") >= 2
    assert metric(after, "agent_gateway_live_processes", provider="claude_code") >= 2
    assert metric(after, "agent_gateway_sessions", status="idle") >= 2
    # Both turns were followed live over SSE; one delay sample per hand-over, and each turn's
    # events reached the stream in one hand-over or more.
    assert grew("agent_gateway_event_delivery_lag_seconds_count", transport="sse") >= 2


def test_metrics_sample_the_event_loops_lag(gateway: FakeGateway) -> None:
    name = "agent_gateway_event_loop_lag_seconds_count"
    with gateway.client() as client:
        first = metric(scrape(client), name)
        # Sampled every 10 ms (server.loop_lag_probe_s): the count keeps growing.
        wait_until(lambda: metric(scrape(client), name) >= first + 5, timeout=10)
        after = scrape(client)
    assert metric(after, "agent_gateway_event_loop_lag_seconds_bucket", le="+Inf") == metric(
        after, name
    )


def test_metrics_need_an_admin_key(gateway: FakeGateway) -> None:
    url = gateway.base_url + "/metrics"
    refused = httpx.get(url)
    assert refused.status_code == 401
    assert refused.headers["content-type"] == "application/problem+json"
    forbidden = httpx.get(url, headers={"Authorization": f"Bearer {ALICE}"})
    assert forbidden.status_code == 403
    assert "admin" in forbidden.json()["detail"]
    allowed = httpx.get(url, headers={"Authorization": f"Bearer {TOKEN}"})
    assert allowed.status_code == 200
    assert "# TYPE agent_gateway_turns_total counter" in allowed.text


def test_every_line_the_gateway_writes_is_one_json_object(gateway: FakeGateway) -> None:
    with gateway.client() as client:  # a request, so uvicorn's access log has a line too
        assert client.get("/readyz").status_code == 200
    text = wait_until(
        lambda: (
            '"uvicorn.access"' in gateway.log()
            and '"server.ready"' in gateway.log()
            and gateway.log()
        ),
        timeout=30,
    )
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    assert all(
        isinstance(line, dict) and {"ts", "level", "logger", "msg"} <= set(line) for line in lines
    )
    ready = next(line for line in lines if line.get("event") == "server.ready")
    assert gateway.base_url in ready["msg"]
    assert TOKEN not in text
