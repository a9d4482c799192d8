"""Subscribers on a replica that does not run the session get the same delivery as the
owner's: two real gateway processes on one PostgreSQL and one Redis, the session run by one
and followed on the other. A subscriber there that stops reading is evicted for lag, one that
reads gets every event once and in order, and each live hand-over is measured."""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.dbservers import PostgresServer, RedisServer
from tests.fakes.gateway import FakeGateway
from tests.gateway import SseReader, metric, scrape
from tests.integration.callers import create
from tests.integration.replicas import first_turn_on, two_replicas
from tests.integration.streams import (
    AUTH,
    contiguous,
    envelopes,
    is_end,
    parse_sse,
    read_frames,
    small_window_socket,
    sse_headers,
    start_turn,
    stored,
)

MAX_LAG = 1000
LAG_SAMPLES = "agent_gateway_event_delivery_lag_seconds_count"


@pytest.fixture
def replicas(
    tmp_path: Path, postgres: PostgresServer, redis_server: RedisServer
) -> Iterator[dict[str, FakeGateway]]:
    """Replicas gw-a and gw-b (not started): small subscriber queues, a lag limit, no delta
    joining (each delta its own event)."""
    with two_replicas(
        tmp_path,
        postgres,
        redis_server,
        limits={"subscriber_max_lag_events": MAX_LAG},
        server={"subscriber_queue_size": 10, "coalesce_deltas_ms": 0},
    ) as made:
        yield made


class _SmallWindow(http.client.HTTPConnection):
    """A client whose socket advertises a tiny receive window, so that once it stops
    reading, the gateway's writes to it back up after a few dozen kilobytes."""

    def connect(self) -> None:
        self.sock = small_window_socket(self.host, self.port)


def read_to_end(
    connection: http.client.HTTPConnection, response: http.client.HTTPResponse, timeout_s: float
) -> str:
    """The rest of a stream that must end within ``timeout_s`` (a stream left open, kept alive
    by heartbeats, fails the test instead of hanging it)."""
    with ThreadPoolExecutor(1) as pool:
        reading = pool.submit(response.read)
        try:
            return reading.result(timeout=timeout_s).decode()
        finally:
            if connection.sock is not None:
                connection.sock.shutdown(socket.SHUT_RDWR)
            connection.close()


def test_a_subscriber_on_another_replica_that_stops_reading_is_evicted_as_a_local_one_is(
    replicas: dict[str, FakeGateway],
) -> None:
    a, b = (replicas[name].start() for name in ("gw-a", "gw-b"))
    with a.client() as on_a, b.client() as on_b:
        sid = create(on_a, a)
        after = first_turn_on(on_b, sid)
        assert on_a.get(f"/v1/sessions/{sid}").json()["owner"] == "gw-b"
        path = f"/v1/sessions/{sid}/events"
        stalled = _SmallWindow("127.0.0.1", a.port, timeout=30)
        stalled.request("GET", path, headers={**AUTH, **sse_headers(after)})
        stalled_response = stalled.getresponse()  # registered on A; from now on, not read
        assert stalled_response.status == 200
        with on_a.stream("GET", path, headers=sse_headers(after)) as reading:
            # B's CLI prints 2,500 deltas a second: a reader on A that keeps up stays within
            # the lag limit, the stalled one falls thousands behind.
            start_turn(on_b, sid, "deltas:5000@2500")
            live = envelopes(read_frames(SseReader(reading), is_end))
        everything = stored(on_b, sid, after)
        assert live[-1]["type"] == "turn.completed"
        assert contiguous(after + 1, live)
        assert live == everything  # every event once, in order, no control frame
        newest = everything[-1]["seq"]

        # The stalled client reads again: what was sent, then `evicted` (lagging), the end.
        frames = parse_sse(read_to_end(stalled, stalled_response, timeout_s=60))
        assert frames[-1].event == "evicted"
        sent = envelopes(frames[:-1])
        assert json.loads(frames[-1].data) == {
            "type": "evicted",
            "last_seq_sent": sent[-1]["seq"],
            "reason": "lagging",
        }
        assert contiguous(after + 1, sent)
        assert sent[-1]["seq"] < newest - MAX_LAG
        assert sent + stored(on_a, sid, sent[-1]["seq"]) == everything  # nothing lost
    assert "evicted" in a.log()


def test_deliveries_on_another_replica_are_measured_one_sample_per_hand_over(
    replicas: dict[str, FakeGateway],
) -> None:
    a, b = (replicas[name].start() for name in ("gw-a", "gw-b"))
    with a.client() as on_a, b.client() as on_b:
        sid = create(on_a, a)
        after = first_turn_on(on_b, sid)
        before = scrape(on_a)
        with on_a.stream("GET", f"/v1/sessions/{sid}/events", headers=sse_headers(after)) as r:
            # Ten deltas a second: each stored, published and mirrored on its own, reaching
            # a reader on A that waits for it.
            start_turn(on_b, sid, "deltas:20@10")
            live = envelopes(read_frames(SseReader(r), is_end))
        grew = metric(scrape(on_a), LAG_SAMPLES, transport="sse") - metric(
            before, LAG_SAMPLES, transport="sse"
        )
        assert live == stored(on_b, sid, after)
    assert grew >= len(live) // 2, (grew, len(live))
