"""Several replicas on one PostgreSQL and one Redis, each a real gateway process with the fake
CLI: any replica serves any session (commands reach the replica running it, events reach
subscribers on every replica), and a replica killed mid-turn has its sessions adopted.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import httpx

from tests.dbservers import RedisServer
from tests.fakes.gateway import FakeGateway
from tests.gateway import SseReader
from tests.integration.callers import create
from tests.integration.streams import (
    contiguous,
    envelopes,
    is_delta,
    is_end,
    read_frames,
    sse_headers,
    start_turn,
    stored,
    turn_events,
    wait_until,
)


def test_any_replica_serves_any_session_and_streams_reach_every_replica(
    replicas: dict[str, FakeGateway],
) -> None:
    a, b = (replicas[name].start() for name in ("gw-a", "gw-b"))
    with a.client() as on_a, b.client() as on_b:
        sid = create(on_a, a)
        assert on_a.get(f"/v1/sessions/{sid}").json()["owner"] is None  # nothing runs it yet
        start_turn(on_b, sid, "hi")  # B takes the session and runs its CLI
        first = turn_events(on_a, sid)  # followed on A, through Redis and the store
        assert first[-1]["type"] == "turn.completed"
        assert on_a.get(f"/v1/sessions/{sid}").json()["owner"] == "gw-b"
        assert on_b.get(f"/v1/sessions/{sid}").json()["process"] is not None
        assert on_a.get(f"/v1/sessions/{sid}").json()["process"] is None

        start_turn(on_a, sid, "slow")  # forwarded to B, which runs it
        with on_a.stream("GET", f"/v1/sessions/{sid}/events", headers=sse_headers(0)) as r:
            reader = SseReader(r)
            live = envelopes(read_frames(reader, lambda f: seqs_past(f, first[-1]["seq"])))
            busy = on_a.post(f"/v1/sessions/{sid}/turns", json={"prompt": "hi"})
            assert busy.status_code == 409, busy.text  # B's answer, as if local
            assert busy.json()["type"].endswith(":turn_in_progress")
            assert on_a.post(f"/v1/sessions/{sid}/interrupt").status_code == 202
            live += envelopes(read_frames(reader, is_end))
        assert live[-1]["type"] == "turn.interrupted"
        everything = stored(on_b, sid)
        assert contiguous(1, everything)
        assert live == everything  # A's stream: every event once, in order
        assert stored(on_a, sid) == everything
        missing = on_a.post("/v1/sessions/ses_0000/turns", json={"prompt": "hi"})
        assert missing.status_code == 404


def typed(frame: Any, kind: str) -> bool:
    return frame.event is None and frame.json()["type"] == kind


def seqs_past(frame: Any, seq: int) -> bool:
    return frame.event is None and frame.json()["seq"] > seq and is_delta(frame.json())


def test_an_approval_answered_on_another_replica_reaches_the_one_running_the_turn(
    replicas: dict[str, FakeGateway],
) -> None:
    a, b = (replicas[name].start() for name in ("gw-a", "gw-b"))
    with a.client() as on_a, b.client() as on_b:
        sid = create(on_b, b)
        start_turn(on_a, sid, "ask:touch approved.txt")  # A runs it
        with on_b.stream("GET", f"/v1/sessions/{sid}/events", headers=sse_headers(0)) as r:
            reader = SseReader(r)
            asked = envelopes(
                read_frames(
                    reader, lambda f: f.event is None and f.json()["type"] == "approval.requested"
                )
            )
            approval_id = asked[-1]["data"]["approval_id"]
            answer = on_b.post(
                f"/v1/sessions/{sid}/approvals/{approval_id}", json={"decision": "allow"}
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["status"] == "allowed"
            again = on_b.post(
                f"/v1/sessions/{sid}/approvals/{approval_id}", json={"decision": "deny"}
            )
            assert again.status_code == 409, again.text  # A's answer: no longer pending
            done = envelopes(read_frames(reader, is_end))
        assert done[-1]["type"] == "turn.completed"
        assert done[-1]["data"]["final_text"] == "ran: touch approved.txt"
        assert on_a.get(f"/v1/sessions/{sid}").json()["owner"] == "gw-a"


def test_a_question_answered_on_another_replica_reaches_the_one_running_the_turn(
    replicas: dict[str, FakeGateway],
) -> None:
    a, b = (replicas[name].start() for name in ("gw-a", "gw-b"))
    with a.client() as on_a, b.client() as on_b:
        sid = create(on_b, b)
        start_turn(on_a, sid, "question:Proceed?")  # A runs it
        with on_b.stream("GET", f"/v1/sessions/{sid}/events", headers=sse_headers(0)) as r:
            reader = SseReader(r)
            asked = envelopes(read_frames(reader, lambda f: typed(f, "question.asked")))
            url = f"/v1/sessions/{sid}/questions/{asked[-1]['data']['question_id']}"
            refused = on_b.post(url, json={"answers": [{"selected": ["Maybe"]}]})
            assert refused.status_code == 422, refused.text  # checked where the question waits
            answer = on_b.post(url, json={"answers": [{"selected": ["Yes"]}]})
            assert answer.status_code == 200, answer.text
            assert answer.json()["status"] == "answered"
            again = on_b.post(url, json={"answers": [{"selected": ["No"]}]})
            assert again.status_code == 409, again.text
            done = envelopes(read_frames(reader, is_end))
        assert done[-1]["type"] == "turn.completed"
        assert done[-1]["data"]["final_text"] == 'answered: {"Proceed?": "Yes"}'


def test_a_replica_killed_mid_turn_has_its_session_adopted_and_the_turn_ended_once(
    replicas: dict[str, FakeGateway],
) -> None:
    a, b = (replicas[name].start() for name in ("gw-a", "gw-b"))
    with a.client() as on_a:
        sid = create(on_a, a)
        start_turn(on_a, sid, "hi")
        first = turn_events(on_a, sid)
        thread = on_a.get(f"/v1/sessions/{sid}").json()["thread_id"]
        assert thread
    with b.client() as on_b:
        start_turn(on_b, sid, "slow")  # forwarded to A
        with on_b.stream(
            "GET", f"/v1/sessions/{sid}/events", headers=sse_headers(first[-1]["seq"])
        ) as r:
            reader = SseReader(r)
            live = envelopes(read_frames(reader, lambda f: f.event is None and is_delta(f.json())))
            assert a.process is not None
            a.process.send_signal(signal.SIGKILL)  # the owner is lost, with its CLI's pipe
            a.process.wait(timeout=10)
            live += envelopes(read_frames(reader, is_end))  # B adopts and ends the turn
        failed = live[-1]
        assert failed["type"] == "turn.failed"
        assert failed["data"]["error"]["kind"] == "interrupted"
        assert failed["data"]["error"]["reason"] == "replica_lost"
        everything = stored(on_b, sid)
        assert contiguous(1, everything)  # no gap, no seq twice
        assert [e["type"] for e in everything].count("turn.failed") == 1
        assert everything[len(first) :] == live
        turn = on_b.get(f"/v1/sessions/{sid}/turns/{failed['turn_id']}").json()
        assert turn["status"] == "failed"
        session = wait_until(
            lambda: (s := on_b.get(f"/v1/sessions/{sid}").json())["status"] == "idle" and s,
            what="the adopted session to be idle",
        )
        assert session["owner"] == "gw-b"  # adopted and ended; B runs it from now on
        start_turn(on_b, sid, "hi")  # the next turn resumes the thread, on B
        nxt = turn_events(on_b, sid, after=everything[-1]["seq"])
        assert nxt[-1]["type"] == "turn.completed"
        assert on_b.get(f"/v1/sessions/{sid}").json()["thread_id"] == thread
        assert on_b.get(f"/v1/sessions/{sid}").json()["owner"] == "gw-b"
    assert f"--resume={thread}" in b.spawns()[-1]["argv"]  # B's CLI, on A's thread


def test_without_redis_the_owner_keeps_running_and_the_others_answer_503_until_it_is_back(
    replicas: dict[str, FakeGateway], redis_server: RedisServer
) -> None:
    a, b = (replicas[name].start() for name in ("gw-a", "gw-b"))
    with a.client() as on_a, b.client() as on_b:
        sid = create(on_a, a)
        start_turn(on_a, sid, "slow")  # A runs it
        with on_a.stream("GET", f"/v1/sessions/{sid}/events", headers=sse_headers(0)) as r:
            reader = SseReader(r)
            seen = envelopes(read_frames(reader, lambda f: f.event is None and is_delta(f.json())))
            redis_server.stop()
            try:
                for answer in (
                    on_b.post(f"/v1/sessions/{sid}/turns", json={"prompt": "hi"}),
                    on_b.post(f"/v1/sessions/{sid}/interrupt"),
                ):
                    assert answer.status_code == 503, answer.text
                    assert answer.json()["type"].endswith(":cluster_unavailable")
                    assert int(answer.headers["retry-after"]) >= 1
                # A goes on streaming and storing its session's events meanwhile.
                mark = seen[-1]["seq"] + 5
                seen += envelopes(read_frames(reader, lambda f: seqs_past(f, mark)))
                assert on_a.post(f"/v1/sessions/{sid}/interrupt").status_code == 202
                seen += envelopes(read_frames(reader, is_end))
            finally:
                redis_server.start()
        assert seen[-1]["type"] == "turn.interrupted"
        assert stored(on_b, sid) == seen  # nothing lost, nothing twice

        def started_from_b() -> bool:
            return on_b.post(f"/v1/sessions/{sid}/turns", json={"prompt": "hi"}).status_code == 202

        wait_until(started_from_b, what="a turn started through B once Redis is back")
        after = turn_events(on_b, sid, after=seen[-1]["seq"])
        assert after[-1]["type"] == "turn.completed"
        assert contiguous(1, stored(on_a, sid))


def test_limits_are_counted_once_across_replicas(replicas: dict[str, FakeGateway]) -> None:
    for gateway in replicas.values():
        gateway.config["limits"] = {
            "session_creates_per_minute": 3,
            "auth_failures_per_minute": 4,
            "max_open_sessions_per_key": 100,
        }
    a, b = (replicas[name].start() for name in ("gw-a", "gw-b"))
    with a.client() as on_a, b.client() as on_b:
        body = {"workspace": str(a.workspace)}
        answers = [client.post("/v1/sessions", json=body) for client in (on_a, on_b, on_a, on_b)]
        assert [r.status_code for r in answers] == [201, 201, 201, 429], answers[-1].text
        assert answers[-1].json()["limit"] == "session_creates_per_minute"
    bad = {"Authorization": "Bearer " + "x" * 40}
    statuses = [
        httpx.get(gateway.base_url + "/v1/sessions", headers=bad).status_code
        for gateway in (a, b, a, b, a)
    ]
    assert statuses == [401, 401, 401, 401, 429]


def test_an_approval_pending_on_a_killed_replica_expires_on_the_adopter(
    replicas: dict[str, FakeGateway],
) -> None:
    a, b = (replicas[name].start() for name in ("gw-a", "gw-b"))
    with a.client() as on_a, b.client() as on_b:
        sid = create(on_a, a)
        start_turn(on_a, sid, "ask:touch never.txt")  # A runs it and asks
        with on_b.stream("GET", f"/v1/sessions/{sid}/events", headers=sse_headers(0)) as r:
            reader = SseReader(r)
            asked = envelopes(read_frames(reader, lambda f: typed(f, "approval.requested")))
            approval_id = asked[-1]["data"]["approval_id"]
            assert a.process is not None
            a.process.send_signal(signal.SIGKILL)
            a.process.wait(timeout=10)
            ended = envelopes(read_frames(reader, is_end))
        resolved = [e for e in ended if e["type"] == "approval.resolved"]
        assert [(e["data"]["approval_id"], e["data"]["reason"]) for e in resolved] == [
            (approval_id, "replica_lost")
        ]
        assert ended[-1]["type"] == "turn.failed"
        assert ended[-1]["data"]["error"]["reason"] == "replica_lost"
        approvals = on_b.get(f"/v1/sessions/{sid}/approvals").json()["approvals"]
        assert [(x["id"], x["status"]) for x in approvals] == [(approval_id, "expired")]
        late = on_b.post(f"/v1/sessions/{sid}/approvals/{approval_id}", json={"decision": "allow"})
        assert late.status_code == 409, late.text
        assert not (a.workspace / "never.txt").exists()


def test_a_replica_stopped_gracefully_hands_its_sessions_back_at_once(
    replicas: dict[str, FakeGateway],
) -> None:
    a, b = (replicas[name].start() for name in ("gw-a", "gw-b"))
    with b.client() as on_b:
        sid = create(on_b, b)
        with a.client() as on_a:
            start_turn(on_a, sid, "slow")  # A runs it
            with on_b.stream("GET", f"/v1/sessions/{sid}/events", headers=sse_headers(0)) as r:
                reader = SseReader(r)
                read_frames(reader, lambda f: typed(f, "message.delta"))
                assert a.stop() == 0  # SIGTERM: the turn ends, the lease goes back, exit 0
                ended = envelopes(read_frames(reader, is_end))
        assert ended[-1]["type"] == "turn.interrupted"
        assert on_b.get(f"/v1/sessions/{sid}").json()["owner"] is None  # not after a TTL
        start_turn(on_b, sid, "hi")
        assert turn_events(on_b, sid, after=ended[-1]["seq"])[-1]["type"] == "turn.completed"
        assert on_b.get(f"/v1/sessions/{sid}").json()["owner"] == "gw-b"


def test_a_revert_asked_on_another_replica_runs_on_the_one_holding_the_session(
    replicas: dict[str, FakeGateway],
) -> None:
    """The replicas share the workspace and the snapshot store; a revert is a command like
    a turn: refused on any replica while the owner runs a turn, run by the owner otherwise,
    and its note reaches the owner's next prompt."""
    a, b = (replicas[name].start() for name in ("gw-a", "gw-b"))
    workspace = a.workspace
    (workspace / "kept.txt").write_text("as it was\n")
    with a.client() as on_a, b.client() as on_b:
        sid = create(on_a, a)
        start_turn(on_b, sid, "run:echo changed > kept.txt && echo new > new.txt")  # B runs it
        first = turn_events(on_a, sid)
        assert first[-1]["type"] == "turn.completed"
        assert first[-1]["data"]["changes"]["files"] == 2
        first_turn = first[-1]["turn_id"]

        start_turn(on_a, sid, "slow")  # forwarded to B
        with on_a.stream("GET", f"/v1/sessions/{sid}/events", headers=sse_headers(0)) as r:
            reader = SseReader(r)
            read_frames(reader, lambda f: seqs_past(f, first[-1]["seq"]))
            busy = on_a.post(f"/v1/sessions/{sid}/revert", json={"to_turn": first_turn})
            assert busy.status_code == 409, busy.text  # B's answer: its turn runs
            assert busy.json()["type"].endswith(":turn_in_progress")
            assert on_a.post(f"/v1/sessions/{sid}/interrupt").status_code == 202
            read_frames(reader, is_end)
        assert (workspace / "new.txt").exists()

        reverted = on_a.post(f"/v1/sessions/{sid}/revert", json={"to_turn": first_turn})
        assert reverted.status_code == 200, reverted.text
        assert {(f["path"], f["status"]) for f in reverted.json()["files"]} == {
            ("kept.txt", "modified"),
            ("new.txt", "deleted"),
        }
        assert (workspace / "kept.txt").read_text() == "as it was\n"
        assert not (workspace / "new.txt").exists()
        assert on_a.get(f"/v1/sessions/{sid}").json()["owner"] == "gw-b"
        assert "reverted to the start of turn 1" in b.log()  # run by B, not by A
        assert "reverted to the start of turn" not in a.log()
        told = [e for e in stored(on_a, sid) if e["type"] == "session.reverted"]
        assert [e["data"]["to_turn"] for e in told] == [first_turn]

        start_turn(on_a, sid, "hello")  # B again, told what was undone
        assert turn_events(on_b, sid, after=told[0]["seq"])[-1]["type"] == "turn.completed"
    prompts = Path(f"{a.spawn_log}.prompts").read_text().splitlines()
    last = json.loads(prompts[-1])["prompt"]
    assert last.startswith("[Note from the gateway: the user reverted the workspace")
    assert last.endswith("\n\nhello")


