"""T28: one key cannot take a whole global cap, through the real gateway.

Event streams (``limits.max_subscribers``) and live CLI processes (``limits.max_live_processes``,
the fake ``claude``) are shared between keys: one key holds at most ``limits.max_key_share`` of
each (429 ``key_share_exceeded``), the last ``limits.admin_reserve_share`` is kept for admin
keys (503 ``at_capacity`` for the others), and other keys go on while one is at its share.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect as ws_connect

from tests.fakes.gateway import FakeGateway, FakeGatewayFactory
from tests.gateway import follow
from tests.integration.callers import ALICE, BOB, KEYS, as_key, assert_problem, new_session
from tests.integration.cliprocs import run_turn, terminal, wait_until
from tests.integration.streams import sse_headers, ws_url

STREAM_LIMITS = {
    "max_subscribers": 10,
    "max_key_share": 0.5,
    "admin_reserve_share": 0.1,
    "max_subscribers_per_session": 64,
}


@contextlib.contextmanager
def streams(client: httpx.Client) -> Iterator[list[httpx.Response]]:
    """Open SSE responses of ``client`` (appended by the test), all closed at the end."""
    opened: list[httpx.Response] = []
    try:
        yield opened
    finally:
        for response in opened:
            response.close()


def open_stream(client: httpx.Client, session_id: str) -> httpx.Response:
    request = client.build_request(
        "GET", f"/v1/sessions/{session_id}/events", headers=sse_headers()
    )
    return client.send(request, stream=True)


def refused_problem(response: httpx.Response, status: int, slug: str) -> dict[str, Any]:
    assert response.status_code == status  # before reading: a stream let through never ends
    response.read()
    body = assert_problem(response, status, slug)
    assert int(response.headers["retry-after"]) >= 1
    return body


def test_t28_one_key_holds_at_most_its_share_of_the_event_streams(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    gateway = make_fake_gateway(server=KEYS, limits=STREAM_LIMITS).start()
    with (
        as_key(gateway, ALICE) as alice,
        as_key(gateway, BOB) as bob,
        gateway.client() as admin,
        streams(alice) as alices,
        streams(bob) as bobs,
        streams(admin) as admins,
    ):
        mine = new_session(alice, gateway.workspace)
        theirs = new_session(bob, gateway.workspace)
        for _ in range(5):  # floor(10 * 0.5)
            alices.append(open_stream(alice, mine))
            assert alices[-1].status_code == 200
        over = open_stream(alice, mine)
        alices.append(over)
        problem = refused_problem(over, 429, "key_share_exceeded")
        assert problem["cap"] == "max_subscribers"
        assert (problem["limit"], problem["held"], problem["share"]) == (5, 5, 0.5)
        assert "limits.max_subscribers" in problem["detail"]
        assert "limits.max_key_share" in problem["detail"]
        with pytest.raises(InvalidStatus) as ws_refused:
            ws_connect(
                ws_url(gateway, mine), additional_headers={"Authorization": f"Bearer {ALICE}"}
            )
        assert ws_refused.value.response.status_code == 429
        # Another key still gets its streams, up to the admin reserve (the last one of ten).
        for _ in range(4):
            bobs.append(open_stream(bob, theirs))
            assert bobs[-1].status_code == 200
        reserved = open_stream(bob, theirs)
        bobs.append(reserved)
        problem = refused_problem(reserved, 503, "at_capacity")
        assert (problem["limit"], problem["reserve"]) == (9, 1)
        assert "limits.admin_reserve_share" in problem["detail"]
        # The admin key takes the reserved one, on a session that is not its own.
        admins.append(open_stream(admin, mine))
        assert admins[-1].status_code == 200
        full = open_stream(admin, theirs)
        admins.append(full)
        assert refused_problem(full, 503, "at_capacity")["limit"] == 10
        # Closed streams give their slots back (one of the key's own, one below the reserve).
        alices.pop(0).close()
        bobs.pop(0).close()

        def alice_may_open() -> bool:
            response = open_stream(alice, mine)
            if response.status_code != 200:
                response.close()
                return False
            alices.append(response)
            return True

        wait_until(alice_may_open, timeout=20)


def test_t28_one_key_holds_at_most_its_share_of_the_live_processes(
    make_cli_gateway: FakeGatewayFactory,
) -> None:
    limits = {"max_live_processes": 4, "max_key_share": 0.5, "admin_reserve_share": 0}
    gateway: FakeGateway = make_cli_gateway(server=KEYS, limits=limits).start()
    with as_key(gateway, ALICE) as alice, as_key(gateway, BOB) as bob, gateway.client() as admin:
        first, second, third = (new_session(alice, gateway.workspace) for _ in range(3))
        # At its share with an idle process, a key's own idle process is closed for its next.
        for sid in (first, second, third):
            assert terminal(run_turn(alice, sid, "hi"))["type"] == "turn.completed"
        assert alice.get(f"/v1/sessions/{first}").json()["process"] is None
        # Two busy processes: the key's share; its next turn is refused, nothing spawned.
        for sid in (second, third):
            after = alice.get(f"/v1/sessions/{sid}").json()["last_seq"]
            assert alice.post(f"/v1/sessions/{sid}/turns", json={"prompt": "slow"}).is_success
            follow(alice, sid, lambda e: e["type"] == "message.delta", after=after)
        spawned = len(gateway.spawns())
        refused = alice.post(f"/v1/sessions/{first}/turns", json={"prompt": "hi"})
        problem = assert_problem(refused, 429, "key_share_exceeded")
        assert int(refused.headers["retry-after"]) >= 1
        assert (problem["cap"], problem["limit"], problem["held"]) == (
            "max_live_processes",
            2,
            2,
        )
        assert "limits.max_live_processes" in problem["detail"]
        assert len(gateway.spawns()) == spawned
        assert len(alice.get(f"/v1/sessions/{first}/turns").json()["turns"]) == 1
        # The other keys' turns run, admin included, while that key is at its share.
        for client in (bob, admin):
            sid = new_session(client, gateway.workspace)
            assert terminal(run_turn(client, sid, "hi"))["type"] == "turn.completed"
        # A turn of the key's own that ends gives it the slot back.
        assert alice.post(f"/v1/sessions/{second}/interrupt").status_code == 202
        wait_until(lambda: alice.get(f"/v1/sessions/{second}").json()["status"] == "idle")
        assert terminal(run_turn(alice, first, "hi again"))["type"] == "turn.completed"
