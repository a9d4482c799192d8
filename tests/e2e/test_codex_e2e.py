"""The real Codex CLI (one shared ``codex app-server``) through the running gateway, against the
stub LLM on loopback."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import GatewayFactory
from tests.gateway import GatewayProcess, SseReader
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
        reader = SseReader(response)
        start_turn(client, session_id, prompt)
        return reader.until(is_turn_end)


def test_text_turns_share_one_server_and_resume_after_restart(
    make_gateway: GatewayFactory, workspace: Path, stub: StubLLM
) -> None:
    gateway = make_gateway("codex").start()
    with gateway.client() as client:
        session = create_session(client, workspace)
        sid = session["id"]
        assert session["provider"] == "codex"
        assert session["process"] is None

        first = run_turn(client, sid, "Say hello", after=session["last_seq"])
        kinds = types(first)
        assert kinds[0] == "turn.started"
        assert kinds[-1] == "turn.completed", (first[-1], gateway.log()[-3000:])
        assert "session.thread_bound" in kinds
        assert kinds.index("message.delta") < kinds.index("message.completed")
        deltas = "".join(e["data"]["text"] for e in first if e["type"] == "message.delta")
        completed = next(e for e in first if e["type"] == "message.completed")
        assert deltas == completed["data"]["text"] == "Hello from stub."
        assert first[-1]["data"]["final_text"] == "Hello from stub."
        assert first[-1]["data"]["usage"]["input_tokens"] == 12  # one model request
        assert "usage" in kinds
        thread_id = next(e for e in first if e["type"] == "session.thread_bound")["data"][
            "thread_id"
        ]
        live = client.get(f"/v1/sessions/{sid}").json()
        assert live["thread_id"] == thread_id
        pid = live["process"]["pid"]

        # A second session: its own thread on the same app-server process.
        other = create_session(client, workspace)
        other_events = run_turn(client, other["id"], "Say hello", after=other["last_seq"])
        assert other_events[-1]["type"] == "turn.completed"
        other_live = client.get(f"/v1/sessions/{other['id']}").json()
        assert other_live["process"]["pid"] == pid
        assert other_live["thread_id"] not in (None, thread_id)

        second = run_turn(client, sid, "[[echo]]", after=first[-1]["seq"])
        assert second[-1]["type"] == "turn.completed", second[-1]
        assert second[-1]["data"]["final_text"].startswith("Echo: ")
        assert "session.thread_bound" not in types(second)
        assert client.get(f"/v1/sessions/{sid}").json()["process"]["pid"] == pid

    assert gateway.stop() in (0, -signal.SIGTERM)
    gateway.start()
    with gateway.client() as client:
        restored = client.get(f"/v1/sessions/{sid}").json()
        assert restored["thread_id"] == thread_id
        assert restored["process"] is None
        requests_before = len(stub.openai_requests())

        third = run_turn(client, sid, "[[echo]]", after=second[-1]["seq"])
        assert third[-1]["type"] == "turn.completed", (third[-1], gateway.log()[-3000:])
        assert "session.thread_bound" not in types(third)
        history = json.dumps(stub.openai_requests()[requests_before].body["input"])
        assert "Say hello" in history  # thread/resume brought the conversation back
        assert "Hello from stub." in history
        after_restart = client.get(f"/v1/sessions/{sid}").json()
        assert after_restart["thread_id"] == thread_id
        assert after_restart["process"]["pid"] != pid

        turns = client.get(f"/v1/sessions/{sid}/turns").json()["turns"]
        assert [t["status"] for t in turns] == ["completed"] * 3


def test_tool_approval_allow_runs_the_command_and_deny_does_not(
    make_gateway: GatewayFactory, workspace: Path
) -> None:
    gateway = make_gateway("codex").start()
    with gateway.client() as client:
        session = create_session(client, workspace)
        sid = session["id"]
        headers = {**SSE, "Last-Event-ID": str(session["last_seq"])}
        with client.stream("GET", f"/v1/sessions/{sid}/events", headers=headers) as response:
            reader = SseReader(response)
            start_turn(client, sid, "[[tool:bash touch allowed.txt]]")
            until_asked = reader.until(lambda e: e["type"] == "approval.requested")
            asked = until_asked[-1]["data"]
            assert asked["tool"] == "command"
            assert "touch allowed.txt" in asked["input"]["command"]
            # 0.169.0 offers accept and cancel for a command: no "for this session".
            assert {o["decision"] for o in asked["options"]} == {"allow", "deny"}
            started = next(e for e in until_asked if e["type"] == "tool.started")["data"]
            assert (started["kind"], started["tool_id"]) == ("command", asked["tool_id"])
            assert client.get(f"/v1/sessions/{sid}").json()["status"] == "awaiting_approval"
            assert not (workspace / "allowed.txt").exists()

            answer = client.post(
                f"/v1/sessions/{sid}/approvals/{asked['approval_id']}", json={"decision": "allow"}
            )
            assert answer.status_code == 200, answer.text
            rest = reader.until(is_turn_end)
            assert types(rest)[0] == "approval.resolved"
            tool_done = next(e for e in rest if e["type"] == "tool.completed")["data"]
            assert (tool_done["status"], tool_done["exit_code"]) == ("completed", 0)
            assert rest[-1]["type"] == "turn.completed", rest[-1]
            assert rest[-1]["data"]["final_text"].startswith("Tool said:")
            assert (workspace / "allowed.txt").exists()

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
            # Codex tells the model only that the user rejected it (no room for a message).
            assert "rejected by user" in rest[-1]["data"]["final_text"]
            assert not (workspace / "denied.txt").exists()


def test_interrupt_during_a_slow_stream_then_the_next_turn_works(
    make_gateway: GatewayFactory, workspace: Path
) -> None:
    gateway: GatewayProcess = make_gateway("codex").start()
    with gateway.client() as client:
        session = create_session(client, workspace)
        sid = session["id"]
        headers = {**SSE, "Last-Event-ID": str(session["last_seq"])}
        with client.stream("GET", f"/v1/sessions/{sid}/events", headers=headers) as response:
            reader = SseReader(response)
            turn = start_turn(client, sid, "[[slow:30]]")
            reader.until(lambda e: e["type"] == "message.delta")
            accepted = client.post(f"/v1/sessions/{sid}/interrupt")
            assert accepted.status_code == 202, accepted.text
            ended = reader.until(is_turn_end)
            assert ended[-1]["type"] == "turn.interrupted", ended[-1]
            # What streamed before the interrupt is closed as a message.
            assert "message.completed" in types(ended)
            assert client.get(f"/v1/sessions/{sid}/turns/{turn['id']}").json()["status"] == (
                "interrupted"
            )
            start_turn(client, sid, "Say hello")
            after = reader.until(is_turn_end)
            assert after[-1]["type"] == "turn.completed", after[-1]
            assert after[-1]["data"]["final_text"] == "Hello from stub."
        assert client.post(f"/v1/sessions/{sid}/interrupt").status_code == 409


def test_read_only_never_asks_and_auto_edits_still_asks_for_commands(
    make_gateway: GatewayFactory, workspace: Path
) -> None:
    gateway = make_gateway("codex").start()
    with gateway.client() as client:
        reader_only = create_session(client, workspace, approval_mode="read_only")
        events = run_turn(
            client, reader_only["id"], "[[tool:bash touch ro.txt]]", after=reader_only["last_seq"]
        )
        assert "approval.requested" not in types(events)
        assert events[-1]["type"] == "turn.completed", events[-1]
        assert "Read-only file system" in events[-1]["data"]["final_text"]
        assert not (workspace / "ro.txt").exists()

        editor = create_session(client, workspace, approval_mode="auto_edits")
        headers = {**SSE, "Last-Event-ID": str(editor["last_seq"])}
        with client.stream(
            "GET", f"/v1/sessions/{editor['id']}/events", headers=headers
        ) as response:
            reader = SseReader(response)
            start_turn(client, editor["id"], "[[tool:bash touch cmd.txt]]")
            asked = reader.until(lambda e: e["type"] == "approval.requested")[-1]["data"]
            assert asked["tool"] == "command"
            client.post(
                f"/v1/sessions/{editor['id']}/approvals/{asked['approval_id']}",
                json={"decision": "allow"},
            )
            assert reader.until(is_turn_end)[-1]["type"] == "turn.completed"
        assert (workspace / "cmd.txt").exists()
