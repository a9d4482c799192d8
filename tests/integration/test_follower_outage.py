"""Subscribers on a replica that does not run the session, while Redis is away: two real
gateway processes on one PostgreSQL and one Redis, the session run by one (which keeps running
it and storing its events without Redis) and followed on the other over SSE and a WebSocket.
They are told once (``degraded``), get every event from the store meanwhile, once and in
order, and are told again when the events come live (``recovered``)."""

from __future__ import annotations

import json
from typing import Any

from websockets.sync.client import connect as ws_connect

from tests.dbservers import RedisServer
from tests.fakes.gateway import FakeGateway
from tests.gateway import SseEvent, SseReader, is_turn_end
from tests.integration.callers import create
from tests.integration.replicas import first_turn_on
from tests.integration.streams import (
    AUTH,
    contiguous,
    envelopes,
    is_delta,
    is_end,
    read_frames,
    sse_headers,
    start_turn,
    stored,
    ws_frames,
    ws_url,
)

DEGRADED = {"type": "degraded", "reason": "redis_unreachable", "poll_ms": 2000}
RECOVERED = {"type": "recovered"}


def named(name: str) -> Any:
    def stop(frame: SseEvent) -> bool:
        return frame.event == name

    return stop


def ws_events(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [frame for frame in frames if "seq" in frame]


def test_followers_are_told_of_a_redis_outage_and_fed_from_the_store_until_it_ends(
    replicas: dict[str, FakeGateway], redis_server: RedisServer
) -> None:
    a, b = (replicas[name].start() for name in ("gw-a", "gw-b"))
    with a.client() as on_a, b.client() as on_b:
        sid = create(on_a, a)
        after = first_turn_on(on_b, sid)  # B runs the session from now on
        path = f"/v1/sessions/{sid}/events"
        with (
            on_a.stream("GET", path, headers=sse_headers(after)) as response,
            ws_connect(ws_url(a, sid, after=after), additional_headers=AUTH) as ws,
        ):
            sse = SseReader(response)
            start_turn(on_b, sid, "deltas:120@10")  # twelve seconds of deltas
            frames = read_frames(sse, lambda f: f.event is None and is_delta(f.json()))
            redis_server.stop()
            try:
                # B goes on storing the turn's events; A reads them from the store.
                frames += read_frames(sse, named("degraded"))
                frames += read_frames(sse, is_end)
                during = envelopes(frames[[f.event for f in frames].index("degraded") :])
                assert during[-1]["type"] == "turn.completed"
                assert len(during) >= 10, len(during)  # the owner kept appending
            finally:
                redis_server.start()
            frames += read_frames(sse, named("recovered"))
            # Redis restarted empty moves no session: B still holds it, under the same claim.
            assert b.log().count(f"holding session {sid} ") == 1
            start_turn(on_b, sid, "deltas:5@10")  # live again, through Redis
            frames += read_frames(sse, is_end)
            received = ws_frames(ws, lambda f: is_turn_end(f) and f["seq"] > during[-1]["seq"])
        everything = stored(on_b, sid, after)
        assert everything[-1]["type"] == "turn.completed"
        assert contiguous(after + 1, everything)

        # SSE: every event once and in order, one degraded frame before the events read from
        # the store, one recovered frame once Redis answered again.
        assert envelopes(frames) == everything
        controls = [(f.event, json.loads(f.data)) for f in frames if f.event is not None]
        assert controls == [("degraded", DEGRADED), ("recovered", RECOVERED)]
        # The WebSocket: the same, as control frames of their own.
        assert ws_events(received) == everything
        assert [f for f in received if "seq" not in f] == [DEGRADED, RECOVERED]
        kinds = [f.get("type") if "seq" not in f else "event" for f in received]
        assert kinds.index("degraded") < kinds.index("recovered")
    log = a.log()
    assert log.count("redis unreachable: ") == 1
    assert log.count("redis reachable again after ") == 1
    assert '"exc"' not in log  # no traceback
    assert b.log().count("redis unreachable: ") == 1
    assert "could not publish events" not in b.log()