def test_a_configure_asked_on_another_replica_runs_on_the_one_holding_the_session(
    replicas: dict[str, FakeGateway],
) -> None:
    """A change of model is a command like a turn: the owner closes its idle CLI, and its
    next turn starts the CLI again with the new model, in the same thread."""
    a, b = (replicas[name].start() for name in ("gw-a", "gw-b"))
    with a.client() as on_a, b.client() as on_b:
        sid = create(on_a, a)
        start_turn(on_b, sid, "hello")  # B runs it
        first = turn_events(on_a, sid)
        assert first[-1]["type"] == "turn.completed"
        thread = on_a.get(f"/v1/sessions/{sid}").json()["thread_id"]

        changed = on_a.patch(f"/v1/sessions/{sid}", json={"model": "opus"})

        assert changed.status_code == 200, changed.text
        assert (changed.json()["model"], changed.json()["owner"]) == ("opus", "gw-b")
        assert f"session {sid} configured" in b.log()  # run by B, not by A
        assert f"session {sid} configured" not in a.log()
        told = [e for e in stored(on_b, sid) if e["type"] == "session.configured"]
        assert [e["data"]["model"] for e in told] == ["opus"]

        start_turn(on_a, sid, "again")
        assert turn_events(on_b, sid, after=told[0]["seq"])[-1]["type"] == "turn.completed"
    argv = a.spawns()[-1]["argv"]  # the replicas share the fake's spawn log
    assert argv[argv.index("--model") + 1] == "opus"
    assert f"--resume={thread}" in argv
    assert len(a.spawns()) == 2
