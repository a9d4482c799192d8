"""Event delivery to subscribers, against a real gateway process with the fake ``claude``:
a client dropped mid-stream resumes without gap or duplicate (R1), a cursor older than what is
kept gets 410 or an explicit resync (R2), subscriber caps (T13), and a subscriber that stops
reading is evicted, explicitly, and loses nothing (R8)."""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from websockets.client import ClientProtocol
from websockets.exceptions import InvalidStatus
from websockets.frames import Close, Frame, Opcode
from websockets.http11 import Response
from websockets.sync.client import connect as ws_connect
from websockets.uri import parse_uri

from tests.fakes.gateway import FakeGateway, FakeGatewayFactory
from tests.gateway import SseReader, is_turn_end
from tests.integration.callers import PROBLEM, create
from tests.integration.streams import (
    AUTH,
    contiguous,
    database,
    envelopes,
    is_delta,
    is_end,
    last_seq,
    parse_sse,
    read_frames,
    seqs,
    small_window_socket,
    sse_headers,
    start_turn,
    stored,
    wait_until,
    ws_frames,
    ws_url,
)

# --- R1: a client dropped mid-stream resumes without gap or duplicate -------------------------


def test_r1_sse_client_dropped_mid_stream_resumes_from_last_event_id(
    fake_gateway: FakeGateway,
) -> None:
    gateway = fake_gateway
    with gateway.client() as client:
        sid = create(client, gateway)
        start_turn(client, sid, "slow")
        with client.stream("GET", f"/v1/sessions/{sid}/events", headers=sse_headers()) as r:
            reader = SseReader(r)
            first = envelopes(read_frames(reader, lambda f: is_delta(f.json())))
            first += envelopes(read_frames(reader, lambda f: is_delta(f.json())))
        # The socket is closed; the CLI goes on streaming into the store.
        k = first[-1]["seq"]
        missed = 10
        wait_until(lambda: last_seq(client, sid) >= k + missed, what="the missed events")
        with client.stream("GET", f"/v1/sessions/{sid}/events", headers=sse_headers(k)) as r:
            reader = SseReader(r)
            resumed = envelopes(read_frames(reader, lambda f: int(f.id or 0) >= k + missed))
            head = last_seq(client, sid)
            resumed += envelopes(read_frames(reader, lambda f: int(f.id or 0) > head))  # live
            assert client.post(f"/v1/sessions/{sid}/interrupt").status_code == 202
            resumed += envelopes(read_frames(reader, is_end))
    assert contiguous(1, first)
    assert contiguous(k + 1, resumed), seqs(resumed)
    assert resumed[-1]["type"] == "turn.interrupted"
    with gateway.client() as client:
        assert first + resumed == stored(client, sid)[: len(first + resumed)]


def test_r1_websocket_client_dropped_mid_stream_resumes_from_after(
    fake_gateway: FakeGateway,
) -> None:
    gateway = fake_gateway
    with gateway.client() as client:
        sid = create(client, gateway)
        with ws_connect(ws_url(gateway, sid), additional_headers=AUTH) as ws:
            ws.send(json.dumps({"type": "turn.start", "prompt": "slow"}))
            first = ws_frames(ws, is_delta)
            first += ws_frames(ws, is_delta)
        first = [f for f in first if "seq" in f]  # without the command's ack
        k = first[-1]["seq"]
        missed = 10
        wait_until(lambda: last_seq(client, sid) >= k + missed, what="the missed events")
        with ws_connect(ws_url(gateway, sid, after=k), additional_headers=AUTH) as ws:
            resumed = ws_frames(ws, lambda f: f["seq"] >= k + missed)
            head = last_seq(client, sid)
            resumed += ws_frames(ws, lambda f: f["seq"] > head)  # live
            ws.send(json.dumps({"type": "turn.interrupt"}))
            resumed += ws_frames(ws, lambda f: f.get("type") == "turn.interrupted")
        resumed = [f for f in resumed if "seq" in f]
        assert contiguous(1, first)
        assert contiguous(k + 1, resumed), seqs(resumed)
        assert first + resumed == stored(client, sid)[: len(first + resumed)]


