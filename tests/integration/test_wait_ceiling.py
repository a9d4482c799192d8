"""T29: a client cannot outwait the operator, through the real gateway with the fake ``claude``.

A ``retry.usage_limit_max_wait_s`` above the gateway's ``retry.usage_limit_max_wait_s`` is a
422 that names the ceiling, on every way a request reaches a turn (a session, a turn, a run,
a WebSocket ``turn.start``), before anything is stored or spawned.
"""

from __future__ import annotations

import json

from websockets.sync.client import connect as ws_connect

from tests.fakes.gateway import FakeGatewayFactory
from tests.integration.callers import assert_problem, new_session
from tests.integration.streams import AUTH, ws_url

CEILING = 60
TOO_LONG = {"usage_limit": "wait", "usage_limit_max_wait_s": 7 * 24 * 3600}


def test_t29_a_wait_above_the_operators_ceiling_is_refused_before_anything_runs(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    gateway = make_fake_gateway(retry={"usage_limit_max_wait_s": CEILING}).start()
    with gateway.client() as client:
        body = {"workspace": str(gateway.workspace), "retry": TOO_LONG}
        problem = assert_problem(client.post("/v1/sessions", json=body), 422, "invalid_request")
        assert problem["ceiling_s"] == CEILING
        assert "at most 60 s" in problem["detail"]
        run = client.post("/v1/runs", json={**body, "prompt": "hi"})
        assert assert_problem(run, 422, "invalid_request")["ceiling_s"] == CEILING
        assert client.get("/v1/sessions").json()["sessions"] == []

        sid = new_session(client, gateway.workspace)
        turn = client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "hi", "retry": TOO_LONG})
        assert assert_problem(turn, 422, "invalid_request")["ceiling_s"] == CEILING
        with ws_connect(ws_url(gateway, sid), additional_headers=AUTH) as ws:
            ws.send(json.dumps({"type": "turn.start", "prompt": "hi", "retry": TOO_LONG}))
            frame = json.loads(ws.recv(timeout=10))
            while frame.get("type") not in ("ack", "error"):  # the session's events first
                frame = json.loads(ws.recv(timeout=10))
        assert frame["type"] == "error"
        assert frame["problem"]["ceiling_s"] == CEILING
        assert client.get(f"/v1/sessions/{sid}/turns").json()["turns"] == []
        assert gateway.spawns() == []

        # Up to the ceiling is accepted, and the turn keeps what was asked for.
        accepted = {"usage_limit": "wait", "usage_limit_max_wait_s": CEILING}
        turn = client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "hi", "retry": accepted})
        assert turn.status_code == 202, turn.text
        assert turn.json()["retry"]["usage_limit_max_wait_s"] == CEILING
