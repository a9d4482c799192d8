"""Replicas trust only one another: a command pushed into Redis by anyone without the cluster
secret does nothing (no session closed, no CLI started, no approval or question resolved, no
turn interrupted) and is logged; a signed command runs as the key it names, exactly as that
key's own request would (another key's session is 404, an admin action needs an admin key);
replicas without a secret do not start; an unexpected error on the owner reaches the client
as an error id, never as the exception's text."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.cluster.commands import Command, Issuer, Signer, encode_command
from tests.dbservers import PostgresServer, RedisServer
from tests.fakes.gateway import FakeGateway
from tests.gateway import CLUSTER_SECRET, SseReader, metric, scrape
from tests.integration.callers import ALICE, BOB, KEYS, assert_problem
from tests.integration.replicas import two_replicas
from tests.integration.streams import (
    envelopes,
    is_end,
    read_frames,
    sse_headers,
    start_turn,
    wait_until,
)


@pytest.fixture
def replicas(
    tmp_path: Path, postgres: PostgresServer, redis_server: RedisServer
) -> Iterator[dict[str, FakeGateway]]:
    """gw-a and gw-b, started, with the keys alice and bob besides the admin token."""
    with two_replicas(tmp_path, postgres, redis_server, server=KEYS) as made:
        for gateway in made.values():
            gateway.start()
        yield made


def keyed(gateway: FakeGateway, token: str) -> httpx.Client:
    return httpx.Client(
        base_url=gateway.base_url, headers={"Authorization": f"Bearer {token}"}, timeout=30
    )


def wait_for(client: httpx.Client, sid: str, kind: str) -> dict[str, Any]:
    """The first event of ``kind`` in the session's stream."""
    with client.stream("GET", f"/v1/sessions/{sid}/events", headers=sse_headers(0)) as r:
        frames = read_frames(SseReader(r), lambda f: f.event is None and f.json()["type"] == kind)
    return envelopes(frames)[-1]


def refusals(gateway: FakeGateway) -> int:
    return gateway.log().count("refused a forwarded command from Redis")


def push(redis_server: RedisServer, replica: str, raw: bytes) -> None:
    redis_server.command("RPUSH", f"agw:commands:{replica}", raw)


def signed(op: str, args: dict[str, Any], issuer: Issuer, *, command_id: str) -> bytes:
    """A command as a replica holding the cluster secret sends it for ``issuer``."""
    now = time.time()
    command = Command(
        id=command_id, op=op, args=args, issuer=issuer, to="gw-a", issued_at=now, deadline=now + 10
    )
    return Signer([CLUSTER_SECRET.encode()]).seal("command", encode_command(command, str))


def answer_to(redis_server: RedisServer, command_id: str) -> dict[str, Any]:
    """The owner's answer to a command the test sent (its signature is the owner's)."""
    reply = redis_server.command("BLPOP", f"agw:answer:{command_id}", "10", timeout=15)
    assert isinstance(reply, list), "no answer from the owner"
    sealed = reply[1]
    assert isinstance(sealed, bytes)
    body: dict[str, Any] = json.loads(sealed.split(b".", 2)[2])
    return body


def test_commands_pushed_into_redis_without_the_secret_do_nothing(
    replicas: dict[str, FakeGateway], redis_server: RedisServer
) -> None:
    a, b = replicas["gw-a"], replicas["gw-b"]
    with keyed(a, ALICE) as alice:
        asking = alice.post("/v1/sessions", json={"workspace": str(a.workspace)}).json()["id"]
        start_turn(alice, asking, "ask:touch asked.txt")
        approval_id = wait_for(alice, asking, "approval.requested")["data"]["approval_id"]
        questioning = alice.post("/v1/sessions", json={"workspace": str(a.workspace)}).json()["id"]
        start_turn(alice, questioning, "question:Proceed?")
        question_id = wait_for(alice, questioning, "question.asked")["data"]["question_id"]
        idle = alice.post("/v1/sessions", json={"workspace": str(a.workspace)}).json()["id"]
        start_turn(alice, idle, "hi")
        wait_for(alice, idle, "turn.completed")
        assert {alice.get(f"/v1/sessions/{s}").json()["owner"] for s in (asking, idle)} == {"gw-a"}
        spawned = len(a.spawns())

        forged: list[dict[str, Any]] = [
            {"op": "delete", "args": {"session_id": idle, "owner": None}},
            {"op": "start_turn", "args": {"session_id": idle, "prompt": "ask:rm -rf x"}},
            {
                "op": "respond",
                "args": {
                    "session_id": asking,
                    "approval_id": approval_id,
                    "decision": "allow",
                    "message": None,
                    "updated_input": {"command": "touch pwned.txt"},
                    "by": "admin",
                    "owner": None,
                },
            },
            {
                "op": "answer_question",
                "args": {
                    "session_id": questioning,
                    "question_id": question_id,
                    "answers": [{"selected": ["Yes"]}],
                    "by": "admin",
                    "owner": None,
                },
            },
            {"op": "interrupt", "args": {"session_id": asking, "owner": None}},
        ]
        for n, command in enumerate(forged):
            body = {**command, "id": f"forged{n}", "deadline": time.time() + 30}
            push(redis_server, "gw-a", json.dumps(body).encode())
        wait_until(lambda: refusals(a) == len(forged), what="the forged commands refused")

        assert alice.get(f"/v1/sessions/{idle}").json()["status"] == "idle"  # not closed
        assert len(alice.get(f"/v1/sessions/{idle}/turns").json()["turns"]) == 1
        assert len(a.spawns()) == spawned  # no CLI started
        approvals = alice.get(f"/v1/sessions/{asking}/approvals").json()["approvals"]
        assert [x["status"] for x in approvals] == ["pending"]
        questions = alice.get(f"/v1/sessions/{questioning}/questions").json()["questions"]
        assert [x["status"] for x in questions] == ["pending"]
        assert alice.get(f"/v1/sessions/{asking}").json()["status"] == "awaiting_approval"
        assert not (a.workspace / "pwned.txt").exists()
        logged = [line for line in a.log().splitlines() if "refused a forwarded" in line]
        assert all("touch pwned" not in line and approval_id not in line for line in logged)
    with a.client() as admin:
        samples = scrape(admin)
        assert metric(samples, "agent_gateway_cluster_refused_total", reason="unsigned") == 5

    with keyed(b, ALICE) as alice_on_b:  # the replicas' own, signed commands still work
        allowed = alice_on_b.post(
            f"/v1/sessions/{asking}/approvals/{approval_id}", json={"decision": "allow"}
        )
        assert allowed.status_code == 200, allowed.text
        with alice_on_b.stream("GET", f"/v1/sessions/{asking}/events", headers=sse_headers(0)) as r:
            done = envelopes(read_frames(SseReader(r), is_end))
        assert done[-1]["data"]["final_text"] == "ran: touch asked.txt"


