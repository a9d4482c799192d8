"""A key sees and drives only its own sessions (threat T14); the admin token sees them all.
Against a real gateway process with two named keys."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from websockets.sync.client import connect

from tests.fakes.gateway import FakeGatewayFactory
from tests.gateway import TOKEN, follow
from tests.integration.callers import ALICE, BOB, KEYS, as_key, assert_problem, create, ws_refusal


def test_t14_a_key_cannot_read_stream_drive_or_delete_another_keys_session(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    gateway = make_fake_gateway(server=KEYS).start()
    with as_key(gateway, ALICE) as alice, as_key(gateway, BOB) as bob:
        mine = create(alice, gateway)
        theirs = create(bob, gateway)
        wrote = {"prompt": "run:echo alice > alice.txt"}
        assert alice.post(f"/v1/sessions/{mine}/turns", json=wrote).status_code == 202
        assert follow(alice, mine)[-1]["type"] == "turn.completed"
        turn_id = alice.get(f"/v1/sessions/{mine}/turns").json()["turns"][0]["id"]
        assert alice.get(f"/v1/sessions/{mine}/changes").status_code == 200

        alices = {s["id"] for s in alice.get("/v1/sessions").json()["sessions"]}
        bobs = {s["id"] for s in bob.get("/v1/sessions").json()["sessions"]}
        assert mine in alices
        assert theirs not in alices
        assert theirs in bobs
        assert mine not in bobs
        for method, path, body in [
            ("GET", f"/v1/sessions/{mine}", None),
            ("GET", f"/v1/sessions/{mine}/turns", None),
            ("GET", f"/v1/sessions/{mine}/turns/{turn_id}", None),
            ("GET", f"/v1/sessions/{mine}/events", None),
            ("GET", f"/v1/sessions/{mine}/approvals", None),
            ("POST", f"/v1/sessions/{mine}/turns", {"prompt": "from bob"}),
            ("POST", f"/v1/sessions/{mine}/approvals/apr_x", {"decision": "allow"}),
            ("GET", f"/v1/sessions/{mine}/questions", None),
            ("POST", f"/v1/sessions/{mine}/questions/qst_x", {"answers": [{"text": "x"}]}),
            ("POST", f"/v1/sessions/{mine}/interrupt", None),
            ("GET", f"/v1/sessions/{mine}/changes", None),
            ("GET", f"/v1/sessions/{mine}/changes?from={turn_id}&to={turn_id}", None),
            ("GET", f"/v1/sessions/{mine}/changes?format=patch", None),
            ("POST", f"/v1/sessions/{mine}/revert", {"to_turn": turn_id}),
            ("POST", f"/v1/sessions/{mine}/fork", {}),
            ("DELETE", f"/v1/sessions/{mine}", None),
        ]:
            stolen = bob.request(method, path, json=body)
            problem = assert_problem(stolen, 404, "not_found")
            missing = bob.request(method, path.replace(mine, "ses_" + "0" * 32), json=body)
            assert missing.status_code == 404
            assert problem["detail"] == missing.json()["detail"].replace("ses_" + "0" * 32, mine)
        sse = bob.get(f"/v1/sessions/{mine}/events", headers={"Accept": "text/event-stream"})
        assert_problem(sse, 404, "not_found")
        query = httpx.get(
            f"{gateway.base_url}/v1/sessions/{mine}/events",
            params={"access_token": BOB},
            headers={"Accept": "text/event-stream"},
        )
        assert_problem(query, 404)
        refused = ws_refusal(
            f"{gateway.ws_url}/v1/sessions/{mine}/ws", {"Authorization": f"Bearer {BOB}"}
        )
        assert refused.response.status_code == 404
        # Still Alice's, untouched: one turn, open, its file not reverted, nothing forked.
        assert alice.get(f"/v1/sessions/{mine}").json()["status"] == "idle"
        assert len(alice.get(f"/v1/sessions/{mine}/turns").json()["turns"]) == 1
        assert (gateway.workspace / "alice.txt").read_text() == "alice\n"
        kinds = {e["type"] for e in alice.get(f"/v1/sessions/{mine}/events").json()["events"]}
        assert not kinds & {"session.reverted", "session.forked"}
        assert {s["id"] for s in bob.get("/v1/sessions").json()["sessions"]} == {theirs}
    prompts_log = Path(str(gateway.spawn_log) + ".prompts")
    assert "from bob" not in prompts_log.read_text()

    with gateway.client() as admin:
        listed = {s["id"] for s in admin.get("/v1/sessions").json()["sessions"]}
        assert {mine, theirs} <= listed
        assert admin.get(f"/v1/sessions/{mine}").json()["id"] == mine
        with connect(
            f"{gateway.ws_url}/v1/sessions/{theirs}/ws",
            additional_headers={"Authorization": f"Bearer {TOKEN}"},
        ) as ws:
            assert json.loads(ws.recv(timeout=10))["session_id"] == theirs
        assert admin.post(f"/v1/sessions/{theirs}/turns", json={"prompt": "hi"}).status_code == 202
        assert follow(admin, theirs)[-1]["type"] == "turn.completed"
        assert admin.delete(f"/v1/sessions/{theirs}").json()["status"] == "closed"
