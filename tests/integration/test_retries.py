"""The gateway's retries and restart safety, through the real gateway with a fake ``claude``."""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

import httpx
import pytest

from app.settings import RetrySettings
from tests.fakes.gateway import FakeGateway, FakeGatewayFactory
from tests.gateway import SseReader, follow, is_turn_end

CONTINUE = "CONTINUE-FROM-THE-ERROR"
USAGE_DEFAULTS = {
    "usage_limit": RetrySettings().usage_limit,
    "usage_limit_max_wait_s": RetrySettings().usage_limit_max_wait_s,
}
RETRY = {
    "continuation_prompt": CONTINUE,
    "strategies": {"default": {"delays_s": [0.1, 0.2]}, "slow": {"delays_s": [30.0]}},
}


@pytest.fixture
def gateway(make_fake_gateway: FakeGatewayFactory) -> FakeGateway:
    return make_fake_gateway(retry=RETRY).start()


def new_session(client: httpx.Client, gateway: FakeGateway, **body: Any) -> str:
    response = client.post("/v1/sessions", json={"workspace": str(gateway.workspace), **body})
    assert response.status_code == 201, response.text
    session_id: str = response.json()["id"]
    return session_id


def run(
    client: httpx.Client, sid: str, prompt: str, **body: Any
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    after = client.get(f"/v1/sessions/{sid}").json()["last_seq"]
    response = client.post(f"/v1/sessions/{sid}/turns", json={"prompt": prompt, **body})
    assert response.status_code == 202, response.text
    events = follow(client, sid, after=after)
    stored = client.get(f"/v1/sessions/{sid}/turns/{response.json()['id']}").json()
    return stored, events


def prompts_seen(gateway: FakeGateway) -> list[dict[str, Any]]:
    path = gateway.spawn_log.parent / (gateway.spawn_log.name + ".prompts")
    return [json.loads(line) for line in path.read_text().splitlines()]


def of_type(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == kind]


def test_a_flaky_turn_is_retried_in_the_same_thread_with_the_continuation_prompt(
    gateway: FakeGateway,
) -> None:
    with gateway.client() as client:
        sid = new_session(client, gateway)
        turn, events = run(client, sid, "flaky:2")
    assert turn["status"] == "completed"
    assert turn["attempts"] == 3
    scheduled = of_type(events, "retry.scheduled")
    assert [(e["attempt"], e["data"]["attempt"], e["data"]["delay_s"]) for e in scheduled] == [
        (1, 2, 0.1),
        (2, 3, 0.2),
    ]
    assert {e["data"]["source"] for e in scheduled} == {"gateway"}
    assert {e["data"]["kind"] for e in scheduled} == {"overloaded"}
    assert {e["data"]["max_attempts"] for e in scheduled} == {3}
    assert of_type(events, "turn.failed") == []
    completed = of_type(events, "turn.completed")
    assert len(completed) == 1
    assert completed[0]["attempt"] == 3
    seen = prompts_seen(gateway)
    assert [p["prompt"] for p in seen] == ["flaky:2", CONTINUE, CONTINUE]
    assert len({p["thread"] for p in seen}) == 1
    with sqlite3.connect(gateway.data_dir / "gateway.db") as db:
        (policy,) = db.execute(
            "SELECT retry_policy FROM turns WHERE id = ?", (turn["id"],)
        ).fetchone()
    assert json.loads(policy) == {
        "enabled": True,
        "strategy": "default",
        "delays_s": [0.1, 0.2],
        **USAGE_DEFAULTS,
    }
    assert turn["retry"] == {
        "enabled": True,
        "strategy": "default",
        "delays_s": [0.1, 0.2],
        "max_attempts": 3,
        **USAGE_DEFAULTS,
    }


def test_a_persistent_failure_is_reported_once_after_the_schedule(gateway: FakeGateway) -> None:
    with gateway.client() as client:
        sid = new_session(client, gateway)
        turn, events = run(client, sid, "fail-retryable")
        assert client.get(f"/v1/sessions/{sid}").json()["status"] == "idle"
    assert turn["status"] == "failed"
    assert turn["attempts"] == 3
    assert turn["error"]["kind"] == "overloaded"
    assert len(of_type(events, "retry.scheduled")) == 2
    failed = of_type(events, "turn.failed")
    assert len(failed) == 1
    assert failed[0]["attempt"] == 3


def test_an_auth_failure_is_not_retried(gateway: FakeGateway) -> None:
    with gateway.client() as client:
        turn, events = run(client, new_session(client, gateway), "fail-auth")
    assert turn["status"] == "failed"
    assert turn["attempts"] == 1
    assert turn["error"]["kind"] == "auth"
    assert of_type(events, "retry.scheduled") == []


def test_a_turn_can_switch_retry_off(gateway: FakeGateway) -> None:
    with gateway.client() as client:
        sid = new_session(client, gateway, retry={"strategy": "default"})
        turn, events = run(client, sid, "flaky:1", retry={"enabled": False})
    assert turn["status"] == "failed"
    assert turn["attempts"] == 1
    assert of_type(events, "retry.scheduled") == []
    assert turn["retry"] == {
        "enabled": False,
        "strategy": "default",
        "delays_s": [0.1, 0.2],
        "max_attempts": 1,
        **USAGE_DEFAULTS,
    }


def test_the_turn_keeps_the_policy_it_was_created_with(gateway: FakeGateway) -> None:
    with gateway.client() as client:
        sid = new_session(client, gateway, retry={"strategy": "slow"})
        created = client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "hi"})
        assert created.status_code == 202, created.text
        slow = {
            "enabled": True,
            "strategy": "slow",
            "delays_s": [30.0],
            "max_attempts": 2,
            **USAGE_DEFAULTS,
        }
        assert created.json()["retry"] == slow  # in the 202 already
        follow(client, sid)
        listed = client.get(f"/v1/sessions/{sid}/turns").json()["turns"]
        assert [turn["retry"] for turn in listed] == [slow]