# --- R2: a cursor older than what is kept -----------------------------------------------------


def test_r2_a_cursor_older_than_the_kept_events_is_410_or_an_explicit_resync(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    # One event per delta: 400 deltas must overflow the 100 kept.
    gateway = make_fake_gateway(
        storage={"max_events_per_session": 100}, server={"coalesce_deltas_ms": 0}
    ).start()
    with gateway.client() as client:
        sid = create(client, gateway)
        start_turn(client, sid, "deltas:400")
        with client.stream("GET", f"/v1/sessions/{sid}/events", headers=sse_headers()) as r:
            read_frames(SseReader(r), is_end)
        with sqlite3.connect(database(gateway)) as db:
            (first_seq, count) = db.execute(
                "SELECT min(seq), count(*) FROM events WHERE session_id = ?", (sid,)
            ).fetchone()
        kept = stored(client, sid, after=first_seq - 1)
        newest = kept[-1]["seq"]
        assert newest > 400
        assert contiguous(first_seq, kept)
        assert newest == last_seq(client, sid)
        assert 100 <= count < 120  # pruned in batches, never below the cap

        page = client.get(f"/v1/sessions/{sid}/events", params={"after": 0})
        assert page.status_code == 410, page.text
        assert page.headers["content-type"] == PROBLEM
        problem = page.json()
        assert problem["type"].endswith(":cursor_expired")
        assert problem["first_seq"] == first_seq
        assert f"after={first_seq - 1}" in problem["detail"]
        ok = client.get(f"/v1/sessions/{sid}/events", params={"after": first_seq - 1})
        assert ok.status_code == 200
        assert ok.json()["events"][0]["seq"] == first_seq

        with client.stream("GET", f"/v1/sessions/{sid}/events", headers=sse_headers(5)) as r:
            frames = read_frames(SseReader(r), lambda f: f.id == str(newest))
        assert frames[0].event == "resync_required"
        assert json.loads(frames[0].data) == {
            "type": "resync_required",
            "first_seq": first_seq,
            "after": 5,
        }
        assert frames[0].id == str(first_seq - 1)  # Last-Event-ID moves past the gap
        assert envelopes(frames[1:]) == kept

        with ws_connect(ws_url(gateway, sid, after=5), additional_headers=AUTH) as ws:
            received = ws_frames(ws, lambda f: f.get("seq") == newest)
        assert received[0] == {"type": "resync_required", "first_seq": first_seq, "after": 5}
        assert received[1:] == kept


# --- T13: subscriber caps ---------------------------------------------------------------------


def test_t13_subscriber_caps_per_session_429_and_in_all_503(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    gateway = make_fake_gateway(
        limits={"max_subscribers_per_session": 2, "max_subscribers": 3}
    ).start()
    with gateway.client() as client:
        a, b, c = (create(client, gateway) for _ in range(3))

        def open_sse(sid: str) -> tuple[httpx.Client, httpx.Response]:
            own = gateway.client()
            request = own.build_request("GET", f"/v1/sessions/{sid}/events", headers=sse_headers())
            return own, own.send(request, stream=True)

        def assert_refused(response: httpx.Response, status: int, slug: str) -> None:
            assert response.status_code == status, response.text
            assert response.headers["content-type"] == PROBLEM
            assert response.json()["type"].endswith(":" + slug)
            assert int(response.headers["retry-after"]) >= 1

        def assert_ws_refused(sid: str, status: int) -> None:
            with pytest.raises(InvalidStatus) as refused:
                ws_connect(ws_url(gateway, sid), additional_headers=AUTH)
            assert refused.value.response.status_code == status
            assert int(refused.value.response.headers["retry-after"]) >= 1

        open_streams = [open_sse(a), open_sse(a)]
        assert all(r.status_code == 200 for _, r in open_streams)
        sse = client.get(f"/v1/sessions/{a}/events", headers=sse_headers())
        assert_refused(sse, 429, "rate_limited")
        assert_ws_refused(a, 429)

        with ws_connect(ws_url(gateway, b), additional_headers=AUTH) as third:
            assert json.loads(third.recv(timeout=10))["seq"] == 1
            assert_refused(
                client.get(f"/v1/sessions/{c}/events", headers=sse_headers()), 503, "at_capacity"
            )
            assert_ws_refused(c, 503)
            assert client.get(f"/v1/sessions/{c}/events").status_code == 200  # pages are free

        def can_open(sid: str) -> bool:
            with client.stream("GET", f"/v1/sessions/{sid}/events", headers=sse_headers()) as r:
                return r.status_code == 200

        own, response = open_streams.pop()
        response.close()
        own.close()
        # The slot is given back once the server has seen the disconnect.
        wait_until(lambda: can_open(a), what="the slot of the closed stream")
        for own, response in open_streams:
            response.close()
            own.close()


# --- R8: a slow subscriber is evicted, explicitly, and loses nothing --------------------------


class _SmallWindow(http.client.HTTPConnection):
    """A client whose socket advertises a tiny receive window, so that once it stops
    reading, the gateway's writes to it back up after a few dozen kilobytes."""

    def connect(self) -> None:
        self.sock = small_window_socket(self.host, self.port)


class StalledWebSocket:
    """A WebSocket client on a small-window socket that reads nothing until told to."""

    def __init__(self, url: str, port: int) -> None:
        self.sock = small_window_socket("127.0.0.1", port)
        self.protocol = ClientProtocol(parse_uri(url))
        request = self.protocol.connect()
        request.headers.update(AUTH)
        self.protocol.send_request(request)
        self._flush()
        while not any(isinstance(e, Response) for e in self.protocol.events_received()):
            self._feed(self.sock.recv(4096))
        assert self.protocol.handshake_exc is None, self.protocol.handshake_exc

    def _flush(self) -> None:
        for data in self.protocol.data_to_send():
            if data:
                self.sock.sendall(data)

    def _feed(self, data: bytes) -> None:
        if data:
            self.protocol.receive_data(data)
        else:
            self.protocol.receive_eof()
        self._flush()

    def read_to_close(self) -> tuple[list[dict[str, Any]], Close]:
        """Every text frame until the server's close frame, which is returned too."""
        texts: list[dict[str, Any]] = []
        while True:
            for event in self.protocol.events_received():
                if isinstance(event, Frame) and event.opcode is Opcode.TEXT:
                    texts.append(json.loads(bytes(event.data)))
                elif isinstance(event, Frame) and event.opcode is Opcode.CLOSE:
                    return texts, Close.parse(event.data)
            self._feed(self.sock.recv(65536))

    def __enter__(self) -> StalledWebSocket:
        return self

    def __exit__(self, *_: object) -> None:
        self.sock.close()


def test_r8_a_subscriber_that_stops_reading_is_evicted_and_loses_nothing(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    # The CLI prints 2,500 deltas a second (a fast model), which a reader that keeps up follows
    # within the lag limit; the stalled readers fall thousands behind.
    gateway = make_fake_gateway(
        limits={"subscriber_max_lag_events": 1000},
        server={"subscriber_queue_size": 10, "coalesce_deltas_ms": 0},
    ).start()
    with gateway.client() as client, contextlib.ExitStack() as stack:
        sid = create(client, gateway)
        path = f"/v1/sessions/{sid}/events"
        stalled_sse = _SmallWindow("127.0.0.1", gateway.port, timeout=30)
        stalled_sse.request("GET", path, headers={**AUTH, **sse_headers(0)})
        stalled_response = stalled_sse.getresponse()  # registered; from now on, not read
        assert stalled_response.status == 200
        stalled_ws = stack.enter_context(StalledWebSocket(ws_url(gateway, sid), gateway.port))
        with (
            client.stream("GET", path, headers=sse_headers(0)) as normal,
            ws_connect(ws_url(gateway, sid), additional_headers=AUTH) as normal_ws,
        ):
            start_turn(client, sid, "deltas:5000@2500")
            with ThreadPoolExecutor(1) as reader:  # both normal subscribers read as it comes
                reading_ws = reader.submit(ws_frames, normal_ws, is_turn_end)
                everything = envelopes(read_frames(SseReader(normal), is_end))
                everything_ws = reading_ws.result(timeout=60)
        newest = everything[-1]["seq"]
        assert contiguous(1, everything)  # the normal subscribers got every event, no frame
        assert everything_ws == everything
        assert everything[-1]["type"] == "turn.completed"

        # The stalled SSE client reads again: what was sent, then `evicted`, then the end.
        frames = parse_sse(stalled_response.read().decode())
        stalled_sse.close()
        assert frames[-1].event == "evicted"
        evicted = json.loads(frames[-1].data)
        sent = envelopes(frames[:-1])
        assert evicted == {"type": "evicted", "last_seq_sent": sent[-1]["seq"], "reason": "lagging"}
        assert contiguous(1, sent)
        assert sent[-1]["seq"] < newest - 1000
        with client.stream("GET", path, headers=sse_headers(sent[-1]["seq"])) as again:
            rest = envelopes(read_frames(SseReader(again), lambda f: f.id == str(newest)))
        assert sent + rest == everything

        # The stalled WebSocket reads again: its frames, then `evicted`, then a 4000 close.
        received, close = stalled_ws.read_to_close()
        assert close.code == 4000
        assert "evicted" in close.reason
        evicted = received.pop()
        assert evicted == {
            "type": "evicted",
            "last_seq_sent": received[-1]["seq"],
            "reason": "lagging",
        }
        assert contiguous(1, received)
        assert received[-1]["seq"] < newest - 1000
        with ws_connect(
            ws_url(gateway, sid, after=received[-1]["seq"]), additional_headers=AUTH
        ) as again_ws:
            rest_ws = ws_frames(again_ws, lambda f: f["seq"] == newest)
        assert received + rest_ws == everything
    assert "evicted" in gateway.log()


# --- live events written straight to the socket keep each connection's framing ---------------


def test_an_http_1_0_sse_client_gets_plain_sse_and_an_http_1_1_one_chunks(
    fake_gateway: FakeGateway,
) -> None:
    """Live batches are written to the socket by the publisher (app/connections.py); an
    HTTP/1.0 response has no chunks, so its events go through the response as h11 frames it."""
    with fake_gateway.client() as client:
        sid = create(client, fake_gateway)
        bodies = {}
        sockets = {}
        for version in ("1.0", "1.1"):
            sock = socket.create_connection(("127.0.0.1", fake_gateway.port), timeout=30)
            head = [
                f"GET /v1/sessions/{sid}/events HTTP/{version}",
                f"Host: 127.0.0.1:{fake_gateway.port}",
                "Accept: text/event-stream",
                *(f"{k}: {v}" for k, v in AUTH.items()),
            ]
            sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
            received = b""
            while b": connected" not in received:  # subscribed and streaming
                received += sock.recv(65536)
            sockets[version], bodies[version] = sock, received
        start_turn(client, sid, "deltas:200")
        for version, sock in sockets.items():
            while b'"turn.completed"' not in bodies[version]:
                data = sock.recv(65536)
                assert data, "the stream ended before the turn did"
                bodies[version] += data
            sock.close()
        expected = [e["seq"] for e in stored(client, sid)]

    response_head, body = bodies["1.0"].split(b"\r\n\r\n", 1)
    assert b"transfer-encoding" not in response_head.lower()
    fields = (b"data:", b"id:", b":", b"retry:", b"event:")
    assert all(not line or line.startswith(fields) for line in body.split(b"\n"))  # no sizes
    plain = parse_sse(body.decode())
    assert [int(f.id) for f in plain if f.id] == expected

    response_head, body = bodies["1.1"].split(b"\r\n\r\n", 1)
    assert b"transfer-encoding: chunked" in response_head.lower()
    text, rest = b"", body
    while rest:  # every byte of the body is inside a well-formed chunk
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        assert rest[size : size + 2] == b"\r\n"
        text, rest = text + rest[:size], rest[size + 2 :]
    chunked = parse_sse(text.decode())
    assert [int(f.id) for f in chunked if f.id] == expected