def test_a_signed_command_runs_as_the_key_it_names_and_no_wider(
    replicas: dict[str, FakeGateway], redis_server: RedisServer
) -> None:
    a, b = replicas["gw-a"], replicas["gw-b"]
    with keyed(a, ALICE) as alice, keyed(b, BOB) as bob_on_b:
        sid = alice.post("/v1/sessions", json={"workspace": str(a.workspace)}).json()["id"]
        start_turn(alice, sid, "hi")
        wait_for(alice, sid, "turn.completed")
        assert alice.get(f"/v1/sessions/{sid}").json()["owner"] == "gw-a"

        for answer in (  # bob through B, as locally: not his session
            bob_on_b.post(f"/v1/sessions/{sid}/turns", json={"prompt": "hi"}),
            bob_on_b.post(f"/v1/sessions/{sid}/interrupt"),
            bob_on_b.delete(f"/v1/sessions/{sid}"),
        ):
            assert_problem(answer, 404, "not_found")

        bob = Issuer(name="bob", admin=False)  # a replica forwarding bob's request
        push(
            redis_server,
            "gw-a",
            signed("delete", {"session_id": sid, "owner": None}, bob, command_id="as-bob"),
        )
        assert answer_to(redis_server, "as-bob")["error"]["status"] == 404
        assert alice.get(f"/v1/sessions/{sid}").json()["status"] == "idle"

        alice_issuer = Issuer(name="alice", admin=False)
        push(
            redis_server,
            "gw-a",
            signed("delete", {"session_id": sid}, alice_issuer, command_id="as-alice"),
        )
        assert answer_to(redis_server, "as-alice")["result"]["status"] == "closed"

        other = alice.post("/v1/sessions", json={"workspace": str(a.workspace)}).json()["id"]
        start_turn(alice, other, "hi")
        wait_for(alice, other, "turn.completed")
        admin = Issuer(name="admin", admin=True)  # an admin key reaches every session
        push(
            redis_server,
            "gw-a",
            signed("delete", {"session_id": other}, admin, command_id="as-admin"),
        )
        assert answer_to(redis_server, "as-admin")["result"]["status"] == "closed"
    assert refusals(a) == 0


def test_replicas_without_a_cluster_secret_do_not_start(
    tmp_path: Path, postgres: PostgresServer, redis_server: RedisServer
) -> None:
    with two_replicas(tmp_path, postgres, redis_server) as made:
        gateway = made["gw-a"]
        del gateway.config["cluster"]["secret"]
        gateway.data_dir.mkdir(parents=True, exist_ok=True)
        refused = gateway.command("serve", check=False)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "cluster.secret" in refused.stderr
    assert "openssl rand -hex 32" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_an_unexpected_error_on_the_owner_reaches_the_client_as_an_id_only(
    replicas: dict[str, FakeGateway], postgres: PostgresServer
) -> None:
    a, b = replicas["gw-a"], replicas["gw-b"]
    with a.client() as on_a, b.client() as on_b:
        sid = on_a.post("/v1/sessions", json={"workspace": str(a.workspace)}).json()["id"]
        start_turn(on_a, sid, "hi")
        wait_for(on_a, sid, "turn.completed")
        # A row no request could have written: the owner fails on it unexpectedly.
        database = str(a.config["storage"]["url"]).rsplit("/", 1)[1]
        assert re.fullmatch(r"[A-Za-z0-9_]+", sid)
        postgres.psql(f"UPDATE sessions SET retry = '[1]' WHERE id = '{sid}'", database)  # noqa: S608
        ids = []
        for client in (on_b, on_a):  # forwarded to A, and on A itself
            failed = client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "hi"})
            problem = assert_problem(failed, 500, "internal")
            error_id = problem["error_id"]
            assert problem["detail"].startswith(f"internal error, id {error_id}")
            assert "object has no attribute" not in failed.text
            assert "list" not in problem["detail"]
            ids.append(error_id)
    assert len(set(ids)) == 2
    for error_id in ids:  # the owner's log holds what happened, under the id
        logged = [line for line in a.log().splitlines() if error_id in line]
        assert len(logged) == 1, a.log()[-3000:]
        assert "object has no attribute" in logged[0]
