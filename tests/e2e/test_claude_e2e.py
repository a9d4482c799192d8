"""The real Claude Code CLI through the running gateway, against the stub LLM on loopback."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect

from tests.e2e.conftest import GatewayFactory
from tests.gateway import TOKEN, GatewayProcess, SseReader
from tests.stub_llm import StubLLM

pytestmark = pytest.mark.e2e

SSE = {"Accept": "text/event-stream"}


def create_session(client: httpx.Client, workspace: Path, **body: Any) -> dict[str, Any]:
    response = client.post("/v1/sessions", json={"workspace": str(workspace), **body})
    assert response.status_code == 201, response.text
    session: dict[str, Any] = response.json()
    return session


def start_turn(client: httpx.Client, session_id: str, prompt: str) -> dict[str, Any]:
    response = client.post(f"/v1/sessions/{session_id}/turns", json={"prompt": prompt})
    assert response.status_code == 202, response.text
    turn: dict[str, Any] = response.json()
    return turn


def is_turn_end(envelope: dict[str, Any]) -> bool:
    return envelope["type"] in {"turn.completed", "turn.failed", "turn.interrupted"}


def types(envelopes: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in envelopes]


def run_turn(
    client: httpx.Client, session_id: str, prompt: str, *, after: int
) -> list[dict[str, Any]]:
    """Start a turn and read its events off SSE (opened first, so nothing is missed)."""
    headers = {**SSE, "Last-Event-ID": str(after)}
    with client.stream("GET", f"/v1/sessions/{session_id}/events", headers=headers) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        reader = SseReader(response)
        start_turn(client, session_id, prompt)
        return reader.until(is_turn_end)


def test_text_turns_reuse_the_process_and_resume_after_restart(
    make_gateway: GatewayFactory, workspace: Path, stub: StubLLM
) -> None:
    gateway = make_gateway().start()
    with gateway.client() as client:
        session = create_session(client, workspace)
        sid = session["id"]
        assert session["provider"] == "claude_code"
        assert session["selection"]["reason"] == "default"
        assert session["status"] == "idle"
        assert session["process"] is None

        first = run_turn(client, sid, "Say hello", after=session["last_seq"])
        kinds = types(first)
        assert kinds[0] == "turn.started"
        assert kinds[-1] == "turn.completed", (first[-1], gateway.log()[-3000:])
        assert "session.thread_bound" in kinds
        assert kinds.index("message.delta") < kinds.index("message.completed")
        assert kinds[-1] == "turn.completed"
        deltas = "".join(e["data"]["text"] for e in first if e["type"] == "message.delta")
        completed = next(e for e in first if e["type"] == "message.completed")
        assert deltas == completed["data"]["text"] == "Hello from stub."
        assert first[-1]["data"]["final_text"] == "Hello from stub."
        assert [e["seq"] for e in first] == list(range(first[0]["seq"], first[-1]["seq"] + 1))
        thread_id = next(e for e in first if e["type"] == "session.thread_bound")["data"][
            "thread_id"
        ]

        live = client.get(f"/v1/sessions/{sid}").json()
        assert live["thread_id"] == thread_id
        assert live["status"] == "idle"
        pid = live["process"]["pid"]
        assert live["process"]["spawns"] == 1

        second = run_turn(client, sid, "[[echo]]", after=first[-1]["seq"])
        assert second[-1]["type"] == "turn.completed"
        history_len = int(second[-1]["data"]["final_text"].removeprefix("Echo: "))
        assert history_len >= 3  # at least: user, assistant, user
        again = client.get(f"/v1/sessions/{sid}").json()
        assert again["process"] == {**live["process"], "pid": pid, "spawns": 1}
        assert "session.thread_bound" not in types(second)  # same thread, same process

    # uvicorn re-raises SIGTERM after its graceful shutdown, hence -15 rather than 0.
    assert gateway.stop() in (0, -signal.SIGTERM)
    assert "Application shutdown complete" in gateway.log()
    gateway.start()
    with gateway.client() as client:
        restored = client.get(f"/v1/sessions/{sid}").json()
        assert restored["thread_id"] == thread_id
        assert restored["process"] is None
        assert restored["status"] == "idle"
        requests_before = len(stub.main_message_requests())

        third = run_turn(client, sid, "[[echo]]", after=second[-1]["seq"])
        assert third[-1]["type"] == "turn.completed", third[-1]
        assert third[-1]["data"]["final_text"] == f"Echo: {history_len + 2}"
        resumed = stub.main_message_requests()[requests_before:]
        history = json.dumps(resumed[0].body["messages"])
        assert "Say hello" in history
        assert "Hello from stub." in history
        after_restart = client.get(f"/v1/sessions/{sid}").json()
        assert after_restart["thread_id"] == thread_id
        assert after_restart["process"]["pid"] != pid

        turns = client.get(f"/v1/sessions/{sid}/turns").json()["turns"]
        assert [t["status"] for t in turns] == ["completed"] * 3


def test_tool_approval_allow_runs_the_tool_and_deny_reaches_the_agent(
    gateway: GatewayProcess, workspace: Path, stub: StubLLM
) -> None:
    with gateway.client() as client:
        session = create_session(client, workspace)
        sid = session["id"]
        cursor = session["last_seq"]
        headers = {**SSE, "Last-Event-ID": str(cursor)}
        with client.stream("GET", f"/v1/sessions/{sid}/events", headers=headers) as response:
            reader = SseReader(response)
            start_turn(client, sid, "[[tool:bash touch allowed.txt]]")
            asked = reader.until(lambda e: e["type"] == "approval.requested")[-1]["data"]
            assert asked["tool"] == "Bash"
            assert asked["input"]["command"] == "touch allowed.txt"
            assert {o["decision"] for o in asked["options"]} == {"allow", "deny", "allow_session"}
            assert client.get(f"/v1/sessions/{sid}").json()["status"] == "awaiting_approval"
            assert not (workspace / "allowed.txt").exists()

            answer = client.post(
                f"/v1/sessions/{sid}/approvals/{asked['approval_id']}", json={"decision": "allow"}
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["status"] == "allowed"
            rest = reader.until(is_turn_end)
            kinds = types(rest)
            assert kinds[0] == "approval.resolved"
            tool_done = next(e for e in rest if e["type"] == "tool.completed")["data"]
            assert tool_done["status"] == "completed"
            assert rest[-1]["type"] == "turn.completed"
            assert rest[-1]["data"]["final_text"].startswith("Tool said:")
            assert (workspace / "allowed.txt").exists()

            again = client.post(
                f"/v1/sessions/{sid}/approvals/{asked['approval_id']}", json={"decision": "deny"}
            )
            assert again.status_code == 409
            assert again.headers["content-type"] == "application/problem+json"

            start_turn(client, sid, "[[tool:bash touch denied.txt]]")
            asked = reader.until(lambda e: e["type"] == "approval.requested")[-1]["data"]
            answer = client.post(
                f"/v1/sessions/{sid}/approvals/{asked['approval_id']}",
                json={"decision": "deny", "message": "not in this repository"},
            )
            assert answer.status_code == 200, answer.text
            rest = reader.until(is_turn_end)
            tool_done = next(e for e in rest if e["type"] == "tool.completed")["data"]
            assert tool_done["status"] == "denied"
            assert rest[-1]["type"] == "turn.completed"
            assert "not in this repository" in rest[-1]["data"]["final_text"]
            assert not (workspace / "denied.txt").exists()
        last_request = json.dumps(stub.main_message_requests()[-1].body["messages"][-1])
        assert "not in this repository" in last_request


def test_unanswered_approval_expires_as_a_deny(
    make_gateway: GatewayFactory, workspace: Path
) -> None:
    gateway = make_gateway(sessions={"approval_timeout_s": 1.5}).start()
    with gateway.client() as client:
        session = create_session(client, workspace)
        sid = session["id"]
        events = run_turn(client, sid, "[[tool:bash touch late.txt]]", after=session["last_seq"])
        resolved = next(e for e in events if e["type"] == "approval.resolved")["data"]
        assert resolved["reason"] == "expired"
        assert resolved["decision"] == "deny"
        assert events[-1]["type"] == "turn.completed"
        assert not (workspace / "late.txt").exists()
        approvals = client.get(f"/v1/sessions/{sid}/approvals").json()["approvals"]
        assert [a["status"] for a in approvals] == ["expired"]


def test_interrupt_during_a_slow_stream_then_the_next_turn_works(
    gateway: GatewayProcess, workspace: Path
) -> None:
    with gateway.client() as client:
        session = create_session(client, workspace)
        sid = session["id"]
        headers = {**SSE, "Last-Event-ID": str(session["last_seq"])}
        with client.stream("GET", f"/v1/sessions/{sid}/events", headers=headers) as response:
            reader = SseReader(response)
            turn = start_turn(client, sid, "[[slow:60]]")
            reader.until(lambda e: e["type"] == "message.delta")
            busy = client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "too soon"})
            assert busy.status_code == 409
            assert busy.json()["turn_id"] == turn["id"]
            accepted = client.post(f"/v1/sessions/{sid}/interrupt")
            assert accepted.status_code == 202, accepted.text
            assert accepted.json()["turn_id"] == turn["id"]
            ended = reader.until(is_turn_end)
            assert ended[-1]["type"] == "turn.interrupted"
            assert client.get(f"/v1/sessions/{sid}/turns/{turn['id']}").json()["status"] == (
                "interrupted"
            )
            start_turn(client, sid, "Say hello")
            after = reader.until(is_turn_end)
            assert after[-1]["type"] == "turn.completed"
            assert after[-1]["data"]["final_text"] == "Hello from stub."
        assert client.post(f"/v1/sessions/{sid}/interrupt").status_code == 409


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
