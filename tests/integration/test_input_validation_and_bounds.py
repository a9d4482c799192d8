"""Threat model T26 (text validated as Unicode at the edge, writes all-or-nothing) and T27
(list pages bounded in bytes, metadata capped), on a running gateway with the fake ``claude``
(its ``ask:<command>`` prompt asks to run a Bash command and answers ``ran: <command>`` with
the command it was allowed to run).

JSON may spell a lone surrogate (``"\\ud800"``), which no UTF-8 encoder takes: bodies are sent
as JSON text with that escape, as a client would.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import httpx
from websockets.sync.client import connect as ws_connect

from tests.fakes.gateway import FakeGateway, FakeGatewayFactory
from tests.gateway import follow
from tests.integration.streams import AUTH, database, ws_url

PROBLEM = "application/problem+json"
LONE = "\ud800"
ALICE = "alice-token-0123456789abcdefghijklmnopqrstuvwxyz"


def post_json(client: httpx.Client, url: str, body: Any) -> httpx.Response:
    """``body`` as JSON text with ``\\u`` escapes (a lone surrogate stays an escape)."""
    content = json.dumps(body)  # ensure_ascii: "\ud800" is written as its escape
    return client.post(url, content=content, headers={"Content-Type": "application/json"})


def ask(client: httpx.Client, gateway: FakeGateway, prompt: str) -> tuple[str, str]:
    created = client.post("/v1/sessions", json={"workspace": str(gateway.workspace)})
    assert created.status_code == 201, created.text
    sid = created.json()["id"]
    assert client.post(f"/v1/sessions/{sid}/turns", json={"prompt": prompt}).status_code == 202
    asked = follow(client, sid, lambda e: e["type"] == "approval.requested")[-1]
    return sid, asked["data"]["approval_id"]


def refused_as_unicode(response: httpx.Response, location: str) -> None:
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == PROBLEM
    problem = response.json()
    assert problem["type"].endswith(":validation_failed"), problem
    assert [e["location"] for e in problem["errors"]] == [location], problem
    assert "valid Unicode" in problem["errors"][0]["message"]


def test_t26_a_lone_surrogate_in_edited_input_is_refused_before_the_cli_hears_of_it(
    fake_gateway: FakeGateway,
) -> None:
    with fake_gateway.client() as client:
        sid, approval_id = ask(client, fake_gateway, "ask:echo ASKED")
        url = f"/v1/sessions/{sid}/approvals/{approval_id}"
        edited = {"command": "echo EDITED", "note": f"x{LONE}y"}
        refused = post_json(client, url, {"decision": "allow", "updated_input": edited})
        refused_as_unicode(refused, "body.updated_input.note")
        listed = client.get(f"/v1/sessions/{sid}/approvals")
        assert listed.status_code == 200, listed.text
        [pending] = listed.json()["approvals"]
        assert pending["status"] == "pending"
        # The edited command never reached the CLI: it runs what the next answer allows.
        assert client.post(url, json={"decision": "allow"}).status_code == 200
        events = follow(client, sid)
        assert events[-1]["data"]["final_text"] == "ran: echo ASKED"
        assert [e["type"] for e in events].count("approval.resolved") == 1


def test_t26_a_lone_surrogate_in_metadata_stores_no_session_and_lists_stay_readable(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    gateway = make_fake_gateway(server={"api_keys": [{"name": "alice", "token": ALICE}]}).start()
    alice = {"Authorization": f"Bearer {ALICE}"}
    with (
        gateway.client() as admin,
        httpx.Client(base_url=gateway.base_url, headers=alice) as client,
    ):
        for metadata, location in (
            ({"label": LONE}, "body.metadata.label"),
            ({"deep": [{"x": ["ok", f"a{LONE}"]}]}, "body.metadata.deep.0.x.1"),
            ({f"key{LONE}": 1}, "body.metadata.key\\ud800"),
        ):
            body = {"workspace": str(gateway.workspace), "metadata": metadata}
            refused_as_unicode(post_json(client, "/v1/sessions", body), location)
        run = {"workspace": str(gateway.workspace), "prompt": LONE}
        refused_as_unicode(post_json(client, "/v1/runs", run), "body.prompt")
        for lister in (client, admin):
            listed = lister.get("/v1/sessions")
            assert listed.status_code == 200, listed.text
            assert listed.json()["sessions"] == []
    with sqlite3.connect(database(gateway)) as db:
        assert db.execute("SELECT count(*) FROM sessions").fetchone() == (0,)


def test_t26_a_websocket_frame_with_a_lone_surrogate_is_refused_and_the_socket_stays_open(
    fake_gateway: FakeGateway,
) -> None:
    with fake_gateway.client() as client:
        sid, approval_id = ask(client, fake_gateway, "ask:echo ASKED")
        with ws_connect(ws_url(fake_gateway, sid), additional_headers=AUTH) as ws:
            frame = {
                "type": "approval.respond",
                "approval_id": approval_id,
                "decision": "allow",
                "updated_input": {"command": f"echo {LONE}"},
            }
            ws.send(json.dumps(frame))
            reply = next(f for f in map(json.loads, _texts(ws)) if f.get("type") == "error")
            assert reply["problem"]["status"] == 422
            assert "updated_input.command" in reply["problem"]["detail"]
            assert "valid Unicode" in reply["problem"]["detail"]
            ws.send(json.dumps({**frame, "updated_input": None}))  # the same socket goes on
            ack = next(f for f in map(json.loads, _texts(ws)) if f.get("type") == "ack")
            assert ack["approval"]["status"] == "allowed"
        assert follow(client, sid)[-1]["data"]["final_text"] == "ran: echo ASKED"


def _texts(ws: Any) -> Any:
    while True:
        yield ws.recv(timeout=20)


def refuse_events(gateway: FakeGateway, event_type: str) -> None:
    """The database refuses to store events of ``event_type`` (a write failing mid-request)."""
    with sqlite3.connect(database(gateway)) as db:
        db.execute(
            f"CREATE TRIGGER refuse BEFORE INSERT ON events WHEN NEW.type = '{event_type}' "
            "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
        )


def failed(gateway: FakeGateway, request: Any) -> None:
    """The request, on a connection of its own, failed: a 5xx problem, or (an error the
    gateway did not expect, which is also raised to uvicorn) a connection closed without one."""
    try:
        with gateway.client() as client:
            response = request(client)
    except httpx.TransportError:
        return
    assert response.status_code >= 500, response.text
    assert response.headers["content-type"] == PROBLEM


def accept_events(gateway: FakeGateway) -> None:
    with sqlite3.connect(database(gateway)) as db:
        db.execute("DROP TRIGGER refuse")


def test_t26_an_answer_whose_event_cannot_be_stored_leaves_the_approval_pending(
    fake_gateway: FakeGateway,
) -> None:
    with fake_gateway.client() as client:
        sid, approval_id = ask(client, fake_gateway, "ask:echo ASKED")
        url = f"/v1/sessions/{sid}/approvals/{approval_id}"
        refuse_events(fake_gateway, "approval.resolved")
        edit = {"decision": "allow", "updated_input": {"command": "echo EDITED"}}
        try:
            failed(fake_gateway, lambda c: c.post(url, json=edit))
        finally:
            accept_events(fake_gateway)
        [pending] = client.get(f"/v1/sessions/{sid}/approvals").json()["approvals"]
        assert (pending["status"], pending["updated_input"], pending["decided_at"]) == (
            "pending",
            None,
            None,
        )
        assert client.post(url, json={"decision": "allow"}).status_code == 200
        events = follow(client, sid)
        assert events[-1]["data"]["final_text"] == "ran: echo ASKED"  # the edit never ran
        assert [e["type"] for e in events].count("approval.resolved") == 1


def test_t26_a_session_whose_first_events_cannot_be_stored_is_not_kept(
    fake_gateway: FakeGateway,
) -> None:
    with fake_gateway.client() as client:
        refuse_events(fake_gateway, "session.provider_selected")  # the second of its events
        body = {"workspace": str(fake_gateway.workspace)}
        try:
            failed(fake_gateway, lambda c: c.post("/v1/sessions", json=body))
        finally:
            accept_events(fake_gateway)
        assert client.get("/v1/sessions").json()["sessions"] == []
        with sqlite3.connect(database(fake_gateway)) as db:
            assert db.execute("SELECT count(*) FROM sessions").fetchone() == (0,)
            assert db.execute("SELECT count(*) FROM events").fetchone() == (0,)
        assert client.post(
            "/v1/sessions", json={"workspace": str(fake_gateway.workspace)}
        ).is_success


def test_t27_metadata_is_capped_at_creation(make_fake_gateway: FakeGatewayFactory) -> None:
    gateway = make_fake_gateway(limits={"max_metadata_bytes": 2048}).start()
    with gateway.client() as client:
        body = {"workspace": str(gateway.workspace), "metadata": {"blob": "x" * 2100}}
        refused = client.post("/v1/sessions", json=body)
        assert refused.status_code == 422, refused.text
        assert "limits.max_metadata_bytes" in refused.json()["detail"]
        assert client.get("/v1/sessions").json()["sessions"] == []
        body["metadata"] = {"blob": "x" * 1900}
        assert client.post("/v1/sessions", json=body).status_code == 201


def test_t27_list_pages_end_at_the_byte_budget_and_the_cursor_continues(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    budget = 64 * 1024
    gateway = make_fake_gateway(
        limits={"max_page_bytes": budget, "max_metadata_bytes": 30_000}
    ).start()
    with gateway.client() as client:
        made = []
        for n in range(7):
            body = {"workspace": str(gateway.workspace), "metadata": {"n": n, "pad": "p" * 25_000}}
            created = client.post("/v1/sessions", json=body)
            assert created.status_code == 201, created.text
            made.append(created.json()["id"])
        seen: list[str] = []
        pages: list[int] = []
        params: dict[str, Any] = {"limit": 500}
        while True:
            page = client.get("/v1/sessions", params=params)
            assert page.status_code == 200, page.text
            assert len(page.content) <= budget + 8 * 1024  # the items' stored size, and a frame
            sessions = page.json()["sessions"]
            if not sessions:
                break
            pages.append(len(sessions))
            seen += [s["id"] for s in sessions]
            params["before"] = sessions[-1]["created_at"]
        assert pages == [2, 2, 2, 1]
        assert seen == made[::-1]

        # The events page: a turn's large prompt is in turn.started's neighbours' way.
        sid = made[0]
        for n in range(3):
            prompt = f"turn {n} " + "q" * 40_000
            assert client.post(f"/v1/sessions/{sid}/turns", json={"prompt": prompt}).is_success
            follow(client, sid, after=client.get(f"/v1/sessions/{sid}").json()["last_seq"])
        turns: list[int] = []
        before: dict[str, Any] = {}
        while page_of := client.get(f"/v1/sessions/{sid}/turns", params=before).json()["turns"]:
            assert len(page_of) == 1  # one 40 KB prompt each: two would pass the budget
            turns.append(page_of[0]["number"])
            before = {"before": page_of[-1]["number"]}
        assert turns == [3, 2, 1]
        after, events = 0, []
        while True:
            page = client.get(f"/v1/sessions/{sid}/events", params={"after": after, "limit": 1000})
            assert page.status_code == 200, page.text
            body = page.json()
            events += body["events"]
            after = body["next_after"]
            if after >= body["last_seq"]:
                break
            assert len(page.content) <= budget + 8 * 1024
        assert [e["seq"] for e in events] == list(range(1, body["last_seq"] + 1))
