"""Process and session lifecycles through the real gateway, with a fake ``claude``."""

from __future__ import annotations

import os
import sqlite3
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from tests.fakes.gateway import FakeGateway, FakeGatewayFactory
from tests.gateway import SseReader, follow, is_turn_end, wait_until


def new_session(client: httpx.Client, gateway: FakeGateway) -> str:
    response = client.post("/v1/sessions", json={"workspace": str(gateway.workspace)})
    assert response.status_code == 201, response.text
    session_id: str = response.json()["id"]
    return session_id


def turn(client: httpx.Client, session_id: str, prompt: str, **body: Any) -> list[dict[str, Any]]:
    after = client.get(f"/v1/sessions/{session_id}").json()["last_seq"]
    response = client.post(f"/v1/sessions/{session_id}/turns", json={"prompt": prompt, **body})
    assert response.status_code == 202, response.text
    return follow(client, session_id, after=after)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers signal 0; it is gone for our purposes once reaped or defunct.
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split(") ", 1)[1][0] != "Z"


def test_idle_process_is_closed_and_the_next_turn_resumes_the_thread(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    gateway = make_fake_gateway(claude_code={"idle_timeout_s": 0.4}).start()
    with gateway.client() as client:
        sid = new_session(client, gateway)
        assert turn(client, sid, "hi")[-1]["type"] == "turn.completed"
        session = client.get(f"/v1/sessions/{sid}").json()
        thread_id, pid = session["thread_id"], session["process"]["pid"]
        wait_until(lambda: client.get(f"/v1/sessions/{sid}").json()["process"] is None)
        wait_until(lambda: not alive(pid))
        assert turn(client, sid, "hi again")[-1]["type"] == "turn.completed"
        assert client.get(f"/v1/sessions/{sid}").json()["thread_id"] == thread_id
    spawns = gateway.spawns()
    assert len(spawns) == 2
    assert not any(a.startswith("--resume") for a in spawns[0]["argv"])
    assert f"--resume={thread_id}" in spawns[1]["argv"]


def test_cli_crash_fails_the_turn_and_the_next_turn_resumes(fake_gateway: FakeGateway) -> None:
    with fake_gateway.client() as client:
        sid = new_session(client, fake_gateway)
        # Without the gateway's retry (tests/integration/test_retries.py covers it).
        failed = turn(client, sid, "crash", retry={"enabled": False})[-1]
        assert failed["type"] == "turn.failed"
        error = failed["data"]["error"]
        assert error["kind"] == "cli_crashed"
        assert error["exit_code"] == 3
        assert "simulated crash" in error["stderr_tail"]
        stored = client.get(f"/v1/sessions/{sid}/turns").json()["turns"][0]
        assert stored["status"] == "failed"
        assert stored["error"]["kind"] == "cli_crashed"
        assert client.get(f"/v1/sessions/{sid}").json()["status"] == "idle"
        assert turn(client, sid, "hi")[-1]["type"] == "turn.completed"
        thread_id = client.get(f"/v1/sessions/{sid}").json()["thread_id"]
    spawns = fake_gateway.spawns()
    assert len(spawns) == 2
    assert f"--resume={thread_id}" in spawns[1]["argv"]


def test_silent_cli_fails_the_turn_with_idle_timeout(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    gateway = make_fake_gateway(claude_code={"turn_idle_timeout_s": 1.0}).start()
    with gateway.client() as client:
        sid = new_session(client, gateway)
        failed = turn(client, sid, "hang", retry={"enabled": False})[-1]
        assert failed["type"] == "turn.failed"
        assert failed["data"]["error"]["kind"] == "idle_timeout"
        assert failed["data"]["error"]["retryable"] is True
        assert client.get(f"/v1/sessions/{sid}").json()["process"] is None
    assert not alive(gateway.spawns()[0]["pid"])


def test_delete_ends_the_turn_stops_the_process_and_closes_the_stream(
    fake_gateway: FakeGateway,
) -> None:
    with fake_gateway.client() as client:
        sid = new_session(client, fake_gateway)
        headers = {"Accept": "text/event-stream", "Last-Event-ID": "2"}
        with client.stream("GET", f"/v1/sessions/{sid}/events", headers=headers) as response:
            reader = SseReader(response)
            assert client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "slow"}).is_success
            reader.until(lambda e: e["type"] == "message.delta")
            pid = client.get(f"/v1/sessions/{sid}").json()["process"]["pid"]
            closed = client.delete(f"/v1/sessions/{sid}")
            assert closed.status_code == 200
            assert closed.json()["status"] == "closed"
            assert closed.json()["process"] is None
            tail = reader.until(lambda e: e["type"] == "session.closed")
            assert "turn.interrupted" in [e["type"] for e in tail]
            assert list(reader) == []  # the stream ends after session.closed
        assert not alive(pid)
        refused = client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "hi"})
        assert refused.status_code == 409
        assert refused.json()["type"].endswith(":session_closed")
        last = tail[-1]["seq"]
        at_end = client.get(
            f"/v1/sessions/{sid}/events",
            headers={"Accept": "text/event-stream", "Last-Event-ID": str(last)},
        )
        assert at_end.status_code == 204  # EventSource stops reconnecting
        assert client.delete(f"/v1/sessions/{sid}").json()["status"] == "closed"


