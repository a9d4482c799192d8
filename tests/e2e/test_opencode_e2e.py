"""The real OpenCode (``opencode serve``) through the running gateway, against the stub LLM."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from tests.e2e.conftest import GatewayFactory
from tests.e2e.test_contract import SSE, create_session, run_turn, start_turn, types
from tests.gateway import SseReader, is_turn_end
from tests.stub_llm import StubLLM

pytestmark = pytest.mark.e2e


def test_sessions_share_one_server_and_a_thread_continues_after_a_restart(
    make_gateway: GatewayFactory, workspace: Path, stub: StubLLM
) -> None:
    gateway = make_gateway("opencode").start()
    with gateway.client() as client:
        session = create_session(client, workspace)
        sid = session["id"]
        assert (session["provider"], session["selection"]["reason"]) == ("opencode", "default")
        assert session["process"] is None

        first = run_turn(client, sid, "Say hello")
        kinds = types(first)
        assert kinds[-1] == "turn.completed", (first[-1], gateway.log()[-3000:])
        assert kinds.index("message.delta") < kinds.index("message.completed")
        deltas = "".join(e["data"]["text"] for e in first if e["type"] == "message.delta")
        completed = next(e for e in first if e["type"] == "message.completed")
        assert deltas == completed["data"]["text"] == "Hello from stub."
        assert first[-1]["data"]["final_text"] == "Hello from stub."
        assert first[-1]["data"]["usage"]["input_tokens"] == 12
        thread_id = next(e for e in first if e["type"] == "session.thread_bound")["data"][
            "thread_id"
        ]
        assert thread_id.startswith("ses_")

        live = client.get(f"/v1/sessions/{sid}").json()
        assert live["thread_id"] == thread_id
        pid = live["process"]["pid"]

        second = run_turn(client, sid, "[[echo]]")
        assert second[-1]["type"] == "turn.completed", second[-1]
        history_len = int(second[-1]["data"]["final_text"].removeprefix("Echo: "))
        assert history_len >= 4  # system, user, assistant, user
        assert "session.thread_bound" not in types(second)

        other = create_session(client, workspace)
        assert run_turn(client, other["id"], "Say hello")[-1]["type"] == "turn.completed"
        pids = {
            client.get(f"/v1/sessions/{s}").json()["process"]["pid"] for s in (sid, other["id"])
        }
        assert pids == {pid}  # one opencode serve for every session
        # Every model request came from one step of a turn: no title or other side requests.
        assert all(not request.is_side for request in stub.openai_requests())

    assert gateway.stop() in (0, -signal.SIGTERM)
    gateway.start()
    with gateway.client() as client:
        restored = client.get(f"/v1/sessions/{sid}").json()
        assert (restored["thread_id"], restored["process"]) == (thread_id, None)
        third = run_turn(client, sid, "[[echo]]")
        assert third[-1]["type"] == "turn.completed", third[-1]
        assert third[-1]["data"]["final_text"] == f"Echo: {history_len + 2}"
        history = json.dumps(stub.openai_requests()[-1].body["messages"])
        assert "Say hello" in history
        assert "Hello from stub." in history
        after = client.get(f"/v1/sessions/{sid}").json()
        assert after["thread_id"] == thread_id
        assert after["process"]["pid"] != pid


def test_tool_approval_allow_runs_the_command_and_deny_reaches_the_agent(
    make_gateway: GatewayFactory, workspace: Path, stub: StubLLM
) -> None:
    gateway = make_gateway("opencode").start()
    with gateway.client() as client:
        session = create_session(client, workspace)
        sid = session["id"]
        headers = {**SSE, "Last-Event-ID": str(session["last_seq"])}
        with client.stream("GET", f"/v1/sessions/{sid}/events", headers=headers) as response:
            reader = SseReader(response)
            start_turn(client, sid, "[[tool:bash touch allowed.txt]]")
            asked = reader.until(lambda e: e["type"] == "approval.requested")[-1]["data"]
            assert asked["tool"] == "bash"
            assert asked["input"]["command"] == "touch allowed.txt"
            assert {o["decision"] for o in asked["options"]} == {"allow", "deny", "allow_session"}
            assert client.get(f"/v1/sessions/{sid}").json()["status"] == "awaiting_approval"
            assert not (workspace / "allowed.txt").exists()

            answer = client.post(
                f"/v1/sessions/{sid}/approvals/{asked['approval_id']}", json={"decision": "allow"}
            )
            assert answer.status_code == 200, answer.text
            rest = reader.until(is_turn_end)
            assert types(rest)[0] == "approval.resolved"
            tool_done = next(e for e in rest if e["type"] == "tool.completed")["data"]
            assert (tool_done["tool_id"], tool_done["status"]) == (asked["tool_id"], "completed")
            assert rest[-1]["type"] == "turn.completed", rest[-1]
            assert rest[-1]["data"]["final_text"].startswith("Tool said:")
            assert (workspace / "allowed.txt").exists()  # ran in the session's workspace

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
        last_request = json.dumps(stub.openai_requests()[-1].body["messages"][-1])
        assert "not in this repository" in last_request


def test_interrupt_during_a_slow_stream_then_the_next_turn_works(
    make_gateway: GatewayFactory, workspace: Path
) -> None:
    gateway = make_gateway("opencode").start()
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
            status = client.get(f"/v1/sessions/{sid}/turns/{turn['id']}").json()["status"]
            assert status == "interrupted"
            # The abort's late second `session.idle` must not end this turn early.
            start_turn(client, sid, "Say hello")
            after = reader.until(is_turn_end)
            assert after[-1]["type"] == "turn.completed", after[-1]
            assert after[-1]["data"]["final_text"] == "Hello from stub."


def test_a_rejected_api_key_fails_the_turn_as_auth(
    make_gateway: GatewayFactory, workspace: Path
) -> None:
    gateway = make_gateway("opencode").start()
    with gateway.client() as client:
        session = create_session(client, workspace)
        events = run_turn(client, session["id"], "[[error:401]]")
        assert events[-1]["type"] == "turn.failed", events[-1]
        error = events[-1]["data"]["error"]
        assert (error["kind"], error["retryable"], error["provider"]) == ("auth", False, "opencode")
