"""Event delivery, storage faults and the server's lifecycle, against the real gateway.

Each test is named after the item of the threat model it proves (R1, R2, R3, R8, R9, R11,
R12, R13, T13). The gateway runs as a child process with the fake ``claude`` (or, for the
churn test, in this process on a real socket, so its file descriptors and tasks can be
counted); SQLite is a real, migrated file.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import logging
import os
import resource
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from websockets.client import ClientProtocol
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.frames import Close, Frame, Opcode
from websockets.http11 import Response
from websockets.sync.client import ClientConnection
from websockets.sync.client import connect as ws_connect
from websockets.uri import parse_uri

from app.main import create_app
from app.runtime.eventlog import EventLog
from app.settings import Settings
from app.store.schema import upgrade_async
from tests.gateway import TOKEN, SseEvent, SseReader, is_turn_end
from tests.gateway import wait_until as poll_until
from tests.integration.conftest import FAKE_CLAUDE, FakeGateway, FakeGatewayFactory

AUTH = {"Authorization": f"Bearer {TOKEN}"}
PROBLEM = "application/problem+json"


# --- helpers ----------------------------------------------------------------------------------


wait_until = partial(poll_until, timeout=20.0)


def new_session(client: httpx.Client, gateway: FakeGateway) -> str:
    response = client.post("/v1/sessions", json={"workspace": str(gateway.workspace)})
    assert response.status_code == 201, response.text
    session_id: str = response.json()["id"]
    return session_id


def start_turn(client: httpx.Client, sid: str, prompt: str) -> str:
    response = client.post(f"/v1/sessions/{sid}/turns", json={"prompt": prompt})
    assert response.status_code == 202, response.text
    turn_id: str = response.json()["id"]
    return turn_id


def last_seq(client: httpx.Client, sid: str) -> int:
    value: int = client.get(f"/v1/sessions/{sid}").json()["last_seq"]
    return value


def stored(client: httpx.Client, sid: str, after: int = 0) -> list[dict[str, Any]]:
    """Every stored event after ``after``, paging through the JSON API."""
    events: list[dict[str, Any]] = []
    while True:
        page = client.get(f"/v1/sessions/{sid}/events", params={"after": after, "limit": 1000})
        assert page.status_code == 200, page.text
        batch = page.json()["events"]
        events += batch
        if not batch:
            return events
        after = batch[-1]["seq"]


def sse_headers(after: int | None = None) -> dict[str, str]:
    headers = {"Accept": "text/event-stream"}
    if after is not None:
        headers["Last-Event-ID"] = str(after)
    return headers


def read_frames(frames: Iterator[SseEvent], stop: Callable[[SseEvent], bool]) -> list[SseEvent]:
    """SSE messages up to and including the first one ``stop`` accepts."""
    seen: list[SseEvent] = []
    for frame in frames:
        seen.append(frame)
        if stop(frame):
            return seen
    raise AssertionError(f"stream ended early after {[(f.event, f.id) for f in seen]}")


def envelopes(frames: list[SseEvent]) -> list[dict[str, Any]]:
    """The event envelopes among SSE messages (control frames have an ``event:`` name)."""
    out = []
    for frame in frames:
        if frame.event is None:
            envelope = frame.json()
            assert frame.id == str(envelope["seq"])
            out.append(envelope)
    return out


class RetryRecordingReader(SseReader):
    """An ``SseReader`` that also records every ``retry:`` hint it reads."""

    def __init__(self, response: httpx.Response) -> None:
        super().__init__(response)
        self.retries: list[str] = []

        def lines() -> Iterator[str]:
            for line in response.iter_lines():
                if line.startswith("retry:"):
                    self.retries.append(line.partition(":")[2].strip())
                yield line

        self._lines = lines()


def is_end(frame: SseEvent) -> bool:
    return frame.event is None and is_turn_end(frame.json())


def seqs(events: list[dict[str, Any]]) -> list[int]:
    return [e["seq"] for e in events]


def contiguous(first: int, events: list[dict[str, Any]]) -> bool:
    return seqs(events) == list(range(first, first + len(events)))


def ws_url(gateway: FakeGateway, sid: str, after: int | None = None) -> str:
    query = "" if after is None else f"?after={after}"
    return f"{gateway.ws_url}/v1/sessions/{sid}/ws{query}"


def ws_frames(ws: ClientConnection, stop: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
    """Frames up to and including the first one ``stop`` accepts."""
    seen: list[dict[str, Any]] = []
    while True:
        frame = json.loads(ws.recv(timeout=20))
        seen.append(frame)
        if stop(frame):
            return seen


def recv_until_closed(ws: ClientConnection) -> tuple[list[dict[str, Any]], Close]:
    """Every frame until the server closes the connection, and its close frame."""
    frames: list[dict[str, Any]] = []

    def receive_all() -> None:
        while True:
            frames.append(json.loads(ws.recv(timeout=20)))

    with pytest.raises(ConnectionClosed) as closed:
        receive_all()
    assert closed.value.rcvd is not None, "closed without a close frame"
    return frames, closed.value.rcvd


def is_delta(envelope: dict[str, Any]) -> bool:
    return envelope.get("type") == "message.delta"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(") ", 1)[1][0] != "Z"


def database(gateway: FakeGateway) -> Path:
    return gateway.data_dir / "gateway.db"


# --- R1: a client dropped mid-stream resumes without gap or duplicate -------------------------


def test_r1_sse_client_dropped_mid_stream_resumes_from_last_event_id(
    fake_gateway: FakeGateway,
) -> None:
    gateway = fake_gateway
    with gateway.client() as client:
        sid = new_session(client, gateway)
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
        sid = new_session(client, gateway)
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
    gateway = make_fake_gateway(storage={"max_events_per_session": 100}).start()
    with gateway.client() as client:
        sid = new_session(client, gateway)
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
        a, b, c = (new_session(client, gateway) for _ in range(3))

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


def small_window_socket(host: str, port: int) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 536)
    sock.settimeout(30)
    sock.connect((host, port))
    return sock


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


def parse_sse(text: str) -> list[SseEvent]:
    frames = []
    for block in text.split("\n\n"):
        fields: dict[str, list[str]] = {}
        for line in block.splitlines():
            if line and not line.startswith(":"):
                name, _, value = line.partition(":")
                fields.setdefault(name, []).append(value.removeprefix(" "))
        if "data" in fields:
            frames.append(
                SseEvent(
                    id=fields.get("id", [None])[-1],
                    event=fields.get("event", [None])[-1],
                    data="\n".join(fields["data"]),
                )
            )
    return frames


def test_r8_a_subscriber_that_stops_reading_is_evicted_and_loses_nothing(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    # The CLI prints 2,500 deltas a second (a fast model), which a reader that keeps up follows
    # within the lag limit; the stalled readers fall thousands behind.
    gateway = make_fake_gateway(
        limits={"subscriber_max_lag_events": 1000}, server={"subscriber_queue_size": 10}
    ).start()
    with gateway.client() as client, contextlib.ExitStack() as stack:
        sid = new_session(client, gateway)
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


# --- R13: graceful shutdown -------------------------------------------------------------------


def test_r13_sigterm_ends_streams_with_frames_interrupts_turns_and_exits_promptly(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    grace_s = 10.0
    gateway = make_fake_gateway(server={"shutdown_grace_s": grace_s}).start()
    assert gateway.process is not None
    with gateway.client() as client:
        sid = new_session(client, gateway)
        turn_id = start_turn(client, sid, "slow")
        with (
            client.stream("GET", f"/v1/sessions/{sid}/events", headers=sse_headers()) as stream,
            ws_connect(ws_url(gateway, sid), additional_headers=AUTH) as ws,
        ):
            reader = RetryRecordingReader(stream)
            read_frames(reader, lambda f: f.event is None and is_delta(f.json()))
            ws_frames(ws, is_delta)
            cli_pid = client.get(f"/v1/sessions/{sid}").json()["process"]["pid"]
            signalled = time.monotonic()
            gateway.process.send_signal(signal.SIGTERM)

            tail = read_frames(reader, lambda f: f.event == "shutdown")
            assert list(reader) == []  # and the stream ends
            ended_after = time.monotonic() - signalled
            shutdown = tail[-1]
            assert json.loads(shutdown.data) == {
                "type": "shutdown",
                "reason": "gateway_shutdown",
                "retry_ms": 5000,
            }
            assert reader.retries[-1] == "5000"  # the reconnection hint came with the frame
            # The turn's end was recorded and sent before the stream was closed.
            assert envelopes(tail)[-1]["type"] == "turn.interrupted"

            _, close = recv_until_closed(ws)
            assert close.code == 1012

        code = gateway.process.wait(timeout=grace_s + 10)
        exited_after = time.monotonic() - signalled
    assert code == 0
    # Liveness bounds only: far below uvicorn's graceful timeout, which open streams used to
    # hold the stop for.
    assert ended_after < grace_s / 2
    assert exited_after < grace_s
    assert not alive(cli_pid)
    assert [s["pid"] for s in gateway.spawns() if alive(s["pid"])] == []
    gateway.stop()
    wal = database(gateway).with_name("gateway.db-wal")
    assert not wal.exists() or wal.stat().st_size == 0  # checkpointed into the database
    with sqlite3.connect(database(gateway)) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)

    gateway.start()
    with gateway.client() as client:
        turn = client.get(f"/v1/sessions/{sid}/turns/{turn_id}").json()
        assert turn["status"] == "interrupted"
        assert turn["error"]["kind"] == "interrupted"
        assert turn["error"]["reason"] == "gateway_shutdown"
        events = stored(client, sid)
        assert [e["type"] for e in events if is_turn_end(e)] == ["turn.interrupted"]
        assert contiguous(1, events)
        assert client.get(f"/v1/sessions/{sid}").json()["status"] == "idle"


# --- R3: SIGKILL mid-stream -------------------------------------------------------------------


def test_r3_sigkill_mid_stream_keeps_the_database_sound_and_every_delivered_event(
    fake_gateway: FakeGateway,
) -> None:
    gateway = fake_gateway
    assert gateway.process is not None
    delivered: list[dict[str, Any]] = []
    with gateway.client() as client:
        sid = new_session(client, gateway)
        turn_id = start_turn(client, sid, "slow")
        process = gateway.process

        def read_until_killed() -> None:
            with client.stream("GET", f"/v1/sessions/{sid}/events", headers=sse_headers()) as r:
                for frame in SseReader(r):
                    delivered.append(frame.json())
                    if sum(is_delta(e) for e in delivered) == 20:
                        process.kill()  # mid-stream, while deltas are being appended

        with pytest.raises(httpx.TransportError):
            read_until_killed()
    assert sum(is_delta(e) for e in delivered) >= 20
    gateway.stop()
    with sqlite3.connect(database(gateway)) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert db.execute("PRAGMA foreign_key_check").fetchall() == []

    gateway.start()
    with gateway.client() as client:
        everything = stored(client, sid)
        assert everything[: len(delivered)] == delivered  # persisted before delivered
        with client.stream(
            "GET", f"/v1/sessions/{sid}/events", headers=sse_headers(delivered[-1]["seq"])
        ) as stream:
            resumed = envelopes(read_frames(SseReader(stream), is_end))
        assert delivered + resumed == everything  # each event once, no gap
        assert contiguous(1, everything)
        turn = client.get(f"/v1/sessions/{sid}/turns/{turn_id}").json()
        assert turn["status"] == "failed"
        assert turn["error"]["kind"] == "interrupted"
        assert turn["error"]["reason"] == "gateway_restart"
        assert [e["type"] for e in everything if is_turn_end(e)] == ["turn.failed"]


# --- R12: disk full / write errors ------------------------------------------------------------


def test_r12_a_database_that_cannot_be_written_answers_503_and_stops_the_turn(
    make_fake_gateway: FakeGatewayFactory,
) -> None:
    """The gateway may not grow any file past its current size (RLIMIT_FSIZE: writes fail
    with EFBIG, as on a full disk), then the limit is lifted again."""
    gateway = make_fake_gateway().start()
    assert gateway.process is not None
    pid = gateway.process.pid
    statuses: list[int] = []
    with gateway.client() as client:
        sid = new_session(client, gateway)
        turn_id = start_turn(client, sid, "slow")
        with client.stream("GET", f"/v1/sessions/{sid}/events", headers=sse_headers()) as r:
            reader = SseReader(r)
            delivered = envelopes(read_frames(reader, lambda f: is_delta(f.json())))
            cli_pid = client.get(f"/v1/sessions/{sid}").json()["process"]["pid"]
            files = [database(gateway), database(gateway).with_name("gateway.db-wal")]
            limit = max(f.stat().st_size for f in files if f.exists())
            soft, hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (limit, hard))
            try:

                def refused() -> httpx.Response | None:
                    response = client.post(
                        "/v1/sessions", json={"workspace": str(gateway.workspace)}
                    )
                    statuses.append(response.status_code)
                    return response if response.status_code == 503 else None

                answer = wait_until(refused, what="a 503 while the disk is full")
                assert answer.headers["content-type"] == PROBLEM
                assert answer.json()["type"].endswith(":storage_unavailable")
                assert int(answer.headers["retry-after"]) >= 1
                assert "Traceback" not in answer.text
                # The turn whose events cannot be stored stops its CLI.
                wait_until(lambda: not alive(cli_pid), what="the CLI to be stopped")
                turn_start = client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "hi"})
                statuses.append(turn_start.status_code)
                assert turn_start.status_code in (409, 503), turn_start.text
            finally:
                resource.prlimit(pid, resource.RLIMIT_FSIZE, (soft, hard))
            # Writable again: the turn's end is recorded, then sent.
            delivered += envelopes(read_frames(reader, is_end))
        assert set(statuses) <= {201, 409, 503}
        failed = delivered[-1]
        assert failed["type"] == "turn.failed"
        assert failed["data"]["error"]["reason"] == "storage_unavailable"
        everything = stored(client, sid)
        assert delivered == everything[: len(delivered)]  # nothing sent that is not stored
        assert contiguous(1, everything)
        turn = client.get(f"/v1/sessions/{sid}/turns/{turn_id}").json()
        assert turn["status"] == "failed"
        assert (
            client.post("/v1/sessions", json={"workspace": str(gateway.workspace)}).status_code
            == 201
        )
        start_turn(client, sid, "hi")
        with client.stream(
            "GET", f"/v1/sessions/{sid}/events", headers=sse_headers(everything[-1]["seq"])
        ) as r:
            assert envelopes(read_frames(SseReader(r), is_end))[-1]["type"] == "turn.completed"
    with sqlite3.connect(database(gateway)) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)


# --- R11: SQLite contention from a second process ---------------------------------------------

HAMMER = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], timeout=30, isolation_level=None)
db.execute("PRAGMA busy_timeout=30000")
db.execute("CREATE TABLE IF NOT EXISTS hammer (id INTEGER PRIMARY KEY, at REAL)")
deadline = time.monotonic() + float(sys.argv[2])
while time.monotonic() < deadline:
    db.execute("BEGIN IMMEDIATE")
    db.execute("INSERT INTO hammer (at) VALUES (?)", (time.time(),))
    time.sleep(0.02)  # hold the write lock, as a long transaction would
    db.execute("COMMIT")
    time.sleep(0.005)
"""