def test_a_turn_cut_by_shutdown_is_reported_interrupted_after_restart(
    fake_gateway: FakeGateway,
) -> None:
    with fake_gateway.client() as client:
        sid = new_session(client, fake_gateway)
        client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "hang"})
        follow(client, sid, lambda e: e["type"] == "session.thread_bound")
        pid = client.get(f"/v1/sessions/{sid}").json()["process"]["pid"]
    fake_gateway.stop()
    assert not alive(pid)
    fake_gateway.start()
    with fake_gateway.client() as client:
        session = client.get(f"/v1/sessions/{sid}").json()
        assert session["status"] == "idle"
        turns = client.get(f"/v1/sessions/{sid}/turns").json()["turns"]
        assert turns[0]["status"] == "interrupted"
        events = client.get(f"/v1/sessions/{sid}/events", params={"limit": 1000}).json()["events"]
        assert [e["type"] for e in events if is_turn_end(e)] == ["turn.interrupted"]
        assert turn(client, sid, "hi")[-1]["type"] == "turn.completed"


def test_serve_refuses_invalid_configuration(make_fake_gateway: FakeGatewayFactory) -> None:
    gateway = make_fake_gateway()
    gateway.data_dir.mkdir(parents=True)
    gateway.config["server"] = {"max_body_bytes": "lots"}
    refused = gateway.command("serve", check=False)
    assert refused.returncode == 2
    assert "server.max_body_bytes" in refused.stderr
    assert "GATEWAY_SERVER__MAX_BODY_BYTES" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert not (gateway.data_dir / "gateway.db").exists()  # refused before the migration


def test_cleanup_deletes_unused_bindings_and_use_refreshes_them(
    fake_gateway: FakeGateway,
) -> None:
    with fake_gateway.client() as client:
        stale, recent, revived = (new_session(client, fake_gateway) for _ in range(3))
        for sid in (stale, recent, revived):
            assert turn(client, sid, "hi")[-1]["type"] == "turn.completed"
    fake_gateway.stop()
    now = datetime.now(UTC).replace(tzinfo=None)
    database = fake_gateway.data_dir / "gateway.db"

    def binding_ages() -> dict[str, float]:
        with sqlite3.connect(database) as db:
            rows = db.execute("SELECT session_id, updated_at FROM session_thread_bindings")
            return {
                sid: (now - datetime.fromisoformat(at)).total_seconds() / 86400 for sid, at in rows
            }

    with sqlite3.connect(database) as db:
        for sid, age in ((stale, 31), (recent, 29), (revived, 29)):
            db.execute(
                "UPDATE session_thread_bindings SET updated_at = ? WHERE session_id = ?",
                ((now - timedelta(days=age)).isoformat(sep=" "), sid),
            )
    result = fake_gateway.command("cleanup")
    assert "deleted 1 bindings" in result.stdout
    with sqlite3.connect(database) as db:
        statuses = dict(db.execute("SELECT id, status FROM sessions").fetchall())
        stale_events = db.execute(
            "SELECT count(*) FROM events WHERE session_id = ?", (stale,)
        ).fetchone()[0]
    assert set(binding_ages()) == {recent, revived}
    assert statuses[stale] == "closed"
    assert statuses[recent] == statuses[revived] == "idle"
    assert stale_events == 0

    fake_gateway.start()
    with fake_gateway.client() as client:  # using a session refreshes its binding
        assert turn(client, revived, "hi")[-1]["type"] == "turn.completed"
    ages = binding_ages()
    assert ages[revived] < 0.01
    assert 28.9 < ages[recent] < 29.1


def test_a_thread_the_cli_lost_fails_as_context_lost_then_a_new_thread_starts(
    fake_gateway: FakeGateway,
) -> None:
    with fake_gateway.client() as client:
        sid = new_session(client, fake_gateway)
        assert turn(client, sid, "hi")[-1]["type"] == "turn.completed"
        old_thread = client.get(f"/v1/sessions/{sid}").json()["thread_id"]
    fake_gateway.stop()
    (fake_gateway.spawn_log.parent / (fake_gateway.spawn_log.name + ".threads")).unlink()
    fake_gateway.start()
    with fake_gateway.client() as client:
        failed = turn(client, sid, "hi")[-1]
        assert failed["type"] == "turn.failed"
        error = failed["data"]["error"]
        assert error["kind"] == "context_lost"
        assert error["retryable"] is False
        assert "No conversation found" in error["message"]
        events = turn(client, sid, "hi again")
        assert events[-1]["type"] == "turn.completed"
        rebound = next(e for e in events if e["type"] == "session.thread_bound")
        assert rebound["data"]["thread_id"] != old_thread
        assert client.get(f"/v1/sessions/{sid}").json()["thread_id"] == rebound["data"]["thread_id"]
