"""The provider contract: every provider passes the same suite, with its real pinned CLI.

Each test runs once per provider through a real gateway process whose only enabled provider
is that one, its CLI pointed at the stub LLM on loopback (tests/e2e/providers.py).
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.providers.catalog import CATALOG
from tests.e2e.conftest import GatewayFactory
from tests.e2e.providers import ADAPTERS, ANSWERS_DENIAL, CONFIGS
from tests.gateway import SseReader, is_turn_end
from tests.stub_llm import StubLLM

pytestmark = pytest.mark.e2e

PROVIDERS = list(CONFIGS)
"""Every provider with its stub wiring in providers.py: each must pass."""
SSE = {"Accept": "text/event-stream"}


def test_every_provider_has_its_wiring() -> None:
    """A provider added to the catalog is not contract-tested until the tests can point it at
    the stub model (tests/e2e/providers.py); the ACP adapters of CLIs the suite drives natively
    are the exceptions, named there."""
    providers = {name for name, d in CATALOG.items() if not d.family}
    assert set(CONFIGS) == providers - ADAPTERS


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


def run_turn(client: httpx.Client, session_id: str, prompt: str) -> list[dict[str, Any]]:
    """Start a turn and return its events, read off SSE opened before the turn started."""
    after = client.get(f"/v1/sessions/{session_id}").json()["last_seq"]
    headers = {**SSE, "Last-Event-ID": str(after)}
    with client.stream("GET", f"/v1/sessions/{session_id}/events", headers=headers) as response:
        reader = SseReader(response)
        start_turn(client, session_id, prompt)
        return reader.until(is_turn_end)


def types(envelopes: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in envelopes]


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid``, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(") ", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    found: set[int] = set()
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.add(child)
            stack.append(child)
    return found


def working_in(pids: set[int], directory: Path) -> set[int]:
    inside: set[int] = set()
    for pid in pids:
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if cwd == str(directory) or cwd.startswith(f"{directory}/"):
            inside.add(pid)
    return inside


@pytest.mark.parametrize("provider", PROVIDERS)
def test_text_turns_stream_reuse_the_process_and_resume_after_restart(
    provider: str, make_gateway: GatewayFactory, workspace: Path, stub: StubLLM
) -> None:
    gateway = make_gateway(provider).start()
    with gateway.client() as client:
        session = create_session(client, workspace)
        sid = session["id"]
        assert session["provider"] == provider

        first = run_turn(client, sid, "Say hello")
        kinds = types(first)
        assert kinds[0] == "turn.started"
        assert kinds[-1] == "turn.completed", first[-1]
        assert "session.thread_bound" in kinds
        assert kinds.index("message.delta") < kinds.index("message.completed")
        deltas = "".join(e["data"]["text"] for e in first if e["type"] == "message.delta")
        assert "Hello from stub." in deltas
        assert first[-1]["data"]["final_text"] == "Hello from stub."
        thread_id = next(e for e in first if e["type"] == "session.thread_bound")["data"][
            "thread_id"
        ]
        live = client.get(f"/v1/sessions/{sid}").json()
        assert live["thread_id"] == thread_id
        pid = live["process"]["pid"]

        second = run_turn(client, sid, "Say hello again")
        assert second[-1]["type"] == "turn.completed"
        assert client.get(f"/v1/sessions/{sid}").json()["process"]["pid"] == pid

    gateway.stop()
    gateway.start()
    with gateway.client() as client:
        restored = client.get(f"/v1/sessions/{sid}").json()
        assert restored["thread_id"] == thread_id
        before = len(stub.requests)
        third = run_turn(client, sid, "Say hello once more")
        assert third[-1]["type"] == "turn.completed", third[-1]
        sent = json.dumps([r.body for r in stub.requests[before:]])
        assert "Say hello again" in sent  # the CLI continued the same conversation
        assert client.get(f"/v1/sessions/{sid}").json()["thread_id"] == thread_id


@pytest.mark.parametrize("provider", PROVIDERS)
def test_tool_approval_allow_runs_the_tool_and_deny_reaches_the_agent(
    provider: str, make_gateway: GatewayFactory, workspace: Path
) -> None:
    gateway = make_gateway(provider).start()
    with gateway.client() as client:
        sid = create_session(client, workspace)["id"]
        after = client.get(f"/v1/sessions/{sid}").json()["last_seq"]
        headers = {**SSE, "Last-Event-ID": str(after)}
        with client.stream("GET", f"/v1/sessions/{sid}/events", headers=headers) as response:
            reader = SseReader(response)
            start_turn(client, sid, "[[tool:bash touch allowed.txt]]")
            asked = reader.until(lambda e: e["type"] == "approval.requested")[-1]["data"]
            assert "touch allowed.txt" in json.dumps(asked["input"])
            assert {"allow", "deny"} <= {o["decision"] for o in asked["options"]}
            assert client.get(f"/v1/sessions/{sid}").json()["status"] == "awaiting_approval"
            assert not (workspace / "allowed.txt").exists()
            answer = client.post(
                f"/v1/sessions/{sid}/approvals/{asked['approval_id']}", json={"decision": "allow"}
            )
            assert answer.status_code == 200, answer.text
            rest = reader.until(is_turn_end)
            assert "approval.resolved" in types(rest)
            done = [e["data"] for e in rest if e["type"] == "tool.completed"]
            assert [d["status"] for d in done] == ["completed"]
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
            done = [e["data"] for e in rest if e["type"] == "tool.completed"]
            assert [d["status"] for d in done] == ["denied"]
            assert rest[-1]["type"] == "turn.completed", rest[-1]
            if provider in ANSWERS_DENIAL:
                # The agent got the denial back as the tool's result and answered it.
                assert rest[-1]["data"]["final_text"].startswith("Tool said:")
            assert not (workspace / "denied.txt").exists()


@pytest.mark.parametrize("provider", PROVIDERS)
def test_interrupt_during_a_slow_stream_then_the_next_turn_works(
    provider: str, make_gateway: GatewayFactory, workspace: Path
) -> None:
    gateway = make_gateway(provider).start()
    with gateway.client() as client:
        sid = create_session(client, workspace)["id"]
        after = client.get(f"/v1/sessions/{sid}").json()["last_seq"]
        headers = {**SSE, "Last-Event-ID": str(after)}
        with client.stream("GET", f"/v1/sessions/{sid}/events", headers=headers) as response:
            reader = SseReader(response)
            turn = start_turn(client, sid, "[[slow:60]]")
            reader.until(lambda e: e["type"] == "message.delta")
            busy = client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "too soon"})
            assert busy.status_code == 409
            assert busy.json()["turn_id"] == turn["id"]
            accepted = client.post(f"/v1/sessions/{sid}/interrupt")
            assert accepted.status_code == 202, accepted.text
            ended = reader.until(is_turn_end)
            assert ended[-1]["type"] == "turn.interrupted", ended[-1]
            stored = client.get(f"/v1/sessions/{sid}/turns/{turn['id']}").json()
            assert stored["status"] == "interrupted"
            start_turn(client, sid, "Say hello")
            after_interrupt = reader.until(is_turn_end)
            assert after_interrupt[-1]["type"] == "turn.completed", after_interrupt[-1]
            assert after_interrupt[-1]["data"]["final_text"] == "Hello from stub."


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_authentication_failure_is_reported_as_auth(
    provider: str, make_gateway: GatewayFactory, workspace: Path
) -> None:
    gateway = make_gateway(provider).start()
    with gateway.client() as client:
        sid = create_session(client, workspace)["id"]
        failed = run_turn(client, sid, "[[error:401]]")[-1]
        assert failed["type"] == "turn.failed", failed
        error = failed["data"]["error"]
        assert error["kind"] == "auth", error
        assert error["retryable"] is False
        assert error["provider"] == provider
        assert client.get(f"/v1/sessions/{sid}/turns").json()["turns"][0]["status"] == "failed"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_no_process_is_left_behind_after_the_session_is_deleted(
    provider: str, make_gateway: GatewayFactory, workspace: Path
) -> None:
    gateway = make_gateway(provider).start()
    assert gateway.process is not None
    with gateway.client() as client:
        sid = create_session(client, workspace)["id"]
        headers = {**SSE, "Last-Event-ID": "0"}
        with client.stream("GET", f"/v1/sessions/{sid}/events", headers=headers) as response:
            reader = SseReader(response)
            start_turn(client, sid, "[[slow:60]]")
            reader.until(lambda e: e["type"] == "message.delta")
            pid = client.get(f"/v1/sessions/{sid}").json()["process"]["pid"]
            assert pid in descendants(gateway.process.pid)
            closed = client.delete(f"/v1/sessions/{sid}")
            assert closed.status_code == 200
            tail = reader.until(lambda e: e["type"] == "session.closed")
            assert "turn.interrupted" in types(tail)
        left = descendants(gateway.process.pid)
        assert working_in(left, workspace) == set()
        shared = client.get(f"/v1/providers/{provider}").json()["capabilities"]["shared_process"]
        if shared:
            assert pid in left  # the shared server stays for the other sessions
        else:
            assert left == set()
        assert gateway.stop() in (0, -signal.SIGTERM)