def test_r11_a_second_writer_on_the_database_causes_no_5xx_and_no_locked_errors(
    fake_gateway: FakeGateway,
) -> None:
    gateway = fake_gateway
    hammer = subprocess.Popen(
        [sys.executable, "-c", HAMMER, str(database(gateway)), "60"], stdout=subprocess.DEVNULL
    )
    statuses: list[int] = []
    try:
        with sqlite3.connect(database(gateway)) as db:
            wait_until(
                lambda: db.execute(
                    "SELECT count(*) FROM sqlite_master WHERE name = 'hammer'"
                ).fetchone()[0],
                what="the second writer to start",
            )
        with gateway.client() as client:
            for _ in range(2):
                created = client.post("/v1/sessions", json={"workspace": str(gateway.workspace)})
                statuses.append(created.status_code)
                sid = created.json()["id"]
                for _ in range(2):
                    after = last_seq(client, sid)
                    started = client.post(f"/v1/sessions/{sid}/turns", json={"prompt": "hi"})
                    statuses.append(started.status_code)
                    with client.stream(
                        "GET", f"/v1/sessions/{sid}/events", headers=sse_headers(after)
                    ) as r:
                        events = envelopes(read_frames(SseReader(r), is_end))
                    assert events[-1]["type"] == "turn.completed"
                    statuses.append(r.status_code)
                statuses.append(client.delete(f"/v1/sessions/{sid}").status_code)
            with sqlite3.connect(database(gateway)) as db:
                during = db.execute("SELECT count(*) FROM hammer").fetchone()[0]
    finally:
        hammer.terminate()
        hammer.wait(timeout=10)
    assert during > 20  # the other process held the write lock throughout
    assert all(status < 500 for status in statuses), statuses
    log = gateway.log()
    assert "database is locked" not in log
    assert "storage unavailable" not in log
    assert " 500 " not in log
    assert " 503 " not in log


