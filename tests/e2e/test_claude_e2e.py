"""Gateway-level behaviour driven through the real Claude Code CLI (the provider contract is
in test_contract.py): approval expiry, SSE reconnection, the WebSocket path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from websockets.sync.client import connect

from tests.e2e.conftest import GatewayFactory
from tests.e2e.test_contract import SSE, create_session, run_turn, start_turn
from tests.gateway import TOKEN, GatewayProcess, SseReader, is_turn_end, log_lines, metric, scrape

pytestmark = pytest.mark.e2e


def test_unanswered_approval_expires_as_a_deny(
    make_gateway: GatewayFactory, workspace: Path
) -> None:
    gateway = make_gateway(sessions={"approval_timeout_s": 1.5}).start()
    with gateway.client() as client:
        session = create_session(client, workspace)
        sid = session["id"]
        events = run_turn(client, sid, "[[tool:bash touch late.txt]]")
        resolved = next(e for e in events if e["type"] == "approval.resolved")["data"]
        assert resolved["reason"] == "expired"
        assert resolved["decision"] == "deny"
        assert events[-1]["type"] == "turn.completed"
        assert not (workspace / "late.txt").exists()
        approvals = client.get(f"/v1/sessions/{sid}/approvals").json()["approvals"]
        assert [a["status"] for a in approvals] == ["expired"]


def test_sse_reconnect_with_last_event_id_gets_exactly_the_missed_events(
    gateway: GatewayProcess, workspace: Path
) -> None:
    with gateway.client() as client:
        session = create_session(client, workspace)
        sid = session["id"]
        headers = {**SSE, "Last-Event-ID": str(session["last_seq"])}
        with client.stream("GET", f"/v1/sessions/{sid}/events", headers=headers) as response:
            reader = SseReader(response)
            start_turn(client, sid, "[[slow:1.5]]")
            seen = reader.until(lambda e: e["type"] == "message.delta")
            seen += [next(reader).json() for _ in range(3)]
        # Disconnected mid-turn; the turn goes on. A second stream waits for its end.
        with client.stream("GET", f"/v1/sessions/{sid}/events", headers=SSE) as response:
            everything = SseReader(response).until(is_turn_end)
        missed_from = seen[-1]["seq"]
        with client.stream(
            "GET", f"/v1/sessions/{sid}/events", headers={**SSE, "Last-Event-ID": str(missed_from)}
        ) as response:
            resumed = SseReader(response).until(is_turn_end)
        expected = [e for e in everything if e["seq"] > missed_from]
        assert resumed == expected
        assert [e["seq"] for e in seen + resumed] == list(
            range(seen[0]["seq"], resumed[-1]["seq"] + 1)
        )
        page = client.get(
            f"/v1/sessions/{sid}/events", params={"after": missed_from, "limit": 1000}
        )
        assert page.json()["events"] == expected


def test_websocket_runs_a_turn_with_an_approval_round_trip(
    gateway: GatewayProcess, workspace: Path
) -> None:
    with gateway.client() as client:
        session = create_session(client, workspace)
    sid = session["id"]
    url = f"{gateway.ws_url}/v1/sessions/{sid}/ws?after={session['last_seq']}"
    with connect(url, additional_headers={"Authorization": f"Bearer {TOKEN}"}) as ws:
        ws.send(json.dumps({"type": "turn.start", "prompt": "[[tool:bash touch ws.txt]]"}))
        frames = _ws_until(ws, lambda f: f.get("type") == "approval.requested")
        ack = next(f for f in frames if f["type"] == "ack")
        assert ack["request"] == "turn.start"
        assert ack["turn"]["status"] == "queued"
        asked = frames[-1]["data"]
        edited = {**asked["input"], "command": "touch ws-edited.txt"}
        respond = {
            "type": "approval.respond",
            "approval_id": asked["approval_id"],
            "decision": "allow",
            "updated_input": edited,
        }
        ws.send(json.dumps(respond))
        frames = _ws_until(ws, is_turn_end)
        assert any(f["type"] == "ack" and f["request"] == "approval.respond" for f in frames)
        tool_done = next(f for f in frames if f["type"] == "tool.completed")
        assert tool_done["data"]["status"] == "completed"
        resolved = next(f for f in frames if f["type"] == "approval.resolved")
        assert resolved["data"]["updated_input"] == edited  # the edit is on the record
        assert resolved["data"]["updated_by"] == "admin"
        ack = next(f for f in frames if f["type"] == "ack" and f["request"] == "approval.respond")
        assert ack["approval"]["input"] == asked["input"]
        assert ack["approval"]["updated_input"] == edited
        assert frames[-1]["type"] == "turn.completed"
        ws.send(json.dumps({"type": "turn.interrupt"}))
        error = _ws_until(ws, lambda f: f["type"] == "error")[-1]
        assert error["problem"]["status"] == 409
    assert (workspace / "ws-edited.txt").exists()  # the client's edited input ran
    assert not (workspace / "ws.txt").exists()


def _ws_until(ws: Any, predicate: Any) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = []
    while True:
        frame = json.loads(ws.recv(timeout=30))
        frames.append(frame)
        if predicate(frame):
            return frames


def test_metrics_and_logs_after_a_real_turn(gateway: GatewayProcess, workspace: Path) -> None:
    with gateway.client() as client:
        before = scrape(client)
        session = create_session(client, workspace)
        sid = session["id"]
        headers = {**SSE, "Last-Event-ID": str(session["last_seq"])}
        with client.stream("GET", f"/v1/sessions/{sid}/events", headers=headers) as response:
            reader = SseReader(response)
            turn = start_turn(client, sid, "say hello")
            events = reader.until(is_turn_end)
            during = scrape(client)  # this stream is still open
        after = scrape(client)
    assert events[-1]["type"] == "turn.completed"

    def grew(name: str, **labels: str) -> float:
        return metric(after, name, **labels) - metric(before, name, **labels)

    # Turns
    assert grew("agent_gateway_turns_total", provider="claude_code", outcome="completed") == 1
    assert (
        grew(
            "agent_gateway_turn_duration_seconds_count", provider="claude_code", outcome="completed"
        )
        == 1
    )
    assert (
        grew("agent_gateway_turn_duration_seconds_sum", provider="claude_code", outcome="completed")
        > 0
    )
    assert grew("agent_gateway_events_total", type="turn.completed") == 1
    # Processes: the session's CLI started and is kept for the next turn.
    assert grew("agent_gateway_process_starts_total", provider="claude_code") >= 1
    assert metric(after, "agent_gateway_live_processes", provider="claude_code") == 1
    assert metric(after, "agent_gateway_sessions", status="idle") == 1
    # Delivery: the turn's events reached the open stream live, every hand-over timed (one
    # carries whatever queued at once, so there are at most as many samples as events).
    handovers = grew("agent_gateway_event_delivery_lag_seconds_count", transport="sse")
    assert 1 <= handovers <= len(events)
    assert metric(during, "agent_gateway_event_subscribers", transport="sse") == 1

    lines = [line for line in log_lines(gateway) if line.get("session_id") == sid]
    finished = next(line for line in lines if line.get("event") == "turn.finished")
    assert finished["turn_id"] == turn["id"]
    assert finished["provider"] == "claude_code"
    assert finished["outcome"] == "completed"
    assert finished["duration_ms"] >= 0
    started = next(line for line in lines if line.get("event") == "process.started")
    assert started["turn_id"] == turn["id"]
    assert started["cli"] == "claude"
