"""What replicas meet, with real gateway processes and the fake CLI on one PostgreSQL and one
Redis: Redis restarting empty ends no running turn; an owner paused past the TTL is fenced
out when it wakes (its CLI killed at once, nothing more written) and the session goes on at
the replica that adopted it; a command for a replica that died adopts its session instead
of waiting out the timeout.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import httpx

from tests.dbservers import RedisServer
from tests.fakes.gateway import FakeGateway
from tests.gateway import SseReader, is_turn_end, metric, scrape
from tests.integration.callers import create
from tests.integration.cliprocs import alive, descendants
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


def delta(frame: Any) -> bool:
    return frame.event is None and is_delta(frame.json())


def one_end_per_turn(client: httpx.Client, sid: str) -> None:
    """Every turn's end is told once, as its row says; the seqs have no gap."""
    events = stored(client, sid)
    assert contiguous(1, events)
    ends = {e["turn_id"]: e["type"] for e in events if is_turn_end(e)}
    assert len(ends) == len([e for e in events if is_turn_end(e)])
    turns = client.get(f"/v1/sessions/{sid}/turns").json()["turns"]
    assert {t["id"]: f"turn.{t['status']}" for t in turns} == ends


def test_redis_restarted_empty_mid_turn_ends_no_turn(
    replicas: dict[str, FakeGateway], redis_server: RedisServer
) -> None:
    a, b = (replicas[name].start() for name in ("gw-a", "gw-b"))
    with a.client() as on_a, b.client() as on_b:
        sid = create(on_a, a)
        start_turn(on_a, sid, "slow")
        with on_a.stream("GET", f"/v1/sessions/{sid}/events", headers=sse_headers(0)) as r:
            reader = SseReader(r)
            seen = envelopes(read_frames(reader, delta))
            redis_server.stop()
            redis_server.start()  # empty: no key of the cluster survives
            restarted = time.monotonic()
            # Twice the TTL (3 s) with Redis empty: A streams on, nobody takes the turn over.
            seen += envelopes(
                read_frames(
                    reader,
                    lambda f: is_end(f) or (delta(f) and time.monotonic() > restarted + 6),
                )
            )
            assert seen[-1]["type"] == "message.delta", seen[-1]
            # A command through B reaches A: connections Redis closed are replaced.
            interrupted = wait_until(
                lambda: (r := on_b.post(f"/v1/sessions/{sid}/interrupt")).status_code != 503 and r,
                timeout=20,
                what="an interrupt through B answered once Redis is back",
            )
            assert interrupted.status_code == 202, interrupted.text
            seen += envelopes(read_frames(reader, is_end))
        assert seen[-1]["type"] == "turn.interrupted"  # ended by the client, not replica_lost
        assert "replica_lost" not in str(stored(on_b, sid))
        assert on_b.get(f"/v1/sessions/{sid}").json()["owner"] == "gw-a"
        held = scrape(on_a)
        assert metric(held, "agent_gateway_cluster_sessions_held") == 1
        assert metric(scrape(on_b), "agent_gateway_cluster_adoptions_total") == 0
        start_turn(on_b, sid, "hi")
        assert turn_events(on_b, sid, after=seen[-1]["seq"])[-1]["type"] == "turn.completed"
        one_end_per_turn(on_b, sid)


def test_an_owner_paused_past_its_ttl_is_fenced_out_when_it_wakes(
    replicas: dict[str, FakeGateway],
) -> None:
    a, b = (replicas[name].start() for name in ("gw-a", "gw-b"))
    assert a.process is not None
    with a.client() as on_a, b.client() as on_b:
        sid = create(on_a, a)
        start_turn(on_a, sid, "slow")
        with on_b.stream("GET", f"/v1/sessions/{sid}/events", headers=sse_headers(0)) as r:
            reader = SseReader(r)
            live = envelopes(read_frames(reader, delta))
            cli = a.spawns()[-1]["pid"]
            frozen = [a.process.pid, *descendants(a.process.pid)]
            assert cli in frozen
            for pid in frozen:  # A and its CLI frozen, as a paused VM or container is
                os.kill(pid, signal.SIGSTOP)
            try:
                live += envelopes(read_frames(reader, is_end))  # B adopts after the TTL
            finally:
                for pid in frozen:
                    os.kill(pid, signal.SIGCONT)
        assert live[-1]["type"] == "turn.failed"
        assert live[-1]["data"]["error"]["reason"] == "replica_lost"
        wait_until(lambda: not alive(cli), timeout=10, what="A killing its CLI once awake")
        wait_until(
            lambda: "claimed by another replica" in a.log(),
            timeout=10,
            what="A noticing it was fenced out",
        )
        start_turn(on_b, sid, "hi")
        assert turn_events(on_b, sid, after=live[-1]["seq"])[-1]["type"] == "turn.completed"
        assert on_a.get(f"/v1/sessions/{sid}").json()["owner"] == "gw-b"
        one_end_per_turn(on_a, sid)  # A wrote nothing after it was fenced
        assert metric(scrape(on_b), "agent_gateway_cluster_adoptions_total") == 1
        assert metric(scrape(on_a), "agent_gateway_cluster_sessions_held") == 0


def test_a_turn_for_a_session_whose_owner_died_adopts_it_instead_of_timing_out(
    replicas: dict[str, FakeGateway],
) -> None:
    a, b = (replicas[name].start() for name in ("gw-a", "gw-b"))
    assert a.process is not None
    with a.client() as on_a, b.client() as on_b:
        sid = create(on_a, a)
        start_turn(on_a, sid, "hi")
        first = turn_events(on_a, sid)
        a.process.send_signal(signal.SIGKILL)  # A holds the session, idle, and dies
        a.process.wait(timeout=10)
        # Forwarded to A, which never takes it: once A has been silent for the TTL the
        # command is cancelled there and B adopts the session (command_timeout_s is 10 s).
        started = on_b.post(f"/v1/sessions/{sid}/turns", json={"prompt": "hi"})
        assert started.status_code == 202, started.text
        assert turn_events(on_b, sid, after=first[-1]["seq"])[-1]["type"] == "turn.completed"
        assert on_b.get(f"/v1/sessions/{sid}").json()["owner"] == "gw-b"
        one_end_per_turn(on_b, sid)
        counted = scrape(on_b)
        gone = {"op": "start_turn", "outcome": "owner_gone"}
        assert metric(counted, "agent_gateway_cluster_forwarded_total", **gone) == 1