# --- R9: subscriber churn ---------------------------------------------------------------------

CHURN_SSE = 1600
CHURN_WS = 400
CHURN_WORKERS = 40


@pytest.fixture
async def in_process_gateway(tmp_path: Path) -> AsyncIterator[tuple[str, FastAPI]]:
    """The real app under uvicorn on a real loopback socket, in this test's event loop."""
    workspace = tmp_path / "roots" / "project"
    workspace.mkdir(parents=True)
    settings = Settings(
        server={"token": TOKEN, "allow_root": True},
        storage={"data_dir": tmp_path / "data"},
        workspaces={"roots": [tmp_path / "roots"]},
        providers={
            "claude_code": {"executable": str(FAKE_CLAUDE)},
            "codex": {"enabled": False},
            "opencode": {"enabled": False},
        },
        limits={"max_subscribers_per_session": 1000},
    )
    await upgrade_async(settings.storage.database_url)
    app = create_app(settings)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    async with asyncio.timeout(20):
        # uvicorn has no awaitable for "listening"; bounded by the timeout.
        while not server.started:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
    try:
        yield f"127.0.0.1:{port}", app
    finally:
        server.should_exit = True
        await serving
        sock.close()


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


CHURN_CLIENT = """
import asyncio, json, sys
from websockets.asyncio.client import connect

address, token, sse, ws, workers = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
sessions = sys.argv[6:]
auth = {"Authorization": "Bearer " + token}


async def sse_cycle(sid):
    # Connect, read until the stream is open, hang up.
    host, port = address.split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(
        f"GET /v1/sessions/{sid}/events HTTP/1.1\\r\\nHost: {address}\\r\\n"
        f"Authorization: Bearer {token}\\r\\nAccept: text/event-stream\\r\\n\\r\\n".encode()
    )
    head = await reader.readuntil(b": connected")
    assert head.startswith(b"HTTP/1.1 200"), head[:300]
    writer.close()
    await writer.wait_closed()


async def ws_cycle(sid):
    async with connect(f"ws://{address}/v1/sessions/{sid}/ws", additional_headers=auth) as c:
        assert json.loads(await c.recv())["seq"] == 1


async def main():
    jobs = [sse_cycle] * sse + [ws_cycle] * ws
    queue = asyncio.Queue()
    for index in range(len(jobs)):
        queue.put_nowait(index)

    async def worker():
        while not queue.empty():
            index = queue.get_nowait()
            await jobs[index](sessions[index % len(sessions)])

    await asyncio.gather(*(worker() for _ in range(workers)))


asyncio.run(main())
"""