def test_an_unknown_retry_strategy_is_refused(gateway: FakeGateway) -> None:
    with gateway.client() as client:
        refused = client.post(
            "/v1/sessions",
            json={"workspace": str(gateway.workspace), "retry": {"strategy": "eager"}},
        )
        assert refused.status_code == 422
        assert "eager" in refused.json()["detail"]
        sid = new_session(client, gateway)
        refused = client.post(
            f"/v1/sessions/{sid}/turns", json={"prompt": "hi", "retry": {"strategy": "eager"}}
        )
        assert refused.status_code == 422
        assert refused.headers["content-type"].startswith("application/problem+json")
        assert refused.json()["strategies"] == ["default", "slow"]
        assert client.get(f"/v1/sessions/{sid}/turns").json()["turns"] == []


def test_an_interrupt_during_a_retry_wait_ends_the_turn_at_once(gateway: FakeGateway) -> None:
    with gateway.client() as client:
        sid = new_session(client, gateway, retry={"strategy": "slow"})
        headers = {"Accept": "text/event-stream", "Last-Event-ID": "2"}
        with client.stream("GET", f"/v1/sessions/{sid}/events", headers=headers) as response:
            reader = SseReader(response)
            created = client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "flaky:1"})
            turn_id = created.json()["id"]
            reader.until(lambda e: e["type"] == "retry.scheduled")
            assert client.get(f"/v1/sessions/{sid}").json()["status"] == "retrying"
            assert client.get(f"/v1/sessions/{sid}/turns/{turn_id}").json()["status"] == "retrying"
            started = time.monotonic()
            assert client.post(f"/v1/sessions/{sid}/interrupt").status_code == 202
            ended = reader.until(is_turn_end)
            assert time.monotonic() - started < 5.0
        assert ended[-1]["type"] == "turn.interrupted"
        stored = client.get(f"/v1/sessions/{sid}/turns/{turn_id}").json()
        assert stored["status"] == "interrupted"
        assert stored["attempts"] == 1
        assert client.get(f"/v1/sessions/{sid}").json()["status"] == "idle"


def test_a_turn_running_when_the_gateway_dies_fails_as_gateway_restart(
    gateway: FakeGateway,
) -> None:
    with gateway.client() as client:
        sid = new_session(client, gateway)
        client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "hang"})
        seen = follow(client, sid, lambda e: e["type"] == "session.thread_bound")
    assert gateway.process is not None
    gateway.process.kill()
    gateway.stop()
    gateway.start()
    with gateway.client() as client:
        # A client that saw events up to `seen[-1]` reconnects: it gets the rest, none twice.
        resumed = follow(client, sid, is_turn_end, after=seen[-1]["seq"])
        stored = client.get(f"/v1/sessions/{sid}/events", params={"limit": 1000}).json()
        assert [e["seq"] for e in seen + resumed] == list(range(1, resumed[-1]["seq"] + 1))
        assert seen + resumed == stored["events"][: len(seen + resumed)]
        assert client.get(f"/v1/sessions/{sid}").json()["status"] == "idle"
        (turn,) = client.get(f"/v1/sessions/{sid}/turns").json()["turns"]
        assert turn["status"] == "failed"
        assert turn["error"]["kind"] == "interrupted"
        assert turn["error"]["reason"] == "gateway_restart"
        events = client.get(f"/v1/sessions/{sid}/events", params={"limit": 1000}).json()["events"]
        ends = [e for e in events if is_turn_end(e)]
        assert [e["type"] for e in ends] == ["turn.failed"]
        assert ends[0]["data"]["error"]["reason"] == "gateway_restart"
        assert "gateway_restart" in ends[0]["data"]["error"]["message"]
        follow_up, _ = run(client, sid, "hi")
        assert follow_up["status"] == "completed"
