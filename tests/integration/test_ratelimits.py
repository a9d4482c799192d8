"""Rate limits and caps (threat T13) against a real gateway process: session creations per key,
open sessions per key, auth failures per address, and uvicorn's connection limit."""

from __future__ import annotations

import threading
from typing import Any

import httpx

from tests.fakes.gateway import FakeGatewayFactory
from tests.gateway import TOKEN
from tests.integration.callers import ALICE, BOB, KEYS, as_key, assert_problem, create, ws_refusal


def test_t13_session_creation_rate_per_key_gives_429_with_retry_after(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    gateway = make_fake_gateway(server=KEYS, limits={"session_creates_per_minute": 3}).start()
    with as_key(gateway, ALICE) as alice, as_key(gateway, BOB) as bob:
        for _ in range(3):
            create(alice, gateway)
        refused = alice.post("/v1/sessions", json={"workspace": str(gateway.workspace)})
        problem = assert_problem(refused, 429, "rate_limited")
        assert problem["limit"] == "session_creates_per_minute"
        assert 1 <= int(refused.headers["retry-after"]) <= 20
        run = alice.post("/v1/runs", json={"workspace": str(gateway.workspace), "prompt": "hi"})
        assert_problem(run, 429, "rate_limited")
        create(bob, gateway)  # another key has its own budget
        assert len(alice.get("/v1/sessions").json()["sessions"]) == 3


def test_t13_open_sessions_per_key_are_capped_and_closing_one_frees_a_slot(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    gateway = make_fake_gateway(server=KEYS, limits={"max_open_sessions_per_key": 2}).start()
    workspace = {"workspace": str(gateway.workspace)}
    with as_key(gateway, ALICE) as alice:
        first, _ = create(alice, gateway), create(alice, gateway)
        refused = alice.post("/v1/sessions", json=workspace)
        problem = assert_problem(refused, 429, "rate_limited")
        assert problem["limit"] == "max_open_sessions_per_key"
        assert "retry-after" in refused.headers
        assert alice.delete(f"/v1/sessions/{first}").status_code == 200
        create(alice, gateway)
    with gateway.client() as admin:
        create(admin, gateway)  # the admin key's own sessions count apart


def test_t13_concurrent_creations_beyond_the_caps_are_clean_429s(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    gateway = make_fake_gateway(
        server=KEYS, limits={"max_open_sessions_per_key": 5, "session_creates_per_minute": 100}
    ).start()
    statuses: list[int] = []
    barrier = threading.Barrier(20)

    def attempt() -> None:
        with as_key(gateway, ALICE) as alice:
            barrier.wait(timeout=30)
            response = alice.post("/v1/sessions", json={"workspace": str(gateway.workspace)})
            if response.status_code == 429:
                assert "retry-after" in response.headers
            statuses.append(response.status_code)

    threads = [threading.Thread(target=attempt) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(statuses) == [201] * 5 + [429] * 15
    with as_key(gateway, ALICE) as alice:
        assert len(alice.get("/v1/sessions").json()["sessions"]) == 5


def test_t13_auth_failures_back_off_per_address_while_correct_keys_still_pass(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    gateway = make_fake_gateway(limits={"auth_failures_per_minute": 3}).start()
    with httpx.Client(base_url=gateway.base_url, timeout=30) as client:
        wrong = {"Authorization": "Bearer wrong"}
        for _ in range(3):
            assert_problem(client.get("/v1/sessions", headers=wrong), 401)
        limited = client.get("/v1/sessions", headers=wrong)
        problem = assert_problem(limited, 429, "rate_limited")
        assert problem["limit"] == "auth_failures_per_minute"
        assert 1 <= int(limited.headers["retry-after"]) <= 20
        assert_problem(client.get("/v1/sessions"), 429)
        right = client.get("/v1/sessions", headers={"Authorization": f"Bearer {TOKEN}"})
        assert right.status_code == 200
    refused = ws_refusal(f"{gateway.ws_url}/v1/sessions/ses_x/ws", {"Authorization": "Bearer no"})
    assert refused.response.status_code == 429
    assert "retry-after" in refused.response.headers


def test_t13_limit_concurrency_reaches_uvicorn(make_fake_gateway: FakeGatewayFactory) -> None:
    gateway = make_fake_gateway(server={"limit_concurrency": 4}).start()
    with gateway.client() as client:
        sid = create(client, gateway)
    sse = {"Accept": "text/event-stream", "Authorization": f"Bearer {TOKEN}"}
    clients = [httpx.Client(base_url=gateway.base_url, timeout=30) for _ in range(6)]
    streams: list[Any] = []
    try:
        statuses = []
        for one in clients:
            stream = one.stream("GET", f"/v1/sessions/{sid}/events", headers=sse)
            response = stream.__enter__()
            streams.append(stream)
            statuses.append(response.status_code)
            if response.status_code == 503:
                break
        assert statuses[-1] == 503, statuses
        assert len(statuses) <= 4
    finally:
        for stream in streams:
            stream.__exit__(None, None, None)
        for one in clients:
            one.close()