async def churn(address: str, sessions: list[str], sse: int, ws: int) -> None:
    """Open and drop ``sse`` SSE and ``ws`` WebSocket subscriptions from another process."""
    client = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        CHURN_CLIENT,
        address,
        TOKEN,
        str(sse),
        str(ws),
        str(CHURN_WORKERS),
        *sessions,
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await client.communicate()
    assert client.returncode == 0, stderr.decode()[-3000:]


async def test_r9_thousands_of_subscribers_coming_and_going_leak_nothing(
    in_process_gateway: tuple[str, FastAPI], caplog: pytest.LogCaptureFixture
) -> None:
    """SSE and WebSocket subscribers connect, start to stream and hang up, thousands of times;
    the gateway's open files, tasks and subscribers return to where they were."""
    address, app = in_process_gateway
    events: EventLog = app.state.manager.events
    async with httpx.AsyncClient(base_url=f"http://{address}", headers=AUTH) as client:
        sessions = []
        for _ in range(8):
            created = await client.post(
                "/v1/sessions",
                json={"workspace": str(Path(app.state.settings.workspaces.roots[0]) / "project")},
            )
            assert created.status_code == 201, created.text
            sessions.append(created.json()["id"])
    await churn(address, sessions, 200, 100)  # warm up: pools and caches at their size

    async def settled(fds: int, tasks: int) -> None:
        async with asyncio.timeout(20):
            # The server gives these back after each disconnect, with no event to await.
            while not (  # noqa: ASYNC110
                events.subscriber_count() == 0
                and len(asyncio.all_tasks()) <= tasks
                and open_fds() <= fds
            ):
                await asyncio.sleep(0.05)

    await settled(10_000, 10_000)
    before = (open_fds(), len(asyncio.all_tasks()))
    peak = 0

    async def sample() -> None:
        nonlocal peak
        while True:
            peak = max(peak, events.subscriber_count())
            await asyncio.sleep(0.01)

    sampler = asyncio.create_task(sample())
    await churn(address, sessions, CHURN_SSE, CHURN_WS)
    sampler.cancel()
    await settled(*before)
    assert peak > 1  # the subscribers were there, many at once
    assert events.subscriber_count() == 0
    assert open_fds() <= before[0]
    assert len(asyncio.all_tasks()) <= before[1]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
