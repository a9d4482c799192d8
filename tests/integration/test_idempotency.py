"""``Idempotency-Key`` through a real gateway with the fake Claude Code: a request sent again
with its key gets the first answer (status, body, ``Idempotent-Replayed: true``) and does its
work once, on sessions, turns (REST and WebSocket alike), runs and approval answers; another
body with the same key is a 422, a copy while the first is answered a 409; keys are each API
key's own; a refused request frees its key; bad keys are refused.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect as ws_connect

from tests.fakes.gateway import FakeGateway
from tests.gateway import follow, wait_until
from tests.integration.callers import ALICE, BOB, KEYS, as_key, assert_problem
from tests.integration.cliprocs import fake_gateway_in
from tests.integration.streams import AUTH, ws_frames, ws_url

REPLAYED = "Idempotent-Replayed"


@pytest.fixture(scope="module")
def gateway(
    tmp_path_factory: pytest.TempPathFactory, migrated_database: Path
) -> Iterator[FakeGateway]:
    gateway = fake_gateway_in(
        tmp_path_factory.mktemp("idempotency"), migrated_database, server=KEYS
    )
    try:
        yield gateway.start()
    finally:
        gateway.stop()


def keyed(key: str) -> dict[str, str]:
    return {"Idempotency-Key": key}


def prompts(gateway: FakeGateway, prompt: str) -> int:
    """How many times the fake CLI was sent ``prompt``."""
    log = Path(str(gateway.spawn_log) + ".prompts")
    lines = log.read_text().splitlines() if log.exists() else []
    return sum(json.loads(line)["prompt"] == prompt for line in lines)


def new_session(client: httpx.Client, gateway: FakeGateway) -> str:
    response = client.post("/v1/sessions", json={"workspace": str(gateway.workspace)})
    assert response.status_code == 201, response.text
    sid: str = response.json()["id"]
    return sid


def turns_of(client: httpx.Client, sid: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = client.get(f"/v1/sessions/{sid}/turns").json()["turns"]
    return found


def test_the_same_turn_posted_twice_with_one_key_starts_once(gateway: FakeGateway) -> None:
    with gateway.client() as client:
        sid = new_session(client, gateway)
        body = {"prompt": "once, please"}
        first = client.post(f"/v1/sessions/{sid}/turns", json=body, headers=keyed("turn-1"))
        assert first.status_code == 202, first.text
        assert REPLAYED not in first.headers
        follow(client, sid)
        again = client.post(f"/v1/sessions/{sid}/turns", json=body, headers=keyed("turn-1"))
        assert again.status_code == 202
        assert again.headers[REPLAYED] == "true"
        assert again.headers["content-type"] == "application/json"
        assert again.content == first.content  # the first answer, as it was (status "queued")
        assert [t["id"] for t in turns_of(client, sid)] == [first.json()["id"]]
        assert prompts(gateway, "once, please") == 1

        # The same key with another body is another request: refused, nothing started.
        other = client.post(
            f"/v1/sessions/{sid}/turns", json={"prompt": "twice"}, headers=keyed("turn-1")
        )
        problem = assert_problem(other, 422, "idempotency_key_reused")
        assert problem["request"] == f"start_turn {sid}"
        elsewhere = client.post(
            f"/v1/sessions/{new_session(client, gateway)}/turns", json=body, headers=keyed("turn-1")
        )
        assert_problem(elsewhere, 422, "idempotency_key_reused")
        assert len(turns_of(client, sid)) == 1
        assert prompts(gateway, "twice") == 0


def test_a_body_that_differs_only_in_form_is_the_same_request(gateway: FakeGateway) -> None:
    workspace = str(gateway.workspace)
    with gateway.client() as client:
        first = client.post(
            "/v1/sessions",
            json={"workspace": workspace, "metadata": {"a": 1, "b": [1, 2]}},
            headers=keyed("create-1"),
        )
        assert first.status_code == 201, first.text
        # Keys in another order, other spacing, a default spelled out, 1 written as 1.0.
        raw = (
            '{ "metadata" : {"b": [1, 2.0], "a": 1.0},\n  "requires": [], "model": null, '
            f'"workspace": {json.dumps(workspace)} }}'
        )
        again = client.post(
            "/v1/sessions",
            content=raw,
            headers={**keyed("create-1"), "Content-Type": "application/json"},
        )
        assert again.status_code == 201, again.text
        assert again.headers[REPLAYED] == "true"
        assert again.json()["id"] == first.json()["id"]
        listed = client.get("/v1/sessions", params={"limit": 500}).json()["sessions"]
        assert [s["id"] for s in listed].count(first.json()["id"]) == 1


def test_keys_are_each_api_keys_own(gateway: FakeGateway) -> None:
    body = {"workspace": str(gateway.workspace)}
    with as_key(gateway, ALICE) as alice, as_key(gateway, BOB) as bob:
        mine = alice.post("/v1/sessions", json=body, headers=keyed("shared-name"))
        theirs = bob.post("/v1/sessions", json=body, headers=keyed("shared-name"))
        assert (mine.status_code, theirs.status_code) == (201, 201)
        assert REPLAYED not in theirs.headers
        assert mine.json()["id"] != theirs.json()["id"]
        assert bob.get(f"/v1/sessions/{mine.json()['id']}").status_code == 404


def test_a_refused_request_frees_its_key(gateway: FakeGateway) -> None:
    with gateway.client() as client:
        sid = new_session(client, gateway)
        running = client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "slow"})
        assert running.status_code == 202
        busy = client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "hi"}, headers=keyed("k"))
        assert_problem(busy, 409, "turn_in_progress")
        assert client.post(f"/v1/sessions/{sid}/interrupt").status_code == 202
        follow(client, sid)
        now = client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "hi"}, headers=keyed("k"))
        assert now.status_code == 202, now.text
        assert REPLAYED not in now.headers
        assert len(turns_of(client, sid)) == 2


def test_a_copy_of_a_run_sent_while_it_runs_gets_409_then_its_result(
    gateway: FakeGateway,
) -> None:
    body = {"workspace": str(gateway.workspace), "prompt": "steps:8:1:1:0"}  # about 1.6 s
    answers: list[httpx.Response] = []
    with gateway.client() as client:
        before = {s["id"] for s in client.get("/v1/sessions").json()["sessions"]}

        def run() -> None:
            with gateway.client() as own:
                answers.append(own.post("/v1/runs", json=body, headers=keyed("run-1")))

        first = threading.Thread(target=run)
        first.start()
        wait_until(
            lambda: {s["id"] for s in client.get("/v1/sessions").json()["sessions"]} - before,
            what="the run's session",
        )
        copy = client.post("/v1/runs", json=body, headers=keyed("run-1"))
        assert_problem(copy, 409, "idempotency_key_in_use")
        assert copy.headers["Retry-After"] == "1"
        first.join(timeout=30)
        [answer] = answers
        assert answer.status_code == 200, answer.text
        assert answer.json()["status"] == "completed"

        again = client.post("/v1/runs", json=body, headers=keyed("run-1"))
        assert again.status_code == 200
        assert again.headers[REPLAYED] == "true"
        assert again.content == answer.content
        made = {s["id"] for s in client.get("/v1/sessions").json()["sessions"]} - before
        assert made == {answer.json()["session_id"]}


def test_a_client_that_gave_up_on_a_run_gets_its_result_when_it_sends_it_again(
    gateway: FakeGateway,
) -> None:
    body = {"workspace": str(gateway.workspace), "prompt": "steps:5:1:1:0"}  # about 1 s
    with gateway.client() as client:
        before = {s["id"] for s in client.get("/v1/sessions").json()["sessions"]}
        with pytest.raises(httpx.ReadTimeout):
            client.post("/v1/runs", json=body, headers=keyed("gave-up"), timeout=0.3)
        [made] = wait_until(
            lambda: {s["id"] for s in client.get("/v1/sessions").json()["sessions"]} - before,
            what="the run's session",
        )
        follow(client, made)  # the run ends without its client

        def answered() -> httpx.Response | None:
            copy = client.post("/v1/runs", json=body, headers=keyed("gave-up"))
            return None if copy.status_code == 409 else copy  # 409: its answer is being kept

        again: httpx.Response = wait_until(answered, what="the run's kept answer")
        assert again.status_code == 200, again.text
        assert again.headers[REPLAYED] == "true"
        assert (again.json()["session_id"], again.json()["status"]) == (made, "completed")
        after = {s["id"] for s in client.get("/v1/sessions").json()["sessions"]}
        assert after - before == {made}


def test_a_streamed_run_sent_again_streams_the_same_run_from_its_start(
    gateway: FakeGateway,
) -> None:
    body = {"workspace": str(gateway.workspace), "prompt": "hi there"}
    headers = {**keyed("stream-1"), "Accept": "text/event-stream"}
    with gateway.client() as client:
        seen: list[list[dict[str, Any]]] = []
        for _ in range(2):
            with client.stream("POST", "/v1/runs", json=body, headers=headers) as response:
                assert response.status_code == 200
                lines = [line for line in response.iter_lines() if line.startswith("data:")]
                seen.append([json.loads(line[5:]) for line in lines])
                replayed = response.headers.get(REPLAYED)
        first, second = seen
        assert replayed == "true"
        assert [e["type"] for e in first][-1] == "turn.completed"
        assert second == first
        assert prompts(gateway, "hi there") == 1


def test_a_websocket_turn_start_and_its_rest_copy_are_one_request(gateway: FakeGateway) -> None:
    with gateway.client() as client:
        sid = new_session(client, gateway)
        frame = {"type": "turn.start", "prompt": "over the socket", "idempotency_key": "ws-1"}
        with ws_connect(ws_url(gateway, sid), additional_headers=AUTH) as ws:
            acks = []
            for _ in range(2):
                ws.send(json.dumps(frame))
                acks.append(ws_frames(ws, lambda f: f.get("type") in {"ack", "error"})[-1])
        first, again = acks
        assert first["type"] == "ack"
        assert "replayed" not in first
        assert again == {**first, "replayed": True}
        rest = client.post(
            f"/v1/sessions/{sid}/turns", json={"prompt": "over the socket"}, headers=keyed("ws-1")
        )
        assert rest.status_code == 202
        assert rest.headers[REPLAYED] == "true"
        assert rest.json() == first["turn"]
        assert follow(client, sid)[-1]["type"] == "turn.completed"
        assert len(turns_of(client, sid)) == 1
        assert prompts(gateway, "over the socket") == 1

        with ws_connect(ws_url(gateway, sid), additional_headers=AUTH) as ws:
            ws.send(json.dumps({**frame, "prompt": "another"}))
            refused = ws_frames(ws, lambda f: f.get("type") in {"ack", "error"})[-1]
        assert refused["type"] == "error"
        assert refused["problem"]["type"].endswith(":idempotency_key_reused")


def test_an_approval_answered_twice_with_one_key_is_answered_once(gateway: FakeGateway) -> None:
    with gateway.client() as client:
        sid = new_session(client, gateway)
        client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "ask:echo hi"})
        asked = follow(client, sid, lambda e: e["type"] == "approval.requested")[-1]
        url = f"/v1/sessions/{sid}/approvals/{asked['data']['approval_id']}"
        first = client.post(url, json={"decision": "allow"}, headers=keyed("answer-1"))
        assert first.status_code == 200, first.text
        again = client.post(url, json={"decision": "allow"}, headers=keyed("answer-1"))
        assert (again.status_code, again.headers[REPLAYED]) == (200, "true")
        assert again.content == first.content
        unkeyed = client.post(url, json={"decision": "allow"})
        assert_problem(unkeyed, 409, "approval_not_pending")
        ended = follow(client, sid, after=asked["seq"])
        assert ended[-1]["type"] == "turn.completed"
        resolved = [e for e in ended if e["type"] == "approval.resolved"]
        assert len(resolved) == 1


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("k" * 256, "longer than 255 characters"),
        ("two words", "a space"),
        ("ключ".encode(), "not ASCII"),
        ("", "empty"),
    ],
)
def test_a_bad_key_is_refused_before_anything_runs(
    gateway: FakeGateway, key: str | bytes, why: str
) -> None:
    with gateway.client() as client:
        sid = new_session(client, gateway)
        raw = key.encode() if isinstance(key, str) else key
        response = client.post(
            f"/v1/sessions/{sid}/turns", json={"prompt": "hi"}, headers={b"Idempotency-Key": raw}
        )
        problem = assert_problem(response, 422, "validation_failed")
        assert [e["location"] for e in problem["errors"]] == ["header.Idempotency-Key"], why
        assert turns_of(client, sid) == []


def test_a_request_a_killed_gateway_left_unanswered_runs_again_after_its_restart(
    tmp_path: Path, migrated_database: Path
) -> None:
    gateway = fake_gateway_in(tmp_path, migrated_database).start()
    body = {"workspace": str(gateway.workspace), "prompt": "steps:50:1:1:0"}
    try:
        with gateway.client() as client:
            cut: list[BaseException] = []

            def run() -> None:
                with gateway.client() as own:
                    try:
                        own.post("/v1/runs", json=body, headers=keyed("run-k"))
                    except httpx.TransportError as exc:
                        cut.append(exc)

            first = threading.Thread(target=run)
            first.start()
            wait_until(lambda: client.get("/v1/sessions").json()["sessions"], what="the run")
            assert_problem(
                client.post("/v1/runs", json=body, headers=keyed("run-k")),
                409,
                "idempotency_key_in_use",
            )
            assert gateway.process is not None
            gateway.process.kill()
            first.join(timeout=30)
            assert cut  # the first copy never got an answer
            gateway.stop()
        gateway.start()
        with gateway.client() as client:
            short = {**body, "prompt": "steps:1:1:1:0"}
            # Another body: the key was forgotten with its unanswered request, not kept.
            again = client.post("/v1/runs", json=short, headers=keyed("run-k"))
            assert again.status_code == 200, again.text
            assert REPLAYED not in again.headers
    finally:
        gateway.stop()
